"""Advice savings against the step without the profiler, and measured by replays
(``advise(measure=True)``, ``perfkit advise --measure``), on real torch CPU runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from perfkit_core.advice.basis import recorded_events_per_step, step_basis  # noqa: E402
from perfkit_core.advice.engine import make_context  # noqa: E402
from perfkit_core.advice.rules.host import loader_saving  # noqa: E402


def _record(directory: Path, *, foreach: bool = False, blocks: int = 6) -> tuple[Path, list]:
    """A narrow MLP trained with Adam (the per-parameter loop unless ``foreach``) under
    torch.profiler with perfkit's handler and a step timer (profiled and unprofiled steps).
    Returns (the run folder, the model's parameter shapes)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_core
    from perfkit_torch.handler import on_trace_ready

    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    layers: list = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(16, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()

    handler = on_trace_ready(directory, worker_name="adam", background=False)
    timer = perfkit_core.step_timer(None, warmup=0)
    try:
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
            on_trace_ready=handler,
            record_shapes=True,
        ) as prof:
            timer.profiler = prof
            for _ in range(6):
                with timer.step():
                    step()
                prof.step()
        for _ in range(6):
            with timer.step():
                step()
    finally:
        torch.set_num_threads(threads)
    assert handler.runs, handler.failures
    timer.save(handler.runs)
    return handler.runs[0], [list(p.shape) for p in model.parameters()]


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
    assert extra > 0  # the profiler slows a loop of tiny ops
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
    assert basis.event_cost_ns == pytest.approx(extra / (len(counted) / ctx.steps))


def test_optimizer_saving_is_on_the_unprofiled_optimizer_time(adam_loop):
    import perfkit_core
    from perfkit_core.advice.rules.cpu import OPTIMIZER_SPEEDUPS

    folder, shapes = adam_loop
    run = perfkit_core.load(folder)
    finding = next(f for f in run.advise() if f.id == "optimizer")
    ev = finding.evidence
    assert ev["basis"] == "unprofiled"
    assert ev["optimizer_class"] == "Adam"
    assert ev["parameter_shapes"] == shapes  # recorded shapes = the model's parameters
    assert ev["optimizer_unprofiled_per_step_ns"] < ev["optimizer_per_step_ns"]
    speedup = OPTIMIZER_SPEEDUPS["torch"]["Adam"]
    assert finding.saving_ns == pytest.approx(
        ev["optimizer_unprofiled_per_step_ns"] * (1 - 1 / speedup)
    )
    assert "without the profiler" in finding.estimate


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
    assert ev["replay_loop_ns"] > ev["replay_remedy_ns"] > 0
    assert measured.saving_ns == pytest.approx(ev["replay_loop_ns"] - ev["replay_remedy_ns"])
    assert ev["modelled_saving_ns"] == pytest.approx(modelled.saving_ns)
    assert f"{len(shapes)} recorded parameter shapes" in measured.estimate
    # Only the adapter of the run's framework replays, and only what it recorded.
    pm = get_plugin_manager()
    assert pm.hook.perfkit_measure_saving(finding=measured, framework="paddle") is None
    modelled.evidence["parameter_shapes"] = []
    assert pm.hook.perfkit_measure_saving(finding=modelled, framework="torch") is None


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
    ],
)
def test_loader_saving_is_bounded_by_the_workers(data, rest, workers, expected):
    assert loader_saving(data, rest, workers) == pytest.approx(expected)
