"""The kernel view: calls, time, launch shape and occupancy per device kernel."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from perfkit_core.views.common import KERNEL_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


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
        return view_frame([], columns, "no kernels were recorded")
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
