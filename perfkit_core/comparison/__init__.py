"""Comparison of runs: before/after a change, or one model in two frameworks, side by side.

- ``compare``: ``compare(*runs)``, the ``Comparison`` tables, and the regression gate.

Op families, which let a torch run and a paddle run line up, are a view
(``perfkit_core.views.families``).
"""

from __future__ import annotations

from perfkit_core.comparison.compare import Comparison, GateResult, compare

__all__ = ["Comparison", "GateResult", "compare"]
