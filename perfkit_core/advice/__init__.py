"""Advice with evidence: the engine (``engine``) and the built-in rules (``rules``)."""

from __future__ import annotations

from perfkit_core.advice.compiled import (
    COMPILED_CALL_NS,
    FUSED_FLOP_NS,
    FUSED_KERNEL_NS,
    MODEL_COSTS,
    TRANSCENDENTAL_NS,
    CompileCosts,
    compile_verdict,
    compiled_step_ns,
)
from perfkit_core.advice.engine import (
    GENERIC_REMEDIES,
    Advisor,
    Context,
    Finding,
    JobContext,
    advise,
    cross_rank,
    registered_advisors,
)
from perfkit_core.advice.loader import (
    LOADER_BATCH_NS,
    THREAD_OP_NS,
    delivery_ns,
    loader_batch_cost,
    loader_figures,
    loader_receive_cost,
    loader_saving,
    measured_loader_estimate,
    remedy_workers,
    replay_figures,
    run_loader_batch_cost,
    thread_split,
)

__all__ = [
    "COMPILED_CALL_NS",
    "FUSED_FLOP_NS",
    "FUSED_KERNEL_NS",
    "GENERIC_REMEDIES",
    "LOADER_BATCH_NS",
    "MODEL_COSTS",
    "THREAD_OP_NS",
    "TRANSCENDENTAL_NS",
    "Advisor",
    "CompileCosts",
    "Context",
    "Finding",
    "JobContext",
    "advise",
    "compile_verdict",
    "compiled_step_ns",
    "cross_rank",
    "delivery_ns",
    "loader_batch_cost",
    "loader_figures",
    "loader_receive_cost",
    "loader_saving",
    "measured_loader_estimate",
    "registered_advisors",
    "remedy_workers",
    "replay_figures",
    "run_loader_batch_cost",
    "thread_split",
]
