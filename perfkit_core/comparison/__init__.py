"""Comparison of runs: before/after a change, or one model in two frameworks, side by side.

- ``compare``: ``compare(*runs)`` and the ``Comparison`` tables, and the regression gate.
- ``families``: canonical op families that let a torch run and a paddle run line up.
"""

from __future__ import annotations

from perfkit_core.comparison.compare import Comparison, GateResult, compare, family_times
from perfkit_core.comparison.families import FAMILIES, direction_of, family_of, normalize

__all__ = [
    "FAMILIES",
    "Comparison",
    "GateResult",
    "compare",
    "direction_of",
    "family_of",
    "family_times",
    "normalize",
]
