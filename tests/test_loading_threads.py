"""A loading thread's framework ops are loading, not the training thread's: the ops per step
that the CPU, optimizer and input-pipeline findings count leave them out, recounted here from
the raw events by the threads' names."""

from __future__ import annotations

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

from paddle_profiles import loading_thread_ids  # noqa: E402

import perfkit_core  # noqa: E402
from perfkit_core.advice.engine import make_context  # noqa: E402
from perfkit_core.advice.rules.cpu import (  # noqa: E402
    loading_thread_ops_per_step,
    loading_threads,
    outermost_ops,
    training_ops_per_step,
)
from perfkit_core.events.run import Run  # noqa: E402


def _outermost_by_thread(run: Run) -> dict[int, int]:
    """Outermost host operators in the steps per thread id, by a walk up each op's parents."""
    ev = run.events
    kinds = ev["kind"].astype(str).to_numpy()
    parents = ev["parent"].to_numpy()
    tids = ev["tid"].to_numpy()
    counted = (kinds == "operator") & (ev["stream"].to_numpy() < 0) & (ev["step"].to_numpy() >= 0)
    found: dict[int, int] = {}
    for i in np.flatnonzero(counted):
        up = parents[i]
        while up >= 0 and kinds[up] != "operator":
            up = parents[up]
        if up < 0:
            found[int(tids[i])] = found.get(int(tids[i]), 0) + 1
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    from paddle_profiles import tensor_loader_run

    return perfkit_core.load(tensor_loader_run(tmp_path_factory.mktemp("tensor-loader")))


def test_a_tensor_datasets_slices_are_the_loading_threads_not_the_training_threads(run):
    loaders = loading_thread_ids(run)
    assert loaders, run.meta["threads"]  # Paddle names its loading thread
    assert loading_threads(run) == loaders
    by_thread = _outermost_by_thread(run)
    loading_ops = sum(n for tid, n in by_thread.items() if tid in loaders)
    training = sum(n for tid, n in by_thread.items() if tid not in loaders)
    assert loading_ops > 0  # the slices were recorded on the loading thread
    ctx = make_context(run)
    steps = ctx.steps
    assert training_ops_per_step(ctx) == pytest.approx(training / steps)
    assert loading_thread_ops_per_step(ctx) == pytest.approx(loading_ops / steps)
    # every mask the rules share leaves the loading thread's ops out
    tids = run.events["tid"].to_numpy()
    for mask in outermost_ops(ctx):
        assert not np.isin(tids[mask], loaders).any()


def test_a_thread_no_adapter_names_is_taken_for_one_that_trains(run):
    as_torch = Run(run.events, {**run.meta, "framework": "torch"})
    assert loading_threads(as_torch) == []
    ctx = make_context(as_torch)
    assert training_ops_per_step(ctx) == pytest.approx(
        sum(_outermost_by_thread(run).values()) / ctx.steps
    )
    assert loading_thread_ops_per_step(ctx) == 0.0


def _uncovered_ns(run: Run, threads: set[int] | None) -> float:
    """Time inside the step spans when none of ``threads`` (None: every thread) ran host work
    (ops, data loading, copies, collectives), by a sweep over each step's sorted intervals."""
    ev = run.events
    kinds = ev["kind"].astype(str).to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    tids = ev["tid"].to_numpy()
    work = np.isin(kinds, ["operator", "dataloader", "communication", "memcpy", "runtime"])
    work &= ev["stream"].to_numpy() < 0
    if threads is not None:
        work &= np.isin(tids, sorted(threads))
    spans = sorted(zip(start[kinds == "step"], end[kinds == "step"], strict=True))
    total = 0.0
    for lo, hi in spans:
        at = lo
        for s, e in sorted(zip(start[work], end[work], strict=True)):
            if e <= at or s >= hi:
                continue
            total += max(s - at, 0)
            at = max(at, min(e, hi))
        total += max(hi - at, 0)
    return total


def test_python_between_the_training_threads_ops_is_not_covered_by_the_loading_threads(run):
    from perfkit_core.advice.rules.cpu import uncovered_step_time

    loaders = set(loading_threads(run))
    training = {int(t) for t in np.unique(run.events["tid"].to_numpy())} - loaders
    uncovered, _ = uncovered_step_time(run)
    assert uncovered == pytest.approx(_uncovered_ns(run, training), rel=1e-9)
    assert _uncovered_ns(run, None) <= uncovered
    # one of the loading thread's slices stretched over the first step: it runs beside that
    # step's Python, which stays the training thread's (counted as work, it would hide it all)
    ev = run.events.copy()
    kinds = ev["kind"].astype(str).to_numpy()
    steps = np.flatnonzero(kinds == "step")
    first = steps[np.argmin(ev["start_ns"].to_numpy()[steps])]
    slice_row = np.flatnonzero(
        (kinds == "operator") & np.isin(ev["tid"].to_numpy(), sorted(loaders))
    )[0]
    ev.loc[ev.index[slice_row], "start_ns"] = ev["start_ns"].iloc[first]
    ev.loc[ev.index[slice_row], "dur_ns"] = ev["dur_ns"].iloc[first]
    stretched = Run(ev, dict(run.meta))
    assert uncovered_step_time(stretched)[0] == pytest.approx(uncovered, rel=1e-9)
    assert _uncovered_ns(stretched, None) < uncovered
