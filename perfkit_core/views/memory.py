"""The memory manipulation (memcpy/memset) and memory (allocations) views."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.schema import str_values
from perfkit_core.views.common import view_frame

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
        return view_frame(
            [],
            op_cols if by == "op" else dev_cols,
            "no memory events were recorded (profile_memory was off)",
        )
    rows = np.flatnonzero(sel)
    names = str_values(ev["name"])
    parent = ev["parent"].to_numpy()[rows]
    device = [
        f"{t}" if i < 0 else f"{t}:{i}"
        for t, i in zip(
            str_values(ev["device_type"])[rows],
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
