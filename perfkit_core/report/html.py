"""The HTML renderer: one self-contained page per report model, rendered with jinja2 and
autoescaped (event names are untrusted input). It formats a ``perfkit_core.report.model`` object
and computes nothing.

Charts use Chart.js (MIT licence, vendored in ``assets/`` and inlined into the page), so a report
opens with no network; each chart is drawn from a table of the model, which the page also shows
(under the chart). Tables are sortable (click a header) and searchable (the box above each).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from perfkit_core.report.format import (
    TIME_UNITS,
    evidence_items,
    format_value,
    header_label,
    saving_text,
)

if TYPE_CHECKING:
    from perfkit_core.report.model import Chart, ComparisonReport, Report, Table

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #222; max-width: 1400px; }
h1 { margin-bottom: .2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 12.5px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; white-space: normal; max-width: 520px; word-break: break-all; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
.meta td, .meta th { text-align: left; }
.finding { border-left: 4px solid #888; padding: .4em .8em; margin: .8em 0; background: #fafafa; }
.finding.high { border-color: #c0392b; } .finding.medium { border-color: #e67e22; } .finding.low { border-color: #7f8c8d; }
.finding pre { background: #f0f0f0; padding: .5em; overflow-x: auto; }
.chart { max-width: 1100px; height: 340px; margin-bottom: 1em; }
input.search { margin: .3em 0; padding: 3px 6px; width: 320px; }
.gate { padding: .5em 1em; border-radius: 4px; } .regressed { background: #fdd; } .ok { background: #dfd; }
"""

_SCRIPT = """
function perfkitTables() {
  const params = new URLSearchParams(location.search);
  document.querySelectorAll('table.data').forEach((table) => {
    const headers = table.querySelectorAll('th');
    headers.forEach((th, col) => th.addEventListener('click', () => {
      const asc = !th.classList.contains('sorted-asc');
      headers.forEach((h) => h.classList.remove('sorted-asc', 'sorted-desc'));
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const key = (r) => { const c = r.cells[col]; const n = parseFloat(c.dataset.v); return isNaN(n) ? c.textContent : n; };
      rows.sort((a, b) => { const x = key(a), y = key(b); const d = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y)); return asc ? d : -d; });
      rows.forEach((r) => body.appendChild(r));
    }));
    const box = document.getElementById(table.id + '-search');
    if (box) {
      const apply = () => { const q = box.value.toLowerCase(); let shown = 0;
        Array.from(table.tBodies[0].rows).forEach((r) => { const hit = r.cells[0].textContent.toLowerCase().includes(q); r.style.display = hit ? '' : 'none'; if (hit) shown++; });
        table.dataset.shown = shown; };
      box.addEventListener('input', apply);
      if (params.get('q')) { box.value = params.get('q'); }
      apply();
    }
  });
}
function perfkitCharts(specs) {
  specs.forEach((spec) => {
    const canvas = document.getElementById(spec.id);
    if (!canvas || typeof Chart === 'undefined') return;
    new Chart(canvas, spec.config);
    canvas.dataset.rendered = '1';
  });
}
"""

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>{{ style|safe }}</style>
<script>{{ chartjs|safe }}</script>
</head><body>
<h1>{{ title }}</h1>
<p>{{ subtitle }}</p>
{% if meta %}<table class="meta">{% for k, v in meta %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>{% endif %}
{% if gate %}<p class="gate {{ 'regressed' if gate.regressed else 'ok' }}">{{ gate.message }}</p>{% endif %}
{% if findings is not none %}<h2>Advice</h2>
{% if not findings %}<p>No rule found anything worth changing in this run.</p>{% endif %}
{% for f in findings %}<div class="finding {{ f.severity }}"><b>[{{ f.severity }}] {{ f.title }}</b><br>
<small>{{ f.id }} &middot; estimated saving {{ f.saving }} over the profiled steps</small>
<ul>{% for k, v in f.evidence %}<li>{{ k }}: {{ v }}</li>{% endfor %}</ul>
{% if f.remedy %}<pre>{{ f.remedy }}</pre>{% endif %}</div>{% endfor %}{% endif %}
{% for t in tables %}<h2>{{ t.title }}</h2>
{% if t.chart %}<div class="chart"><canvas id="{{ t.chart }}"></canvas></div>{% endif %}
{% if t.note %}<p><small>{{ t.note }}</small></p>{% endif %}
<input class="search" id="{{ t.id }}-search" type="search" placeholder="filter by name">
<table class="data" id="{{ t.id }}"><thead><tr>{% for c in t.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in t.rows %}<tr>{% for cell in row %}<td data-v="{{ cell[1] }}">{{ cell[0] }}</td>{% endfor %}</tr>{% endfor %}</tbody></table>
{% endfor %}
<script>{{ script|safe }}
perfkitTables();
perfkitCharts({{ chart_specs|safe }});
</script>
</body></html>
"""


@cache
def _chartjs() -> str:
    return (
        resources.files("perfkit_core.report")
        .joinpath("assets/chart.umd.min.js")
        .read_text(encoding="utf-8")
    )


def _page(
    *,
    title: str,
    subtitle: str,
    specs: list[dict[str, Any]],
    tables: list[dict[str, Any]],
    meta: list[tuple[str, Any]] | None = None,
    findings: list[dict[str, Any]] | None = None,
    gate: Any = None,
) -> str:
    """Render the one page template with the inlined style, script and Chart.js."""
    import jinja2

    return (
        jinja2.Environment(autoescape=True)
        .from_string(_PAGE)
        .render(
            title=title,
            subtitle=subtitle,
            meta=meta,
            findings=findings,
            chart_specs=_json(specs),
            tables=tables,
            style=_STYLE,
            script=_SCRIPT,
            chartjs=_chartjs(),
            gate=gate,
        )
    )


def _json(value: Any) -> str:
    # Safe inside <script>: no "</" or "<!--" sequence can end or confuse the script element.
    return json.dumps(value, default=float).replace("<", "\\u003c")


def _table(table: Table, time_unit: str) -> dict[str, Any]:
    """A table as the template wants it: header labels, and per cell (text, sort key)."""
    rows = []
    for i, row in enumerate(table.rows):
        cells = []
        for j, (column, value) in enumerate(zip(table.columns, row, strict=True)):
            text = format_value(value, column.unit, time_unit)
            if j == 0 and table.levels and table.levels[i]:
                text = "\u2003" * table.levels[i] + text
            key = (
                repr(float(value))
                if column.unit != "text" and isinstance(value, (int, float))
                else ""
            )
            cells.append((text, key))
        rows.append(cells)
    return {
        "id": f"table-{table.id}",
        "title": table.title,
        "columns": [header_label(c.label, c.unit, time_unit) for c in table.columns],
        "rows": rows,
        "note": table.note,
    }


def _chart_spec(chart: Chart, table: Table, time_unit: str) -> dict[str, Any]:
    """The Chart.js configuration of ``chart``, its values read from ``table``."""
    keys = [c.key for c in table.columns]
    units = {c.key: c.unit for c in table.columns}
    labels = [str(row[keys.index(chart.label)]) for row in table.rows]

    def scaled(key: str) -> list[float | None]:
        scale = (
            TIME_UNITS[time_unit]
            if units[key] == "time"
            else (2**20 if units[key] == "bytes" else 1.0)
        )
        return [
            None if row[keys.index(key)] is None else round(float(row[keys.index(key)]) / scale, 6)
            for row in table.rows
        ]

    palette = [
        "#e67e22",
        "#2980b9",
        "#8e44ad",
        "#27ae60",
        "#95a5a6",
        "#c0392b",
        "#16a085",
        "#34495e",
    ]
    datasets: list[dict[str, Any]] = [
        {
            "label": next(c.label for c in table.columns if c.key == key),
            "data": scaled(key),
            "backgroundColor": palette[i % len(palette)],
            "borderColor": palette[i % len(palette)],
        }
        for i, key in enumerate(chart.series)
    ]
    unit = (
        {"time": time_unit, "bytes": "MiB", "pct": "%"}.get(units[chart.series[0]], "")
        if chart.series
        else ""
    )
    stacked = chart.kind == "stacked"
    config: dict[str, Any] = {
        "type": "line" if chart.kind == "line" else "bar",
        "data": {"labels": labels, "datasets": datasets},
        "options": {
            "animation": False,
            "maintainAspectRatio": False,
            "indexAxis": "y" if chart.kind == "hbar" else "x",
            "scales": {
                "x": {"stacked": stacked},
                "y": {"stacked": stacked, "title": {"display": True, "text": unit}},
            },
        },
    }
    if chart.kind == "line":
        for d in datasets:
            d["pointRadius"] = 0
            d["borderWidth"] = 1
    return {"id": chart.id, "config": config}


def _tables(
    tables: list[Table], charts: list[Chart], time_unit: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(tables for the template, each with the id of the chart drawn over it; Chart.js specs)."""
    by_table = {chart.table: chart for chart in charts}
    out, specs = [], []
    for table in tables:
        shown = _table(table, time_unit)
        chart = by_table.get(table.id)
        shown["chart"] = chart.id if chart else None
        if chart:
            specs.append(_chart_spec(chart, table, time_unit))
        out.append(shown)
    return out, specs


def render_report_html(report: Report) -> str:
    """Return the report as one self-contained HTML page: header, advice, and sortable,
    searchable tables, some with a chart of their numbers above them."""
    unit = report.time_unit
    findings = None
    if report.findings is not None:
        findings = [
            {
                "id": f.id,
                "severity": f.severity,
                "title": f.title,
                "saving": saving_text(f, unit),
                "evidence": evidence_items(f, unit),
                "remedy": f.remedy,
            }
            for f in report.findings
        ]
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
        meta=meta,
        findings=findings,
        specs=specs,
        tables=tables,
    )


def render_comparison_html(report: ComparisonReport) -> str:
    """Return the comparison as one self-contained HTML page (no network needed to view it)."""
    subtitle = ", ".join(
        f"{label} ({fw})" for label, fw in zip(report.labels, report.frameworks, strict=True)
    )
    tables, specs = _tables(report.tables, report.charts, report.time_unit)
    return _page(
        title=report.title,
        subtitle=f"{subtitle}. Times in {report.time_unit} per {report.per}.",
        specs=specs,
        tables=tables,
        gate=report.gate,
    )
