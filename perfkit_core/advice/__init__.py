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

__all__ = [
    "GENERIC_REMEDIES",
    "Advisor",
    "Context",
    "Finding",
    "JobContext",
    "advise",
    "cross_rank",
    "registered_advisors",
]
