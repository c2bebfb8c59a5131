"""The text renderer: aligned tables with one time unit, in the style of Paddle's
``prof.summary()``. It formats a report model (``perfkit_core.report.model``) and computes
nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    from perfkit_core.report.model import Headline, Report, Table

TABLE_WIDTH_MIN = 60
#: Width of the headline's stacked bar, in characters.
BAR_WIDTH = 60
#: Fill characters of the stacked bar's segments, in phase order.
BAR_FILLS = "#=*+-"
#: Text cells longer than this are cut (with ``...``).
MAX_NAME_WIDTH = 60


def format_table(
    table: Table, *, time_unit: str = "ms", max_name_width: int = MAX_NAME_WIDTH
) -> str:
    """Return ``table`` as aligned text under a banner with its title.

    Time columns are shown in ``time_unit``; text columns are left-aligned and cut to
    ``max_name_width`` characters; numbers are right-aligned; ``-`` marks a value that was not
    measured; detail rows are indented under their parent.
    """
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time unit must be one of {', '.join(TIME_UNITS)}, not {time_unit!r}")
    shown = [j for j, c in enumerate(table.columns) if not c.repeats_name]
    headers = [header_label(table.columns[j].label, table.columns[j].unit, time_unit) for j in shown]
    text_cols = [table.columns[j].unit == "text" for j in shown]
    body: list[list[str]] = []
    for i, _row in enumerate(table.rows):
        cells = []
        for k, j in enumerate(shown):
            cell = cell_text(table, i, j, time_unit)
            if j == 0 and table.levels and table.levels[i]:
                cell = "  " * table.levels[i] + cell
            if text_cols[k] and len(cell) > max_name_width:
                cell = cell[: max_name_width - 3] + "..."
            cells.append(cell)
        body.append(cells)
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if text else cell.rjust(width)
            for cell, width, text in zip(cells, widths, text_cols, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    banner = f" {table.title} ".center(max(len(rule), TABLE_WIDTH_MIN), "-")
    out = [banner]
    if any(c.unit == "time" for c in table.columns):
        out.append(f"Time unit: {time_unit}")
    if table.note:
        out.append(table.note)
    out += [rule, line(headers), rule]
    out += [line(r) for r in body] if body else ["(no rows)"]
    out.append(rule)
    return "\n".join(out)


def render_header(report: Report) -> str:
    """The header lines: ``Label:  value``."""
    width = max(len(item.label) for item in report.header) + 2
    return "\n".join(
        f"{(item.label + ':').ljust(width)} {format_value(item.value, item.unit, report.time_unit)}"
        + (f" {report.time_unit}" if item.unit == "time" else "")
        for item in report.header
    )


def _item_text(value: object, unit: str, time_unit: str) -> str:
    return format_value(value, unit, time_unit) + (f" {time_unit}" if unit == "time" else "")


def render_headline(headline: Headline, time_unit: str) -> str:
    """The headline box: step time, throughput, a stacked bar of where the step goes, and the
    one change to make."""
    width = max([len(i.label) for i in headline.items] + [len("Where it goes")]) + 2
    lines = [
        f"{(item.label + ':').ljust(width)} {_item_text(item.value, item.unit, time_unit)}"
        for item in headline.items
    ]
    if headline.phases:
        bar = ""
        for i, phase in enumerate(headline.phases):
            bar += BAR_FILLS[i % len(BAR_FILLS)] * round(BAR_WIDTH * phase.share_pct / 100.0)
        legend = ", ".join(
            f"{BAR_FILLS[i % len(BAR_FILLS)]} {p.name} {format_value(p.share_pct, 'pct')}% "
            f"({format_value(p.per_step_ns, 'time', time_unit)} {time_unit})"
            for i, p in enumerate(headline.phases)
        )
        lines.append(f"{'Where it goes:'.ljust(width)} [{bar[:BAR_WIDTH].ljust(BAR_WIDTH)}]")
        lines.append(f"{''.ljust(width)} {legend}")
    top = headline.finding
    if top is not None:
        lines.append(
            f"{'Change first:'.ljust(width)} [{top.severity}] {top.title}; estimated saving "
            f"{saving_text(top, time_unit)} (advice 1 below)"
        )
        combined = headline.combined
        if combined is not None:
            lines.append(
                f"{'All advice:'.ljust(width)} applying all {combined.findings} findings would "
                f"save about {per_step_value(combined.saving_ns, combined.step_ns, time_unit)} "
                f"({combined.how})"
            )
    elif headline.note:
        lines.append(f"{'Advice:'.ljust(width)} {headline.note}")
    return " Headline ".center(TABLE_WIDTH_MIN, "=") + "\n" + "\n".join(lines)


def render_findings(findings: list[Any], *, time_unit: str = "ms", note: str | None = None) -> str:
    """Return advice findings as text: one block per finding, most valuable first: what is
    wrong, the estimated saving and how it was estimated, the evidence as sentences, what to
    change."""
    if not findings:
        return (note or "No advice: no rule found anything worth changing in this run.") + "\n"
    blocks = []
    for i, f in enumerate(findings, 1):
        lines = [
            f"{i}. [{f.severity}] {f.title}",
            f"   Estimated saving: {saving_text(f, time_unit)} ({f.id}).",
        ]
        if f.estimate:
            lines.append(f"   How: {f.estimate}")
        lines += [f"   - {sentence}" for sentence in f.details]
        if f.remedy:
            lines.append("   What to change:")
            lines += [f"     {line}" for line in str(f.remedy).splitlines()]
        blocks.append("\n".join(lines))
    return " Advice ".center(TABLE_WIDTH_MIN, "-") + "\n" + "\n\n".join(blocks) + "\n"


def render_report(report: Report) -> str:
    """Return the text form of a run's report: headline, header, advice, then every table (the
    tables behind the HTML charts included)."""
    parts = []
    if report.headline is not None:
        parts.append(render_headline(report.headline, report.time_unit))
    parts.append(render_header(report))
    if report.findings is not None:
        parts.append(
            render_findings(
                report.findings, time_unit=report.time_unit, note=report.advice_note
            ).rstrip()
        )
    parts += [format_table(t, time_unit=report.time_unit) for t in report.tables]
    return "\n\n".join(parts) + "\n"


def render_comparison(report: ComparisonReport) -> str:
    """Return the text form of a comparison: the verdict, the runs, every table, and the gate's
    line."""
    parts = []
    if report.verdict_lines:
        parts.append(
            " Verdict ".center(TABLE_WIDTH_MIN, "-")
            + "\n"
            + "\n".join(f"- {line}" if i else line for i, line in enumerate(report.verdict_lines))
        )
    parts.append(
        f"Comparing {len(report.labels)} runs: "
        + ", ".join(
            f"{label} ({fw})" for label, fw in zip(report.labels, report.frameworks, strict=True)
        )
    )
    parts += [format_table(t, time_unit=report.time_unit) for t in report.tables]
    text = "\n\n".join(parts) + "\n"
    if report.gate is not None:
        text += report.gate.message + "\n"
    return text
