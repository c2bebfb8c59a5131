"""The built-in views, registered as a plugin (listed in ``perfkit_core.plugins.BUILTIN_PLUGINS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from perfkit_core.plugins import hookimpl
from perfkit_core.views import (
    breakdown,
    code,
    families,
    idle,
    kernels,
    launches,
    layers,
    memory,
    operators,
    overview,
    phases,
    roofline,
    steps,
    timelines,
)
from perfkit_core.views.anatomy import step_time
from perfkit_core.views.multirank import collectives, distributed, ranks
from perfkit_core.views.multirank.combined import ACROSS

if TYPE_CHECKING:
    import pandas as pd

#: (name, function, description) of every built-in view, in the order reports show them.
BUILTIN_VIEWS: tuple[tuple[str, Callable[..., pd.DataFrame], str], ...] = (
    ("operator", operators.operator_view, "calls, CPU and GPU time per operator"),
    ("user", operators.user_view, "calls, CPU and GPU time per user-defined span"),
    (
        "model",
        step_time.model_view,
        "step time by training phase, per step: data, forward, backward, optimizer, other",
    ),
    ("phases", step_time.phases_view, "per step: the model view's phases, which add up to it"),
    (
        "model_spans",
        phases.model_spans_view,
        "Paddle's Model Summary: phase spans summed (calls count spans), for parity with Paddle",
    ),
    (
        "layers",
        layers.layers_view,
        "the model's layer tree: calls, host and GPU time, model FLOPs and parameters per "
        "layer, own and with children, per step",
    ),
    (
        "code",
        code.code_view,
        "host time per Python function, own and with children, per step, where the trace "
        "recorded Python frames (torch with_stack=True)",
    ),
    ("family", families.family_view, "time per step by op family (matmul, conv, ...)"),
    (
        "overview",
        overview.overview_view,
        "time per event kind, overlaps merged, host and device side",
    ),
    (
        "breakdown",
        breakdown.breakdown_view,
        "step time split exclusively: kernel, memcpy, memset, communication, runtime, "
        "dataloader, CPU exec, other (the TensorBoard profiler's overview)",
    ),
    (
        "device",
        overview.device_view,
        "CPU utilization where recorded, and each GPU's busy share of the steps",
    ),
    (
        "queue",
        launches.queue_view,
        "per device stream: how many launched events waited (queue length), as HTA counts it",
    ),
    (
        "idle",
        idle.stream_idle_view,
        "per device stream: idle time between its events, by cause (host wait, kernel wait, "
        "other), as HTA splits it",
    ),
    (
        "launches",
        launches.launches_view,
        "per operator: device work launched and its launch delay (queue time), as HTA measures it",
    ),
    ("kernel", kernels.kernel_view, "calls, time, launch shape and occupancy per GPU kernel"),
    (
        "roofline",
        roofline.roofline_view,
        "per op: FLOPs, bytes, intensity, achieved TFLOP/s and TB/s, and % of the roofline "
        "bound of the device's peaks",
    ),
    ("mfu", roofline.mfu_view, "per step: model FLOPs and model FLOPs utilisation (MFU)"),
    (
        "memcpy",
        memory.memcpy_view,
        "device copies and sets by direction, host memory and sync: time, bytes, GB/s",
    ),
    (
        "memory",
        memory.memory_view,
        "allocations and frees per op (by='device': peaks per device)",
    ),
    (
        "memory_timeline",
        timelines.memory_timeline_view,
        "peak allocated memory per device over the profile, in time slices",
    ),
    (
        "device_timeline",
        timelines.device_timeline_view,
        "each device's busy share over the profile, in time slices",
    ),
    (
        "distributed",
        distributed.distributed_view,
        "communication, computation and their overlap",
    ),
    (
        "ranks",
        ranks.ranks_view,
        "per rank: step time, work, compute, communication, waiting, data loading; stragglers",
    ),
    (
        "collectives",
        collectives.collectives_view,
        "per collective: calls, time, waiting for the slowest rank vs transferring, bandwidth",
    ),
    ("steps", steps.steps_view, "one row per step: duration, data loading, device busy time"),
    (
        "benchmark",
        steps.benchmark_view,
        "reader_cost, batch_cost and ips per step, warm-up left out",
    ),
)


@hookimpl
def perfkit_register_views(
    register: Callable[..., None],
) -> None:
    """Register the built-in views, each with how it combines the ranks of a job."""
    for name, function, description in BUILTIN_VIEWS:
        register(name, function, description, ACROSS[name])
