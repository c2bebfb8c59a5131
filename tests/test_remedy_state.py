"""Whether a remedy was applied is read from the runs: the DataLoader's iterator (one process or
workers), in torch's real GPU traces and in real Paddle runs on the CPU; ``perfkit compare``'s
follow-up says so, and a finding whose setting did not change is not acted on whatever its time
did (the optimizer and compile cases are in ``test_advice_savings`` and
``test_advice_compile``, on their real runs)."""

from __future__ import annotations

import json

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.advice.followup import follow_up
from perfkit_core.advice.remedy_state import (
    SINGLE_PROCESS,
    WORKER_PROCESSES,
    compile_state,
    loader_mode,
)
from tests.peer_definitions import read_events


def _iterators(path) -> set[str]:
    """The DataLoader iterator classes a raw Kineto trace names."""
    found = set()
    for event in read_events(path):
        name = str(event.get("name", ""))
        if name.startswith("enumerate(DataLoader)#"):
            found.add(name.split("#", 1)[1].split(".", 1)[0])
    return found


def test_the_loader_workers_of_the_real_resnet_runs_are_read_and_followed():
    before_path, after_path = shared_trace("resnet_nw0"), shared_trace("resnet_nw4")
    assert _iterators(before_path) == {"_SingleProcessDataLoaderIter"}
    assert _iterators(after_path) == {"_MultiProcessingDataLoaderIter"}
    before, after = perfkit_core.load(before_path), perfkit_core.load(after_path)
    assert loader_mode(before) == SINGLE_PROCESS and loader_mode(after) == WORKER_PROCESSES
    assert compile_state(before) == compile_state(after) == "eager"
    rows, figures = follow_up(before, after)
    row = next(r for r in rows if r.id == "input-pipeline")
    assert row.acted_on and (row.state_before, row.state_after) == (
        SINGLE_PROCESS,
        WORKER_PROCESSES,
    )
    assert row.sentence().endswith("(single-process to worker processes)")
    # The only finding acted on takes the whole step time delivered.
    assert [r.id for r in rows if r.acted_on] == ["input-pipeline"]
    assert row.delivered_ns == pytest.approx(figures["delivered_ns"])
    # Against itself the loader is unchanged: not acted on, whatever the finding's figures say.
    rows, _ = follow_up(before, before, findings_after=[])
    row = next(r for r in rows if r.id == "input-pipeline")
    assert not row.acted_on and row.delivered_ns is None
    assert "not acted on (still single-process; its time fell below" in row.sentence()


def test_the_real_resnet_pair_s_delivered_time_has_its_profiled_interval():
    """No step timer in the V100 traces: the delivered time is the difference of the mean
    profiled steps, recomputed from the raw events as the TensorBoard plugin times a step
    (``tb_steps``), and its 95% interval lies where 20000 resamples of those steps with the
    standard library put the 2.5% and 97.5% points (between the 1% and 4% points, and the 96%
    and 99%: the follow-up takes 2000). The sentence places the promise against it."""
    import random
    import statistics

    from tests.peer_definitions import tb_steps

    paths = shared_trace("resnet_nw0"), shared_trace("resnet_nw4")
    steps = [[float(e - s) for s, e in tb_steps(read_events(p))] for p in paths]
    before, after = (perfkit_core.load(p) for p in paths)
    rows, figures = follow_up(before, after)
    assert figures["basis"] == "profiled"
    assert figures["delivered_ns"] == pytest.approx(
        statistics.fmean(steps[0]) - statistics.fmean(steps[1]), rel=1e-6
    )
    rng = random.Random(3)
    diffs = sorted(
        statistics.fmean(rng.choices(steps[0], k=len(steps[0])))
        - statistics.fmean(rng.choices(steps[1], k=len(steps[1])))
        for _ in range(20000)
    )
    at = [diffs[int(q * len(diffs))] for q in (0.01, 0.04, 0.96, 0.99)]
    assert at[0] <= figures["delivered_low_ns"] <= at[1]
    assert at[2] <= figures["delivered_high_ns"] <= at[3]
    row = next(r for r in rows if r.id == "input-pipeline")
    assert (row.delivered_low_ns, row.delivered_high_ns) == (
        figures["delivered_low_ns"],
        figures["delivered_high_ns"],
    )
    where = (
        "less than promised"
        if row.promised_ns > row.delivered_high_ns
        else "more than promised"
        if row.promised_ns < row.delivered_low_ns
        else "the promise is within it"
    )
    assert f": {where} (single-process to worker processes)" in row.sentence()


def _paddle_run(tmp_path, workers: int):
    """A Paddle loop fed by ``paddle.io.DataLoader(num_workers=workers)``, profiled on the CPU
    and exported as Paddle's own JSON trace."""
    paddle = pytest.importorskip("paddle")
    import numpy as np
    import paddle.profiler as profiler

    class Data(paddle.io.Dataset):
        def __len__(self) -> int:
            return 256

        def __getitem__(self, index: int):
            return np.full(16, index, dtype="float32"), np.array([index % 4], dtype="int64")

    paddle.set_device("cpu")
    model = paddle.nn.Linear(16, 4)
    optimizer = paddle.optimizer.SGD(learning_rate=1e-3, parameters=model.parameters())
    loader = paddle.io.DataLoader(Data(), batch_size=8, num_workers=workers)
    prof = profiler.Profiler(  # no handler: Paddle's default writes into the working folder
        targets=[profiler.ProfilerTarget.CPU], scheduler=(1, 5), on_trace_ready=lambda p: None
    )
    prof.start()
    for i, (x, y) in enumerate(loader):
        paddle.nn.functional.cross_entropy(model(x), y.squeeze(-1)).backward()
        optimizer.step()
        optimizer.clear_grad()
        prof.step()
        if i == 6:
            break
    prof.stop()
    path = tmp_path / f"paddle_workers{workers}.json"
    prof.export(str(path), format="json")
    return path


def test_paddle_loader_workers_are_read_from_its_trace(tmp_path):
    single, workers = _paddle_run(tmp_path, 0), _paddle_run(tmp_path, 1)
    names = {
        str(e.get("name", "")).split("[", 1)[0]
        for e in json.loads(workers.read_text())["traceEvents"]
        if "DataLoaderIter" in str(e.get("name", ""))
    }
    assert names == {"_DataLoaderIterMultiProcess"}
    assert loader_mode(perfkit_core.load(single)) == SINGLE_PROCESS
    assert loader_mode(perfkit_core.load(workers)) == WORKER_PROCESSES


def test_a_run_with_workers_already_is_followed_by_its_measured_time():
    """BEFORE already loads in workers: its remedy is more of them, which the iterator does not
    show, so the waits for data decide, as for a run with no loader spans."""
    from perfkit_core.advice import Finding

    after = perfkit_core.load(shared_trace("resnet_nw4"))
    assert loader_mode(after) == WORKER_PROCESSES

    def waits(ns: float) -> Finding:
        evidence = {"data_per_step_ns": ns}
        return Finding(id="input-pipeline", title="", severity="", saving_ns=ns, evidence=evidence)

    for later, acted in ((2e6, True), (8e6, False)):
        rows, _ = follow_up(
            after, after, findings_before=[waits(10e6)], findings_after=[waits(later)]
        )
        assert rows[0].acted_on is acted
        assert rows[0].state_before is None and rows[0].state_after is None
        assert "worker processes" not in rows[0].sentence()
