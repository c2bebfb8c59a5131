"""Self-contained HTML pages rendered with jinja2, autoescaped: event names are untrusted input.

Charts use Chart.js (MIT licence, vendored in ``assets/`` and inlined into the page), so a report
opens with no network. Tables are sortable (click a header) and searchable (the box above each).
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

#: Points of the memory curve kept at most (evenly sampled), to keep reports small.
MEMORY_POINTS = 1500
TABLE_ROWS = 200

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
{% for chart in charts %}<h2>{{ chart.title }}</h2><div class="chart"><canvas id="{{ chart.id }}"></canvas></div>{% endfor %}
{% for t in tables %}<h2>{{ t.title }}</h2>{% if t.note %}<p><small>{{ t.note }}</small></p>{% endif %}
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


def _env() -> Any:
    import jinja2

    return jinja2.Environment(autoescape=True)


def _page(
    *,
    title: str,
    subtitle: str,
    charts: list[dict[str, str]],
    specs: list[dict[str, Any]],
    tables: list[dict[str, Any]],
    meta: list[tuple[str, Any]] | None = None,
    findings: list[dict[str, Any]] | None = None,
    gate: Any = None,
) -> str:
    """Render the one page template with the inlined style, script and Chart.js."""
    return (
        _env()
        .from_string(_PAGE)
        .render(
            title=title,
            subtitle=subtitle,
            meta=meta,
            findings=findings,
            charts=charts,
            chart_specs=_json(specs),
            tables=tables,
            style=_STYLE,
            script=_SCRIPT,
            chartjs=_chartjs(),
            gate=gate,
        )
    )


def _table(
    table_id: str, title: str, frame: Any, *, time_unit: str = "ms", note: str | None = None
) -> dict[str, Any]:
    from perfkit_core.report.text import TIME_UNITS, _label

    scale = TIME_UNITS[time_unit]
    rows = []
    for record in frame.head(TABLE_ROWS).itertuples(index=False, name=None):
        cells = []
        for column, value in zip(frame.columns, record, strict=True):
            if isinstance(value, (float, np.floating)) and math.isnan(value):
                cells.append(("-", ""))
            elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, bool
            ):
                number = float(value) / scale if column.endswith("_ns") else float(value)
                text = (
                    f"{number:,.3f}"
                    if column.endswith(("_ns", "_pct", "_per_s")) or not float(value).is_integer()
                    else f"{int(value):,}"
                )
                cells.append((text, repr(number)))
            else:
                cells.append((str(value).replace("\n", " <- "), ""))
        rows.append(cells)
    shown = f"top {TABLE_ROWS} of {len(frame)} rows" if len(frame) > TABLE_ROWS else None
    return {
        "id": table_id,
        "title": title,
        "columns": [_label(str(c), time_unit) for c in frame.columns],
        "rows": rows,
        "note": "; ".join(x for x in (note, shown) if x),
    }


def _json(value: Any) -> str:
    # Safe inside <script>: no "</" sequences can close the tag.
    return json.dumps(value, default=float).replace("</", "<\\/")


def _bar(
    chart_id: str,
    title: str,
    labels: list[str],
    datasets: list[dict[str, Any]],
    *,
    stacked: bool = False,
    horizontal: bool = False,
    unit: str = "ms",
) -> tuple[dict[str, str], dict[str, Any]]:
    config = {
        "type": "bar",
        "data": {"labels": labels, "datasets": datasets},
        "options": {
            "animation": False,
            "maintainAspectRatio": False,
            "indexAxis": "y" if horizontal else "x",
            "scales": {
                "x": {"stacked": stacked},
                "y": {"stacked": stacked, "title": {"display": True, "text": unit}},
            },
        },
    }
    return {"id": chart_id, "title": title}, {"id": chart_id, "config": config}


def render_report_html(run: Any, *, time_unit: str = "ms", top: int = 50) -> str:
    """Return the report of ``run`` as one self-contained HTML page: metadata, advice, per-step
    time breakdown, op-family and event-kind charts, memory curve (where recorded), and sortable,
    searchable tables of the summaries (operators, kernels, ...)."""
    from perfkit_core.comparison import family_times
    from perfkit_core.report.text import TIME_UNITS, _evidence_text
    from perfkit_core.views.phases import step_phases

    scale = TIME_UNITS[time_unit]
    meta = run.meta
    span = meta.get("span_ns") or [0, 0]
    info = [
        ("Framework", f"{meta.get('framework')} {meta.get('framework_version') or ''}".strip()),
        ("Source", meta.get("source") or "-"),
        ("Ranks", ", ".join(map(str, meta.get("ranks", [])))),
        ("Steps", len(meta.get("steps", []))),
        ("Events", len(run.events)),
        ("Profiled", f"{(span[1] - span[0]) / 1e6:.3f} ms"),
        (
            "Devices",
            ", ".join(sorted({str(d.get("name")) for d in meta.get("devices") or []}))
            or "none recorded",
        ),
    ]
    findings = []
    for f in run.advise():
        step = f.evidence.get("step_time_ns") or 0
        share = f" ({100.0 * f.saving_ns / step:.1f}% of step time)" if step else ""
        evidence = [
            (k, _evidence_text(k, v, time_unit))
            for k, v in f.evidence.items()
            if k not in ("step_time_ns", "steps")
        ]
        findings.append(
            {
                "id": f.id,
                "severity": f.severity,
                "title": f.title,
                "saving": f"{f.saving_ns / scale:.3f} {time_unit}{share}",
                "evidence": evidence,
                "remedy": f.remedy,
            }
        )

    charts: list[dict[str, str]] = []
    specs: list[dict[str, Any]] = []
    phases = step_phases(run)
    if len(phases):
        colors = {
            "dataloader": "#e67e22",
            "forward": "#2980b9",
            "backward": "#8e44ad",
            "optimization": "#27ae60",
            "others": "#95a5a6",
        }
        datasets = [
            {
                "label": p,
                "data": (phases[f"{p}_ns"] / scale).round(3).tolist(),
                "backgroundColor": c,
            }
            for p, c in colors.items()
        ]
        c, s = _bar(
            "chart-steps",
            "Time per step by phase",
            phases["name"].tolist(),
            datasets,
            stacked=True,
            unit=time_unit,
        )
        charts.append(c)
        specs.append(s)
    families = family_times(run)
    if families:
        items = sorted(families.items(), key=lambda kv: -kv[1])[:20]
        c, s = _bar(
            "chart-families",
            "Time by op family",
            [k for k, _ in items],
            [
                {
                    "label": time_unit,
                    "data": [round(v / scale, 3) for _, v in items],
                    "backgroundColor": "#2980b9",
                }
            ],
            horizontal=True,
            unit=time_unit,
        )
        charts.append(c)
        specs.append(s)
    overview = run.summary("overview")
    kinds = overview[overview["name"] != "step"]
    if len(kinds):
        c, s = _bar(
            "chart-kinds",
            "Time by event kind (overlaps merged)",
            kinds["name"].tolist(),
            [
                {
                    "label": "CPU",
                    "data": [
                        None if math.isnan(v) else round(v / scale, 3) for v in kinds["cpu_time_ns"]
                    ],
                    "backgroundColor": "#34495e",
                },
                {
                    "label": "GPU",
                    "data": [
                        None if math.isnan(v) else round(v / scale, 3) for v in kinds["gpu_time_ns"]
                    ],
                    "backgroundColor": "#16a085",
                },
            ],
            unit=time_unit,
        )
        charts.append(c)
        specs.append(s)
    memory = _memory_curve(run)
    if memory:
        charts.append({"id": "chart-memory", "title": "Memory allocated over time"})
        specs.append(
            {
                "id": "chart-memory",
                "config": {
                    "type": "line",
                    "data": {
                        "datasets": [
                            {"label": name, "data": points, "pointRadius": 0, "borderWidth": 1}
                            for name, points in memory.items()
                        ]
                    },
                    "options": {
                        "animation": False,
                        "maintainAspectRatio": False,
                        "parsing": False,
                        "scales": {
                            "x": {"type": "linear", "title": {"display": True, "text": "ms"}},
                            "y": {"title": {"display": True, "text": "MB"}},
                        },
                    },
                },
            }
        )
    tables = []
    for view, title in (
        ("model", "Model"),
        ("overview", "Overview"),
        ("device", "Device"),
        ("operator", "Operators"),
        ("kernel", "Kernels"),
        ("memcpy", "Memory manipulation"),
        ("user", "User-defined spans"),
        ("distributed", "Distributed"),
        ("memory", "Memory by op"),
        ("benchmark", "Benchmark"),
    ):
        frame = run.summary(view)
        if frame.empty:
            continue
        tables.append(
            _table(
                f"table-{view}",
                title,
                frame.head(top) if view in ("operator", "kernel", "memory") else frame,
                time_unit=time_unit,
                note=frame.attrs.get("note"),
            )
        )
    return _page(
        title="perfkit report",
        subtitle=f"Times in {time_unit}.",
        meta=info,
        findings=findings,
        charts=charts,
        specs=specs,
        tables=tables,
    )


def _memory_curve(run: Any) -> dict[str, list[dict[str, float]]]:
    ev = run.events
    mem = ev[(ev["kind"] == "memory") & ev["allocated_bytes"].notna()]
    if mem.empty:
        return {}
    origin = int(ev["start_ns"].min())
    curves = {}
    for (dtype, index), group in mem.groupby(
        [mem["device_type"].astype(str), mem["device_index"]], sort=True
    ):
        group = group.sort_values("start_ns")
        step = max(len(group) // MEMORY_POINTS, 1)
        sampled = group.iloc[::step]
        name = dtype if index < 0 else f"{dtype}:{index}"
        curves[name] = [
            {"x": round((t - origin) / 1e6, 3), "y": round(b / 2**20, 3)}
            for t, b in zip(sampled["start_ns"], sampled["allocated_bytes"], strict=True)
        ]
    return curves


def render_comparison_html(comparison: Any, tables: dict[str, Any], gate: Any = None) -> str:
    """Return the comparison as one self-contained HTML page (no network needed to view it)."""
    from perfkit_core.report.text import COMPARISON_TITLES

    subtitle = ", ".join(
        f"{label} ({run.framework})"
        for label, run in zip(comparison.labels, comparison.runs, strict=True)
    )
    charts, specs = [], []
    if "family" in tables:
        fam = tables["family"]
        c, s = _bar(
            "chart-families",
            "Time per step by op family",
            fam["name"].tolist(),
            [
                {
                    "label": label,
                    "data": [None if math.isnan(v) else round(v / 1e6, 3) for v in fam[label]],
                }
                for label in comparison.labels
            ],
            horizontal=True,
        )
        charts.append(c)
        specs.append(s)
    rendered = []
    for name, frame in tables.items():
        shown = frame.rename(
            columns={label: f"{label}_ns" for label in comparison.labels if label in frame.columns}
        )
        rendered.append(
            _table(
                f"table-{name}",
                COMPARISON_TITLES.get(name, name) + f" (per {comparison.per})",
                shown,
            )
        )
    return _page(
        title="perfkit comparison",
        subtitle=f"{subtitle}. Times in ms per {comparison.per}.",
        charts=charts,
        specs=specs,
        tables=rendered,
        gate=gate,
    )
