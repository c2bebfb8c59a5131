"""The report model: everything a report shows, computed once.

``build_report(run)`` returns a ``Report`` (header, advice findings, tables, charts);
``comparison_model.build_comparison_report(comparison)`` a ``ComparisonReport`` from the same
parts. The text, JSON and HTML
renderers only format these objects, so the three forms of one report cannot disagree. A chart
never holds numbers of its own: it names a table and the columns it draws, and every renderer
shows that table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_core.events.facts import has_device as facts_has_device
from perfkit_core.events.facts import steps_per_rank
from perfkit_core.report.headline import (
    HeaderItem,
    Headline,
    headline,
)
from perfkit_core.report.tables import (
    Table,
    derived_frames,
    drop_empty_columns,
    drop_zero_rows,
    label_whole_run,
    mark_repeated_columns,
    table_from_frame,
)

if TYPE_CHECKING:
    from perfkit_core.events.profile import Profile

#: Views a report shows by default, in order; tables with no rows are left out.
DEFAULT_VIEWS: tuple[str, ...] = (
    "model",
    "phases",
    "family",
    "overview",
    "breakdown",
    "device",
    "operator",
    "kernel",
    "roofline",
    "mfu",
    "memcpy",
    "user",
    "distributed",
    "memory",
    "memory_timeline",
    "device_timeline",
    "benchmark",
)
#: Titles of the views' tables.
VIEW_TITLES: dict[str, str] = {
    "model": "Model Summary",
    "phases": "Time per step by phase",
    "family": "Time per step by op family",
    "memory_timeline": "Memory allocated over time",
    "device_timeline": "Device utilisation over time",
    "overview": "Overview Summary",
    "breakdown": "Step Time Breakdown",
    "device": "Device Summary",
    "operator": "Operator Summary",
    "kernel": "Kernel Summary",
    "roofline": "Roofline: each op against the device's peaks",
    "mfu": "Model FLOPs utilisation per step",
    "memcpy": "Memory Manipulation Summary",
    "user": "UserDefined Summary",
    "distributed": "Distributed Summary",
    "memory": "Memory Summary",
    "benchmark": "Benchmark Summary",
    "steps": "Steps",
    "ranks": "Ranks",
    "collectives": "Collectives",
    "layers": "Layers: the model's layer tree",
    "code": "Time by Python function",
}
#: Views whose rows are ranked entries (ops, kernels, ...): ``top`` cuts them. Other views are
#: fixed structures (the model view's phases, the overview's kinds) and are shown whole.
RANKED_VIEWS = frozenset(
    {
        "operator",
        "user",
        "kernel",
        "memory",
        "memcpy",
        "collectives",
        "launches",
        "roofline",
        "code",
    }
)
#: The chart drawn over a view's table: (title, kind, series columns; None: every column of
#: the unit ``time`` or ``bytes`` after the first, the per-step total ``dur_ns`` left out).
VIEW_CHARTS: dict[str, tuple[str, str, list[str] | None]] = {
    "operator_average": ("Top 20 operators by average time", "hbar", ["cpu_avg_ns", "gpu_avg_ns"]),
    "phases": ("Time per step by phase", "stacked", None),
    "family": ("Time per step by op family", "hbar", ["per_step_ns", "gpu_per_step_ns"]),
    "memory_timeline": ("Memory allocated over time", "line", None),
    "device_timeline": ("Device utilisation over time", "line", None),
    # x, y, point size, then the ceilings' columns (drawn when the table has them).
    "roofline": (
        "Roofline: achieved TFLOP/s against arithmetic intensity (log-log, points sized by time)",
        "roofline",
        [
            "intensity_flop_per_byte",
            "achieved_tflops_per_s",
            "time_ns",
            "peak_tflops_per_s",
            "peak_tb_per_s",
        ],
    ),
}


@dataclass
class Chart:
    """A chart drawn from ``table``: bars (or a line) per ``label`` value, one series per column
    in ``series``. ``kind`` is ``bar``, ``stacked``, ``hbar``, ``line`` or ``roofline`` (a
    log-log scatter of one point per row: ``series`` names the x, y and point-size columns,
    then the columns of the compute and bandwidth ceilings drawn over it)."""

    id: str
    title: str
    kind: str
    table: str
    label: str
    series: list[str]
    #: Rows (by ``label`` value) the chart leaves out, e.g. a table's total row.
    skip_rows: list[str] = field(default_factory=list)
    #: The run a difference chart (one ``delta`` series) is about: its legend reads "longer in
    #: <run>" and "shorter in <run>".
    subject: str | None = None


@dataclass
class Report:
    """Everything a run's report shows, in order: header, headline, findings, tables (charts
    are drawn over the tables they name)."""

    title: str
    time_unit: str
    header: list[HeaderItem]
    findings: list[Any] | None
    tables: list[Table]
    charts: list[Chart]
    meta: dict[str, Any]
    headline: Headline | None = None
    #: Why the run got no advice at all (too few steps), when it did not.
    advice_note: str | None = None

    def table(self, table_id: str) -> Table:
        """The table with id ``table_id``."""
        return next(t for t in self.tables if t.id == table_id)


def _header(run: Profile) -> list[HeaderItem]:
    from perfkit_core.events.ranks import ranks_text

    meta = run.meta
    span = meta.get("span_ns") or [0, 0]
    devices = ", ".join(sorted({str(d.get("name")) for d in meta.get("devices") or []}))
    events = getattr(run, "events", None)
    sources = meta.get("source")
    if isinstance(sources, list) and len(sources) > 3:
        folders = sorted({str(Path(str(s)).parent) for s in sources})
        sources = f"{len(sources)} traces in {', '.join(folders)}"
    items = [
        HeaderItem(
            "Framework",
            f"{meta.get('framework')} {meta.get('framework_version') or ''}".strip(),
        ),
        HeaderItem(
            "Source", str(sources or "the profiler in the training process (no trace file)")
        ),
        HeaderItem(
            "Ranks",
            f"{ranks_text(list(meta.get('ranks', [])))} (world size {meta.get('world_size', 1)})",
        ),
        HeaderItem("Steps", len(meta.get("steps", [])), "count"),
        *_steady_items(run),
        HeaderItem(
            "Events", len(events) if events is not None else int(meta.get("events") or 0), "count"
        ),
        HeaderItem("Profiled", int(span[1] - span[0]), "time"),
        HeaderItem("Devices", devices or "none recorded"),
    ]
    for m in meta.get("missing_ranks") or []:  # a job's ranks that could not be read
        reason = f"{Path(str(m['source'])).name}: {m['reason']}"
        items.append(HeaderItem(f"Missing rank {m['rank']}", reason))
    engine = meta.get("engine")
    if engine:
        where = "a local Dask cluster" if engine.get("kind") == "local" else "a Dask cluster"
        items.append(
            HeaderItem("Analysed on", f"{where} of {engine.get('workers')} worker(s), by rank")
        )
    skipped = skipped_events(meta)
    if skipped:
        items.append(
            HeaderItem("Skipped", "; ".join(f"{n:,} {reason}" for reason, n in skipped.items()))
        )
    return items


#: The header items of the steady-step rule (``events.steady``).
WARMUP_ITEM = "Warm-up left out"
SLOW_STEPS_ITEM = "Slow steps kept"


def _steady_items(run: Profile) -> list[HeaderItem]:
    """The header's lines on the steps every average leaves out (leading warm-up, with the
    mean step they would have given) and the slow later steps it keeps; none for a run whose
    steps have neither."""
    from perfkit_core.events.steady import (
        META_KEY,
        RULE_TEXT,
        slow_text,
        steady_steps,
        warmup_text,
    )

    if getattr(run, "events", None) is None:
        return []
    judged = steady_steps(run)  # type: ignore[arg-type]
    items = []
    if judged.warmup and run.meta.get(META_KEY):
        items.append(
            HeaderItem(
                WARMUP_ITEM,
                f"{warmup_text(judged)}: every average is of the other {judged.kept} steps; "
                f"with them the mean step would be {judged.mean_all_ns / 1e6:.3f} ms, not "
                f"{judged.mean_kept_ns / 1e6:.3f} ms ({RULE_TEXT})",
            )
        )
    if judged.slow:
        items.append(
            HeaderItem(
                SLOW_STEPS_ITEM,
                f"{slow_text(judged)}: a slow step after the first is the run's real cost "
                "(a checkpoint, a stalled collective, a pause), so it stays in every average",
            )
        )
    return items


def run_label(run: Profile) -> str:
    """The name a run goes by in titles: the file or folder it was loaded from (``origin``);
    else its trace's file name (the folder's, for a trace kept inside a saved run), the folder
    of a job's traces, or its framework."""
    origin = getattr(run, "origin", None)
    if origin is not None and Path(origin).name:
        return Path(origin).name
    source = run.meta.get("source")
    if isinstance(source, list) and source:
        folders = {Path(str(s)).parent.name for s in source}
        if len(folders) == 1 and "" not in folders:
            return folders.pop()
    elif isinstance(source, str) and source:
        path = Path(source)
        return (
            path.parent.name if path.name.startswith("trace.") and path.parent.name else path.name
        )
    return str(run.meta.get("framework") or "run")


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
            if c.unit in ("time", "bytes", "pct")
            and c.key not in ("dur_ns", "step_ns", "offset_ns")
        ]
    else:
        series = [k for k in wanted if k in keys]
    if not series:
        return None
    return Chart(f"chart-{table.id.replace('_', '-')}", title, kind, table.id, "name", series)


def build_report(
    run: Profile,
    views: Iterable[str] = DEFAULT_VIEWS,
    *,
    time_unit: str = "ms",
    top: int | None = 30,
    options: dict[str, dict[str, Any]] | None = None,
    advice: bool = True,
    charts: bool = True,
    batch_size: int | None = None,
    steady: bool = True,
) -> Report:
    """Return the report model of ``run`` (a run, or a job analysed rank by rank): header,
    advice findings (when ``advice``), one table
    per view in ``views``, and the charts ``VIEW_CHARTS`` draws over some of them (when
    ``charts``), with the headline (step time, throughput with ``batch_size`` samples per step,
    where the step goes, the top finding) first (``options[view]`` passed to it; at most ``top`` rows; views with no rows
    left out; ``top`` cuts only the views of ranked entries, ``RANKED_VIEWS``). GPU columns are left out of runs that recorded no device events, with a note.

    With ``steady`` (the default) the report is of the run's steady steps
    (``events.steady.steady_run``): leading warm-up steps far above the rest are left out of
    every table, the headline and the advice, and the header names them and gives the mean
    step with them; without it every recorded step counts."""
    from perfkit_core.events.steady import steady_run
    from perfkit_core.views.registry import shared_views

    if getattr(run, "events", None) is not None and steady:
        # Every step average is taken over the steady steps: leading warm-up left out.
        run = steady_run(run)  # type: ignore[arg-type]
    # The advice, the tables and the headline read the same views: each is computed once.
    with shared_views(run):
        return _build_report(
            run, list(views), time_unit, top, options or {}, advice, charts, batch_size
        )


def _build_report(
    run: Profile,
    views: list[str],
    time_unit: str,
    top: int | None,
    options: dict[str, dict[str, Any]],
    advice: bool,
    charts: bool,
    batch_size: int | None,
) -> Report:
    """``build_report``'s work, inside ``shared_views``."""
    from perfkit_core.events.memory import give_back_freed_memory
    from perfkit_core.progress import stage

    has_device = facts_has_device(run)
    steps = steps_per_rank(run)
    tables: list[Table] = []
    chart_list: list[Chart] = []
    findings = None
    note = None
    with stage("summaries", total=len(views) + int(advice)) as bar:
        if advice:
            from perfkit_core.advice.engine import advice_note
            from perfkit_core.events.run import Run as EventRun

            if isinstance(run, EventRun):
                # a steady run's warm-up is gone already; without ``steady`` none is left out
                findings = run.advise(steady=False)
                note = advice_note(run, steady=False)
            else:
                findings = run.advise()
                note = advice_note(run)
            give_back_freed_memory()  # the advice's temporaries: the views' tables come next
            bar.update(1)
        for view in views:
            frame = run.summary(view, **options.get(view, {}))
            give_back_freed_memory()  # so the next view does not stack on this one's freed pages
            bar.update(1)
            if frame.empty:
                if not frame.attrs.get("explain_empty"):
                    continue
                # A view that says why it is empty: its note, under its first column alone.
                attrs = dict(frame.attrs)
                frame = frame[list(frame.columns[:1])]
                frame.attrs.update(attrs)
            table = table_from_frame(
                view,
                VIEW_TITLES.get(view, f"{view} summary".title()),
                frame,
                top=top if view in RANKED_VIEWS else None,
            )
            if not has_device:
                drop_empty_columns(
                    table, ("gpu_",), "no device events were recorded: GPU columns omitted"
                )
            drop_empty_columns(table, ("",), "")
            drop_zero_rows(table)
            mark_repeated_columns(table)
            label_whole_run(table, steps)
            tables.append(table)
            chart = _view_chart(table) if charts else None
            if chart is not None:
                chart_list.append(chart)
            for table_id, title, derived, rows in derived_frames(view, frame) if charts else ():
                tables.append(table_from_frame(table_id, title, derived, top=rows))
                drop_empty_columns(tables[-1], ("",), "")
                chart = _view_chart(tables[-1])
                if chart is not None:
                    chart_list.append(chart)
    return Report(
        title=f"{run_label(run)} — perfkit report",
        time_unit=time_unit,
        header=_header(run),
        findings=findings,
        tables=tables,
        charts=chart_list,
        meta=run.meta,
        headline=headline(run, findings, batch_size, note),
        advice_note=note,
    )
