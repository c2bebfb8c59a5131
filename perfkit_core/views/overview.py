"""The overview (time per event kind or native category) and device (utilization) views."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import (
    clip_to,
    length,
    step_window,
)
from perfkit_core.events.schema import str_values
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


def overview_view(run: Run, *, rank: int | None = None, by: str = "kind") -> pd.DataFrame:
    """Time per event kind with overlaps merged, host side and device side, within the steps.

    Rows: ``step`` then every kind present (``by="category"``: every native category, such as
    Paddle's TracerEventType names, as Paddle's Overview Summary lists them). ``cpu_time_ns`` is the union of the kind's host
    intervals over all threads, ``gpu_time_ns`` the union of its device intervals over all
    streams and devices, both clipped to the step intervals (each step stretched over the device
    work it launched, ``step_spans``); ratios are shares of the merged step time. Kinds overlap
    (an operator holds its runtime calls), so ratios do not add up to 100.
    """
    if by not in ("kind", "category"):
        raise ValueError(f"by must be 'kind' or 'category', not {by!r}")
    ev = run.events
    window, has_steps = step_window(run, rank)
    total = length(window)
    sel = np.ones(len(ev), dtype=bool) if rank is None else ev["rank"].to_numpy() == rank
    kind = ev["kind"].to_numpy()
    groups = kind if by == "kind" else str_values(ev["category"])
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    device = ev["stream"].to_numpy() >= 0
    has_device = bool((device & sel).any())
    rows = [
        {
            "name": "step",
            "calls": int((sel & (kind == "step")).sum()) if has_steps else 1,
            "cpu_time_ns": total,
            "cpu_ratio_pct": 100.0 if total else math.nan,
            "gpu_time_ns": math.nan,
            "gpu_ratio_pct": math.nan,
        }
    ]
    from perfkit_core.events.schema import KIND_ORDER

    counted = sel & ~np.isin(kind, list(NOT_WORK_KINDS))
    if by == "kind":
        names = [k for k in KIND_ORDER if k not in NOT_WORK_KINDS]
    else:
        # Only the step spans and memory instants are left out, not their whole categories.
        names = sorted(set(np.unique(groups[counted]).tolist()))
    for k in names:
        mask = counted & (groups == k)
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
                "calls": int(mask.sum()),
                "cpu_time_ns": cpu,
                "cpu_ratio_pct": 100.0 * cpu / total if total and not math.isnan(cpu) else math.nan,
                "gpu_time_ns": gpu,
                "gpu_ratio_pct": 100.0 * gpu / total if total and not math.isnan(gpu) else math.nan,
            }
        )
    return view_frame(
        rows,
        ["name", "calls", "cpu_time_ns", "cpu_ratio_pct", "gpu_time_ns", "gpu_ratio_pct"],
        no_step_note(has_steps),
    )


# ---------------------------------------------------------------------------------------------
# device


def device_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Utilization per device, in percent (``utilization_pct``) of the merged step time.

    ``CPU (host threads busy)``: the summed time host threads spent inside recorded events,
    measured from the events for every framework (100% = one thread busy throughout). The CPU
    figures a profiler records itself (Paddle: process and system) follow as ``... recorded``;
    a recorded process figure of 0 while the events show host work is reported as not measured
    (NaN), not as a measured zero.

    Each GPU, two figures of busy time within the steps: device-busy (``busy_ns``,
    ``utilization_pct``), the merged time it ran kernels, copies or sets, and kernel-busy
    (``kernel_busy_ns``, ``kernel_utilization_pct``), the merged time it ran kernels
    (communication kernels included), the TensorBoard profiler's "GPU Utilization". The plugin
    divides by the span from the first step's start to the last step's end; perfkit by the
    merged (stretched) steps, so time between steps counts in neither the busy time nor the
    window. ``occupancy_pct``: the kernels' estimated achieved occupancy weighted by their
    duration within the steps (the plugin's "Est. Achieved Occupancy"); NaN where not recorded.
    """
    ev = run.events
    window, has_steps = step_window(run, rank)
    total = length(window)
    host_busy = _host_threads_busy(run, window, rank)
    rows: list[dict[str, Any]] = [
        {
            "name": "CPU (host threads busy)",
            "utilization_pct": 100.0 * host_busy / total if total else math.nan,
            "busy_ns": host_busy,
            "window_ns": total,
        }
    ]
    notes: list[str] = []
    cpu = (run.meta.get("extra") or {}).get("cpu_utilization") or {}
    labels = {
        "process_cpu_utilization": "CPU (process, recorded)",
        "system_cpu_utilization": "CPU (system, recorded)",
    }
    for key, label in labels.items():
        if key not in cpu:
            continue
        value = 100.0 * float(cpu[key])
        if key == "process_cpu_utilization" and value == 0.0 and host_busy > 0:
            value = math.nan
            notes.append(
                "the profiler recorded 0% process CPU although its events show host work: not measured"
            )
        rows.append(
            {"name": label, "utilization_pct": value, "busy_ns": math.nan, "window_ns": total}
        )
    sel = ev["stream"].to_numpy() >= 0
    sel &= ev["kind"].isin(list(DEVICE_KINDS)).to_numpy()
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
    is_kernel = ev["kind"].isin(list(KERNEL_KINDS)).to_numpy()
    occupancy = ev["occupancy_pct"].to_numpy(dtype=float)
    for r, t, i in keys:
        rows_sel = sel & (ranks == r) & (dev_type == t) & (dev_index == i)
        rank_window = step_window(run, r)[0]
        busy = length(clip_to(start[rows_sel], end[rows_sel], rank_window))
        kernels = rows_sel & is_kernel
        kernel_busy = length(clip_to(start[kernels], end[kernels], rank_window))
        win = length(rank_window)
        name = f"{t.upper()} {i}" + (f" (rank {r})" if multi_rank else "")
        rows.append(
            {
                "name": name,
                "utilization_pct": 100.0 * busy / win if win else math.nan,
                "busy_ns": busy,
                "kernel_utilization_pct": 100.0 * kernel_busy / win if win else math.nan,
                "kernel_busy_ns": kernel_busy,
                "occupancy_pct": _weighted_occupancy(
                    start[kernels], end[kernels], occupancy[kernels], rank_window
                ),
                "window_ns": win,
            }
        )
    note = "; ".join(n for n in [no_step_note(has_steps), *notes] if n) or None
    columns = [
        "name",
        "utilization_pct",
        "busy_ns",
        "kernel_utilization_pct",
        "kernel_busy_ns",
        "occupancy_pct",
        "window_ns",
    ]
    return view_frame(rows, columns, note)


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
        & ~np.isin(ev["kind"].to_numpy(), list(NOT_WORK_KINDS))
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
