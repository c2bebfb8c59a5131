"""The memory manipulation (memcpy/memset) and memory (allocations and frees) views."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import step_spans
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values
from perfkit_core.views.allocations import Allocations, allocations
from perfkit_core.views.common import no_step_note, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# memcpy / memset

_DIRECTION_RE = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH|HtoA|AtoH|DtoA|AtoD|AtoA)\b")
_MEMORY_RE = re.compile(r"\((Pageable|Pinned|Device|Managed|Array)\b")


def memcpy_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Memory manipulation on the device: copies by direction (HtoD, DtoH, DtoD, PtoP), host
    memory (pageable or pinned) and whether the launching call was synchronous, plus memsets:
    calls, time, bytes and achieved GB/s (bytes over device time)."""
    ev = run.events
    sel = (ev["stream"].to_numpy() >= 0) & kind_is(ev, "memcpy", "memset")
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
        return view_frame([], columns, "no device copies or sets were recorded")
    rows = np.flatnonzero(sel)
    names = str_values(ev["name"])
    kinds = str_values(ev["kind"])
    launcher = links.run_launchers(run)
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

#: Header labels of the memory view's columns (``frame.attrs["labels"]``).
MEMORY_LABELS: dict[str, str] = {
    "name": "Name",
    "device": "Device",
    "allocations": "Allocations per step",
    "allocated_bytes": "Allocated per step",
    "freed_later_bytes": "Of that, freed later per step",
    "held_bytes": "Held at the end of the profile",
    "frees": "Frees per step",
    "freed_bytes": "Freed per step",
    "peak_allocated_bytes": "Peak allocated",
    "peak_reserved_bytes": "Peak reserved",
    "peak_above_start_bytes": "Peak above the profile's start",
}
_BY = {
    "op": [
        "name",
        "device",
        "allocations",
        "allocated_bytes",
        "freed_later_bytes",
        "held_bytes",
        "frees",
        "freed_bytes",
    ],
    "device": [
        "name",
        "allocations",
        "allocated_bytes",
        "frees",
        "freed_bytes",
        "held_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "peak_above_start_bytes",
    ],
    "step": [
        "name",
        "device",
        "allocations",
        "allocated_bytes",
        "frees",
        "freed_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "peak_above_start_bytes",
    ],
}


def memory_view(run: Run, *, by: str = "op", rank: int | None = None) -> pd.DataFrame:
    """Allocations and frees where memory events were recorded, each free paired with the
    allocation it releases (``perfkit_core.views.allocations``), whichever op made either.

    ``by="op"``: one row per op (the innermost enclosing host event that is not a step) and
    device: what the op allocated per step, how much of that was freed later (by any op) and
    how much was still held at the end of the profile, and what the op freed. ``by="device"``:
    one row per device, with the peaks over the profile. ``by="step"``: one row per step and
    device, with the step's peaks. Counts and bytes allocated or freed are per step (events
    inside the steps, over the number of steps); peaks and held bytes are bytes.
    """
    import pandas as pd

    if by not in _BY:
        raise ValueError(f"by must be 'op', 'device' or 'step', not {by!r}")
    columns = _BY[by]
    mem = allocations(run, rank)
    labels = {c: MEMORY_LABELS[c] for c in columns}
    if by == "step":
        labels["allocations"], labels["frees"] = "Allocations", "Frees"
        labels["allocated_bytes"], labels["freed_bytes"] = "Allocated", "Freed"
    if not (mem.is_alloc | mem.is_free).any():
        frame = view_frame([], columns, "no memory events were recorded (profile_memory was off)")
        frame.attrs["labels"] = labels
        return frame
    spans = step_spans(run, rank)
    steps = max(len(np.unique(spans["step"])), 1)
    in_steps = mem.step >= 0 if len(spans["step"]) else np.ones(len(mem.bytes), dtype=bool)
    frame = pd.DataFrame(
        {
            "name": mem.op,
            "device": mem.device,
            "step": mem.step,
            "alloc": (mem.is_alloc & in_steps).astype(np.int64),
            "free": (mem.is_free & in_steps).astype(np.int64),
            "allocated": np.where(mem.is_alloc & in_steps, mem.bytes, 0.0),
            "freed_later": np.where(mem.is_alloc & mem.freed & in_steps, mem.bytes, 0.0),
            "held": np.where(mem.held, mem.bytes, 0.0),
            "freed": np.where(mem.is_free & in_steps, -mem.bytes, 0.0),
            "level": _levels(mem),
            "peak_allocated": mem.allocated_total,
            "peak_reserved": mem.reserved_total,
        }
    )
    sums = {
        "allocations": ("alloc", "sum"),
        "allocated_bytes": ("allocated", "sum"),
        "freed_later_bytes": ("freed_later", "sum"),
        "held_bytes": ("held", "sum"),
        "frees": ("free", "sum"),
        "freed_bytes": ("freed", "sum"),
        "peak_allocated_bytes": ("peak_allocated", "max"),
        "peak_reserved_bytes": ("peak_reserved", "max"),
        "peak_above_start_bytes": ("level", "max"),
    }
    wanted = {c: sums[c] for c in columns if c in sums}
    if by == "step":
        frame = frame[frame["step"] >= 0]
        out = frame.groupby(["step", "device"], sort=True).agg(**wanted).reset_index()
        out["name"] = [f"step {s}" for s in out["step"]]
    else:
        keys = ["name", "device"] if by == "op" else ["device"]
        out = frame.groupby(keys, sort=False).agg(**wanted).reset_index()
        if by == "device":
            out = out.rename(columns={"device": "name"}).sort_values("name", kind="stable")
        for column in ("allocations", "allocated_bytes", "freed_later_bytes", "frees"):
            if column in out.columns:
                out[column] = out[column] / steps
        if "freed_bytes" in out.columns:
            out["freed_bytes"] = out["freed_bytes"] / steps
    if "peak_above_start_bytes" in out.columns:
        out["peak_above_start_bytes"] = np.maximum(out["peak_above_start_bytes"], 0.0)
    if by == "op":
        out = out.sort_values(
            ["allocated_bytes", "held_bytes", "freed_bytes", "name"],
            ascending=[False, False, False, True],
            kind="stable",
        )
    out = pd.DataFrame(out[columns].reset_index(drop=True))
    out.attrs["labels"] = labels
    out.attrs["note"] = _memory_note(mem, frame, steps, bool(len(spans["step"])), by)
    return out


def _levels(mem: Allocations) -> np.ndarray:
    """Per event, the bytes allocated less freed on its device since the start of the profile
    (events in time order), after the event."""
    level = np.zeros(len(mem.bytes))
    change = np.nan_to_num(mem.bytes)
    for device in np.unique(mem.device.astype(str)):
        mine = mem.device == device
        level[mine] = np.cumsum(change[mine])
    return level


def _memory_note(
    mem: Allocations, frame: pd.DataFrame, steps: int, has_steps: bool, by: str
) -> str:
    """What a reader of the memory view must know: the unit of its rows, how frees were
    paired, and each device's peak."""
    parts = []
    if by != "step":
        parts.append(
            f"per step: over the {steps} steps" if has_steps else no_step_note(False) or ""
        )
    if mem.by_address:
        parts.append("each free paired with its allocation by address")
    else:
        moved = (
            f"; {bytes_text(mem.ambiguous_bytes)} held at the end could be another op's"
            if mem.ambiguous_bytes
            else ""
        )
        parts.append(
            "the trace recorded no addresses: each free paired with the latest held "
            f"allocation of its size on its device{moved}"
        )
    for device, group in frame.groupby("device", sort=True):
        totals = group["peak_allocated"].to_numpy()
        if not np.isnan(totals).all():
            at = int(np.nanargmax(totals))
            reserved = group["peak_reserved"].to_numpy()
            text = f"{device}: peak allocated {bytes_text(float(totals[at]))}"
            if not np.isnan(reserved).all():
                text += f", peak reserved {bytes_text(float(np.nanmax(reserved)))}"
        else:
            levels = group["level"].to_numpy()
            at = int(np.argmax(levels))
            text = (
                f"{device}: no allocator totals recorded; peak "
                f"{bytes_text(max(float(levels[at]), 0.0))} above the profile's start"
            )
        step = int(group["step"].to_numpy()[at])
        parts.append(text + (f" (step {step})" if step >= 0 else ""))
    return "; ".join(p for p in parts if p)


def bytes_text(value: float) -> str:
    """``31.7 GiB``, ``1.5 KiB``, ``424 B``: a byte count in the largest binary unit it fills."""
    for name, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.1f} {name}"
    return f"{round(value)} B"
