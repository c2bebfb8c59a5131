"""The pure-Python reader of XSpace profiles (``*.xplane.pb``) that perfkit-xla shipped before its
compiled decoder, kept as it was: the decoder of the wire format, the HLO proto reader and the
mapping onto the event table. tests/test_xla.py checks that ``perfkit_xla.load_xplane`` gives
the same run as ``load_xplane`` here (every column, every row, the metadata).

Not a part of the product; do not edit it to follow the product: it is the reference.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import TIME_LIMIT_NS, TraceError, check_values_range, note_skipped
from perfkit_xla.kinds import CATEGORY_KINDS, device_category, device_of_plane, host_category

if TYPE_CHECKING:
    from perfkit_core.events import Run

# --- the decoder (perfkit_xla/xspace.py) ---------------------------------------------------


#: A stat value: float (double), int (int64/uint64), str, bytes, or ("ref", id) until resolved
#: to the name it refers to (``XPlane.resolve``).
StatValue = float | int | str | bytes | tuple[str, int]

_DOUBLE = struct.Struct("<d")


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message of the expected shape."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Return (value, next position) of the varint at ``pos``."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("a varint runs past the end of the data")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("a varint longer than 10 bytes")


def _signed(value: int) -> int:
    """An int64 field's value from its varint (two's complement in 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(buf: bytes, start: int, end: int) -> Any:
    """Yield (field number, wire type, value) of the message in ``buf[start:end]``; the value is
    an int for varints and fixed-width fields, and a (start, end) pair for length-delimited ones."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, 0, value
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise WireError(f"field {number} runs past the end of its message")
            yield number, 2, (pos, pos + length)
            pos += length
        elif wire == 1:
            if pos + 8 > end:
                raise WireError(f"field {number} runs past the end of its message")
            yield number, 1, pos
            pos += 8
        elif wire == 5:
            if pos + 4 > end:
                raise WireError(f"field {number} runs past the end of its message")
            yield number, 5, pos
            pos += 4
        else:
            raise WireError(f"unknown wire type {wire} (field {number})")
    if pos != end:
        raise WireError("a message runs past the end of its field")


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return buf[span[0] : span[1]].decode("utf-8", "replace")


@dataclass
class XStatMetadata:
    """A stat's name (``hlo_op``, ``flops``, ``step_num``, ...), by its id in the plane."""

    id: int
    name: str = ""
    description: str = ""


@dataclass
class XEventMetadata:
    """An event's name and the stats every event of this metadata shares."""

    id: int
    name: str = ""
    display_name: str = ""
    stats: list[tuple[int, StatValue]] = field(default_factory=list)


@dataclass
class XLine:
    """One timeline (a host thread, a device stream, a derived line such as ``XLA Ops``), its
    events as columns: metadata id, offset and duration in picoseconds, and each event's stats."""

    id: int = 0
    name: str = ""
    display_name: str = ""
    timestamp_ns: int = 0
    duration_ps: int = 0
    display_id: int = 0
    metadata_id: list[int] = field(default_factory=list)
    offset_ps: list[int] = field(default_factory=list)
    event_duration_ps: list[int] = field(default_factory=list)
    #: One list of (stat metadata id, value) per event; empty for events without stats.
    event_stats: list[list[tuple[int, StatValue]]] = field(default_factory=list)
    #: Events that record a number of occurrences instead of a time (not in the columns).
    aggregated: int = 0


@dataclass
class XPlane:
    """A plane: the host (``/host:CPU``), a device (``/device:GPU:0``), or metadata."""

    id: int = 0
    name: str = ""
    lines: list[XLine] = field(default_factory=list)
    event_metadata: dict[int, XEventMetadata] = field(default_factory=dict)
    stat_metadata: dict[int, XStatMetadata] = field(default_factory=dict)
    stats: list[tuple[int, StatValue]] = field(default_factory=list)

    def stat_name(self, metadata_id: int) -> str:
        """The name of the stat whose metadata id is ``metadata_id`` ("" when unknown)."""
        meta = self.stat_metadata.get(metadata_id)
        return meta.name if meta is not None else ""

    def named_stats(self, stats: list[tuple[int, StatValue]]) -> dict[str, StatValue]:
        """``stats`` keyed by stat name, ref values resolved to the name they refer to."""
        return {self.stat_name(k): self.resolve(v) for k, v in stats}

    def resolve(self, value: StatValue) -> StatValue:
        """A ref value (``("ref", id)``) as the name it refers to; other values as they are."""
        if isinstance(value, tuple):
            return self.stat_name(value[1])
        return value


@dataclass
class XSpace:
    """A decoded ``*.xplane.pb``: its planes, hostnames and the profiler's errors and warnings."""

    planes: list[XPlane] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hostnames: list[str] = field(default_factory=list)


# _stat and _event are the hot path (one call per stat and per event): they read the wire
# format in a loop of their own, with one-byte varints (most keys, ids and lengths) inline.


def _stat(buf: bytes, pos: int, end: int) -> tuple[int, StatValue]:
    metadata_id = 0
    value: Any = None
    while pos < end:
        key = buf[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _varint(buf, pos - 1)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v = buf[pos]
            pos += 1
            if v >= 0x80:
                v, pos = _varint(buf, pos - 1)
            if number == 1:
                metadata_id = v
            elif number == 3:
                value = v
            elif number == 4:
                value = _signed(v)
            elif number == 7:
                value = ("ref", v)
        elif wire == 2:
            length = buf[pos]
            pos += 1
            if length >= 0x80:
                length, pos = _varint(buf, pos - 1)
            stop = pos + length
            if stop > end:
                raise WireError(f"field {number} runs past the end of its message")
            if number == 5:
                value = buf[pos:stop].decode("utf-8", "replace")
            elif number == 6:
                value = bytes(buf[pos:stop])
            pos = stop
        elif wire == 1:
            if number == 2:
                value = _DOUBLE.unpack_from(buf, pos)[0]
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise WireError(f"unknown wire type {wire} (field {number})")
    if pos != end:
        raise WireError("a message runs past the end of its field")
    return metadata_id, value if value is not None else 0


def _event(buf: bytes, pos: int, end: int, line: XLine) -> None:
    metadata_id = offset = duration = 0
    aggregated = False
    stats: list[tuple[int, StatValue]] = []
    while pos < end:
        key = buf[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _varint(buf, pos - 1)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v = buf[pos]
            pos += 1
            if v >= 0x80:
                v, pos = _varint(buf, pos - 1)
            if number == 1:
                metadata_id = v
            elif number == 2:
                offset = v - (1 << 64) if v >= 1 << 63 else v
            elif number == 3:
                duration = v - (1 << 64) if v >= 1 << 63 else v
            elif number == 5:
                aggregated = True
        elif wire == 2:
            length = buf[pos]
            pos += 1
            if length >= 0x80:
                length, pos = _varint(buf, pos - 1)
            stop = pos + length
            if stop > end:
                raise WireError(f"field {number} runs past the end of its message")
            if number == 4:
                stats.append(_stat(buf, pos, stop))
            pos = stop
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise WireError(f"unknown wire type {wire} (field {number})")
    if pos != end:
        raise WireError("a message runs past the end of its field")
    if aggregated:
        # An aggregate (num_occurrences instead of offset_ps) has no place in time.
        line.aggregated += 1
        return
    line.metadata_id.append(metadata_id)
    line.offset_ps.append(offset)
    line.event_duration_ps.append(duration)
    line.event_stats.append(stats)


def _line(buf: bytes, start: int, end: int) -> XLine:
    line = XLine()
    for number, wire, v in _fields(buf, start, end):
        if wire == 0:
            if number == 1:
                line.id = _signed(v)
            elif number == 3:
                line.timestamp_ns = _signed(v)
            elif number == 9:
                line.duration_ps = _signed(v)
            elif number == 10:
                line.display_id = _signed(v)
        elif wire == 2:
            if number == 4:
                _event(buf, v[0], v[1], line)
            elif number == 2:
                line.name = _text(buf, v)
            elif number == 11:
                line.display_name = _text(buf, v)
    return line


def _event_metadata(buf: bytes, start: int, end: int) -> XEventMetadata:
    meta = XEventMetadata(0)
    for number, wire, v in _fields(buf, start, end):
        if number == 1 and wire == 0:
            meta.id = _signed(v)
        elif number == 2 and wire == 2:
            meta.name = _text(buf, v)
        elif number == 4 and wire == 2:
            meta.display_name = _text(buf, v)
        elif number == 5 and wire == 2:
            meta.stats.append(_stat(buf, v[0], v[1]))
        # 3 (serialized metadata such as HLO protos) and 6 (child ids) are not read.
    return meta


def _stat_metadata(buf: bytes, start: int, end: int) -> XStatMetadata:
    meta = XStatMetadata(0)
    for number, wire, v in _fields(buf, start, end):
        if number == 1 and wire == 0:
            meta.id = _signed(v)
        elif number == 2 and wire == 2:
            meta.name = _text(buf, v)
        elif number == 3 and wire == 2:
            meta.description = _text(buf, v)
    return meta


def _map_entry(buf: bytes, start: int, end: int) -> tuple[int, tuple[int, int] | None]:
    key = 0
    value: tuple[int, int] | None = None
    for number, wire, v in _fields(buf, start, end):
        if number == 1 and wire == 0:
            key = _signed(v)
        elif number == 2 and wire == 2:
            value = v
    return key, value


def _plane(buf: bytes, start: int, end: int) -> XPlane:
    plane = XPlane()
    for number, wire, v in _fields(buf, start, end):
        if number == 1 and wire == 0:
            plane.id = _signed(v)
        elif wire != 2:
            continue
        elif number == 2:
            plane.name = _text(buf, v)
        elif number == 3:
            plane.lines.append(_line(buf, v[0], v[1]))
        elif number == 4:
            key, span = _map_entry(buf, v[0], v[1])
            em = _event_metadata(buf, *span) if span else XEventMetadata(key)
            plane.event_metadata[key] = em
        elif number == 5:
            key, span = _map_entry(buf, v[0], v[1])
            sm = _stat_metadata(buf, *span) if span else XStatMetadata(key)
            plane.stat_metadata[key] = sm
        elif number == 6:
            plane.stats.append(_stat(buf, v[0], v[1]))
    return plane


def decode_xspace(data: bytes) -> XSpace:
    """Return the ``XSpace`` encoded in ``data``; ``WireError`` when the bytes are not one."""
    try:
        return _decode_xspace(data)
    except IndexError:
        # The inline readers of _stat and _event ran past the end of the data.
        raise WireError("a field runs past the end of the data") from None


def _decode_xspace(data: bytes) -> XSpace:
    space = XSpace()
    for number, wire, v in _fields(data, 0, len(data)):
        if wire != 2:
            if number <= 4:
                raise WireError(f"field {number} of an XSpace is not length-delimited")
            continue  # a field this decoder does not know
        if number == 1:
            space.planes.append(_plane(data, v[0], v[1]))
        elif number == 2:
            space.errors.append(_text(data, v))
        elif number == 3:
            space.warnings.append(_text(data, v))
        elif number == 4:
            space.hostnames.append(_text(data, v))
    return space


# --- the HLO protos (perfkit_xla/hlo.py) ----------------------------------------------


#: PrimitiveType numbers of xla_data.proto -> dtype names.
DTYPES: dict[int, str] = {
    1: "bool",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "uint8",
    7: "uint16",
    8: "uint32",
    9: "uint64",
    10: "float16",
    11: "float32",
    12: "float64",
    15: "complex64",
    16: "bfloat16",
    18: "complex128",
    19: "float8_e5m2",
    20: "float8_e4m3fn",
    21: "int4",
    22: "uint4",
}
_TUPLE = 13


@dataclass(frozen=True)
class HloOp:
    """One instruction of a compiled module, as the profile's HLO proto records it."""

    opcode: str
    #: The framework operation it came from (``jit(step)/transpose(jvp())/dot_general``).
    op_name: str
    #: JSON text of the input shapes (``[[32, 64], [64, 64]]``); "" when unknown.
    input_shapes: str
    #: JSON text of the input dtypes (``["float32", "float32"]``); "" when unknown.
    input_dtypes: str


def _shape(buf: bytes, start: int, end: int) -> tuple[list[int], str] | None:
    """(dimensions, dtype) of an array shape; None for tuples, tokens and unknown types."""
    element = 0
    dims: list[int] = []
    for number, wire, v in _fields(buf, start, end):
        if number == 2 and wire == 0:
            element = v
        elif number == 3:
            if wire == 0:
                dims.append(_signed(v))
            elif wire == 2:  # packed
                pos = v[0]
                while pos < v[1]:
                    value, pos = _varint(buf, pos)
                    dims.append(_signed(value))
    if element == _TUPLE or element not in DTYPES:
        return None
    return dims, DTYPES[element]


def _op_name(buf: bytes, start: int, end: int) -> str:
    for number, wire, v in _fields(buf, start, end):
        if number == 2 and wire == 2:
            return _text(buf, v)
    return ""


def _packed(buf: bytes, wire: int, v: Any) -> list[int]:
    """The values of a repeated varint field: one (``wire`` 0) or packed (``wire`` 2)."""
    if wire == 0:
        return [int(v)]
    out = []
    start, end = v
    pos = start
    while pos < end:
        value, pos = _varint(buf, pos)
        out.append(value)
    return out


def module_ops(proto: bytes) -> dict[str, HloOp]:
    """Instruction name -> ``HloOp`` for every instruction of the module in ``proto`` (a
    serialized ``HloProto``); ``WireError`` when it is not one."""
    raw: list[tuple[str, str, str, list[int], int]] = []
    shapes: dict[int, tuple[list[int], str] | None] = {}
    for number, wire, module in _fields(proto, 0, len(proto)):
        if number != 1 or wire != 2:
            continue
        for n2, w2, comp in _fields(proto, *module):
            if n2 != 3 or w2 != 2:
                continue
            for n3, w3, inst in _fields(proto, *comp):
                if n3 != 2 or w3 != 2:
                    continue
                name = opcode = op_name = ""
                ident = -1
                operands: list[int] = []
                shape: tuple[list[int], str] | None = None
                for n4, w4, v in _fields(proto, *inst):
                    if n4 == 1 and w4 == 2:
                        name = _text(proto, v)
                    elif n4 == 2 and w4 == 2:
                        opcode = _text(proto, v)
                    elif n4 == 3 and w4 == 2:
                        shape = _shape(proto, *v)
                    elif n4 == 7 and w4 == 2:
                        op_name = _op_name(proto, *v)
                    elif n4 == 35 and w4 == 0:
                        ident = _signed(v)
                    elif n4 == 36:
                        operands.extend(_packed(proto, w4, v))
                shapes[ident] = shape
                raw.append((name, opcode, op_name, operands, ident))
    out: dict[str, HloOp] = {}
    for name, opcode, op_name, operands, _ident in raw:
        inputs = [shapes.get(o) for o in operands]
        known = all(s is not None for s in inputs)
        out[name] = HloOp(
            opcode=opcode,
            op_name=op_name,
            input_shapes=json.dumps([s[0] for s in inputs if s]) if known else "",
            input_dtypes=json.dumps([s[1] for s in inputs if s]) if known else "",
        )
    return out


def hlo_ops(space: XSpace) -> dict[tuple[str, int], dict[str, HloOp]]:
    """``(module name, program id)`` -> that module's instructions, for every module whose HLO
    proto the profile holds. A proto that does not decode is left out (the ops of that module
    then have no shapes), as the events themselves are still read."""
    out: dict[tuple[str, int], dict[str, HloOp]] = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        for meta in plane.event_metadata.values():
            stats = plane.named_stats(meta.stats)
            proto = stats.get("Hlo Proto")
            if not isinstance(proto, bytes):
                continue
            module, _, rest = meta.name.rpartition("(")
            try:
                program = int(rest.rstrip(")"))
            except ValueError:
                program_id = stats.get("program_id", -1)
                program = program_id if isinstance(program_id, int) else -1
                module = meta.name
            try:
                out[(module, program)] = module_ops(proto)
            except WireError:
                continue
    return out


# --- the mapping (perfkit_xla/xplane.py) ----------------------------------------------


#: Line timestamps below this (about 3 years after 1970, in ns) are relative to the profile's
#: start, as the profilers normalize them; larger ones are already since the Unix epoch.
RELATIVE_BELOW_NS = 10**17
#: Stats read into columns: stat name -> column.
STAT_COLUMNS: dict[str, str] = {
    "step_num": "step (rows of kind step)",
    "flops": "flops",
    "model_flops": "flops (when flops is absent)",
    "bytes_transferred": "bytes (memcpy, memset, communication rows)",
    "num_bytes": "bytes (memcpy, memset, communication rows)",
    "correlation_id": "correlation",
    "input_shapes": "input_shapes",
    "shape": "input_shapes (when input_shapes is absent)",
    "input_dtypes": "input_dtypes",
    "tf_op": "stack (the TensorFlow op's full name, for TF ops)",
    "hlo_module": "stack (the XLA module of an XLA op whose HLO the profile does not hold)",
}
_BYTES_CATEGORIES = frozenset({"Memcpy", "Memset", "Collective"})


def _int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def read_xspace(path: str | Path) -> XSpace:
    """Return the decoded XSpace of ``path`` (gzip allowed); ``TraceError`` for bad input."""
    from perfkit_core.events import read_trace_bytes

    path = Path(path)
    data = read_trace_bytes(path)
    if not data:
        raise TraceError(path, "the file is empty")
    try:
        space = decode_xspace(data)
    except WireError as exc:
        raise TraceError(path, f"not an XSpace protobuf (*.xplane.pb): {exc}") from None
    if not space.planes:
        raise TraceError(path, "an XSpace without planes: the profiler recorded nothing")
    return space


def _task_times(space: XSpace) -> tuple[int | None, int | None]:
    for plane in space.planes:
        if plane.name == "Task Environment":
            stats = plane.named_stats(plane.stats)
            start = _int(stats.get("profile_start_time"), -1)
            stop = _int(stats.get("profile_stop_time"), -1)
            return (start if start > 0 else None), (stop if stop > 0 else None)
    return None, None


def _versions(space: XSpace) -> dict[str, str]:
    found: dict[str, str] = {}
    for plane in space.planes:
        if plane.name.startswith("/host:"):
            for key, value in plane.named_stats(plane.stats).items():
                if key.endswith("_version") and isinstance(value, str):
                    found[key] = value
    return found


class _Columns:
    """The columns the loader collects, one list per column."""

    def __init__(self) -> None:
        self.category: list[str] = []
        self.name: list[str] = []
        self.base: list[int] = []  # the line's start, ns
        self.offset: list[int] = []  # ps after the line's start
        self.dur: list[int] = []
        self.device_type: list[str] = []
        self.device_index: list[int] = []
        self.pid: list[int] = []
        self.tid: list[int] = []
        self.stream: list[int] = []
        self.step: list[int] = []
        self.correlation: list[int] = []
        self.flops: list[float] = []
        self.nbytes: list[float] = []
        self.shapes: list[str] = []
        self.dtypes: list[str] = []
        self.stack: list[str] = []


#: Every stat the loader reads (into columns, or to tell what an event is).
READ_STATS = frozenset(
    {*STAT_COLUMNS, "hlo_op", "hlo_module", "program_id", "perfkit", "tf_function_call"}
)


def _read_stats(
    plane: XPlane, read: dict[int, str], stats: list[tuple[int, Any]]
) -> dict[str, Any]:
    """The stats of ``stats`` the loader reads, by name (ref values resolved)."""
    out: dict[str, Any] = {}
    for key, value in stats:
        name = read.get(key)
        if name is not None:
            out[name] = plane.resolve(value)
    return out


def _add_plane(
    cols: _Columns,
    plane: XPlane,
    origin: int,
    threads: dict[str, str],
    counts: dict[str, int],
    hlo: dict[tuple[str, int], dict[str, HloOp]],
) -> None:
    device = device_of_plane(plane.name)
    plane_stats = plane.named_stats(plane.stats)
    pid = _int(plane_stats.get("process_id"), -1) if device is None else -1
    has_streams = device is not None and any(line.name.startswith("Stream") for line in plane.lines)
    meta = plane.event_metadata
    # Only the stats the loader reads are looked at (by id): the rest stay in the file.
    read = {k: m.name for k, m in plane.stat_metadata.items() if m.name in READ_STATS}
    nan = float("nan")
    for line in plane.lines:
        counts["aggregated"] += line.aggregated
        base = line.timestamp_ns + (origin if line.timestamp_ns < RELATIVE_BELOW_NS else 0)
        line_name = line.display_name or line.name
        if device is None:
            threads[str(line.id)] = line_name
        meta_stats: dict[int, dict[str, Any]] = {}
        for mid, offset, dur, raw in zip(
            line.metadata_id, line.offset_ps, line.event_duration_ps, line.event_stats, strict=True
        ):
            em = meta.get(mid)
            name = em.name if em is not None else f"<event metadata {mid}>"
            shared = meta_stats.get(mid)
            if shared is None:
                shared = _read_stats(plane, read, em.stats) if em is not None else {}
                meta_stats[mid] = shared
            stats = {**shared, **_read_stats(plane, read, raw)} if raw else shared
            if device is None:
                category = host_category(name, stats)
                cols.device_type.append("cpu")
                cols.device_index.append(-1)
                cols.pid.append(pid)
                cols.tid.append(line.id)
                cols.stream.append(-1)
            else:
                category = device_category(line_name, name, has_streams)
                cols.device_type.append(device[0])
                cols.device_index.append(device[1])
                cols.pid.append(-1)
                cols.tid.append(-1)
                cols.stream.append(line.id)
            cols.category.append(category)
            cols.name.append(name)
            cols.base.append(base)
            cols.offset.append(offset)
            cols.dur.append(dur)
            cols.step.append(_int(stats.get("step_num")) if category == "Step" else -1)
            cols.correlation.append(_int(stats.get("correlation_id")))
            flops = stats.get("flops", stats.get("model_flops"))
            cols.flops.append(_float(flops) if flops is not None else nan)
            nbytes = stats.get("bytes_transferred", stats.get("num_bytes"))
            cols.nbytes.append(
                _float(nbytes) if nbytes is not None and category in _BYTES_CATEGORIES else nan
            )
            shapes = stats.get("input_shapes", stats.get("shape"))
            dtypes = stats.get("input_dtypes")
            where = stats.get("tf_op") if category == "TF Op" else stats.get("hlo_module")
            op = _hlo_op(hlo, stats) if "hlo_op" in stats else None
            if op is not None:
                shapes = shapes if shapes is not None else op.input_shapes
                dtypes = dtypes if dtypes is not None else op.input_dtypes
                if op.op_name:
                    where = "\n".join(reversed(op.op_name.split("/")))
            cols.shapes.append(str(shapes) if shapes is not None else "")
            cols.dtypes.append(str(dtypes) if dtypes is not None else "")
            cols.stack.append(str(where) if where is not None and category != "Python" else "")


def _hlo_op(hlo: dict[tuple[str, int], dict[str, HloOp]], stats: dict[str, Any]) -> HloOp | None:
    """What the module's HLO proto says about the XLA op of an event (by its ``hlo_module``,
    ``program_id`` and ``hlo_op`` stats), or None."""
    ops = hlo.get((str(stats.get("hlo_module", "")), _int(stats.get("program_id"))))
    return ops.get(str(stats["hlo_op"])) if ops is not None else None


def _framework(space: XSpace, categories: set[str]) -> tuple[str, str | None]:
    """("jax", version) or ("tensorflow", version) from the host plane's version stats and the
    events; ("xla", None) when neither says."""
    versions = _versions(space)
    if "jax_version" in versions:
        return "jax", versions["jax_version"]
    for key in ("tf_version", "tensorflow_version"):
        if key in versions:
            return "tensorflow", versions[key]
    if "TF Op" in categories:
        return "tensorflow", None
    if "JAX Dispatch" in categories:
        return "jax", None
    return "xla", None


_HOST_FILE_RE = re.compile(r"^(?P<host>.+)\.xplane\.pb(\.gz)?$")


def run_from_xspace(space: XSpace, source: Path) -> Run:
    """Return the ``Run`` of a decoded XSpace; ``source`` is the file it came from (for
    messages and ``meta["source"]``). ``TraceError`` when it holds no events."""
    import pandas as pd

    from perfkit_core.events import finish_events, make_run

    start_ns, stop_ns = _task_times(space)
    origin = start_ns or 0
    cols = _Columns()
    hlo = hlo_ops(space)
    threads: dict[str, str] = {}
    counts = {"aggregated": 0}
    devices: list[dict[str, Any]] = []
    planes_read: list[str] = []
    for plane in space.planes:
        if not plane.lines:
            continue
        planes_read.append(plane.name)
        device = device_of_plane(plane.name)
        if device is not None:
            stats = plane.named_stats(plane.stats)
            devices.append(
                {
                    "type": device[0],
                    "index": device[1],
                    "name": str(stats.get("device_name", stats.get("device_type_string", "")))
                    or None,
                    "total_memory_bytes": _float(stats["memory_size"])
                    if "memory_size" in stats
                    else None,
                    "compute_capability": None,
                    "sm_count": None,
                }
            )
        _add_plane(cols, plane, origin, threads, counts, hlo)
    n = len(cols.name)
    if n == 0:
        raise TraceError(source, "the XSpace holds no timed events (no plane has events)")
    offset_ps = np.asarray(cols.offset, dtype=np.int64)
    dur_ps = np.asarray(cols.dur, dtype=np.int64)
    # Picosecond values within 2**62 round to ns without wrapping around int64.
    check_values_range(source, dur_ps, "duration_ps", low=0, high=2**62)
    check_values_range(source, offset_ps, "offset_ps", low=-(2**62), high=2**62)
    try:
        base_ns = np.asarray(cols.base, dtype=np.int64)
    except OverflowError:
        raise TraceError(source, "a line's timestamp_ns is out of range") from None
    check_values_range(
        source, base_ns, "line timestamp (ns)", low=-TIME_LIMIT_NS, high=TIME_LIMIT_NS
    )
    start = base_ns + (offset_ps + 500) // 1000
    check_values_range(source, start, "start time (ns)", low=-TIME_LIMIT_NS, high=TIME_LIMIT_NS)
    dur = (dur_ps + 500) // 1000
    category_codes, category_names = pd.factorize(np.asarray(cols.category, dtype=object))
    kinds = [CATEGORY_KINDS[str(c)] for c in category_names]
    framework, version = _framework(space, set(map(str, category_names)))
    columns: dict[str, Any] = {
        "rank": np.zeros(n, dtype=np.int32),
        "kind": pd.Categorical.from_codes(category_codes, categories=kinds)
        if len(set(kinds)) == len(kinds)
        else pd.Categorical(np.asarray(kinds, dtype=object)[category_codes]),
        "name": pd.Categorical(cols.name),
        "category": pd.Categorical.from_codes(
            category_codes, categories=[str(c) for c in category_names]
        ),
        "framework": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [framework]),
        "start_ns": start,
        "dur_ns": dur,
        "device_type": pd.Categorical(cols.device_type),
        "device_index": np.asarray(cols.device_index, dtype=np.int32),
        "pid": np.asarray(cols.pid, dtype=np.int64),
        "tid": np.asarray(cols.tid, dtype=np.int64),
        "stream": np.asarray(cols.stream, dtype=np.int64),
        "step": np.asarray(cols.step, dtype=np.int64),
        "correlation": np.asarray(cols.correlation, dtype=np.int64),
        "flops": np.asarray(cols.flops, dtype=np.float64),
        "bytes": np.asarray(cols.nbytes, dtype=np.float64),
        "input_shapes": pd.Categorical(cols.shapes),
        "input_dtypes": pd.Categorical(cols.dtypes),
        "stack": pd.Categorical(cols.stack),
    }
    # Layer spans from TF op scopes came after this reader: the same step on its columns.
    from perfkit_xla.xplane import add_scope_spans

    rows, layer_spans = add_scope_spans(columns, n, framework)
    events = finish_events(columns, rows, consume=True)
    host = events["stream"].to_numpy() < 0
    category = events["category"].to_numpy()
    tid = events["tid"].to_numpy()
    step_threads = set(tid[host & (category == "Step")].tolist())
    data_threads = {int(t) for t, name in threads.items() if name.startswith("tf_data")}
    op_threads = set(tid[host & np.isin(category, ["XLA Op", "TF Op"])].tolist())
    # Threads that run ops for the step's thread: XLA:CPU's and TensorFlow's executor pools
    # (tf.data's own threads run the input pipeline, which is data loading).
    compute_threads = sorted(op_threads - step_threads - data_threads)
    match = _HOST_FILE_RE.match(source.name)
    host_name = space.hostnames[0] if space.hostnames else (match.group("host") if match else None)
    meta: dict[str, Any] = {
        "framework": framework,
        "framework_version": version,
        "host": host_name,
        "devices": devices,
        "rank": 0,
        "rank_recorded": False,
        "world_size": 1,
        "source": str(source),
        "accounting": {
            "events_in_file": n + counts["aggregated"],
            "rows": rows,
            "aggregated_events": counts["aggregated"],
            "layer_spans_from_op_scopes": layer_spans,
        },
        "threads": threads,
        "compute_threads": [int(t) for t in compute_threads],
        "extra": {
            "planes": planes_read,
            "profile_start_ns": start_ns,
            "profile_stop_ns": stop_ns,
            "versions": _versions(space),
            "xspace_errors": list(space.errors),
            "xspace_warnings": list(space.warnings),
        },
    }
    note_skipped(
        source,
        meta["accounting"],
        {"that count occurrences instead of recording a time": counts["aggregated"]},
    )
    return make_run(events, meta)


def load_xplane(path: str | Path) -> Run:
    """Return the ``Run`` in one ``*.xplane.pb`` (TensorFlow or JAX profile); ``TraceError``
    naming the file for bad input."""
    path = Path(path)
    return run_from_xspace(read_xspace(path), path)
