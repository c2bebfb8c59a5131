"""Self-contained HTML pages rendered with jinja2 (autoescaped: event names are untrusted)."""

from __future__ import annotations

from typing import Any

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0 2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
.gate { padding: .5em 1em; border-radius: 4px; }
.regressed { background: #fdd; } .ok { background: #dfd; }
</style></head><body>
<h1>{{ title }}</h1>
<p>{{ subtitle }}</p>
{% if gate %}<p class="gate {{ 'regressed' if gate.regressed else 'ok' }}">{{ gate.message }}</p>{% endif %}
{% for name, table in tables %}
<h2>{{ name }}</h2>
<table><thead><tr>{% for c in table.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in table.rows %}<tr>{% for v in row %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}</tbody></table>
{% endfor %}
</body></html>
"""


def _cells(frame: Any) -> dict[str, Any]:
    import math

    rows = []
    for row in frame.itertuples(index=False, name=None):
        cells = []
        for value in row:
            if isinstance(value, float):
                cells.append("-" if math.isnan(value) else f"{value:,.3f}")
            else:
                cells.append(str(value))
        rows.append(cells)
    return {"columns": [str(c) for c in frame.columns], "rows": rows}


def render_comparison_html(comparison: Any, tables: dict[str, Any], gate: Any = None) -> str:
    """Return the comparison as one self-contained HTML page (no network needed to view it)."""
    import jinja2

    env = jinja2.Environment(autoescape=True)
    template = env.from_string(_PAGE)
    subtitle = ", ".join(
        f"{label} ({run.framework})"
        for label, run in zip(comparison.labels, comparison.runs, strict=True)
    )
    from perfkit_core.render.text import COMPARISON_TITLES

    return template.render(
        title="perfkit comparison",
        subtitle=f"Times in ns per {comparison.per}: {subtitle}",
        gate=gate,
        tables=[
            (COMPARISON_TITLES.get(name, name), _cells(frame)) for name, frame in tables.items()
        ],
    )
