"""``perfkit compare`` of a Paddle run that loads in its single-process DataLoader's thread
against the same loop with a worker process: the thread is in neither trace, so the data row
grows while the step shrinks, and the verdict says where the loading went, with the figure the
input-pipeline finding states."""

from __future__ import annotations

import json

import numpy as np
import pytest
from markupsafe import escape

import perfkit_core


def _run(tmp_path, workers: int):
    """A small Paddle CPU loop fed by a Dataset whose samples cost CPU, profiled with the
    perfkit handler and timed with the step timer with and without the profiler."""
    paddle = pytest.importorskip("paddle")
    import paddle.profiler as profiler

    from perfkit_paddle.handler import on_trace_ready

    class Slow(paddle.io.Dataset):
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, index: int):
            x = np.random.default_rng(index).standard_normal(128)
            for _ in range(8):
                x = np.sort(np.tanh(x * 1.01 + 0.1))
            return x[:16].astype("float32"), np.array([index % 4], dtype="int64")

    paddle.set_device("cpu")
    paddle.seed(0)
    model = paddle.nn.Sequential(
        paddle.nn.Linear(16, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 4)
    )
    optimizer = paddle.optimizer.SGD(learning_rate=1e-3, parameters=model.parameters())
    loader = paddle.io.DataLoader(Slow(), batch_size=8, num_workers=workers)
    batches = iter(loader)

    def step() -> None:
        x, y = next(batches)
        paddle.nn.functional.cross_entropy(model(x), y.squeeze(-1)).backward()
        optimizer.step()
        optimizer.clear_grad()

    handler = on_trace_ready(tmp_path / f"workers{workers}", worker_name="nw", background=False)
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 6), on_trace_ready=handler
    )
    timer = perfkit_core.step_timer(prof, warmup=2)
    try:
        prof.start()
        for _ in range(6):
            with timer.step():
                step()
            prof.step()
        prof.stop()
        for _ in range(8):
            with timer.step():
                step()
        timer.save(handler.runs)
    finally:
        timer.close()
    return perfkit_core.load(handler.runs[0])


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loading_thread")
    return _run(tmp, 0), _run(tmp, 1)


def test_the_verdict_says_where_the_single_process_loading_went(pair):
    thread, workers = pair
    comparison = perfkit_core.compare(thread, workers, labels=["thread", "workers"])
    verdict = comparison.verdict()
    # recomputed from the step timer's record: the loading thread's CPU time per batch, its
    # mean over the unprofiled steps, against their median step
    record = thread.meta["step_timer"]
    loading = float(np.mean(record["phases"]["loading"]["unprofiled_ns"]))
    step = float(np.median(record["unprofiled_ns"]))
    assert loading > 0
    # a worker loads outside the training process: nothing timed there
    assert "loading" not in workers.meta["step_timer"].get("phases", {}) or not any(
        workers.meta["step_timer"]["phases"]["loading"]["unprofiled_ns"]
    )
    assert verdict.loading_thread_ns == [pytest.approx(loading), None]

    line = verdict.lines("ms")[1]
    assert line.startswith("loading no row shows: thread loaded its batches in a thread")
    assert f"{loading / 1e6:.3f} ms per step of that thread's CPU time" in line
    assert f"({100 * loading / step:.1f}% of its median step without the profiler)" in line
    assert "workers loaded no batches in such a thread" in line

    # one figure: the input-pipeline finding of the same run states the same loading when it
    # states the thread's; it states the training thread's waits when they were longer
    finding = {f.id: f for f in thread.advise()}["input-pipeline"]
    if finding.evidence["data_from"] == "thread":
        assert finding.evidence["data_unprofiled_per_step_ns"] == pytest.approx(loading)
    else:
        assert finding.evidence["data_unprofiled_per_step_ns"] >= loading
    assert finding.evidence["basis_step_ns"] == pytest.approx(step)

    # the same line in JSON and HTML
    from perfkit_core.report import render
    from perfkit_core.report.comparison_model import build_comparison_report

    report = build_comparison_report(comparison)
    data = json.loads(render(report, "json"))
    assert data["verdict"]["loading_thread_ns"] == {
        "thread": pytest.approx(loading),
        "workers": None,
    }
    assert str(escape(line)) in render(report, "html")  # escaped as the page escapes it


def test_no_line_when_no_run_loaded_in_a_thread(pair):
    _, workers = pair
    verdict = perfkit_core.compare(workers, workers, labels=["a", "b"]).verdict()
    assert verdict.loading_thread_ns == [None, None]
    assert verdict.hidden_loading() == ""
    assert not any(line.startswith("loading no row shows") for line in verdict.lines())


def test_a_verdict_built_without_the_loading_figures_reads_none(pair):
    import dataclasses

    thread, workers = pair
    verdict = perfkit_core.compare(thread, workers).verdict()
    bare = dataclasses.replace(verdict, loading_thread_ns=[])
    assert bare.hidden_loading() == ""
    assert len(bare.lines()) == len(verdict.lines()) - 1
    assert set(bare.to_dict()["loading_thread_ns"].values()) == {None}
