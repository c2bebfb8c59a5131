"""The text renderer: aligned tables with one time unit, in the style of Paddle's
``prof.summary()``. It formats a report model (``perfkit_core.report.model``) and computes
nothing."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import printable
from perfkit_core.events.names import short_names
from perfkit_core.report.finding_summary import summarize
from perfkit_core.report.format import (
    TIME_UNITS,
    cell_text,
    format_value,
    header_label,
    per_step_value,
    saving_text,
)
from perfkit_core.report.headline import remedy_label, severity_label

if TYPE_CHECKING:
    from perfkit_core.report.comparison_model import ComparisonReport
    from perfkit_core.report.headline import Headline
    from perfkit_core.report.model import Report, Table

TABLE_WIDTH_MIN = 60
#: Width of the headline's stacked bar, in characters.
BAR_WIDTH = 60
#: Fill characters of the stacked bar's segments, in phase order.
BAR_FILLS = "#=*+-"
#: Names longer than this are shortened (different names stay different).
MAX_NAME_WIDTH = 60
#: Other text cells longer than this are cut (with ``...``).
MAX_TEXT_WIDTH = 40
#: Header labels wrap onto more lines rather than widen a column past its values, down to this
#: width (or their longest word).
HEADER_MIN_WIDTH = 8
#: Text cells of a comparison's tables (the native ops behind a matched op) are cut to this.
COMPARISON_TEXT_WIDTH = 26
#: Notes and verdict lines wrap at this width.
LINE_WIDTH = 160


def merge_pairs(table: Table, time_unit: str) -> Table:
    """``table`` with each pair of own and with-children columns (``Table.paired``) written as
    one ``own/total`` column, as tfprof writes them (``-`` for a figure not measured); a table
    without pairs is returned as it is."""
    from dataclasses import replace

    from perfkit_core.report.tables import Column

    keys = [c.key for c in table.columns]
    pairs = {keys.index(a): keys.index(b) for a, b in table.paired if a in keys and b in keys}
    if not pairs:
        return table
    totals = set(pairs.values())
    columns = []
    rows: list[list[Any]] = [[] for _ in table.rows]
    for j, column in enumerate(table.columns):
        if j in totals:
            continue
        if j not in pairs:
            columns.append(column)
            for i, row in enumerate(table.rows):
                rows[i].append(row[j])
            continue
        k = pairs[j]
        label = column.label.replace(", own", ", own/with children")
        if label == column.label:
            label = f"{column.label} (own/with children)"
        columns.append(Column(column.key, header_label(label, column.unit, time_unit), "pair"))
        for i, row in enumerate(table.rows):
            own = format_value(row[j], column.unit, time_unit)
            total = format_value(row[k], table.columns[k].unit, time_unit)
            rows[i].append(None if row[j] is None and row[k] is None else f"{own}/{total}")
    return replace(table, columns=columns, rows=rows, paired=[])


def format_table(
    table: Table,
    *,
    time_unit: str = "ms",
    max_name_width: int = MAX_NAME_WIDTH,
    max_text_width: int = MAX_TEXT_WIDTH,
) -> str:
    """Return ``table`` as aligned text under a banner with its title.

    Time columns are shown in ``time_unit``; names (the first column) are shortened to about
    ``max_name_width`` characters, different names staying different
    (``perfkit_core.events.names.short_names``), other text columns are cut to
    ``max_text_width``; headers wrap onto more lines rather than widen a column past its
    values, and the note wraps at ``LINE_WIDTH``; text is left-aligned, numbers
    right-aligned; ``-`` marks a value that was not measured; detail rows are indented under
    their parent.
    """
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time unit must be one of {', '.join(TIME_UNITS)}, not {time_unit!r}")
    has_time = any(c.unit == "time" for c in table.columns)
    table = merge_pairs(table, time_unit)
    shown = [j for j, c in enumerate(table.columns) if not c.repeats_name]
    headers = [
        header_label(table.columns[j].label, table.columns[j].unit, time_unit) for j in shown
    ]
    text_cols = [table.columns[j].unit == "text" for j in shown]
    body: list[list[str]] = []
    names = short_names(
        [format_value(row[0], table.columns[0].unit, time_unit) for row in table.rows],
        max_name_width,
    )
    for i, _row in enumerate(table.rows):
        cells = []
        for k, j in enumerate(shown):
            cell = names[i] if j == 0 else cell_text(table, i, j, time_unit)
            if j == 0 and table.levels and table.levels[i]:
                cell = "  " * table.levels[i] + cell
            if j and text_cols[k] and len(cell) > max_text_width:
                cell = cell[: max_text_width - 3] + "..."
            cells.append(cell)
        body.append(cells)
    # A column is as wide as its values, or as its header's longest word (at least
    # HEADER_MIN_WIDTH): longer headers wrap onto more lines.
    widths = [
        max(
            [len(r[i]) for r in body]
            + [min(len(h), max(HEADER_MIN_WIDTH, *(len(w) for w in h.split())))]
        )
        for i, h in enumerate(headers)
    ]
    header_lines = [textwrap.wrap(h, w) or [""] for h, w in zip(headers, widths, strict=True)]
    depth = max(len(lines) for lines in header_lines)

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if text else cell.rjust(width)
            for cell, width, text in zip(cells, widths, text_cols, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    banner = f" {table.title} ".center(max(len(rule), TABLE_WIDTH_MIN), "-")
    out = [banner]
    if has_time:
        out.append(f"Time unit: {time_unit}")
    if table.note:
        out += textwrap.wrap(table.note, max(len(rule), LINE_WIDTH))
    out.append(rule)
    for n in range(depth):
        # Headers sit at the bottom of their block, next to the values they name.
        out.append(
            line([h[n - depth + len(h)] if n >= depth - len(h) else "" for h in header_lines])
        )
    out.append(rule)
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
    suffix = f" {time_unit}" if unit == "time" else "%" if unit == "pct" else ""
    return format_value(value, unit, time_unit) + suffix


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
            f"{saving_text(top, time_unit)} (advice {headline.finding_number} below)"
        )
        combined = headline.combined
        if combined is not None:
            lines.append(
                f"{'All advice:'.ljust(width)} applying {combined.findings_text()} would "
                f"save {combined.about()} {per_step_value(combined.saving_ns, combined.step_ns, time_unit, combined.of)} "
                f"({combined.how})"
            )
    elif headline.note:
        lines.append(f"{'Advice:'.ljust(width)} {headline.note}")
    return " Headline ".center(TABLE_WIDTH_MIN, "=") + "\n" + "\n".join(lines)


def render_findings(
    findings: list[Any], *, time_unit: str = "ms", note: str | None = None, explain: bool = False
) -> str:
    """Return advice findings as text: one block per finding, most valuable first. By default
    each block is the finding's short form (``report.finding_summary``): what is wrong, the
    saving and how sure perfkit is of it, the evidence that carries the figure, what to change.
    With ``explain``, the whole of it: how the saving was estimated, every evidence sentence
    and the remedy's notes."""
    if not findings:
        return (note or "No advice: no rule found anything worth changing in this run.") + "\n"
    blocks = []
    for i, f in enumerate(findings, 1):
        lines = [f"{i}. [{severity_label(f)}] {f.title}"]
        if explain:
            lines.append(f"   Estimated saving: {saving_text(f, time_unit)} ({f.id}).")
            if f.estimate:
                lines.append(f"   How: {f.estimate}")
            lines += [f"   - {sentence}" for sentence in f.details]
            remedy = str(f.remedy or "")
        else:
            short = summarize(f, time_unit)
            lines.append(f"   {short.saving_line(f.id)}")
            lines += [f"   - {sentence}" for sentence in short.evidence]
            remedy = short.remedy
        if remedy:
            lines.append(f"   {remedy_label(f)}")
            lines += [f"     {line}" for line in remedy.splitlines()]
        if not explain and short.rest_text():
            lines.append(f"   (--explain: {short.rest_text()})")
        blocks.append("\n".join(lines))
    return _lines(" Advice ".center(TABLE_WIDTH_MIN, "-") + "\n" + "\n\n".join(blocks)) + "\n"


def _lines(text: str) -> str:
    """``text`` with the control characters of each line escaped (``\\x1b``, ``\\r``): names
    from a trace (titles, evidence, labels) cannot move the cursor, clear the screen, retitle
    the window or ring the bell of the terminal showing the report."""
    return "\n".join(printable(line) for line in text.split("\n"))


def render_report(report: Report, *, explain: bool = False) -> str:
    """Return the text form of a run's report: headline, header, advice (each finding's short
    form, or with ``explain`` the whole of it), then every table (the tables behind the HTML
    charts included)."""
    parts = []
    if report.headline is not None:
        parts.append(render_headline(report.headline, report.time_unit))
    parts.append(render_header(report))
    if report.findings is not None:
        parts.append(
            render_findings(
                report.findings,
                time_unit=report.time_unit,
                note=report.advice_note,
                explain=explain,
            ).rstrip()
        )
    parts += [format_table(t, time_unit=report.time_unit) for t in report.tables]
    return _lines("\n\n".join(parts)) + "\n"


def render_comparison(report: ComparisonReport) -> str:
    """Return the text form of a comparison: the verdict, the runs, every table, and the gate's
    line."""
    parts = []
    if report.verdict_lines:
        parts.append(
            " Verdict ".center(TABLE_WIDTH_MIN, "-")
            + "\n"
            + "\n".join(
                textwrap.fill(
                    f"- {line}" if i else line,
                    LINE_WIDTH,
                    subsequent_indent="  ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
                for i, line in enumerate(report.verdict_lines)
            )
        )
    parts.append(
        f"Comparing {len(report.labels)} runs: "
        + ", ".join(
            f"{label} ({fw})" for label, fw in zip(report.labels, report.frameworks, strict=True)
        )
    )
    # The op lists of a comparison's matched ops are cut shorter, so the table fits 160
    # columns beside the runs' figures.
    parts += [
        format_table(t, time_unit=report.time_unit, max_text_width=COMPARISON_TEXT_WIDTH)
        for t in report.tables
    ]
    text = "\n\n".join(parts) + "\n"
    if report.gate is not None:
        text += report.gate.message + "\n"
    return _lines(text)
