"""Advice with evidence: the engine (``engine``) and the built-in rules (``rules``)."""

from __future__ import annotations

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
from perfkit_core.advice.loader import LOADER_BATCH_NS, loader_saving

__all__ = [
    "GENERIC_REMEDIES",
    "LOADER_BATCH_NS",
    "Advisor",
    "Context",
    "Finding",
    "JobContext",
    "advise",
    "cross_rank",
    "loader_saving",
    "registered_advisors",
]
