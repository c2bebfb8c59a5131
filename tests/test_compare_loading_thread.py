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
    """The slow-Dataset Paddle loop (``paddle_profiles.slow_loader_run``), loaded."""
    pytest.importorskip("paddle")
    from paddle_profiles import slow_loader_run

    folder, _ = slow_loader_run(tmp_path / f"workers{workers}", workers, name="nw")
    return perfkit_core.load(folder)


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

    line = next(x for x in verdict.lines("ms") if x.startswith("loading no row shows"))
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
