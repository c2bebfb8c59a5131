"""Rules from the roofline (``perfkit_core.views.roofline``): ops far below the bound of their
arithmetic intensity, with a known cause.

- ``tensor-cores-unused``: matrix ops (GEMMs, convolutions, attention) in fp32 off tensor cores
  on a GPU whose tensor cores ran other ops of the run (when none did, ``amp`` says so);
- ``gemm-alignment``: matrix ops on tensor cores whose dimensions are not multiples of 8,
  which keeps them from the fast, aligned kernels;
- ``small-gemms``: matrix ops too small to leave the latency regime, called many times a step;
- ``unfused-elementwise``: runs of memory-bound elementwise ops over the same tensor, each
  reading and writing it whole, that a compiler fuses into one pass.

Each finding's saving is estimated from the bound, per step: the time its ops spend above the
bound they would reach with the change (the tensor-core peak; their own bound; one pass over
the data), never more than their measured time. Each op is claimed by at most one of these
rules, in the order above.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.advice.basis import device_basis_text, step_basis
from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.text import duration_text
from perfkit_core.views.costmodel.opcost import MODEL_KINDS
from perfkit_core.views.costmodel.peaks import Peaks, run_peaks
from perfkit_core.views.roofline import LATENCY_BOUND_NS, op_table

if TYPE_CHECKING:
    import pandas as pd

#: An op group qualifies when it runs below this share of its roofline bound ...
MAX_ROOFLINE_PCT = 50.0
#: ... and the saving is at least this share of the step.
MIN_SAVING_STEP_PCT = 1.0
#: gemm-alignment: tensor-core kernels want every GEMM dimension a multiple of this (8 fp16/bf16
#: elements are 16 bytes; NVIDIA's guidance for tensor cores).
ALIGNMENT_ELEMENTS = 8
#: small-gemms: at least this many latency-bound matrix-op calls a step.
SMALL_GEMMS_MIN_PER_STEP = 20
#: unfused-elementwise: a run of at least this many consecutive memory-bound ops over tensors
#: of the same size.
FUSION_MIN_OPS = 3
#: Kinds of memory-bound ops a compiler fuses.
FUSABLE_KINDS = ("elementwise", "norm", "softmax")


def _table(ctx: Context) -> tuple[pd.DataFrame, Peaks] | None:
    """The run's op calls with their bounds, and the peaks (None without device or peaks)."""
    if not ctx.has_device:
        return None
    key = "advice_roofline"
    if key not in ctx.run.cache:
        peaks = run_peaks(ctx.run)
        ctx.run.cache.put(key, (op_table(ctx.run, peaks), peaks) if peaks is not None else None)
    found: tuple[pd.DataFrame, Peaks] | None = ctx.run.cache.get(key)
    return found


class _Claims:
    """The op calls (event-table rows) the rules of this module claimed so far in one
    ``advise``, in rule order: each call is claimed once."""

    def __init__(self) -> None:
        self.rows: set[int] = set()

    def free(self, table: pd.DataFrame) -> np.ndarray:
        return ~table["row"].isin(self.rows).to_numpy()


def _findings(ctx: Context) -> dict[str, Finding | None]:
    """Every finding of this module for ``ctx``, computed once per ``advise`` in rule order
    (each op call claimed by the first rule that finds it)."""

    def compute(ctx: Context) -> dict[str, Finding | None]:
        claims = _Claims()
        return {
            rule: function(ctx, claims)
            for rule, function in (
                ("tensor-cores-unused", _tensor_cores_unused),
                ("gemm-alignment", _gemm_alignment),
                ("small-gemms", _small_gemms),
                ("unfused-elementwise", _unfused_elementwise),
            )
        }

    return ctx.once("advice_roofline_findings", compute)


def _pct_text(pct: float) -> str:
    """A share of the roofline bound in whole percent; ``under 1%`` where it rounds to 0."""
    return "under 1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


def _finding(
    ctx: Context,
    claims: _Claims,
    rule: str,
    picked: pd.DataFrame,
    saving_total: float,
    title: str,
    detail: str,
    estimate: str,
    evidence: dict[str, Any],
) -> Finding | None:
    """A finding of ``rule`` about the op calls ``picked`` (over all steps), saving
    ``saving_total`` over all steps, or None when that is under MIN_SAVING_STEP_PCT a step.
    The saving is device time, which the profiler does not slow: it is stated against the
    step without the profiler where the step timer timed it (``device_basis_text``)."""
    steps = max(ctx.steps, 1)
    saving = saving_total / steps
    basis = step_basis(ctx)
    step = basis.step_ns
    if not step or 100.0 * saving / step < MIN_SAVING_STEP_PCT:
        return None
    claims.rows.update(int(r) for r in picked["row"])
    by_op = (
        picked.groupby("name")
        .agg(
            calls=("time_ns", "size"), time_ns=("time_ns", "sum"), bound_ns=("bound_time_ns", "sum")
        )
        .sort_values("time_ns", ascending=False)
    )
    lines = [detail] + [
        f"{name}: {r.calls / steps:.0f} calls and {duration_text(r.time_ns / steps)} per step, "
        f"{_pct_text(100.0 * r.bound_ns / r.time_ns)} of its roofline bound."
        for name, r in by_op.head(3).iterrows()
    ]
    return Finding(
        id=rule,
        title=title,
        severity="",
        saving_ns=saving,
        acts_on="device",
        details=lines,
        estimate=f"{estimate} {device_basis_text(basis)}",
        cites={"roofline": [str(n) for n in by_op.index[:5]]},
        evidence={
            **evidence,
            "ops": [
                {
                    "op": str(n),
                    "calls_per_step": r.calls / steps,
                    "time_per_step_ns": r.time_ns / steps,
                }
                for n, r in by_op.head(5).iterrows()
            ],
            "time_per_step_ns": float(picked["time_ns"].sum()) / steps,
            "basis": basis.name,
            "basis_step_ns": basis.step_ns,
        },
    )


def _tensor_cores_unused(ctx: Context, claims: _Claims) -> Finding | None:
    """The finding of ``rule_tensor_cores_unused``, its op calls claimed in ``claims``."""
    found = _table(ctx)
    if found is None:
        return None
    table, peaks = found
    tc = [p for p in ("tf32 tensor", "fp16 tensor") if p in peaks.tflops]
    if not tc or not table["precision"].str.endswith("tensor").any():
        return None
    peak = peaks.tflops[tc[0]]
    picked = table[
        np.isin(table["kind"], MODEL_KINDS) & (table["precision"] == "fp32") & claims.free(table)
    ]
    if picked.empty:
        return None
    memory_ns = picked["bytes"] / (peaks.bandwidth_tbps * 1e12) * 1e9
    target = np.fmax(picked["flops"] / (peak * 1e12) * 1e9, memory_ns)
    saving = float((picked["time_ns"] - target).clip(lower=0).sum())
    return _finding(
        ctx,
        claims,
        "tensor-cores-unused",
        picked,
        saving,
        f"{len(picked) / max(ctx.steps, 1):.0f} fp32 matrix ops a step skip the tensor cores",
        f"These GEMMs, convolutions or attention ops ran fp32 kernels on {peaks.device} "
        f"({peaks.tflops.get('fp32', math.nan):g} TFLOP/s) while its tensor cores reach "
        f"{peak:g} TFLOP/s ({tc[0]}), and other ops of this run used them.",
        f"Their time above the roofline bound at the {tc[0]} peak ({peak:g} TFLOP/s), per step.",
        {"peak_tflops_per_s": peak, "precision": tc[0], "device": peaks.device},
    )


def _misaligned(table: pd.DataFrame) -> np.ndarray:
    dims = table[["gemm_m", "gemm_n", "gemm_k"]].to_numpy()
    known = (dims > 0).all(axis=1)
    # The batch (rows) dimension M aligns itself in practice; N and K set the kernel's tiles.
    return known & ((dims[:, 1] % ALIGNMENT_ELEMENTS != 0) | (dims[:, 2] % ALIGNMENT_ELEMENTS != 0))


def _gemm_alignment(ctx: Context, claims: _Claims) -> Finding | None:
    """The finding of ``rule_gemm_alignment``, its op calls claimed in ``claims``."""
    found = _table(ctx)
    if found is None:
        return None
    table, _ = found
    on_tc = table["precision"].str.endswith("tensor").to_numpy()
    picked = table[
        on_tc & _misaligned(table) & claims.free(table) & np.isin(table["kind"], MODEL_KINDS)
    ]
    if (
        picked.empty
        or picked["bound_time_ns"].sum() >= MAX_ROOFLINE_PCT / 100 * picked["time_ns"].sum()
    ):
        return None
    saving = float((picked["time_ns"] - picked["bound_time_ns"]).clip(lower=0).sum())
    shapes = sorted(
        {(int(m), int(n), int(k)) for m, n, k in picked[["gemm_m", "gemm_n", "gemm_k"]].to_numpy()}
    )
    return _finding(
        ctx,
        claims,
        "gemm-alignment",
        picked,
        saving,
        f"Matrix ops with sizes that are not multiples of {ALIGNMENT_ELEMENTS} run far below their bound",
        f"{len(shapes)} GEMM shapes (M, N, K) have N or K not a multiple of {ALIGNMENT_ELEMENTS}, "
        f"e.g. {', '.join(map(str, shapes[:3]))}: tensor cores then fall back to slower "
        "unaligned kernels (cuBLAS/CUTLASS kernels named *align1* or *align2*).",
        "Their time above their roofline bound, per step (padded to aligned sizes, the aligned "
        "kernels run near it).",
        {"alignment": ALIGNMENT_ELEMENTS, "shapes": [list(s) for s in shapes[:10]]},
    )


def _small_gemms(ctx: Context, claims: _Claims) -> Finding | None:
    """The finding of ``rule_small_gemms``, its op calls claimed in ``claims``."""
    found = _table(ctx)
    if found is None:
        return None
    table, _ = found
    picked = table[
        np.isin(table["kind"], MODEL_KINDS)
        & (table["bound_time_ns"] < LATENCY_BOUND_NS)
        & claims.free(table)
    ]
    if len(picked) / max(ctx.steps, 1) < SMALL_GEMMS_MIN_PER_STEP:
        return None
    saving = float((picked["time_ns"] - picked["bound_time_ns"]).clip(lower=0).sum())
    return _finding(
        ctx,
        claims,
        "small-gemms",
        picked,
        saving,
        f"{len(picked) / max(ctx.steps, 1):.0f} small matrix ops a step are latency-bound",
        f"Each of these calls does under {LATENCY_BOUND_NS / 1000:g} us of work at the "
        "roofline, so kernel launch and ramp-up dominate its time.",
        "Their time above their roofline bound, per step: batched (bmm, grouped GEMM, a larger "
        "batch) or captured in a CUDA graph, small GEMMs approach it.",
        {"latency_bound_ns": LATENCY_BOUND_NS},
    )


def _chains(table: pd.DataFrame) -> list[np.ndarray]:
    """Runs (positions in ``table``, in call order) of at least FUSION_MIN_OPS consecutive
    memory-bound fusable ops over tensors of the same number of elements (FLOPs within half
    of each other's)."""
    order = np.argsort(table["row"].to_numpy(), kind="stable")
    if len(order) == 0:
        return []
    kind = table["kind"].to_numpy()[order]
    side = table["side"].to_numpy()[order]
    flops = table["flops"].to_numpy().astype(np.float64)[order]
    flops = np.where(flops == 0, 1.0, flops)  # no FLOPs compare as one
    ok = np.isin(kind, FUSABLE_KINDS) & (side == "memory")
    with np.errstate(invalid="ignore"):
        close = np.abs(flops[1:] - flops[:-1]) <= 0.5 * np.maximum(
            np.abs(flops[1:]), np.abs(flops[:-1])
        )
    joined = ok[1:] & ok[:-1] & close  # position i + 1 continues the run of position i
    starts = np.r_[0, np.flatnonzero(~joined) + 1]
    ends = np.r_[starts[1:], len(order)]
    keep = (ends - starts >= FUSION_MIN_OPS) & ok[starts]
    return [order[a:b] for a, b in zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)]


def _unfused_elementwise(ctx: Context, claims: _Claims) -> Finding | None:
    """The finding of ``rule_unfused_elementwise``, its op calls claimed in ``claims``."""
    found = _table(ctx)
    if found is None:
        return None
    table, peaks = found
    free = table[claims.free(table)].reset_index(drop=True)
    chains = _chains(free)
    if not chains:
        return None
    nbytes = free["bytes"].to_numpy().astype(np.float64)
    time_ns = free["time_ns"].to_numpy().astype(np.float64)
    saving = 0.0
    for chain in chains:
        per_op = nbytes[chain]
        # Fused, no intermediate tensor is written and read back: taking each op to read two
        # tensors and write one of the same size, 2/3 of the smaller of two neighbours' bytes.
        inner = 2 * np.minimum(per_op[1:], per_op[:-1]).sum() / 3
        fused_ns = max(float(per_op.sum()) - inner, 0.0) / (peaks.bandwidth_tbps * 1e12) * 1e9
        saving += max(float(time_ns[chain].sum()) - fused_ns, 0.0)
    picked = free.iloc[np.concatenate(chains)]
    return _finding(
        ctx,
        claims,
        "unfused-elementwise",
        picked,
        saving,
        f"{len(chains) / max(ctx.steps, 1):.0f} runs of memory-bound ops a step could be fused",
        f"{len(picked) / max(ctx.steps, 1):.0f} memory-bound ops a step run back to back over "
        "tensors of the same size, each reading and writing the whole tensor in device memory.",
        "The runs' time less one fused pass at the bandwidth bound (their bytes less the "
        "intermediate tensors written and read back), per step.",
        {"chains_per_step": len(chains) / max(ctx.steps, 1), "min_chain": FUSION_MIN_OPS},
    )


def rule_tensor_cores_unused(ctx: Context) -> Finding | None:
    """Matrix ops that ran in fp32 off tensor cores on a GPU with tensor cores, in a run where
    other ops used them (without any tensor-core kernel the ``amp`` rule speaks instead).

    Saving: their time above the bound they would have on the tensor-core peak of their
    precision (TF32 for fp32 where the GPU has it, else fp16), per step.
    Reported when that is at least MIN_SAVING_STEP_PCT of the step.
    """
    return _findings(ctx)["tensor-cores-unused"]


def rule_gemm_alignment(ctx: Context) -> Finding | None:
    """Matrix ops on tensor cores whose N or K (output features, reduction length; channels of
    a convolution) is not a multiple of ALIGNMENT_ELEMENTS, running under MAX_ROOFLINE_PCT of their
    bound.

    Saving: their time above their roofline bound, per step (an upper bound: padded to
    aligned sizes they run at the aligned kernels' speed, which is near the bound).
    Reported when that is at least MIN_SAVING_STEP_PCT of the step.
    """
    return _findings(ctx)["gemm-alignment"]


def rule_small_gemms(ctx: Context) -> Finding | None:
    """At least SMALL_GEMMS_MIN_PER_STEP matrix-op calls a step whose work takes under
    ``LATENCY_BOUND_NS`` at the roofline: launch and ramp-up, not math, set their time.

    Saving: their time above their roofline bound, per step (batched into one larger GEMM, or
    replayed as a CUDA graph, the calls approach their bound).
    Reported when that is at least MIN_SAVING_STEP_PCT of the step.
    """
    return _findings(ctx)["small-gemms"]


def rule_unfused_elementwise(ctx: Context) -> Finding | None:
    """Runs of at least FUSION_MIN_OPS consecutive memory-bound elementwise, normalisation or
    softmax ops over the same tensor, each reading and writing it in full.

    Saving: their time less the time one fused pass would take at the bandwidth bound (the
    runs' bytes less the intermediate tensors each op wrote and the next read back), per step.
    Reported when that is at least MIN_SAVING_STEP_PCT of the step.
    """
    return _findings(ctx)["unfused-elementwise"]
