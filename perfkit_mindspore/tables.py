"""MindSpore's own text files: the per-type and per-operator csv tables, the per-call timestamp
and shape files. Each reader checks what it reads and raises ``TraceError`` naming the file,
the line and what is wrong.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from perfkit_core import TraceError
from perfkit_core.events import INT64_MAX, TIME_LIMIT_NS

#: Columns of ``cpu_op_type_info_<dev>.csv`` perfkit reads (MindSpore's CPU data saver).
CPU_TYPE_COLUMNS = (
    "op_type",
    "type_occurrences",
    "execution_frequency(per-step)",
    "total_compute_time",
)
#: Columns of ``gpu_op_type_info_<dev>.csv``.
GPU_TYPE_COLUMNS = ("op_type", "type_occurrences", "total_time(us)")
#: Columns of ``cpu_op_detail_info_<dev>.csv``.
CPU_DETAIL_COLUMNS = ("op_side", "op_type", "full_op_name", "op_occurrences", "op_total_time(ms)")
#: Columns of ``gpu_op_detail_info_<dev>.csv``.
GPU_DETAIL_COLUMNS = ("op_side", "op_type", "op_full_name", "op_occurrences", "op_total_time(us)")
#: Columns of ``gpu_activity_data_<dev>.csv``: a kernel and the operator that launched it.
ACTIVITY_COLUMNS = ("name", "op_full_name", "stream_id", "occurrences", "total_duration(us)")


def read_text(path: Path) -> str:
    """The file's text; ``TraceError`` when it cannot be read or is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(
            path, f"text that is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from None


def read_csv(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a csv table as dicts keyed by its header; ``TraceError`` naming the file when
    a ``required`` column is missing or a row has another number of fields than the header."""
    text = read_text(path)
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:  # a stray carriage return or NUL byte in a field
        raise TraceError(path, f"is not a csv table ({exc})") from None
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise TraceError(path, "is empty: a MindSpore table starts with a header line")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(
            path,
            f"has no column {', '.join(repr(c) for c in missing)} (its header is "
            f"{','.join(header)[:200]}): not a MindSpore profiler table this perfkit reads",
        )
    out = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise TraceError(
                path, f"line {line} has {len(row)} fields, the header has {len(header)}"
            )
        out.append({h: cell.strip() for h, cell in zip(header, row, strict=True)})
    return out


def number(path: Path, line: int, column: str, text: str) -> float:
    """``text`` (a cell of ``column`` on ``line``) as a finite float; ``TraceError`` otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise TraceError(path, f"line {line}: {column} {text!r} is not a number") from None
    if not math.isfinite(value) or abs(value) > TIME_LIMIT_NS:
        raise TraceError(path, f"line {line}: {column} {text!r} is out of range")
    return value


def count(path: Path, line: int, column: str, text: str) -> int:
    """``text`` as a count (a whole number, 0 or more); ``TraceError`` otherwise."""
    value = number(path, line, column, text)
    if value < 0 or value != int(value):
        raise TraceError(path, f"line {line}: {column} {text!r} is not a count")
    return int(value)


@dataclass
class TypeRow:
    """One row of MindSpore's per-type table: calls, calls per step (the CPU table only; the
    integer division MindSpore does, ``calls // steps``), total time in ns."""

    type: str
    calls: int
    per_step: int | None
    total_ns: float


def read_type_table(path: Path, gpu: bool = False) -> dict[str, TypeRow]:
    """MindSpore's per-type table (``cpu_op_type_info`` or ``gpu_op_type_info``) by type."""
    required = GPU_TYPE_COLUMNS if gpu else CPU_TYPE_COLUMNS
    out: dict[str, TypeRow] = {}
    for line, row in enumerate(read_csv(path, required), start=2):
        kind = row["op_type"]
        calls = count(path, line, "type_occurrences", row["type_occurrences"])
        if gpu:
            total = number(path, line, "total_time(us)", row["total_time(us)"]) * 1e3
            per_step = None
        else:
            total = number(path, line, "total_compute_time", row["total_compute_time"]) * 1e6
            per_step = count(
                path, line, "execution_frequency(per-step)", row["execution_frequency(per-step)"]
            )
        if kind in out:
            raise TraceError(path, f"line {line}: type {kind!r} is listed twice")
        out[kind] = TypeRow(kind, calls, per_step, total)
    return out


@dataclass
class Calls:
    """Every call of the operators in a timestamp file, in the file's order: full name, start
    (ns on the file's clock), duration (ns) and thread (-1 when the file does not say)."""

    names: list[str]
    start_ns: list[int]
    dur_ns: list[int]
    tid: list[int]


_INT_RE = re.compile(r"^-?\d+$")


def _int(path: Path, line: int, what: str, text: str) -> int:
    text = text.strip()
    if not _INT_RE.match(text):
        raise TraceError(path, f"line {line}: {what} {text!r} is not a whole number")
    value = int(text)
    limit = TIME_LIMIT_NS if what.startswith("start") else INT64_MAX
    if abs(value) > limit:
        raise TraceError(path, f"line {line}: {what} {text} is out of range")
    return value


def read_timestamps(path: Path, dur_unit_ns: float) -> Calls:
    """An ``*op_execute_timestamp_<dev>.txt`` file: one line per operator,
    ``full name;stream;start,duration[,thread] start,duration[,thread] ...`` with starts in ns
    and durations in units of ``dur_unit_ns`` (ms on the CPU: 1e6; us on the GPU: 1e3)."""
    calls = Calls([], [], [], [])
    for line, text in enumerate(read_text(path).splitlines(), start=1):
        text = text.strip()
        if not text:
            continue
        parts = text.split(";")
        if len(parts) < 3:
            raise TraceError(path, f"line {line} is not 'name;stream;start,duration ...'")
        name = parts[0]
        for item in parts[-1].split():
            fields = item.split(",")
            if len(fields) not in (2, 3):
                raise TraceError(path, f"line {line}: {item!r} is not start,duration[,thread]")
            start = _int(path, line, "start", fields[0])
            dur = number(path, line, "duration", fields[1]) * dur_unit_ns
            calls.names.append(name)
            calls.start_ns.append(start)
            calls.dur_ns.append(max(round(dur), 0))
            calls.tid.append(_int(path, line, "thread", fields[2]) if len(fields) == 3 else -1)
    return calls


def read_kernel_timestamps(path: Path) -> Calls:
    """``activity_execute_timestamp_<dev>.txt``: one line per kernel launch,
    ``kernel name;stream;start (ns);duration (us)``; the thread holds the stream."""
    calls = Calls([], [], [], [])
    for line, text in enumerate(read_text(path).splitlines(), start=1):
        if not text.strip():
            continue
        parts = text.rstrip("\n").rsplit(";", 3)
        if len(parts) != 4:
            raise TraceError(path, f"line {line} is not 'kernel;stream;start;duration'")
        calls.names.append(parts[0])
        calls.tid.append(_int(path, line, "stream", parts[1]))
        calls.start_ns.append(_int(path, line, "start", parts[2]))
        calls.dur_ns.append(max(round(number(path, line, "duration", parts[3]) * 1e3), 0))
    return calls


_SHAPE_RE = re.compile(r"^input_\d+:(.*)$")


def _shape(text: str) -> str:
    """One input's shape as perfkit writes shapes: ``[32, 64]``; ``[]`` for a scalar or no shape."""
    text = text.strip()
    return text if text.startswith("[") and text.endswith("]") else "[]"


def read_shapes(path: Path) -> list[tuple[str, str]]:
    """``cpu_framework_<dev>.txt`` / ``gpu_framework_<dev>.txt``: one line per call in execution
    order, ``type;name;graph;input_1:[32, 64];input_2:[64];...``. Returns (type, input shapes as
    ``[[32, 64], [64]]``) per line; ("", "") for a line that records no operator."""
    out: list[tuple[str, str]] = []
    for text in read_text(path).splitlines():
        if not text.strip():
            continue
        parts = text.strip().split(";")
        kind = parts[0].strip()
        shapes = [_shape(m.group(1)) for p in parts[3:] if (m := _SHAPE_RE.match(p.strip()))]
        out.append((kind, f"[{', '.join(shapes)}]" if kind else ""))
    return out


def read_start_time(path: Path) -> int:
    """``start_time_<dev>.txt`` of the GPU profiler: the offset (ns) from the host's monotonic
    clock, which host operators' starts use, to the GPU timestamps' clock."""
    values: dict[str, int] = {}
    for line, text in enumerate(read_text(path).splitlines(), start=1):
        key, sep, value = text.partition(":")
        if sep:
            values[key.strip()] = _int(path, line, "start", value)
    host = values.get("host_monotonic_raw_time(ns)")
    gpu = values.get("gpu_start_time(ns)")
    if host is None or gpu is None:
        raise TraceError(
            path, "lacks host_monotonic_raw_time(ns) or gpu_start_time(ns): cannot align clocks"
        )
    return gpu - host
