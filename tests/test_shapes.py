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
from perfkit_core.views.anatomy import structure

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
    assert overview["operator"]["cpu_per_step_ns"] == (2 * DEPTH + 1) * 1000


# -- gzip bombs --------------------------------------------------------------------------------

GIB = 2**30


def gzip_bomb(path: Path, total: int = 2 * GIB) -> Path:
    """A Kineto-looking ``.json.gz`` of about 2 MB holding ``total`` bytes: ``{"traceEvents": [``,
    spaces, ``]}``, as gzip members of 64 MiB each (concatenated members are one gzip file)."""
    import zlib

    block = 64 * 2**20

    def member(data: bytes) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()

    spaces = member(b" " * block)
    head = b'{"traceEvents": ['
    parts = [member(head + b" " * (block - len(head)))]
    parts += [spaces] * (total // block - 2)
    parts.append(member(b" " * (block - 2) + b"]}"))
    path.write_bytes(b"".join(parts))
    return path


def _perfkit(
    args: list[str], tmp_path: Path, *, memory_limit: int | None = None, env: dict | None = None
) -> tuple[int, str, str, int]:
    """Run the perfkit command (under an address-space limit of ``memory_limit`` bytes); return
    (exit status, stdout, stderr, the command's own peak resident memory in bytes).

    The peak is the command's ``VmHWM``, read by the command as it exits: a child's
    ``ru_maxrss`` would also count the memory of this test process it was forked from."""
    import os
    import resource

    def limit() -> None:
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    status_path = tmp_path / "status.txt"
    launcher = (
        "import atexit, runpy, sys\n"
        "status = sys.argv.pop(1)\n"
        "def keep():\n"
        "    with open(status, 'w') as f, open('/proc/self/status') as s:\n"
        "        f.write(s.read())\n"
        "atexit.register(keep)\n"
        "runpy.run_module('perfkit_core', run_name='__main__', alter_sys=True)\n"
    )
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.run(
            [sys.executable, "-c", launcher, str(status_path), *args],
            stdout=out,
            stderr=err,
            preexec_fn=limit,
            env={**os.environ, **(env or {})},
        )
    peak_kib = next(
        int(line.split()[1])
        for line in status_path.read_text().splitlines()
        if line.startswith("VmHWM:")
    )
    return proc.returncode, out_path.read_text(), err_path.read_text(), peak_kib * 1024


def test_a_gzip_bomb_is_refused_in_one_line_within_a_memory_limit(tmp_path):
    """A 2 MB file holding 2 GiB, read under a 1 GiB address-space limit: refused in one line
    after inflating at most a quarter of the memory left (a MemoryError traceback before), and
    without a limit, refused as a bomb once it inflated 100 times its size (before: 4.2 GB of
    memory and 35 s, then "no events")."""
    bomb = gzip_bomb(tmp_path / "bomb.json.gz")
    assert bomb.stat().st_size < 4 * 2**20
    code, out, err, _ = _perfkit(["report", str(bomb)], tmp_path, memory_limit=GIB)
    assert (code, out) == (2, ""), err[-2000:]
    assert len(err.splitlines()) == 1, err[-2000:]
    assert err.startswith(f"perfkit: error: {bomb}: inflates ")
    assert "of memory this process has free" in err or "a gzip bomb" in err, err
    code, out, err, peak = _perfkit(["report", str(bomb)], tmp_path)
    assert (code, out) == (2, ""), err[-2000:]
    size = bomb.stat().st_size
    assert err == (
        f"perfkit: error: {bomb}: inflates more than 100 times, to over {100 * size / 1e6:.1f} MB "
        f"from {size / 1e6:.1f} MB: a gzip bomb (traces inflate 10 to 30 times); set "
        "PERFKIT_MAX_BYTES (such as 64G) to read it anyway\n"
    )
    assert peak < GIB, peak


def test_perfkit_max_bytes_sets_the_cap(tmp_path):
    from perfkit_core.events.inflate import parse_size

    assert parse_size("512M") == 512 * 2**20 and parse_size("8GiB") == 8 * GIB
    assert parse_size("1000") == 1000
    trace = deep_trace(tmp_path / "t.json", depth=50)
    packed = tmp_path / "t.json.gz"
    import gzip

    packed.write_bytes(gzip.compress(trace.read_bytes()))
    code, _, err, _ = _perfkit(["report", str(packed)], tmp_path, env={"PERFKIT_MAX_BYTES": "1K"})
    assert code == 2
    assert err == (
        f"perfkit: error: {packed}: inflates to more than 0.0 MB (PERFKIT_MAX_BYTES=1K): a gzip "
        "bomb, or a trace too big to read in memory here; set PERFKIT_MAX_BYTES (such as 64G) to "
        "read it anyway\n"
    )
    code, _, err, _ = _perfkit(["report", str(packed)], tmp_path, env={"PERFKIT_MAX_BYTES": "1M"})
    assert code == 0, err
    code, _, err, _ = _perfkit(["report", str(packed)], tmp_path, env={"PERFKIT_MAX_BYTES": "lots"})
    assert (code, err) == (
        2,
        "perfkit: error: PERFKIT_MAX_BYTES: 'lots' is not a size in bytes (such as 512M or 8G)\n",
    )
