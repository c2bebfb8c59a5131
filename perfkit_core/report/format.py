"""How report values are written: units, header labels and cells, shared by the text and HTML
renderers so that a number reads the same in both."""

from __future__ import annotations

import math
from typing import Any

from perfkit_core.errors import printable

#: Time units a report can use, with their size in ns.
TIME_UNITS: dict[str, float] = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
#: Words written in capitals in column labels.
_UPPER = {"cpu", "gpu", "ips", "sm"}


def column_unit(key: str, values: Any = None) -> str:
    """The unit of a view column, from its name (and dtype): ``time`` (``*_ns``), ``pct``
    (``*_pct``), ``bytes`` (``*bytes``), ``rate`` (``*_per_s``), ``count`` (integers),
    ``number`` (other numbers) or ``text``."""
    if key.endswith("_ns"):
        return "time"
    if key.endswith("_pct"):
        return "pct"
    if key.endswith("_per_s"):
        return "rate"
    if key == "bytes" or key.endswith("_bytes"):
        return "bytes"
    if values is not None:
        kind = getattr(getattr(values, "dtype", None), "kind", "O")
        if kind in "iu":
            return "count"
        if kind == "f":
            return "number"
        if kind == "b":
            return "text"
    return "text"


def column_label(key: str) -> str:
    """Header for a column: ``cpu_total_ns`` -> ``CPU total``; the unit is added by the renderer."""
    base = key
    for suffix in ("_ns", "_pct"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    special = {
        "gb_per_s": "GB/s",
        "algbw_gb_per_s": "Algbw (GB/s)",
        "gflops_per_s": "GFLOP/s",
        "flops": "FLOPs",
    }
    if base in special:
        return special[base]
    # ``gpu:0_busy`` -> ``GPU:0 busy``: a device name keeps its index.
    words = [w.upper() if w.split(":")[0] in _UPPER else w for w in base.split("_")]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def header_label(label: str, unit: str, time_unit: str) -> str:
    """A column header with its unit: ``CPU total (ms)``, ``CPU ratio (%)``."""
    if unit == "time":
        return f"{label} ({time_unit})"
    if unit == "pct":
        return f"{label} (%)"
    return label


#: Binary size units for byte counts, largest first.
_SIZES = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def bytes_text(value: float) -> str:
    """``31.7 GiB``, ``1.5 KiB``, ``424 B``: a byte count in the largest unit it fills."""
    for name, size in _SIZES:
        if abs(value) >= size:
            return f"{value / size:.1f} {name}"
    return f"{round(value)} B"


def format_value(value: Any, unit: str, time_unit: str = "ms") -> str:
    """Write ``value`` of ``unit`` for a reader: times in ``time_unit`` with 3 decimals,
    percentages with 2, counts whole, bytes in B/KiB/MiB/GiB with one decimal, other numbers
    with 3 decimals (4 significant digits below 1); ``-`` for a value that was not measured.
    Text has its control characters escaped (``\\x1b``), so a name cannot drive a terminal."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "time":
        return f"{float(value) / TIME_UNITS[time_unit]:.3f}"
    if unit == "pct":
        return f"{float(value):.2f}"
    if isinstance(value, (int, float)):
        number = float(value)
        if unit == "bytes":
            return bytes_text(number)
        if unit == "count" or number.is_integer():
            return str(round(number))
        return f"{number:.3f}" if abs(number) >= 1 else f"{number:.4g}"
    return printable(str(value).replace("\n", " <- "))


def saving_text(finding: Any, time_unit: str) -> str:
    """``1.234 ms (5.6% of step time)``: a finding's estimated saving and its share of the steps."""
    step = finding.evidence.get("step_time_ns") or 0
    share = f" ({100.0 * finding.saving_ns / step:.1f}% of step time)" if step else ""
    return f"{finding.saving_ns / TIME_UNITS[time_unit]:.3f} {time_unit}{share}"
