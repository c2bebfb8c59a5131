"""Gzip traces inflated with a cap: no file inflates to more than this process can hold.

A gzip member can inflate about a thousand times: a 2 MB file can hold 2 GiB. A trace is
inflated a piece at a time and refused in one line as soon as it passes its ``InflateLimit``:
a cap set with the ``PERFKIT_MAX_BYTES`` environment variable, else, for a trace read whole
into memory, a quarter of the memory this process can still use (``memory_headroom``); and,
unless ``PERFKIT_MAX_BYTES`` is set, 100 times the file's size (real traces inflate 10 to 30
times).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from perfkit_core.errors import TraceError

#: Environment variable setting the most bytes a gzip trace may inflate to (a number of bytes,
#: or with a unit: ``512M``, ``8G``), instead of the cap derived from free memory.
MAX_BYTES_ENV = "PERFKIT_MAX_BYTES"
#: Share of the memory this process can still use that one inflated trace may take: its bytes
#: are held twice while their pieces are joined, and the events decoded from them take about as
#: much again.
MEMORY_SHARE = 0.25
#: Bytes inflated at a time.
CHUNK_BYTES = 4 * 2**20
#: A file inflating more than this many times its size, and past ``BOMB_FLOOR`` bytes, is refused
#: as a gzip bomb (unless ``PERFKIT_MAX_BYTES`` is set): Kineto and Paddle traces inflate 10 to 30
#: times, the gzip format's limit is about 1,032.
BOMB_RATIO = 100
BOMB_FLOOR = 64 * 2**20
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _meminfo_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (Linux), else psutil's, else None."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # no psutil, or a system it cannot read
        return None


def _status_bytes(key: bytes) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmSize``, ``VmData``) in bytes, or None."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(key + b":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """Bytes the cgroup (v2) of this process may still take: ``memory.max`` less
    ``memory.current``; None when there is no limit or no cgroup file to read."""
    try:
        with open("/proc/self/cgroup") as fh:
            line = next((x for x in fh if x.startswith("0::")), None)
        if line is None:
            return None
        folder = Path("/sys/fs/cgroup") / line.strip()[3:].lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((folder / "memory.current").read_text().strip())
    except (OSError, ValueError, StopIteration):
        return None


def memory_headroom() -> int | None:
    """Bytes this process can still allocate, as far as can be told: the least of the system's
    available memory, the room its cgroup leaves, and the room its address-space and data
    limits (``ulimit -v``, ``ulimit -d``) leave; None when none can be read."""
    rooms = [_meminfo_available(), _cgroup_room()]
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        resource = None  # type: ignore[assignment]
    if resource is not None:
        for limit, used in ((resource.RLIMIT_AS, b"VmSize"), (resource.RLIMIT_DATA, b"VmData")):
            soft = resource.getrlimit(limit)[0]
            if soft != resource.RLIM_INFINITY:
                rooms.append(soft - (_status_bytes(used) or 0))
    known = [max(int(r), 0) for r in rooms if r is not None]
    return min(known) if known else None


def parse_size(text: str) -> int:
    """``"512M"`` -> 536870912: a byte count, with an optional K, M, G or T (powers of 1024).
    Raises ``ValueError`` for anything else."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in _UNITS else ""
    number = float(value[: len(value) - len(unit)])
    if not number > 0:
        raise ValueError(f"not a positive size: {text!r}")
    return int(number * _UNITS[unit])


@dataclass(frozen=True)
class InflateLimit:
    """How far a gzip file of ``compressed`` bytes may inflate: ``cap`` bytes (None: no cap;
    ``why`` says where it comes from) and, unless the cap was set by ``PERFKIT_MAX_BYTES``,
    ``bomb`` bytes (``BOMB_RATIO`` times its size, at least ``BOMB_FLOOR``)."""

    compressed: int
    cap: int | None
    why: str
    bomb: int | None

    def check(self, path: Path, inflated: int) -> None:
        """Raise ``TraceError`` when ``inflated`` bytes are past the cap or the bomb limit."""
        if self.cap is not None and inflated > self.cap:
            raise TraceError(
                path,
                f"inflates to more than {megabytes(self.cap)} ({self.why}): a gzip bomb, or a "
                f"trace too big to read in memory here; set {MAX_BYTES_ENV} (such as 64G) to "
                "read it anyway",
            )
        if self.bomb is not None and inflated > self.bomb:
            raise TraceError(
                path,
                f"inflates more than {BOMB_RATIO} times, to over {megabytes(self.bomb)} from "
                f"{megabytes(self.compressed)}: a gzip bomb (traces inflate 10 to 30 times); set "
                f"{MAX_BYTES_ENV} (such as 64G) to read it anyway",
            )


def inflate_limit(compressed: int, *, in_memory: bool = True) -> InflateLimit:
    """The ``InflateLimit`` of a gzip file of ``compressed`` bytes. ``PERFKIT_MAX_BYTES`` sets
    the cap when set; else a file read whole into memory (``in_memory``) may take a quarter of
    ``memory_headroom``, and one read in pieces (which holds one piece at a time) has no cap but
    the bomb limit. Raises ``TraceError`` for a ``PERFKIT_MAX_BYTES`` that is not a size."""
    setting = os.environ.get(MAX_BYTES_ENV)
    if setting:
        try:
            cap = parse_size(setting)
        except ValueError:
            raise TraceError(
                MAX_BYTES_ENV, f"{setting!r} is not a size in bytes (such as 512M or 8G)"
            ) from None
        return InflateLimit(compressed, cap, f"{MAX_BYTES_ENV}={setting}", None)
    bomb = max(BOMB_FLOOR, BOMB_RATIO * compressed)
    room = memory_headroom() if in_memory else None
    if room is None:
        return InflateLimit(compressed, None, "no cap", bomb)
    why = f"a quarter of the {megabytes(room)} of memory this process has free"
    return InflateLimit(compressed, int(room * MEMORY_SHARE), why, bomb)


def megabytes(nbytes: float) -> str:
    """``nbytes`` as "12.3 MB" (10**6 bytes)."""
    return f"{nbytes / 1e6:,.1f} MB"


def gunzip(path: Path, data: bytes, limit: InflateLimit | None = None) -> bytes:
    """Return the inflated bytes of ``data`` (the gzip file ``path``; several concatenated
    members are joined, as ``gunzip`` does, zero padding after the last is ignored).

    Inflated ``CHUNK_BYTES`` at a time, and refused with a ``TraceError`` as soon as it is past
    ``limit`` (default: ``inflate_limit(len(data))``). Raises ``TraceError`` for broken gzip
    data too."""
    limit = limit or inflate_limit(len(data))
    parts: list[bytes] = []
    inflated = 0
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        pending = rest
        while pending and not inflater.eof:
            try:
                part = inflater.decompress(pending, CHUNK_BYTES)
            except zlib.error as exc:
                raise TraceError(path, f"broken gzip data: {exc}") from None
            inflated += len(part)
            parts.append(part)
            pending = inflater.unconsumed_tail
            try:
                limit.check(path, inflated)
            except TraceError:
                parts.clear()
                raise
        if not inflater.eof:
            raise TraceError(
                path, "broken gzip data: the file ends before the compressed data does"
            )
        rest = inflater.unused_data
        if rest[:2] != b"\x1f\x8b" and rest.strip(b"\x00"):
            raise TraceError(
                path,
                f"{len(rest)} bytes that are not gzip data follow the compressed trace "
                "(a file appended to, or two files joined)",
            )
        if rest[:2] != b"\x1f\x8b":
            break  # zero padding after the last member, which gunzip also ignores
    return parts[0] if len(parts) == 1 else b"".join(parts)
