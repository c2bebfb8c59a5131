"""The HTML renderer: one self-contained page per report model, rendered with jinja2 and
autoescaped (event names are untrusted input). It formats a ``perfkit_core.report.model`` object
and computes nothing.

The page template, style and script live in ``assets/`` with Chart.js (MIT licence), all inlined
into the page, so a report opens with no network. The headline comes first; each chart is drawn
over the table that holds its numbers; tables are sortable (click a header) and searchable (the
box above each, or ``?q=`` in the address), and a finding's cited ops and steps link to their
rows. Names wrap only at token boundaries; long kernel names are shortened, the full name on
hover.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from perfkit_core.events.names import short_name
from perfkit_core.report.format import (
    TIME_UNITS,
    cell_text,
    format_value,
    header_label,
    per_step_value,
    saving_text,
)

if TYPE_CHECKING:
    from perfkit_core.report.comparison_model import ComparisonReport
    from perfkit_core.report.model import Chart, Headline, Report, Table

#: Colours of the headline's phases and of chart series, in order.
PALETTE = ("#e67e22", "#2980b9", "#8e44ad", "#27ae60", "#95a5a6", "#c0392b", "#16a085", "#34495e")
#: Where a name may wrap: after these separators (a token is never broken).
_BREAK_AFTER = re.compile(r"(::|[_<,./])")
#: Pixels per bar of a horizontal bar chart (so every label fits), and its bounds.
BAR_PX, CHART_MIN_PX, CHART_MAX_PX = 24, 260, 900


@cache
def _asset(name: str) -> str:
    return resources.files("perfkit_core.report").joinpath(f"assets/{name}").read_text("utf-8")


def _json(value: Any) -> str:
    # Safe inside <script>: no "<" at all, so neither "</script" nor "<!--" can appear.
    return json.dumps(value, default=float).replace("<", "\\u003c")


def _breakable(text: str) -> Any:
    """``text`` escaped, with a ``<wbr>`` after every separator where it may wrap."""
    from markupsafe import Markup, escape

    parts = _BREAK_AFTER.split(text)
    out = []
    for i, part in enumerate(parts):
        out.append(str(escape(part)))
        if i % 2 == 1:  # a separator
            out.append("<wbr>")
    return Markup("".join(out))


def _table(table: Table, time_unit: str) -> dict[str, Any]:
    """A table as the template wants it: header labels and classes, and per cell its HTML,
    sort key, class and (for shortened names) the full name."""
    rows = []
    for i, row in enumerate(table.rows):
        cells = []
        for j, (column, value) in enumerate(zip(table.columns, row, strict=True)):
            if column.repeats_name:
                continue
            text = cell_text(table, i, j, time_unit)
            full = None
            if j == 0:
                shown = short_name(text)
                full = text if shown != text else None
                level = table.levels[i] if table.levels else 0
                cells.append(
                    {
                        "html": _breakable(shown),
                        "key": "",
                        "cls": "name" + (f" level{level}" if level else ""),
                        "full": full,
                    }
                )
                continue
            numeric = column.unit != "text" and isinstance(value, (int, float))
            cells.append(
                {
                    # Text (the native ops behind a matched op, ...) wraps like names do.
                    "html": _breakable(text) if column.unit == "text" else text,
                    "key": repr(float(value)) if numeric else "",
                    "cls": "num" if column.unit != "text" else "text",
                    "full": None,
                }
            )
        rows.append(cells)
    columns = [
        {
            "label": header_label(c.label, c.unit, time_unit),
            "cls": "name" if k == 0 else ("num" if c.unit != "text" else "text"),
        }
        for k, c in enumerate(table.columns)
        if not c.repeats_name
    ]
    return {
        "id": f"table-{table.id}",
        "title": table.title,
        "columns": columns,
        "rows": rows,
        "note": table.note,
    }


def _chart_spec(chart: Chart, table: Table, time_unit: str) -> tuple[dict[str, Any], int]:
    """The Chart.js configuration of ``chart``, its values read from ``table``, and the height
    (px) that fits every label."""
    keys = [c.key for c in table.columns]
    units = {c.key: c.unit for c in table.columns}
    rows = [r for r in table.rows if str(r[keys.index(chart.label)]) not in chart.skip_rows]
    labels = [short_name(str(row[keys.index(chart.label)]), 40) for row in rows]

    def scaled(key: str) -> list[float | None]:
        scale = {"time": TIME_UNITS[time_unit], "bytes": 2**20}.get(units[key], 1.0)
        column = keys.index(key)
        return [None if r[column] is None else round(float(r[column]) / scale, 6) for r in rows]

    datasets: list[dict[str, Any]] = [
        {
            "label": next(c.label for c in table.columns if c.key == key),
            "data": scaled(key),
            "backgroundColor": PALETTE[i % len(PALETTE)],
            "borderColor": PALETTE[i % len(PALETTE)],
        }
        for i, key in enumerate(chart.series)
    ]
    delta_chart = (
        chart.kind == "hbar" and len(chart.series) == 1 and chart.series[0].startswith("delta")
    )
    if delta_chart:
        # A difference: longer in red, shorter in green, as two series drawn on the same rows
        # (each row has a value in one of them), so the legend shows both colours.
        values = datasets[0]["data"]
        datasets = [
            {
                "label": f"{name} in {chart.subject}" if chart.subject else name,
                "data": [v if v is not None and (v > 0) == longer else None for v in values],
                "backgroundColor": color,
                "borderColor": color,
                "grouped": False,
            }
            for name, longer, color in (("longer", True, "#c0392b"), ("shorter", False, "#27ae60"))
        ]
    unit = {"time": time_unit, "bytes": "MiB", "pct": "%"}.get(units[chart.series[0]], "")
    stacked = chart.kind == "stacked"
    horizontal = chart.kind == "hbar"
    category = "y" if horizontal else "x"
    value = "x" if horizontal else "y"
    scales: dict[str, Any] = {
        category: {"stacked": stacked, "ticks": {"autoSkip": False}},
        value: {"stacked": stacked, "title": {"display": True, "text": unit}},
    }
    if chart.kind == "line":
        scales["x"]["ticks"] = {"autoSkip": True, "maxTicksLimit": 12}
        for d in datasets:
            d["pointRadius"] = 0
            d["borderWidth"] = 1.5
    config = {
        "type": "line" if chart.kind == "line" else "bar",
        "data": {"labels": labels, "datasets": datasets},
        "options": {
            "animation": False,
            "maintainAspectRatio": False,
            "indexAxis": "y" if horizontal else "x",
            "plugins": {"legend": {"display": len(datasets) > 1 or delta_chart}},
            "scales": scales,
        },
    }
    height = 340
    if horizontal:
        bars = 1 if delta_chart else max(len(datasets), 1)
        height = min(max(BAR_PX * len(labels) * bars, CHART_MIN_PX), CHART_MAX_PX)
    return {"id": chart.id, "config": config}, height


def _tables(
    tables: list[Table], charts: list[Chart], time_unit: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(tables for the template, each with the chart drawn over it; Chart.js specs)."""
    by_table = {chart.table: chart for chart in charts}
    out, specs = [], []
    for table in tables:
        shown = _table(table, time_unit)
        chart = by_table.get(table.id)
        shown["chart"] = chart.id if chart and table.rows else None
        if shown["chart"]:
            spec, height = _chart_spec(chart, table, time_unit)  # type: ignore[arg-type]
            specs.append(spec)
            shown["chart_height"] = height
        out.append(shown)
    return out, specs


def _headline(headline: Headline, time_unit: str) -> dict[str, Any]:
    def text(item: Any) -> str:
        value = format_value(item.value, item.unit, time_unit)
        return value + (f" {time_unit}" if item.unit == "time" else "")

    top = headline.finding
    return {
        "figures": [(item.label, text(item)) for item in headline.items],
        "phases": [
            {
                "name": p.name,
                "share": format_value(p.share_pct, "pct"),
                "width": max(p.share_pct, 0.0),
                "time": f"{format_value(p.per_step_ns, 'time', time_unit)} {time_unit} per step",
                "color": PALETTE[i % len(PALETTE)],
            }
            for i, p in enumerate(headline.phases)
        ],
        "finding": None
        if top is None
        else {"severity": top.severity, "title": top.title, "saving": saving_text(top, time_unit)},
        "combined": None
        if headline.combined is None
        else {
            "findings": headline.combined.findings,
            "saving": per_step_value(
                headline.combined.saving_ns, headline.combined.step_ns, time_unit
            ),
            "how": headline.combined.how,
        },
        "note": headline.note,
    }


def _finding(f: Any, time_unit: str, table_ids: set[str]) -> dict[str, Any]:
    cites = [
        {"table": f"table-{view}", "q": name, "label": short_name(name, 40)}
        for view, names in (f.cites or {}).items()
        if view in table_ids
        for name in names
    ]
    return {
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "saving": saving_text(f, time_unit),
        "estimate": f.estimate,
        "details": f.details,
        "cites": cites,
        "remedy": f.remedy,
    }


def _page(**context: Any) -> str:
    """Render the page template with the inlined style, script and Chart.js."""
    import jinja2

    context.setdefault("headline", None)
    context.setdefault("meta", None)
    context.setdefault("findings", None)
    context.setdefault("advice_note", None)
    context.setdefault("gate", None)
    context.setdefault("verdict", None)
    context["chart_specs"] = _json(context.pop("specs"))
    return (
        jinja2.Environment(autoescape=True)
        .from_string(_asset("page.html.j2"))
        .render(
            style=_asset("report.css"),
            script=_asset("report.js"),
            chartjs=_asset("chart.umd.min.js"),
            **context,
        )
    )


def render_report_html(report: Report) -> str:
    """Return the report as one self-contained HTML page: headline, run details, advice, and
    sortable, searchable tables, some with a chart of their numbers above them."""
    unit = report.time_unit
    table_ids = {t.id for t in report.tables}
    findings = None
    if report.findings is not None:
        findings = [_finding(f, unit, table_ids) for f in report.findings]
    tables, specs = _tables(report.tables, report.charts, unit)
    meta = [
        (
            item.label,
            format_value(item.value, item.unit, unit) + (f" {unit}" if item.unit == "time" else ""),
        )
        for item in report.header
    ]
    return _page(
        title=report.title,
        subtitle=f"Times in {unit}.",
        headline=_headline(report.headline, unit) if report.headline else None,
        meta=meta,
        findings=findings,
        advice_note=report.advice_note,
        specs=specs,
        tables=tables,
    )


def render_comparison_html(report: ComparisonReport) -> str:
    """Return the comparison as one self-contained HTML page (no network needed to view it):
    the verdict first, then the gate's line, then the tables, the difference chart over the
    family table."""
    subtitle = ", ".join(
        f"{label} ({fw})" for label, fw in zip(report.labels, report.frameworks, strict=True)
    )
    tables, specs = _tables(report.tables, report.charts, report.time_unit)
    return _page(
        title=report.title,
        subtitle=f"{subtitle}. Times in {report.time_unit} per {report.per}.",
        verdict=report.verdict_lines or None,
        specs=specs,
        tables=tables,
        gate=report.gate,
    )
