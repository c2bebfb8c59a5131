"""Unions, intersections and clipping of time intervals, and the step window of a run.

An interval list is a pair of int64 arrays ``(starts, ends)`` of half-open intervals
``[start, end)`` in ns. "Merged" lists are sorted and disjoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

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


def step_window(run: Run, rank: int | None = None) -> tuple[Intervals, bool]:
    """Return (the merged step intervals of ``rank`` or of all ranks, whether steps were recorded).

    Without steps the whole profiled span (first start to last end) is the window.
    """
    ev = run.events
    sel = np.ones(len(ev), dtype=bool) if rank is None else ev["rank"].to_numpy() == rank
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    steps = sel & (ev["kind"].to_numpy() == "step")
    if steps.any():
        return merge_intervals(start[steps], end[steps]), True
    if not sel.any():
        return _empty(), False
    return (np.array([start[sel].min()]), np.array([end[sel].max()])), False
