"""The Kineto loader on the real traces: every event accounted for, links and kinds right."""

from __future__ import annotations

import gzip
import json
import warnings
from collections import Counter

import numpy as np
import pandas as pd
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
    # Categories too: each is listed in the order the rows first show it, whatever the pieces.
    pd.testing.assert_frame_equal(streamed.events, whole.events)
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
    base_ns = streamed.trace.baseTimeNanoseconds  # the trace header, read before the events
    assert base_ns == 5
    run = kineto.load_kineto(path)
    assert len(run.events) == 3000 and run.events["start_ns"].min() == 5
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(kineto_stream.NotStreamable):
        list(kineto_stream.StreamedTrace(path, chunk_bytes=16 * 1024).pieces())
    with pytest.raises(perfkit_core.TraceError, match="truncated JSON"):
        kineto.load_kineto(path)


# --------------------------------------------------------------------------- recomputed from JSON


def _raw_rows(raw: dict) -> list[dict]:
    """The events the table keeps, as ``json.load`` reads them: not flows or metadata, and
    with a start time."""
    return [e for e in raw["traceEvents"] if e.get("ph") not in ("s", "t", "f", "M") and "ts" in e]


def _label(value) -> str | None:
    """A raw JSON argument (or the table's text of one) in one spelling, None when absent."""
    if value is None or value == "":
        return None
    return json.dumps(json.loads(value) if isinstance(value, str) else value, separators=(",", ":"))


def _ext(args: dict) -> int:
    new, old = args.get("External id", -1), args.get("external id", -1)
    new = int(new, 0) if isinstance(new, str) else new
    return new if new >= 0 else (int(old, 0) if isinstance(old, str) else old)


def check_against_raw(raw: dict, run) -> None:
    """Every row's name, category, start, duration, ids and argument texts, recomputed from the
    JSON: equal as multisets per name (the table is in time order, the file need not be)."""
    rows = _raw_rows(raw)
    ev = run.events
    names = ev["name"].astype(str).tolist()
    assert len(ev) == len(rows)
    assert Counter(names) == Counter(e.get("name", "") for e in rows)
    assert Counter(zip(names, ev["category"].astype(str), strict=True)) == Counter(
        (e.get("name", ""), e.get("cat", "")) for e in rows
    )
    base = raw.get("baseTimeNanoseconds", 0)
    got_times: dict[str, list[tuple[int, int]]] = {}
    for name, start, dur in zip(names, ev["start_ns"].tolist(), ev["dur_ns"].tolist(), strict=True):
        got_times.setdefault(name, []).append((start - base, dur))
    want_times: dict[str, list[tuple[float, float]]] = {}
    for e in rows:
        want = (e["ts"] * 1000, max(e.get("dur", 0) * 1000, 0))
        want_times.setdefault(e.get("name", ""), []).append(want)
    for name, want in want_times.items():
        got = np.array(sorted(got_times[name]), dtype=np.float64)
        # 1 ns: the float microseconds of the file, rounded to whole nanoseconds
        assert np.abs(got - np.array(sorted(want))).max() <= 1, name
    args = [e.get("args", {}) for e in rows]
    want_ids = Counter(
        (e.get("name", ""), _ext(a), a.get("Sequence number", -1))
        for e, a in zip(rows, args, strict=True)
    )
    got_ids = Counter(zip(names, ev["external_id"], ev["sequence"], strict=True))
    assert got_ids == want_ids
    want_corr = Counter(
        (e.get("name", ""), a["correlation"])
        for e, a in zip(rows, args, strict=True)
        if a.get("correlation", -1) >= 0
    )
    got_corr = Counter(zip(names, ev["correlation"], strict=True))
    assert all(got_corr[k] >= v for k, v in want_corr.items())  # flows may add more
    for column, key in (("input_shapes", "Input Dims"), ("input_dtypes", "Input type")):
        got = Counter(zip(names, map(_label, ev[column].astype(str)), strict=True))
        want = Counter(
            (e.get("name", ""), _label(a.get(key))) for e, a in zip(rows, args, strict=True)
        )
        assert got == want, column
    want_stack = Counter(
        (e.get("name", ""), "\n".join(f for f in a.get("Call stack", "").split(";") if f))
        for e, a in zip(rows, args, strict=True)
    )
    assert Counter(zip(names, ev["stack"].astype(str), strict=True)) == want_stack
    want_flops = sorted(float(a["flops"]) for a in args if a.get("flops") is not None)
    assert sorted(ev["flops"].dropna().tolist()) == want_flops


def test_columns_match_a_recomputation_from_the_raw_json(loaded):
    _, raw, run = loaded
    check_against_raw(raw, run)


def _edge_trace(n_steps: int = 40) -> dict:
    """A Kineto trace with what real writers vary: non-ASCII and JSON-looking names, text ids,
    nested shapes, stacks, null and huge numbers, device, memory, unknown-category, instant,
    phase-less and time-less events, flows and metadata."""
    events: list[dict] = [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "main"}}
    ]
    ts = 1000.0
    ext = 1
    for step in range(n_steps):
        step_start = ts
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 7,
                "tid": 7,
                "ts": ts,
                "dur": 90.5,
            }
        )
        for i, name in enumerate(["aten::mm", "名前::op", "emoji 🚀 op", 'op }, { "x": 1', ""]):
            args: dict = {"External id": ext, "Sequence number": step * 10 + i}
            if i == 0:
                args.update(
                    {
                        "Input Dims": [[64, 64], [[1], [2, 3]]],
                        "Input type": ["float", "long int"],
                        "flops": 524288.0,
                    }
                )
            if i == 1:
                args.update({"Call stack": "a.py(1): f;b.py(2): g;", "flops": None})
            if i == 2:
                args = {"external id": ext, "Input Dims": [], "Input type": []}
            if i == 3 and step % 7 == 0:
                args["External id"] = hex(ext)  # text, as ROCm writes ids
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name,
                    "pid": 7,
                    "tid": 7,
                    "ts": ts + 1 + i * 10,
                    "dur": 8.25,
                    "args": args,
                }
            )
            ext += 1
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 7,
                "tid": 7,
                "ts": ts + 60,
                "dur": 3.0,
                "args": {"correlation": step + 1, "External id": 2**62},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"gemm_{step % 3}",
                "pid": 0,
                "tid": "stream 7",
                "ts": ts + 70,
                "dur": 5.0,
                "args": {
                    "correlation": step + 1,
                    "stream": 7,
                    "device": 0,
                    "grid": [64, 1, 1],
                    "block": [128, 1, 1],
                    "registers per thread": 32,
                    "shared memory": 0,
                    "est. achieved occupancy %": 50,
                },
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "weird_cat",
                "name": "on a stream",
                "pid": 0,
                "tid": 3,
                "ts": ts + 75,
                "dur": 1.0,
                "args": {"stream": "0x3"},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "weird_cat",
                "name": "on the host",
                "pid": 7,
                "tid": 7,
                "ts": ts + 76,
                "dur": 1.0,
            }
        )
        events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": 7,
                "tid": 7,
                "ts": ts + 77,
                "args": {
                    "Device Type": 1,
                    "Device Id": 0,
                    "Bytes": 4096,
                    "Total Allocated": 8192,
                    "Total Reserved": 2**21,
                },
            }
        )
        events.append(
            {
                "ph": "",
                "cat": "cpu_op",
                "name": "no phase",
                "pid": 7,
                "tid": 7,
                "ts": ts + 78,
                "dur": 0.5,
            }
        )
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "no start", "pid": 7, "tid": 7, "dur": 0.5}
        )
        events.append(
            {
                "ph": "s",
                "cat": "fwdbwd",
                "name": "fwdbwd",
                "id": step,
                "pid": 7,
                "tid": 7,
                "ts": step_start + 1,
            }
        )
        events.append(
            {
                "ph": "f",
                "cat": "fwdbwd",
                "name": "fwdbwd",
                "id": step,
                "pid": 7,
                "tid": 7,
                "ts": step_start + 11,
                "bp": "e",
            }
        )
        events.append(
            {
                "ph": "s",
                "cat": "ac2g",
                "name": "ac2g",
                "id": step + 1,
                "pid": 7,
                "tid": 7,
                "ts": ts + 60,
            }
        )
        ts += 100.0
    events.append({})  # padding some writers end with
    return {
        "schemaVersion": 1,
        "traceEvents": events,
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }


def _without_no_ts(raw: dict) -> dict:
    return {
        **raw,
        "traceEvents": [e for e in raw["traceEvents"] if "ts" in e or e.get("ph") in ("M",)],
    }


def test_edge_cases_read_in_pieces_equal_the_file_read_whole_and_the_json(tmp_path, monkeypatch):
    """Pieces of 4 KiB cut this trace hundreds of times; the run equals the one read whole
    (categories in the same order too) and every column matches the JSON."""
    from perfkit_core.events import read_trace_bytes
    from perfkit_torch import kineto, kineto_stream

    raw = _edge_trace()
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = kineto.load_kineto(path, read_trace_bytes(path))
        monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 4096)
        streamed = kineto.load_kineto(path)
    pd.testing.assert_frame_equal(streamed.events, whole.events)
    assert streamed.meta == whole.meta
    acc = streamed.meta["accounting"]
    assert acc["skipped"] == {"without a start time (ts)": 40}
    assert acc["empty_events"] == 1 and acc["fwdbwd_links"] == 40
    check_against_raw(_without_no_ts(raw), streamed)
    ev = streamed.events
    kind = dict(zip(ev["name"].astype(str), ev["kind"].astype(str), strict=False))
    assert kind["on a stream"] == "other" and kind["gemm_0"] == "kernel"
    assert kind["ProfilerStep#3"] == "step" and kind["[memory]"] == "memory"
    device = ev[ev["stream"] >= 0]
    assert sorted(set(device["name"].astype(str))) == ["gemm_0", "gemm_1", "gemm_2", "on a stream"]
    assert set(device["grid"].astype(str)) == {"64,1,1", ""}
    assert (ev.loc[ev["name"] == "on a stream", "stream"] == 3).all()
    assert (ev.loc[ev["name"] == "gemm_1", "device_type"] == "gpu").all()
    assert (ev.loc[ev["name"] == "[memory]", "allocated_bytes"] == 8192).all()
    assert (ev.loc[ev["name"] == "aten::mm", "step"].to_numpy() == np.arange(40)).all()


def _one_line_error(path, match: str) -> None:
    from perfkit_core.errors import printable

    with pytest.raises(perfkit_core.TraceError, match=match) as info:
        perfkit_core.load(path)
    message = str(info.value)
    assert message.isprintable() and message.startswith(printable(str(path))), message


def _deep(data: bytes, old: bytes, new: bytes) -> bytes:
    """``data`` with the first ``old`` in its second half made ``new``."""
    at = data.index(old, len(data) // 2)
    return data[:at] + new + data[at + len(old) :]


def test_bad_values_deep_in_a_big_trace_are_one_line_errors(tmp_path, monkeypatch):
    """What is wrong far into a trace read in pieces is named in one line, as when read whole:
    bytes that are not UTF-8, an integer beyond int64, text that is no number, a time that is
    text; a trace whose every event lacks a start is refused."""
    from perfkit_torch import kineto_stream

    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 4096)
    good = json.dumps(_edge_trace(), ensure_ascii=False).encode()
    no_ts = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "dur": 1}
        for i in range(3000)
    ]
    cases = {
        "utf8": (_deep(good, b'"aten::mm"', b'"aten::\xe9mm"'), "not UTF-8"),
        "big_int": (_deep(good, str(2**62).encode(), str(2**64).encode()), "integer out of range"),
        "text_id": (_deep(good, b'"External id": "0x', b'"External id": "zz'), "not an integer"),
        "text_ts": (_deep(good, b'"ts": ', b'"ts": "later", "t2": '), "Expected `float`"),
        "no_ts": (json.dumps({"traceEvents": no_ts}).encode(), "no events"),
    }
    for name, (data, match) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _one_line_error(path, match)


# --------------------------------------------------------------------------- coding in bulk


def test_texts_decoded_together_equal_each_decoded_alone():
    """Argument texts are decoded and split in one call for all of them; that gives, text by
    text, what decoding each alone gives: invalid UTF-8 at either end of a text, multi-byte
    characters, and texts holding the separator themselves (then read one at a time)."""
    import random

    from perfkit_torch.kineto_strings import text_fields, text_labels

    rng = random.Random(67)
    pieces = [b"[1, 2]", b'"float"', "é中".encode(), b"\xe2\x82", b"\xff", b"\x82", b"", b"a"]
    for trial in range(300):
        texts = [b"".join(rng.choice(pieces) for _ in range(rng.randrange(4))) for _ in range(30)]
        alone = [t.decode("utf-8", "replace") for t in texts]
        assert text_labels(texts) == alone
        triples = [b"\x01".join(rng.sample(texts, 3)) for _ in range(20)]
        if trial % 10 == 0:  # a text holding \x00 or \x01 of its own
            texts[3] += b"\x00"
            triples[5] = triples[5] + b"\x01" + texts[0]
        assert text_labels(texts) == [t.decode("utf-8", "replace") for t in texts]
        split = [t.split(b"\x01") for t in triples]
        want = [[p[i].decode("utf-8", "replace") for p in split] for i in range(3)]
        assert text_fields(triples, 3) == want


def test_categorical_keeps_the_first_of_equal_labels_in_order():
    """Codes into labels that repeat become codes into the distinct labels, first seen first."""
    from perfkit_torch.kineto_strings import categorical

    labels = ["b", "a", "b", "c", "a"]
    codes = np.array([4, 0, 2, 3, 1, 1])
    got = categorical(codes, labels)
    assert list(got.categories) == ["b", "a", "c"]
    assert list(got.astype(str)) == [labels[c] for c in codes]
    assert got.codes.dtype == np.int8


def test_args_read_the_same_in_any_key_order():
    """The args struct lists its fields in Kineto's key order (for speed); keys in another
    order, reversed here, are read to the same values."""
    import msgspec

    from perfkit_torch.kineto_format import _Args

    names = _Args.__struct_encode_fields__
    values = {
        "External id": 7,
        "Sequence number": 3,
        "Concrete Inputs": ["", "2"],
        "Input type": ["float", "Scalar"],
        "Input Dims": [[2, 3], []],
        "Call stack": "a.py(1): f;b.py(2): g",
        "flops": 12.0,
        "device": 0,
        "stream": 7,
        "correlation": 99,
        "bytes": 64,
        "registers per thread": 32,
        "shared memory": 0,
        "grid": [64, 1, 1],
        "block": [128, 1, 1],
        "est. achieved occupancy %": 50,
        "external id": 8,
        "Total Reserved": 4096,
        "Total Allocated": 2048,
        "Bytes": 512,
        "Device Id": 0,
        "Device Type": 1,
        "Addr": 2**63 + 5,
        "name": "main",
    }
    assert set(values) == set(names)
    forward = msgspec.json.decode(json.dumps({k: values[k] for k in names}), type=_Args)
    backward = msgspec.json.decode(json.dumps({k: values[k] for k in reversed(names)}), type=_Args)
    assert backward == forward
    assert forward.sequence == 3 and forward.mem_addr == 2**63 + 5 and forward.meta_name == "main"
    assert bytes(forward.input_dims) == b"[[2, 3], []]"
