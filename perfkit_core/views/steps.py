"""The steps view (one row per step) and Paddle's benchmark view (reader/batch cost, ips)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.intervals import (
    length,
    merge_intervals,
    step_spans,
)
from perfkit_core.views.common import DEVICE_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# steps and benchmark

#: Steps dropped from the start of the benchmark view as warm-up when none is given: the first
#: profiled step carries one-time costs (allocator growth, autotuning, lazy init), so with 3 or
#: more steps the first one is left out; with fewer, none is.
DEFAULT_WARMUP_MIN_STEPS = 3


def steps_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """One row per step: number, start (``offset_ns``, from the first event of the run), host
    duration (``dur_ns``, the recorded step span), ``span_ns`` (the step stretched over the device
    work it launched, as the TensorBoard profiler times a step; see ``step_spans``), merged
    data-loading time, and the merged device time of the work launched in the step (NaN without
    device events). All in ns.

    Device work a step launched counts in that step even when it runs past the step's host end:
    ``gpu_busy_ns`` is never clipped at the host end, and ``span_ns`` covers it. The other views
    use the stretched steps as their window too, so the step time they share out is the sum of
    ``span_ns`` (overlaps counted once)."""
    ev = run.events
    kind = ev["kind"].to_numpy()
    sel = kind == "step"
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    columns = [
        "name",
        "rank",
        "step",
        "offset_ns",
        "dur_ns",
        "span_ns",
        "dataloader_ns",
        "gpu_busy_ns",
    ]
    if not sel.any():
        return view_frame([], columns, "no steps were recorded")
    step_col = ev["step"].to_numpy()
    ranks = ev["rank"].to_numpy()
    start = ev["start_ns"].to_numpy()
    dur = ev["dur_ns"].to_numpy()
    end = start + dur
    device = (ev["stream"].to_numpy() >= 0) & np.isin(kind, DEVICE_KINDS)
    has_device = device.any()
    loader = (kind == "dataloader") & (ev["stream"].to_numpy() < 0)
    origin = int(start.min())
    spans = step_spans(run, rank)
    stretched = {
        (int(rk), int(st), int(hs)): int(e0 - s0)
        for rk, st, hs, s0, e0 in zip(
            spans["rank"],
            spans["step"],
            spans["host_start_ns"],
            spans["start_ns"],
            spans["end_ns"],
            strict=True,
        )
    }
    rows = []
    for r in np.flatnonzero(sel).tolist():
        in_step = (step_col == step_col[r]) & (ranks == ranks[r])
        load = loader & in_step
        dl = length(merge_intervals(start[load], end[load]))
        dev = device & in_step
        busy = length(merge_intervals(start[dev], end[dev])) if has_device else math.nan
        rows.append(
            {
                "name": f"step {int(step_col[r])}",
                "rank": int(ranks[r]),
                "step": int(step_col[r]),
                "offset_ns": int(start[r]) - origin,
                "dur_ns": int(dur[r]),
                "span_ns": stretched[(int(ranks[r]), int(step_col[r]), int(start[r]))],
                "dataloader_ns": dl,
                "gpu_busy_ns": busy,
            }
        )
    return view_frame(rows, columns)


def benchmark_view(
    run: Run, *, warmup: int | None = None, batch_size: int | None = None, rank: int | None = None
) -> pd.DataFrame:
    """Paddle-style benchmark: rows ``reader_cost`` (data loading per step), ``batch_cost``
    (step time) and ``ips`` (steps per second; ``ips_samples`` in samples per second when
    ``batch_size`` is given), with columns ``avg``, ``max``, ``min`` in seconds (ips in 1/s).

    The first ``warmup`` steps are left out; by default one when there are at least 3 steps
    (``DEFAULT_WARMUP_MIN_STEPS``), none otherwise, so a 6-step trace keeps 5 steps. ``avg`` of
    ips is steps over total time, not the mean of per-step rates.
    """
    steps = steps_view(run, rank=rank)
    columns = ["name", "avg", "max", "min", "unit"]
    if steps.empty:
        return view_frame([], columns, "no steps were recorded")
    steps = steps.sort_values(["rank", "offset_ns"])
    n = len(steps)
    if warmup is None:
        warmup = 1 if n >= DEFAULT_WARMUP_MIN_STEPS else 0
    kept = (
        steps.groupby("rank", group_keys=False).apply(lambda s: s.iloc[warmup:])
        if warmup
        else steps
    )
    if kept.empty:
        kept = steps
    batch = kept["dur_ns"].to_numpy() / 1e9
    reader = kept["dataloader_ns"].to_numpy() / 1e9
    rows = [
        {
            "name": "reader_cost",
            "avg": reader.mean(),
            "max": reader.max(),
            "min": reader.min(),
            "unit": "s",
        },
        {
            "name": "batch_cost",
            "avg": batch.mean(),
            "max": batch.max(),
            "min": batch.min(),
            "unit": "s",
        },
        {
            "name": "ips",
            "avg": len(batch) / batch.sum() if batch.sum() else math.nan,
            "max": (1 / batch).max(),
            "min": (1 / batch).min(),
            "unit": "steps/s",
        },
    ]
    if batch_size:
        rows.append(
            {
                "name": "ips_samples",
                "avg": batch_size * len(batch) / batch.sum(),
                "max": (batch_size / batch).max(),
                "min": (batch_size / batch).min(),
                "unit": "samples/s",
            }
        )
    note = (
        f"{len(kept)} of {n} steps; the first {warmup} left out as warm-up"
        if warmup
        else f"all {n} steps"
    )
    return view_frame(rows, columns, note)
