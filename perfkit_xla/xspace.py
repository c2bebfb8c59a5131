"""A small decoder of the XSpace protobuf (``*.xplane.pb``) that TensorFlow's and JAX's profilers
write, reading the protobuf wire format directly: no protobuf package, jax, tensorflow or xprof
is needed to read a profile.

The messages and field numbers are those of the documented ``xplane.proto`` (in the TSL
profiler sources that XLA, TensorFlow and JAX share)::

    XSpace          planes=1 (XPlane), errors=2, warnings=3, hostnames=4
    XPlane          id=1, name=2, lines=3 (XLine), event_metadata=4 (map int64 -> XEventMetadata),
                    stat_metadata=5 (map int64 -> XStatMetadata), stats=6 (XStat)
    XLine           id=1, name=2, timestamp_ns=3, events=4 (XEvent), duration_ps=9,
                    display_id=10, display_name=11
    XEvent          metadata_id=1, offset_ps=2, duration_ps=3, stats=4 (XStat), num_occurrences=5
    XStat           metadata_id=1, double_value=2, uint64_value=3, int64_value=4, str_value=5,
                    bytes_value=6, ref_value=7 (the id of an XStatMetadata whose name is the value)
    XEventMetadata  id=1, name=2, metadata=3 (bytes), display_name=4, stats=5, child_id=6
    XStatMetadata   id=1, name=2, description=3

Fields this decoder does not know are skipped, as protobuf readers do, so a newer profiler's
additions do not break it. Events are decoded into per-line columns (lists of ints), not one
object per event.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

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
