"""Unions, intersections and clipping of time intervals, and the step window of a run.

An interval list is a pair of int64 arrays ``(starts, ends)`` of half-open intervals
``[start, end)`` in ns. "Merged" lists are sorted and disjoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

Intervals = tuple[np.ndarray, np.ndarray]


def _empty() -> Intervals:
    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Return the union of intervals [start, end) as sorted, disjoint (starts, ends)."""
    if len(starts) == 0:
        return _empty()
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts)[order], np.asarray(ends)[order]
    running = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > running[:-1]]
    idx = np.flatnonzero(new)
    block_end = np.maximum.reduceat(e, idx)
    return s[idx], block_end


def grouped_union_length(
    group: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return (the distinct ``group`` keys, sorted; the length in ns of the union of each
    group's intervals [start, end)), without a Python loop over groups."""
    import pandas as pd

    if len(group) == 0:
        return np.empty(0, dtype=np.asarray(group).dtype), np.empty(0, dtype=np.float64)
    order = np.lexsort((starts, group))
    g = np.asarray(group)[order]
    s = np.asarray(starts, dtype=np.int64)[order]
    e = np.asarray(ends, dtype=np.int64)[order]
    first = np.r_[True, g[1:] != g[:-1]]
    # The end each group's intervals reached before each interval (none before its first).
    running = pd.Series(e).groupby(g, sort=False).cummax().to_numpy()
    previous = np.r_[0, running[:-1]]
    reached = np.where(first, s, np.maximum(s, previous))
    added = np.clip(e - reached, 0, None).astype(np.float64)
    bounds = np.flatnonzero(first)
    return g[bounds], np.add.reduceat(added, bounds)


def length(intervals: Intervals) -> int:
    """Return the total length (ns) of a merged interval list."""
    return int((intervals[1] - intervals[0]).sum())


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Return the total length (ns) of the union of intervals [start, end)."""
    return length(merge_intervals(starts, ends))


def intersect_length(a: Intervals, b: Intervals) -> int:
    """Return the total length (ns) of the intersection of two merged interval lists."""
    (as_, ae), (bs, be) = a, b
    if len(as_) == 0 or len(bs) == 0:
        return 0
    union = merge_intervals(np.concatenate([as_, bs]), np.concatenate([ae, be]))
    return int((ae - as_).sum() + (be - bs).sum() - (union[1] - union[0]).sum())


def _sweep(a: Intervals, b: Intervals, inside: int) -> Intervals:
    """Parts of the time line where (in ``a``) + 2 * (in ``b``) equals ``inside``, merged;
    ``a`` and ``b`` are merged interval lists."""
    starts = np.concatenate([a[0], b[0], a[1], b[1]]).astype(np.int64)
    steps = np.concatenate(
        [
            np.full(len(a[0]), 1),
            np.full(len(b[0]), 2),
            np.full(len(a[1]), -1),
            np.full(len(b[1]), -2),
        ]
    ).astype(np.int64)
    if len(starts) == 0:
        return _empty()
    order = np.argsort(starts, kind="stable")
    points, level = starts[order], np.cumsum(steps[order])
    pick = np.flatnonzero(level[:-1] == inside)
    lo, hi = points[pick], points[pick + 1]
    keep = hi > lo
    return merge_intervals(lo[keep], hi[keep])


def overlap_per_window(merged: Intervals, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each window [starts[i], ends[i]), the length in ns of its overlap with ``merged`` (a
    merged interval list), as int64: prefix sums of the blocks' lengths, trimmed at each
    window's edges, with no loop over the windows."""
    ms, me = merged
    a = np.asarray(starts, dtype=np.int64)
    b = np.asarray(ends, dtype=np.int64)
    if len(ms) == 0 or len(a) == 0:
        return np.zeros(len(a), dtype=np.int64)
    total = np.r_[0, np.cumsum(me - ms)]
    first = np.searchsorted(me, a, side="right")  # the first block ending after the start
    stop = np.searchsorted(ms, b, side="left")  # blocks [first, stop) start before the end
    some = stop > first
    out = np.where(some, total[stop] - total[np.minimum(first, stop)], 0)
    head = np.minimum(first, len(ms) - 1)
    tail = np.maximum(stop - 1, 0)
    out = out - np.where(some, np.maximum(a - ms[head], 0), 0)
    out = out - np.where(some, np.maximum(me[tail] - b, 0), 0)
    return np.maximum(out, 0)


def intersect_intervals(a: Intervals, b: Intervals) -> Intervals:
    """Return the intersection of two merged interval lists, merged."""
    return _sweep(a, b, 3)


def subtract_intervals(a: Intervals, b: Intervals) -> Intervals:
    """Return the parts of merged list ``a`` outside merged list ``b``, merged."""
    return _sweep(a, b, 1)


def clip_to(starts: np.ndarray, ends: np.ndarray, window: Intervals) -> Intervals:
    """Return the union of the intervals clipped to ``window`` (a merged interval list)."""
    ws, we = window
    merged_s, merged_e = merge_intervals(starts, ends)
    if len(ws) == 0 or len(merged_s) == 0:
        return _empty()
    out_s, out_e = [], []
    # Both lists are sorted and disjoint: find each window's overlapping blocks by bisection.
    for s0, e0 in zip(ws.tolist(), we.tolist(), strict=True):
        lo = np.searchsorted(merged_e, s0, side="right")
        hi = np.searchsorted(merged_s, e0, side="left")
        if hi > lo:
            out_s.append(np.maximum(merged_s[lo:hi], s0))
            out_e.append(np.minimum(merged_e[lo:hi], e0))
    if not out_s:
        return _empty()
    return np.concatenate(out_s), np.concatenate(out_e)


#: Columns of ``step_spans``.
STEP_SPAN_COLUMNS = ("rank", "step", "host_start_ns", "host_end_ns", "start_ns", "end_ns")


def step_spans(run: Run, rank: int | None = None) -> dict[str, np.ndarray]:
    """Return every step's host span and its span stretched over the device work it launched.

    One entry per step row (``kind == "step"``) of ``rank`` (or of all ranks), ordered by rank
    and host start: ``rank``, ``step``, ``host_start_ns``/``host_end_ns`` (the recorded step
    span) and ``start_ns``/``end_ns`` (the step as the TensorBoard profiler times it), in ns.

    The stretched span, per rank, step by step in host order: it starts at its host start or at
    the previous step's stretched end, whichever is later, and ends at its host end or at the end
    of the last device event it launched (``step`` of a device row is the step of its launcher),
    whichever is later. Before the first step, device work launched outside every step that
    ends before the first step's own device work starts pushes the first step's start to its
    end. A rank whose steps launched no device work keeps its host spans. So the stretched
    steps do not overlap and a step's device time is never clipped at its host end.
    """
    cache = run.cached("step_spans", lambda: _step_spans(run))
    if rank is None:
        return dict(cache)
    keep = cache["rank"] == rank
    return {key: values[keep] for key, values in cache.items()}


def _step_spans(run: Run) -> dict[str, np.ndarray]:
    ev = run.events
    kind = str_values(ev["kind"])
    ranks = ev["rank"].to_numpy()
    step_col = ev["step"].to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    is_step = kind == "step"
    device = (ev["stream"].to_numpy() >= 0) & ~is_step
    rows = np.flatnonzero(is_step)
    rows = rows[np.lexsort((start[rows], ranks[rows]))]
    host_start, host_end = start[rows], end[rows]
    out_start, out_end = host_start.copy(), host_end.copy()
    for r in np.unique(ranks[rows]).tolist():
        mine = np.flatnonzero(ranks[rows] == r)
        dev = device & (ranks == r)
        numbers = step_col[rows[mine]]
        launched = dev & np.isin(step_col, numbers)
        if not launched.any():
            continue
        # First start and last end of the device work each step number launched.
        picked = np.flatnonzero(launched)
        picked = picked[np.argsort(step_col[picked], kind="stable")]
        d_steps, bounds = np.unique(step_col[picked], return_index=True)
        dev_first = np.minimum.reduceat(start[picked], bounds)
        dev_last = np.maximum.reduceat(end[picked], bounds)
        pos = np.searchsorted(d_steps, numbers)
        pos = np.minimum(pos, len(d_steps) - 1)
        has_dev = d_steps[pos] == numbers
        previous = int(host_start[mine[0]])
        if has_dev[0]:
            first_dev = int(dev_first[pos[0]])
            outside = dev & (step_col < 0) & (end < first_dev)
            if outside.any():
                previous = max(previous, int(end[outside].max()))
        for j, i in enumerate(mine.tolist()):
            s0 = max(previous, int(host_start[i]))
            e0 = max(int(host_end[i]), int(dev_last[pos[j]])) if has_dev[j] else int(host_end[i])
            e0 = max(e0, s0)
            out_start[i], out_end[i] = s0, e0
            previous = e0
    return {
        "rank": ranks[rows],
        "step": step_col[rows],
        "host_start_ns": host_start,
        "host_end_ns": host_end,
        "start_ns": out_start,
        "end_ns": out_end,
    }


def step_window(run: Run, rank: int | None = None) -> tuple[Intervals, bool]:
    """Return (the merged step intervals of ``rank`` or of all ranks, whether steps were recorded).

    The steps are stretched over the device work they launched (``step_spans``), so work a step
    launched that runs past the step's host end still counts in the step. Without steps the
    window is the profiled span, as the run's ``span_ns`` is: first start to last end of the
    recorded work, the profiler's own spans and markers (kind ``profiler``, which run to its
    "Record Window End") left out.
    """
    ev = run.events
    spans = step_spans(run, rank)
    if len(spans["step"]):
        return merge_intervals(spans["start_ns"], spans["end_ns"]), True
    sel = ~kind_is(ev, "profiler")
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    if not sel.any():
        return _empty(), False
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    return (np.array([start[sel].min()]), np.array([end[sel].max()])), False
