"""Read a Kineto chrome trace in pieces, so a big trace never sits in memory whole.

The file (gzip or not) is read ``CHUNK_BYTES`` (512 KiB) of JSON at a time. The object's head,
up to the ``[`` that opens ``traceEvents``, is set aside; each piece of the events array is cut after a
complete event and decoded on its own (``[`` + piece + ``]``), so at any time only one piece's
bytes and typed events are held. The last piece is decoded with the head and the object's tail
(``]`` and the keys after the events, such as ``baseTimeNanoseconds``), which gives the trace's
own fields.

A cut is tried after a ``}`` followed by ``,`` and ``{``, the last such place in the piece. Such
a cut can fall inside an event (a nested object) or inside a string; then ``[`` + piece + ``]``
is not valid JSON, because the trace is valid JSON and its grammar is deterministic, and an
earlier place is tried. Anything unexpected (no ``traceEvents`` key in the head, no valid cut,
a truncated or malformed file) raises ``NotStreamable``: the caller then reads the file whole,
which names the problem exactly.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import msgspec

from perfkit_core.events import inflate_limit
from perfkit_torch.kineto_format import _DECODER, Event, _Trace

#: Bytes of JSON read and decoded at a time. A piece's decoded events take several times its
#: bytes while it is turned into columns, and each column is one pass over them: 512 KiB keeps
#: those objects in the processor's cache between passes (the 220 MB benchmark trace loaded
#: about 20% faster than with 2 MiB pieces; 128 KiB pieces were slower again) and a piece's
#: memory at a few MB.
CHUNK_BYTES = 512 * 2**10
#: How far into the file the ``traceEvents`` key is looked for.
HEAD_LIMIT = 8 * 2**20
#: How far back from a piece's end cuts are looked for, and how many are tried.
CUT_WINDOW = 1 * 2**20
CUT_TRIES = 8

_HEAD_RE = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT_RE = re.compile(rb"\}\s*,\s*(?=\{)")
_EVENTS = msgspec.json.Decoder(list[Event])


#: What the decoder raises for bytes it cannot read (invalid UTF-8, nesting too deep): such a
#: file is read whole instead, by the reader that names the problem in one line.
_UNREADABLE = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError)


class NotStreamable(Exception):
    """This file cannot be read in pieces; read it whole."""


class StreamedTrace:
    """The events of a Kineto trace in pieces (``pieces()``), then its own fields (``trace``,
    set once every piece was yielded; its ``traceEvents`` is empty)."""

    def __init__(self, path: Path, chunk_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.trace: _Trace | None = None
        self.events_in_file = 0

    def _blocks(self) -> Iterator[bytes]:
        """The file's bytes, inflated when it is gzip (and refused with a ``TraceError`` once
        past its ``InflateLimit``: a gzip bomb, or ``PERFKIT_MAX_BYTES``)."""
        try:
            with open(self.path, "rb") as raw:
                gz = raw.read(2) == b"\x1f\x8b"
                raw.seek(0)
                limit = inflate_limit(os.fstat(raw.fileno()).st_size, in_memory=False)
                fh = gzip.GzipFile(fileobj=raw) if gz else raw
                inflated = 0
                while True:
                    block = fh.read(self.chunk_bytes)
                    if not block:
                        return
                    if gz:
                        inflated += len(block)
                        limit.check(self.path, inflated)
                    yield block
        except (OSError, EOFError, zlib.error) as exc:
            raise NotStreamable(str(exc)) from None

    def pieces(self) -> Iterator[list[Event]]:
        """Yield the trace's events, a piece at a time, in file order."""
        # ``buffer`` holds the events array from its ``[`` on: a piece is decoded in place by
        # turning the ``,`` after its last event into ``]``.
        buffer = bytearray()
        head = None
        for block in self._blocks():
            buffer += block
            if head is None:
                found = _HEAD_RE.search(buffer)
                if found is None:
                    if len(buffer) > max(HEAD_LIMIT, 4 * self.chunk_bytes):
                        raise NotStreamable("no traceEvents in the head of the file")
                    continue
                head = bytes(buffer[: found.end() - 1])
                try:
                    _DECODER.decode(head + b"[]}")
                except _UNREADABLE:
                    raise NotStreamable("traceEvents is not a key of the trace object") from None
                del buffer[: found.end() - 1]
            if len(buffer) < self.chunk_bytes:
                continue
            events, buffer = self._cut(buffer)
            self.events_in_file += len(events)
            yield events
            del events
        if head is None:
            raise NotStreamable("no traceEvents in the file")
        try:
            last = _DECODER.decode(head + bytes(buffer))
        except _UNREADABLE:
            raise NotStreamable("the end of the file does not close the trace") from None
        events = last.traceEvents or []
        last.traceEvents = []
        self.trace = last
        self.events_in_file += len(events)
        if self.events_in_file == 0:
            raise NotStreamable("no events")
        yield events

    def _cut(self, buffer: bytearray) -> tuple[list[Event], bytearray]:
        """Decode the complete events at the start of ``buffer`` (which starts with ``[``);
        return them and the rest, which starts with ``[`` again."""
        tries = 0
        # The last cut is nearly always within the last event (a few hundred bytes): the
        # places are looked for in windows that widen back from the end, each window's new
        # places (those before the last window's start) last first.
        end = len(buffer)
        for window in (4 * 1024, 64 * 1024, CUT_WINDOW):
            start = max(len(buffer) - window, 1)
            if start >= end:
                continue
            places = [m for m in _CUT_RE.finditer(buffer, start) if m.start() < end]
            for match in reversed(places):
                comma = buffer.index(b",", match.start())
                buffer[comma] = ord("]")
                try:
                    events = _EVENTS.decode(memoryview(buffer)[: comma + 1])
                except _UNREADABLE:
                    buffer[comma] = ord(",")
                    tries += 1
                    if tries >= CUT_TRIES:
                        break
                    continue
                rest = bytearray(b"[")
                rest += memoryview(buffer)[match.end() :]
                return events, rest
            if tries >= CUT_TRIES:
                break
            end = start
        raise NotStreamable("no place to cut the events array")
