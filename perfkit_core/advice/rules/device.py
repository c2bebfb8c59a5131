"""Rules about the device: idle GPU, launch-bound steps, AMP, memory pressure, pageable copies."""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np

from perfkit_core.advice.amp import AMP_SPEEDUP, amp_saving
from perfkit_core.advice.basis import device_basis_text, step_basis
from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.text import (
    duration_text,
    per_step_text,
    share_text,
    unprofiled_per_step_text,
)
from perfkit_core.advice.waits import busy_intervals, gpu_busy, waiting_rows
from perfkit_core.events import links
from perfkit_core.events.intervals import (
    length,
    merge_intervals,
    subtract_intervals,
)
from perfkit_core.events.names import short_name
from perfkit_core.events.schema import str_contains

#: launch-bound: median kernel shorter than this, GPU busy under LOW_GPU_UTIL_PCT, and host
#: launch time above the kernels' device time.
LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS = 20_000
#: low-gpu-utilization: GPU busy under this share of step time.
LOW_GPU_UTIL_PCT = 50.0
#: ... and the idle time no other finding claims is at least this share of the step.
LOW_GPU_UTIL_MIN_SAVING_PCT = 1.0
#: amp: fp32 matmul/conv kernels take at least this share of kernel time, none on tensor cores.
AMP_MIN_KERNEL_PCT = 20.0
#: amp: GPUs below this CUDA compute capability (Pascal and older) have no tensor cores, so the
#: rule does not fire on them; from 7.0 (Volta, Turing) they run fp16, from 8.0 (Ampere and
#: newer) also bf16 and TF32, and the remedy says which.
AMP_MIN_COMPUTE_CAPABILITY = 7.0
#: amp on a step the host paces: the heading of its remedy, which is what to shorten first.
AMP_HOST_PACED_HEADING = (
    "Not yet: the host's own work sets this step, so mixed precision would not shorten it. "
    "Shorten the host's part first:"
)
#: memory-pressure: peak reserved memory above this share of the device's memory.
MEMORY_PRESSURE_PCT = 90.0
#: pageable-memcpy: host-to-device copies from pageable memory, at least this share of step time
#: of host time blocked in their launches.
PAGEABLE_MIN_STEP_PCT = 0.5


_MATMUL_CONV_RE = re.compile(r"gemm|conv|cutlass|wgrad|dgrad|matmul|implicit", re.IGNORECASE)
_NORM_RE = re.compile(r"\bbn_|batch_?norm|layer_?norm|_norm", re.IGNORECASE)


def _unclaimed_idle(ctx: Context) -> tuple[float, float]:
    """(the device's idle time in the steps, the part of it no other rule claims), in ns over
    all steps. Other rules claim the idle time while the training thread waits for data
    (input-pipeline) and while the host is blocked in syncs and device-to-host copies
    (placement). Computed once per run: launch-bound and low-gpu-utilization both read it."""
    return ctx.run.cached("advice_unclaimed_idle", lambda: _compute_unclaimed_idle(ctx))


def _compute_unclaimed_idle(ctx: Context) -> tuple[float, float]:
    """``_unclaimed_idle``, computed afresh."""
    ev = ctx.run.events
    kind = ev["kind"].to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    busy, window = busy_intervals(ctx)
    idle = subtract_intervals(window, busy)
    claimed = np.zeros(len(ev), dtype=bool)
    claimed[(kind == "dataloader") & (ev["stream"].to_numpy() < 0)] = True
    claimed[waiting_rows(ctx.run)] = True
    rest = subtract_intervals(idle, merge_intervals(start[claimed], end[claimed]))
    return float(length(idle)), float(length(rest))


def rule_low_gpu_utilization(ctx: Context) -> Finding | None:
    """GPU busy (kernels, copies, sets, merged) under LOW_GPU_UTIL_PCT of the step, with at
    least LOW_GPU_UTIL_MIN_SAVING_PCT of the step idle that no other finding claims.

    Saving: the GPU's idle time in the steps that no other finding claims (waiting for data,
    syncs and copies, slow kernel launches), an upper bound: a step cannot be shorter than its
    busy time. Stated against the step without the profiler where the step timer timed it:
    the profiler slows the host, so its idle time in the profiled steps is longer than in the
    user's; the device's busy time and the waits other findings claim are used as recorded.
    """
    if not ctx.has_device or not ctx.total_ns:
        return None
    basis = step_basis(ctx)
    busy, _ = gpu_busy(ctx)
    busy_step = ctx.per_step(busy)
    share = 100.0 * busy_step / basis.step_ns if basis.step_ns > 0 else 100.0
    if share >= LOW_GPU_UTIL_PCT:
        return None
    idle, unclaimed = _unclaimed_idle(ctx)
    if basis.name == "unprofiled":
        idle_step = max(basis.step_ns - busy_step, 0.0)
    else:
        idle_step = ctx.per_step(idle)
    claimed_step = min(ctx.per_step(idle - unclaimed), idle_step)
    unclaimed_step = idle_step - claimed_step
    launch = rule_launch_bound(ctx)
    if launch is not None:  # it claims the rest: the host's launches paced the device
        unclaimed_step = max(unclaimed_step - launch.saving_ns, 0.0)
    if 100.0 * unclaimed_step < LOW_GPU_UTIL_MIN_SAVING_PCT * basis.step_ns:
        return None  # the other findings explain the idle time: their remedies are the advice
    of = "the step without the profiler" if basis.name == "unprofiled" else "the step"
    return Finding(
        id="low-gpu-utilization",
        title=f"The GPU is busy only {share:.1f}% of {of}",
        severity="",
        saving_ns=unclaimed_step,
        details=[
            f"The GPU ran kernels, copies or sets {duration_text(busy_step)} per step "
            f"({share_text(busy_step, basis.step_ns)} of {of}); it waited "
            f"{duration_text(idle_step)} per step.",
            f"{duration_text(unclaimed_step)} per step of that wait is not explained "
            "by waiting for data, syncs, copies or slow kernel launches (the other findings "
            "claim those).",
        ],
        estimate=(
            "Upper bound: the GPU's idle time in the steps that no other finding claims (a step "
            "cannot be shorter than its busy time). " + device_basis_text(basis)
        ),
        evidence={
            "gpu_busy_per_step_ns": busy_step,
            "gpu_busy_pct": share,
            "gpu_idle_per_step_ns": idle_step,
            "unclaimed_idle_per_step_ns": unclaimed_step,
            "basis": basis.name,
            "basis_step_ns": basis.step_ns,
        },
        acts_on="device",
    )


def rule_launch_bound(ctx: Context) -> Finding | None:
    """Many short kernels: median kernel under LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS, GPU busy under
    LOW_GPU_UTIL_PCT, and host time in kernel launches above the kernels' device time.

    Saving: the step less the GPU's busy time and the idle time other findings claim (waits for
    data, syncs): the remedy (CUDA graphs, or ``torch.compile(mode="reduce-overhead")``) replays
    the step's launches at once, so the host no longer paces the GPU and the step can shrink to
    the GPU's own time. Stated against the step without the profiler where the step timer
    timed it (the profiler slows the host, not the kernels).

    Computed once per ``advise``: the low-gpu-utilization and cpu-bound-op rules leave it the
    idle time and the host time it claims.
    """
    return ctx.once("advice_launch_bound", _launch_bound)


def _launch_bound(ctx: Context) -> Finding | None:
    """The launch-bound finding of ``ctx`` (``rule_launch_bound``), computed afresh."""
    if not ctx.has_device or not ctx.total_ns:
        return None
    ev = ctx.run.events
    kernels = ev[(ev["kind"] == "kernel") & (ev["stream"] >= 0)]
    if kernels.empty:
        return None
    median = float(kernels["dur_ns"].median())
    busy, count = gpu_busy(ctx)
    # Kernels a graph replays are not launched one by one: cudaGraphLaunch is the remedy.
    launches = (
        (ev["kind"] == "runtime").to_numpy()
        & str_contains(ev["name"], "Launch", case=False)
        & ~str_contains(ev["name"], "GraphLaunch", case=False)
    )
    launch_ns = float(ev["dur_ns"].to_numpy()[launches].sum())
    kernel_ns = float(kernels["dur_ns"].sum())
    if (
        median >= LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS
        or 100.0 * busy / ctx.total_ns >= LOW_GPU_UTIL_PCT
        or launch_ns <= kernel_ns
    ):
        return None
    idle, unclaimed = _unclaimed_idle(ctx)
    basis = step_basis(ctx)
    busy_step = ctx.per_step(busy)
    claimed_elsewhere = ctx.per_step(idle - unclaimed)
    saving = max(basis.step_ns - busy_step - claimed_elsewhere, 0.0)
    per_step = count / max(ctx.steps, 1)
    return Finding(
        id="launch-bound",
        title=f"{per_step:.0f} short kernels per step (median {median / 1000:.1f} us): the host cannot launch them fast enough",
        severity="",
        saving_ns=saving,
        details=[
            f"{per_step:.0f} kernels per step, median {duration_text(median)}; launching them "
            f"held the host {duration_text(ctx.per_step(launch_ns))} per step, more than the "
            f"{duration_text(ctx.per_step(kernel_ns))} per step they ran on the GPU.",
            f"The GPU was busy {duration_text(busy_step)} of the "
            f"{duration_text(basis.step_ns)} step"
            + (" without the profiler" if basis.name == "unprofiled" else "")
            + ": the rest of it, the GPU waited for the host.",
        ],
        estimate=(
            "The step less the GPU's busy time"
            + (" and the waits other findings claim" if claimed_elsewhere > 0 else "")
            + ": replayed as a graph, the launches no longer pace the GPU. "
            + device_basis_text(basis)
        ),
        evidence={
            "kernels_per_step": per_step,
            "median_kernel_ns": median,
            "launch_per_step_ns": ctx.per_step(launch_ns),
            "kernel_per_step_ns": ctx.per_step(kernel_ns),
            "gpu_busy_per_step_ns": busy_step,
            "claimed_elsewhere_per_step_ns": claimed_elsewhere,
            # The profiled idle no other finding claims, over all steps (low-gpu-utilization
            # leaves this finding its saving, which is stated on the basis step instead).
            "idle_claimed_ns": float(unclaimed),
            "basis": basis.name,
            "basis_step_ns": basis.step_ns,
        },
        acts_on="device",
    )


def rule_amp(ctx: Context) -> Finding | None:
    """Matmul/convolution kernels take at least AMP_MIN_KERNEL_PCT of kernel time and none of
    the run's kernels ran on tensor cores.

    Saving: ``perfkit_core.advice.amp``: the matrix ops' device time at the reduced-precision
    tensor-core peak, less the casts autocast adds, as far as the host's own time lets the
    step shrink.
    """
    if not ctx.has_device:
        return None
    capability = ctx.compute_capability
    if capability is not None and capability < AMP_MIN_COMPUTE_CAPABILITY:
        return None
    kernels = ctx.run.summary("kernel")
    if kernels.empty or kernels["tensor_cores"].any():
        return None
    names = kernels["name"]
    heavy = kernels[names.str.contains(_MATMUL_CONV_RE) & ~names.str.contains(_NORM_RE)]
    total = float(kernels["gpu_total_ns"].sum())
    heavy_ns = float(heavy["gpu_total_ns"].sum())
    if not total or 100.0 * heavy_ns / total < AMP_MIN_KERNEL_PCT:
        return None
    device = ", ".join(sorted({str(d.get("name")) for d in ctx.devices})) or "the GPU"
    cc_text = f" (compute capability {capability:.1f})" if capability is not None else ""
    target = "bf16 tensor" if capability is None or capability >= 8.0 else "fp16 tensor"
    est = amp_saving(ctx, ctx.per_step(heavy_ns), target)
    basis = step_basis(ctx)
    top = heavy.head(3)
    share = f"{100.0 * heavy_ns / total:.0f}% of GPU time"
    paced = est.saving_ns <= 0 or est.host_bound_ns >= est.gpu_bound_ns
    if est.saving_ns <= 0:
        title = (
            f"Matmul/convolution kernels take {share} in fp32, but the host paces the step: "
            "mixed precision would not shorten it"
        )
    else:
        title = f"Matmul/convolution kernels take {share} and none run on tensor cores"
    low = target.split()[0]
    speed = (
        f"In {low} on tensor cores they would take about {duration_text(est.matmul_after_ns)} "
        f"per step ({est.speedup:.1f}x faster: "
        + (
            "the same share of the tensor-core peak as they reached of the fp32 one, no faster "
            "than moving half their bytes"
            if est.how == "peaks"
            else f"the {AMP_SPEEDUP:g}x assumed where the device's peaks or the ops' shapes "
            "are unknown"
        )
        + ")."
    )
    casts = (
        f"Autocast adds about {est.casts:.0f} casts per step, forward and backward: "
        f"{duration_text(est.cast_gpu_ns)} per step on the GPU ({est.cast_bytes / 1e6:.0f} MB "
        f"at {100 * est.bandwidth_share:.0f}% of its bandwidth, as this run's memory-bound ops "
        f"ran) and {duration_text(est.cast_host_ns)} on the host."
        if est.how == "peaks"
        else "The casts autocast adds are not counted: the ops' shapes are unknown."
    )
    host = (
        f"The host's own time is {duration_text(est.host_ns)} of the "
        f"{duration_text(est.step_ns)} step (the rest it waited for the GPU): "
        + (
            f"with the casts, the step cannot get shorter than {duration_text(est.host_bound_ns)}."
            if paced
            else "the GPU, not the host, sets the step."
        )
    )
    # Where the host paces the step, the framework's AMP recipe would not pay: the remedy
    # says what would, under a heading of its own, and when to come back to mixed precision.
    unpaid = est.saving_ns <= 0
    remedy = (
        textwrap.fill(
            "CUDA graphs or a compiler (torch.compile, paddle.jit.to_static) for many small "
            "ops, a larger batch per step, and the host findings of this report, if any. "
            "Once the GPU paces the step, profile again: this finding will then state what "
            "mixed precision saves and how to turn it on.",
            width=92,
        )
        if unpaid
        else ""
    )
    return Finding(
        id="amp",
        title=title,
        severity="",
        saving_ns=est.saving_ns,
        remedy=remedy,
        remedy_heading=AMP_HOST_PACED_HEADING if unpaid else "",
        acts_on="device",
        details=[
            f"Matmul and convolution kernels ran {duration_text(ctx.per_step(heavy_ns))} of "
            f"{duration_text(ctx.per_step(total))} of kernel time per step "
            f"({share_text(heavy_ns, total)}) in fp32 on {device}{cc_text}; no kernel used "
            "tensor cores.",
            speed,
            casts,
            host,
        ]
        + [
            f"{short_name(r.name)}: {ctx.per_step(r.calls):g} calls and "
            f"{duration_text(ctx.per_step(r.gpu_total_ns))} per step."
            for r in top.itertuples()
        ],
        cites={"kernel": [str(n) for n in top["name"]]},
        estimate=(
            f"What mixed precision takes off the step: the matrix ops' device time at the {low} "
            "tensor-core peak, plus the casts it adds, until the host's own time and the casts' "
            "dispatch set the step. " + device_basis_text(basis)
        ),
        evidence={
            "compute_capability": capability,
            "matmul_conv_per_step_ns": ctx.per_step(heavy_ns),
            "kernel_per_step_ns": ctx.per_step(total),
            "top_kernels": heavy.head(5)[["name", "calls", "gpu_total_ns"]].to_dict("records"),
            "matrix_ops_per_step_ns": est.matmul_ns,
            "matrix_ops_after_per_step_ns": est.matmul_after_ns,
            "speedup": est.speedup,
            "speedup_from": est.how,
            "target_precision": target,
            "casts_per_step": est.casts,
            "cast_gpu_per_step_ns": est.cast_gpu_ns,
            "cast_host_per_step_ns": est.cast_host_ns,
            "host_per_step_ns": est.host_ns,
            "gpu_bound_step_ns": est.gpu_bound_ns,
            "host_bound_step_ns": est.host_bound_ns,
            "gpu_busy_per_step_ns": est.busy_ns,
            # for a replay of the products (``perfkit_core.advice.amp.replayed_amp_saving``)
            "gemm_shapes": est.gemms,
            "gemm_costed_per_step_ns": est.gemm_ns,
            "other_costed_per_step_ns": est.other_ns,
            "other_after_per_step_ns": est.other_after_ns,
            "devices": sorted({str(d.get("name")) for d in ctx.devices if d.get("name")}),
            "basis": basis.name,
            "basis_step_ns": est.step_ns,
        },
    )


def rule_memory_pressure(ctx: Context) -> Finding | None:
    """Peak reserved (or allocated) device memory above MEMORY_PRESSURE_PCT of the device.

    Saving: none in time (0); the risk is running out of memory and allocator thrash.
    """
    devices = {
        d.get("index"): d for d in ctx.run.meta.get("devices") or [] if d.get("total_memory_bytes")
    }
    if not devices:
        return None
    memory = ctx.run.summary("memory", by="device")
    if memory.empty:
        return None
    worst = None
    for row in memory.itertuples():
        if not str(row.name).startswith("gpu:"):
            continue
        index = int(str(row.name).split(":")[1])
        total = devices.get(index, {}).get("total_memory_bytes")
        peak = float(np.fmax(row.peak_reserved_bytes, row.peak_allocated_bytes))
        pressured = (
            bool(total) and not math.isnan(peak) and 100.0 * peak / total >= MEMORY_PRESSURE_PCT
        )
        if pressured and (worst is None or peak / total > worst[1] / worst[2]):
            worst = (index, float(peak), float(total))
    if worst is None:
        return None
    index, peak, total = worst
    return Finding(
        id="memory-pressure",
        title=f"GPU {index} peaks at {100.0 * peak / total:.0f}% of its memory",
        severity="medium",
        saving_ns=0.0,
        saves_time=False,
        details=[
            f"GPU {index} peaked at {peak / 2**30:.1f} GiB of its {total / 2**30:.1f} GiB "
            f"({share_text(peak, total)}): close to out-of-memory, and the allocator may be "
            "freeing and re-reserving blocks."
        ],
        estimate="No time saving is claimed: the risk is running out of memory.",
        evidence={"device": index, "peak_bytes": peak, "total_bytes": total},
    )


def rule_pageable_memcpy(ctx: Context) -> Finding | None:
    """Host-to-device copies from pageable memory, their launches holding the host at least
    PAGEABLE_MIN_STEP_PCT of the step.

    Saving: the host time blocked in those copy launches (a pinned, asynchronous copy returns
    at once).
    """
    if not ctx.has_device or not ctx.total_ns:
        return None
    ev = ctx.run.events
    copies = np.flatnonzero(
        (ev["kind"] == "memcpy").to_numpy()
        & str_contains(ev["name"], "HtoD")
        & str_contains(ev["name"], "Pageable")
    )
    if len(copies) == 0:
        return None
    launcher = links.run_launchers(ctx.run)[copies]
    dur = ev["dur_ns"].to_numpy()
    blocked = float(dur[launcher[launcher >= 0]].sum())
    if 100.0 * blocked / ctx.total_ns < PAGEABLE_MIN_STEP_PCT:
        return None
    per_step = len(copies) / max(ctx.steps, 1)
    copied = float(np.nansum(ev["bytes"].to_numpy()[copies]))
    basis = step_basis(ctx)
    return Finding(
        id="pageable-memcpy",
        title=f"{per_step:g} host-to-device copies per step from pageable memory hold the host "
        + (
            unprofiled_per_step_text(ctx.per_step(blocked), basis.step_ns)
            if basis.name == "unprofiled"
            else per_step_text(ctx.per_step(blocked), ctx.step_ns)
        ),
        severity="",
        saving_ns=ctx.per_step(blocked),
        details=[
            f"{per_step:g} host-to-device copies per step of "
            f"{ctx.per_step(copied) / 2**20:.1f} MiB from pageable memory ran "
            f"{duration_text(ctx.per_step(float(dur[copies].sum())))} per step on the GPU and "
            f"held the host {duration_text(ctx.per_step(blocked))} per step in their launches."
        ],
        estimate=(
            "The host time blocked in the copy launches, which pinned, asynchronous copies "
            "return from at once. " + device_basis_text(basis)
        ),
        evidence={
            "copies_per_step": per_step,
            "bytes_per_step": ctx.per_step(copied),
            "copy_per_step_ns": ctx.per_step(float(dur[copies].sum())),
            "blocked_per_step_ns": ctx.per_step(blocked),
            "basis": basis.name,
            "basis_step_ns": basis.step_ns,
        },
    )
