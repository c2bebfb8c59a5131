"""The stats the loader reads, for every event of a plane at once: one column of values per stat
name, from the event's own stats and those its event metadata gives every event of that name.

An event's stats are read as a dict would be: the event metadata's first, then the event's own,
a later stat of a name replacing an earlier one. A value is held as a kind and 64 bits: a
number (``DOUBLE``, ``UINT64``, ``INT64``, as in ``StatTable``) or an ``OBJECT`` (a str or bytes
value, or the name a ref value refers to), whose bits index ``PlaneStats.objects``. Numbers are
converted in bulk; the few distinct objects one at a time, with the same rules as a single value.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import TraceError
from perfkit_xla.xspace import BYTES, DOUBLE, INT64, NONE, REF, STR, UINT64

if TYPE_CHECKING:
    from pathlib import Path

    from perfkit_xla.xspace import StatTable, XEventMetadata, XPlane

#: ``Values.kind`` of an event without the stat, and of a value held in ``PlaneStats.objects``.
ABSENT, OBJECT = -1, 9
_INT64_LIMIT = 2**63
_DOUBLE = struct.Struct("<d")
_OUT_OF_RANGE = f"is out of range ({-_INT64_LIMIT} to {_INT64_LIMIT - 1})"


def to_int(value: Any, default: int = -1) -> int:
    """``int(value)``, or ``default`` when it is not a number (None, text that is not one)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def to_float(value: Any) -> float:
    """``float(value)``, or NaN when it is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


@dataclass
class Values:
    """One stat of every event of a plane: ``kind`` (int8: ``ABSENT``, ``DOUBLE``, ``UINT64``,
    ``INT64`` or ``OBJECT``) and ``bits`` (uint64)."""

    kind: np.ndarray
    bits: np.ndarray

    def present(self) -> np.ndarray:
        """Which events have the stat (bool)."""
        return self.kind != ABSENT


class PlaneStats:
    """The stats named in ``read`` of each event of ``plane`` (rows ``plane.first`` to
    ``plane.stop`` of the XSpace's event table), by name."""

    def __init__(
        self,
        plane: XPlane,
        stats: StatTable,
        rows: np.ndarray,
        read: dict[int, str],
        metadata: list[XEventMetadata | None],
        inverse: np.ndarray,
    ) -> None:
        """``rows``: the rows of ``stats`` of the plane's events whose metadata id is in
        ``read`` (stat metadata id -> name); ``metadata``: the event metadata of each distinct
        metadata id of the plane's events, ``inverse`` the index of each event's in it."""
        self.plane = plane
        self.objects: list[Any] = []
        self._interned: dict[Any, int] = {}
        n = len(inverse)
        names = sorted(set(read.values()))
        self._names = names
        # Shared values from the event metadata, one row per distinct metadata id.
        shared_kind = {name: np.full(len(metadata), ABSENT, dtype=np.int8) for name in names}
        shared_bits = {name: np.zeros(len(metadata), dtype=np.uint64) for name in names}
        used: set[str] = set()
        for i, meta in enumerate(metadata):
            if meta is None:
                continue
            for key, value in meta.stats:
                name = read.get(key)
                if name is None:
                    continue
                shared_kind[name][i], shared_bits[name][i] = self._encode(plane.resolve(value))
                used.add(name)
        self.columns: dict[str, Values] = {}
        for name in used:
            self.columns[name] = Values(shared_kind[name][inverse], shared_bits[name][inverse])
        if not len(rows):
            return
        # The events' own values, the last of each name per event.
        ids = np.array(sorted(read), dtype=np.uint64)
        name_of_id = np.array([names.index(read[int(i)]) for i in ids], dtype=np.int64)
        name_of_row = name_of_id[np.searchsorted(ids, stats.metadata_id[rows])]
        event = stats.event[rows] - plane.first
        kind, bits = self._own_values(stats, rows)
        for k, stat in enumerate(names):
            mine = np.flatnonzero(name_of_row == k)
            if not mine.size:
                continue
            if np.bincount(event[mine], minlength=n).max() > 1:
                # An event with two stats of this name: the last one (rows of one event are in
                # file order) is its value.
                _, first_from_end = np.unique(event[mine][::-1], return_index=True)
                mine = mine[len(mine) - 1 - first_from_end]
            column = self.columns.get(stat)
            if column is None:
                column = Values(np.full(n, ABSENT, dtype=np.int8), np.zeros(n, dtype=np.uint64))
                self.columns[stat] = column
            column.kind[event[mine]] = kind[mine]
            column.bits[event[mine]] = bits[mine]

    def _intern(self, value: Any) -> int:
        key = (type(value), value)
        index = self._interned.get(key)
        if index is None:
            index = self._interned[key] = len(self.objects)
            self.objects.append(value)
        return index

    def _encode(self, value: Any) -> tuple[int, int]:
        """(kind, bits) of a stat value given as a Python object (refs resolved)."""
        if isinstance(value, float):
            return DOUBLE, int.from_bytes(_DOUBLE.pack(value), "little")
        if isinstance(value, int) and -_INT64_LIMIT <= value < _INT64_LIMIT:
            return INT64, value & (2**64 - 1)
        if isinstance(value, int) and 0 <= value < 2**64:
            return UINT64, value
        return OBJECT, self._intern(value)

    def _own_values(self, stats: StatTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(kind, bits) of stats ``rows``, text and refs as objects."""
        kind = stats.kind[rows].copy()
        bits = stats.numbers(rows)
        kind[kind == NONE] = INT64  # no value reads as the integer 0
        refs = np.flatnonzero(kind == REF)
        if refs.size:
            distinct, inverse = np.unique(bits[refs], return_inverse=True)
            names = [self._intern(self.plane.stat_name(int(i))) for i in distinct]
            kind[refs] = OBJECT
            bits[refs] = np.array(names, dtype=np.uint64)[inverse]
        for k in (STR, BYTES):
            for i in np.flatnonzero(kind == k).tolist():
                raw = stats.text(int(rows[i]))
                kind[i] = OBJECT
                bits[i] = self._intern(raw.decode("utf-8", "replace") if k == STR else raw)
        return kind, bits

    def get(self, name: str) -> Values | None:
        """The column of stat ``name``; None when no event has it."""
        return self.columns.get(name)

    def present(self, name: str, n: int) -> np.ndarray:
        """Which of the ``n`` events have stat ``name`` (bool)."""
        column = self.columns.get(name)
        return column.present() if column is not None else np.zeros(n, dtype=bool)

    def either(self, first: str, second: str) -> Values | None:
        """Stat ``first`` where an event has it, else stat ``second`` (``stats.get(first,
        stats.get(second))``)."""
        a, b = self.columns.get(first), self.columns.get(second)
        if a is None or b is None:
            return a if a is not None else b
        mine = a.present()
        return Values(np.where(mine, a.kind, b.kind), np.where(mine, a.bits, b.bits))

    def value(self, column: Values | None, row: int) -> Any:
        """The value of event ``row`` in ``column`` as a Python object (None when absent)."""
        if column is None:
            return None
        kind, bits = int(column.kind[row]), int(column.bits[row])
        if kind == ABSENT:
            return None
        if kind == OBJECT:
            return self.objects[bits]
        if kind == DOUBLE:
            return _DOUBLE.unpack(bits.to_bytes(8, "little"))[0]
        if kind == INT64:
            return bits - 2**64 if bits >= _INT64_LIMIT else bits
        return bits

    def ints(
        self, column: Values | None, n: int, where: np.ndarray, source: Path, what: str
    ) -> np.ndarray:
        """``to_int`` of each value of ``column`` at the events ``where`` (bool), -1 elsewhere
        and where absent (int64); ``TraceError`` naming ``source`` when one does not fit int64."""
        out = np.full(n, -1, dtype=np.int64)
        if column is None:
            return out
        kind, bits = column.kind, column.bits
        at = where & (kind == INT64)
        out[at] = bits[at].view(np.int64)
        at = where & (kind == UINT64)
        if at.any():
            if (bits[at] >= np.uint64(_INT64_LIMIT)).any():
                big = int(bits[at][bits[at] >= np.uint64(_INT64_LIMIT)][0])
                raise TraceError(source, f"a {what} stat of {big} {_OUT_OF_RANGE}")
            out[at] = bits[at].astype(np.int64)
        at = np.flatnonzero(where & (kind == DOUBLE))
        if at.size:
            value = bits[at].view(np.float64)
            number = ~np.isnan(value)
            if ((value[number] < -(2.0**63)) | (value[number] >= 2.0**63)).any():
                bad = value[number][(value[number] < -(2.0**63)) | (value[number] >= 2.0**63)]
                raise TraceError(source, f"a {what} stat of {bad[0]} {_OUT_OF_RANGE}")
            out[at[number]] = np.trunc(value[number]).astype(np.int64)
        at = np.flatnonzero(where & (kind == OBJECT))
        if at.size:
            distinct, inverse = np.unique(bits[at], return_inverse=True)
            converted = [to_int(self.objects[int(i)]) for i in distinct]
            for big in converted:
                if not -_INT64_LIMIT <= big < _INT64_LIMIT:
                    raise TraceError(source, f"a {what} stat of {big} {_OUT_OF_RANGE}")
            out[at] = np.array(converted, dtype=np.int64)[inverse]
        return out

    def floats(self, column: Values | None, n: int) -> np.ndarray:
        """``to_float`` of each value of ``column``, NaN where absent (float64)."""
        out = np.full(n, np.nan)
        if column is None:
            return out
        kind, bits = column.kind, column.bits
        at = kind == INT64
        out[at] = bits[at].view(np.int64).astype(np.float64)
        at = kind == UINT64
        out[at] = bits[at].astype(np.float64)
        at = kind == DOUBLE
        out[at] = bits[at].view(np.float64)
        at = np.flatnonzero(kind == OBJECT)
        if at.size:
            distinct, inverse = np.unique(bits[at], return_inverse=True)
            converted = [to_float(self.objects[int(i)]) for i in distinct]
            out[at] = np.array(converted, dtype=np.float64)[inverse]
        return out

    def codes(self, column: Values | None, rows: np.ndarray) -> np.ndarray:
        """For the events ``rows``: one code per distinct value of ``column`` (int64; equal
        codes, equal values; -1 where absent)."""
        out = np.full(len(rows), -1, dtype=np.int64)
        if column is None:
            return out
        kind, bits = column.kind[rows], column.bits[rows]
        offset = 0
        for k in (DOUBLE, UINT64, INT64, OBJECT):
            at = np.flatnonzero(kind == k)
            if not at.size:
                continue
            distinct, inverse = np.unique(bits[at], return_inverse=True)
            out[at] = inverse + offset
            offset += len(distinct)
        return out
