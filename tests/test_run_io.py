"""Saving and loading runs: Parquet + JSON, atomic, schema-versioned; the schema helpers."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.events import schema
from perfkit_core.events.build import finish_events, make_run
from perfkit_core.events.run import Run


def small_run() -> Run:
    columns = {
        "kind": ["step", "operator", "operator", "runtime", "kernel", "memory"],
        "name": ["ProfilerStep#3", "aten::mm", "aten::t", "cudaLaunchKernel", "gemm", "[memory]"],
        "start_ns": [0, 10, 12, 20, 40, 15],
        "dur_ns": [100, 30, 2, 5, 20, 0],
        "tid": [1, 1, 1, 1, -1, 1],
        "stream": [-1, -1, -1, -1, 7, -1],
        "correlation": [-1, -1, -1, 5, 5, -1],
        "step": [3, -1, -1, -1, -1, -1],
        "bytes": [np.nan, np.nan, np.nan, np.nan, np.nan, 256.0],
    }
    return make_run(finish_events(columns, 6), {"framework": "torch"})


def test_finish_events_nests_sorts_and_assigns_steps():
    run = small_run()
    ev = run.events
    names = ev["name"].astype(str).tolist()
    assert names == [
        "ProfilerStep#3",
        "aten::mm",
        "aten::t",
        "[memory]",
        "cudaLaunchKernel",
        "gemm",
    ]
    parent = {names[i]: (names[p] if p >= 0 else None) for i, p in enumerate(ev["parent"])}
    assert parent == {
        "ProfilerStep#3": None,
        "aten::mm": "ProfilerStep#3",
        "aten::t": "aten::mm",
        "[memory]": "aten::mm",
        "cudaLaunchKernel": "aten::mm",
        "gemm": None,
    }
    assert ev["step"].tolist() == [3] * 6
    assert run.meta["steps"] == [3]
    assert run.meta["span_ns"] == [0, 100]


def test_operator_view_gpu_time_follows_launches():
    ops = small_run().summary("operator").set_index("name")
    assert ops.loc["aten::mm", "gpu_total_ns"] == 20
    assert ops.loc["aten::mm", "gpu_self_ns"] == 20
    assert ops.loc["aten::t", "gpu_total_ns"] == 0
    assert ops.loc["aten::mm", "cpu_self_ns"] == 30 - 2 - 5


def test_save_and_load_round_trip(tmp_path):
    run = small_run()
    target = run.save(tmp_path / "run")
    assert sorted(p.name for p in target.iterdir()) == ["events.parquet", "meta.json"]
    back = perfkit_core.load(target)
    pd.testing.assert_frame_equal(back.events, run.events)
    assert back.meta == json.loads(json.dumps(run.meta))
    assert json.loads((target / "meta.json").read_text())["schema_version"] == schema.SCHEMA_VERSION


def test_real_trace_round_trip(tmp_path):
    run = perfkit_core.load(shared_trace("resnet_nw4"))
    back = perfkit_core.load(run.save(tmp_path / "r"))
    pd.testing.assert_frame_equal(back.events, run.events)
    assert back.summary("operator").equals(run.summary("operator"))


def test_failed_save_keeps_the_previous_run(tmp_path, monkeypatch):
    run = small_run()
    target = run.save(tmp_path / "run")
    before = (target / "events.parquet").read_bytes()
    import pyarrow.parquet as pq

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError):
        run.save(target)
    assert (target / "events.parquet").read_bytes() == before
    assert sorted(p.name for p in target.iterdir()) == ["events.parquet", "meta.json"]


def test_newer_schema_is_refused(tmp_path):
    target = small_run().save(tmp_path / "run")
    meta = json.loads((target / "meta.json").read_text())
    meta["schema_version"] = "99.0"
    (target / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(perfkit_core.TraceError, match=r"schema 99\.0"):
        perfkit_core.load(target)


def test_corrupt_event_table_is_a_trace_error(tmp_path):
    target = small_run().save(tmp_path / "run")
    (target / "events.parquet").write_bytes(b"not parquet")
    with pytest.raises(perfkit_core.TraceError, match=r"events\.parquet"):
        perfkit_core.load(target)


def test_build_events_fills_and_checks():
    ev = schema.build_events({"kind": ["kernel"], "name": ["k"], "start_ns": [1], "dur_ns": [2]})
    schema.validate_events(ev)
    assert ev.loc[0, "parent"] == -1 and np.isnan(ev.loc[0, "flops"])
    assert list(ev.columns) == list(schema.COLUMN_NAMES)
    with pytest.raises(ValueError, match="unknown event kinds"):
        schema.build_events({"kind": ["banana"], "start_ns": [0], "dur_ns": [0]})
    with pytest.raises(ValueError, match="unknown event columns"):
        schema.build_events({"colour": [1]})


def test_concat_shifts_row_links():
    a = small_run().events
    b = small_run().events.assign(rank=np.int32(1))
    both = schema.concat_events([a, b])
    assert len(both) == 12
    parent = both["parent"].to_numpy()
    assert (parent[6:][parent[6:] >= 0] >= 6).all()
    assert both["kind"].cat.categories.tolist() == list(schema.KINDS)


def test_str_values_is_astype_str_of_every_string_column():
    """The fast string view of a column equals pandas' own conversion, row for row, on a real
    trace's categorical columns; a missing value reads empty; and a plain (non-categorical) column."""
    run = perfkit_core.load(shared_trace("a100_rank3"))
    for name in ("name", "kind", "category", "device_type", "process_group"):
        column = run.events[name]
        assert isinstance(column.dtype, pd.CategoricalDtype)
        got = schema.str_values(column)
        assert got.dtype == object and got.tolist() == column.astype(str).to_numpy().tolist()
    gappy = pd.Series(pd.Categorical(["b", None, "a", "b"]))
    assert schema.str_values(gappy).tolist() == ["b", "", "a", "b"]
    plain = pd.Series(["x", "y"])
    assert schema.str_values(plain).tolist() == ["x", "y"]


def test_str_contains_is_pandas_str_contains_of_every_row():
    """The per-category test of a string column equals pandas' row-by-row ``str.contains``
    on a real trace's names (plain text, a compiled case-insensitive pattern, ``case=False``);
    a missing value never matches; a plain column works too."""
    import re

    names = perfkit_core.load(shared_trace("a100_rank3")).events["name"]
    patterns = [
        ("DtoH", True),
        (re.compile(r"Synchronize|^cudaMemcpy$", re.IGNORECASE), True),
        ("launch", False),
    ]
    for pattern, case in patterns:
        expected = names.astype(str).str.contains(pattern, case=case).to_numpy(dtype=bool)
        got = schema.str_contains(names, pattern, case=case)
        assert got.dtype == bool and got.tolist() == expected.tolist()
        assert expected.any()
    gappy = pd.Series(pd.Categorical(["ab", None, "b"]))
    assert schema.str_contains(gappy, "b").tolist() == [True, False, True]
    assert schema.str_contains(pd.Series(["ab", "c"]), "a").tolist() == [True, False]


def test_constant_columns_hold_one_value():
    """A column that is one value in every row (not recorded, or the run's one rank) is a
    zero-stride view: it reads as np.full, cannot be written to, and saves and reads back."""
    run = small_run()
    events = run.events
    for name in ("rank", "forward_op", "flops", "allocated_bytes", "registers"):
        column = events[name].to_numpy()
        assert column.strides == (0,), name
        missing = schema.COLUMNS_BY_NAME[name].missing
        full = np.full(len(events), missing, dtype=schema.COLUMNS_BY_NAME[name].dtype)
        np.testing.assert_array_equal(column, full)
        with pytest.raises(ValueError):
            column[0] = 1
    assert events["start_ns"].to_numpy().strides != (0,)
    assert events["bytes"].to_numpy().strides != (0,)  # NaN but one row
    ranked = schema.build_events({"rank": [3, 3], "start_ns": [0, 1], "dur_ns": [1, 1]})
    assert ranked["rank"].tolist() == [3, 3] and ranked["rank"].to_numpy().strides == (0,)
    assert schema.build_events({}, n=0)["flops"].to_numpy().shape == (0,)


def test_start_order_is_the_two_key_sort_or_none_when_sorted():
    """``start_order`` (the shortcut finish_events sorts with) gives ``lexsort((-dur, start))``:
    None for rows already in it, the same permutation for nearly sorted rows, equal starts
    with durations in and out of order, and random rows."""
    from perfkit_core.events.build import start_order

    rng = np.random.default_rng(5)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        start = np.sort(rng.integers(0, 12, n)).astype(np.int64)
        dur = rng.integers(0, 5, n).astype(np.int64)
        if trial % 3 == 1 and n > 2:  # one row out of place, as a profiler span written last
            start[[0, n - 1]] = start[[n - 1, 0]]
        elif trial % 3 == 2:
            rng.shuffle(start)
        want = np.lexsort((-dur, start))
        got = start_order(start, dur)
        if got is None:
            assert (want == np.arange(n)).all()
        else:
            assert (got == want).all()


def test_previous_at_least_matches_a_scan():
    from perfkit_core.events.links import previous_at_least

    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(0, 80))
        values = rng.integers(0, 30, n).astype(np.int64)
        thresholds = rng.integers(0, 35, n).astype(np.int64)
        want = [
            next((j for j in range(i - 1, -1, -1) if values[j] >= thresholds[i]), -1)
            for i in range(n)
        ]
        for window in (1, 3, 8):
            assert previous_at_least(values, thresholds, window=window).tolist() == want


def test_nest_does_not_depend_on_row_order():
    """Parents found with rows in start order (the fast path) and shuffled (the full sort)
    are the same events, on random spans with children in three threads."""
    from perfkit_core.events.links import nest

    rng = np.random.default_rng(7)
    starts, durs, groups = [], [], []
    for group in range(3):
        t = 0
        for _ in range(200):
            length = int(rng.integers(0, 50))
            starts.append(t)
            durs.append(length)
            groups.append(group)
            for _ in range(int(rng.integers(0, 4))):  # children inside the span
                child = int(rng.integers(0, length + 1))
                starts.append(t + child)
                durs.append(int(rng.integers(0, length - child + 1)))
                groups.append(group)
            t += length + int(rng.integers(0, 3))
    # Identical spans would nest in row order, which a shuffle changes: keep one of each.
    spans = np.unique(np.array([starts, durs, groups], dtype=np.int64).T, axis=0)
    start, dur, group = spans[:, 0], spans[:, 1], spans[:, 2]
    order = np.lexsort((-dur, start))
    start, dur, group = start[order], dur[order], group[order]
    host = rng.random(len(start)) < 0.9
    sorted_parent = nest(group, start, dur, host)
    perm = rng.permutation(len(start))
    shuffled_parent = nest(group[perm], start[perm], dur[perm], host[perm])
    back = np.where(shuffled_parent >= 0, perm[np.maximum(shuffled_parent, 0)], -1)
    assert (back == sorted_parent[perm]).all()
    assert (sorted_parent >= 0).sum() > 200


def test_nesting_a_big_table_allocates_a_few_columns_not_a_copy_of_each_input():
    """The nesting runs while the whole event table is held, so its temporaries set a big
    load's peak memory: two threads' 200k spans (a sort by thread, every row taking part) are
    nested with at most 9 int64 columns' worth of memory allocated at once, the parents
    included (copying each input, as the nesting once did, took 16)."""
    import tracemalloc

    from perfkit_core.events.links import nest

    n = 200_000
    rng = np.random.default_rng(0)
    start = np.cumsum(rng.integers(0, 3, n))
    dur = rng.integers(0, 40, n)
    group = (np.arange(n) % 2).astype(np.int64)
    tracemalloc.start()
    try:
        parent = nest(group, start, dur, np.ones(n, dtype=bool))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 9 * 8 * n, f"{peak / (8 * n):.1f} columns"
    # the answer itself, recomputed by a scan of each thread's open spans in start order,
    # longer first
    want = np.full(n, -1)
    for g in (0, 1):
        rows = np.flatnonzero(group == g)
        stack: list[int] = []
        for i in rows[np.lexsort((-dur[rows], start[rows]))].tolist():
            end = start[i] + dur[i]
            while stack and not (
                start[stack[-1]] + dur[stack[-1]] >= (end if dur[i] > 0 else start[i] + 1)
            ):
                stack.pop()
            want[i] = stack[-1] if stack else -1
            stack.append(i)
    assert (parent == want).all()


# -- a saved run is one unit ------------------------------------------------------------------


def test_an_event_table_copied_from_another_run_is_refused(tmp_path, capsys):
    """``save A; save B; cp B/events.parquet A/``: one line saying the folder mixes two saves
    (it read as run A's metadata over B's events, exit 0)."""
    import shutil

    from perfkit_core.cli import main

    a = perfkit_core.load(shared_trace("gloo_rank34")).save(tmp_path / "A")
    b = small_run().save(tmp_path / "B")
    shutil.copy(b / "events.parquet", a / "events.parquet")
    with pytest.raises(perfkit_core.TraceError, match="mixes files of two saved runs"):
        perfkit_core.load(a)
    assert main(["report", str(a)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"perfkit: error: {a}: events.parquet (run ")
    assert captured.err.count("\n") == 1
    # The same id with another row count (a table edited and written back) is refused too.
    meta = json.loads((b / "meta.json").read_text())
    meta["events"] += 1
    (b / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(perfkit_core.TraceError, match=r"holds 6 events where meta\.json says 7"):
        perfkit_core.load(b)


def test_the_run_id_is_in_both_files(tmp_path):
    import pyarrow.parquet as pq

    from perfkit_core.events.run import table_run_id

    run = small_run()
    first = json.loads((run.save(tmp_path / "r") / "meta.json").read_text())
    assert len(first["run_id"]) == 32 and first["events"] == 6
    assert table_run_id(pq.read_schema(tmp_path / "r" / "events.parquet")) == first["run_id"]
    second = json.loads((run.save(tmp_path / "r") / "meta.json").read_text())
    assert second["run_id"] != first["run_id"]  # each save is a new unit


def test_a_second_writer_gets_a_clear_error_and_a_dead_ones_leftovers_go(tmp_path):
    import socket
    import subprocess

    from perfkit_core.events.atomic import CLAIM_FILE

    target = tmp_path / "run"
    target.mkdir()
    # A live process holds the folder: the save is refused, the folder left as it is.
    (target / CLAIM_FILE).write_text(f"{os.getpid()} {socket.gethostname()}")
    with pytest.raises(perfkit_core.errors.OutputError, match=r"process \d+ on .* is saving"):
        small_run().save(target)
    assert sorted(p.name for p in target.iterdir()) == [CLAIM_FILE]
    # A process that is gone held it (killed mid-save): its claim and temporaries are removed.
    gone = subprocess.Popen(["true"])
    gone.wait()
    (target / CLAIM_FILE).write_text(f"{gone.pid} {socket.gethostname()}")
    (target / ".events.parquet.abc123.tmp").write_bytes(b"half a table")
    small_run().save(target)
    assert sorted(p.name for p in target.iterdir()) == ["events.parquet", "meta.json"]


WRITER = """
import sys, time
import perfkit_core
from perfkit_core.errors import OutputError

run = perfkit_core.load(sys.argv[1])
run.meta.setdefault("extra", {})["writer"] = sys.argv[3]
saved = busy = 0
deadline = time.monotonic() + float(sys.argv[4])
while time.monotonic() < deadline:
    try:
        run.save(sys.argv[2])
        saved += 1
    except OutputError as exc:
        assert "is saving a run into it" in str(exc), exc
        busy += 1
print(saved, busy)
"""


def test_two_concurrent_writers_and_a_reader_never_mix_runs(tmp_path):
    """Two processes save different runs into one folder over and over while this one reads
    it: every read is wholly one run (its events and its metadata), never one's events with
    the other's metadata; a writer that finds the other saving gets a clear error instead of
    replacing its run (21 of 104 reads mixed the two before)."""
    import subprocess
    import sys
    import time

    sources = {"A": small_run().save(tmp_path / "a"), "B": shared_trace("gloo_rank34")}
    rows = {k: len(perfkit_core.load(v).events) for k, v in sources.items()}
    assert rows["A"] != rows["B"]
    target = tmp_path / "shared"
    seconds = 15
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(src), str(target), name, str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, src in sources.items()
    ]
    reads: dict[str, int] = {"A": 0, "B": 0, "refused": 0}
    deadline = time.monotonic() + seconds
    while not (target / "meta.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the writers' first save
    while time.monotonic() < deadline:
        try:
            run = perfkit_core.load(target)
        except perfkit_core.TraceError as exc:
            message = str(exc)
            assert "mixes files" not in message, message
            reads["refused"] += 1
            continue
        writer = run.meta["extra"]["writer"]
        assert len(run.events) == rows[writer] == run.meta["events"], (writer, len(run.events))
        reads[writer] += 1
    results = []
    for proc in writers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        results.append([int(x) for x in out.split()])
    assert all(saved > 0 for saved, _ in results), results
    assert reads["A"] + reads["B"] > 10, reads


def test_a_cached_figure_is_computed_once_per_run_none_included():
    """``Run.cached``: the figures views and rules share are computed once per run, a None
    result too (a run the placement replay cannot replay is not rebuilt for each finding),
    and each run has its own."""
    run, other = small_run(), small_run()
    calls = []

    def compute(value):
        calls.append(value)
        return value

    assert run.cached("k", lambda: compute(None)) is None
    assert run.cached("k", lambda: compute(1)) is None
    assert run.cached(("k", 2), lambda: compute(2)) == 2
    assert other.cached("k", lambda: compute(3)) == 3
    assert calls == [None, 2, 3]
