"""The kernel view: calls, time, launch shape and occupancy per device kernel."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_contains
from perfkit_core.views.common import KERNEL_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# kernel

#: Kernel names of NVIDIA tensor-core kernels (cuBLAS ``*_s1688gemm_*``, ``*_hmma*``,
#: ``*tensorop*``, ``sm80_xmma*``, CUTLASS ``*_16816*``, Hopper ``wgmma``, and the ``nvjet_*``
#: GEMMs recent cuBLAS runs on Hopper: ``nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT``, a bf16
#: product that reached 805 TFLOP/s on an H200, 12x its fp32 peak) and AMD matrix-core kernels
#: (``MFMA``, Tensile's ``_MI16x16x4``) ...
TENSOR_CORE_RE = re.compile(
    r"tensorop|hmma|xmma|wgmma|gmma|imma|nvjet|[sh]1688|[sh]884|i8816|16816|_tc_|tensor_?core|mfma|_MI\d+x\d+x\d+",
    re.IGNORECASE,
)
#: ... except these, which run on CUDA cores: cuBLAS's FP32 GEMMs with TF32 off on compute
#: capability 8.0 and newer share the ``xmma`` family name but use FFMA instructions
#: (``sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_..._ffma_...``).
CUDA_CORE_RE = re.compile(r"ffma|f32f32_f32f32_f32_", re.IGNORECASE)


def tensor_core_kernels(names: pd.Series) -> np.ndarray:
    """Which of the kernel ``names`` (a string or categorical column) run on tensor (or
    matrix) cores, as a numpy bool array: those matching ``TENSOR_CORE_RE`` and not
    ``CUDA_CORE_RE``."""
    return str_contains(names, TENSOR_CORE_RE.pattern, case=False) & ~str_contains(
        names, CUDA_CORE_RE.pattern, case=False
    )


def weighted_occupancy(kernels: pd.DataFrame, by: str) -> pd.Series:
    """Duration-weighted mean of ``occupancy_pct`` per value of column ``by`` of ``kernels``
    (rows with ``dur_ns`` and ``occupancy_pct``), in percent; rows without a figure left out,
    NaN for a group where none has one or all last 0 ns."""
    import pandas as pd

    occ = kernels["occupancy_pct"].to_numpy(dtype=float)
    dur = kernels["dur_ns"].to_numpy(dtype=float)
    known = ~np.isnan(occ)
    keys = kernels[by].astype(str).to_numpy()
    frame = (
        pd.DataFrame({"key": keys[known], "num": occ[known] * dur[known], "den": dur[known]})
        .groupby("key")[["num", "den"]]
        .sum()
    )
    weighted = frame["num"] / frame["den"].where(frame["den"] > 0)
    return weighted.reindex(pd.unique(keys))


#: The ``operator`` of kernels no recorded operator launched.
NO_OPERATOR = "(no operator)"


def _by_operator(run: Run, sel: np.ndarray, top: int | None) -> pd.DataFrame:
    """``kernel_view(by_operator=True)``: one row per kernel name and the operator that
    launched it."""
    import pandas as pd

    from perfkit_core.events import links
    from perfkit_core.events.schema import str_values

    ev = run.events
    rows = np.flatnonzero(sel)
    launcher = links.run_launchers(run)[rows]
    issued_by = links.launch_parents(run)
    op = np.where(launcher >= 0, issued_by[np.maximum(launcher, 0)], -1)
    kind = str_values(ev["kind"])
    op = np.where((op >= 0) & (kind[np.maximum(op, 0)] == "operator"), op, -1)
    names = str_values(ev["name"])
    full = str_values(ev["full_name"])
    label = np.where(full != "", full, names)
    frame = pd.DataFrame(
        {
            "name": names[rows],
            "operator": np.where(op >= 0, label[np.maximum(op, 0)], NO_OPERATOR),
            "dur_ns": ev["dur_ns"].to_numpy()[rows],
        }
    )
    out = (
        frame.groupby(["name", "operator"], sort=False)
        .agg(
            calls=("dur_ns", "size"),
            gpu_total_ns=("dur_ns", "sum"),
            gpu_max_ns=("dur_ns", "max"),
            gpu_min_ns=("dur_ns", "min"),
        )
        .reset_index()
    )
    out["gpu_avg_ns"] = out["gpu_total_ns"] / out["calls"]
    total = out["gpu_total_ns"].sum()
    out["gpu_ratio_pct"] = 100.0 * out["gpu_total_ns"] / total if total else math.nan
    out = out[
        [
            "name",
            "operator",
            "calls",
            "gpu_total_ns",
            "gpu_avg_ns",
            "gpu_max_ns",
            "gpu_min_ns",
            "gpu_ratio_pct",
        ]
    ].sort_values(["gpu_total_ns", "name"], ascending=[False, True], kind="stable")
    if top is not None:
        out = out.head(top)
    out = pd.DataFrame(out.reset_index(drop=True))
    out.attrs["labels"] = {
        "operator": "Launched by",
        "gpu_ratio_pct": "% of kernel time",
    }
    return out


def kernel_view(
    run: Run, *, rank: int | None = None, top: int | None = None, by_operator: bool = False
) -> pd.DataFrame:
    """One row per GPU kernel name: calls, total/avg/max/min time, share of all kernel time,
    launch shape (most common grid and block), registers per thread, shared memory, estimated
    achieved occupancy and whether it ran on tensor cores (from its name).

    ``by_operator=True``: one row per kernel name and the operator that launched it
    (``operator``: its full name where recorded, ``(no operator)`` for kernels launched outside
    every operator), with calls and total/avg/max/min time: MindInsight's CUDA kernel activity.

    ``occupancy_pct`` is the mean of the calls' estimated achieved occupancy weighted by their
    duration (``weighted_occupancy``), as the TensorBoard profiler and Nsight Systems weigh it:
    a long launch counts for more than a short one. Calls without a recorded figure are left
    out of the mean (the TensorBoard profiler's kernel table counts them as 0); NaN when no
    call recorded one.
    """
    import pandas as pd

    ev = run.events
    sel = (ev["stream"].to_numpy() >= 0) & kind_is(ev, *KERNEL_KINDS)
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
    if by_operator:
        return _by_operator(run, sel, top)
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
    ).reset_index()
    out["occupancy_pct"] = out["name"].map(weighted_occupancy(k, "name"))
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
    out["tensor_cores"] = tensor_core_kernels(out["name"])
    out = out[columns].sort_values(["gpu_total_ns", "name"], ascending=[False, True], kind="stable")
    if top is not None:
        out = out.head(top)
    frame = pd.DataFrame(out.reset_index(drop=True))
    frame.attrs["labels"] = {"gpu_ratio_pct": "% of all kernel time"}
    return frame
