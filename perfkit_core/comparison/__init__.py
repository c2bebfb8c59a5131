"""Comparison of runs: before/after a change, or one model in two frameworks, side by side.

- ``compare``: ``compare(*runs)``, the ``Comparison`` facade and its tables.
- ``verdict``: which run is faster, by how much, and the causes (``Verdict``).
- ``statistics``: the ratio of mean step times with a bootstrap interval; the resolvable change.
- ``attribution``: tables that split the step-time difference and add up to it.
- ``overhead``: host events per step and step-timer times: what the profiler did to each run.
- ``gate``: the regression gate CI runs (``GateResult``).
- ``opmap``: reading a user's ``--op-map`` file.

Per-run labelling (canonical ops, layers, phases) is a view: ``perfkit_core.views.attribution``.
"""

from __future__ import annotations

from perfkit_core.comparison.compare import VIEWS, Comparison, check_labels, compare
from perfkit_core.comparison.gate import GateResult
from perfkit_core.comparison.opmap import load_op_map
from perfkit_core.comparison.statistics import RatioEstimate, ratio_of_means
from perfkit_core.comparison.verdict import Cause, Verdict

__all__ = [
    "VIEWS",
    "Cause",
    "Comparison",
    "GateResult",
    "RatioEstimate",
    "Verdict",
    "check_labels",
    "compare",
    "load_op_map",
    "ratio_of_means",
]
