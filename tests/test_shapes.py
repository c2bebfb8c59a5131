"""Costs bounded by the data, not by its shape: spans nested 200,000 deep, and a gzip file that
inflates to far more than memory holds.

Times are measured in bench/bench_shapes.py; here the work is counted (rounds of the ancestor
queries) and the commands must finish, with a generous limit that only a hang reaches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfkit_core.events import links
from perfkit_core.views import structure

DEPTH = 200_000


def deep_trace(path: Path, depth: int = DEPTH) -> Path:
    """A Kineto trace of ``depth`` operators, each holding the next (1 us apart)."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i % 7}",
            "pid": 1,
            "tid": 1,
            "ts": float(i),
            "dur": float(2 * (depth - i) + 1),
        }
        for i in range(depth)
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _rounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the passes over the rows (each round of a query calls ``np.flatnonzero`` once)."""
    calls = [0]
    real = np.flatnonzero

    def counted(a):
        calls[0] += 1
        return real(a)

    monkeypatch.setattr(np, "flatnonzero", counted)
    return calls


def test_ancestor_queries_take_log_depth_rounds_on_a_deep_chain(monkeypatch):
    """Every ancestor query answers a chain 20,000 deep right in about log2(depth) = 15 rounds
    over the rows (one round per level of nesting took 31 s for 20,000 levels)."""
    depth = 20_000
    parent = np.arange(-1, depth - 1, dtype=np.int64)  # row i is the child of row i - 1
    flag = np.zeros(depth, dtype=bool)
    flag[[10, 15_000]] = True
    calls = _rounds(monkeypatch)
    rows = np.arange(depth)
    checks = {
        "has_ancestor": (links.has_ancestor(parent, flag), rows > 10),
        "depth": (links.depth(parent), rows),
        "subtree_sums": (
            links.subtree_sums(parent, np.ones(depth)),
            np.arange(depth, 0, -1, dtype=np.float64),
        ),
        "kept_ancestor": (
            links.kept_ancestor(parent, ~flag),
            np.where(rows > 15_000, 15_000, np.where(rows > 10, 10, -1)),
        ),
        "innermost": (
            structure.innermost(parent, flag),
            np.where(rows >= 15_000, 15_000, np.where(rows >= 10, 10, -1)),
        ),
        "outermost": (structure.outermost(parent, flag), np.where(rows >= 10, 10, -1)),
    }
    for name, (got, expected) in checks.items():
        np.testing.assert_array_equal(got, expected, err_msg=name)
    # Six queries, at most 16 rounds each (2**15 > 20,000), a call or two of their own.
    assert calls[0] <= 6 * 18, calls[0]


def test_a_cyclic_parent_column_ends(monkeypatch):
    """A parent column with a cycle (a damaged saved run) ends after the bounded rounds."""
    parent = np.array([1, 2, 0, -1], dtype=np.int64)
    flag = np.array([False, False, False, True])
    assert not links.has_ancestor(parent, flag)[:3].any()
    assert links.kept_ancestor(parent, np.ones(4, dtype=bool)).shape == (4,)
    links.depth(parent)
    links.subtree_sums(parent, np.ones(4))
    structure.outermost(parent, flag)


def test_a_trace_nested_200000_deep_reports(tmp_path):
    """The whole report (every default view, the headline and the advice) of spans nested
    200,000 deep; it took over 240 s, when the nesting cost one pass over the rows per level."""
    path = deep_trace(tmp_path / "deep.json")
    proc = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    operators = report["tables"]["operator"]["rows"]
    assert sum(r["calls"] for r in operators) == DEPTH
    # The outermost op holds all the others: operators take the whole span, 400.001 ms.
    overview = {r["name"]: r for r in report["tables"]["overview"]["rows"]}
    assert overview["operator"]["cpu_time_ns"] == (2 * DEPTH + 1) * 1000
