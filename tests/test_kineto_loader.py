"""The Kineto loader on the real traces: every event accounted for, links and kinds right."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import numpy as np
import pytest

import perfkit_core
from conftest import ALL_TRACES, GPU_TRACES, shared_trace

KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}


def raw_events(path):
    with gzip.open(path) as fh:
        return json.load(fh)


@pytest.fixture(scope="module", params=sorted(ALL_TRACES))
def loaded(request):
    path = shared_trace(request.param)
    return request.param, raw_events(path), perfkit_core.load(path)


def test_every_event_is_accounted_for(loaded):
    _, raw, run = loaded
    events = raw["traceEvents"]
    acc = run.meta["accounting"]
    phases = Counter(e.get("ph") for e in events)
    assert acc["events_in_file"] == len(events)
    assert acc["rows"] == len(run.events)
    assert acc["flow_events"] == phases["s"] + phases["f"] + phases["t"]
    assert acc["metadata_events"] == phases["M"]
    assert acc["rows"] + acc["flow_events"] + acc["metadata_events"] == len(events)


def test_device_events_match_the_raw_trace(loaded):
    _, raw, run = loaded
    cats = Counter(e.get("cat") for e in raw["traceEvents"] if e.get("ph") == "X")
    ev = run.events
    on_device = ev["stream"] >= 0
    kernels = ev[on_device & ev["kind"].isin(["kernel", "communication"])]
    assert len(kernels) == sum(cats[c] for c in KERNEL_CATS)
    assert (ev["kind"] == "memcpy").sum() == sum(cats[c] for c in MEMCPY_CATS)
    assert (ev["kind"] == "memset").sum() == sum(cats[c] for c in MEMSET_CATS)
    raw_kernel_ns = sum(
        round(e["dur"] * 1000)
        for e in raw["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS
    )
    assert int(kernels["dur_ns"].sum()) == raw_kernel_ns


def test_raw_category_is_kept_for_every_row(loaded):
    _, raw, run = loaded
    cats = Counter(
        e.get("cat", "") for e in raw["traceEvents"] if e.get("ph") not in ("s", "f", "t", "M")
    )
    got = run.events["category"].astype(str).value_counts().to_dict()
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in cats.items()}


def test_host_nesting_is_sound(loaded):
    _, _, run = loaded
    ev = run.events
    parent = ev["parent"].to_numpy()
    child = np.flatnonzero(parent >= 0)
    p = parent[child]
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    assert (start[p] <= start[child]).all()
    assert (end[p] >= end[child]).all()
    assert (ev["tid"].to_numpy()[p] == ev["tid"].to_numpy()[child]).all()
    assert (ev["stream"].to_numpy()[child] < 0).all()


@pytest.mark.parametrize("key", ["rank_non_gpu", "resnet_nw4"])
def test_nesting_matches_a_stack_walk(key):
    run = perfkit_core.load(shared_trace(key))
    ev = run.events
    host = ev[(ev["stream"] < 0) & (ev["tid"] >= 0)]
    for tid, group in host.groupby("tid"):
        starts = group["start_ns"].to_dict()
        ends = (group["start_ns"] + group["dur_ns"]).to_dict()
        order = sorted(group.index, key=lambda i: (starts[i], -(ends[i] - starts[i]), i))
        expected = {}
        stack: list[int] = []
        for i in order:
            while stack:
                top = stack[-1]
                encloses = ends[top] >= ends[i] and (ends[top] > starts[i])
                if encloses:
                    break
                stack.pop()
            expected[i] = stack[-1] if stack else -1
            stack.append(i)
        got = group["parent"].to_dict()
        assert got == expected, f"thread {tid}"


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_kernels_link_to_their_launch_and_step(key):
    from perfkit_core.events.links import launcher_rows

    run = perfkit_core.load(shared_trace(key))
    ev = run.events
    launcher = launcher_rows(ev)
    device = np.flatnonzero((ev["stream"] >= 0).to_numpy() & (ev["correlation"] >= 0).to_numpy())
    linked = launcher[device] >= 0
    # A device event is linked exactly when its launch was recorded (kernels already queued
    # when profiling began have no launch in the trace).
    runtime_corr = set(ev.loc[(ev["kind"] == "runtime"), "correlation"].tolist())
    has_launch = np.array([c in runtime_corr for c in ev["correlation"].to_numpy()[device]])
    assert (linked == has_launch).all()
    assert linked.mean() > 0.95
    rows = device[linked]
    assert (ev["kind"].to_numpy()[launcher[rows]] == "runtime").all()
    assert (
        ev["correlation"].to_numpy()[launcher[rows]] == ev["correlation"].to_numpy()[rows]
    ).all()
    # A device event belongs to the step whose host code launched it.
    step = ev["step"].to_numpy()
    assert (step[rows] == step[launcher[rows]]).all()
    assert len(run.meta["steps"]) == 6


def test_timestamps_are_integer_nanoseconds_from_float_microseconds():
    path = shared_trace("gloo_rank34")
    raw = raw_events(path)
    run = perfkit_core.load(path)
    base = raw["baseTimeNanoseconds"]
    first = next(
        e for e in raw["traceEvents"] if e.get("ph") == "X" and e["name"] == "gloo:all_reduce"
    )
    row = run.events[run.events["name"] == "gloo:all_reduce"].sort_values("start_ns").iloc[0]
    assert row["start_ns"] == base + round(first["ts"] * 1000)
    assert row["dur_ns"] == round(first["dur"] * 1000)
    assert run.events["start_ns"].dtype == np.int64


def test_distributed_info_and_devices():
    run = perfkit_core.load(shared_trace("a100_rank3"))
    assert run.meta["rank"] == 3
    assert run.meta["world_size"] == 8
    assert set(run.events["rank"].unique()) == {3}
    devices = run.meta["devices"]
    assert len(devices) == 8 and devices[0]["name"] == "NVIDIA A100-PG509-200"
    assert devices[0]["total_memory_bytes"] == 42505273344
    assert run.meta["extra"]["distributed"]["backend"] == "nccl"


def test_old_capitalised_categories_and_memory_instants():
    path = shared_trace("resnet_nw0")
    raw = raw_events(path)
    run = perfkit_core.load(path)
    ev = run.events
    mem = ev[ev["kind"] == "memory"]
    raw_mem = [e for e in raw["traceEvents"] if e.get("name") == "[memory]"]
    assert len(mem) == len(raw_mem)
    assert mem["bytes"].sum() == sum(e["args"]["Bytes"] for e in raw_mem)
    assert set(mem["device_type"].astype(str)) <= {"cpu", "gpu"}
    assert (ev.loc[ev["kind"] == "kernel", "device_type"] == "gpu").all()
    assert (ev.loc[ev["kind"] == "operator", "category"] == "Operator").all()
    kernels = ev[ev["kind"] == "kernel"]
    assert kernels["grid"].astype(str).str.match(r"^\d+,\d+,\d+$").all()
    assert kernels["registers"].notna().all()


def test_nccl_kernels_are_communication():
    run = perfkit_core.load(shared_trace("a100_rank3"))
    ev = run.events
    comm = ev[(ev["kind"] == "communication") & (ev["stream"] >= 0)]
    assert len(comm) > 0
    assert comm["name"].astype(str).str.contains("nccl", case=False).all()


def test_folder_of_ranks_loads_as_one_job(tmp_path):
    for key in ("a100_rank3", "v100_rank1"):
        src = shared_trace(key)
        (tmp_path / src.name).write_bytes(src.read_bytes())
    run = perfkit_core.load(tmp_path)
    assert run.meta["ranks"] == [1, 3]
    ev = run.events
    assert set(ev["rank"].unique()) == {1, 3}
    # Parents still point inside the same rank after concatenation.
    parent = ev["parent"].to_numpy()
    child = np.flatnonzero(parent >= 0)
    assert (ev["rank"].to_numpy()[parent[child]] == ev["rank"].to_numpy()[child]).all()
    single = perfkit_core.load(shared_trace("v100_rank1"))
    assert (ev["rank"] == 1).sum() == len(single.events)


@pytest.mark.parametrize("key", ["a100_rank3", "resnet_nw4"])
def test_read_in_pieces_equals_read_whole(key, monkeypatch):
    """A trace read 256 KiB of JSON at a time gives the same run as the file read whole."""
    import pandas as pd

    from perfkit_core.events import read_trace_bytes
    from perfkit_torch import kineto, kineto_stream

    path = shared_trace(key)
    whole = kineto.load_kineto(path, read_trace_bytes(path))
    pieces = []
    real = kineto_stream.StreamedTrace.pieces

    def counted(self):
        for piece in real(self):
            pieces.append(len(piece))
            yield piece

    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 256 * 1024)
    monkeypatch.setattr(kineto_stream.StreamedTrace, "pieces", counted)
    streamed = kineto.load_kineto(path)
    assert len(pieces) > 10 and sum(pieces) == streamed.meta["accounting"]["events_in_file"]
    pd.testing.assert_frame_equal(streamed.events, whole.events, check_categorical=False)
    assert streamed.meta == whole.meta


def test_cuts_inside_strings_and_bad_tails_fall_back_to_reading_whole(tmp_path):
    """Names holding '},{' tempt the cutter; a truncated file is named as truncated."""
    from perfkit_torch import kineto, kineto_stream

    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f'op }},{{ "x": {i}',
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
            "args": {"nested": {"a": [{"b": 1}, {"c": 2}]}},
        }
        for i in range(3000)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 5}))
    streamed = kineto_stream.StreamedTrace(path, chunk_bytes=16 * 1024)
    got = [e for piece in streamed.pieces() for e in piece]
    assert [e.name for e in got] == [e["name"] for e in events]
    assert streamed.trace.baseTimeNanoseconds == 5
    run = kineto.load_kineto(path)
    assert len(run.events) == 3000 and run.events["start_ns"].min() == 5
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(kineto_stream.NotStreamable):
        list(kineto_stream.StreamedTrace(path, chunk_bytes=16 * 1024).pieces())
    with pytest.raises(perfkit_core.TraceError, match="truncated JSON"):
        kineto.load_kineto(path)
