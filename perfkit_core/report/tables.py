"""A view's frame as a report table (``table_from_frame``), and what a report leaves out of it and
how it labels it: columns nothing was
measured in, rows that are 0 throughout, columns that repeat the name, and headers of figures
over all the steps; and the tables a report derives from a view's (its rows in another order,
for a chart)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfkit_core.report.format import column_unit

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Column:
    """A table column: its key (the view's column name), header label and unit (see
    ``perfkit_core.report.format.column_unit``)."""

    key: str
    label: str
    unit: str
    #: A column that only repeats the name column (``step`` beside ``step 2``): the JSON keeps
    #: it for programs, the text and HTML forms leave it out for readers.
    repeats_name: bool = False


@dataclass
class Table:
    """A table as a report shows it: raw values (ns, %, counts, text; None where not measured)."""

    id: str
    title: str
    columns: list[Column]
    rows: list[list[Any]]
    note: str | None = None
    #: Per row, its nesting level (detail rows of op_detail are 1); empty when all are 0.
    levels: list[int] = field(default_factory=list)
    #: Per row, the unit of its numbers (``time``, ``number``) where a table's rows differ in
    #: unit (the benchmark view's costs and rates); empty when the columns give the units.
    row_units: list[str] = field(default_factory=list)
    #: Column keys of figures shown own and with children (the layers view), (own, total):
    #: the text form writes each pair as one ``own/total`` cell, as tfprof does.
    paired: list[tuple[str, str]] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column key."""
        keys = [c.key for c in self.columns]
        return [dict(zip(keys, row, strict=True)) for row in self.rows]


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


def _plain(value: Any) -> Any:
    """A plain Python value: numpy scalars unwrapped, NaN and NA as None."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return value


def table_from_frame(
    table_id: str,
    title: str,
    frame: pd.DataFrame,
    *,
    top: int | None = None,
    note: str | None = None,
    labels: dict[str, str] | None = None,
    units: dict[str, str] | None = None,
) -> Table:
    """Return a ``Table`` of ``frame`` (at most ``top`` rows; a note says how many there were).

    Columns of a view's ``level``/``detail_of`` pair become the table's ``levels``; header labels
    come from ``labels``, else from the labels the view states (``frame.attrs["labels"]``), else
    from the column names; ``units`` overrides units by key.
    """
    from perfkit_core.report.format import column_label

    labels = {**(frame.attrs.get("labels") or {}), **(labels or {})}
    units = units or {}
    notes = [n for n in (note, frame.attrs.get("note")) if n]
    shown = frame.head(top) if top else frame
    if top and len(frame) > top:
        notes.append(f"top {len(shown)} of {len(frame)} rows")
    levels: list[int] = []
    if "level" in shown.columns:
        levels = [int(v) for v in shown["level"]]
        shown = shown.drop(columns=[c for c in ("level", "detail_of") if c in shown.columns])
    columns = [
        Column(
            str(c),
            labels.get(str(c)) or column_label(str(c)),
            units.get(str(c)) or column_unit(str(c), shown[c]),
        )
        for c in shown.columns
    ]
    rows = [[_plain(v) for v in row] for row in shown.itertuples(index=False, name=None)]
    row_units: list[str] = []
    unit_column = frame.attrs.get("row_unit_column")
    if unit_column and unit_column in shown.columns:
        row_units = ["time" if str(u) == "ns" else "number" for u in shown[unit_column]]
    paired = [(str(a), str(b)) for a, b in frame.attrs.get("paired") or []]
    return Table(
        table_id, title, columns, rows, "; ".join(notes) or None, levels, row_units, paired
    )


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
