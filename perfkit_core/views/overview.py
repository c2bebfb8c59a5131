"""The overview (time per event kind or native category) and device (utilization) views."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import (
    Intervals,
    clip_to,
    length,
    step_window,
)
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import coded, str_values
from perfkit_core.views.common import (
    DEVICE_KINDS,
    KERNEL_KINDS,
    NOT_WORK_KINDS,
    no_step_note,
    view_frame,
)

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# overview


#: Header labels of the overview's columns.
OVERVIEW_LABELS = {
    "calls_per_step": "Calls per step",
    "cpu_per_step_ns": "CPU time per step",
    "cpu_ratio_pct": "CPU time (% of step)",
    "gpu_per_step_ns": "GPU time per step",
    "gpu_ratio_pct": "GPU time (% of step)",
}


def overview_view(run: Run, *, rank: int | None = None, by: str = "kind") -> pd.DataFrame:
    """Time per event kind with overlaps merged, host side and device side, within the steps,
    per step.

    Rows: ``step`` then every kind present (``by="category"``: every native category, such as
    Paddle's TracerEventType names, as Paddle's Overview Summary lists them).
    ``cpu_per_step_ns`` is the union of the kind's host intervals over all threads,
    ``gpu_per_step_ns`` the union of its device intervals over all streams and devices, both
    clipped to the steps (each step stretched over the device work it launched,
    ``step_spans``) and divided by the number of steps; ``calls_per_step`` its events per step;
    ratios are shares of the step. Kinds overlap (an operator holds its runtime calls), so
    ratios do not add up to 100.
    """
    if by not in ("kind", "category"):
        raise ValueError(f"by must be 'kind' or 'category', not {by!r}")
    ev = run.events
    window, has_steps = step_window(run, rank)
    total = length(window)
    sel = np.ones(len(ev), dtype=bool) if rank is None else ev["rank"].to_numpy() == rank
    kinds = coded(ev["kind"])
    n_steps = int((sel & kinds.among("step")).sum()) if has_steps else 1
    per = float(max(n_steps, 1))
    # Rows are grouped by code; a missing value (code -1) reads "", as a string test would.
    grouped = kinds if by == "kind" else coded(ev["category"])
    labels = np.array([*grouped.categories, ""], dtype=object)
    group_codes = np.where(grouped.codes < 0, len(labels) - 1, grouped.codes)
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    device = ev["stream"].to_numpy() >= 0
    has_device = bool((device & sel).any())
    rows = [
        {
            "name": "step",
            "calls_per_step": 1.0,
            "cpu_per_step_ns": total / per,
            "cpu_ratio_pct": 100.0 if total else math.nan,
            "gpu_per_step_ns": math.nan,
            "gpu_ratio_pct": math.nan,
        }
    ]
    from perfkit_core.events.schema import KIND_ORDER

    counted = sel & ~kinds.among(*NOT_WORK_KINDS)
    if by == "kind":
        names = [k for k in KIND_ORDER if k not in NOT_WORK_KINDS]
    else:
        # Only the step spans and memory instants are left out, not their whole categories.
        names = sorted(set(labels[np.unique(group_codes[counted])].tolist()))
    for k in names:
        mask = counted & (labels == k)[group_codes]
        if not mask.any():
            continue
        host_rows = mask & ~device
        dev_rows = mask & device
        cpu = (
            length(clip_to(start[host_rows], end[host_rows], window))
            if host_rows.any()
            else math.nan
        )
        gpu = (
            length(clip_to(start[dev_rows], end[dev_rows], window)) if dev_rows.any() else math.nan
        )
        if not has_device or not dev_rows.any():
            gpu = math.nan
        rows.append(
            {
                "name": k,
                "calls_per_step": int(mask.sum()) / per,
                "cpu_per_step_ns": cpu / per,
                "cpu_ratio_pct": 100.0 * cpu / total if total and not math.isnan(cpu) else math.nan,
                "gpu_per_step_ns": gpu / per,
                "gpu_ratio_pct": 100.0 * gpu / total if total and not math.isnan(gpu) else math.nan,
            }
        )
    frame = view_frame(
        rows,
        [
            "name",
            "calls_per_step",
            "cpu_per_step_ns",
            "cpu_ratio_pct",
            "gpu_per_step_ns",
            "gpu_ratio_pct",
        ],
        no_step_note(has_steps),
    )
    frame.attrs["labels"] = dict(OVERVIEW_LABELS)
    return frame


# ---------------------------------------------------------------------------------------------
# device


#: Header labels of the device view's columns.
DEVICE_LABELS = {
    "utilization_pct": "Busy (% of step)",
    "busy_per_step_ns": "Busy per step",
    "kernel_utilization_pct": "Kernel busy (% of step)",
    "kernel_busy_per_step_ns": "Kernel busy per step",
    "cores_busy": "Cores busy (mean)",
    "system_pct": "System CPU (% of all cores)",
    "step_ns": "Step",
}


def device_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """How busy each device was in the steps, per step.

    ``CPU (host threads busy)``: ``cores_busy``, the mean number of host threads inside
    recorded events over the steps (1.0 = one core busy throughout; two threads busy at once
    count twice), and ``busy_per_step_ns`` their summed busy time per step, measured from the
    events for every framework. The CPU figures a profiler records itself follow as
    ``... recorded``: Paddle's process CPU time as ``cores_busy`` (Paddle's CPU(Process)
    divided by 100%: 1.0 = one core) and its system-wide CPU as ``system_pct`` (busy time of
    all the machine's cores over their busy and idle time, Paddle's CPU(System)); a recorded
    process figure of 0 while the events show host work is reported as not measured (NaN), not
    as a measured zero.

    Each GPU, two figures of busy time within the steps, per step and as a share of the step:
    device-busy (``busy_per_step_ns``, ``utilization_pct``), the merged time it ran kernels,
    copies or sets, and kernel-busy (``kernel_busy_per_step_ns``, ``kernel_utilization_pct``),
    the merged time it ran kernels (communication kernels included), the TensorBoard profiler's
    "GPU Utilization". The plugin divides by the span from the first step's start to the last
    step's end; perfkit by the merged (stretched) steps, so time between steps counts in neither
    the busy time nor the window. ``occupancy_pct``: the kernels' estimated achieved occupancy
    weighted by their duration within the steps (the plugin's "Est. Achieved Occupancy"); NaN
    where not recorded. ``sm_efficiency_pct``: the plugin's "Est. SM Efficiency": at each
    instant the running kernels' blocks per SM (blocks in the grid over the device's SMs),
    summed and capped at 1, averaged over the steps; NaN without launch shapes or the device's
    SM count. ``step_ns``: the mean step of the rank.
    """
    ev = run.events
    window, has_steps = step_window(run, rank)
    total = length(window)
    kind_all = str_values(ev["kind"])

    def steps_of(r: int | None) -> float:
        if not has_steps:
            return 1.0
        mine = kind_all == "step"
        if r is not None:
            mine &= ev["rank"].to_numpy() == r
        return float(max(int(mine.sum()), 1))

    n = steps_of(rank)
    host_busy = _host_threads_busy(run, window, rank)
    rows: list[dict[str, Any]] = [
        {
            "name": "CPU (host threads busy)",
            "utilization_pct": math.nan,
            "busy_per_step_ns": host_busy / n,
            "cores_busy": host_busy / total if total else math.nan,
            "step_ns": total / n,
        }
    ]
    notes: list[str] = []
    cpu = (run.meta.get("extra") or {}).get("cpu_utilization") or {}
    if "process_cpu_utilization" in cpu:
        value = float(cpu["process_cpu_utilization"])
        if value == 0.0 and host_busy > 0:
            value = math.nan
            notes.append(
                "the profiler recorded 0% process CPU although its events show host work: not measured"
            )
        rows.append(
            {
                "name": "CPU (process, recorded)",
                "utilization_pct": math.nan,
                "cores_busy": value,
                "step_ns": total / n,
            }
        )
    if "system_cpu_utilization" in cpu:
        rows.append(
            {
                "name": "CPU (system, recorded)",
                "utilization_pct": math.nan,
                "system_pct": 100.0 * float(cpu["system_cpu_utilization"]),
                "step_ns": total / n,
            }
        )
    sel = ev["stream"].to_numpy() >= 0
    sel &= kind_is(ev, *DEVICE_KINDS)
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    dev_type = str_values(ev["device_type"])
    dev_index = ev["device_index"].to_numpy()
    ranks = ev["rank"].to_numpy()
    keys = sorted(
        {
            (int(r), str(t), int(i))
            for r, t, i in zip(ranks[sel], dev_type[sel], dev_index[sel], strict=True)
        }
    )
    multi_rank = len({k[0] for k in keys}) > 1
    is_kernel = kind_is(ev, *KERNEL_KINDS)
    occupancy = ev["occupancy_pct"].to_numpy(dtype=float)
    blocks = _grid_blocks(ev["grid"])
    sm_count = {
        (str(d.get("type", "gpu")), int(d["index"])): float(d["sm_count"])
        for d in (run.meta.get("devices") or [])
        if isinstance(d, dict) and d.get("sm_count") and d.get("index") is not None
    }
    for r, t, i in keys:
        rows_sel = sel & (ranks == r) & (dev_type == t) & (dev_index == i)
        rank_window = step_window(run, r)[0]
        rank_steps = steps_of(r if has_steps else None)
        busy = length(clip_to(start[rows_sel], end[rows_sel], rank_window))
        kernels = rows_sel & is_kernel
        kernel_busy = length(clip_to(start[kernels], end[kernels], rank_window))
        win = length(rank_window)
        name = f"{t.upper()} {i}" + (f" (rank {r})" if multi_rank else "")
        rows.append(
            {
                "name": name,
                "utilization_pct": 100.0 * busy / win if win else math.nan,
                "busy_per_step_ns": busy / rank_steps,
                "kernel_utilization_pct": 100.0 * kernel_busy / win if win else math.nan,
                "kernel_busy_per_step_ns": kernel_busy / rank_steps,
                "occupancy_pct": _weighted_occupancy(
                    start[kernels], end[kernels], occupancy[kernels], rank_window
                ),
                "sm_efficiency_pct": _sm_efficiency(
                    start[kernels],
                    end[kernels],
                    blocks[kernels] / sm_count.get((t, i), math.nan),
                    rank_window,
                ),
                "step_ns": win / rank_steps,
            }
        )
    note = "; ".join(n for n in [no_step_note(has_steps), *notes] if n) or None
    columns = [
        "name",
        "utilization_pct",
        "busy_per_step_ns",
        "kernel_utilization_pct",
        "kernel_busy_per_step_ns",
        "occupancy_pct",
        "sm_efficiency_pct",
        "cores_busy",
        "system_pct",
        "step_ns",
    ]
    frame = view_frame(rows, columns, note)
    frame.attrs["labels"] = dict(DEVICE_LABELS)
    return frame


def _grid_blocks(grid: pd.Series) -> np.ndarray:
    """Blocks in each kernel's grid (``x,y,z`` multiplied out); NaN where not recorded."""
    codes = grid.astype("category")
    per_value = []
    for value in codes.cat.categories:
        try:
            per_value.append(float(np.prod([int(v) for v in str(value).split(",")])))
        except ValueError:
            per_value.append(math.nan)
    table = np.array([*per_value, math.nan])
    return table[codes.cat.codes.to_numpy()]


def _sm_efficiency(
    start: np.ndarray, end: np.ndarray, blocks_per_sm: np.ndarray, window: Intervals
) -> float:
    """Estimated SM efficiency (%) over ``window``: at each instant the summed blocks per SM of
    the kernels running, capped at 1, averaged over the window's length; NaN when no kernel
    has a launch shape and an SM count."""
    known = ~np.isnan(blocks_per_sm) & (blocks_per_sm > 0)
    total = length(window)
    if not known.any() or not total:
        return math.nan
    points = np.concatenate([start[known], end[known]])
    change = np.concatenate([blocks_per_sm[known], -blocks_per_sm[known]])
    order = np.argsort(points, kind="stable")
    points, level = points[order], np.cumsum(change[order])
    value = np.minimum(np.maximum(level[:-1], 0.0), 1.0)
    covered = _covered_before(points, window)
    return float(100.0 * (value * np.diff(covered)).sum() / total)


def _covered_before(times: np.ndarray, window: Intervals) -> np.ndarray:
    """For each time: how much of the merged ``window`` lies before it, in ns."""
    ws, we = window
    done = np.r_[0, np.cumsum(we - ws)]
    i = np.searchsorted(ws, times, side="right")
    inside = np.where(
        i > 0, np.minimum(times, we[np.maximum(i - 1, 0)]) - ws[np.maximum(i - 1, 0)], 0
    )
    return done[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(inside, 0)


def _weighted_occupancy(
    start: np.ndarray, end: np.ndarray, occupancy: np.ndarray, window: tuple[np.ndarray, np.ndarray]
) -> float:
    """Occupancy (%) of kernels weighted by the part of each inside ``window`` (merged); NaN
    when no kernel inside it recorded one."""
    known = ~np.isnan(occupancy)
    start, end, occupancy = start[known], end[known], occupancy[known]
    ws, we = window
    inside = np.zeros(len(start), dtype=np.int64)
    for s0, e0 in zip(ws.tolist(), we.tolist(), strict=True):
        inside += np.clip(np.minimum(end, e0) - np.maximum(start, s0), 0, None)
    total = int(inside.sum())
    return float((occupancy * inside).sum() / total) if total else math.nan


def _host_threads_busy(run: Run, window: tuple[np.ndarray, np.ndarray], rank: int | None) -> int:
    """Sum over host threads of the time each spent inside a recorded event, within ``window``."""
    ev = run.events
    sel = (
        (ev["stream"].to_numpy() < 0)
        & (ev["dur_ns"].to_numpy() > 0)
        & ~kind_is(ev, *NOT_WORK_KINDS)
    )
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    group = links.group_codes(ev["rank"].to_numpy(), ev["pid"].to_numpy(), ev["tid"].to_numpy())
    busy = 0
    for g in np.unique(group[sel]).tolist():
        rows = sel & (group == g)
        busy += length(clip_to(start[rows], end[rows], window))
    return busy
