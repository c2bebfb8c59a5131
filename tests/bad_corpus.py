"""A corpus of bad inputs, written on demand (nothing large is checked in).

Every case is one file or folder that perfkit must refuse with one line naming it and saying
what is wrong (``TraceError``; exit 2 from every CLI command), and a few good variants that must
load (a UTF-8 byte-order mark, a bare list of events, concatenated gzip members).

Write the corpus to a folder (one file or folder per case, named after it) with
``python tests/bad_corpus.py DIR``; tests build it in a temporary folder with ``write_corpus``.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIG = 2**63  # one past int64
TORCH: dict[str, Any] = {
    "schemaVersion": 1,
    "deviceProperties": [
        {
            "id": 0,
            "name": "Fake GPU",
            "totalGlobalMem": 1 << 34,
            "computeMajor": 8,
            "computeMinor": 0,
        }
    ],
    "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
    "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    "traceEvents": [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#3",
            "pid": 7,
            "tid": 7,
            "ts": 100.0,
            "dur": 100.0,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 7,
            "tid": 7,
            "ts": 110.0,
            "dur": 30.0,
            "args": {"External id": 5, "Sequence number": 2, "Input Dims": [[4, 4], [4, 4]]},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 7,
            "tid": 7,
            "ts": 120.0,
            "dur": 5.0,
            "args": {"External id": 5, "correlation": 9},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 130.0,
            "dur": 20.0,
            "args": {"device": 0, "stream": 7, "correlation": 9, "External id": 5},
        },
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 7, "tid": 7, "ts": 110.0},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "python"}},
    ],
}
PADDLE: dict[str, Any] = {
    "schemaVersion": "1.0.2",
    "deviceProperties": [],
    "ExtraInfo": {"7": "python", "Process Cpu Utilization": "0.5"},
    "traceEvents": [
        {
            "name": "ProfileStep#1[0.100 ms]",
            "cat": "ProfileStep",
            "ph": "X",
            "pid": 7,
            "tid": "7(Python)",
            "ts": 100,
            "dur": 100.0,
            "args": {"start_time": "0.000 us", "end_time": "100.000 us"},
        },
        {
            "name": "matmul dygraph[0.030 ms]",
            "cat": "Operator",
            "ph": "X",
            "pid": 7,
            "tid": "7(Python)",
            "ts": 110,
            "dur": 30.0,
            "args": {"start_time": "10.000 us", "end_time": "40.000 us", "correlation id": 3},
        },
        {},
    ],
}


@dataclass(frozen=True)
class Case:
    """One input: its name (also its file name), what writes it, and a word the error must hold
    (None for a good variant that must load)."""

    name: str
    write: Callable[[Path], Path]
    reason: str | None
    #: A job with ranks that load: ``report`` and ``advise`` report those and name the bad rank
    #: in one line, exit 2 (``load()``, ``export`` and ``compare`` refuse it whole).
    partial: bool = False


def _json_file(
    name: str, base: dict[str, Any], change: Callable[[dict[str, Any]], Any]
) -> Callable[[Path], Path]:
    def write(directory: Path) -> Path:
        doc = copy.deepcopy(base)
        change(doc)
        path = directory / name
        path.write_text(json.dumps(doc))
        return path

    return write


def _bytes_file(name: str, data: Callable[[], bytes]) -> Callable[[Path], Path]:
    def write(directory: Path) -> Path:
        path = directory / name
        path.write_bytes(data())
        return path

    return write


def _torch_event(
    i: int, key: str, value: Any, *, in_args: bool = False
) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        event = doc["traceEvents"][i]
        (event.setdefault("args", {}) if in_args else event)[key] = value

    return change


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc[key] = value

    return change


def _torch_bytes() -> bytes:
    return json.dumps(TORCH).encode()


def _replace_name(base: dict[str, Any], raw: bytes) -> bytes:
    return (
        json.dumps(base).encode().replace(b"aten::mm" if base is TORCH else b"matmul dygraph", raw)
    )


def _deep(doc: dict[str, Any]) -> None:
    doc["otherData"] = "DEEP"


def _deep_bytes() -> bytes:
    doc = copy.deepcopy(TORCH)
    _deep(doc)
    return json.dumps(doc).encode().replace(b'"DEEP"', b"[" * 100_000 + b"]" * 100_000)


def _saved_run(
    name: str,
    change: Callable[[dict[str, Any]], Any] | None,
    *,
    events: bytes | None = None,
    meta_bytes: bytes | None = None,
    meta_folder: bool = False,
) -> Callable[[Path], Path]:
    """A folder saved by ``Run.save`` from the torch base trace, its meta.json then changed
    (replaced by ``meta_bytes``: removed when empty; made a folder with ``meta_folder``)."""

    def write(directory: Path) -> Path:
        import perfkit_core

        source = directory / f".{name}.source.json"
        source.write_text(json.dumps(TORCH))
        run_dir = perfkit_core.load(source).save(directory / name)
        source.unlink()
        if change is not None:
            meta_path = run_dir / "meta.json"
            meta = json.loads(meta_path.read_text())
            replaced = change(meta)
            meta_path.write_text(json.dumps(meta if replaced is None else replaced))
        if events is not None:
            (run_dir / "events.parquet").write_bytes(events)
        if meta_bytes is not None:
            (run_dir / "meta.json").unlink()
            if meta_bytes:
                (run_dir / "meta.json").write_bytes(meta_bytes)
        if meta_folder:
            (run_dir / "meta.json").unlink()
            (run_dir / "meta.json").mkdir()
        return run_dir

    return write


def _symlink(name: str, target: str | None) -> Callable[[Path], Path]:
    def write(directory: Path) -> Path:
        path = directory / name
        os.symlink(target if target is not None else name, path)
        return path

    return write


def _folder(name: str, fill: Callable[[Path], None]) -> Callable[[Path], Path]:
    def write(directory: Path) -> Path:
        path = directory / name
        path.mkdir()
        fill(path)
        return path

    return write


def _none(path: Path) -> None:
    return None


#: The smallest PNG image: a 1x1 pixel.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _zip_bytes() -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("trace.json", "{}")
    return buffer.getvalue()


def _sqlite_bytes() -> bytes:
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "db.sqlite"
        connection = sqlite3.connect(db)
        connection.execute("create table t (x)")
        connection.commit()
        connection.close()
        return db.read_bytes()


def _meta_key(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(meta: dict[str, Any]) -> None:
        meta[key] = value

    return change


def _first_device(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(meta: dict[str, Any]) -> None:
        meta["devices"][0][key] = value

    return change


def _paddle_event(
    i: int, key: str, value: Any, *, in_args: bool = False
) -> Callable[[dict[str, Any]], None]:
    return _torch_event(i, key, value, in_args=in_args)


def _pb_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pb(number: int, payload: bytes | int) -> bytes:
    """A protobuf field: a varint for an int, length-delimited bytes otherwise."""
    if isinstance(payload, int):
        return _pb_varint(number << 3) + _pb_varint(payload)
    return _pb_varint(number << 3 | 2) + _pb_varint(len(payload)) + payload


def _xspace(
    *, step_stat: bytes = _pb(4, 3), op_extra: bytes = b"", line_extra: bytes = b""
) -> bytes:
    """A small XLA profile (XSpace): one host thread with a step (``step_num`` given by
    ``step_stat``, the value field of its stat) and an op inside it."""
    stat_names = {1: b"step_num", 2: b"correlation_id"}
    plane = _pb(1, 1) + _pb(2, b"/host:CPU")
    for key, name in stat_names.items():
        plane += _pb(5, _pb(1, key) + _pb(2, _pb(1, key) + _pb(2, name)))
    for key, name in ((1, b"train"), (2, b"dot.1")):
        plane += _pb(4, _pb(1, key) + _pb(2, _pb(1, key) + _pb(2, name)))
    step = _pb(1, 1) + _pb(2, 1_000_000) + _pb(3, 5_000_000) + _pb(4, _pb(1, 1) + step_stat)
    op = _pb(1, 2) + _pb(2, 2_000_000) + _pb(3, 1_000_000) + op_extra
    line = _pb(1, 7) + _pb(2, b"python") + _pb(3, 10) + _pb(4, step) + _pb(4, op) + line_extra
    return _pb(1, plane + _pb(3, line))


def _cases() -> list[Case]:
    t = "t_"  # torch cases
    cases = [
        # integers that do not fit the int64 (or int32) columns
        Case(
            t + "pid_2e63.json",
            _json_file(t + "pid_2e63.json", TORCH, _torch_event(1, "pid", BIG)),
            "out of range",
        ),
        Case(
            t + "tid_2e64.json",
            _json_file(t + "tid_2e64.json", TORCH, _torch_event(1, "tid", 2**64)),
            "out of range",
        ),
        Case(
            t + "pid_string_huge.json",
            _json_file(t + "pid_string_huge.json", TORCH, _torch_event(1, "pid", "9" * 25)),
            "out of range",
        ),
        Case(
            t + "ts_int_2e70.json",
            _json_file(t + "ts_int_2e70.json", TORCH, _torch_event(1, "ts", 2**70)),
            "out of range",
        ),
        Case(
            t + "ts_1e300.json",
            _json_file(t + "ts_1e300.json", TORCH, _torch_event(1, "ts", 1e300)),
            "out of range",
        ),
        Case(
            t + "ts_minus_1e300.json",
            _json_file(t + "ts_minus_1e300.json", TORCH, _torch_event(1, "ts", -1e300)),
            "out of range",
        ),
        Case(
            t + "dur_2e70.json",
            _json_file(t + "dur_2e70.json", TORCH, _torch_event(1, "dur", 2**70)),
            "out of range",
        ),
        Case(
            t + "dur_minus_1e308.json",
            _json_file(t + "dur_minus_1e308.json", TORCH, _torch_event(1, "dur", -1e308)),
            "out of range",
        ),
        Case(
            t + "ts_1e400.json",
            _bytes_file(
                t + "ts_1e400.json", lambda: _torch_bytes().replace(b'"ts": 110.0', b'"ts": 1e400')
            ),
            "out of range",
        ),
        Case(
            t + "external_id_2e63.json",
            _json_file(
                t + "external_id_2e63.json",
                TORCH,
                _torch_event(1, "External id", BIG, in_args=True),
            ),
            "External id",
        ),
        Case(
            t + "correlation_minus_2e63.json",
            _json_file(
                t + "correlation_minus_2e63.json",
                TORCH,
                _torch_event(2, "correlation", -BIG - 1, in_args=True),
            ),
            "correlation",
        ),
        Case(
            t + "sequence_1e30.json",
            _json_file(
                t + "sequence_1e30.json",
                TORCH,
                _torch_event(1, "Sequence number", 10**30, in_args=True),
            ),
            "Sequence number",
        ),
        Case(
            t + "stream_2e64.json",
            _json_file(
                t + "stream_2e64.json", TORCH, _torch_event(3, "stream", 2**64, in_args=True)
            ),
            "stream",
        ),
        Case(
            t + "device_2e40.json",
            _json_file(
                t + "device_2e40.json", TORCH, _torch_event(3, "device", 2**40, in_args=True)
            ),
            "device index",
        ),
        Case(
            t + "step_number_huge.json",
            _json_file(
                t + "step_number_huge.json",
                TORCH,
                _torch_event(0, "name", "ProfilerStep#99999999999999999999999"),
            ),
            "step number",
        ),
        Case(
            t + "base_time_2e64.json",
            _json_file(t + "base_time_2e64.json", TORCH, _set("baseTimeNanoseconds", 2**64)),
            "baseTimeNanoseconds",
        ),
        Case(
            t + "base_time_2e63_minus_1.json",
            _json_file(
                t + "base_time_2e63_minus_1.json", TORCH, _set("baseTimeNanoseconds", BIG - 1)
            ),
            "time origin",
        ),
        Case(
            t + "rank_2e31.json",
            _json_file(
                t + "rank_2e31.json",
                TORCH,
                _set("distributedInfo", {"rank": 2**31, "world_size": 2}),
            ),
            "distributedInfo.rank",
        ),
        Case(
            t + "rank_text.json",
            _json_file(
                t + "rank_text.json",
                TORCH,
                _set("distributedInfo", {"rank": "first", "world_size": 2}),
            ),
            "distributedInfo.rank",
        ),
        Case(
            t + "world_2e40.json",
            _json_file(
                t + "world_2e40.json",
                TORCH,
                _set("distributedInfo", {"rank": 0, "world_size": 2**40}),
            ),
            "world_size",
        ),
        Case(
            t + "flow_ts_1e300.json",
            _json_file(t + "flow_ts_1e300.json", TORCH, _torch_event(4, "ts", 1e300)),
            "out of range",
        ),
        Case(
            t + "device_id_object.json",
            _json_file(
                t + "device_id_object.json", TORCH, lambda d: d["deviceProperties"][0].update(id={})
            ),
            "deviceProperties[0].id",
        ),
        Case(
            t + "device_memory_text.json",
            _json_file(
                t + "device_memory_text.json",
                TORCH,
                lambda d: d["deviceProperties"][0].update(totalGlobalMem="lots"),
            ),
            "totalGlobalMem",
        ),
        # text and structure
        Case(
            t + "name_not_utf8.json",
            _bytes_file(
                t + "name_not_utf8.json", lambda: _replace_name(TORCH, b"aten::\xff\xfemm")
            ),
            "not UTF-8",
        ),
        Case(
            t + "deep_nesting.json",
            _bytes_file(t + "deep_nesting.json", _deep_bytes),
            "nested too deeply",
        ),
        Case(
            t + "ts_text.json",
            _json_file(t + "ts_text.json", TORCH, _torch_event(1, "ts", "soon")),
            "not a Kineto trace",
        ),
        Case(
            t + "events_object.json",
            _json_file(t + "events_object.json", TORCH, _set("traceEvents", {"a": 1})),
            "not a Kineto trace",
        ),
        Case(
            t + "only_metadata.json",
            _json_file(
                t + "only_metadata.json",
                TORCH,
                lambda d: d.update(traceEvents=d["traceEvents"][4:]),
            ),
            "no events",
        ),
        Case(
            t + "truncated.json",
            _bytes_file(t + "truncated.json", lambda: _torch_bytes()[:-30]),
            "truncated",
        ),
        Case(
            t + "gzip_trailing.json.gz",
            _bytes_file(
                t + "gzip_trailing.json.gz",
                lambda: gzip.compress(_torch_bytes()) + b"junk after the end",
            ),
            "not gzip data",
        ),
        Case(
            t + "gzip_cut.json.gz",
            _bytes_file(t + "gzip_cut.json.gz", lambda: gzip.compress(_torch_bytes())[:-20]),
            "gzip",
        ),
        Case(t + "empty.json", _bytes_file(t + "empty.json", lambda: b""), "empty"),
        Case(
            "name\nwith newline.json",
            _bytes_file("name\nwith newline.json", lambda: b'{"traceEvents": [{"ph": "X"}, }'),
            "malformed JSON",
        ),
        Case(
            "name\x1b[31mred.json",
            _bytes_file("name\x1b[31mred.json", lambda: b'{"traceEvents": [{"ph": "X"}, }'),
            "malformed JSON",
        ),
        # paddle exports
        Case(
            "p_start_time.paddle_trace.json",
            _json_file(
                "p_start_time.paddle_trace.json",
                PADDLE,
                _paddle_event(1, "start_time", "1.2.3 us", in_args=True),
            ),
            "start_time",
        ),
        Case(
            "p_start_time_huge.paddle_trace.json",
            _json_file(
                "p_start_time_huge.paddle_trace.json",
                PADDLE,
                _paddle_event(1, "start_time", "1e300 us", in_args=True),
            ),
            "start_time",
        ),
        Case(
            "p_ts_1e23.paddle_trace.json",
            _json_file("p_ts_1e23.paddle_trace.json", PADDLE, _paddle_event(1, "ts", 1e23)),
            "out of range",
        ),
        Case(
            "p_dur_minus_1e308.paddle_trace.json",
            _json_file(
                "p_dur_minus_1e308.paddle_trace.json", PADDLE, _paddle_event(1, "dur", -1e308)
            ),
            "out of range",
        ),
        Case(
            "p_tid_huge.paddle_trace.json",
            _json_file(
                "p_tid_huge.paddle_trace.json",
                PADDLE,
                _paddle_event(1, "tid", "9" * 25 + "(Python)"),
            ),
            "tid",
        ),
        Case(
            "p_pid_2e63.paddle_trace.json",
            _json_file("p_pid_2e63.paddle_trace.json", PADDLE, _paddle_event(1, "pid", BIG)),
            "out of range",
        ),
        Case(
            "p_correlation_2e64.paddle_trace.json",
            _json_file(
                "p_correlation_2e64.paddle_trace.json",
                PADDLE,
                _paddle_event(1, "correlation id", 2**64, in_args=True),
            ),
            "correlation id",
        ),
        Case(
            "p_name_not_utf8.paddle_trace.json",
            _bytes_file(
                "p_name_not_utf8.paddle_trace.json",
                lambda: _replace_name(PADDLE, b"matmul \xc3\x28"),
            ),
            "not UTF-8",
        ),
        Case(
            "p_garbage.paddle_trace.pb",
            _bytes_file("p_garbage.paddle_trace.pb", lambda: b"garbage\x00\x01 not protobuf"),
            "paddle",
        ),
        # XLA profiles (TensorFlow and JAX, *.xplane.pb)
        Case(
            "x_garbage.xplane.pb",
            _bytes_file("x_garbage.xplane.pb", lambda: b"garbage\x00\x01 not protobuf"),
            "not an XSpace protobuf",
        ),
        Case("x_empty.xplane.pb", _bytes_file("x_empty.xplane.pb", lambda: b""), "empty"),
        Case(
            "x_cut.xplane.pb",
            _bytes_file("x_cut.xplane.pb", lambda: _xspace()[:-7]),
            "not an XSpace protobuf",
        ),
        Case(
            "x_no_events.xplane.pb",
            _bytes_file("x_no_events.xplane.pb", lambda: _pb(1, _pb(2, b"/host:CPU"))),
            "no timed events",
        ),
        Case(
            "x_offset_2e63.xplane.pb",
            _bytes_file("x_offset_2e63.xplane.pb", lambda: _xspace(op_extra=_pb(2, BIG - 1))),
            "offset_ps",
        ),
        Case(
            "x_timestamp_2e63.xplane.pb",
            _bytes_file("x_timestamp_2e63.xplane.pb", lambda: _xspace(line_extra=_pb(3, BIG - 1))),
            "timestamp",
        ),
        Case(
            "x_correlation_2e64.xplane.pb",
            _bytes_file(
                "x_correlation_2e64.xplane.pb",
                lambda: _xspace(op_extra=_pb(4, _pb(1, 2) + _pb(3, 2**64 - 1))),
            ),
            "correlation_id",
        ),
        Case(
            "x_step_num_inf.xplane.pb",
            _bytes_file(
                "x_step_num_inf.xplane.pb",
                lambda: _xspace(step_stat=_pb_varint(2 << 3 | 1) + struct.pack("<d", math.inf)),
            ),
            "step_num",
        ),
        Case(
            "x_stat_cut.xplane.pb",
            _bytes_file(
                "x_stat_cut.xplane.pb", lambda: _xspace(op_extra=_pb(4, _pb(1, 2) + b"\x18"))
            ),
            "not an XSpace protobuf",
        ),
        # saved runs with odd metadata or tables
        Case("run_devices_5", _saved_run("run_devices_5", _meta_key("devices", 5)), "devices"),
        Case(
            "run_device_index_object",
            _saved_run("run_device_index_object", _first_device("index", {})),
            "devices[0].index",
        ),
        Case(
            "run_device_memory_text",
            _saved_run("run_device_memory_text", _first_device("total_memory_bytes", "16 GB")),
            "total_memory_bytes",
        ),
        Case("run_rank_negative", _saved_run("run_rank_negative", _meta_key("rank", -1)), "rank"),
        Case("run_ranks_huge", _saved_run("run_ranks_huge", _meta_key("ranks", [2**40])), "ranks"),
        Case(
            "run_world_zero", _saved_run("run_world_zero", _meta_key("world_size", 0)), "world_size"
        ),
        Case("run_span_text", _saved_run("run_span_text", _meta_key("span_ns", "long")), "span_ns"),
        Case(
            "run_span_huge",
            _saved_run("run_span_huge", _meta_key("span_ns", [0, 2**70])),
            "span_ns",
        ),
        Case("run_steps_text", _saved_run("run_steps_text", _meta_key("steps", ["a"])), "steps"),
        Case(
            "run_cpu_text",
            _saved_run(
                "run_cpu_text",
                _meta_key("extra", {"cpu_utilization": {"process_cpu_utilization": "high"}}),
            ),
            "cpu_utilization",
        ),
        Case(
            "run_threads_list",
            _saved_run("run_threads_list", _meta_key("threads", [1, 2])),
            "threads",
        ),
        Case(
            "run_meta_list", _saved_run("run_meta_list", lambda meta: [meta]), "not a JSON object"
        ),
        Case(
            "run_schema_9", _saved_run("run_schema_9", _meta_key("schema_version", "9.0")), "schema"
        ),
        Case(
            "run_events_garbage",
            _saved_run("run_events_garbage", None, events=b"not parquet"),
            "unreadable event table",
        ),
        # paths
        Case("missing.json", lambda d: d / "missing.json", "no such file"),
        Case(
            "broken_link.json", _symlink("broken_link.json", "nowhere.json"), "broken symbolic link"
        ),
        Case("looping_link.json", _symlink("looping_link.json", None), "symbolic link loop"),
        Case(
            "under_a_file.json",
            lambda d: _bytes_file("a_file", lambda: b"x")(d) / "trace.json",
            "a part of the path is a file",
        ),
        Case(
            "empty_folder",
            _folder("empty_folder", lambda p: None),
            "no profiler trace in this folder",
        ),
        Case(
            "folder_with_bad_rank",
            _folder(
                "folder_with_bad_rank",
                lambda p: (
                    _json_file("r0.json", TORCH, lambda d: None)(p),
                    _bytes_file("r1.json", lambda: b'{"traceEvents": [{"ph": "X"}, }')(p),
                ),
            ),
            "malformed JSON",
            partial=True,
        ),
        Case(
            "folder_with_empty_rank",
            _folder(
                "folder_with_empty_rank",
                lambda p: (
                    _json_file("r0.json", TORCH, lambda d: None)(p),
                    _bytes_file("r1.json", lambda: b"")(p),
                ),
            ),
            "the file is empty",
            partial=True,
        ),
        # files and folders that are no trace: said what they are (not "install an adapter")
        Case("image.png", _bytes_file("image.png", lambda: PNG), "a PNG image, not a profiler"),
        Case(
            "image.json.gz",
            _bytes_file("image.json.gz", lambda: gzip.compress(PNG)),
            "gzip of a PNG image, not a profiler",
        ),
        Case("archive.zip", _bytes_file("archive.zip", _zip_bytes), "a zip archive, not a"),
        Case("db.sqlite", _bytes_file("db.sqlite", _sqlite_bytes), "an SQLite database, not a"),
        Case(
            "only_brace.json",
            _bytes_file("only_brace.json", lambda: b"{"),
            "JSON cut short after 1 byte",
        ),
        Case(
            "unrelated_folder",
            _folder(
                "unrelated_folder",
                lambda p: (
                    _bytes_file("notes.txt", lambda: b"lr 0.1\n")(p),
                    _bytes_file("plot.png", lambda: PNG)(p),
                ),
            ),
            "no profiler trace in this folder (looked for *.json, *.json.gz, *.pb files, a "
            "saved run's meta.json and a log folder an installed adapter reads); it holds 2 "
            "files: notes.txt, text starting 'lr 0.1'; plot.png, a PNG image",
        ),
        Case(
            "folder_of_json_configs",
            _folder(
                "folder_of_json_configs",
                lambda p: (
                    _bytes_file("config.json", lambda: b'{"lr": 0.1, "batch": 32}')(p),
                    _bytes_file("data.json", lambda: b"[1, 2, 3]")(p),
                ),
            ),
            "it holds 2 files: config.json, a JSON object with keys lr, batch; data.json, a "
            "JSON list",
        ),
        Case(
            "folder_of_runs_and_a_kept_trace",
            _folder(
                "folder_of_runs_and_a_kept_trace",
                lambda p: (
                    _saved_run("w.step1", None)(p),
                    _bytes_file("trace.pt.trace.json", _torch_bytes)(_folder("w.step2", _none)(p)),
                ),
            ),
            "a folder of 2 saved runs (w.step1, w.step2 (its native trace only)): give one",
        ),
        Case(
            "run_meta_is_a_folder",
            _saved_run("run_meta_is_a_folder", None, meta_folder=True),
            "meta.json: is a folder, not the run metadata file",
        ),
        Case(
            "run_meta_only_brace",
            _saved_run("run_meta_only_brace", lambda meta: None, meta_bytes=b"{"),
            "the run metadata is cut short",
        ),
        Case(
            "run_events_without_meta",
            _saved_run("run_events_without_meta", None, meta_bytes=b""),
            "holds a saved run's event table but no meta.json",
        ),
    ]
    cases += _mindspore_cases()
    good = [
        Case(
            "g_bom.json", _bytes_file("g_bom.json", lambda: b"\xef\xbb\xbf" + _torch_bytes()), None
        ),
        Case(
            "g_bare_list.json",
            _bytes_file("g_bare_list.json", lambda: json.dumps(TORCH["traceEvents"]).encode()),
            None,
        ),
        Case(
            "g_two_members.json.gz",
            _bytes_file(
                "g_two_members.json.gz",
                lambda: gzip.compress(_torch_bytes()[:50]) + gzip.compress(_torch_bytes()[50:]),
            ),
            None,
        ),
        Case(
            "g_gzip_padding.json.gz",
            _bytes_file(
                "g_gzip_padding.json.gz", lambda: gzip.compress(_torch_bytes()) + b"\x00" * 64
            ),
            None,
        ),
        Case(
            "g_no_ts.json",
            _json_file("g_no_ts.json", TORCH, lambda d: d["traceEvents"][2].pop("ts")),
            None,
        ),
        Case(
            "g_padding_event.json",
            _json_file("g_padding_event.json", TORCH, lambda d: d["traceEvents"].append({})),
            None,
        ),
        Case(
            "g_paddle.paddle_trace.json",
            _json_file("g_paddle.paddle_trace.json", PADDLE, lambda d: None),
            None,
        ),
        Case(
            "g_paddle_bom.paddle_trace.json",
            _bytes_file(
                "g_paddle_bom.paddle_trace.json",
                lambda: b"\xef\xbb\xbf" + json.dumps(PADDLE).encode(),
            ),
            None,
        ),
        Case("g_xla.xplane.pb", _bytes_file("g_xla.xplane.pb", _xspace), None),
        Case("g_run", _saved_run("g_run", None), None),
        Case(
            "g_ms_no_timeline",
            _mindspore_folder(
                "g_ms_no_timeline",
                lambda p: (p / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").unlink(),
            ),
            None,
        ),
    ]
    return cases + good


#: A real MindSpore profile (MindSpore's own tensorboard_trace_handler, a PyNative MLP).
MINDSPORE_PROFILE = next(
    (Path(__file__).resolve().parent / "data" / "mindspore" / "pynative_mlp").glob("*_ascend_ms")
)
_TYPES = "FRAMEWORK/cpu_op_type_info_0.csv"
_TRACE = "ASCEND_PROFILER_OUTPUT/trace_view.json"


def _mindspore_folder(name: str, change: Callable[[Path], Any]) -> Callable[[Path], Path]:
    """A copy of ``MINDSPORE_PROFILE`` in ``<directory>/<name>/``, changed by ``change(profile)``."""

    def write(directory: Path) -> Path:
        import shutil

        folder = directory / name
        profile = folder / MINDSPORE_PROFILE.name
        shutil.copytree(MINDSPORE_PROFILE, profile)
        change(profile)
        return folder

    return write


def _edit_text(relative: str, edit: Callable[[str], str]) -> Callable[[Path], None]:
    def change(profile: Path) -> None:
        path = profile / relative
        path.write_text(edit(path.read_text()))

    return change


def _mindspore_cases() -> list[Case]:
    """MindSpore profile folders broken one way each: the timeline cut short or with a time
    that is no number, MindSpore's per-type table without a column, with a column renamed, or
    disagreeing with the timeline, perfkit's spans file garbled, two profiles in one folder."""
    import shutil

    def twice(directory: Path) -> Path:
        folder = directory / "ms_two_profiles"
        folder.mkdir()
        for stamp in ("20260101000000000", "20260101000000001"):
            shutil.copytree(MINDSPORE_PROFILE, folder / f"mlp_1_{stamp}_ascend_ms")
        return folder

    def more_calls(text: str) -> str:
        lines = text.splitlines()
        fields = lines[1].split(",")
        fields[1] = str(int(fields[1]) + 1)
        return "\n".join([lines[0], ",".join(fields), *lines[2:]]) + "\n"

    return [
        Case(
            "ms_truncated_timeline",
            _mindspore_folder(
                "ms_truncated_timeline", _edit_text(_TRACE, lambda t: t[: len(t) // 2])
            ),
            "truncated",
        ),
        Case(
            "ms_ts_not_a_number",
            _mindspore_folder(
                "ms_ts_not_a_number",
                _edit_text(_TRACE, lambda t: t.replace('"ts": "', '"ts": "x', 1)),
            ),
            "not a number",
        ),
        Case(
            "ms_csv_missing_column",
            _mindspore_folder(
                "ms_csv_missing_column",
                _edit_text(
                    _TYPES,
                    lambda t: "\n".join(
                        ",".join(f for i, f in enumerate(line.split(",")) if i != 1)
                        for line in t.splitlines()
                    ),
                ),
            ),
            "no column",
        ),
        Case(
            "ms_csv_renamed_column",
            _mindspore_folder(
                "ms_csv_renamed_column",
                _edit_text(_TYPES, lambda t: t.replace("op_type,", "operator_type,", 1)),
            ),
            "no column",
        ),
        Case(
            "ms_csv_disagrees",
            _mindspore_folder("ms_csv_disagrees", _edit_text(_TYPES, more_calls)),
            "disagrees",
        ),
        Case(
            "ms_csv_unknown_type",
            _mindspore_folder(
                "ms_csv_unknown_type",
                _edit_text(_TYPES, lambda t: t.rstrip("\n") + "\nConv3D,3,1,0.5,0.1,0.01\n"),
            ),
            "disagrees",
        ),
        Case(
            "ms_csv_ragged",
            _mindspore_folder(
                "ms_csv_ragged", _edit_text(_TYPES, lambda t: t.rstrip("\n") + "\nPow,3\n")
            ),
            "fields",
        ),
        Case(
            "ms_spans_garbled",
            _mindspore_folder(
                "ms_spans_garbled", lambda p: (p / "perfkit_spans.json").write_text("{not json")
            ),
            "not JSON",
        ),
        Case("ms_two_profiles", twice, "MindSpore profiles"),
    ]


CASES: list[Case] = _cases()
BAD: list[Case] = [c for c in CASES if c.reason is not None]
GOOD: list[Case] = [c for c in CASES if c.reason is None]


def write_corpus(directory: Path) -> dict[str, Path]:
    """Write every case into ``directory``; return the path of each case by name."""
    directory.mkdir(parents=True, exist_ok=True)
    return {case.name: case.write(directory) for case in CASES}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/bad_corpus.py DIR")
    for name, path in write_corpus(Path(sys.argv[1])).items():
        print(repr(name), "->", path)
