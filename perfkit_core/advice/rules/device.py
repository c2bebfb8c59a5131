"""Rules about the device: idle GPU, launch-bound steps, AMP, memory pressure, pageable copies."""

from __future__ import annotations

import math
import re

import numpy as np

from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.text import duration_text, per_step_text, share_text
from perfkit_core.events import links
from perfkit_core.events.intervals import (
    clip_to,
    length,
    merge_intervals,
    step_window,
    subtract_intervals,
)
from perfkit_core.events.names import short_name
from perfkit_core.events.schema import str_contains
from perfkit_core.views.common import DEVICE_KINDS

#: launch-bound: median kernel shorter than this, GPU busy under LOW_GPU_UTIL_PCT, and host
#: launch time above the kernels' device time.
LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS = 20_000
#: low-gpu-utilization: GPU busy under this share of step time.
LOW_GPU_UTIL_PCT = 50.0
#: amp: fp32 matmul/conv kernels take at least this share of kernel time, none on tensor cores.
AMP_MIN_KERNEL_PCT = 20.0
#: amp: assumed speed-up of matmul/conv on tensor cores in reduced precision (conservative;
#: NVIDIA quotes 2-8x for fp16/bf16 tensor cores over fp32 CUDA cores).
AMP_SPEEDUP = 2.0
#: amp: GPUs below this CUDA compute capability (Pascal and older) have no tensor cores, so the
#: rule does not fire on them; from 7.0 (Volta, Turing) they run fp16, from 8.0 (Ampere and
#: newer) also bf16 and TF32, and the remedy says which.
AMP_MIN_COMPUTE_CAPABILITY = 7.0
#: memory-pressure: peak reserved memory above this share of the device's memory.
MEMORY_PRESSURE_PCT = 90.0
#: pageable-memcpy: host-to-device copies from pageable memory, at least this share of step time
#: of host time blocked in their launches.
PAGEABLE_MIN_STEP_PCT = 0.5


_MATMUL_CONV_RE = re.compile(r"gemm|conv|cutlass|wgrad|dgrad|matmul|implicit", re.IGNORECASE)
_NORM_RE = re.compile(r"\bbn_|batch_?norm|layer_?norm|_norm", re.IGNORECASE)


def _gpu_busy(ctx: Context) -> tuple[int, int]:
    """(merged device busy ns within the steps, over all steps; kernel count)."""
    ev = ctx.run.events
    sel = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(list(DEVICE_KINDS)).to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    window, _ = step_window(ctx.run)
    busy = clip_to(start[sel], end[sel], window)
    return int((busy[1] - busy[0]).sum()), int((ev["kind"] == "kernel").sum())


def _unclaimed_idle(ctx: Context) -> tuple[float, float]:
    """(the device's idle time in the steps, the part of it no other rule claims), in ns over
    all steps. Other rules claim the idle time while the training thread waits for data
    (input-pipeline) and while the host is blocked in syncs and device-to-host copies
    (placement)."""
    from perfkit_core.advice.rules.host import _waiting_rows

    ev = ctx.run.events
    kind = ev["kind"].to_numpy()
    device = (ev["stream"].to_numpy() >= 0) & np.isin(kind, list(DEVICE_KINDS))
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    window, _ = step_window(ctx.run)
    busy = clip_to(start[device], end[device], window)
    idle = subtract_intervals(window, busy)
    claimed = np.zeros(len(ev), dtype=bool)
    claimed[(kind == "dataloader") & (ev["stream"].to_numpy() < 0)] = True
    claimed[_waiting_rows(ctx.run)] = True
    rest = subtract_intervals(idle, merge_intervals(start[claimed], end[claimed]))
    return float(length(idle)), float(length(rest))


def rule_low_gpu_utilization(ctx: Context) -> Finding | None:
    """GPU busy (kernels, copies, sets, merged) under LOW_GPU_UTIL_PCT of the step.

    Saving: the GPU's idle time in the steps that no other finding claims (waiting for data,
    syncs and copies, slow kernel launches), an upper bound: a step cannot be shorter than its
    busy time.
    """
    if not ctx.has_device or not ctx.total_ns:
        return None
    busy, _ = _gpu_busy(ctx)
    share = 100.0 * busy / ctx.total_ns
    if share >= LOW_GPU_UTIL_PCT:
        return None
    idle, unclaimed = _unclaimed_idle(ctx)
    launch = rule_launch_bound(ctx)
    if launch is not None:
        unclaimed = max(unclaimed - launch.saving_ns * max(ctx.steps, 1), 0.0)
    busy_step = ctx.per_step(busy)
    return Finding(
        id="low-gpu-utilization",
        title=f"The GPU is busy only {share:.1f}% of the step",
        severity="",
        saving_ns=ctx.per_step(unclaimed),
        details=[
            f"The GPU ran kernels, copies or sets {per_step_text(busy_step, ctx.step_ns)}; it "
            f"waited {duration_text(ctx.per_step(idle))} per step.",
            f"{duration_text(ctx.per_step(unclaimed))} per step of that wait is not explained "
            "by waiting for data, syncs, copies or slow kernel launches (the other findings "
            "claim those).",
        ],
        estimate=(
            "Upper bound: the GPU's idle time in the steps that no other finding claims (a step "
            "cannot be shorter than its busy time)."
        ),
        evidence={
            "gpu_busy_per_step_ns": busy_step,
            "gpu_busy_pct": share,
            "gpu_idle_per_step_ns": ctx.per_step(idle),
            "unclaimed_idle_per_step_ns": ctx.per_step(unclaimed),
        },
        acts_on="device",
    )


def rule_launch_bound(ctx: Context) -> Finding | None:
    """Many short kernels: median kernel under LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS, GPU busy under
    LOW_GPU_UTIL_PCT, and host time in kernel launches above the kernels' device time.

    Saving: launch time beyond device time, at most the GPU's idle time.
    """
    if not ctx.has_device or not ctx.total_ns:
        return None
    ev = ctx.run.events
    kernels = ev[(ev["kind"] == "kernel") & (ev["stream"] >= 0)]
    if kernels.empty:
        return None
    median = float(kernels["dur_ns"].median())
    busy, count = _gpu_busy(ctx)
    launches = (ev["kind"] == "runtime").to_numpy() & str_contains(ev["name"], "Launch", case=False)
    launch_ns = float(ev["dur_ns"].to_numpy()[launches].sum())
    kernel_ns = float(kernels["dur_ns"].sum())
    if (
        median >= LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS
        or 100.0 * busy / ctx.total_ns >= LOW_GPU_UTIL_PCT
        or launch_ns <= kernel_ns
    ):
        return None
    saving = min(launch_ns - kernel_ns, ctx.total_ns - busy)
    per_step = count / max(ctx.steps, 1)
    return Finding(
        id="launch-bound",
        title=f"{per_step:.0f} short kernels per step (median {median / 1000:.1f} us): the host cannot launch them fast enough",
        severity="",
        saving_ns=ctx.per_step(saving),
        details=[
            f"{per_step:.0f} kernels per step, median {duration_text(median)}; launching them "
            f"held the host {duration_text(ctx.per_step(launch_ns))} per step, more than the "
            f"{duration_text(ctx.per_step(kernel_ns))} per step they ran on the GPU."
        ],
        estimate="Host launch time beyond the kernels' device time, at most the GPU's idle time.",
        evidence={
            "kernels_per_step": per_step,
            "median_kernel_ns": median,
            "launch_per_step_ns": ctx.per_step(launch_ns),
            "kernel_per_step_ns": ctx.per_step(kernel_ns),
            "gpu_busy_per_step_ns": ctx.per_step(busy),
        },
        acts_on="device",
    )


def rule_amp(ctx: Context) -> Finding | None:
    """Matmul/convolution kernels take at least AMP_MIN_KERNEL_PCT of kernel time and none of
    the run's kernels ran on tensor cores.

    Saving: that kernel time times (1 - 1/AMP_SPEEDUP).
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
    top = heavy.head(3)
    return Finding(
        id="amp",
        title=f"Matmul/convolution kernels take {100.0 * heavy_ns / total:.0f}% of GPU time and none run on tensor cores",
        severity="",
        saving_ns=ctx.per_step(heavy_ns) * (1.0 - 1.0 / AMP_SPEEDUP),
        acts_on="device",
        details=[
            f"Matmul and convolution kernels ran {duration_text(ctx.per_step(heavy_ns))} of "
            f"{duration_text(ctx.per_step(total))} of kernel time per step "
            f"({share_text(heavy_ns, total)}) in fp32 on {device}{cc_text}; no kernel used "
            "tensor cores."
        ]
        + [
            f"{short_name(r.name)}: {ctx.per_step(r.calls):g} calls and "
            f"{duration_text(ctx.per_step(r.gpu_total_ns))} per step."
            for r in top.itertuples()
        ],
        cites={"kernel": [str(n) for n in top["name"]]},
        estimate=f"Those kernels' time, {AMP_SPEEDUP:g}x faster on tensor cores in reduced precision (conservative: NVIDIA quotes 2-8x).",
        evidence={
            "compute_capability": capability,
            "matmul_conv_per_step_ns": ctx.per_step(heavy_ns),
            "kernel_per_step_ns": ctx.per_step(total),
            "top_kernels": heavy.head(5)[["name", "calls", "gpu_total_ns"]].to_dict("records"),
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
    return Finding(
        id="pageable-memcpy",
        title=f"{per_step:g} host-to-device copies per step from pageable memory hold the host {per_step_text(ctx.per_step(blocked), ctx.step_ns)}",
        severity="",
        saving_ns=ctx.per_step(blocked),
        details=[
            f"{per_step:g} host-to-device copies per step of "
            f"{ctx.per_step(copied) / 2**20:.1f} MiB from pageable memory ran "
            f"{duration_text(ctx.per_step(float(dur[copies].sum())))} per step on the GPU and "
            f"held the host {duration_text(ctx.per_step(blocked))} per step in their launches."
        ],
        estimate="Upper bound: the host time blocked in the copy launches, if pinned, asynchronous copies overlap compute.",
        evidence={
            "copies_per_step": per_step,
            "bytes_per_step": ctx.per_step(copied),
            "copy_per_step_ns": ctx.per_step(float(dur[copies].sum())),
            "blocked_per_step_ns": ctx.per_step(blocked),
        },
    )
