"""Decode the XSpace protobuf (``*.xplane.pb``) that TensorFlow's and JAX's profilers write, with
compiled code: protobuf's upb backend parses the planes, lines and metadata (the message
classes of ``perfkit_xla.protos``), and NumPy reads the events and their stats column-wise
(``perfkit_xla.wire``). Neither jax, tensorflow nor xprof is needed to read a profile.

The messages and field numbers are those of the published ``xplane.proto`` (in the TSL
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
additions do not break it. The events of all lines are one table of columns (``XSpace.events``),
their stats another (``EventTable.stats``); planes, lines and metadata are small objects.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfkit_xla.wire import Buffer, WireError, fields, key, varint_ends_at, varints

__all__ = [
    "EventTable",
    "StatTable",
    "WireError",
    "XEventMetadata",
    "XLine",
    "XPlane",
    "XSpace",
    "XStatMetadata",
    "decode_xspace",
]

#: A stat value: float (double), int (int64/uint64), str, bytes, or ("ref", id) until resolved
#: to the name it refers to (``XPlane.resolve``).
StatValue = float | int | str | bytes | tuple[str, int]

#: Kinds of a stat's value in ``StatTable.kind``: the XStat field that holds it (0: none, which
#: reads as the integer 0).
NONE, DOUBLE, UINT64, INT64, STR, BYTES, REF = 0, 2, 3, 4, 5, 6, 7
_DOUBLE = struct.Struct("<d")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


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
class StatTable:
    """The stats of the events of an ``EventTable``, one row per stat. The rows of one event
    are in the order the file gives them; rows of different events are in no particular order.
    Values are read when asked for (``numbers``, ``text``, ``value``): a profile's events carry
    many stats the loader does not read."""

    #: The event's row in the ``EventTable``.
    event: np.ndarray
    #: The stat's metadata id (uint64, as written).
    metadata_id: np.ndarray
    #: The kind of the value (``NONE``, ``DOUBLE``, ... ``REF``), int8.
    kind: np.ndarray
    #: Where the value lies in ``buffer`` (after its field's key), int64.
    at: np.ndarray
    buffer: Buffer

    def numbers(self, rows: np.ndarray) -> np.ndarray:
        """The 64 bits of the values of stats ``rows`` (uint64): the number for ``UINT64`` and
        ``INT64`` (two's complement), the IEEE 754 bits for ``DOUBLE``, the id for ``REF``; 0
        for other kinds."""
        out = np.zeros(len(rows), dtype=np.uint64)
        kind = self.kind[rows]
        at = self.at[rows]
        number = np.flatnonzero((kind == UINT64) | (kind == INT64) | (kind == REF))
        if number.size:
            out[number] = varints(self.buffer, at[number])[0]
        double = np.flatnonzero(kind == DOUBLE)
        if double.size:
            out[double] = self.buffer.word(at[double])
        return out

    def text(self, row: int) -> bytes:
        """The bytes of the ``STR`` or ``BYTES`` value of stat ``row``."""
        length, start = varints(self.buffer, self.at[row : row + 1])
        return self.buffer.raw[int(start[0]) : int(start[0]) + int(length[0])]

    def of_event(self, event: int) -> list[tuple[int, StatValue]]:
        """The (metadata id, value) of each stat of event ``event``, in file order (one pass
        over the table: for looking at an event, not for loops over events)."""
        return [
            (int(self.metadata_id[i]), self.value(int(i)))
            for i in np.flatnonzero(self.event == event)
        ]

    def value(self, row: int) -> StatValue:
        """The value of stat ``row`` as a Python object (``StatValue``)."""
        kind = int(self.kind[row])
        if kind == STR:
            return _text(self.text(row))
        if kind == BYTES:
            return self.text(row)
        bits = int(self.numbers(np.array([row]))[0])
        if kind == DOUBLE:
            return float(_DOUBLE.unpack(bits.to_bytes(8, "little"))[0])
        if kind == INT64:
            return bits - (1 << 64) if bits >= 1 << 63 else bits
        if kind == REF:
            return ("ref", bits)
        return bits  # UINT64, and NONE (0)


@dataclass
class EventTable:
    """Every timed event of an XSpace in file order (plane by plane, line by line), as columns.
    Events that count occurrences instead of recording a time are not in it (``XLine.aggregated``
    counts them)."""

    #: uint64, as written (the key of ``XPlane.event_metadata`` when below 2**63).
    metadata_id: np.ndarray
    #: Picoseconds after the line's ``timestamp_ns``, int64.
    offset_ps: np.ndarray
    #: Picoseconds, int64.
    duration_ps: np.ndarray
    stats: StatTable

    def __len__(self) -> int:
        return len(self.metadata_id)


@dataclass
class XLine:
    """One timeline (a host thread, a device stream, a derived line such as ``XLA Ops``); its
    events are the rows ``first`` to ``first + len(metadata_id)`` of ``XSpace.events``, and
    ``metadata_id``, ``offset_ps`` and ``event_duration_ps`` are those rows' columns."""

    id: int = 0
    name: str = ""
    display_name: str = ""
    timestamp_ns: int = 0
    duration_ps: int = 0
    display_id: int = 0
    first: int = 0
    metadata_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    offset_ps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    event_duration_ps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: Events that record a number of occurrences instead of a time (not in the table).
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
    #: Its events: rows ``first`` to ``stop`` of ``XSpace.events``.
    first: int = 0
    stop: int = 0

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
    """A decoded ``*.xplane.pb``: its planes, their events, hostnames and the profiler's errors
    and warnings."""

    planes: list[XPlane]
    events: EventTable
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hostnames: list[str] = field(default_factory=list)


def decode_xspace(data: bytes, stats: Collection[str] | None = None) -> XSpace:
    """Return the ``XSpace`` encoded in ``data``; ``WireError`` when the bytes are not one.

    ``stats``: the names of the event stats to read (None: all of them). The events' other
    stats are not parsed (nor checked) past their metadata id, as protobuf's lazy fields are
    parsed only when read: a profile's events carry many stats a reader has no use for.
    """
    from google.protobuf.message import DecodeError

    from perfkit_xla.protos import message_class

    message = message_class("XSpace")()
    try:
        message.ParseFromString(data)
    except DecodeError:
        raise WireError("the protobuf does not parse (cut short or damaged)") from None
    planes: list[XPlane] = []
    payloads: list[list[bytes]] = []
    for p in message.planes:
        plane = XPlane(id=p.id, name=_text(p.name))
        for entry in p.event_metadata:
            em = entry.value
            if entry.HasField("value"):
                plane.event_metadata[entry.key] = XEventMetadata(
                    em.id, _text(em.name), _text(em.display_name), [_stat(s) for s in em.stats]
                )
            else:
                plane.event_metadata[entry.key] = XEventMetadata(entry.key)
        for entry in p.stat_metadata:
            sm = entry.value
            plane.stat_metadata[entry.key] = (
                XStatMetadata(sm.id, _text(sm.name), _text(sm.description))
                if entry.HasField("value")
                else XStatMetadata(entry.key)
            )
        plane.stats = [_stat(s) for s in p.stats]
        for ln in p.lines:
            events = list(ln.events)
            payloads.append(events)
            plane.lines.append(
                XLine(
                    id=ln.id,
                    name=_text(ln.name),
                    display_name=_text(ln.display_name),
                    timestamp_ns=ln.timestamp_ns,
                    duration_ps=ln.duration_ps,
                    display_id=ln.display_id,
                )
            )
        planes.append(plane)
    wanted = None
    if stats is not None:
        names = set(stats)
        ids = {k for p in planes for k, m in p.stat_metadata.items() if m.name in names}
        wanted = np.array(sorted(k for k in ids if k >= 0), dtype=np.uint64)
    errors = [_text(e) for e in message.errors]
    warnings = [_text(w) for w in message.warnings]
    hostnames = [_text(h) for h in message.hostnames]
    del message  # the events' bytes are in payloads: free the parsed message before reading them
    counts = [len(e) for e in payloads]
    table, aggregated = _event_table(payloads, wanted)
    space = XSpace(planes, table, errors=errors, warnings=warnings, hostnames=hostnames)
    _place_lines(space, counts, aggregated)
    return space


def _stat(stat: Any) -> tuple[int, StatValue]:
    """(metadata id, value) of an XStat message."""
    which = stat.WhichOneof("value")
    if which is None:
        return stat.metadata_id, 0
    if which == "ref_value":
        return stat.metadata_id, ("ref", stat.ref_value)
    if which == "str_value":
        return stat.metadata_id, _text(stat.str_value)
    return stat.metadata_id, getattr(stat, which)


# What each key of an XEvent field is read into (keys of the fields this decoder does not know
# read as 0, skipped).
_METADATA_ID, _OFFSET, _DURATION, _STATS, _OCCURRENCES = 1, 2, 3, 4, 5
_EVENT_FIELDS = np.zeros(128, dtype=np.int8)
for _field, _key in (
    (_METADATA_ID, key(1, 0)),
    (_OFFSET, key(2, 0)),
    (_DURATION, key(3, 0)),
    (_STATS, key(4, 2)),
    (_OCCURRENCES, key(5, 0)),
):
    _EVENT_FIELDS[_key] = _field
# The kind of value each key of an XStat field holds (0: not a value field).
_STAT_KINDS = np.zeros(128, dtype=np.int8)
for _kind, _key in (
    (DOUBLE, key(2, 1)),
    (UINT64, key(3, 0)),
    (INT64, key(4, 0)),
    (STR, key(5, 2)),
    (BYTES, key(6, 2)),
    (REF, key(7, 0)),
):
    _STAT_KINDS[_key] = _kind
_STAT_KINDS[key(1, 0)] = -1  # the metadata id


def _codes(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``table[key]`` for each of ``keys`` (0 for keys past the table)."""
    return table[np.minimum(keys, len(table) - 1).astype(np.intp)] * (keys < len(table))


def _event_table(
    payloads: list[list[bytes]], wanted: np.ndarray | None
) -> tuple[EventTable, np.ndarray]:
    """The table of the events whose encoded messages are ``payloads`` (one list per line), and
    which of those messages are aggregates (bool, one per message). ``wanted``: the metadata
    ids of the stats to keep (None: all). Empties ``payloads``."""
    lengths = np.concatenate(
        [np.zeros(0, dtype=np.int64)]
        + [np.fromiter(map(len, events), dtype=np.int64, count=len(events)) for events in payloads]
    )
    buf = Buffer(b"".join([b"".join(events) for events in payloads]))
    payloads.clear()  # each event's bytes are in buf now
    ends = np.cumsum(lengths)
    starts = ends - lengths
    n = len(lengths)
    columns = {
        _METADATA_ID: np.zeros(n, dtype=np.uint64),
        _OFFSET: np.zeros(n, dtype=np.uint64),
        _DURATION: np.zeros(n, dtype=np.uint64),
    }
    aggregated = np.zeros(n, dtype=bool)
    stat_rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for r in fields(buf, starts, ends):
        code = _codes(_EVENT_FIELDS, r.key)
        first = int(code[0])
        if (code == first).all():  # the same field in every event: most rounds
            hits: list[tuple[int, Any]] = [(first, slice(None))]
        else:
            hits = [(c, code == c) for c in range(1, 6)]
        for c, hit in hits:
            if c in columns:
                columns[c][r.rows[hit]] = r.value[hit]
            elif c == _OCCURRENCES:
                aggregated[r.rows[hit]] = True
            elif c == _STATS:
                stat_rows.append((r.rows[hit], r.payload[hit], r.end[hit]))
    if stat_rows:
        event, starts, ends = (np.concatenate([s[i] for s in stat_rows]) for i in range(3))
        stats = _stat_table(buf, event, starts, ends, wanted)
    else:
        none = np.zeros(0, dtype=np.int64)
        stats = _stat_table(buf, none, none, none, wanted)
    metadata_id, offset, duration = columns[_METADATA_ID], columns[_OFFSET], columns[_DURATION]
    if aggregated.any():
        # An aggregate (num_occurrences instead of offset_ps) has no place in time.
        timed = ~aggregated
        row = np.cumsum(timed) - 1
        keep = timed[stats.event]
        for name in ("event", "metadata_id", "kind", "at"):
            setattr(stats, name, getattr(stats, name)[keep])
        stats.event = row[stats.event]
        metadata_id, offset, duration = metadata_id[timed], offset[timed], duration[timed]
    table = EventTable(metadata_id, offset.view(np.int64), duration.view(np.int64), stats)
    return table, aggregated


def _stat_table(
    buf: Buffer,
    event: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    wanted: np.ndarray | None,
) -> StatTable:
    """The table of the stats whose encoded messages are ``buf[starts[i]:ends[i]]``, of the
    events ``event``; only those whose metadata id is in ``wanted``, unless it is None."""
    byte = buf.byte
    # A stat is written as its metadata id (one or two bytes, most often), then one value
    # field that ends the message.
    b1, b2 = byte[starts + 1], byte[starts + 2]
    two = b1 >= 0x80
    id_end = starts + 2 + two
    lead = (byte[starts] == key(1, 0)) & (~two | (b2 < 0x80)) & (id_end <= ends)
    lead_id = np.where(two, (b1 & 0x7F) | (b2.astype(np.uint64) << np.uint64(7)), b1).astype(
        np.uint64
    )
    if wanted is not None:
        # Stats that begin with an id not wanted are left unparsed.
        keep = np.flatnonzero(~lead | np.isin(lead_id, wanted))
        event, starts, ends = event[keep], starts[keep], ends[keep]
        two, id_end, lead, lead_id = two[keep], id_end[keep], lead[keep], lead_id[keep]
    n = len(starts)
    metadata_id = np.zeros(n, dtype=np.uint64)
    kind = np.zeros(n, dtype=np.int8)
    at = np.zeros(n, dtype=np.int64)
    # Stats of that form are read here at once; the others field by field.
    code = _STAT_KINDS[np.minimum(byte[id_end], 127)] * (byte[id_end] < 128)
    start = id_end + 1
    length = ends - start
    usual = lead & (code > 0) & (length >= 1)
    double = code == DOUBLE
    text = (code == STR) | (code == BYTES)
    number = usual & ~double & ~text
    fits = np.where(double, length == 8, length == 1 + byte[start].astype(np.int64))
    fits[text] &= byte[start[text]] < 0x80
    fits[number] = varint_ends_at(buf, start[number], ends[number])
    usual &= fits
    metadata_id[usual] = lead_id[usual]
    kind[usual] = code[usual]
    at[usual] = start[usual]
    other = np.flatnonzero(~usual)
    for r in fields(buf, starts[other], ends[other]):
        rows = other[r.rows]
        code = _codes(_STAT_KINDS, r.key)
        hit = code == -1
        metadata_id[rows[hit]] = r.value[hit]
        hit = code > 0
        kind[rows[hit]] = code[hit]
        at[rows[hit]] = r.start[hit]
    if wanted is not None and other.size:
        keep = np.flatnonzero(np.isin(metadata_id, wanted))
        event, metadata_id, kind, at = event[keep], metadata_id[keep], kind[keep], at[keep]
    return StatTable(event=event, metadata_id=metadata_id, kind=kind, at=at, buffer=buf)


def _place_lines(space: XSpace, counts: list[int], aggregated: np.ndarray) -> None:
    """Give each line and plane its rows of ``space.events`` (``counts``: the events of each
    line as written, ``aggregated`` marking the aggregates among them)."""
    events = space.events
    written = 0
    row = 0
    i = 0
    for plane in space.planes:
        plane.first = row
        for line in plane.lines:
            count = counts[i]
            i += 1
            line.aggregated = int(np.count_nonzero(aggregated[written : written + count]))
            written += count
            timed = count - line.aggregated
            line.first = row
            line.metadata_id = events.metadata_id[row : row + timed]
            line.offset_ps = events.offset_ps[row : row + timed]
            line.event_duration_ps = events.duration_ps[row : row + timed]
            row += timed
        plane.stop = row
