"""The summary views beyond operators and user spans: overview, device, kernel, memcpy, memory,
distributed, benchmark and steps. Each reads only the event table (``run.events``) and the run's
metadata, never a framework object, so the same view serves a torch run and a paddle run.

Conventions: the key column is ``name``; times are ns (``*_ns``), shares are percent
(``*_pct``); a figure that was not measured (no device events, no memory events) is NaN, never
a zero that looks measured.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core import structure

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.run import Run

DEVICE_KINDS = ("kernel", "communication", "memcpy", "memset")
KERNEL_KINDS = ("kernel", "communication")


# ---------------------------------------------------------------------------------------------
# interval helpers


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the union of intervals [start, end) as sorted, disjoint (starts, ends)."""
    if len(starts) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts)[order], np.asarray(ends)[order]
    running = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > running[:-1]]
    idx = np.flatnonzero(new)
    block_end = np.maximum.reduceat(e, idx)
    return s[idx], block_end


def intersect_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Total length of the intersection of two unions of disjoint sorted intervals."""
    (as_, ae), (bs, be) = a, b
    if len(as_) == 0 or len(bs) == 0:
        return 0
    starts = np.concatenate([as_, bs])
    ends = np.concatenate([ae, be])
    union = merge_intervals(starts, ends)
    return int((ae - as_).sum() + (be - bs).sum() - (union[1] - union[0]).sum())


def clip_to(
    starts: np.ndarray, ends: np.ndarray, window: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Return the union of the intervals clipped to ``window`` (a union of disjoint intervals)."""
    ws, we = window
    merged_s, merged_e = merge_intervals(starts, ends)
    if len(ws) == 0 or len(merged_s) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    out_s, out_e = [], []
    # Both lists are sorted and disjoint: a two-pointer sweep in numpy terms via searchsorted.
    for s0, e0 in zip(ws.tolist(), we.tolist(), strict=True):
        lo = np.searchsorted(merged_e, s0, side="right")
        hi = np.searchsorted(merged_s, e0, side="left")
        if hi > lo:
            out_s.append(np.maximum(merged_s[lo:hi], s0))
            out_e.append(np.minimum(merged_e[lo:hi], e0))
    if not out_s:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(out_s), np.concatenate(out_e)


def _length(intervals: tuple[np.ndarray, np.ndarray]) -> int:
    return int((intervals[1] - intervals[0]).sum())


def step_window(run: Run, rank: int | None = None) -> tuple[tuple[np.ndarray, np.ndarray], bool]:
    """Return (the merged step intervals, whether steps were recorded).

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
        return (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)), False
    return (np.array([start[sel].min()]), np.array([end[sel].max()])), False


def _no_step_note(has_steps: bool) -> str | None:
    return (
        None if has_steps else "no steps were recorded: the whole profiled span counts as one step"
    )


def _frame(rows: list[dict[str, Any]], columns: list[str], note: str | None = None) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=columns)
    if note:
        frame.attrs["note"] = note
    return frame


# ---------------------------------------------------------------------------------------------
# overview


def overview_view(run: Run, *, rank: int | None = None, by: str = "kind") -> pd.DataFrame:
    """Time per event kind with overlaps merged, host side and device side, within the steps.

    Rows: ``step`` then every kind present (``by="category"``: every native category, such as
    Paddle's TracerEventType names, as Paddle's Overview Summary lists them). ``cpu_time_ns`` is the union of the kind's host
    intervals over all threads, ``gpu_time_ns`` the union of its device intervals over all
    streams and devices, both clipped to the step intervals; ratios are shares of the merged step
    time. Kinds overlap (an operator holds its runtime calls), so ratios do not add up to 100.
    """
    if by not in ("kind", "category"):
        raise ValueError(f"by must be 'kind' or 'category', not {by!r}")
    ev = run.events
    window, has_steps = step_window(run, rank)
    total = _length(window)
    sel = np.ones(len(ev), dtype=bool) if rank is None else ev["rank"].to_numpy() == rank
    kind = ev["kind"].to_numpy()
    groups = kind if by == "kind" else ev["category"].astype(str).to_numpy()
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
    from perfkit_core.schema import KIND_ORDER

    counted = sel & ~np.isin(kind, ["step", "memory"])
    if by == "kind":
        names = [k for k in KIND_ORDER if k not in ("step", "memory")]
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
            _length(clip_to(start[host_rows], end[host_rows], window))
            if host_rows.any()
            else math.nan
        )
        gpu = (
            _length(clip_to(start[dev_rows], end[dev_rows], window)) if dev_rows.any() else math.nan
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
    return _frame(
        rows,
        ["name", "calls", "cpu_time_ns", "cpu_ratio_pct", "gpu_time_ns", "gpu_ratio_pct"],
        _no_step_note(has_steps),
    )


# ---------------------------------------------------------------------------------------------
# device


def device_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Utilization per device, in percent (``utilization_pct``) of the merged step time.

    ``CPU (host threads busy)``: the summed time host threads spent inside recorded events,
    measured from the events for every framework (100% = one thread busy throughout). The CPU
    figures a profiler records itself (Paddle: process and system) follow as ``... recorded``;
    a recorded process figure of 0 while the events show host work is reported as not measured
    (NaN), not as a measured zero. Each GPU: the merged time it ran kernels, copies or sets.
    """
    ev = run.events
    window, has_steps = step_window(run, rank)
    total = _length(window)
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
    dev_type = ev["device_type"].astype(str).to_numpy()
    dev_index = ev["device_index"].to_numpy()
    ranks = ev["rank"].to_numpy()
    keys = sorted(
        {
            (int(r), str(t), int(i))
            for r, t, i in zip(ranks[sel], dev_type[sel], dev_index[sel], strict=True)
        }
    )
    multi_rank = len({k[0] for k in keys}) > 1
    for r, t, i in keys:
        rows_sel = sel & (ranks == r) & (dev_type == t) & (dev_index == i)
        rank_window = step_window(run, r)[0]
        busy = _length(clip_to(start[rows_sel], end[rows_sel], rank_window))
        win = _length(rank_window)
        name = f"{t.upper()} {i}" + (f" (rank {r})" if multi_rank else "")
        rows.append(
            {
                "name": name,
                "utilization_pct": 100.0 * busy / win if win else math.nan,
                "busy_ns": busy,
                "window_ns": win,
            }
        )
    note = "; ".join(n for n in [_no_step_note(has_steps), *notes] if n) or None
    return _frame(rows, ["name", "utilization_pct", "busy_ns", "window_ns"], note)


def _host_threads_busy(run: Run, window: tuple[np.ndarray, np.ndarray], rank: int | None) -> int:
    """Sum over host threads of the time each spent inside a recorded event, within ``window``."""
    ev = run.events
    sel = (
        (ev["stream"].to_numpy() < 0)
        & (ev["dur_ns"].to_numpy() > 0)
        & (ev["kind"].to_numpy() != "step")
    )
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    group = structure.group_codes(ev["rank"].to_numpy(), ev["pid"].to_numpy(), ev["tid"].to_numpy())
    busy = 0
    for g in np.unique(group[sel]).tolist():
        rows = sel & (group == g)
        busy += _length(clip_to(start[rows], end[rows], window))
    return busy


# ---------------------------------------------------------------------------------------------
# kernel

TENSOR_CORE_RE = re.compile(
    r"tensorop|hmma|xmma|wgmma|gmma|imma|[sh]1688|[sh]884|i8816|16816|_tc_|tensor_?core|sm\d+_xmma",
    re.IGNORECASE,
)


def kernel_view(run: Run, *, rank: int | None = None, top: int | None = None) -> pd.DataFrame:
    """One row per GPU kernel name: calls, total/avg/max/min time, share of all kernel time,
    launch shape (most common grid and block), registers per thread, shared memory, mean
    estimated occupancy where recorded, and whether it ran on tensor cores (from its name)."""
    import pandas as pd

    ev = run.events
    sel = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(list(KERNEL_KINDS)).to_numpy()
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    columns = [
        "name",
        "calls",
        "gpu_total_ns",
        "gpu_avg_ns",
        "gpu_max_ns",
        "gpu_min_ns",
        "gpu_ratio_pct",
        "grid",
        "block",
        "registers",
        "shared_memory_bytes",
        "occupancy_pct",
        "tensor_cores",
    ]
    if not sel.any():
        return _frame([], columns, "no kernels were recorded")
    k = ev.loc[
        sel, ["name", "dur_ns", "grid", "block", "registers", "shared_memory", "occupancy_pct"]
    ].copy()
    k["name"] = k["name"].astype(str)
    g = k.groupby("name", sort=False)
    out = g.agg(
        calls=("dur_ns", "size"),
        gpu_total_ns=("dur_ns", "sum"),
        gpu_max_ns=("dur_ns", "max"),
        gpu_min_ns=("dur_ns", "min"),
        registers=("registers", "max"),
        shared_memory_bytes=("shared_memory", "max"),
        occupancy_pct=("occupancy_pct", "mean"),
    ).reset_index()
    out["gpu_avg_ns"] = out["gpu_total_ns"] / out["calls"]
    total = out["gpu_total_ns"].sum()
    out["gpu_ratio_pct"] = 100.0 * out["gpu_total_ns"] / total if total else math.nan
    for col in ("grid", "block"):
        mode = (
            k.assign(v=k[col].astype(str))
            .groupby(["name", "v"], sort=False)
            .size()
            .reset_index(name="n")
        )
        mode = mode.sort_values(["name", "n"], ascending=[True, False]).drop_duplicates("name")
        out[col] = out["name"].map(dict(zip(mode["name"], mode["v"], strict=True))).fillna("")
    out["tensor_cores"] = out["name"].map(lambda n: bool(TENSOR_CORE_RE.search(n)))
    out = out[columns].sort_values(["gpu_total_ns", "name"], ascending=[False, True], kind="stable")
    if top is not None:
        out = out.head(top)
    return pd.DataFrame(out.reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# memcpy / memset

_DIRECTION_RE = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH|HtoA|AtoH|DtoA|AtoD|AtoA)\b")
_MEMORY_RE = re.compile(r"\((Pageable|Pinned|Device|Managed|Array)\b")


def memcpy_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Memory manipulation on the device: copies by direction (HtoD, DtoH, DtoD, PtoP), host
    memory (pageable or pinned) and whether the launching call was synchronous, plus memsets:
    calls, time, bytes and achieved GB/s (bytes over device time)."""
    ev = run.events
    sel = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(["memcpy", "memset"]).to_numpy()
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    columns = [
        "name",
        "operation",
        "direction",
        "host_memory",
        "synchronous",
        "calls",
        "gpu_total_ns",
        "gpu_avg_ns",
        "gpu_max_ns",
        "gpu_min_ns",
        "bytes",
        "gb_per_s",
    ]
    if not sel.any():
        return _frame([], columns, "no device copies or sets were recorded")
    rows = np.flatnonzero(sel)
    names = ev["name"].astype(str).to_numpy()
    kinds = ev["kind"].astype(str).to_numpy()
    launcher = structure.run_launchers(run)
    launch_names = np.where(launcher >= 0, names[np.maximum(launcher, 0)], "")
    records = []
    for r in rows.tolist():
        name = names[r]
        direction = _DIRECTION_RE.search(name)
        memory = _MEMORY_RE.search(name)
        launch = launch_names[r]
        operation = "memset" if kinds[r] == "memset" else "memcpy"
        src = memory.group(1) if memory else ""
        host_memory = (
            src.lower()
            if src in ("Pageable", "Pinned")
            else ("" if operation == "memset" else "device")
        )
        if direction and direction.group(1) == "DtoH":
            m = re.search(r"->\s*(Pageable|Pinned)", name)
            host_memory = m.group(1).lower() if m else host_memory
        synchronous = "" if not launch else ("async" if "Async" in launch else "sync")
        records.append(
            (operation, direction.group(1) if direction else "", host_memory, synchronous)
        )
    import pandas as pd

    frame = pd.DataFrame(records, columns=["operation", "direction", "host_memory", "synchronous"])
    frame["dur"] = ev["dur_ns"].to_numpy()[rows]
    frame["bytes"] = ev["bytes"].to_numpy()[rows]
    g = frame.groupby(["operation", "direction", "host_memory", "synchronous"], sort=False)
    out = g.agg(
        calls=("dur", "size"),
        gpu_total_ns=("dur", "sum"),
        gpu_max_ns=("dur", "max"),
        gpu_min_ns=("dur", "min"),
        bytes=("bytes", lambda b: b.sum(min_count=1)),
    ).reset_index()
    out["gpu_avg_ns"] = out["gpu_total_ns"] / out["calls"]
    out["gb_per_s"] = np.where(
        out["gpu_total_ns"] > 0, out["bytes"] / out["gpu_total_ns"], math.nan
    )
    out["name"] = [
        " ".join(p for p in (op.capitalize(), d, m, s) if p)
        for op, d, m, s in zip(
            out["operation"], out["direction"], out["host_memory"], out["synchronous"], strict=True
        )
    ]
    out = out[columns].sort_values(["gpu_total_ns", "name"], ascending=[False, True], kind="stable")
    return pd.DataFrame(out.reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# memory


def memory_view(run: Run, *, by: str = "op", rank: int | None = None) -> pd.DataFrame:
    """Allocations and frees where memory events were recorded.

    ``by="op"``: one row per (enclosing host event, device): allocation and free counts, bytes
    allocated and freed, net bytes. ``by="device"``: one row per device: peak allocated and peak
    reserved bytes, and the same counts.
    """
    import pandas as pd

    ev = run.events
    sel = ev["kind"].to_numpy() == "memory"
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    if by not in ("op", "device"):
        raise ValueError(f"by must be 'op' or 'device', not {by!r}")
    op_cols = [
        "name",
        "device",
        "allocations",
        "frees",
        "allocated_bytes",
        "freed_bytes",
        "net_bytes",
    ]
    dev_cols = [
        "name",
        "allocations",
        "frees",
        "allocated_bytes",
        "freed_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
    ]
    if not sel.any():
        return _frame(
            [],
            op_cols if by == "op" else dev_cols,
            "no memory events were recorded (profile_memory was off)",
        )
    rows = np.flatnonzero(sel)
    names = ev["name"].astype(str).to_numpy()
    parent = ev["parent"].to_numpy()[rows]
    device = [
        f"{t}" if i < 0 else f"{t}:{i}"
        for t, i in zip(
            ev["device_type"].astype(str).to_numpy()[rows],
            ev["device_index"].to_numpy()[rows],
            strict=True,
        )
    ]
    nbytes = ev["bytes"].to_numpy()[rows]
    frame = pd.DataFrame(
        {
            "name": np.where(parent >= 0, names[np.maximum(parent, 0)], "(outside any op)"),
            "device": device,
            "alloc": nbytes > 0,
            "free": nbytes < 0,
            "allocated_bytes": np.where(nbytes > 0, nbytes, 0.0),
            "freed_bytes": np.where(nbytes < 0, -nbytes, 0.0),
            "peak_allocated": ev["allocated_bytes"].to_numpy()[rows],
            "peak_reserved": ev["reserved_bytes"].to_numpy()[rows],
        }
    )
    if by == "device":
        g = frame.groupby("device", sort=True)
        out = (
            g.agg(
                allocations=("alloc", "sum"),
                frees=("free", "sum"),
                allocated_bytes=("allocated_bytes", "sum"),
                freed_bytes=("freed_bytes", "sum"),
                peak_allocated_bytes=("peak_allocated", "max"),
                peak_reserved_bytes=("peak_reserved", "max"),
            )
            .reset_index()
            .rename(columns={"device": "name"})
        )
        return pd.DataFrame(out[dev_cols])
    g = frame.groupby(["name", "device"], sort=False)
    out = g.agg(
        allocations=("alloc", "sum"),
        frees=("free", "sum"),
        allocated_bytes=("allocated_bytes", "sum"),
        freed_bytes=("freed_bytes", "sum"),
    ).reset_index()
    out["net_bytes"] = out["allocated_bytes"] - out["freed_bytes"]
    out = out[op_cols].sort_values(
        ["allocated_bytes", "name"], ascending=[False, True], kind="stable"
    )
    return pd.DataFrame(out.reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# distributed


def distributed_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Communication against computation: merged communication time (NCCL/gloo kernels and
    collective ops), merged computation time (other kernels; host operators when no device
    events were recorded), and how much of the two overlap, per step window and rank."""
    ev = run.events
    ranks = sorted({int(r) for r in ev["rank"].unique()}) if rank is None else [rank]
    kind = ev["kind"].to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    device = ev["stream"].to_numpy() >= 0
    rows = []
    for r in ranks:
        in_rank = ev["rank"].to_numpy() == r
        window, _ = step_window(run, r)
        total = _length(window)
        if (in_rank & device).any():
            comm_mask = in_rank & device & (kind == "communication")
            comp_mask = in_rank & device & np.isin(kind, ["kernel", "memcpy", "memset"])
            side = "gpu"
        else:
            comm_mask = in_rank & ~device & (kind == "communication")
            comp_mask = in_rank & ~device & (kind == "operator") & (ev["parent"].to_numpy() >= 0)
            comp_mask &= ~structure.has_ancestor(ev["parent"].to_numpy(), kind == "communication")
            side = "cpu"
        comm = clip_to(start[comm_mask], end[comm_mask], window)
        comp = clip_to(start[comp_mask], end[comp_mask], window)
        overlap = intersect_length(comm, comp)
        suffix = f" (rank {r})" if len(ranks) > 1 else ""
        for name, value in (
            ("step", total),
            ("communication", _length(comm)),
            ("computation", _length(comp)),
            ("overlap", overlap),
        ):
            rows.append(
                {
                    "name": name + suffix,
                    "rank": r,
                    "side": side,
                    "time_ns": value,
                    "ratio_pct": 100.0 * value / total if total else math.nan,
                }
            )
    note = None if (kind == "communication").any() else "no communication was recorded"
    return _frame(rows, ["name", "rank", "side", "time_ns", "ratio_pct"], note)


# ---------------------------------------------------------------------------------------------
# steps and benchmark

#: Steps dropped from the start of the benchmark view as warm-up when none is given: the first
#: profiled step carries one-time costs (allocator growth, autotuning, lazy init), so with 3 or
#: more steps the first one is left out; with fewer, none is.
DEFAULT_WARMUP_MIN_STEPS = 3


def steps_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """One row per step: number, start (``offset_ns``, from the first event of the run),
    duration, merged data-loading time, and the merged device time of the work launched in the
    step (NaN without device events; it can exceed the step when device work runs on after it)."""
    ev = run.events
    kind = ev["kind"].to_numpy()
    sel = kind == "step"
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    columns = ["name", "rank", "step", "offset_ns", "dur_ns", "dataloader_ns", "gpu_busy_ns"]
    if not sel.any():
        return _frame([], columns, "no steps were recorded")
    step_col = ev["step"].to_numpy()
    ranks = ev["rank"].to_numpy()
    start = ev["start_ns"].to_numpy()
    dur = ev["dur_ns"].to_numpy()
    end = start + dur
    device = (ev["stream"].to_numpy() >= 0) & np.isin(kind, DEVICE_KINDS)
    has_device = device.any()
    loader = (kind == "dataloader") & (ev["stream"].to_numpy() < 0)
    origin = int(start.min())
    rows = []
    for r in np.flatnonzero(sel).tolist():
        in_step = (step_col == step_col[r]) & (ranks == ranks[r])
        load = loader & in_step
        dl = _length(merge_intervals(start[load], end[load]))
        dev = device & in_step
        busy = _length(merge_intervals(start[dev], end[dev])) if has_device else math.nan
        rows.append(
            {
                "name": f"step {int(step_col[r])}",
                "rank": int(ranks[r]),
                "step": int(step_col[r]),
                "offset_ns": int(start[r]) - origin,
                "dur_ns": int(dur[r]),
                "dataloader_ns": dl,
                "gpu_busy_ns": busy,
            }
        )
    return _frame(rows, columns)


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
        return _frame([], columns, "no steps were recorded")
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
    return _frame(rows, columns, note)
