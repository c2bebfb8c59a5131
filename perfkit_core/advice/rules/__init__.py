"""The built-in advice rules, registered as a plugin (listed in
``perfkit_core.plugins.BUILTIN_PLUGINS``): ``loading`` (data loading), ``host`` (host-bound
ops, placement), ``device`` (idle GPU, launch-bound, AMP, memory pressure, pageable copies),
``communication``, ``optimizer`` (the optimizer step) and ``cpu`` (tiny ops, Python time),
which fit CPU-only runs too, ``roofline`` (ops far below the roofline bound, with a known
cause), and the cross-rank ``ranks`` (stragglers, load imbalance, exposed communication per
rank)."""

from __future__ import annotations

from collections.abc import Callable

from perfkit_core.advice.engine import Advisor
from perfkit_core.advice.rules import (
    communication,
    cpu,
    device,
    host,
    loading,
    optimizer,
    ranks,
    roofline,
)
from perfkit_core.plugins import hookimpl

#: (rule id, function, description) of every built-in rule.
BUILTIN_RULES: tuple[tuple[str, Advisor, str], ...] = (
    ("input-pipeline", loading.rule_input_pipeline, "data loading takes a real share of each step"),
    (
        "placement",
        host.rule_placement,
        "ops force device-to-host copies or syncs while doing little device work",
    ),
    ("cpu-bound-op", host.rule_cpu_bound_op, "an op is mostly host-side in a GPU run"),
    (
        "launch-bound",
        device.rule_launch_bound,
        "many short kernels; launches can't keep the GPU busy",
    ),
    (
        "low-gpu-utilization",
        device.rule_low_gpu_utilization,
        "the GPU is idle for much of the step",
    ),
    (
        "communication",
        communication.rule_communication,
        "communication is large or poorly overlapped",
    ),
    ("amp", device.rule_amp, "fp32 matmul/conv time with no tensor-core kernels"),
    (
        "memory-pressure",
        device.rule_memory_pressure,
        "peak device memory close to the device's capacity",
    ),
    ("pageable-memcpy", device.rule_pageable_memcpy, "host-to-device copies from pageable memory"),
    (
        "tensor-cores-unused",
        roofline.rule_tensor_cores_unused,
        "fp32 matrix ops off the tensor cores that other ops of the run use",
    ),
    (
        "gemm-alignment",
        roofline.rule_gemm_alignment,
        "matrix ops on tensor cores with sizes that are not multiples of 8, far below their bound",
    ),
    (
        "small-gemms",
        roofline.rule_small_gemms,
        "many matrix ops too small to leave the latency regime",
    ),
    (
        "unfused-elementwise",
        roofline.rule_unfused_elementwise,
        "runs of memory-bound ops over one tensor that a compiler would fuse",
    ),
    ("optimizer", optimizer.rule_optimizer, "the optimizer step takes a large share of each step"),
    ("small-ops", cpu.rule_small_ops, "many tiny ops: framework overhead rather than math"),
    (
        "python-overhead",
        cpu.rule_python_overhead,
        "the host runs Python, not ops, for much of the step",
    ),
    (
        "straggler",
        ranks.rule_straggler,
        "a rank works more per step than the others, which wait for it (named, with its cause)",
    ),
    (
        "load-imbalance",
        ranks.rule_load_imbalance,
        "ranks wait for each other in collectives with no single straggler",
    ),
    (
        "exposed-communication",
        ranks.rule_exposed_communication,
        "communication not overlapped with computation, per rank, waiting left out",
    ),
)


@hookimpl
def perfkit_register_advisors(register: Callable[[str, Advisor, str], None]) -> None:
    """Register the built-in rules."""
    for rule_id, function, description in BUILTIN_RULES:
        register(rule_id, function, description)
