"""The report model: everything a report shows, computed once.

``build_report(run)`` returns a ``Report`` (header, advice findings, tables, charts) and
``build_comparison_report(comparison)`` a ``ComparisonReport``. The text, JSON and HTML
renderers only format these objects, so the three forms of one report cannot disagree. A chart
never holds numbers of its own: it names a table and the columns it draws, and every renderer
shows that table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfkit_core.report.format import column_unit

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.comparison import Comparison, GateResult
    from perfkit_core.events.run import Run

#: Views a report shows by default, in order; tables with no rows are left out.
DEFAULT_VIEWS: tuple[str, ...] = (
    "model",
    "phases",
    "family",
    "overview",
    "device",
    "operator",
    "kernel",
    "memcpy",
    "user",
    "distributed",
    "memory",
    "memory_timeline",
    "benchmark",
)
#: Titles of the views' tables.
VIEW_TITLES: dict[str, str] = {
    "model": "Model Summary",
    "phases": "Time per step by phase",
    "family": "Time per step by op family",
    "memory_timeline": "Memory allocated over time",
    "overview": "Overview Summary",
    "device": "Device Summary",
    "operator": "Operator Summary",
    "kernel": "Kernel Summary",
    "memcpy": "Memory Manipulation Summary",
    "user": "UserDefined Summary",
    "distributed": "Distributed Summary",
    "memory": "Memory Summary",
    "benchmark": "Benchmark Summary",
    "steps": "Steps",
}
#: Views whose rows are ranked entries (ops, kernels, ...): ``top`` cuts them. Other views are
#: fixed structures (the model view's phases, the overview's kinds) and are shown whole.
RANKED_VIEWS = frozenset({"operator", "user", "kernel", "memory", "memcpy"})
#: The chart drawn over a view's table: (title, kind, series columns; None: every column of
#: the unit ``time`` or ``bytes`` after the first, the per-step total ``dur_ns`` left out).
VIEW_CHARTS: dict[str, tuple[str, str, list[str] | None]] = {
    "phases": ("Time per step by phase", "stacked", None),
    "family": ("Time per step by op family", "hbar", ["time_per_step_ns"]),
    "overview": ("Time by event kind (overlaps merged)", "bar", ["cpu_time_ns", "gpu_time_ns"]),
    "memory_timeline": ("Memory allocated over time", "line", None),
}


@dataclass
class Column:
    """A table column: its key (the view's column name), header label and unit (see
    ``perfkit_core.report.format.column_unit``)."""

    key: str
    label: str
    unit: str


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

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column key."""
        keys = [c.key for c in self.columns]
        return [dict(zip(keys, row, strict=True)) for row in self.rows]


@dataclass
class Chart:
    """A chart drawn from ``table``: bars (or a line) per ``label`` value, one series per column
    in ``series``. ``kind`` is ``bar``, ``stacked``, ``hbar`` or ``line``."""

    id: str
    title: str
    kind: str
    table: str
    label: str
    series: list[str]


@dataclass
class HeaderItem:
    """One line of the report header: a label and a value in ``unit`` (see ``column_unit``)."""

    label: str
    value: Any
    unit: str = "text"


@dataclass
class Report:
    """Everything a run's report shows, in order: header, findings, tables (charts are drawn
    over the tables they name)."""

    title: str
    time_unit: str
    header: list[HeaderItem]
    findings: list[Any] | None
    tables: list[Table]
    charts: list[Chart]
    meta: dict[str, Any]

    def table(self, table_id: str) -> Table:
        """The table with id ``table_id``."""
        return next(t for t in self.tables if t.id == table_id)


@dataclass
class ComparisonReport:
    """Everything a comparison shows: the runs, the tables, charts, and the gate if asked."""

    title: str
    time_unit: str
    per: str
    labels: list[str]
    frameworks: list[str]
    tables: list[Table]
    charts: list[Chart]
    gate: GateResult | None = None

    def table(self, table_id: str) -> Table:
        """The table with id ``table_id``."""
        return next(t for t in self.tables if t.id == table_id)


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
    come from the column names unless ``labels`` gives them; ``units`` overrides units by key.
    """
    from perfkit_core.report.format import column_label

    labels = labels or {}
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
    return Table(table_id, title, columns, rows, "; ".join(notes) or None, levels)


def _drop_empty_columns(table: Table, prefixes: Sequence[str], reason: str) -> None:
    """Remove columns whose key starts with one of ``prefixes`` when every value is missing."""
    drop = [
        i
        for i, c in enumerate(table.columns)
        if c.key.startswith(tuple(prefixes)) and all(r[i] is None for r in table.rows)
    ]
    if not drop or not table.rows:
        return
    table.columns = [c for i, c in enumerate(table.columns) if i not in drop]
    table.rows = [[v for i, v in enumerate(r) if i not in drop] for r in table.rows]
    table.note = "; ".join(n for n in (table.note, reason) if n)


def _header(run: Run) -> list[HeaderItem]:
    meta = run.meta
    span = meta.get("span_ns") or [0, 0]
    devices = ", ".join(sorted({str(d.get("name")) for d in meta.get("devices") or []}))
    items = [
        HeaderItem(
            "Framework",
            f"{meta.get('framework')} {meta.get('framework_version') or ''}".strip(),
        ),
        HeaderItem("Source", str(meta.get("source") or "-")),
        HeaderItem(
            "Ranks",
            f"{', '.join(map(str, meta.get('ranks', [])))} (world size {meta.get('world_size', 1)})",
        ),
        HeaderItem("Steps", len(meta.get("steps", [])), "count"),
        HeaderItem("Events", len(run.events), "count"),
        HeaderItem("Profiled", int(span[1] - span[0]), "time"),
        HeaderItem("Devices", devices or "none recorded"),
    ]
    skipped = skipped_events(meta)
    if skipped:
        items.append(
            HeaderItem("Skipped", "; ".join(f"{n:,} {reason}" for reason, n in skipped.items()))
        )
    return items


def skipped_events(meta: dict[str, Any]) -> dict[str, int]:
    """Events the loader skipped, ``{reason: count}`` over every rank (``meta["accounting"]``)."""
    accounting = meta.get("accounting") or {}
    per_rank = [accounting] if "skipped" in accounting else list(accounting.values())
    total: dict[str, int] = {}
    for entry in per_rank:
        if isinstance(entry, dict):
            for reason, n in (entry.get("skipped") or {}).items():
                total[str(reason)] = total.get(str(reason), 0) + int(n)
    return total


def _view_chart(table: Table) -> Chart | None:
    """The chart ``VIEW_CHARTS`` draws over a view's table, with the series the table has."""
    spec = VIEW_CHARTS.get(table.id)
    if spec is None:
        return None
    title, kind, wanted = spec
    keys = [c.key for c in table.columns]
    if wanted is None:
        series = [
            c.key
            for c in table.columns[1:]
            if c.unit in ("time", "bytes") and c.key not in ("dur_ns", "offset_ns")
        ]
    else:
        series = [k for k in wanted if k in keys]
    if not series:
        return None
    return Chart(f"chart-{table.id.replace('_', '-')}", title, kind, table.id, "name", series)


def build_report(
    run: Run,
    views: Iterable[str] = DEFAULT_VIEWS,
    *,
    time_unit: str = "ms",
    top: int | None = 30,
    options: dict[str, dict[str, Any]] | None = None,
    advice: bool = True,
    charts: bool = True,
) -> Report:
    """Return the report model of ``run``: header, advice findings (when ``advice``), one table
    per view in ``views``, and the charts ``VIEW_CHARTS`` draws over some of them (when
    ``charts``) (``options[view]`` passed to it; at most ``top`` rows; views with no rows
    left out; ``top`` cuts only the views of ranked entries, ``RANKED_VIEWS``). GPU columns are left out of runs that recorded no device events, with a note."""
    from perfkit_core.progress import stage

    views = list(views)
    options = options or {}
    has_device = bool((run.events["stream"].to_numpy() >= 0).any())
    tables: list[Table] = []
    chart_list: list[Chart] = []
    findings = None
    with stage("summaries", total=len(views) + int(advice)) as bar:
        if advice:
            findings = run.advise()
            bar.update(1)
        for view in views:
            frame = run.summary(view, **options.get(view, {}))
            bar.update(1)
            if frame.empty:
                continue
            table = table_from_frame(
                view,
                VIEW_TITLES.get(view, f"{view} summary".title()),
                frame,
                top=top if view in RANKED_VIEWS else None,
            )
            if not has_device:
                _drop_empty_columns(
                    table, ("gpu_",), "no device events were recorded: GPU columns omitted"
                )
            _drop_empty_columns(table, ("flops", "gflops_per_s"), "")
            tables.append(table)
            chart = _view_chart(table) if charts else None
            if chart is not None:
                chart_list.append(chart)
    return Report(
        title="perfkit report",
        time_unit=time_unit,
        header=_header(run),
        findings=findings,
        tables=tables,
        charts=chart_list,
        meta=run.meta,
    )


#: Titles of the comparison tables.
COMPARISON_TITLES = {
    "steps": "Step Time",
    "phases": "Phases per Step",
    "totals": "Totals per Step",
    "family": "Op Families per Step",
    "ops": "Operators per Step",
}
DEFAULT_COMPARISON_VIEWS = ("steps", "phases", "totals", "family", "ops")


def build_comparison_report(
    comparison: Comparison,
    views: Iterable[str] = DEFAULT_COMPARISON_VIEWS,
    *,
    time_unit: str = "ms",
    top: int | None = 20,
    gate: GateResult | None = None,
) -> ComparisonReport:
    """Return the comparison model: one table per comparison view (runs' columns in ns per
    step, or per sample), the op-family chart, and the gate result when one was asked for."""
    per = comparison.per
    tables = []
    for view in views:
        frame = comparison.summary(view)
        units = {label: "time" for label in comparison.labels if label in frame.columns}
        labels = {label: label for label in comparison.labels}
        tables.append(
            table_from_frame(
                view,
                COMPARISON_TITLES.get(view, view) + f" (per {per})",
                frame,
                top=top if view == "ops" else None,
                labels=labels,
                units=units,
            )
        )
    charts = []
    if any(t.id == "family" for t in tables):
        charts.append(
            Chart(
                "chart-families",
                f"Time per {per} by op family",
                "hbar",
                "family",
                "name",
                list(comparison.labels),
            )
        )
    return ComparisonReport(
        title="perfkit comparison",
        time_unit=time_unit,
        per=per,
        labels=list(comparison.labels),
        frameworks=[run.framework for run in comparison.runs],
        tables=tables,
        charts=charts,
        gate=gate,
    )
