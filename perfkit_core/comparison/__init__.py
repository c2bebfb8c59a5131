"""Comparison of runs: before/after a change, or one model in two frameworks, side by side.

- ``types``: the data types: ``Comparison`` (runs lined up, the facade that builds every table
  and the verdict) and ``GateResult``; they import none of the parts below.
- ``compare``: ``compare(*runs)``, which lines runs up, and their labels.
- ``verdict``: which run is faster, by how much, and the causes (``Verdict``), in words.
- ``causes``: the rows that explain the difference, and the verdict built from them.
- ``statistics``: the ratio of mean step times with a bootstrap interval; the resolvable change.
- ``attribution``: tables that split the step-time difference and add up to it.
- ``overhead``: host events per step and step-timer times: what the profiler did to each run.
- ``gate``: the regression gate CI runs (``GateResult``).
- ``opmap``: reading a user's ``--op-map`` file.

Per-run labelling (canonical ops, layers, phases) is a view: ``perfkit_core.views.anatomy.attribution``.
"""

from __future__ import annotations

from perfkit_core.comparison.compare import check_labels, compare
from perfkit_core.comparison.opmap import load_op_map
from perfkit_core.comparison.statistics import RatioEstimate, ratio_of_means
from perfkit_core.comparison.types import VIEWS, Comparison, GateResult
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
