"""Advice with evidence: the engine (``engine``) and the built-in rules (``rules``)."""

from __future__ import annotations

from perfkit_core.advice.amp import replayed_amp_saving
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
from perfkit_core.advice.corun import corun_slowdowns
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
    LOADING_OP_SHARE,
    THREAD_OP_NS,
    THREAD_OP_SOURCES,
    delivery_ns,
    handover_exceeds_loading,
    handover_ns,
    loader_batch_cost,
    loader_figures,
    loader_saving,
    measured_loader_estimate,
    replay_figures,
    replay_slowdown_evidence,
    run_loader_batch_cost,
    run_loader_receive_cost,
    run_thread_op_cost,
    thread_split,
)
from perfkit_core.advice.loader_cores import remedy_workers
from perfkit_core.advice.optimizer import replay_optimizer, shapes_text, steps_in_turn

__all__ = [
    "COMPILED_CALL_NS",
    "FUSED_FLOP_NS",
    "FUSED_KERNEL_NS",
    "GENERIC_REMEDIES",
    "LOADER_BATCH_NS",
    "LOADING_OP_SHARE",
    "MODEL_COSTS",
    "THREAD_OP_NS",
    "THREAD_OP_SOURCES",
    "TRANSCENDENTAL_NS",
    "Advisor",
    "CompileCosts",
    "Context",
    "Finding",
    "JobContext",
    "advise",
    "compile_verdict",
    "compiled_step_ns",
    "corun_slowdowns",
    "cross_rank",
    "delivery_ns",
    "handover_exceeds_loading",
    "handover_ns",
    "loader_batch_cost",
    "loader_figures",
    "loader_saving",
    "measured_loader_estimate",
    "registered_advisors",
    "remedy_workers",
    "replay_figures",
    "replay_optimizer",
    "replay_slowdown_evidence",
    "replayed_amp_saving",
    "run_loader_batch_cost",
    "run_loader_receive_cost",
    "run_thread_op_cost",
    "shapes_text",
    "steps_in_turn",
    "thread_split",
]
