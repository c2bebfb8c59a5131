"""Views' DataFrames for reading: times in ms (or another unit), bytes in KiB/MiB/GiB, the
report's column headers. The view itself is left as the API promises it (times in ns)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfkit_core.report.format import TIME_UNITS, column_label, column_unit, header_label

if TYPE_CHECKING:
    import pandas as pd

#: Binary units for byte columns, largest first.
_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def readable(frame: pd.DataFrame, unit: str = "ms") -> pd.DataFrame:
    """Return a copy of ``frame`` (a view's DataFrame, ``run.summary(...)``) for reading.

    Columns are renamed to the headers the report gives them (the view's
    ``frame.attrs["labels"]``, with the unit: ``CPU total (ms)``); times (``*_ns``) are in
    ``unit`` (``s``, ``ms``, ``us`` or ``ns``) rounded to 3 decimals; bytes (``*_bytes``) in
    the largest of GiB, MiB, KiB that a value of the column fills, rounded to 3 decimals;
    percentages rounded to 2 decimals, other fractional numbers to 3. Text, counts and the
    index are kept; columns with no value at all (GPU columns of a CPU run) are left out, as the
    report leaves them out. ``attrs["columns"]`` maps each new header to the view's column
    name, and the view's note is kept. ``frame`` itself is not changed.
    """
    import numpy as np

    if unit not in TIME_UNITS:
        raise ValueError(f"unit must be one of {', '.join(TIME_UNITS)}, not {unit!r}")
    labels = frame.attrs.get("labels") or {}
    out = frame.copy()
    names: dict[str, str] = {}
    for key in frame.columns:
        column = str(key)
        values = frame[key]
        if len(values) and values.isna().all():
            out = out.drop(columns=key)
            continue
        kind = column_unit(column, values)
        label = labels.get(column) or column_label(column)
        numeric = values.dtype.kind in "iuf"
        if kind == "time" and numeric:
            out[key] = (values.astype(np.float64) / TIME_UNITS[unit]).round(3)
            header = header_label(label, "time", unit)
        elif kind == "bytes" and numeric:
            largest = float(np.nanmax(np.abs(values.to_numpy(np.float64)))) if len(values) else 0
            name, size = next(((n, s) for n, s in _BYTE_UNITS if largest >= s), ("B", 1))
            out[key] = (values.astype(np.float64) / size).round(3)
            header = f"{label} ({name})"
        elif kind == "pct" and numeric:
            out[key] = values.round(2)
            header = header_label(label, "pct", unit)
        else:
            if values.dtype.kind == "f":
                out[key] = values.round(3)
            header = label
        if header in names:
            header = f"{header} [{column}]"
        names[header] = column
    out.columns = list(names)
    out.attrs = {"columns": names}
    if frame.attrs.get("note"):
        out.attrs["note"] = frame.attrs["note"]
    return out
