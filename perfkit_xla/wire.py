"""NumPy over the protobuf wire format: the fields of many small messages (a profile's events
and their stats) read at once, column-wise, with no Python object per message.

A message is a run of fields, each a key (a varint: field number << 3 | wire type) and a value:
a varint (wire type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5).
The fields of one message can only be found one after the other, so ``fields`` reads them in
rounds: round ``k`` reads the ``k``-th field of every message that has one, all messages at
once. A profile's event has three fields and a few stats, so a few rounds read them all.

Varints of one byte (most keys, ids and lengths) are read directly; longer ones eight bytes at a
time, as one little-endian word whose 7-bit groups are gathered with shifts and masks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

#: Zero bytes after the data, so that a read of a whole word (or of a varint's ten bytes)
#: starting inside the data stays inside the buffer.
PADDING = 16
_U64 = np.uint64
_LOW7 = _U64(0x7F7F7F7F7F7F7F7F)
_HIGH = _U64(0x8080808080808080)
_ONE = _U64(1)


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message of the expected shape."""


class Buffer:
    """Bytes to read fields from: ``data`` followed by ``PADDING`` zero bytes, as bytes
    (``byte``) and as the eight bytes that start at each position (``words``)."""

    def __init__(self, data: bytes) -> None:
        self.size = len(data)
        self.raw = data + bytes(PADDING)
        self.byte = np.frombuffer(self.raw, dtype=np.uint8)
        # The eight bytes that start at each position, as a little-endian uint64 (unaligned).
        self.words = np.ndarray((len(self.raw) - 7,), dtype="<u8", buffer=self.raw, strides=(1,))

    def word(self, pos: np.ndarray) -> np.ndarray:
        """The little-endian uint64 of the eight bytes at each of ``pos``."""
        return self.words[pos]


def _long_varints(buf: Buffer, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, length in bytes) of the varints at ``pos`` (any length, one word at a time)."""
    w = buf.word(pos)
    ends = ~w & _HIGH  # the high bit of each byte that ends a varint
    low = ends & (~ends + _ONE)  # the first of them (0 when the first 8 bytes all continue)
    x = w & ((low << _ONE) - _ONE) & _LOW7
    x = ((x & _U64(0x7F007F007F007F00)) >> _U64(1)) | (x & _U64(0x007F007F007F007F))
    x = ((x & _U64(0x3FFF00003FFF0000)) >> _U64(2)) | (x & _U64(0x00003FFF00003FFF))
    x = ((x & _U64(0x0FFFFFFF00000000)) >> _U64(4)) | (x & _U64(0x000000000FFFFFFF))
    # low is 2**(8k+7) for a varint of k+1 bytes: frexp's exponent is 8k+8.
    length = (np.frexp(low.astype(np.float64))[1] >> 3).astype(np.int64)
    longer = np.flatnonzero(ends == 0)
    if longer.size:  # nine or ten bytes (negative int64s, large uint64s)
        p = pos[longer]
        b8 = buf.byte[p + 8].astype(np.uint64)
        b9 = buf.byte[p + 9].astype(np.uint64)
        if ((b8 >= 0x80) & (b9 >= 0x80)).any():
            raise WireError("a varint longer than 10 bytes")
        tenth = b8 >= 0x80  # a tenth byte: the varint's 64th bit
        x[longer] |= ((b8 & _U64(0x7F)) << _U64(56)) | ((b9 & _ONE & tenth) << _U64(63))
        length[longer] = np.where(tenth, 10, 9)
    return x, length


def varints(buf: Buffer, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value as uint64, position after it) of the varint at each of ``pos``."""
    b = buf.byte[pos]
    value = b.astype(np.uint64)
    after = pos + 1
    if (b >= 0x80).any():
        multi = np.flatnonzero(b >= 0x80)
        v, length = _long_varints(buf, pos[multi])
        value[multi] = v
        after[multi] = pos[multi] + length
    return value, after


def varint_ends_at(buf: Buffer, pos: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether the varint at each of ``pos`` is exactly ``buf[pos:end]`` (bool; False for
    varints longer than 8 bytes, which the caller reads another way)."""
    length = end - pos
    fits = (length >= 1) & (length <= 8)
    bits = (np.clip(length, 1, 8) * 8 - 1).astype(np.uint64)
    last = _ONE << bits  # the high bit of the varint's last byte
    ends = ~buf.word(pos) & _HIGH
    return fits & ((ends & ((last << _ONE) - _ONE)) == last)


@dataclass
class Round:
    """The ``k``-th field of each message that has one (one entry per such message)."""

    #: Which messages (indexes into the ``starts`` given to ``fields``).
    rows: np.ndarray
    #: The field's key (field number << 3 | wire type), uint64.
    key: np.ndarray
    #: A varint field's value, a length-delimited field's length (uint64); 0 for fixed fields.
    value: np.ndarray
    #: Where the field's value starts (right after its key).
    start: np.ndarray
    #: Where a length-delimited field's bytes start (after its length); ``start`` for others.
    payload: np.ndarray
    #: Where the field ends.
    end: np.ndarray


def fields(buf: Buffer, starts: np.ndarray, ends: np.ndarray) -> Iterator[Round]:
    """Yield the fields of the messages ``buf[starts[i]:ends[i]]``, one round at a time: round
    ``k`` holds the ``k``-th field of every message that has that many. ``WireError`` when a
    message is not well-formed (a field runs past its end, an unknown wire type)."""
    rows = np.flatnonzero(starts < ends)
    pos = starts[rows]
    end = ends[rows]
    while rows.size:
        key, start = varints(buf, pos)
        wire = key & _U64(7)
        first = int(wire[0])
        uniform = first in (0, 2) and bool((wire == first).all())
        if uniform or bool(((wire == 0) | (wire == 2)).all()):
            value, payload = varints(buf, start)
        else:
            known = (wire == 0) | (wire == 1) | (wire == 2) | (wire == 5)
            if not known.all():
                i = int(np.flatnonzero(~known)[0])
                raise WireError(f"unknown wire type {int(wire[i])} (field {int(key[i] >> 3)})")
            value = np.zeros(len(rows), dtype=np.uint64)
            payload = start.copy()
            some = np.flatnonzero((wire == 0) | (wire == 2))
            if some.size:
                value[some], payload[some] = varints(buf, start[some])
        if (payload > end).any():
            raise WireError("a varint runs past the end of its message")
        if uniform and first == 0:
            stop = payload
        elif uniform:  # every field length-delimited
            if (value > (end - payload).astype(np.uint64)).any():
                raise WireError("a field runs past the end of its message")
            stop = payload + value.astype(np.int64)
        else:
            delimited = wire == 2
            if (delimited & (value > (end - payload).astype(np.uint64))).any():
                raise WireError("a field runs past the end of its message")
            stop = payload + np.where(delimited, value, 0).astype(np.int64)
            stop[wire == 1] += 8
            stop[wire == 5] += 4
            if (stop > end).any():
                raise WireError("a field runs past the end of its message")
        yield Round(rows, key, value, start, payload, stop)
        more = stop < end
        if not more.all():
            rows, stop, end = rows[more], stop[more], end[more]
        pos = stop


def key(number: int, wire: int) -> int:
    """The key of field ``number`` with wire type ``wire``."""
    return number << 3 | wire
