"""Range checks for numbers read from traces: nothing read may silently wrap around or default.

The event table stores times as int64 nanoseconds and ids as int64 (ranks as int32). numpy
wraps an out-of-range float silently when casting and raises ``OverflowError`` for a Python
int that does not fit; adapters check what they read with these helpers first and raise
``TraceError`` naming the file, the event and the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from perfkit_core.errors import TraceError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
#: Largest magnitude of a time or a duration, in ns (2**62 ns, about 146 years). Within it the
#: end of an event (start + duration) and the difference of any two times still fit in int64.
TIME_LIMIT_NS = 2**62
#: The same limit in microseconds, the unit of chrome-trace ``ts`` and ``dur``.
TIME_LIMIT_US = TIME_LIMIT_NS / 1000.0


def first_outside(values: np.ndarray, low: float, high: float) -> int | None:
    """Return the index of the first value outside ``[low, high]`` (NaN counts as outside), or
    None when every value is inside."""
    inside = (values >= low) & (values <= high)
    if inside.all():
        return None
    return int(np.argmin(inside))


def check_times_us(
    path: str | os.PathLike[str],
    start_us: np.ndarray,
    dur_us: np.ndarray,
    *,
    base_ns: int = 0,
    describe: Callable[[int], str] = lambda i: f"event {i}",
) -> None:
    """Raise ``TraceError`` unless every start (``base_ns`` + ``start_us`` in us) and every
    duration (``dur_us``, us) is finite and within ``TIME_LIMIT_NS``; ``describe(i)`` names row
    ``i`` in the message. Negative durations are allowed here (adapters clamp them to 0)."""
    if not -TIME_LIMIT_NS <= base_ns <= TIME_LIMIT_NS:
        raise TraceError(path, f"the time origin {base_ns} ns is out of range ({_limit_text()})")
    bad = first_outside(dur_us, -TIME_LIMIT_US, TIME_LIMIT_US)
    if bad is not None:
        raise TraceError(
            path, f"{describe(bad)}: dur {dur_us[bad]:g} us is out of range ({_limit_text()})"
        )
    low = (-TIME_LIMIT_NS - base_ns) / 1000.0
    high = (TIME_LIMIT_NS - base_ns) / 1000.0
    bad = first_outside(start_us, low, high)
    if bad is not None:
        origin = f" after the time origin {base_ns} ns" if base_ns else ""
        raise TraceError(
            path,
            f"{describe(bad)}: ts {start_us[bad]:g} us{origin} is out of range ({_limit_text()})",
        )


def check_int_range(
    path: str | os.PathLike[str],
    value: int,
    what: str,
    *,
    low: int = INT64_MIN,
    high: int = INT64_MAX,
) -> int:
    """Return ``value`` when ``low <= value <= high``; ``TraceError`` naming ``what`` otherwise."""
    if not low <= value <= high:
        raise TraceError(path, f"{what} {value} is out of range ({low} to {high})")
    return value


def check_values_range(
    path: str | os.PathLike[str],
    values: np.ndarray,
    what: str,
    *,
    low: int = INT64_MIN,
    high: int = INT64_MAX,
    describe: Callable[[int], str] = lambda i: f"event {i}",
) -> None:
    """Raise ``TraceError`` naming the first of ``values`` (a column ``what``) outside
    ``[low, high]``, as ``describe(i)`` names its row; return None when all are inside."""
    bad = first_outside(values, low, high)
    if bad is not None:
        raise TraceError(
            path, f"{describe(bad)}: {what} {values[bad]} is out of range ({low} to {high})"
        )


#: An address written as decimal or ``0x`` hex text.
_ADDRESS_RE = re.compile(r"^\s*(?:0[xX][0-9a-fA-F]+|[0-9]+)\s*$")


def address_column(values: list[Any]) -> np.ndarray:
    """The ``address`` column of memory events from what a profiler wrote for each (an int, or
    decimal or ``0x`` hex text): an address of up to 64 bits kept as the int64 with the same
    bits (addresses only pair a free with its allocation, so only their identity matters);
    -1 for None, other text, or a number outside 0..2**64-1 (the event is then paired by its
    size, as when no address was recorded)."""
    try:  # the usual case: every address an int in range, read in one pass
        return np.fromiter(values, np.uint64, len(values)).view(np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full(len(values), -1, dtype=np.int64)
    for i, value in enumerate(values):
        if type(value) is str and _ADDRESS_RE.match(value):
            value = int(value, 0) if value.strip()[:2] in ("0x", "0X") else int(value)
        if type(value) is int and 0 <= value < 2**64:
            out[i] = value - 2**64 if value > INT64_MAX else value
    return out


def us_to_ns(values_us: np.ndarray) -> np.ndarray:
    """Microsecond floats (already range-checked) to int64 ns, exact for whole microseconds even
    at epoch-sized values (the fraction is rounded separately)."""
    arr = np.asarray(values_us, dtype=np.float64)
    whole = np.floor(arr)
    return whole.astype(np.int64) * 1000 + np.rint((arr - whole) * 1000).astype(np.int64)


def _limit_text() -> str:
    return f"times and durations must stay within {TIME_LIMIT_NS / 1e9 / 86400 / 365.25:.0f} years"


def decode_error_reason(exc: BaseException, data: bytes, what: str) -> str:
    """Return a one-line reason for ``exc``, raised while decoding the JSON ``data`` (msgspec's
    ``ValidationError`` or ``DecodeError``, ``UnicodeDecodeError``, ``RecursionError``).

    ``what`` (such as "not a Kineto trace") starts the reason for a document of the wrong shape.
    """
    import msgspec

    message = str(exc)
    # msgspec reports bad UTF-8 in a string it decodes itself as a DecodeError, with no offset.
    if isinstance(exc, UnicodeDecodeError) or message.startswith("Invalid UTF-8"):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            return (
                f"text that is not UTF-8: byte 0x{data[bad.start]:02x} at offset {bad.start} "
                "(JSON must be UTF-8)"
            )
        reason = getattr(exc, "reason", message)
        return f"a string that is not valid Unicode ({reason}): JSON must be UTF-8"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to read (arrays or objects thousands of levels down)"
    if isinstance(exc, msgspec.ValidationError):
        at = re.search(r" - at `(.*)`$", message)
        where = f" at {at.group(1)}" if at else ""
        if re.match(r"Expected `int` [<>]=", message):
            return f"an integer out of range{where} (the event table holds 64-bit integers)"
        if message.startswith("Number out of range"):
            return f"a number out of range{where} (larger than a 64-bit float)"
        return f"{what}: {message}"
    if "truncated" in message.lower():
        return "truncated JSON: the file ends before the trace does"
    return f"malformed JSON: {message}"


def note_skipped(
    path: str | os.PathLike[str], accounting: dict[str, Any], skipped: dict[str, int]
) -> None:
    """Record the events an adapter skipped, ``{reason: count}``, in ``accounting["skipped"]``
    (the run's ``meta["accounting"]``, which reports show) and say so once with a one-line
    ``TraceWarning`` naming ``path``. Nothing happens when every count is 0."""
    import warnings

    from perfkit_core.errors import TraceWarning, printable

    skipped = {reason: int(n) for reason, n in skipped.items() if n}
    if not skipped:
        return
    recorded = accounting.setdefault("skipped", {})
    for reason, n in skipped.items():
        recorded[reason] = recorded.get(reason, 0) + n
    details = "; ".join(f"{n:,} {reason}" for reason, n in skipped.items())
    warnings.warn(
        TraceWarning(
            f"{printable(os.fspath(path))}: skipped {sum(skipped.values()):,} events: {details}"
        ),
        stacklevel=3,
    )
