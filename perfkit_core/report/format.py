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


#: Header labels of view columns whose key means one thing in every view; a view gives labels
#: of its own in ``frame.attrs["labels"]``. A percentage's label names its denominator.
COLUMN_LABELS: dict[str, str] = {
    "cpu_ratio_pct": "CPU time (% of step)",
    "ratio_pct": "% of step",
    "step_pct": "% of step",
    "gpu_share_pct": "% of the steps' GPU time",
    "utilization_pct": "Busy (% of step)",
    "kernel_utilization_pct": "Kernel busy (% of step)",
    "occupancy_pct": "Est. achieved occupancy (% of the SM's warps)",
    "sm_efficiency_pct": "Est. SM efficiency (% of step)",
    "gpu_busy_pct": "GPU busy (% of step)",
    "empty_pct": "Queue empty (% of the stream's launch span)",
    "wait_pct": "Waiting (% of the collective's time)",
    "share_pct": "Share (% of the difference)",
    "delta_pct": "Delta (% of the baseline)",
    "spread_pct": "Spread (IQR, % of the median)",
    "overhead_pct": "Profiler overhead (% of step)",
    "offset_ns": "Start",
    "cpu_avg_ns": "CPU avg/call",
    "cpu_max_ns": "CPU max/call",
    "cpu_min_ns": "CPU min/call",
    "gpu_avg_ns": "GPU avg/call",
    "gpu_max_ns": "GPU max/call",
    "gpu_min_ns": "GPU min/call",
}
#: Column keys that hold a figure over all the profiled steps (not per step): their header
#: says so (``CPU total over 20 steps``).
WHOLE_RUN_SUFFIXES = ("_total_ns", "_self_ns")
WHOLE_RUN_KEYS = frozenset({"calls", "flops", "bytes", "launches", "allocations", "frees"})


def column_label(key: str) -> str:
    """Header for a column: ``cpu_total_ns`` -> ``CPU total``; the unit is added by the renderer.
    Keys in ``COLUMN_LABELS`` take their label from there; a device's busy share in a timeline
    (``gpu:0_busy_pct``) reads ``GPU:0 busy (% of the slice)``."""
    if key in COLUMN_LABELS:
        return COLUMN_LABELS[key]
    if key.endswith("_busy_pct") and ":" in key:
        device = key[: -len("_busy_pct")]
        return f"{device.split(':')[0].upper()}:{device.split(':', 1)[1]} busy (% of the slice)"
    base = key
    for suffix in ("_ns", "_pct"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    special = {
        "gb_per_s": "GB/s",
        "algbw_gb_per_s": "Algbw (GB/s)",
        "gflops_per_s": "GFLOP/s",
        "flops": "FLOPs",
        "gflops": "GFLOP",
        "achieved_tflops_per_s": "Achieved TFLOP/s",
        "achieved_tb_per_s": "Achieved TB/s",
        "peak_tflops_per_s": "Peak TFLOP/s",
        "peak_tb_per_s": "Peak TB/s",
        "intensity_flop_per_byte": "Intensity (FLOP/B)",
    }
    if base in special:
        return special[base]
    # ``gpu:0_busy`` -> ``GPU:0 busy``: a device name keeps its index.
    words = [w.upper() if w.split(":")[0] in _UPPER else w for w in base.split("_")]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def header_label(label: str, unit: str, time_unit: str) -> str:
    """A column header with its unit: ``CPU total (ms)``; a percentage's label already says
    what it is a percentage of (``% of step``), else ``(%)`` is added."""
    if unit == "time":
        return f"{label} ({time_unit})"
    if unit == "pct":
        return label if "%" in label else f"{label} (%)"
    return label


#: The column of a table with per-row units that names each row's unit (see ``cell_text``).
UNIT_COLUMN = "unit"


def cell_text(table: Any, i: int, j: int, time_unit: str) -> str:
    """The text of cell (row ``i``, column ``j``) of a report table: ``format_value`` in the
    column's unit, or, in a table with per-row units (``table.row_units``), numbers in the
    row's unit and the row's ``unit`` cell naming it (``ms`` for a time row)."""
    column = table.columns[j]
    value = table.rows[i][j]
    row_unit = table.row_units[i] if getattr(table, "row_units", None) else ""
    if row_unit and column.key == UNIT_COLUMN:
        return time_unit if row_unit == "time" else str(value)
    if row_unit and column.unit in ("number", "count"):
        return format_value(value, row_unit, time_unit)
    return format_value(value, column.unit, time_unit)


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


def per_step_value(ns: float, step_ns: float, time_unit: str, of: str = "the step") -> str:
    """``1.234 ms per step (5.6% of the step)``: a time per step in the page's unit, and its
    share of ``step_ns``, the step ``of`` names."""
    share = f" ({100.0 * ns / step_ns:.1f}% of {of})" if step_ns else ""
    return f"{ns / TIME_UNITS[time_unit]:.3f} {time_unit} per step{share}"


#: How a share of the step names its denominator when that is the step timed without the
#: profiler (the step a saving stated on that basis is a share of).
UNPROFILED_STEP = "the step without the profiler"


def saving_step(finding: Any) -> tuple[float, str]:
    """(the step a finding's saving is a share of, ns; how to name it): the step the step
    timer timed without the profiler when the saving was stated on it (``evidence["basis"]``
    is ``unprofiled``: the severity is rated on it too), else the profiled mean step."""
    evidence = finding.evidence
    basis_step = evidence.get("basis_step_ns")
    unprofiled = evidence.get("basis") == "unprofiled"
    if unprofiled and isinstance(basis_step, (int, float)) and basis_step > 0:
        return float(basis_step), UNPROFILED_STEP
    return float(evidence.get("step_time_ns") or 0), "the step"


def saving_text(finding: Any, time_unit: str) -> str:
    """``1.234 ms per step (5.6% of the step)``: a finding's estimated saving per step and its
    share of the step it was stated on (``saving_step``), ``up to ...`` for a saving that is
    the most its model allows (``upper_bound``)."""
    step_ns, of = saving_step(finding)
    bound = "up to " if upper_bound(finding) else ""
    return bound + per_step_value(finding.saving_ns, step_ns, time_unit, of)


def upper_bound(finding: Any) -> bool:
    """Whether a finding's saving is the most its model allows (``Finding.upper_bound``)."""
    return bool(getattr(finding, "upper_bound", False))
