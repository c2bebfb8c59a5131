"""What automatic mixed precision takes off a step: the ``amp`` finding's saving.

The remedy (bf16 autocast; fp16 with a gradient scaler before compute capability 8.0) changes
three things, each estimated from the run's own figures:

- **The matrix ops' device time.** Each fp32 GEMM or convolution off the tensor cores runs at
  the same share of the reduced-precision tensor-core peak as it reached of the fp32 peak, and
  never faster than moving half its bytes at the device's bandwidth (the datasheet peaks of
  ``perfkit_core.views.costmodel.peaks``). Without the device's peaks, or without recorded shapes, the
  matrix kernels' time is divided by ``AMP_SPEEDUP``.
- **The casts autocast adds on the device.** Each forward matrix op's fp32 inputs are cast to
  the reduced precision (4 bytes read and 2 written per element), and each weight's gradient
  back to fp32, at the share of the bandwidth the run's own memory-bound ops reached.
- **The casts on the host.** Every cast is one more op for the host to dispatch, forward and
  backward: the floating inputs of the forward matrix ops, and one input of each forward
  normalisation, softmax and loss, which autocast runs in fp32; ``AMP_CAST_HOST_NS`` each.

The step then shrinks by the device's saving only as far as the host allows: it cannot get
shorter than the host's own time per step (the step less the host's waits for the device:
syncs, device-to-host copies, and runtime calls held beyond ``RUNTIME_BLOCKED_NS`` by a full
launch queue or a pageable copy), grown by the casts' host time. Time the profiler recorded
nothing in is the host's own (Python between ops). On a step the host paces,
AMP saves nothing, and the finding says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.advice.basis import step_basis
from perfkit_core.advice.waits import gpu_busy, waiting_rows
from perfkit_core.events.schema import str_contains
from perfkit_core.events.trees import has_ancestor
from perfkit_core.views.costmodel.opcost import MODEL_KINDS

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.advice.engine import Context

#: Speed-up of fp32 matmul/conv kernels in reduced precision on tensor cores where the device's
#: peaks or the ops' shapes are unknown (conservative; NVIDIA quotes 2-8x).
AMP_SPEEDUP = 2.0
#: Host time of one cast autocast adds (the cast op's dispatch and launch, forward, or its
#: ToCopyBackward node): measured with torch 2.11 on the 16-core host of an H200, where bf16
#: autocast of an MLP of 5 Linear layers added 40 casts a step and 0.77 ms to the step without
#: the profiler (bench/README.md). A fit to one machine.
AMP_CAST_HOST_NS = 19_000.0
#: Bytes a cast moves per element: 4 read (fp32) and 2 written (bf16/fp16), or back.
CAST_BYTES_PER_ELEMENT = 6.0
#: The share of the bandwidth casts reach when the run has no memory-bound op to read it from.
DEFAULT_BANDWIDTH_SHARE = 0.5
#: A runtime call (a launch, an asynchronous copy) that held the host longer than this waited
#: for the device: a full launch queue, or a copy from pageable memory.
RUNTIME_BLOCKED_NS = 20_000.0
#: Forward ops autocast runs in fp32, casting their reduced-precision input back (torch's
#: autocast fp32 list: layer and group norms, softmaxes, losses; batch norm runs as it is fed).
FP32_OPS = (
    r"layer_norm|group_norm|softmax|cross_entropy|nll_loss|mse_loss|l1_loss|binary_cross_entropy"
)
_FLOAT32 = re.compile(r'"(?:float|float32|Float)"')
#: The GEMM shapes an amp finding keeps for a replay, longest first.
REPLAY_MAX_SHAPES = 16


@dataclass
class AmpSaving:
    """The parts of the amp estimate, ns per step: ``matmul_ns`` (the fp32 matrix ops' device
    time), ``matmul_after_ns`` (theirs in reduced precision), ``speedup``, ``how`` (``peaks``
    or ``constant``), ``cast_gpu_ns``, ``cast_bytes``, ``casts`` (per step, forward and
    backward), ``cast_host_ns``, ``step_ns`` (the basis step), ``host_ns`` (the host's own time),
    ``gpu_bound_ns`` and ``host_bound_ns`` (the step after, as the device or the host sets it),
    ``saving_ns``. The matrix ops' times are their kernels' by name; the speed-up and the
    casts come from those of them perfkit could cost (recorded shapes), in proportion."""

    matmul_ns: float
    matmul_after_ns: float
    speedup: float
    how: str
    cast_gpu_ns: float
    cast_bytes: float
    casts: float
    cast_host_ns: float
    step_ns: float
    host_ns: float
    gpu_bound_ns: float
    host_bound_ns: float
    saving_ns: float
    bandwidth_share: float
    target: str
    #: The GEMMs among the costed matrix ops, for a replay: ``[m, n, k, calls per step,
    #: recorded ns per step]`` per shape, longest first (at most ``REPLAY_MAX_SHAPES``).
    gemms: list[list[float]] = field(default_factory=list)
    #: The costed matrix ops' recorded time per step: of every shape in ``gemms``, and of the
    #: rest (convolutions, shapes left out) with the model's time for them in ``target``.
    gemm_ns: float = 0.0
    other_ns: float = 0.0
    other_after_ns: float = 0.0
    #: The device's busy time per step (kernels, copies, sets, merged).
    busy_ns: float = 0.0


def amp_saving(ctx: Context, heavy_ns: float, target: str) -> AmpSaving:
    """The amp estimate for ``ctx``'s run, whose matmul/conv kernels took ``heavy_ns`` per step
    (by kernel name), with ``target`` the precision the remedy proposes (``bf16 tensor`` or
    ``fp16 tensor``)."""
    from perfkit_core.advice.rules.roofline import _table

    run = ctx.run
    ev = run.events
    found = _table(ctx)
    speedup, how, share = AMP_SPEEDUP, "constant", math.nan
    cast_elements, forward_inputs, fp32_ops, costed = 0.0, 0.0, 0.0, 0.0
    gemms: list[list[float]] = []
    gemm_total, other_total, other_after = 0.0, 0.0, 0.0
    if found is not None:
        table, peaks = found
        picked = table[np.isin(table["kind"], MODEL_KINDS) & (table["precision"] == "fp32")]
        fp32_peak, low_peak = peaks.ceiling("fp32"), peaks.ceiling(target)
        bandwidth = peaks.bandwidth_tbps * 1e12
        if len(picked) and fp32_peak > 0 and low_peak > 0 and bandwidth > 0:
            time = picked["time_ns"].to_numpy(dtype=float)
            half_bytes_ns = picked["bytes"].to_numpy(dtype=float) / 2 / bandwidth * 1e9
            new = np.fmax(time * fp32_peak / low_peak, np.nan_to_num(half_bytes_ns))
            costed = float(time.sum())
            speedup, how = costed / float(new.sum()), "peaks"
            backward = _backward_rows(ev)
            rows = picked["row"].to_numpy()
            forward = ~backward[rows]
            m, n, k = (picked[c].to_numpy(dtype=float) for c in ("gemm_m", "gemm_n", "gemm_k"))
            known = (m > 0) & (n > 0) & (k > 0)
            gemms, replayed = _gemm_shapes(picked, known, ctx.steps)
            gemm_total = float(time[replayed].sum())
            other_total = float(time[~replayed].sum())
            other_after = float(new[~replayed].sum())
            # A GEMM casts its inputs (M x K and K x N) and its weight's gradient back (K x N);
            # a convolution its inputs, two thirds of the bytes it moves in fp32.
            inputs = np.where(known, m * k + 2 * k * n, picked["bytes"].to_numpy() / 4 * 2 / 3)
            cast_elements = float(np.nansum(inputs[forward]))
            dtypes = ev["input_dtypes"].to_numpy()[rows[forward]]
            forward_inputs = float(sum(len(_FLOAT32.findall(str(d))) for d in dtypes))
            names = table["name"].astype(str)
            fp32 = table[names.str.contains(FP32_OPS) & ~names.str.contains("backward", case=False)]
            fp32_ops = float((~backward[fp32["row"].to_numpy()]).sum())
            share = _bandwidth_share(table, bandwidth)
    # The matrix ops perfkit could cost (with recorded shapes) stand for all the matrix kernels
    # (by name), their casts in proportion.
    scale = heavy_ns * max(ctx.steps, 1) / costed if costed > 0 else 0.0
    cast_elements *= scale
    matmul, after = heavy_ns, heavy_ns / speedup
    steps = max(ctx.steps, 1)
    cast_bytes = cast_elements / steps * CAST_BYTES_PER_ELEMENT
    cast_gpu = (
        cast_bytes / (found[1].bandwidth_tbps * 1e12 * share) * 1e9
        if found is not None and share > 0
        else 0.0
    )
    casts = 2.0 * (forward_inputs + fp32_ops) / steps
    cast_host = casts * AMP_CAST_HOST_NS
    basis = step_basis(ctx)
    step = basis.step_ns
    host = max(step - _waits_per_step(ctx, waiting_rows(run)), 0.0)
    busy, _ = gpu_busy(ctx)
    gpu_bound = step - min(matmul - after - cast_gpu, ctx.per_step(busy))
    host_bound = host + cast_host
    return AmpSaving(
        matmul_ns=matmul,
        matmul_after_ns=after,
        speedup=matmul / after if after > 0 else math.inf,
        how=how,
        cast_gpu_ns=cast_gpu,
        cast_bytes=cast_bytes,
        casts=casts,
        cast_host_ns=cast_host,
        step_ns=step,
        host_ns=host,
        gpu_bound_ns=gpu_bound,
        host_bound_ns=host_bound,
        saving_ns=max(step - max(gpu_bound, host_bound), 0.0),
        bandwidth_share=share,
        target=target,
        gemms=gemms,
        gemm_ns=gemm_total / steps,
        other_ns=other_total / steps,
        other_after_ns=other_after / steps,
        busy_ns=ctx.per_step(busy),
    )


def _gemm_shapes(
    picked: pd.DataFrame, known: np.ndarray, steps: int
) -> tuple[list[list[float]], np.ndarray]:
    """(``[m, n, k, calls per step, recorded ns per step]`` of the GEMM shapes among
    ``picked`` (the costed fp32 matrix ops) with known dimensions, longest first, at most
    REPLAY_MAX_SHAPES; which rows of ``picked`` they hold)."""
    gemm = known & (picked["kind"].to_numpy() == "gemm")
    if not gemm.any():
        return [], gemm
    rows = picked[gemm]
    grouped = (
        rows.groupby(["gemm_m", "gemm_n", "gemm_k"])
        .agg(calls=("time_ns", "size"), time_ns=("time_ns", "sum"))
        .sort_values("time_ns", ascending=False)
        .head(REPLAY_MAX_SHAPES)
    )
    kept = set(grouped.index)
    steps = max(steps, 1)
    shapes = [
        [float(m), float(n), float(k), float(r.calls) / steps, float(r.time_ns) / steps]
        for (m, n, k), r in grouped.iterrows()
    ]
    dims = zip(
        picked["gemm_m"].to_numpy(),
        picked["gemm_n"].to_numpy(),
        picked["gemm_k"].to_numpy(),
        strict=True,
    )
    in_kept = np.array([tuple(d) in kept for d in dims], dtype=bool)
    return shapes, gemm & in_kept


def replayed_amp_saving(
    evidence: dict[str, Any], gemm_speedup: float, cast_host_ns: float | None = None
) -> dict[str, float]:
    """The amp estimate of an ``amp`` finding's ``evidence`` again, with the GEMMs a replay
    timed ``gemm_speedup`` times faster in the proposed precision (the replay gives the ratio,
    the run the time): the other costed matrix ops keep the model's time, and the casts' device
    time stays. With ``cast_host_ns`` (a cast's host time a replay measured, per cast counted
    as the model counts them), the casts' host time is that many ns each instead of
    AMP_CAST_HOST_NS. ``{"speedup", "matrix_ops_after_per_step_ns", "gpu_bound_step_ns",
    "cast_host_per_step_ns", "host_bound_step_ns", "saving_ns"}``, ns per step."""
    gemm = float(evidence["gemm_costed_per_step_ns"])
    other = float(evidence["other_costed_per_step_ns"])
    after_costed = gemm / gemm_speedup + float(evidence["other_after_per_step_ns"])
    speedup = (gemm + other) / after_costed if after_costed > 0 else math.inf
    matmul = float(evidence["matrix_ops_per_step_ns"])
    after = matmul / speedup
    step = float(evidence["basis_step_ns"])
    gpu_bound = step - min(
        matmul - after - float(evidence["cast_gpu_per_step_ns"]),
        float(evidence["gpu_busy_per_step_ns"]),
    )
    cast_host = float(evidence["cast_host_per_step_ns"])
    if cast_host_ns is not None:
        cast_host = float(evidence["casts_per_step"]) * cast_host_ns
    host_bound = float(evidence["host_per_step_ns"]) + cast_host
    saving = max(step - max(gpu_bound, host_bound), 0.0)
    return {
        "speedup": speedup,
        "matrix_ops_after_per_step_ns": after,
        "gpu_bound_step_ns": gpu_bound,
        "cast_host_per_step_ns": cast_host,
        "host_bound_step_ns": host_bound,
        "saving_ns": saving,
    }


def _backward_rows(ev: pd.DataFrame) -> np.ndarray:
    """Rows of the backward pass: under an autograd node (kind ``backward``), or ops named as a
    gradient (``cudnn_convolution_backward_input``; traces that recorded no autograd nodes)."""
    parent = ev["parent"].to_numpy()
    under = has_ancestor(parent, (ev["kind"] == "backward").to_numpy())
    named = str_contains(ev["name"], "backward", case=False)
    return under | named


def _waits_per_step(ctx: Context, waiting: np.ndarray) -> float:
    """The host's waits for the device per step (ns): its syncs and device-to-host copies
    (``waiting``, rows), and what its other runtime calls in the steps held it beyond
    RUNTIME_BLOCKED_NS. The rest of the step (ops, Python between them) is the host's own."""
    ev = ctx.run.events
    dur = ev["dur_ns"].to_numpy().astype(np.float64)
    other = (ev["kind"] == "runtime").to_numpy() & (ev["step"].to_numpy() >= 0)
    other[waiting] = False
    blocked = np.clip(dur[other] - RUNTIME_BLOCKED_NS, 0.0, None).sum()
    return ctx.per_step(float(dur[waiting].sum() + blocked))


def _bandwidth_share(table: pd.DataFrame, bandwidth: float) -> float:
    """The share of the device's bandwidth the run's memory-bound ops reached, time-weighted
    (their bytes over their time); DEFAULT_BANDWIDTH_SHARE when none was memory-bound beyond
    its latency."""
    from perfkit_core.views.roofline import LATENCY_BOUND_NS

    memory = table[(table["side"] == "memory") & (table["bound_time_ns"] >= LATENCY_BOUND_NS)]
    memory = memory[~memory["kind"].isin(("copy",))]
    seconds = float(memory["time_ns"].sum()) / 1e9
    if seconds <= 0:
        return DEFAULT_BANDWIDTH_SHARE
    return float(min(max(float(memory["bytes"].sum()) / seconds / bandwidth, 0.1), 1.0))
