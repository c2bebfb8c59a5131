"""Advice savings against the step without the profiler, and measured by replays
(``advise(measure=True)``, ``perfkit advise --measure``), on real torch CPU runs."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paddle_profiles import loading_thread_ids  # noqa: E402

from perfkit_core.advice.basis import recorded_events_per_step, step_basis  # noqa: E402
from perfkit_core.advice.engine import make_context  # noqa: E402
from perfkit_core.advice.loader import LOADER_BATCH_NS, loader_saving  # noqa: E402
from perfkit_core.capture.cpu_clocks import PACE_LOOPS  # noqa: E402
from perfkit_core.plugins import framework_hook  # noqa: E402


def _record(
    directory: Path, *, foreach: bool = False, fused: bool = False, blocks: int = 6
) -> tuple[Path, list]:
    """A narrow MLP trained with Adam (the per-parameter loop unless ``foreach``) under
    torch.profiler with perfkit's handler and a step timer (profiled and unprofiled steps).
    Returns (the run folder, the model's parameter shapes)."""
    torch.manual_seed(0)
    layers: list = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(16, 4))
    options = {"fused": True} if fused else {"foreach": foreach}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **options)
    folder = _train_and_profile(directory, "adam", model, optimizer, shapes=True)
    return folder, [list(p.shape) for p in model.parameters()]


def _timer_run(record: dict, **attributes: object) -> SimpleNamespace:
    """A stand-in run whose metadata holds only the step timer's ``record`` (and
    ``attributes``, such as its framework): what the loader model's cost lookups read."""
    return SimpleNamespace(meta={"step_timer": record}, **attributes)


def _train_and_profile(
    directory: Path, name: str, model, optimizer, *, shapes: bool = False
) -> Path:
    """Train ``model`` (16 features in, 4 classes out) on one fixed batch of 8, on one
    thread, under ``_profile_and_time``: 8 unprofiled steps, the recorded ones, 12 more.
    Returns the run folder."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()

    try:
        # unprofiled steps on both sides of the recorded ones: a slow spell of a shared
        # machine (about a second) then lands on some of each, not on all of one kind
        folder, _ = _profile_and_time(directory, name, step, wait=8, after=12, shapes=shapes)
    finally:
        torch.set_num_threads(threads)
    return folder


def _profile_and_time(
    directory: Path, name: str, step, *, wait: int, after: int, shapes: bool = False
) -> tuple[Path, dict]:
    """Run ``step`` under torch.profiler with perfkit's handler (``wait`` unrecorded steps, one
    warm-up, four recorded) and then ``after`` steps more, all timed by a step timer saved into
    the run. Returns (the run folder, the step timer's record)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_core
    from perfkit_torch.handler import on_trace_ready

    handler = on_trace_ready(directory, worker_name=name, background=False)
    timer = perfkit_core.step_timer(None, warmup=0)
    try:
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=wait, warmup=1, active=4, repeat=1),
            on_trace_ready=handler,
            record_shapes=shapes,
        ) as prof:
            timer.profiler = prof
            for _ in range(wait + 5):
                with timer.step():
                    step()
                prof.step()
        for _ in range(after):
            with timer.step():
                step()
        assert handler.runs, handler.failures
        timer.save(handler.runs)
    finally:
        timer.close()  # the phase timers removed whatever happened
    return handler.runs[0], timer.record()


@pytest.fixture(scope="module")
def adam_loop(tmp_path_factory):
    return _record(tmp_path_factory.mktemp("adam"))


def test_basis_takes_the_profilers_cost_per_event_out(adam_loop):
    import perfkit_core

    folder, _ = adam_loop
    run = perfkit_core.load(folder)
    ctx = make_context(run)
    basis = step_basis(ctx)
    record = json.loads((folder / "meta.json").read_text())["step_timer"]
    extra = np.median(record["profiled_ns"]) - np.median(record["unprofiled_ns"])
    assert basis.name == "unprofiled"
    assert basis.step_ns == pytest.approx(np.median(record["unprofiled_ns"]))
    # events recounted from the table: host rows inside the steps, of kinds recorded per call
    ev = run.events
    counted = ev[
        (ev["stream"] < 0)
        & (ev["step"] >= 0)
        & ev["kind"].isin(
            ["operator", "python", "user", "dataloader", "optimizer", "runtime", "memcpy"]
        )
    ]
    assert recorded_events_per_step(ctx) == pytest.approx(len(counted) / ctx.steps)
    assert basis.event_cost_ns == pytest.approx(max(extra, 0.0) / (len(counted) / ctx.steps))


def test_basis_is_the_unprofiled_step_when_the_profiled_steps_were_no_slower(adam_loop, tmp_path):
    """A loader thread that loaded ahead while the profiler started can make the profiled steps
    faster than the ones without it: savings are still stated against the step without the
    profiler, with nothing taken out as the profiler's cost, and the estimate says so."""
    import shutil

    import perfkit_core

    folder, _ = adam_loop
    copy = tmp_path / "run"
    shutil.copytree(folder, copy)
    meta = json.loads((copy / "meta.json").read_text())
    timer = meta["step_timer"]
    timer["profiled_ns"] = [7_000_000, 8_000_000, 9_000_000]
    timer["unprofiled_ns"] = [10_000_000, 12_000_000, 11_000_000, 13_000_000]
    for lists in timer.get("phases", {}).values():  # phases line up with the steps
        lists["profiled_ns"] = lists["profiled_ns"][:3] + [0] * (3 - len(lists["profiled_ns"][:3]))
        lists["unprofiled_ns"] = (lists["unprofiled_ns"] * 4)[:4]
    (copy / "meta.json").write_text(json.dumps(meta))
    basis = step_basis(make_context(perfkit_core.load(copy)))
    assert basis.name == "unprofiled"
    assert basis.step_ns == pytest.approx(11_500_000)  # the median unprofiled step
    assert basis.profiled_step_ns == pytest.approx(8_000_000)
    assert basis.event_cost_ns == 0.0
    assert basis.corrected(3e6, 100.0) == 3e6
    assert "no slower" in basis.text() and "11.50 ms" in basis.text()


def test_optimizer_saving_is_on_the_unprofiled_optimizer_time(adam_loop):
    import perfkit_core
    from perfkit_core.advice.rules.optimizer import OPTIMIZER_SPEEDUPS

    folder, shapes = adam_loop
    run = perfkit_core.load(folder)
    finding = next(f for f in run.advise() if f.id == "optimizer")
    ev = finding.evidence
    assert ev["basis"] == "unprofiled"
    assert ev["optimizer_class"] == "Adam"
    assert ev["parameter_shapes"] == shapes  # recorded shapes = the model's parameters
    # the optimizer's time without the profiler, as the step timer measured it (which of the
    # two is larger is the machine's business: no timing is asserted)
    timed = run.meta["step_timer"]["phases"]["optimizer"]["unprofiled_ns"]
    assert ev["optimizer_unprofiled_per_step_ns"] == pytest.approx(float(np.median(timed)))
    speedup = OPTIMIZER_SPEEDUPS["torch"]["Adam"]
    assert finding.saving_ns == pytest.approx(
        ev["optimizer_unprofiled_per_step_ns"] * (1 - 1 / speedup)
    )
    assert "without the profiler" in finding.estimate


def test_optimizer_rule_states_its_saving_on_the_timed_optimizer(adam_loop):
    import perfkit_core
    from perfkit_core.advice.rules.optimizer import optimizer_speedup

    folder, _ = adam_loop
    run = perfkit_core.load(folder)
    found = run.advise()
    model_view = run.summary("model").set_index("name")["per_step_ns"].to_dict()
    finding = next((f for f in found if f.id == "optimizer"), None)
    assert finding is not None, ([f.id for f in found], model_view)
    timed = np.median(run.meta["step_timer"]["phases"]["optimizer"]["unprofiled_ns"])
    assert finding.evidence["optimizer_unprofiled_from"] == "timed"
    assert finding.evidence["optimizer_unprofiled_per_step_ns"] == pytest.approx(timed)
    speedup, _ = optimizer_speedup("torch", "Adam")
    assert finding.saving_ns == pytest.approx(timed * (1 - 1 / speedup))
    assert "Timed without the profiler" in " ".join(finding.details)


def test_measure_replays_the_recorded_optimizer(adam_loop):
    import perfkit_core
    from perfkit_core.plugins import get_plugin_manager

    folder, shapes = adam_loop
    run = perfkit_core.load(folder)
    modelled = next(f for f in run.advise() if f.id == "optimizer")
    measured = next(f for f in run.advise(measure=True) if f.id == "optimizer")
    ev = measured.evidence
    assert ev["measured"] == "replay"
    assert ev["replay_option"] == "fused=True"
    # both were timed; which is faster, and by how much, is bench/bench_optimizer.py's to say
    assert ev["replay_loop_ns"] > 0 and ev["replay_remedy_ns"] > 0
    # The replay gives the remedy's speed-up; the optimizer time the step timer measured in
    # training gives what it applies to.
    timed = float(np.median(run.meta["step_timer"]["phases"]["optimizer"]["unprofiled_ns"]))
    assert ev["optimizer_unprofiled_from"] == "timed"
    assert measured.saving_ns == pytest.approx(
        timed * (1 - ev["replay_remedy_ns"] / ev["replay_loop_ns"])
    )
    # Without the timed optimizer, the replay's own difference is the saving.
    untimed = dict(measured.evidence, optimizer_unprofiled_from="corrected")
    measured.evidence = untimed
    again = framework_hook("perfkit_measure_saving", "torch", get_plugin_manager())(
        finding=measured, framework="torch"
    )
    loop_ns, remedy_ns = again["evidence"]["replay_loop_ns"], again["evidence"]["replay_remedy_ns"]
    assert again["saving_ns"] == pytest.approx(max(loop_ns - remedy_ns, 0.0))
    assert ev["modelled_saving_ns"] == pytest.approx(modelled.saving_ns)
    assert f"{len(shapes)} recorded parameter shapes" in measured.estimate
    # Only the adapter of the run's framework replays, and only what it recorded.
    pm = get_plugin_manager()
    assert (
        framework_hook("perfkit_measure_saving", "mxnet", pm)(finding=measured, framework="mxnet")
        is None
    )
    modelled.evidence["parameter_shapes"] = []
    assert (
        framework_hook("perfkit_measure_saving", "torch", pm)(finding=modelled, framework="torch")
        is None
    )


def test_torch_optimizer_without_recorded_shapes_takes_the_modules_parameters(tmp_path):
    """A torch profile without ``record_shapes=True`` has no input shapes for the optimizer's
    ops: the finding takes the parameters the handler recorded with the modules, one per call
    of the loop's per-parameter update, and ``--measure`` replays them."""
    import perfkit_core

    torch.manual_seed(0)
    layers: list = []
    for _ in range(4):
        layers += [torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(16, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    folder = _train_and_profile(tmp_path, "adam", model, optimizer, shapes=False)
    run = perfkit_core.load(folder)
    assert not run.events["input_shapes"].astype(str).str.len().gt(2).any()  # none recorded
    found = next(f for f in run.advise(measure=True) if f.id == "optimizer")
    shapes = sorted([int(d) for d in p.shape] for p in model.parameters())
    assert found.evidence["parameter_shapes_from"] == "model description"
    assert sorted(found.evidence["parameter_shapes"]) == shapes
    assert found.evidence["measured"] == "replay"
    assert f"the {len(shapes)} trainable parameter shapes recorded with the model" in (
        found.estimate
    )


@pytest.fixture(scope="module")
def paddle_adam(tmp_path_factory):
    pytest.importorskip("paddle")
    from paddle_profiles import adam_run

    return adam_run(tmp_path_factory.mktemp("paddle_adam"))


def test_paddle_measure_replays_the_parameters_recorded_with_the_model(paddle_adam):
    """Paddle's profiler records no shapes for its optimizer's ops: the optimizer finding takes
    the trainable parameters its handler recorded with the model (``model=``), as many as Adam's
    update op ran in a step, and ``--measure`` replays Paddle's Adam over them, as the
    per-parameter loop and with use_multi_tensor=True."""
    import perfkit_core
    from perfkit_core.events.schema import str_values
    from perfkit_core.plugins import get_plugin_manager

    folder, model = paddle_adam
    run = perfkit_core.load(folder)
    modelled = next(f for f in run.advise() if f.id == "optimizer")
    ev = modelled.evidence
    trainable = [[int(d) for d in p.shape] for p in model.parameters() if p.trainable]
    assert len(trainable) < len(model.parameters())  # BatchNorm's statistics are not trained
    assert ev["parameter_shapes"] == trainable
    assert ev["parameter_shapes_from"] == "model description"
    # one update op per trained parameter in a step, recounted from the events
    events = run.events
    names, kinds = str_values(events["name"]), str_values(events["kind"])
    parents = events["parent"].to_numpy()
    first = events["step"].to_numpy() == events["step"][events["step"] >= 0].min()
    outermost = np.array([p < 0 or kinds[p] != "operator" for p in parents])
    updates = (
        first & outermost & (kinds == "operator") & np.char.startswith(names.astype(str), "adam_")
    )
    assert int(updates.sum()) == len(trainable)

    measured = next(f for f in run.advise(measure=True) if f.id == "optimizer")
    m = measured.evidence
    assert m["measured"] == "replay" and m["replay_option"] == "use_multi_tensor=True"
    # both were timed; which is faster, and by how much, is bench/bench_advice.py's to say
    assert m["replay_loop_ns"] > 0 and m["replay_remedy_ns"] > 0
    # the replay gives the remedy's speed-up, the optimizer time timed in training what it
    # applies to
    timed = float(np.median(run.meta["step_timer"]["phases"]["optimizer"]["unprofiled_ns"]))
    assert m["optimizer_unprofiled_from"] == "timed"
    assert measured.saving_ns == pytest.approx(
        timed * (1 - m["replay_remedy_ns"] / m["replay_loop_ns"])
    )
    assert m["modelled_saving_ns"] == pytest.approx(modelled.saving_ns)
    assert f"the {len(trainable)} trainable parameter shapes recorded with the model" in (
        measured.estimate
    )
    # a class without a multi-tensor implementation is not replayed
    pm = get_plugin_manager()
    modelled.evidence["optimizer_class"] = "SGD"
    assert (
        framework_hook("perfkit_measure_saving", "paddle", pm)(finding=modelled, framework="paddle")
        is None
    )


def test_paddle_optimizer_without_the_model_keeps_its_model(tmp_path):
    """Without ``model=`` a Paddle run has no parameter shapes: nothing is replayed, and the
    optimizer finding keeps the model's saving under ``--measure``."""
    pytest.importorskip("paddle")
    from paddle_profiles import adam_run

    import perfkit_core

    folder, _ = adam_run(tmp_path, describe=False)
    run = perfkit_core.load(folder)
    measured = next(f for f in run.advise(measure=True) if f.id == "optimizer")
    assert measured.evidence["parameter_shapes"] == []
    assert measured.evidence["parameter_shapes_from"] == ""
    assert "measured" not in measured.evidence
    modelled = next(f for f in run.advise() if f.id == "optimizer")
    assert measured.saving_ns == modelled.saving_ns


def test_cli_advise_measure(adam_loop):
    from click.testing import CliRunner

    from perfkit_core.cli import cli

    folder, _ = adam_loop
    result = CliRunner().invoke(cli, ["advise", str(folder), "--format", "json", "--measure"])
    assert result.exit_code == 0, result.output
    findings = {f["id"]: f for f in json.loads(result.output)}
    assert findings["optimizer"]["evidence"]["measured"] == "replay"


def test_foreach_optimizer_is_told_apart_and_replayed_as_recorded(tmp_path):
    import perfkit_core

    folder, _ = _record(tmp_path, foreach=True)
    run = perfkit_core.load(folder)
    # foreach is a multi-tensor implementation: the finding, if any, names it; its ops take
    # lists of tensors, so no parameter shapes are read and nothing is replayed, and the
    # modelled speed-up (measured over the per-parameter loop) is not used
    for finding in [f for f in run.advise(measure=True) if f.id == "optimizer"]:
        assert finding.evidence["implementation"] == "foreach"
        assert "measured" not in finding.evidence
        assert "none measured" in finding.estimate


@pytest.mark.parametrize(
    ("data", "rest", "workers", "expected"),
    [
        # loading hides behind the rest of the step: all of it leaves
        (2e6, 5e6, 1, 2e6),
        # loading longer than the rest: the step becomes the loading spread over the workers
        (8e6, 2e6, 1, 2e6),
        (8e6, 2e6, 2, 10e6 - 4e6),
        (8e6, 2e6, 8, 8e6),
        # half a core free: loading takes twice as long in the worker as in the step
        (2e6, 5e6, 0.5, 2e6),
        (2e6, 1e6, 0.5, 0.0),
        # no core free: a worker only takes CPU from training
        (2e6, 5e6, 0, 0.0),
    ],
)
def test_loader_saving_is_bounded_by_the_workers(data, rest, workers, expected):
    assert loader_saving(data, rest, workers, batch_ns=0.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("data", "rest", "workers", "expected"),
    [
        # one worker: both sides pay the hand-over (1.3 ms): the shorter part less 1.3 ms leaves;
        # the rest bounds the step: 4 + 10 -> max(10 + 1.3, 4 + 1.3)
        (4e6, 10e6, 1, 2.7e6),
        # loading bounds it: 12 + 4 -> max(4 + 1.3, 12 + 1.3)
        (12e6, 4e6, 1, 2.7e6),
        # two workers share the loading and its sending: 12 + 4 -> max(5.3, 13.3 / 2)
        (12e6, 4e6, 2, 16e6 - 6.65e6),
        # a short step: handing the batch over costs more than loading in the step did
        (1e6, 1e6, 1, 0.0),
    ],
)
def test_loader_saving_pays_for_handing_each_batch_over(data, rest, workers, expected):
    assert LOADER_BATCH_NS == 1_300_000.0
    assert loader_saving(data, rest, workers) == pytest.approx(expected)


def test_each_framework_pays_its_own_loaders_hand_over():
    from perfkit_core.advice.loader import LOADER_BATCH_NS, loader_batch_cost

    assert loader_batch_cost("torch") == LOADER_BATCH_NS
    assert loader_batch_cost("paddle") == 400_000.0
    assert loader_batch_cost("an unknown framework") == LOADER_BATCH_NS


@pytest.mark.parametrize(
    ("step", "loading_cpu", "training_cpu", "ops", "expected"),
    [
        # 100 ops at 20 us: the training thread alone takes its CPU time less 2 ms, the
        # loading thread less half that; the 10 ms step holds those (2 + 3 ms) and 5 ms of waits
        (10e6, 3e6, 5e6, 100, (2e6, 3e6, 5e6)),
        # no op recorded: each thread takes its CPU time; the threads ran at once for 1 ms
        (7e6, 4e6, 4e6, 0, (4e6, 4e6, -1e6)),
        # 1000 ops at 20 us would cost the training thread more than the loading thread ran:
        # its 3 ms caps the training thread's hand-overs, the loading thread paying half
        (1e6, 3e6, 5e6, 1_000, (1.5e6, 2e6, -2.5e6)),
        # ... or the training thread's own 3 ms, were it the smaller
        (1e6, 5e6, 3e6, 1_000, (3.5e6, 0.0, -2.5e6)),
        # no CPU time in either thread: the step is all waits
        (5e6, 0.0, 0.0, 100, (0.0, 0.0, 5e6)),
    ],
)
def test_a_loading_threads_step_is_each_threads_cpu_less_the_gil_hand_overs(
    step, loading_cpu, training_cpu, ops, expected
):
    from perfkit_core.advice.loader import LOADING_OP_SHARE, THREAD_OP_NS, thread_split

    assert (THREAD_OP_NS, LOADING_OP_SHARE) == (20_000.0, 0.5)
    assert thread_split(step, loading_cpu, training_cpu, ops) == pytest.approx(expected)
    loading, rest, contention = thread_split(step, loading_cpu, training_cpu, ops)
    assert loading + rest + contention == pytest.approx(step)


@pytest.mark.parametrize(
    ("loading_cpu", "ops", "capped"),
    [(3e6, 100, False), (2e6, 100, True), (2e6, 99, False), (0.0, 0, True)],
)
def test_hand_overs_past_the_loading_threads_cpu_are_capped_at_it(loading_cpu, ops, capped):
    from perfkit_core.advice.loader import handover_exceeds_loading, handover_ns

    # 100 ops at 20 us cost the training thread 2 ms: a loading thread that ran no more than
    # that cannot be told from its hand-overs, and caps them; the loading thread pays half
    assert handover_exceeds_loading(loading_cpu, ops) is capped
    training = min(ops * 20_000.0, loading_cpu)
    assert handover_ns(loading_cpu, 10e6, ops) == (training, training / 2)


def test_the_contention_leaves_with_the_loading_thread():
    # 3 ms loading, 5 ms of the rest, 1 ms lost to the two threads contending, one worker
    # and nothing to hand over: the step falls from 9 ms to the rest's 5 ms
    assert loader_saving(3e6, 5e6, 1, 0.0, 1e6) == pytest.approx(4e6)
    assert loader_saving(3e6, 5e6, 1, 0.0, 1e6) == loader_saving(3e6, 5e6, 1, 0.0) + 1e6
    assert loader_saving(3e6, 5e6, 0, 0.0, 1e6) == 0.0  # no core free: nothing at all
    # threads that ran at once for 1 ms: the 7 ms step falls to the rest's 5 ms
    assert loader_saving(3e6, 5e6, 1, 0.0, -1e6) == pytest.approx(2e6)


def test_receiving_a_batch_costs_what_the_training_machine_timed_or_the_hand_over():
    from perfkit_core.advice.loader import (
        RECEIVE_AS_SENDING,
        RECEIVE_TIMED,
        run_loader_receive_cost,
    )

    # 3 ms loading, 5 ms rest, a 0.5 ms hand-over: each side pays it by default ...
    assert loader_saving(3e6, 5e6, 1, 0.5e6) == pytest.approx(8e6 - 5.5e6)
    # ... or the training side what receiving adds to its step; the worker still pays its own
    assert loader_saving(3e6, 5e6, 1, 0.5e6, 0.0, 0.9e6) == pytest.approx(8e6 - 5.9e6)
    assert loader_saving(5e6, 3e6, 1, 0.5e6, 0.0, 0.04e6) == pytest.approx(8e6 - 5.5e6)

    def run(record: dict) -> SimpleNamespace:
        return _timer_run(record, framework="paddle")

    # what the step timer timed beside a busy step on the machine that trained, 0 included
    assert run_loader_receive_cost(run({"loader_receive_ns": 0.8e6}), 0.5e6) == (
        0.8e6,
        RECEIVE_TIMED,
    )
    assert run_loader_receive_cost(run({"loader_receive_ns": 0}), 0.5e6) == (0.0, RECEIVE_TIMED)
    # else, or when what was saved is not a number of 0 or more, the hand-over's own cost
    for record in (
        {},
        {"loader_receive_ns": math.nan},
        {"loader_receive_ns": -1.0},
        {"loader_receive_ns": "1 ms"},
        {"loader_receive_ns": True},
    ):
        assert run_loader_receive_cost(run(record), 0.5e6) == (0.5e6, RECEIVE_AS_SENDING), record


# ------------------------------------------------------------------ closing the loop


@pytest.fixture(scope="module")
def before_after(tmp_path_factory, adam_loop):
    """A real pair: the Adam loop as a per-parameter loop (BEFORE) and fused (AFTER)."""
    folder, _ = adam_loop
    after, _ = _record(tmp_path_factory.mktemp("fused"), fused=True)
    return folder, after


def _unprofiled_steps(folder: Path) -> np.ndarray:
    """The step timer's unprofiled steps saved in ``folder``'s meta.json, without their leading
    warm-up (``events.steady.without_warmup``: on a busy machine the first steps can take
    over five times the rest, and every step average leaves them out)."""
    from perfkit_core.events.steady import without_warmup

    return without_warmup(
        json.loads((folder / "meta.json").read_text())["step_timer"]["unprofiled_ns"]
    )


def test_followup_says_promised_and_delivered(before_after):
    import perfkit_core
    from perfkit_core.advice.followup import follow_up

    before, after = (perfkit_core.load(p) for p in before_after)
    rows, figures = follow_up(before, after)
    optimizer = next(r for r in rows if r.id == "optimizer")
    promised = next(f for f in before.advise() if f.id == "optimizer").saving_ns
    assert optimizer.promised_ns == pytest.approx(promised)
    assert optimizer.acted_on and "optimizer" not in {f.id for f in after.advise()}
    # delivered: the step timer's unprofiled means, before less after, recomputed from meta
    means = [np.mean(_unprofiled_steps(p)) for p in before_after]
    assert figures["basis"] == "unprofiled"
    assert figures["delivered_ns"] == pytest.approx(means[0] - means[1])
    acted = [r for r in rows if r.acted_on]
    assert sum(r.delivered_ns for r in acted) == pytest.approx(figures["delivered_ns"])
    # its interval, recomputed with another bootstrap: the standard library's resampling
    steps = [list(_unprofiled_steps(p)) for p in before_after]
    rng = random.Random(1)
    diffs = sorted(
        statistics.fmean(rng.choices(steps[0], k=len(steps[0])))
        - statistics.fmean(rng.choices(steps[1], k=len(steps[1])))
        for _ in range(4000)
    )

    def q(share: float) -> float:
        return diffs[min(int(share * len(diffs)), len(diffs) - 1)]

    low, high = q(0.025), q(0.975)
    width = high - low
    # two bootstraps of the means of a few dozen steps: on a busy machine's steps (a few far
    # slower than the rest) their 2.5% quantiles differ by a resample's luck, so each end is
    # checked against the other bootstrap's quantiles around it
    assert q(0.01) - 0.1 * width <= optimizer.delivered_low_ns <= q(0.05) + 0.1 * width
    assert q(0.95) - 0.1 * width <= optimizer.delivered_high_ns <= q(0.99) + 0.1 * width
    assert optimizer.delivered_low_ns <= optimizer.delivered_ns <= optimizer.delivered_high_ns
    where = (
        "less than promised"
        if promised > optimizer.delivered_high_ns
        else "more than promised"
        if promised < optimizer.delivered_low_ns
        else "the promise is within it"
    )
    assert optimizer.sentence() == (
        f"promised {promised / 1e6:.2f} ms/step, delivered {optimizer.delivered_ns / 1e6:.2f} "
        f"ms/step, 95% CI {optimizer.delivered_low_ns / 1e6:.2f} to "
        f"{optimizer.delivered_high_ns / 1e6:.2f}: {where} (for-loop to fused)"
    )
    for row in rows:
        if not row.acted_on:
            assert row.delivered_ns is None and "not acted on" in row.sentence()
            assert row.delivered_low_ns is None and row.delivered_high_ns is None


def test_followup_reads_the_optimizer_implementation_in_both_runs(before_after):
    """The fused run applied the remedy (for-loop to fused); an optimizer whose time fell with
    its implementation unchanged (another change freed the CPU it shared) did not."""
    import dataclasses

    import perfkit_core
    from perfkit_core.advice.followup import follow_up
    from perfkit_core.advice.remedy_state import optimizer_implementation

    before, after = (perfkit_core.load(p) for p in before_after)
    assert optimizer_implementation(before) == "for-loop"
    assert optimizer_implementation(after) == "fused"
    assert any("fused" in str(n) for n in after.events["name"].unique())
    rows, _ = follow_up(before, after)
    row = next(r for r in rows if r.id == "optimizer")
    assert row.acted_on and row.sentence().endswith("(for-loop to fused)")
    finding = next(f for f in before.advise() if f.id == "optimizer")
    halved = {k: v / 2 if k.endswith("_per_step_ns") else v for k, v in finding.evidence.items()}
    faster = dataclasses.replace(finding, evidence=halved, saving_ns=finding.saving_ns / 2)
    rows, _ = follow_up(before, before, findings_before=[finding], findings_after=[faster])
    assert not rows[0].acted_on and rows[0].delivered_ns is None
    assert rows[0].sentence() == (
        f"promised {finding.saving_ns / 1e6:.2f} ms/step; not acted on (still for-loop; "
        f"still {faster.saving_ns / 1e6:.2f} ms/step)"
    )


def test_report_views_are_the_comparison_views_and_advice():
    from perfkit_core.comparison import VIEWS
    from perfkit_core.report.comparison_model import REPORT_VIEWS

    assert (*VIEWS, "advice") == REPORT_VIEWS


@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_compare_prints_promised_against_delivered(before_after, tmp_path, fmt):
    from click.testing import CliRunner

    from perfkit_core.cli import cli

    out = tmp_path / f"compare.{fmt}"
    args = ["compare", *map(str, before_after), "--labels", "loop,fused", "--format", fmt]
    result = CliRunner().invoke(cli, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    if fmt == "json":
        table = json.loads(text)["tables"]["advice"]
        rows = {r["name"]: r for r in table["rows"]}
        assert rows["optimizer"]["status"] == "acted on"
        keys = {"promised_ns", "delivered_ns", "delivered_low_ns", "delivered_high_ns"}
        assert set(rows["optimizer"]) >= keys | {"remaining_ns", "status"}
        assert "optimizer: promised " in table["note"]
        # the same figures as the follow-up of the two runs (one figure, one value)
        import perfkit_core
        from perfkit_core.advice.followup import follow_up

        found, _ = follow_up(*(perfkit_core.load(p) for p in before_after))
        row = next(r for r in found if r.id == "optimizer")
        for key in keys:
            assert rows["optimizer"][key] == pytest.approx(getattr(row, key))
        assert row.sentence() in table["note"]
    else:
        assert "Advice of loop acted on in fused" in text
        assert "optimizer: promised " in text and " ms/step, delivered " in text
        assert "95% CI" in text and "step-to-step spread" in text


def _record_paddle(directory: Path, *, multi_tensor: bool) -> Path:
    """A narrow MLP trained with Paddle Adam under paddle.profiler with perfkit's handler."""
    paddle = pytest.importorskip("paddle")
    import paddle.profiler as profiler

    from perfkit_paddle.handler import on_trace_ready

    paddle.set_device("cpu")
    paddle.seed(0)
    layers: list = []
    for _ in range(6):
        layers += [paddle.nn.Linear(16, 16), paddle.nn.LayerNorm(16), paddle.nn.ReLU()]
    model = paddle.nn.Sequential(*layers, paddle.nn.Linear(16, 4))
    optimizer = paddle.optimizer.Adam(
        learning_rate=1e-3, parameters=model.parameters(), use_multi_tensor=multi_tensor
    )
    x, y = paddle.randn([8, 16]), paddle.randint(0, 4, [8])
    handler = on_trace_ready(directory, worker_name="adam", background=False)
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 6), on_trace_ready=handler
    )
    prof.start()
    for _ in range(6):
        paddle.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.clear_grad()
        prof.step()
    prof.stop()
    assert handler.runs, handler.failures
    return handler.runs[0]


def test_paddle_optimizer_loop_is_advised_and_multi_tensor_is_not(tmp_path):
    import perfkit_core
    from perfkit_core.advice.followup import follow_up
    from perfkit_core.advice.rules.optimizer import OPTIMIZER_SPEEDUPS

    loop = perfkit_core.load(_record_paddle(tmp_path / "loop", multi_tensor=False))
    finding = next(f for f in loop.advise() if f.id == "optimizer")
    assert finding.evidence["optimizer_class"] == "Adam"
    assert finding.evidence["implementation"] == "for-loop"
    assert finding.evidence["basis"] == "profiled"  # no step timer: the profiled time, said so
    assert "still in the figure" in finding.estimate
    speedup = OPTIMIZER_SPEEDUPS["paddle"]["Adam"]
    assert finding.saving_ns == pytest.approx(
        finding.evidence["optimizer_per_step_ns"] * (1 - 1 / speedup)
    )
    multi = perfkit_core.load(_record_paddle(tmp_path / "multi", multi_tensor=True))
    assert "optimizer" not in {f.id for f in multi.advise()}
    # perfkit compare of the two says what changed in Paddle's words, not torch's foreach
    row = next(r for r in follow_up(loop, multi)[0] if r.id == "optimizer")
    assert (row.state_before, row.state_after) == ("per-parameter loop", "use_multi_tensor")
    assert row.acted_on and row.sentence().endswith("(per-parameter loop to use_multi_tensor)")


def test_acted_on_is_decided_by_the_measured_time_not_the_saving(before_after):
    import perfkit_core
    from perfkit_core.advice import Finding
    from perfkit_core.advice.followup import follow_up

    before, after = (perfkit_core.load(p) for p in before_after)

    def finding(fid: str, saving: float, measured: float) -> Finding:
        evidence = {"basis": "unprofiled", "x_per_step_ns": measured}
        return Finding(id=fid, title=fid, severity="", saving_ns=saving, evidence=evidence)

    rows, figures = follow_up(
        before,
        after,
        findings_before=[finding("a", 4e6, 10e6), finding("b", 2e6, 8e6), finding("c", 1e6, 5e6)],
        # a: gone; b: its saving fell to 0 but its measured time did not shrink; c: time halved
        findings_after=[finding("b", 0.0, 8e6), finding("c", 0.5e6, 2.5e6)],
    )
    by_id = {r.id: r for r in rows}
    assert by_id["a"].acted_on and by_id["c"].acted_on and not by_id["b"].acted_on
    assert by_id["b"].delivered_ns is None
    # split by promised saving x share of measured time that went: a 4 ms x 1, c 1 ms x 0.5
    total = figures["delivered_ns"]
    assert by_id["a"].delivered_ns == pytest.approx(total * 4 / 4.5)
    assert by_id["c"].delivered_ns == pytest.approx(total * 0.5 / 4.5)
    # ... and the interval of the step's difference, split the same way
    for fid, share in (("a", 4 / 4.5), ("c", 0.5 / 4.5)):
        assert by_id[fid].delivered_low_ns == pytest.approx(figures["delivered_low_ns"] * share)
        assert by_id[fid].delivered_high_ns == pytest.approx(figures["delivered_high_ns"] * share)


def test_delivered_interval_matches_the_mean_s_normal_approximation():
    """Steps drawn from two normal distributions (sd 1 ms, 1.5 ms apart): the bootstrap interval
    of the difference of means holds the true difference and is as wide as the standard error
    of a difference of means (sd sqrt(2 / n)) says, within 10%."""
    from perfkit_core.comparison.statistics import difference_of_means

    rng = np.random.default_rng(7)
    n, sd = 4000, 1e6
    before, after = rng.normal(10e6, sd, n), rng.normal(8.5e6, sd, n)
    point, low, high = difference_of_means(before, after)
    assert point == pytest.approx(np.mean(before) - np.mean(after))
    assert low < 1.5e6 < high and low < point < high
    se = sd * math.sqrt(2 / n)
    assert high - low == pytest.approx(2 * 1.959964 * se, rel=0.10)
    # one step in a run: a difference, no spread to resample; none: nothing
    point, low, high = difference_of_means(before, after[:1])
    assert point == pytest.approx(np.mean(before) - after[0])
    assert math.isnan(low) and math.isnan(high)
    assert all(math.isnan(v) for v in difference_of_means(before, np.array([np.nan])))


def test_followup_of_profiled_steps_gives_their_interval(before_after, tmp_path):
    """The real pair without its step timers: the delivered time is the mean profiled steps'
    difference, and its interval lies where the bootstrap's exact distribution, enumerated
    here from the step rows' durations (the CPU-only steps are their host spans), puts it;
    the sentence places the promise against it and the table's note
    says which steps were resampled."""
    import shutil

    import perfkit_core
    from perfkit_core.advice.followup import follow_up
    from perfkit_core.report.comparison_model import advice_table

    runs = []
    for i, folder in enumerate(before_after):
        copy = Path(shutil.copytree(folder, tmp_path / str(i) / folder.name))
        meta = json.loads((copy / "meta.json").read_text())
        del meta["step_timer"]
        (copy / "meta.json").write_text(json.dumps(meta))
        runs.append(perfkit_core.load(copy))
    rows, figures = follow_up(*runs)
    assert figures["basis"] == "profiled"
    steps = []
    for run in runs:
        ev = run.events
        steps.append(ev.loc[ev["kind"] == "step", "dur_ns"].to_numpy(dtype=float).tolist())
    assert figures["delivered_ns"] == pytest.approx(
        statistics.fmean(steps[0]) - statistics.fmean(steps[1])
    )
    # the bootstrap's exact distribution: every resample of each run's few steps, enumerated
    assert max(map(len, steps)) <= 5, "the schedule records a few profiled steps"
    means = [
        np.array([statistics.fmean(pick) for pick in itertools.product(s, repeat=len(s))])
        for s in steps
    ]
    diffs = np.subtract.outer(means[0], means[1]).ravel()
    # 2000 resamples put the 2.5% and 97.5% ends between the exact 1% and 4% quantiles
    q = np.quantile(diffs, [0.01, 0.04, 0.96, 0.99])
    assert q[0] <= figures["delivered_low_ns"] <= q[1]
    assert q[2] <= figures["delivered_high_ns"] <= q[3]
    optimizer = next(r for r in rows if r.id == "optimizer")
    assert optimizer.acted_on
    share = optimizer.delivered_ns / figures["delivered_ns"]
    assert optimizer.delivered_low_ns == pytest.approx(figures["delivered_low_ns"] * share)
    assert ", 95% CI " in optimizer.sentence()
    from perfkit_core.comparison import compare

    note = advice_table(compare(*runs, labels=["loop", "fused"])).note
    assert "resamples each run's profiled steps (their means)" in note
    assert "profiled, shared among the findings" in note


def test_difference_of_means_matches_the_normal_approximation():
    """Steps drawn from two normal distributions (sd 1 ms, 1.5 ms apart, 400 a run): the
    bootstrap interval of the difference of means is as wide as its standard error
    (sd sqrt(2 / n)) says, within 10%, and holds the true difference."""
    from perfkit_core.comparison.statistics import difference_of_means

    rng = np.random.default_rng(11)
    n, sd = 400, 1e6
    before, after = rng.normal(10e6, sd, n), rng.normal(8.5e6, sd, n)
    point, low, high = difference_of_means(before, after)
    assert point == pytest.approx(before.mean() - after.mean())
    assert low < 1.5e6 < high and low < point < high
    assert high - low == pytest.approx(2 * 1.959964 * sd * math.sqrt(2 / n), rel=0.10)
    point, low, high = difference_of_means(before, after[:1])
    assert point == pytest.approx(before.mean() - after[0])
    assert math.isnan(low) and math.isnan(high)


def _with_pace(folder: Path, directory: Path, pace_ns: list[float]) -> Path:
    """A copy of the run ``folder`` in ``directory`` whose step timer read the machine's pace
    as ``pace_ns``."""
    import shutil

    copy = Path(shutil.copytree(folder, directory / folder.name))
    meta = json.loads((copy / "meta.json").read_text())
    meta["step_timer"]["pace_ns"] = pace_ns
    meta["step_timer"]["pace_loops"] = PACE_LOOPS
    (copy / "meta.json").write_text(json.dumps(meta))
    return copy


def test_followup_states_the_delivered_time_at_one_machine_pace(before_after, tmp_path):
    """The real pair, its step timers' pace readings set so that the machine ran 1.5 times as
    slow for AFTER: the follow-up says so, and the delivered time at one pace is BEFORE's step
    less AFTER's over 1.5, recomputed from the step timers' steps; a pace that moved less than
    ``PACE_DRIFT``, or readings too few, leave the figures as they were."""
    import perfkit_core
    from perfkit_core.advice.followup import PACE_DRIFT, follow_up

    rng = np.random.default_rng(3)
    pace = list(50_000 + rng.normal(0, 1_000, 40))
    before = perfkit_core.load(_with_pace(before_after[0], tmp_path / "b", pace))
    slow = perfkit_core.load(_with_pace(before_after[1], tmp_path / "s", [1.5 * p for p in pace]))
    rows, figures = follow_up(before, slow)
    steps = [np.mean(_unprofiled_steps(p)) for p in before_after]
    assert figures["pace_ratio"] == pytest.approx(1.5)
    assert figures["pace_low"] <= 1.5 <= figures["pace_high"]
    assert figures["delivered_at_pace_ns"] == pytest.approx(steps[0] - steps[1] / 1.5)
    assert figures["delivered_ns"] == pytest.approx(steps[0] - steps[1])  # as timed, kept
    row = next(r for r in rows if r.id == "optimizer")
    assert row.pace_ratio == pytest.approx(1.5)
    assert row.delivered_at_pace_ns == pytest.approx(figures["delivered_at_pace_ns"])
    assert (
        f"; the machine ran 50% slower while the second run's steps were timed: "
        f"{row.delivered_at_pace_ns / 1e6:.2f} ms/step at one pace (for-loop to fused)"
    ) in row.sentence()
    # the note of perfkit compare's advice table says it with the runs' labels
    from perfkit_core.comparison import compare
    from perfkit_core.report.comparison_model import advice_table

    table = advice_table(compare(before, slow, labels=["loop", "fused"]))
    assert "The machine ran 50% slower while fused's steps were timed than while loop's" in (
        table.note
    )
    assert f"the changes delivered {figures['delivered_at_pace_ns'] / 1e6:.2f} ms/step" in (
        table.note
    )
    # within PACE_DRIFT, or with fewer readings than needed: nothing said
    near = perfkit_core.load(
        _with_pace(before_after[1], tmp_path / "n", [(1 + PACE_DRIFT / 2) * p for p in pace])
    )
    few = perfkit_core.load(_with_pace(before_after[1], tmp_path / "f", pace[:3]))
    for after in (near, few):
        rows, figures = follow_up(before, after)
        assert figures["pace_ratio"] is None and figures["delivered_at_pace_ns"] is None
        assert all(r.pace_ratio is None and "machine ran" not in r.sentence() for r in rows)


@pytest.mark.parametrize(
    ("promised_ms", "up_to", "where"),
    [
        (0.3, False, "more than promised"),
        (1.0, False, "the promise is within it"),
        (2.0, False, "less than promised"),
        # a promise the model gave as the most it allows ("up to", ``Finding.upper_bound``) is
        # kept by any delivery up to it; only more than it is news
        (0.3, True, "more than promised"),
        (1.0, True, "within the promise, which was at most that"),
        (2.0, True, "within the promise, which was at most that"),
    ],
)
def test_followup_sentence_places_the_promise_against_the_interval(promised_ms, up_to, where):
    from perfkit_core.advice.followup import FollowUp

    row = FollowUp(
        id="optimizer",
        rule="optimizer",
        title="t",
        promised_ns=promised_ms * 1e6,
        remaining_ns=0.0,
        acted_on=True,
        delivered_ns=1.0e6,
        state_before="for-loop",
        state_after="foreach",
        delivered_low_ns=0.5e6,
        delivered_high_ns=1.5e6,
        promised_up_to=up_to,
    )
    bound = "up to " if up_to else ""
    assert row.sentence() == (
        f"promised {bound}{promised_ms:.2f} ms/step, delivered 1.00 ms/step, 95% CI 0.50 to "
        f"1.50: {where} (for-loop to foreach)"
    )
    assert row.to_dict()["delivered_low_ns"] == 0.5e6


def test_acted_on_compares_the_time_without_the_profiler_when_both_runs_have_it(before_after):
    """A Paddle run loading in its single-process loader's thread waits for data a fraction of
    a millisecond in its profiled steps with or without workers; what workers remove is the
    thread's loading, the unprofiled figure the saving was stated on. The same figure is read
    in both runs, whatever order the evidence lists them in."""
    import perfkit_core
    from perfkit_core.advice import Finding
    from perfkit_core.advice.followup import follow_up, measured_key

    before, after = (perfkit_core.load(p) for p in before_after)

    def finding(fid: str, evidence: dict) -> Finding:
        return Finding(id=fid, title=fid, severity="", saving_ns=1e6, evidence=evidence)

    loading_before = finding(
        "input-pipeline", {"data_per_step_ns": 0.2e6, "data_unprofiled_per_step_ns": 10e6}
    )
    loading_after = finding(
        "input-pipeline", {"data_unprofiled_per_step_ns": 0.4e6, "data_per_step_ns": 0.2e6}
    )
    assert measured_key(loading_before, loading_after) == "data_unprofiled_per_step_ns"
    rows, _ = follow_up(
        before, after, findings_before=[loading_before], findings_after=[loading_after]
    )
    assert rows[0].acted_on and rows[0].delivered_ns is not None
    # the unprofiled figure missing from AFTER: the profiled one both have decides
    only_profiled = finding("input-pipeline", {"data_per_step_ns": 0.2e6})
    assert measured_key(loading_before, only_profiled) == "data_per_step_ns"
    rows, _ = follow_up(
        before, after, findings_before=[loading_before], findings_after=[only_profiled]
    )
    assert not rows[0].acted_on and rows[0].delivered_ns is None


def test_loader_cores_come_from_the_step_timers_record_of_the_machine():
    from perfkit_core.advice.loader_cores import loader_cores

    run = _timer_run  # loader_cores reads only the run's meta

    # whole cores: one at least half idle counts as free
    assert loader_cores(run({"cpu_count": 8, "load_average": 1.5}))[0] == 7.0
    assert loader_cores(run({"cpu_count": 2, "load_average": 1.18}))[0] == 1.0
    assert loader_cores(run({"cpu_count": 2, "load_average": 1.6}))[0] == 0.0
    free, how = loader_cores(run({"cpu_count": 2, "load_average": 2.7}))
    assert free == 0.0 and "load average of 2.7" in how and "whole cores" in how
    # without the record: this machine's cores, one left to training
    free, how = loader_cores(run({}))
    assert free == max((os.cpu_count() or 1) - 1, 1)
    assert f"{os.cpu_count()} cores on this machine" in how
    assert "the run does not record its own machine's cores" in how
    # the cores idle while the steps ran come first: the load average lags a run saved
    # seconds after training started on a machine idle before
    free, how = loader_cores(run({"cpu_count": 2, "load_average": 0.3, "idle_cores": 0.8}))
    assert free == 1.0 and "0.8 cores idle" in how
    assert loader_cores(run({"cpu_count": 2, "load_average": 0.3, "idle_cores": 0.4}))[0] == 0.0
    assert loader_cores(run({"cpu_count": 8, "load_average": 1.5, "idle_cores": None}))[0] == 7.0
    nan = {"cpu_count": 8, "load_average": 1.5, "idle_cores": float("nan")}
    assert loader_cores(run(nan))[0] == 7.0
    # a loading thread's core goes to the workers with the loading (Paddle's single-process
    # DataLoader): 0.4 idle and 0.55 of a core loading make one worker's core
    free, how = loader_cores(run({"cpu_count": 2, "idle_cores": 0.4}), thread_cores=0.55)
    assert free == 1.0 and "0.6 core the loading thread keeps busy" in how
    assert loader_cores(run({"cpu_count": 2, "load_average": 1.9}), thread_cores=0.55)[0] == 1.0
    assert loader_cores(run({"cpu_count": 2, "idle_cores": 0.2}), thread_cores=0.2)[0] == 0.0


def test_loader_cores_take_the_process_cpu_where_the_idle_ticks_are_too_coarse():
    """The cores the training process left (its CPU clock, exact) decide, capped by the
    machine's idle cores where ``/proc/stat``'s ticks resolve them; where they do not, the
    estimate says other work could not be told."""
    from perfkit_core.advice.loader_cores import IDLE_RESOLUTION_CORES, loader_cores

    def record(idle: float, resolution: float) -> dict:
        return {
            "cpu_count": 2,
            "load_average": 1.9,
            "usable_cores": 2,
            "process_cores": 1.25,
            "idle_cores": idle,
            "idle_resolution_cores": resolution,
        }

    fine, coarse = IDLE_RESOLUTION_CORES / 2, IDLE_RESOLUTION_CORES * 3
    # 30 steps of 1.5 ms on 2 cores: a tick more or less reads 0.0 or 2.7 idle cores, and the
    # process's 0.75 free and a loading thread's 0.33 make one worker's core either way
    for idle in (0.0, 0.7, 2.7):
        free, how = loader_cores(_timer_run(record(idle, coarse)), thread_cores=0.33)
        assert free == 1.0
        assert "2 cores less the 1.25 the training process kept busy" in how
        assert f"could be {coarse:.2f} cores off" in how and "other work" in how
    # fine enough: other work that took what the process left lowers it ...
    free, how = loader_cores(_timer_run(record(0.1, fine)), thread_cores=0.33)
    assert (
        free == 0.0 and "0.10 cores idle" in how and "(other work took 0.65 of the 0.75 the" in how
    )
    # ... and more idle than the process left, or fewer by no more than the ticks' error, is
    # the process's figure
    for idle in (1.9, 0.75 - fine / 2):
        free, how = loader_cores(_timer_run(record(idle, fine)))
        assert free == 1.0 and "1.25 the training process kept busy" in how
        assert "shows no other work taking them" in how
    # the process's figure without a resolution: the ticks' error is unknown
    unknown = {**record(0.0, fine), "idle_resolution_cores": None}
    free, how = loader_cores(_timer_run(unknown))
    assert free == 1.0 and "far off" in how


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="the machine's idle time is Linux's")
def test_step_timer_idle_cores_leave_out_what_the_steps_used():
    """The cores idle while the steps ran, against what this process's own CPU time over the
    same steps leaves: the process kept one core busy, so at most the other cores were idle
    (other work only lowers it)."""
    import perfkit_core

    timer = perfkit_core.step_timer(None, warmup=0)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(5):
        with timer.step():
            end = time.thread_time() + 0.1
            while time.thread_time() < end:  # one core busy for 0.1 s of CPU
                pass
    wall = time.perf_counter() - wall_start
    used = (time.process_time() - cpu_start) / wall
    record = timer.record()
    idle = record["idle_cores"]
    timer.close()
    cores = os.cpu_count() or 1
    assert idle is not None and 0.0 <= idle <= cores - used + 0.15
    # the process's own CPU clock over the same steps: exact, one core busy
    assert record["process_cores"] == pytest.approx(used, abs=0.1)
    assert record["usable_cores"] <= cores
    # one stretch, the steps' own time: a tick a core at its ends, over its time
    ticks = os.sysconf("SC_CLK_TCK")
    steps_s = sum(record["unprofiled_ns"] + record["unknown_ns"]) / 1e9
    assert record["idle_resolution_cores"] == pytest.approx(cores / ticks / steps_s, rel=0.1)


class _IdleClock:
    """The step timer's clock and its ``machine_idle_s``, stood in for: the wall clock moves
    only when the test ``advance``s it, and the machine has ``cores`` idle cores all along,
    plus ``extra`` seconds of idle time added by the test, while the process keeps ``busy``
    cores busy; ``readings`` counts the idle readings."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cores: float, busy: float = 1.0) -> None:
        import importlib

        module = importlib.import_module("perfkit_core.capture.step_timer")
        clocks = importlib.import_module("perfkit_core.capture.cpu_clocks")
        self.cores, self.now, self.readings, self.extra = cores, 0, 0, 0.0
        clock = SimpleNamespace(
            perf_counter_ns=lambda: self.now,
            thread_time_ns=time.thread_time_ns,
            process_time_ns=lambda: int(busy * self.now),
        )
        monkeypatch.setattr(module, "time", clock)
        monkeypatch.setattr(clocks, "time", clock)
        monkeypatch.setattr(clocks, "machine_idle_s", self)
        monkeypatch.setattr(clocks, "child_pids", list)
        self.module = module

    def advance(self, ms: float) -> None:
        self.now += int(ms * 1e6)

    def __call__(self) -> float:
        self.readings += 1
        return self.cores * self.now / 1e9 + self.extra


@pytest.mark.parametrize("window_ns", [0, 10**15])
def test_step_timer_reads_idle_time_once_a_window(monkeypatch, window_ns):
    """The timer reads the machine's idle time at the stretch's start, at the end of a step
    once ``IDLE_WINDOW_NS`` has passed since the last reading, and at ``close``: each step
    with a window of 0, twice in all with a window longer than the steps; the idle cores
    are the same either way (a reading releases the GIL to a loading thread, so fewer is
    cheaper)."""
    import perfkit_core

    clock = _IdleClock(monkeypatch, 0.75, busy=1.25)
    monkeypatch.setattr(clock.module, "IDLE_WINDOW_NS", window_ns)
    timer = perfkit_core.step_timer(None, warmup=2)
    for _ in range(40):
        with timer.step():
            clock.advance(1)
    timer.close()
    assert clock.readings == (1 + 38 + 1 if window_ns == 0 else 2)  # warm-up steps: none
    record = timer.record()
    # the machine's pace: one reading after each window the steps went on from
    assert len(record["pace_ns"]) == (38 if window_ns == 0 else 0)
    assert record["pace_loops"] == PACE_LOOPS and all(ns > 0 for ns in record["pace_ns"])
    assert record["idle_cores"] == pytest.approx(0.75, rel=0.02)
    assert record["process_cores"] == pytest.approx(1.25, rel=0.02)
    # adjacent windows make one stretch, whose two ends alone are a tick off: 38 ms of steps
    ticks = os.sysconf("SC_CLK_TCK")
    resolution = (os.cpu_count() or 1) / ticks / 0.038
    assert record["idle_resolution_cores"] == pytest.approx(resolution, rel=0.05)


def test_step_timer_idle_windows_leave_out_what_ran_after_the_steps(monkeypatch):
    """Idle time the machine had after the last step, before ``close`` (the program's other
    work), is not counted; the windows closed before it are."""
    import perfkit_core

    clock = _IdleClock(monkeypatch, 0.5)
    monkeypatch.setattr(clock.module, "IDLE_WINDOW_NS", 5_000_000)
    timer = perfkit_core.step_timer(None, warmup=0)
    for _ in range(10):
        with timer.step():
            clock.advance(3)
    # other work, far longer than a tenth of the open window (under 5 ms of steps)
    clock.advance(50)
    clock.extra = 100.0  # which a counted window would show
    timer.close()
    record = timer.record()
    assert 0 < clock.readings < 2 * 10  # fewer than the two a step the timer once took
    assert record["idle_cores"] == pytest.approx(0.5, rel=0.05)


def test_step_timer_idle_stretch_ends_where_the_profiler_records(monkeypatch):
    """A step the profiler records ends the stretch of unrecorded steps: the idle time from
    then on is not counted, and the next unrecorded stretch opens a window of its own."""
    import perfkit_core

    clock = _IdleClock(monkeypatch, 1.0)
    monkeypatch.setattr(clock.module, "IDLE_WINDOW_NS", 10**15)
    timer = perfkit_core.step_timer(None, warmup=0)
    states = iter([False] * 5 + [True] * 5 + [False] * 5)
    monkeypatch.setattr(timer, "recording", lambda: next(states))
    for index in range(15):
        with timer.step():
            if index == 5:
                clock.extra = 100.0  # idle time while the profiler records: not counted
            clock.advance(2)
    timer.close()
    assert clock.readings == 4  # opened, ended by the recorded step; opened again, closed
    record = timer.record()
    assert record["idle_cores"] == pytest.approx(1.0, rel=0.05)
    # two stretches of 10 ms: each one's ends are a tick a core off
    ticks = os.sysconf("SC_CLK_TCK")
    resolution = 2 * (os.cpu_count() or 1) / ticks / 0.020
    assert record["idle_resolution_cores"] == pytest.approx(resolution, rel=0.05)
    assert len(timer.unprofiled_ns) == 10 and len(timer.profiled_ns) == 5


def test_step_timer_takes_the_machines_pace_beside_real_steps():
    """Real steps of about 6 ms for 0.4 s: a reading of the machine's pace after each 50 ms
    window, each the CPU time of the same loop timed here directly (within the machine's
    spread, a factor of 3 on the medians)."""
    import perfkit_core
    from perfkit_core.capture.cpu_clocks import pace_probe_ns
    from perfkit_core.capture.step_timer import IDLE_WINDOW_NS

    timer = perfkit_core.step_timer(None, warmup=0)
    start = time.perf_counter_ns()
    while time.perf_counter_ns() - start < 400_000_000:
        with timer.step():
            end = time.perf_counter_ns() + 6_000_000
            while time.perf_counter_ns() < end:
                pass
    timer.close()
    record = timer.record()
    wall = sum(record["unprofiled_ns"]) + sum(record["unknown_ns"])  # no profiler recording
    # a window closes at the first step's end 50 ms or more after it opened
    windows = wall // (IDLE_WINDOW_NS + 7_000_000)
    assert windows - 1 <= len(record["pace_ns"]) <= wall // IDLE_WINDOW_NS
    here = statistics.median(pace_probe_ns() for _ in range(21))
    assert here / 3 <= statistics.median(record["pace_ns"]) <= 3 * here


def test_step_timer_records_the_machine(adam_loop):
    folder, _ = adam_loop
    record = json.loads((folder / "meta.json").read_text())["step_timer"]
    assert record["cpu_count"] == os.cpu_count()
    assert record["load_average"] is None or record["load_average"] >= 0
    idle = record["idle_cores"]
    assert idle is None or 0.0 <= idle <= os.cpu_count() + 0.1
    assert "loader_batch_ns" not in record  # no step loaded data: no worker was started
    assert record["eager_pass_ns"] > 0  # the compile advice's scale for this machine


def test_step_timer_times_the_hand_over_only_for_steps_that_loaded_data(tmp_path):
    """``save`` has the run's adapter time a loader worker's hand-over on the machine that
    trained only when the steps loaded data, and not when told not to or when no adapter knows
    the run's framework; a run without it is advised at the model's cost."""
    import perfkit_core
    from perfkit_core.advice.loader import MODEL_COST, loader_batch_cost, run_loader_batch_cost
    from perfkit_core.capture.machine_costs import loader_batch_ns

    def folder(name: str, framework: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        (path / "meta.json").write_text(json.dumps({"framework": framework}))
        return path

    def saved(path: Path, loads: bool, **options) -> dict:
        timer = perfkit_core.step_timer(None, warmup=0)
        for _ in range(2):
            with timer.step():
                if loads:
                    timer._on_phase("data", 1_000_000)
        timer.save(path, **options)
        return json.loads((path / "meta.json").read_text())["step_timer"]

    loads = saved(folder("loads", "torch"), True)
    assert loads["loader_batch_ns"] > 0
    # torch's training process unpickles each batch itself: receiving is not timed apart
    assert "loader_receive_ns" not in loads
    # no thread of the training process loaded (a data phase only): no cost per op beside one
    assert "thread_op_ns" not in loads
    # and how much a worker on a free core and torch's ops slow each other here
    assert loads["training_slowdown"] >= 1.0 and loads["loading_slowdown"] >= 1.0
    for record in (
        saved(folder("opt-out", "torch"), True, loader_costs=False),
        saved(folder("no-loading", "torch"), False),
        saved(folder("unknown", "no such framework"), True),
    ):
        assert not {"loader_batch_ns", "training_slowdown", "loading_slowdown"} & set(record)
    assert loader_batch_ns("no such framework") is None
    # the eager pass is timed for every torch run, whether its steps loaded data or not
    assert loads["eager_pass_ns"] > 0
    assert saved(folder("no-loading-pass", "torch"), False)["eager_pass_ns"] > 0
    assert "eager_pass_ns" not in saved(folder("no-pass", "torch"), False, eager_pass=False)
    assert "eager_pass_ns" not in saved(folder("unknown-pass", "no such framework"), False)

    run = SimpleNamespace(framework="torch", meta={"step_timer": {"loader_batch_ns": math.nan}})
    # a cost that is not a positive number is not used: the model's stands
    assert run_loader_batch_cost(run) == (loader_batch_cost("torch"), MODEL_COST)


def test_the_cost_per_op_beside_a_loading_thread_is_the_step_timers_where_it_timed_one():
    """Each training op's cost beside a loading thread is what the step timer timed on the
    machine that trained (0 included); anything but a finite number of 0 or more, or no
    record, leaves ``THREAD_OP_NS``, and the estimate's wording says which."""
    from perfkit_core.advice.loader import (
        MODEL_COST,
        THREAD_OP_NS,
        THREAD_OP_SOURCES,
        TRAINING_MACHINE,
        run_thread_op_cost,
    )

    run = _timer_run  # run_thread_op_cost reads only the run's meta

    assert run_thread_op_cost(run({"thread_op_ns": 23_500.0})) == (23_500.0, TRAINING_MACHINE)
    assert run_thread_op_cost(run({"thread_op_ns": 0})) == (0.0, TRAINING_MACHINE)
    for odd in ({}, {"thread_op_ns": -1.0}, {"thread_op_ns": math.nan}, {"thread_op_ns": "20"}):
        assert run_thread_op_cost(run(odd)) == (THREAD_OP_NS, MODEL_COST), odd
    assert run_thread_op_cost(SimpleNamespace(meta={})) == (THREAD_OP_NS, MODEL_COST)
    assert "timed on the machine that trained" in THREAD_OP_SOURCES[TRAINING_MACHINE]
    assert "--measure" in THREAD_OP_SOURCES[MODEL_COST]


def test_slowdowns_come_from_the_step_timers_record_of_the_machine():
    """The input pipeline's slowdowns beside a worker are the step timer's record's, both or
    neither; anything but two finite numbers of at least 1 leaves a free core as fast as an
    idle one, and the estimate says which."""
    from perfkit_core.advice.loader import (
        SLOWDOWN_NONE,
        SLOWDOWN_TIMED,
        loader_slowdowns,
        run_slowdowns,
        slowdown_factors,
        slowdown_text,
    )

    run = _timer_run  # run_slowdowns reads only the run's meta

    timed = {"training_slowdown": 1.3, "loading_slowdown": 1.75}
    assert run_slowdowns(run(timed)) == ((1.3, 1.75), SLOWDOWN_TIMED)
    for record in (
        {},
        {"training_slowdown": 1.3},
        {**timed, "loading_slowdown": 0.9},
        {**timed, "training_slowdown": math.nan},
        {**timed, "training_slowdown": True},
        {**timed, "loading_slowdown": "1.75"},
    ):
        assert run_slowdowns(run(record)) == ((1.0, 1.0), SLOWDOWN_NONE), record
    assert run_slowdowns(SimpleNamespace(meta={})) == ((1.0, 1.0), SLOWDOWN_NONE)
    # a finding's evidence: each 1 where missing or not a number of at least 1
    assert loader_slowdowns(timed) == (1.3, 1.75)
    assert loader_slowdowns({"training_slowdown": 0.5, "loading_slowdown": None}) == (1.0, 1.0)
    # the sentence names the two and, where one is large, the shared core
    said = slowdown_text((1.3, 1.75), SLOWDOWN_TIMED, "torch")
    assert "torch's ops ran 1.30 times and a Dataset's Python work 1.75 times" in said
    assert "hyperthread" in said
    assert "hyperthread" not in slowdown_text((1.02, 1.01), SLOWDOWN_TIMED, "torch")
    assert "ran as fast as alone (timed" in slowdown_text((1.0, 1.0), SLOWDOWN_TIMED, "torch")
    assert slowdown_factors((1.0, 1.0), SLOWDOWN_TIMED) == ("", "")
    assert slowdown_factors((1.3, 1.75), SLOWDOWN_NONE) == ("", "")
    assert slowdown_factors((1.0, 1.75), SLOWDOWN_TIMED) == (" x 1.00", " x 1.75")
    assert "as fast beside each other as alone (not timed" in slowdown_text(
        (1.0, 1.0), SLOWDOWN_NONE, "torch"
    )


def test_a_worker_slowed_beside_training_saves_less():
    """Beside a worker, the rest of the step and the loading each take their slowdown times
    as long: the step becomes the longer of the two sides so slowed."""
    # 8 ms of loading and 6 ms of the rest, a hand-over of 1 ms each side, one worker
    assert loader_saving(8e6, 6e6, 1, 1e6) == pytest.approx(14e6 - 9e6)
    # the loading 1.5 times as long: 13 ms a batch, one ms saved
    assert loader_saving(8e6, 6e6, 1, 1e6, 0.0, 1e6, (1.0, 1.5)) == pytest.approx(1e6)
    # the rest 2 times as long: 13 ms, the rest bounds it
    assert loader_saving(8e6, 6e6, 1, 1e6, 0.0, 1e6, (2.0, 1.0)) == pytest.approx(1e6)
    # both slowed past the serial step: no saving, never less than none
    assert loader_saving(8e6, 6e6, 1, 1e6, 0.0, 1e6, (1.3, 1.75)) == 0.0
    # two workers spread the slowed loading: (8 x 1.5 + 1) / 2 = 6.5 ms < 6 x 1.2 + 1 = 8.2 ms
    assert loader_saving(8e6, 6e6, 2, 1e6, 0.0, 1e6, (1.2, 1.5)) == pytest.approx(14e6 - 8.2e6)


def _factors(training: float, loading: float) -> tuple[str, str]:
    """The factors an estimate's formula shows on the rest and the loading: none at 1 and 1."""
    if (training, loading) == (1.0, 1.0):
        return "", ""
    return f" x {training:.2f}", f" x {loading:.2f}"


def _slowdown_said(training: float, loading: float, framework: str, where: str) -> str:
    """The start of the sentence that states the slowdowns, as far as where they were timed."""
    if (training, loading) == (1.0, 1.0):
        return (
            f"Beside each other on two cores, {framework}'s ops and a Dataset's Python work ran "
            f"as fast as alone (timed {where}"
        )
    return (
        f"Beside each other on two cores, {framework}'s ops ran {training:.2f} times and a "
        f"Dataset's Python work {loading:.2f} times as long as alone (timed {where}"
    )


def _timed_slowdowns(run, evidence) -> tuple[float, float]:
    """The slowdowns beside a worker that the step timer timed on this machine when it saved
    ``run`` (its record), checked to be the input-pipeline finding's ``evidence``."""
    record = run.meta["step_timer"]
    slowdowns = (record["training_slowdown"], record["loading_slowdown"])
    assert min(slowdowns) >= 1.0
    assert (evidence["training_slowdown"], evidence["loading_slowdown"]) == slowdowns
    assert evidence["slowdown_from"] == "training machine"
    return slowdowns


def test_measure_times_handing_a_batch_over():
    """The input-pipeline finding's replay times a real DataLoader worker handing batches to
    this process; its saving is the rule's own model (``loader_saving``) with that cost in
    place of the model's constant, and its estimate states the cost and both sides' times."""
    from types import SimpleNamespace

    from perfkit_core.plugins import get_plugin_manager

    evidence = {
        "data_unprofiled_per_step_ns": 9_000_000.0,
        "loading_per_step_ns": 9_000_000.0,
        "rest_per_step_ns": 7_000_000.0,
        "free_cores": 1.0,
    }
    finding = SimpleNamespace(rule="input-pipeline", evidence=dict(evidence))
    pm = get_plugin_manager()
    strategy = torch.multiprocessing.get_sharing_strategy()
    result = framework_hook("perfkit_measure_saving", "torch", pm)(
        finding=finding, framework="torch"
    )
    # the worker handed batches over under the remedy's strategy; this process's is as it was
    assert torch.multiprocessing.get_sharing_strategy() == strategy
    assert "under the file_system sharing strategy, which the remedy sets" in result["estimate"]
    ev = result["evidence"]
    assert ev["measured"] == "replay" and ev["replay_free_cores"] == 1.0
    batch = ev["replay_batch_ns"]
    assert batch > 0
    # how much the worker and torch's ops slow each other, replayed here
    slow_rest, slow_load = ev["training_slowdown"], ev["loading_slowdown"]
    assert slow_rest >= 1.0 and slow_load >= 1.0 and ev["slowdown_from"] == "replay"
    # one worker: the step becomes the longer side, each slowed beside the other
    after = max(7e6 * slow_rest + batch, 9e6 * slow_load + batch)
    assert result["saving_ns"] == pytest.approx(max(16e6 - after, 0.0))
    assert result["saving_ns"] == pytest.approx(
        loader_saving(9e6, 7e6, 1.0, batch, 0.0, batch, (slow_rest, slow_load))
    )
    assert f"every {batch / 1e6:.3f} ms" in result["estimate"]
    rest_x, load_x = _factors(slow_rest, slow_load)
    assert f"(7.000{rest_x} + {batch / 1e6:.3f} ms)" in result["estimate"]
    assert f"((9.000{load_x} + {batch / 1e6:.3f}) / 1.0 ms)" in result["estimate"]
    replayed = "on this machine by perfkit advise --measure"
    assert _slowdown_said(slow_rest, slow_load, "torch", replayed) in result["estimate"]
    # Nothing to replay without the recorded loading time; a Paddle run's replay is Paddle's
    # loader (below), and a run of a framework no adapter replays keeps its model.
    empty = SimpleNamespace(rule="input-pipeline", evidence={})
    assert (
        framework_hook("perfkit_measure_saving", "torch", pm)(finding=empty, framework="torch")
        is None
    )
    assert (
        framework_hook("perfkit_measure_saving", "jax", pm)(finding=finding, framework="jax")
        is None
    )


def test_paddle_measure_times_its_loaders_costs():
    """``--measure`` on a Paddle run's input-pipeline finding times Paddle's loader on this
    machine: a worker handing ready batches over, and each op of a training step beside a
    single-process loader's thread; the saving is the rule's own split and model with those
    two in place of the constants, and the new split is the finding's evidence."""
    pytest.importorskip("paddle")
    from types import SimpleNamespace

    from perfkit_core.advice.loader import thread_split
    from perfkit_core.plugins import get_plugin_manager

    evidence = {
        "data_unprofiled_per_step_ns": 4e6,  # the loading thread's CPU time per step
        "training_cpu_per_step_ns": 5e6,
        "training_ops_per_step": 150.0,
        "basis_step_ns": 8.5e6,
        "loader_step_ns": 8e6,  # the mean step the split takes apart, not the median basis
        "loading_per_step_ns": 3e6,
        "rest_per_step_ns": 4e6,
        "free_cores": 1.0,
    }
    finding = SimpleNamespace(rule="input-pipeline", evidence=dict(evidence))
    pm = get_plugin_manager()
    import multiprocessing

    children = set(multiprocessing.active_children())
    result = framework_hook("perfkit_measure_saving", "paddle", pm)(
        finding=finding, framework="paddle"
    )
    # the replay's worker is stopped: a persistent one would live until the program's exit
    assert set(multiprocessing.active_children()) <= children
    ev = result["evidence"]
    assert ev["measured"] == "replay" and ev["replay_batch_ns"] > 0
    op_ns, batch_ns = ev["replay_thread_op_ns"], ev["replay_batch_ns"]
    assert op_ns >= 0
    loading, rest, contention = thread_split(8e6, 4e6, 5e6, 150.0, op_ns)
    assert (ev["loading_per_step_ns"], ev["rest_per_step_ns"], ev["contention_per_step_ns"]) == (
        pytest.approx(loading),
        pytest.approx(rest),
        pytest.approx(contention),
    )
    # receiving a batch, timed beside a busy replayed training step, costs the training side
    receive_ns = ev["loader_receive_ns"]
    assert receive_ns >= 0 and ev["loader_receive_from"] == "replay"  # not the run's any more
    slowdowns = (ev["training_slowdown"], ev["loading_slowdown"])
    assert min(slowdowns) >= 1.0 and ev["slowdown_from"] == "replay"
    assert result["saving_ns"] == pytest.approx(
        loader_saving(loading, rest, 1.0, batch_ns, contention, receive_ns, slowdowns)
    )
    # hand-overs at the replayed cost per op that reach the loading thread's CPU: the split
    # says it counts none of that CPU as loading, and the replay stays the finding's estimate
    from perfkit_core.advice.loader import handover_exceeds_loading

    capped = handover_exceeds_loading(4e6, 150.0, op_ns)
    assert ev["handovers_capped"] is capped
    assert "within_error" not in result
    assert ("as much CPU time as the loading thread ran" in result["estimate"]) is capped
    assert f"every {batch_ns / 1e6:.3f} ms" in result["estimate"]
    assert (
        f"Receiving each batch from that worker added {receive_ns / 1e6:.3f} ms"
        in (result["estimate"])
    )
    assert (
        f"({rest / 1e6:.3f}{_factors(*slowdowns)[0]} + {receive_ns / 1e6:.3f} ms)"
        in (result["estimate"])
    )
    replayed = "on this machine by perfkit advise --measure"
    assert _slowdown_said(*slowdowns, "paddle", replayed) in result["estimate"]
    assert f"cost the training thread {op_ns / 1e3:.1f} us of CPU beside" in result["estimate"]
    # a finding with no loading thread: only the hand-over is timed, the split is kept
    plain = SimpleNamespace(
        rule="input-pipeline",
        evidence={"loading_per_step_ns": 3e6, "rest_per_step_ns": 4e6, "free_cores": 1.0},
    )
    only = framework_hook("perfkit_measure_saving", "paddle", pm)(finding=plain, framework="paddle")
    assert "replay_thread_op_ns" not in only["evidence"]
    assert "within_error" not in only and "handovers_capped" not in only["evidence"]  # no split
    assert only["saving_ns"] == pytest.approx(
        loader_saving(
            3e6,
            4e6,
            1.0,
            only["evidence"]["replay_batch_ns"],
            0.0,
            only["evidence"]["loader_receive_ns"],
            (only["evidence"]["training_slowdown"], only["evidence"]["loading_slowdown"]),
        )
    )
    # nothing to replay for other rules, for runs of other frameworks, or without the figures
    other = SimpleNamespace(rule="optimizer", evidence={})
    assert (
        framework_hook("perfkit_measure_saving", "paddle", pm)(finding=other, framework="paddle")
        is None
    )
    # no core free: the model's "no saving" stands, and nothing is replayed
    busy = SimpleNamespace(rule="input-pipeline", evidence={**evidence, "free_cores": 0.0})
    assert (
        framework_hook("perfkit_measure_saving", "paddle", pm)(finding=busy, framework="paddle")
        is None
    )
    assert (
        framework_hook("perfkit_measure_saving", "torch", pm)(finding=busy, framework="torch")
        is None
    )
    empty = SimpleNamespace(rule="input-pipeline", evidence={})
    assert (
        framework_hook("perfkit_measure_saving", "paddle", pm)(finding=empty, framework="paddle")
        is None
    )


def test_paddle_in_process_loading_is_timed_and_advised(tmp_path):
    """Paddle's single-process DataLoader loads in a thread its profiler does not record; the
    adapter times each batch's fetch (the loading thread's CPU time) into the step timer, and
    the input-pipeline rule states the loading from that record: its figure is the mean of
    the recorded per-step times, and its saving the rule's own model of them."""
    paddle = pytest.importorskip("paddle")
    import numpy as np
    from paddle_profiles import slow_loader_run

    import perfkit_core
    from perfkit_core.advice.loader import loader_saving

    fetch = paddle.io.dataloader.fetcher._MapDatasetFetcher.fetch
    folder, record = slow_loader_run(tmp_path, 0)
    # the fetchers are back as they were once the timer saved
    assert paddle.io.dataloader.fetcher._MapDatasetFetcher.fetch is fetch
    data = record["phases"]["loading"]["unprofiled_ns"]
    assert len(data) == len(record["unprofiled_ns"]) >= 8
    assert sum(data) > 0  # the loading thread's time, in the steps it ran in
    # and the training thread's wall time getting each batch, inside the step that took it
    waits = record["phases"]["data"]["unprofiled_ns"]
    assert len(waits) == len(record["unprofiled_ns"])
    assert all(0 < w <= s for w, s in zip(waits, record["unprofiled_ns"], strict=True))

    run = perfkit_core.load(folder)
    findings = {f.id: f for f in run.advise()}
    assert "input-pipeline" in findings
    ev = findings["input-pipeline"].evidence
    # the rule states the larger of the loading thread's time and the training thread's waits
    # (timed without the profiler): which is larger is the machine's business
    assert ev["data_from"] in ("thread", "timed")
    if ev["data_from"] == "thread":
        # the loading thread fills its queue in bursts: its time per step is the mean
        assert ev["data_unprofiled_per_step_ns"] == pytest.approx(float(np.mean(data)))
        assert float(np.mean(data)) > float(np.mean(waits))
    else:
        assert ev["data_unprofiled_per_step_ns"] == pytest.approx(float(np.mean(waits)))
        assert float(np.mean(waits)) >= float(np.mean(data))
    assert ev["basis"] == "unprofiled"  # the step without the profiler, faster or not
    assert ev["basis_step_ns"] == pytest.approx(float(np.median(record["unprofiled_ns"])))
    # the share the title states is that loading's, of the step without the profiler
    share = 100.0 * ev["data_unprofiled_per_step_ns"] / ev["basis_step_ns"]
    assert ev["data_pct"] == pytest.approx(share)
    assert findings["input-pipeline"].title.endswith(
        f" takes {share:.1f}% of each step without the profiler"
    )
    # workers get the cores the training process left while the steps ran (fewer where the
    # machine's idle time, fine enough to tell, shows other work) and the loading thread's
    # share of one
    from perfkit_core.advice.loader_cores import IDLE_RESOLUTION_CORES

    idle, process = record["idle_cores"], record["process_cores"]
    thread_cores = (
        float(np.mean(data)) / float(np.median(record["unprofiled_ns"]))
        if ev["data_from"] == "thread"
        else 0.0
    )
    assert process is not None and 0.0 < process <= record["usable_cores"] + 0.1
    left, resolution = record["usable_cores"] - process, record["idle_resolution_cores"]
    if resolution <= IDLE_RESOLUTION_CORES and idle < left - resolution:
        left = idle  # other work took the rest
    assert ev["free_cores"] == float(int(max(left, 0.0) + thread_cores + 0.5))
    step = ev["basis_step_ns"]
    if ev["data_from"] == "thread":
        # beside the loading thread: each thread alone takes its CPU time less the GIL
        # hand-overs (the cost per op the step timer timed on this machine when it saved, per
        # op the profiler recorded, to the training thread; LOADING_OP_SHARE of it to the
        # loading thread), and the mean step holds those and the rest (the training thread's
        # waits, or less where the threads overlapped)
        from perfkit_core.advice.loader import LOADING_OP_SHARE

        op_ns = run.meta["step_timer"]["thread_op_ns"]  # the save's, beside the loader costs
        assert op_ns >= 0 and ev["thread_op_ns"] == op_ns
        assert ev["thread_op_from"] == "training machine"
        training = float(np.mean(record["phases"]["training_cpu"]["unprofiled_ns"]))
        assert ev["training_cpu_per_step_ns"] == pytest.approx(training)
        ev_table = run.events
        kinds = ev_table["kind"].astype(str).to_numpy()
        parents = ev_table["parent"].to_numpy()
        ops = [
            i
            for i in np.flatnonzero(
                (kinds == "operator")
                & (ev_table["stream"].to_numpy() < 0)
                & (ev_table["step"].to_numpy() >= 0)
                & ~np.isin(ev_table["tid"].to_numpy(), loading_thread_ids(run))
            )
            if parents[i] < 0 or kinds[parents[i]] != "operator"
        ]
        steps = int((kinds == "step").sum())
        assert ev["training_ops_per_step"] == pytest.approx(len(ops) / steps)
        loading_cpu = float(np.mean(data))
        handing = min(len(ops) / steps * op_ns, training, loading_cpu)
        # the mean step, less any step over OUTLIER_STEP_TIMES_MEDIAN times the median
        steps_ns = np.array(record["unprofiled_ns"], dtype=float)
        typical = steps_ns[steps_ns <= 5.0 * np.median(steps_ns)]
        mean_step = float(typical.mean())
        assert ev["outlier_steps"] == len(steps_ns) - len(typical)
        loading = max(float(np.mean(data)) - handing * LOADING_OP_SHARE, 0.0)
        rest = max(training - handing, 0.0)
        assert ev["loader_step_ns"] == pytest.approx(mean_step)
        assert ev["loading_per_step_ns"] == pytest.approx(loading)
        assert ev["rest_per_step_ns"] == pytest.approx(rest)
        assert ev["contention_per_step_ns"] == pytest.approx(mean_step - loading - rest)
        from perfkit_core.advice.text import duration_text

        estimate = findings["input-pipeline"].estimate
        if ev["free_cores"] > 0:  # else it says no core is free, and that no saving is expected
            assert f"less the {duration_text(handing)} of handing the GIL over" in estimate
            assert f"{duration_text(op_ns)}, timed on the machine that trained" in estimate
            assert (
                f"loading thread its CPU time less {duration_text(handing * LOADING_OP_SHARE)}"
            ) in estimate
            assert (
                f"{duration_text(loading)} of loading, {duration_text(rest)} of training"
            ) in estimate
            # 0.2 s of steps can hold one that waited for the machine: said, and left out
            outliers = len(steps_ns) - len(typical)
            left_out = (
                f", leaving out {outliers} step(s) over 5 times the median, which waited for "
                "something else"
                if outliers
                else ""
            )
            assert (
                f"The mean step without the profiler ({duration_text(mean_step)}{left_out})"
            ) in estimate
        # hand-overs the model puts at the loading thread's whole CPU time or more: the
        # split says it counts none of that CPU as loading
        capped = len(ops) / steps * op_ns >= loading_cpu
        assert ev["handovers_capped"] is capped
        assert findings["input-pipeline"].within_error is False
        assert ("as much CPU time as the loading thread ran" in estimate) is capped
    else:
        assert ev["contention_per_step_ns"] == 0.0
        assert ev["loading_per_step_ns"] == ev["data_unprofiled_per_step_ns"]
        assert ev["rest_per_step_ns"] == pytest.approx(max(step - ev["loading_per_step_ns"], 0.0))
        assert ev["loader_step_ns"] == step
    # a thread of the training process loaded: the save timed each training op's cost beside
    # one (the finding takes it only where it splits the thread's step)
    assert run.meta["step_timer"]["thread_op_ns"] >= 0
    # the hand-over cost Paddle's adapter timed on this machine when the step timer saved
    timed = run.meta["step_timer"]["loader_batch_ns"]
    assert timed > 0 and ev["loader_batch_ns"] == timed
    assert ev["loader_batch_from"] == "training machine"
    # and what receiving a batch added to a busy replayed training step there: Paddle's reader
    # thread takes the GIL the training thread's ops hand over
    received = run.meta["step_timer"]["loader_receive_ns"]
    assert received >= 0 and ev["loader_receive_ns"] == received
    assert ev["loader_receive_from"] == "training machine"
    slowdowns = _timed_slowdowns(run, ev)
    assert findings["input-pipeline"].saving_ns == pytest.approx(
        loader_saving(
            ev["loading_per_step_ns"],
            ev["rest_per_step_ns"],
            ev["free_cores"],
            timed,
            ev["contention_per_step_ns"],
            received,
            slowdowns,
        )
    )
    if ev["free_cores"] > 0:
        from perfkit_core.advice.text import duration_text

        assert (
            f"and receiving it adds {duration_text(received)} to the training step (timed on "
            "the machine that trained"
        ) in findings["input-pipeline"].estimate
    assert f"num_workers={max(int(ev['free_cores']), 1)}," in findings["input-pipeline"].remedy
    if ev["data_from"] == "thread":
        assert findings["input-pipeline"].title.startswith("Loading data in the training process")
        assert "the thread that loaded it" in findings["input-pipeline"].details[0]
        from perfkit_core.advice.text import unprofiled_per_step_text

        wait = unprofiled_per_step_text(float(np.mean(waits)), step)
        assert f"the training thread waited {wait} for its batches" in " ".join(
            findings["input-pipeline"].details
        )
    else:
        assert findings["input-pipeline"].title.startswith("Waiting for data takes")


def test_the_waits_timed_without_the_profiler_decide_whether_loading_is_advised(tmp_path):
    """Where the step timer timed the training thread's waits for its batches, the rule fires
    on their share of the step without the profiler, the share its title states, whatever the
    profiled waits were (a busy machine stretches the waits without the profiler while a
    loading thread fills its queue ahead of the profiled steps). A real Paddle run, its timed
    waits set to a quarter of the step, then to a hundredth, and its loading thread's CPU
    time a tenth of those."""
    pytest.importorskip("paddle")
    import copy

    from paddle_profiles import slow_loader_run

    import perfkit_core
    import perfkit_core.advice.engine as engine
    from perfkit_core.advice.rules.loading import INPUT_PIPELINE_MIN_PCT
    from perfkit_core.events.run import Run

    folder, _ = slow_loader_run(tmp_path, 0)
    run = perfkit_core.load(folder)

    def advised(share: float) -> dict:
        meta = copy.deepcopy(run.meta)
        timer = meta["step_timer"]
        steps = len(timer["unprofiled_ns"])
        step = 2_000_000
        timer["unprofiled_ns"] = [step] * steps
        waits = int(step * share / 100)
        timer["phases"]["data"]["unprofiled_ns"] = [waits] * steps
        timer["phases"]["loading"]["unprofiled_ns"] = [waits // 10] * steps
        return {f.id: f for f in engine.advise(Run(run.events, meta))}

    finding = advised(25.0)["input-pipeline"]
    assert finding.evidence["data_from"] == "timed"
    assert finding.evidence["data_pct"] == pytest.approx(25.0)
    assert finding.title == "Waiting for data takes 25.0% of each step without the profiler"
    assert INPUT_PIPELINE_MIN_PCT > 1.0 and "input-pipeline" not in advised(1.0)


def test_a_step_that_waited_for_something_else_is_not_the_loading_threads(tmp_path):
    """One step timed without the profiler that took fifty times the median (the machine or
    the collector stalled it) is left out of the mean step a loading thread's split takes
    apart: the contention, and the saving, are those of the other steps, the estimate says it
    left one out, and the saving stays below the step. A real Paddle run, its record given
    that step."""
    pytest.importorskip("paddle")
    from paddle_profiles import slow_loader_run

    import perfkit_core

    folder, record = slow_loader_run(tmp_path, 0)
    steps = list(record["unprofiled_ns"])
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["step_timer"]["unprofiled_ns"] = [*steps, 50 * float(np.median(steps))]
    meta_path.write_text(json.dumps(meta))
    finding = next(f for f in perfkit_core.load(folder).advise() if f.id == "input-pipeline")
    ev = finding.evidence
    if ev["data_from"] != "thread" or ev["training_cpu_per_step_ns"] is None:
        pytest.skip("the training thread waited longer than its loading thread loaded here")
    # the added step, and any of the run's own that a stall put over the bar
    bar = 5.0 * np.median([*steps, 50 * float(np.median(steps))])
    left_out = 1 + sum(s > bar for s in steps)
    assert ev["outlier_steps"] == left_out
    kept = np.array(steps, dtype=float)
    kept = kept[kept <= bar]
    assert ev["loader_step_ns"] == pytest.approx(float(kept.mean()))
    assert ev["contention_per_step_ns"] == pytest.approx(
        ev["loader_step_ns"] - ev["loading_per_step_ns"] - ev["rest_per_step_ns"]
    )
    assert finding.saving_ns <= ev["loader_step_ns"]
    if ev["free_cores"] > 0:
        assert f"leaving out {left_out} step(s) over 5 times the median" in finding.estimate


def test_the_loader_estimate_opens_with_the_step_the_workers_would_give(tmp_path):
    """The input-pipeline estimate ran to a paragraph before a reader learnt what it found: it
    now opens with the step the workers would give against the step now, and which side bounds
    it. Both recomputed from the finding's figures (the remedied step as ``loader_saving``
    takes it, the step now as the loading, the rest and the contention added up), on a real
    Paddle run with a loading thread."""
    pytest.importorskip("paddle")
    from paddle_profiles import slow_loader_run

    import perfkit_core
    from perfkit_core.advice.text import duration_text

    folder, _ = slow_loader_run(tmp_path, 0)
    run = perfkit_core.load(folder)
    finding = next(f for f in run.advise() if f.id == "input-pipeline")
    ev = finding.evidence
    if ev["free_cores"] <= 0 and "turn_process_cores" in ev:  # a busy machine, a thread split
        # one worker's turn on the busy cores (tests/test_loader_turns.py recomputes it)
        assert finding.estimate.startswith("With 1 loader worker the step would take about")
        return
    if ev["free_cores"] <= 0:  # a busy machine: the estimate opens with that instead
        assert finding.estimate.startswith("No core is free for loader workers")
        assert finding.saving_ns == 0
        return
    training, loading = _timed_slowdowns(run, ev)
    kept = ev["rest_per_step_ns"] * training + ev["loader_receive_ns"]
    spread = (ev["loading_per_step_ns"] * loading + ev["loader_batch_ns"]) / ev["free_cores"]
    after = max(kept, spread)
    now = ev["loading_per_step_ns"] + ev["rest_per_step_ns"] + ev["contention_per_step_ns"]
    assert finding.saving_ns == pytest.approx(max(now - after, 0.0))
    split = ev["training_cpu_per_step_ns"] is not None
    assert finding.estimate.startswith(
        f"With {ev['free_cores']:.0f} loader worker{'' if ev['free_cores'] == 1 else 's'} the "
        f"step would take about "
        f"{duration_text(after)}, against {duration_text(now)} now (the "
        f"{'mean ' if split else ''}step without the profiler)"
    )
    bound = "the rest of the step" if spread <= kept else "loading"
    pays = "" if after < now else ", so workers are not expected to pay here"
    now_of = "the mean step" if split else "the step"
    assert f"now ({now_of} without the profiler){pays}: {bound} bounds it. " in finding.estimate


def test_a_loading_thread_cheaper_than_its_hand_overs_counts_as_hand_overs(tmp_path):
    """A loading thread whose CPU time per step is below what the hand-overs would cost the
    training thread (its cost per op; as the demo's, which slices tensors) cannot be told
    from its hand-overs: the split counts all of
    it as the training thread's hand-overs, says so, and the finding keeps its place by saving
    (a worker saved time in every bench session of such a loop). A real Paddle run, its loading
    thread's timed figures set so: the thread's CPU half what the hand-overs would cost, the
    training thread's three times that, the step their sum."""
    pytest.importorskip("paddle")
    import copy

    from paddle_profiles import slow_loader_run

    import perfkit_core
    import perfkit_core.advice.engine as engine
    from perfkit_core.advice.loader import LOADING_OP_SHARE, THREAD_OP_NS, loader_saving
    from perfkit_core.events.run import Run

    folder, _ = slow_loader_run(tmp_path, 0)
    run = perfkit_core.load(folder)
    # the outermost ops per step, as the rule counts them (its evidence holds them only when
    # the run's own timed figures split a loading thread's step, which a busy machine decides)
    from perfkit_core.advice.rules.cpu import training_ops_per_step

    per_step = training_ops_per_step(make_context(run))
    assert per_step > 0
    meta = copy.deepcopy(run.meta)
    timer = meta["step_timer"]
    phases, steps = timer["phases"], len(timer["unprofiled_ns"])
    timer["thread_op_ns"] = THREAD_OP_NS  # the cost per op, as if the timer had timed it
    loading = int(0.5 * per_step * THREAD_OP_NS)  # half of what the hand-overs would cost
    training = 3 * loading
    phases["loading"]["unprofiled_ns"] = [loading] * steps
    phases["data"]["unprofiled_ns"] = [loading // 10] * steps  # the thread outlasts the waits
    phases["training_cpu"]["unprofiled_ns"] = [training] * steps
    timer["unprofiled_ns"] = [training + loading] * steps
    findings = engine.advise(Run(run.events, meta))
    finding = {f.id: f for f in findings}["input-pipeline"]
    ev = finding.evidence
    assert ev["data_from"] == "thread" and ev["handovers_capped"] is True
    assert ev["data_unprofiled_per_step_ns"] == loading
    # the hand-overs cost the training thread the thread's whole CPU time and the thread half
    # of it: half its CPU as loading, the training CPU less the thread's, and the step's other
    # 1.5x the thread's CPU time goes with it
    assert ev["loading_per_step_ns"] == pytest.approx(loading * (1 - LOADING_OP_SHARE))
    assert ev["rest_per_step_ns"] == training - loading
    assert ev["contention_per_step_ns"] == pytest.approx((1 + LOADING_OP_SHARE) * loading)
    assert finding.saving_ns == pytest.approx(
        loader_saving(
            loading * (1 - LOADING_OP_SHARE),
            training - loading,
            ev["free_cores"],
            ev["loader_batch_ns"],
            ev["contention_per_step_ns"],
            ev["loader_receive_ns"],
            _timed_slowdowns(run, ev),
        )
    )
    assert "as much CPU time as the loading thread ran" in finding.estimate
    assert finding.within_error is False
    # the hand-overs at the most the thread's CPU allows make the saving the most the model
    # gives: any share of them less leaves the training thread more and the workers less
    for share in (0.0, 0.5, 0.9):
        handed = share * loading
        assert finding.saving_ns >= loader_saving(
            loading - LOADING_OP_SHARE * handed,
            training - handed,
            ev["free_cores"],
            ev["loader_batch_ns"],
            training + loading - (loading - LOADING_OP_SHARE * handed) - (training - handed),
            ev["loader_receive_ns"],
            _timed_slowdowns(run, ev),
        )
    # ... and the reports say it is at most that, in the headline's sum too
    from perfkit_core.advice import Finding
    from perfkit_core.report.finding_summary import summarize
    from perfkit_core.report.headline import headline
    from perfkit_core.report.text import render_headline

    bounded = copy.deepcopy(finding)  # a busy machine may leave the workers nothing to save
    bounded.saving_ns = 1e6
    assert summarize(bounded).saving_line("input-pipeline").startswith("Saves up to ")
    # a second finding that promises host time, so that the headline sums them
    others = [Finding(id="optimizer", title="t", severity="medium", saving_ns=0.2e6)]
    top = headline(run, [bounded, *others], None, None)
    text = render_headline(top, "ms")
    assert "estimated saving up to " in text
    assert top.combined is not None and top.combined.upper_bound
    assert "would save up to " in text
    # perfkit compare's follow-up of it says the promise was at most that
    from perfkit_core.advice.followup import follow_up

    capped_run = Run(run.events, meta)
    rows, _ = follow_up(capped_run, capped_run, findings_before=[bounded], findings_after=[])
    assert rows[0].promised_up_to and rows[0].sentence().startswith("promised up to 1.00")
    bounded.evidence["handovers_capped"] = False
    assert summarize(bounded).saving_line("input-pipeline").startswith("Saves 1.000 ms")
    assert "up to" not in render_headline(headline(run, [bounded, *others], None, None), "ms")
    # ranked among the findings by its saving alone
    promising = [f for f in findings if f.saving_ns > 0 and not f.within_error]
    assert promising == sorted(promising, key=lambda f: -f.saving_ns)
    assert (finding in promising) is (finding.saving_ns > 0)


@pytest.mark.parametrize(
    ("data", "rest", "optimizer", "loader_after", "holds"),
    [
        # loading (11 ms) outlasts the rest once the optimizer's 4.3 ms leave it: with a worker
        # the step is 11 + 1.3 ms either way, so the loader saves only what the rest still hid
        (11e6, 8.7e6, 4.3e6, 3.1e6, False),
        # the rest (12 ms, then 9 ms) outlasts the loading (5 ms) either way: both savings add
        (5e6, 12e6, 3e6, 3.7e6, True),
    ],
)
def test_combined_saving_simulates_the_loader_with_the_other_remedies(
    data, rest, optimizer, loader_after, holds
):
    from perfkit_core.advice import Finding
    from perfkit_core.advice.combine import combined_saving

    loader = _loader_finding(data, rest)
    other = Finding(id="optimizer", title="t", severity="", saving_ns=optimizer, rule="optimizer")
    step = data + rest
    total, how = combined_saving([loader, other], step)
    assert total == pytest.approx(optimizer + loader_after)
    # recomputed another way: the step with both remedies, by the model's own terms
    after = max(rest - optimizer + LOADER_BATCH_NS, data + LOADER_BATCH_NS)
    assert total == pytest.approx(step - after)
    if holds:
        assert total == pytest.approx(loader.saving_ns + optimizer)
        assert "holds with the others applied" in how
    else:
        assert total < loader.saving_ns + optimizer
        assert "the input pipeline saves 3.1 ms per step, not 7.4 ms" in how


def _loader_finding(data: float, rest: float):
    """An input-pipeline finding of ``data`` ns of loading and ``rest`` ns of the rest of the
    step, one free core, its saving the model's."""
    from perfkit_core.advice import Finding

    return Finding(
        id="input-pipeline",
        title="t",
        severity="",
        saving_ns=loader_saving(data, rest, 1.0),
        rule="input-pipeline",
        evidence={"loading_per_step_ns": data, "rest_per_step_ns": rest, "free_cores": 1.0},
    )


def test_hand_overs_an_optimizer_saves_go_with_the_loading_thread_in_the_combined_saving():
    """An optimizer finding whose saving holds hand-overs of the GIL to a loading thread
    (``handover_saving_ns``): applied with loader workers, which remove the thread, only its
    own work's saving is left; the loader is simulated on the rest of the step less that."""
    from perfkit_core.advice import Finding
    from perfkit_core.advice.combine import combined_saving

    data, rest, own, handover = 11e6, 8.7e6, 1.0e6, 2.5e6
    loader = _loader_finding(data, rest)
    optimizer = Finding(
        id="optimizer",
        title="t",
        severity="",
        saving_ns=own + handover,
        rule="optimizer",
        evidence={"handover_saving_ns": handover},
    )
    total, how = combined_saving([loader, optimizer], data + rest)
    # recomputed from the model's terms: the step with both remedies
    after = max(rest - own + LOADER_BATCH_NS, data + LOADER_BATCH_NS)
    assert total == pytest.approx(data + rest - after)
    assert total < loader.saving_ns + optimizer.saving_ns
    assert "the 2.5 ms per step the others save in hand-overs of the GIL" in how
    # without the loader finding the optimizer's saving is all its own
    alone, _ = combined_saving([optimizer], data + rest)
    assert alone == pytest.approx(own + handover)


@pytest.fixture(scope="module")
def paddle_adam_loading(tmp_path_factory):
    pytest.importorskip("paddle")
    from paddle_profiles import adam_beside_loading_thread_run

    return adam_beside_loading_thread_run(tmp_path_factory.mktemp("adam_loading"))


def test_paddle_optimizer_beside_a_loading_thread_counts_the_hand_overs_it_removes(
    paddle_adam_loading, monkeypatch
):
    """Paddle's per-parameter Adam beside the single-process DataLoader's loading thread: the
    optimizer finding keeps the thread's figures the step timer timed (the same as the
    input-pipeline finding's), and ``--measure`` states its saving as the replay's difference
    (the optimizer's own work) plus the hand-overs of the GIL the remedy's fewer ops remove:
    both threads' ``handover_ns(...) * removed / ops`` at the replayed cost per op."""
    import perfkit_core
    from perfkit_core.advice.rules import optimizer
    from perfkit_core.advice.rules.optimizer import OPTIMIZER_SPEEDUPS

    # the optimizer's share of this loading-bound step moves around the rule's threshold from
    # machine to machine; what is checked here is the saving once it fires
    monkeypatch.setattr(optimizer, "OPTIMIZER_MIN_STEP_PCT", 1.0)
    folder, record = paddle_adam_loading
    run = perfkit_core.load(folder)
    modelled = {f.id: f for f in run.advise()}
    ev = modelled["optimizer"].evidence
    phases = record["phases"]
    loading = float(np.mean(phases["loading"]["unprofiled_ns"]))
    if loading <= float(np.mean(phases["data"]["unprofiled_ns"])):
        # the training thread waited longer than the thread loaded: no thread took its turns
        assert "loading_thread_cpu_per_step_ns" not in ev
        pytest.skip("the loading thread ran no longer than the training thread's waits here")
    training = float(np.mean(phases["training_cpu"]["unprofiled_ns"]))
    assert ev["loading_thread_cpu_per_step_ns"] == pytest.approx(loading)
    assert ev["training_cpu_per_step_ns"] == pytest.approx(training)
    # the training thread's ops, recounted: outermost host operators per step, on threads
    # other than Paddle's loading thread (named Dataloader_<id>)
    kinds = run.events["kind"].astype(str).to_numpy()
    parents = run.events["parent"].to_numpy()
    loaders = loading_thread_ids(run)
    counted = (
        (kinds == "operator")
        & (run.events["stream"].to_numpy() < 0)
        & (run.events["step"].to_numpy() >= 0)
        & ~np.isin(run.events["tid"].to_numpy(), loaders)
    )
    outermost = [
        i for i in np.flatnonzero(counted) if parents[i] < 0 or kinds[parents[i]] != "operator"
    ]
    ops = len(outermost) / int((kinds == "step").sum())
    assert ev["training_ops_per_step"] == pytest.approx(ops)
    if "input-pipeline" in modelled:  # one figure, one meaning
        assert modelled["input-pipeline"].evidence["training_ops_per_step"] == pytest.approx(ops)
    assert ev["optimizer_ops_per_step"] == 66  # one adam_ per parameter
    # the model's saving is the timed optimizer made faster, as without a thread
    timed = float(np.median(phases["optimizer"]["unprofiled_ns"]))
    speedup = OPTIMIZER_SPEEDUPS["paddle"]["Adam"]
    assert modelled["optimizer"].saving_ns == pytest.approx(timed * (1 - 1 / speedup))
    assert "holds the loading thread's turns with the GIL" in modelled["optimizer"].estimate

    measured = {f.id: f for f in run.advise(measure=True)}
    m = measured["optimizer"].evidence
    op_ns = m["replay_thread_op_ns"]
    assert op_ns >= 0
    if (
        "replay_thread_op_ns"
        in measured.get("input-pipeline", SimpleNamespace(evidence={})).evidence
    ):
        # the two findings' replays of the cost per op are one
        assert measured["input-pipeline"].evidence["replay_thread_op_ns"] == op_ns
    from perfkit_core.advice.loader import LOADING_OP_SHARE

    if ops * op_ns >= loading:
        # at this machine's cost per op the hand-overs would take all of the thread's CPU:
        # they cannot be told from its loading, and the timed optimizer is made faster
        assert m["handovers_capped"] is True and "handover_saving_ns" not in m
        assert measured["optimizer"].saving_ns == pytest.approx(
            timed * (1 - m["replay_remedy_ns"] / m["replay_loop_ns"])
        )
        assert "cannot be told from its loading" in measured["optimizer"].estimate
        return
    assert m["handover_ops_removed"] == 65  # the 66 adam_ calls become one merged_adam_
    each = min(ops * op_ns, training, loading)  # the training thread's
    handover = each * (1 + LOADING_OP_SHARE) * 65 / ops
    assert m["handover_saving_ns"] == pytest.approx(handover)
    own = max(m["replay_loop_ns"] - m["replay_remedy_ns"], 0.0)
    assert measured["optimizer"].saving_ns == pytest.approx(own + handover)
    assert f"{own / 1e6:.3f} ms of the optimizer's own work" in measured["optimizer"].estimate
    assert f"{handover / 1e6:.3f} ms per step more" in measured["optimizer"].estimate


@pytest.mark.parametrize("loading_cpu", [4e6, 1e6])
def test_the_optimizer_replay_beside_a_loading_thread(loading_cpu):
    """The replayed saving beside a loading thread, recomputed from its terms: the replay's
    difference plus both threads' hand-overs for the ops removed (65 of 200 a step at 10 us to
    the training thread and half that to the loading one); where 200 ops at 10 us (2 ms) reach
    the thread's CPU (1 ms), the timed optimizer made as much faster as the replay was, saying
    why."""
    from perfkit_core.advice.optimizer import replayed_optimizer_saving

    evidence = {
        "loading_thread_cpu_per_step_ns": loading_cpu,
        "training_cpu_per_step_ns": 8e6,
        "training_ops_per_step": 200.0,
        "optimizer_ops_per_step": 66.0,
        "optimizer_unprofiled_per_step_ns": 3e6,
        "optimizer_unprofiled_from": "timed",
    }
    finding = SimpleNamespace(evidence=evidence)
    result = replayed_optimizer_saving(finding, 1.5e6, 0.9e6, "use_multi_tensor=True", "ran", 10e3)
    if loading_cpu > 200 * 10e3:
        # each removed op: 10 us to the training thread, half that to the loading thread
        assert result["saving_ns"] == pytest.approx(0.6e6 + 1.5 * 65 * 10e3)
        assert result["evidence"]["handover_saving_ns"] == pytest.approx(0.975e6)
        assert "0.975 ms per step more" in result["estimate"]
    else:
        assert result["saving_ns"] == pytest.approx(3e6 * (1 - 0.9 / 1.5))
        assert result["evidence"]["handovers_capped"] is True
        assert "handover_saving_ns" not in result["evidence"]
        assert "cannot be told from its loading" in result["estimate"]


def test_a_multi_tensor_optimizer_runs_one_op_a_step(tmp_path):
    """``REMEDY_OPS_PER_STEP``, recounted: Paddle's ``use_multi_tensor=True`` Adam runs one
    outermost op per step in its optimizer spans where the loop ran one per parameter."""
    import perfkit_core
    from perfkit_core.advice.optimizer import REMEDY_OPS_PER_STEP
    from perfkit_core.advice.rules.cpu import outermost_ops

    per_step = {}
    for multi in (False, True):
        run = perfkit_core.load(_record_paddle(tmp_path / str(multi), multi_tensor=multi))
        ctx = make_context(run)
        _, in_optimizer, _ = outermost_ops(ctx)
        per_step[multi] = int(in_optimizer.sum()) / ctx.steps
    assert per_step[False] == 26  # 13 Linear and LayerNorm layers, two parameters each
    assert per_step[True] == REMEDY_OPS_PER_STEP


def test_torch_loading_is_taken_from_the_step_timers_steps(tmp_path):
    """The input-pipeline rule takes the loading per step from the step timer's record of the
    training thread getting its batches (the same unprofiled steps as the step's own time),
    not from the profiled waits: its figure is their mean, the rest of the step is the
    unprofiled step less it, and the saving the model of the two."""
    import perfkit_core

    class Slow:
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, index: int):
            x = np.random.default_rng(index).standard_normal(128)
            for _ in range(24):  # loading well above the rule's 5% of a step a stall may stretch
                x = np.sort(np.tanh(x * 1.01 + 0.1))
            return torch.from_numpy(x[:16].astype("float32")), index % 4

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batches = iter(torch.utils.data.DataLoader(Slow(), batch_size=8))

    def step() -> None:
        x, y = next(batches)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()

    folder, record = _profile_and_time(tmp_path, "loader", step, wait=4, after=8)
    data = record["phases"]["data"]["unprofiled_ns"]
    assert len(data) == len(record["unprofiled_ns"]) and all(v > 0 for v in data)
    run = perfkit_core.load(folder)
    found = {f.id: f for f in run.advise()}
    assert "input-pipeline" in found, (run.summary("model").to_string(), list(found))
    finding = found["input-pipeline"]
    ev = finding.evidence
    assert ev["data_from"] == "timed"
    assert ev["data_unprofiled_per_step_ns"] == pytest.approx(float(np.mean(data)))
    assert ev["rest_per_step_ns"] == pytest.approx(
        max(ev["basis_step_ns"] - ev["data_unprofiled_per_step_ns"], 0.0)
    )
    # handing a batch over costs what torch's adapter timed here when the step timer saved
    timed = run.meta["step_timer"]["loader_batch_ns"]
    assert timed > 0 and ev["loader_batch_ns"] == timed
    assert ev["loader_batch_from"] == "training machine"
    slowdowns = _timed_slowdowns(run, ev)
    assert finding.saving_ns == pytest.approx(
        loader_saving(
            ev["data_unprofiled_per_step_ns"],
            ev["rest_per_step_ns"],
            ev["free_cores"],
            timed,
            0.0,
            timed,
            slowdowns,
        )
    )
    from perfkit_core.advice.text import duration_text

    # the remedy prescribes the workers the saving was estimated for
    assert f"num_workers={max(int(ev['free_cores']), 1)}," in finding.remedy
    if ev["free_cores"] > 0:  # else it says no core is free, and that no saving is expected
        assert (
            f"Handing a batch over costs each side {duration_text(timed)} in torch's loader "
            "under the file_system sharing strategy the remedy sets (timed on the machine that trained, when the step timer saved the run)"
        ) in finding.estimate
        # the factors in the formula are the ones the sentence states
        rest_x = _factors(*slowdowns)[0]
        assert f"{duration_text(ev['rest_per_step_ns'])}{rest_x} + " in finding.estimate
        assert _slowdown_said(*slowdowns, "torch", "on the machine that trained") in (
            finding.estimate
        )

    share = 100 * ev["data_unprofiled_per_step_ns"] / ev["basis_step_ns"]
    step = duration_text(ev["basis_step_ns"])
    assert (
        f"{duration_text(ev['data_unprofiled_per_step_ns'])} per step ({share:.1f}% of the "
        f"{step} step without the profiler) getting its batches"
    ) in " ".join(finding.details)


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_the_loader_remedy_prescribes_the_workers_its_saving_counts(framework):
    """The input-pipeline remedy sets ``num_workers`` to the free cores the saving was
    estimated for, says so, says to free a core first when none was free, and keeps the
    general advice (4 workers) when the finding does not count them."""
    if framework == "torch":
        from perfkit_torch.remedies import remedy
    else:
        from perfkit_paddle.remedies import remedy

    def text(**evidence) -> str:
        return remedy(SimpleNamespace(rule="input-pipeline", evidence=evidence))

    one = text(free_cores=1.0, has_device=False)
    assert "num_workers=1," in one and "(1 worker(s): the free core(s) the saving" in one
    if framework == "torch":  # the sharing strategy the saving is estimated with, and why
        from perfkit_core.advice.loader import LOADER_HANDOVER_BY_FRAMEWORK
        from perfkit_torch.remedies import REMEDY_SHARING_STRATEGY

        assert f"set_sharing_strategy('{REMEDY_SHARING_STRATEGY}')" in one
        # the estimate names the strategy the remedy sets
        assert f" {REMEDY_SHARING_STRATEGY} " in LOADER_HANDOVER_BY_FRAMEWORK["torch"]
        assert f"saving is estimated for {REMEDY_SHARING_STRATEGY}" in one
        gpu = text(free_cores=1.0, has_device=True)
        assert f"set_sharing_strategy('{REMEDY_SHARING_STRATEGY}')" in gpu
    else:  # Paddle's workers share batches their own way
        assert "sharing_strategy" not in one
    three = text(free_cores=3.0, has_device=True)
    assert "num_workers=3," in three and "(3 worker(s)" in three
    none = text(free_cores=0.0, has_device=False)
    assert "num_workers=1," in none and "No core was free" in none
    for unknown in ({}, {"free_cores": math.nan}, {"free_cores": True}):
        assert "num_workers=4," in text(**unknown)
        assert "worker(s): the free core(s)" not in text(**unknown)
