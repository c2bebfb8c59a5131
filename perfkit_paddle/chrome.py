"""Read Paddle's chrome-tracing export, ``*.paddle_trace.json`` (``perfkit_paddle.pb`` reads the
protobuf one).

The JSON layout is Paddle's ``ChromeTracingLogger``: names carry a ``[<duration> ms]`` suffix,
host thread ids look like ``123(Python)`` or ``123(C++)``, ``cat`` is the TracerEventType name,
device events use the device id as ``pid`` and the stream as ``tid``, launches are linked to
kernels by ``correlation id`` (and ``s``/``f`` flow events carrying the same id), and the event
list ends with an empty ``{}``. ``ts`` is whole microseconds; each host event also carries its
start and end relative to the profiler's start with nanosecond precision (``start_time``,
``end_time``). The profiler's start itself is not written; its latest lower bound over all
events (``ts * 1000 - start_time``) is used, which puts every start within a few nanoseconds
of the truth (durations are exact).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import numpy as np

from perfkit_core.events import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    TIME_LIMIT_NS,
    TraceError,
    check_times_us,
    check_values_range,
    decode_error_reason,
    devices_from_properties,
    note_skipped,
    us_to_ns,
)
from perfkit_paddle.kinds import (
    ALLOCATION_TYPES,
    DEVICE_TYPES,
    MEMORY_TYPES,
    TYPE_KINDS,
    parse_place,
)

if TYPE_CHECKING:
    from perfkit_core.events import Run

_NONE = msgspec.Raw(b"")
#: Integers the event table stores as int64: a larger one fails decoding with its JSON path.
I64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]


class _Args(msgspec.Struct, gc=False, frozen=True):
    start_time: str = ""
    end_time: str = ""
    correlation: I64 = msgspec.field(name="correlation id", default=-1)
    device: I64 = -1
    stream: I64 = -1
    nbytes: float | None = msgspec.field(name="bytes", default=None)
    registers: float | None = msgspec.field(name="registers per thread", default=None)
    shared_memory: float | None = msgspec.field(name="shared memory", default=None)
    occupancy: float | None = msgspec.field(name="theoretical achieved occupancy %", default=None)
    grid: msgspec.Raw = _NONE
    block: msgspec.Raw = _NONE
    place: str = ""
    increase_bytes: float | None = None
    addr: int | str | None = None
    current_allocated: float | None = None
    current_reserved: float | None = None
    input_shapes: msgspec.Raw = _NONE
    input_dtypes: msgspec.Raw = _NONE
    callstack: str = ""
    meta_name: str = msgspec.field(name="name", default="")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False, frozen=True):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: I64 | str | None = None
    tid: I64 | str | None = None
    ts: float = math.nan  # NaN: the event has no start time
    dur: float = 0.0
    id: I64 | str | None = None
    args: _Args = _NO_ARGS


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event] | None = None
    schemaVersion: str | int | None = None
    deviceProperties: list[dict[str, Any]] = []
    ExtraInfo: dict[str, str] = {}


_DECODER = msgspec.json.Decoder(_Trace)
_SUFFIX_RE = re.compile(r"\[[0-9.]+ ?(?:ns|us|ms|s)\]$")
_US_RE = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*us\s*$")
#: What ``_rel_ns`` returns for a ``start_time`` that is not a time in us.
_MALFORMED = -(2**63)


def _thread_id(value: int | str | None) -> int:
    """``"123(Python)"`` -> 123; ints pass; anything else -> -1 (range-checked by the caller)."""
    if type(value) is int:
        return value
    m = re.match(r"^\s*(-?\d{1,30})", str(value or ""))
    return int(m.group(1)) if m else -1


@lru_cache(maxsize=4096)
def _normalized(raw: bytes) -> str:
    """Compact JSON text of a recorded value (shapes, dtypes); "" when empty. Cached per text."""
    from perfkit_paddle.columns import compact_json

    try:
        return compact_json(msgspec.json.decode(raw)) if raw.strip() else ""
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return raw.decode("utf-8", "replace")


def _rel_ns(text: str) -> int:
    """``"12.345 us"`` -> 12345 ns; ``_MALFORMED`` for anything that is not a time in us."""
    m = _US_RE.match(text)
    if not m:
        return _MALFORMED
    value = float(m.group(1)) * 1000
    return round(value) if abs(value) <= TIME_LIMIT_NS else _MALFORMED


def load_paddle_json(path: str | Path) -> Run:
    """Return the ``Run`` in a Paddle chrome-tracing export; TraceError for bad input."""
    import gc

    from perfkit_core.events import finish_events, make_run, read_trace_bytes
    from perfkit_paddle.columns import Columns, columns_to_events, extra_info_meta

    path = Path(path)
    data = read_trace_bytes(path)
    if not data or data.isspace():
        raise TraceError(path, "the file is empty")
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            trace = _DECODER.decode(data)
        except msgspec.ValidationError as exc:
            raise TraceError(path, decode_error_reason(exc, data, "not a Paddle trace")) from None
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise TraceError(path, decode_error_reason(exc, data, "malformed JSON")) from None
        if trace.traceEvents is None:
            raise TraceError(path, "a JSON object without 'traceEvents': not a chrome trace")
        cols = Columns()
        rel_start: list[int] = []
        ts_us: list[float] = []
        dur_us: list[float] = []
        where: list[int] = []  # position in traceEvents of each row, for messages
        n_flows = n_meta = n_empty = n_no_ts = 0
        for index, e in enumerate(trace.traceEvents):
            ph = e.ph
            if ph in ("s", "f", "t"):
                n_flows += 1
                continue
            if ph == "M":
                n_meta += 1
                continue
            if not ph:
                n_empty += 1  # the "{}" Paddle writes after the last event
                continue
            if e.ts != e.ts:
                n_no_ts += 1  # no start time: cannot be placed (time 0 would mean 1970)
                continue
            ts_us.append(e.ts)
            dur_us.append(e.dur)
            where.append(index)
            _add_event(cols, e, rel_start)
        n = len(cols)
        if n == 0:
            raise TraceError(path, "the trace holds no events")
        known = set(TYPE_KINDS) | MEMORY_TYPES
        if not known.intersection(cols.type):
            found = ", ".join(sorted(set(cols.type))[:5])
            raise TraceError(
                path, f"not a Paddle trace: no event has a Paddle event type (categories: {found})"
            )
        if "ProfileStep" not in cols.type:
            raise TraceError(
                path,
                "no ProfileStep events: the profiler recorded no step (call prof.step() in the training loop)",
            )

        def describe(i: int) -> str:
            return f"traceEvents[{where[i]}] ({cols.name[i]!r})"

        _check_columns(path, cols, describe)
        ts_arr = np.asarray(ts_us, dtype=np.float64)
        dur_arr = np.asarray(dur_us, dtype=np.float64)
        check_times_us(path, ts_arr, dur_arr, describe=describe)
        start = us_to_ns(ts_arr)
        dur_ns = us_to_ns(dur_arr)
        rel = np.asarray(rel_start, dtype=np.int64)
        malformed = np.flatnonzero(rel == _MALFORMED)
        if len(malformed):
            i = int(malformed[0])
            text = trace.traceEvents[where[i]].args.start_time
            raise TraceError(path, f"{describe(i)}: start_time {text!r} is not a time in us")
        has_rel = rel >= 0
        if has_rel.any():
            # ts is whole microseconds (floor); start_time is ns-exact but relative to the
            # profiler's start. That start is the latest lower bound ts*1000 - relative.
            origin = int((start[has_rel] - rel[has_rel]).max())
            start = np.where(has_rel, origin + rel, start)
        cols.start = start.tolist()
        cols.end = (start + dur_ns).tolist()
        events = finish_events(columns_to_events(cols), n)
    finally:
        if was_enabled:
            gc.enable()
    info = extra_info_meta(trace.ExtraInfo)
    meta = {
        "framework": "paddle",
        "framework_version": None,
        "host": None,
        "devices": devices_from_properties(trace.deviceProperties, path),
        "rank": 0,
        "rank_recorded": False,
        "world_size": 1,
        "source": str(path),
        "accounting": {
            "events_in_file": len(trace.traceEvents),
            "rows": n,
            "flow_events": n_flows,
            "metadata_events": n_meta,
            "empty_events": n_empty,
        },
        "threads": info["threads"],
        "extra": {
            "cpu_utilization": info["cpu_utilization"],
            "schema_version": trace.schemaVersion,
        },
    }
    note_skipped(path, meta["accounting"], {"without a start time (ts)": n_no_ts})
    return make_run(events, meta)


def _check_columns(path: Path, cols: Any, describe: Any) -> None:
    """Every id fits its column: pid, tid, stream, correlation int64, device index int32."""
    for what, values, low, high in (
        ("pid", cols.pid, INT64_MIN, INT64_MAX),
        ("tid", cols.tid, INT64_MIN, INT64_MAX),
        ("device index", cols.device_index, -INT32_MAX - 1, INT32_MAX),
    ):
        try:
            array = np.asarray(values, dtype=np.int64)
        except OverflowError:
            i = next(i for i, v in enumerate(values) if not INT64_MIN <= v <= INT64_MAX)
            raise TraceError(path, f"{describe(i)}: {what} {values[i]} is out of range") from None
        check_values_range(path, array, what, low=low, high=high, describe=describe)


def _add_event(c: Any, e: _Event, rel_start: list[int]) -> None:
    a = e.args
    cat = e.cat
    name = _SUFFIX_RE.sub("", e.name)
    c.type.append(cat)
    c.name.append(name)
    # Start and end times are filled in by the caller, from ts, dur and start_time.
    nan = float("nan")
    if cat in DEVICE_TYPES:
        rel_start.append(_rel_ns(a.start_time) if a.start_time else -1)
        c.pid.append(-1)
        c.tid.append(-1)
        c.stream.append(a.stream if a.stream >= 0 else _thread_id(e.tid))
        c.device_index.append(a.device if a.device >= 0 else _thread_id(e.pid))
        c.device_type.append("gpu")
        c.correlation.append(a.correlation)
        c.nbytes.append(a.nbytes if a.nbytes is not None else nan)
        c.allocated.append(nan)
        c.reserved.append(nan)
        is_kernel = cat == "Kernel"
        c.grid.append(_dims(a.grid) if is_kernel else "")
        c.block.append(_dims(a.block) if is_kernel else "")
        c.registers.append(a.registers if is_kernel and a.registers is not None else nan)
        c.shared_memory.append(
            a.shared_memory if is_kernel and a.shared_memory is not None else nan
        )
        c.occupancy.append(a.occupancy if is_kernel and a.occupancy is not None else nan)
        c.shapes.append("")
        c.dtypes.append("")
        c.stack.append("")
        return
    c.pid.append(_thread_id(e.pid))
    c.tid.append(_thread_id(e.tid))
    c.stream.append(-1)
    c.correlation.append(a.correlation)
    c.grid.append("")
    c.block.append("")
    c.registers.append(nan)
    c.shared_memory.append(nan)
    c.occupancy.append(nan)
    if cat in MEMORY_TYPES:
        rel_start.append(-1)
        device_type, device_index = parse_place(a.place)
        c.device_type.append(device_type)
        c.device_index.append(device_index)
        # Reserved-pool events change only the allocator's totals: no bytes allocated or freed.
        counted = a.increase_bytes is not None and cat in ALLOCATION_TYPES
        c.nbytes.append(a.increase_bytes if counted else nan)
        if a.addr is not None:
            c.address_rows.append(len(c.name) - 1)
            c.address.append(a.addr)
        c.allocated.append(a.current_allocated if a.current_allocated is not None else nan)
        c.reserved.append(a.current_reserved if a.current_reserved is not None else nan)
        c.shapes.append("")
        c.dtypes.append("")
        c.stack.append("")
        return
    rel_start.append(_rel_ns(a.start_time) if a.start_time else -1)
    c.device_type.append("cpu")
    c.device_index.append(-1)
    c.nbytes.append(nan)
    c.allocated.append(nan)
    c.reserved.append(nan)
    c.shapes.append(_normalized(bytes(a.input_shapes)))
    c.dtypes.append(_normalized(bytes(a.input_dtypes)))
    c.stack.append(a.callstack)


def _dims(raw: msgspec.Raw) -> str:
    return bytes(raw).decode("utf-8", "replace").strip("[]").replace(" ", "")
