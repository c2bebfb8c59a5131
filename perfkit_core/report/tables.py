"""What a report leaves out of a view's table, and how it labels it: columns nothing was
measured in, rows that are 0 throughout, columns that repeat the name, and headers of figures
over all the steps; and the tables a report derives from a view's (its rows in another order,
for a chart)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.report.model import Table

#: Tables a report adds after a view's, its rows in another order, for a chart:
#: id -> (view, title, sort column, columns, rows). ``operator_average`` is MindInsight's chart
#: of the operator types with the highest average time.
DERIVED_TABLES: dict[str, tuple[str, str, str, tuple[str, ...], int]] = {
    "operator_average": (
        "operator",
        "Operators by average time (top 20)",
        "cpu_avg_ns",
        ("name", "calls", "cpu_avg_ns", "gpu_avg_ns"),
        20,
    ),
}


def derived_frames(view: str, frame: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame, int]]:
    """(id, title, table, rows to show) of each of ``DERIVED_TABLES`` of ``view``: its table
    ``frame`` (detail rows left out) sorted by another column, when it has two rows or more."""
    out = []
    for table_id, (source, title, key, columns, rows) in DERIVED_TABLES.items():
        if source != view or key not in frame.columns:
            continue
        if "level" in frame.columns:
            frame = frame[frame["level"] == 0]
        if len(frame) < 2:
            continue
        derived = frame.sort_values([key, "name"], ascending=[False, True], kind="stable")
        derived = derived[[c for c in columns if c in derived.columns]].reset_index(drop=True)
        out.append((table_id, title, derived, rows))
    return out


def drop_empty_columns(table: Table, prefixes: Sequence[str], reason: str) -> None:
    """Remove columns whose key starts with one of ``prefixes`` (``""``: any column) when every
    value is missing, and add ``reason`` to the note when one was removed."""
    drop = [
        i
        for i, c in enumerate(table.columns)
        if i and c.key.startswith(tuple(prefixes)) and all(r[i] is None for r in table.rows)
    ]
    if not drop or not table.rows:
        return
    table.columns = [c for i, c in enumerate(table.columns) if i not in drop]
    table.rows = [[v for i, v in enumerate(r) if i not in drop] for r in table.rows]
    table.note = "; ".join(n for n in (table.note, reason) if n)


def drop_zero_rows(table: Table) -> None:
    """Remove rows whose every number is 0 or not measured, and say so in the note: a CPU run's
    device parts, a phase nothing ran in. A table's ``step`` or ``total`` row always stays."""
    numeric = [
        j
        for j, c in enumerate(table.columns)
        if j and c.unit in ("time", "pct", "count", "number", "bytes")
    ]
    if not numeric or len(table.rows) < 2:
        return
    keep = [
        str(table.rows[i][0]) in ("step", "total")
        or any(table.rows[i][j] not in (None, 0, 0.0) for j in numeric)
        for i in range(len(table.rows))
    ]
    if all(keep):
        return
    dropped = [str(table.rows[i][0]) for i, k in enumerate(keep) if not k]
    table.rows = [r for r, k in zip(table.rows, keep, strict=True) if k]
    if table.levels:
        table.levels = [lv for lv, k in zip(table.levels, keep, strict=True) if k]
    if table.row_units:
        table.row_units = [u for u, k in zip(table.row_units, keep, strict=True) if k]
    shown = ", ".join(dropped[:6]) + (f" and {len(dropped) - 6} more" if len(dropped) > 6 else "")
    reason = f"rows that are 0 throughout are left out ({shown})"
    table.note = "; ".join(n for n in (table.note, reason) if n)


def mark_repeated_columns(table: Table) -> None:
    """Mark the columns that only repeat the name column (``Column.repeats_name``): a text
    column whose every value is part of the row's name (``family`` beside
    ``matmul (forward)``), or a count whose every value is the name's last word (``step``
    beside ``step 2``). Text and HTML leave them out; the JSON keeps them."""
    if not table.rows or not table.columns:
        return
    names = [str(r[0]) for r in table.rows]
    for j, column in enumerate(table.columns):
        if j == 0 or column.key == "unit":
            continue
        values = [r[j] for r in table.rows]
        if column.unit == "text":
            repeated = all(v is None or str(v) in n for v, n in zip(values, names, strict=True))
            repeated &= any(v not in (None, "") for v in values)
        elif column.unit == "count":
            repeated = all(
                v is not None and n.rsplit(" ", 1)[-1] == str(v)
                for v, n in zip(values, names, strict=True)
            )
        else:
            continue
        column.repeats_name = bool(repeated)


def label_whole_run(table: Table, steps: int) -> None:
    """Say in the header of each column that holds a figure over all the steps (totals, call
    counts) how many steps it covers: ``CPU total, 20 steps``."""
    from perfkit_core.report.format import WHOLE_RUN_KEYS, WHOLE_RUN_SUFFIXES

    if steps <= 1:
        return
    for column in table.columns[1:]:
        whole = column.key.endswith(WHOLE_RUN_SUFFIXES) or column.key in WHOLE_RUN_KEYS
        if whole and "step" not in column.label:
            column.label = f"{column.label}, {steps} steps"
