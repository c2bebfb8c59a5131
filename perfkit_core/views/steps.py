"""The steps view (one row per step) and Paddle's benchmark view (reader/batch cost, ips)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.intervals import grouped_union_length, step_spans
from perfkit_core.events.links import kind_is
from perfkit_core.views.common import DEVICE_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


def steps_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """One row per step, in ns: ``offset_ns`` (its recorded start, from the run's first event),
    ``dur_ns`` (the step: its recorded span stretched over the device work it launched, as the
    TensorBoard profiler times a step; ``step_spans``), ``host_dur_ns`` (the recorded span),
    ``data_ns`` (the step's time waiting for data: the ``data`` phase of the ``model`` view) and
    ``gpu_busy_ns`` (the merged device time of the work the step launched; NaN without device
    events).

    ``dur_ns`` is the step every view, the headline and the advice share out: the phases of
    ``phases`` add up to it, and it is never shorter than the device work the step launched."""
    import pandas as pd

    from perfkit_core.views.anatomy.step_time import phase_times

    columns = [
        "name",
        "rank",
        "step",
        "offset_ns",
        "dur_ns",
        "host_dur_ns",
        "data_ns",
        "gpu_busy_ns",
    ]
    spans = step_spans(run, rank)
    if len(spans["step"]) == 0:
        return view_frame([], columns, "no steps were recorded")
    ev = run.events
    start = ev["start_ns"].to_numpy()
    times = phase_times(run, rank=rank)
    frame = pd.DataFrame(
        {
            "name": [f"step {int(s)}" for s in spans["step"]],
            "rank": spans["rank"].astype(np.int64),
            "step": spans["step"].astype(np.int64),
            "offset_ns": (spans["host_start_ns"] - int(start.min())).astype(np.int64),
            "dur_ns": (spans["end_ns"] - spans["start_ns"]).astype(np.int64),
            "host_dur_ns": (spans["host_end_ns"] - spans["host_start_ns"]).astype(np.int64),
            "data_ns": times["data_ns"].to_numpy(),
            "gpu_busy_ns": _device_busy_per_step(run, spans),
        },
        columns=columns,
    )
    frame.attrs["labels"] = {
        "dur_ns": "Step",
        "host_dur_ns": "Recorded span",
        "data_ns": "Data",
        "gpu_busy_ns": "GPU busy",
        "offset_ns": "Start",
    }
    return frame


def _device_busy_per_step(run: Run, spans: dict[str, np.ndarray]) -> np.ndarray:
    """For each step of ``spans``: the merged time of the device events (``DEVICE_KINDS``) it
    launched (a device row's ``step`` is its launcher's), in ns; NaN when the run recorded no
    device events."""
    ev = run.events
    device = (ev["stream"].to_numpy() >= 0) & kind_is(ev, *DEVICE_KINDS)
    if not device.any():
        return np.full(len(spans["step"]), math.nan)
    rows = np.flatnonzero(device & (ev["step"].to_numpy() >= 0))
    start = ev["start_ns"].to_numpy()[rows]
    end = start + ev["dur_ns"].to_numpy()[rows]
    key = _step_key(ev["rank"].to_numpy()[rows], ev["step"].to_numpy()[rows])
    groups, busy = grouped_union_length(key, start, end)
    want = _step_key(spans["rank"], spans["step"])
    if len(groups) == 0:
        return np.zeros(len(want))
    pos = np.minimum(np.searchsorted(groups, want), len(groups) - 1)
    return np.where(groups[pos] == want, busy[pos], 0.0).astype(np.float64)


def _step_key(rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    """One int64 per (rank, step number), the same for the same pair in any array."""
    return (np.asarray(rank, dtype=np.int64) << 32) + np.asarray(step, dtype=np.int64)


def benchmark_view(
    run: Run, *, warmup: int = 0, batch_size: int | None = None, rank: int | None = None
) -> pd.DataFrame:
    """Paddle-style benchmark: rows ``reader_cost`` (time per step waiting for data),
    ``batch_cost`` (the step) and ``ips`` (steps per second; ``ips_samples`` in samples per
    second when ``batch_size`` is given), with columns ``avg``, ``max``, ``min`` and ``unit``:
    ``ns`` for the cost rows, ``steps/s`` or ``samples/s`` for the rates.

    Every recorded step counts, as in every other view (a profiler's schedule already leaves its
    wait and warm-up steps unrecorded; Paddle's own timer leaves out the first steps of the
    whole training instead); ``warmup`` leaves out the first N. ``avg`` of ips is steps over
    their total time (so it equals the headline's throughput), not the mean of per-step rates.
    """
    steps = steps_view(run, rank=rank)
    columns = ["name", "avg", "max", "min", "unit"]
    if steps.empty:
        return view_frame([], columns, "no steps were recorded")
    steps = steps.sort_values(["rank", "offset_ns"])
    n = len(steps)
    if warmup < 0:
        raise ValueError(f"warmup must be 0 or more, not {warmup}")
    kept = (
        steps.groupby("rank", group_keys=False).apply(lambda s: s.iloc[warmup:])
        if warmup
        else steps
    )
    if kept.empty:
        kept = steps
    batch = kept["dur_ns"].to_numpy(dtype=np.float64)
    reader = kept["data_ns"].to_numpy(dtype=np.float64)
    seconds = batch / 1e9
    rows = [
        {
            "name": "reader_cost",
            "avg": reader.mean(),
            "max": reader.max(),
            "min": reader.min(),
            "unit": "ns",
        },
        {
            "name": "batch_cost",
            "avg": batch.mean(),
            "max": batch.max(),
            "min": batch.min(),
            "unit": "ns",
        },
        {
            "name": "ips",
            "avg": len(seconds) / seconds.sum() if seconds.sum() else math.nan,
            "max": (1 / seconds).max(),
            "min": (1 / seconds).min(),
            "unit": "steps/s",
        },
    ]
    if batch_size:
        rows.append(
            {
                "name": "ips_samples",
                "avg": batch_size * len(seconds) / seconds.sum(),
                "max": (batch_size / seconds).max(),
                "min": (batch_size / seconds).min(),
                "unit": "samples/s",
            }
        )
    note = (
        f"{len(kept)} of {n} steps; the first {warmup} left out as warm-up"
        if warmup and len(kept) < n
        else f"all {n} steps"
    )
    frame = view_frame(rows, columns, note)
    frame.attrs["row_unit_column"] = "unit"
    return frame
