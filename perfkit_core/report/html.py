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

from perfkit_core.events.names import short_name, short_names
from perfkit_core.report.finding_summary import summarize
from perfkit_core.report.format import (
    TIME_UNITS,
    cell_text,
    format_value,
    header_label,
    per_step_value,
    saving_text,
)
from perfkit_core.report.headline import REMEDY_LABEL, remedy_label, severity_label

if TYPE_CHECKING:
    from perfkit_core.report.comparison_model import ComparisonReport
    from perfkit_core.report.headline import Headline
    from perfkit_core.report.model import Chart, Report, Table

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
    names = [format_value(row[0], table.columns[0].unit, time_unit) for row in table.rows]
    shown_names = short_names(names)
    for i, row in enumerate(table.rows):
        cells = []
        for j, (column, value) in enumerate(zip(table.columns, row, strict=True)):
            if column.repeats_name:
                continue
            text = cell_text(table, i, j, time_unit)
            full = None
            if j == 0:
                shown = shown_names[i]
                full = text if shown != text else None
                level = table.levels[i] if table.levels else 0
                cells.append(
                    {
                        "html": _breakable(shown),
                        "key": "",
                        "cls": "name" + (f" level{min(level, 6)}" if level else ""),
                        "full": full,
                        # A tree's rows (the layers view) fold under their parent.
                        "level": level if table.paired else None,
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


#: Colours of the roofline chart's points by their bound, and of its ceilings.
BOUND_COLOURS = {"compute": "#2980b9", "memory": "#e67e22", "latency": "#8e44ad", "": "#95a5a6"}
CEILING_COLOUR = "#c0392b"
#: Radius (px) of the roofline chart's largest and smallest points.
POINT_MAX_PX, POINT_MIN_PX = 22.0, 3.0


def _roofline_spec(chart: Chart, table: Table, time_unit: str) -> dict[str, Any]:
    """A log-log scatter of ``table``'s rows (x: intensity, y: achieved FLOP rate, radius by
    time, coloured by bound) with each distinct pair of compute and bandwidth ceilings the
    table holds drawn as a roofline across the points' range."""
    keys = [c.key for c in table.columns]
    x_key, y_key, size_key = chart.series[:3]
    peak_key = chart.series[3] if len(chart.series) > 3 else None
    bw_key = chart.series[4] if len(chart.series) > 4 else None
    column = {k: keys.index(k) for k in chart.series if k in keys}
    bound_at = keys.index("bound") if "bound" in keys else None
    rows = [
        r
        for r in table.rows
        if isinstance(r[column[x_key]], (int, float))
        and isinstance(r[column[y_key]], (int, float))
        and r[column[x_key]] > 0
        and r[column[y_key]] > 0
    ]
    largest = max((float(r[column[size_key]] or 0) for r in rows), default=0.0) or 1.0
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        size = float(r[column[size_key]] or 0)
        bound = str(r[bound_at]) if bound_at is not None and r[bound_at] else ""
        groups.setdefault(bound, []).append(
            {
                "x": float(r[column[x_key]]),
                "y": float(r[column[y_key]]),
                "r": round(
                    POINT_MIN_PX + (POINT_MAX_PX - POINT_MIN_PX) * (size / largest) ** 0.5, 2
                ),
                "label": short_name(str(r[keys.index(chart.label)]), 60),
                "time": format_value(size, "time", time_unit) + f" {time_unit} per step",
            }
        )
    datasets: list[dict[str, Any]] = [
        {
            "type": "bubble",
            "label": f"{bound}-bound ops" if bound else "ops",
            "data": points,
            "backgroundColor": BOUND_COLOURS.get(bound, "#95a5a6") + "99",
            "borderColor": BOUND_COLOURS.get(bound, "#95a5a6"),
        }
        for bound, points in sorted(groups.items())
    ]
    xs = [p["x"] for points in groups.values() for p in points]
    low, high = (min(xs) / 10, max(xs) * 10) if xs else (0.01, 1000.0)
    ceilings = sorted(
        {
            (float(r[column[peak_key]]), float(r[column[bw_key]]))
            for r in table.rows
            if peak_key in column
            and bw_key in column
            and isinstance(r[column[peak_key]], (int, float))
            and isinstance(r[column[bw_key]], (int, float))
            and r[column[peak_key]] > 0
            and r[column[bw_key]] > 0
        }
    )
    for peak, bandwidth in ceilings:
        ridge = peak / bandwidth  # FLOP/B where the bandwidth slope meets the compute roof
        start, end = min(low, ridge / 10), max(high, ridge * 10)
        datasets.append(
            {
                "type": "line",
                "label": f"roofline: {peak:g} TFLOP/s, {bandwidth:g} TB/s",
                "data": [
                    {"x": start, "y": start * bandwidth},
                    {"x": ridge, "y": peak},
                    {"x": end, "y": peak},
                ],
                "borderColor": CEILING_COLOUR,
                "backgroundColor": CEILING_COLOUR,
                "borderWidth": 1.5,
                "pointRadius": 0,
                "fill": False,
            }
        )
    label_of = {c.key: c.label for c in table.columns}
    return {
        "type": "bubble",
        "data": {"datasets": datasets},
        "options": {
            "animation": False,
            "maintainAspectRatio": False,
            "plugins": {"legend": {"display": True}},
            "scales": {
                "x": {
                    "type": "logarithmic",
                    "title": {"display": True, "text": label_of.get(x_key, x_key)},
                },
                "y": {
                    "type": "logarithmic",
                    "title": {"display": True, "text": label_of.get(y_key, y_key)},
                },
            },
        },
    }


def _chart_spec(chart: Chart, table: Table, time_unit: str) -> tuple[dict[str, Any], int]:
    """The Chart.js configuration of ``chart``, its values read from ``table``, and the height
    (px) that fits every label."""
    if chart.kind == "roofline":
        return {"id": chart.id, "config": _roofline_spec(chart, table, time_unit)}, 480
    keys = [c.key for c in table.columns]
    units = {c.key: c.unit for c in table.columns}
    rows = [r for r in table.rows if str(r[keys.index(chart.label)]) not in chart.skip_rows]
    labels = short_names([str(row[keys.index(chart.label)]) for row in rows], 40)

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
        return value + (
            f" {time_unit}" if item.unit == "time" else "%" if item.unit == "pct" else ""
        )

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
        else {
            "severity": top.severity,
            "title": top.title,
            "saving": saving_text(top, time_unit),
            "number": headline.finding_number,
        },
        "combined": None
        if headline.combined is None
        else {
            "findings": headline.combined.findings,
            "findings_text": headline.combined.findings_text(),
            "about": headline.combined.about(),
            "saving": per_step_value(
                headline.combined.saving_ns,
                headline.combined.step_ns,
                time_unit,
                headline.combined.of,
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
    short = summarize(f, time_unit)
    return {
        "id": f.id,
        "severity": f.severity,
        "label": severity_label(f),
        "title": f.title,
        "saving": saving_text(f, time_unit),
        "saving_line": short.saving_line(f.id),
        "estimate": f.estimate,
        # the short form shows these; the rest is folded under them
        "evidence": short.evidence,
        "more_evidence": short.more_evidence,
        "caveats": short.caveats,
        "rest": short.rest_text(),
        "cites": cites,
        "remedy": short.remedy,
        # the heading of a remedy not expected to pay here (a plain one has none)
        "remedy_note": "" if remedy_label(f) == REMEDY_LABEL else remedy_label(f),
    }


#: The element a notebook fragment's HTML and style are scoped to.
FRAGMENT_SCOPE = "div.perfkit-nb"
#: Rules a notebook fragment adds to the page's style: tables laid out by their content (a
#: notebook's own style may fix their layout), headers not clickable (no script sorts them).
_FRAGMENT_STYLE = (
    "table { table-layout: auto; margin-left: 0; margin-right: 0; }"
    " th { cursor: default; } th, td { line-height: 1.35; }"
    " h1 { font-size: 1.5em; margin-top: .3em; } h2 { font-size: 1.2em; }"
)


@cache
def scoped_style() -> str:
    """The page's style for a notebook fragment: every rule scoped to ``FRAGMENT_SCOPE`` (a
    ``body`` rule applies to that element itself), so it styles nothing else in the notebook,
    plus the fragment's own rules."""
    css = re.sub(r"/\*.*?\*/", "", _asset("report.css") + _FRAGMENT_STYLE, flags=re.S)
    rules = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        scoped = []
        for selector in selectors.split(","):
            selector = selector.strip()
            if selector in ("body", "html"):
                scoped.append(FRAGMENT_SCOPE)
            else:
                scoped.append(f"{FRAGMENT_SCOPE} {selector}")
        rules.append(f"{', '.join(scoped)} {{{body.strip()}}}")
    return "\n".join(rules)


def _page(*, fragment: bool = False, **context: Any) -> str:
    """Render the page template with the inlined style, script and Chart.js; with ``fragment``,
    the part of the page a notebook shows: the same content in a ``FRAGMENT_SCOPE`` element
    with its style scoped to it, and no script, chart or search box."""
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
            fragment=fragment,
            style=scoped_style() if fragment else _asset("report.css"),
            script="" if fragment else _asset("report.js"),
            chartjs="" if fragment else _asset("chart.umd.min.js"),
            **context,
        )
    )


def render_report_html(report: Report, *, fragment: bool = False) -> str:
    """Return the report as one self-contained HTML page: headline, run details, advice, and
    sortable, searchable tables, some with a chart of their numbers above them. With
    ``fragment``: the same without charts, script or search boxes, as a notebook shows it
    (see ``_page``)."""
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
        fragment=fragment,
        title=report.title,
        subtitle=f"Times in {unit}.",
        headline=_headline(report.headline, unit) if report.headline else None,
        meta=meta,
        findings=findings,
        advice_note=report.advice_note,
        specs=specs,
        tables=tables,
    )


def render_comparison_html(report: ComparisonReport, *, fragment: bool = False) -> str:
    """Return the comparison as one self-contained HTML page (no network needed to view it):
    the verdict first, then the gate's line, then the tables, the difference chart over the
    family table. ``fragment`` as for ``render_report_html``."""
    subtitle = ", ".join(
        f"{label} ({fw})" for label, fw in zip(report.labels, report.frameworks, strict=True)
    )
    tables, specs = _tables(report.tables, report.charts, report.time_unit)
    return _page(
        fragment=fragment,
        title=report.title,
        subtitle=f"{subtitle}. Times in {report.time_unit} per {report.per}.",
        verdict=report.verdict_lines or None,
        specs=specs,
        tables=tables,
        gate=report.gate,
    )
