"""Reports: one model per run or comparison (``model``), and the renderers that only format it.

- ``model``: ``build_report(run)``; ``comparison_model``: ``build_comparison_report(comparison)``.
- ``text``, ``html``, ``json``: the three renderers; ``format``: how values are written.
- ``export``: chrome traces, folded stacks, and every summary as CSV, Parquet or JSON.

``render(model, "text" | "json" | "html")`` formats either kind of model.
"""

from __future__ import annotations

from perfkit_core.report.comparison_model import ComparisonReport, build_comparison_report
from perfkit_core.report.model import Report, build_report

FORMATS = ("text", "json", "html")


def render(model: Report | ComparisonReport, fmt: str = "text", *, explain: bool = False) -> str:
    """Return a report or comparison model as ``fmt``: ``text``, ``json`` or ``html``. A
    run's advice is short in text (each finding's short form), whole with ``explain``; the
    HTML folds the rest of each finding under it, and the JSON holds both."""
    from perfkit_core.report import html, json, text

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if isinstance(model, ComparisonReport):
        if fmt == "json":
            return json.dumps(json.comparison_json(model))
        return (
            html.render_comparison_html(model) if fmt == "html" else text.render_comparison(model)
        )
    if fmt == "json":
        return json.dumps(json.report_json(model))
    if fmt == "html":
        return html.render_report_html(model)
    return text.render_report(model, explain=explain)


__all__ = [
    "FORMATS",
    "ComparisonReport",
    "Report",
    "build_comparison_report",
    "build_report",
    "render",
]
