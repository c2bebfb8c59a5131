"""Aligned text tables with one time unit, in the style of Paddle's ``prof.summary()``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Time units a report can use, with their size in ns.
TIME_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
TABLE_WIDTH_MIN = 60


def _label(column: str, unit: str) -> str:
    """Header for a column: ``cpu_total_ns`` -> ``CPU total (ms)``."""
    base = column
    suffix = ""
    if column.endswith("_ns"):
        base, suffix = column[:-3], f" ({unit})"
    elif column.endswith("_pct"):
        base, suffix = column[:-4], " (%)"
    if base == "gb_per_s":
        return "GB/s"
    if base == "gflops_per_s":
        return "GFLOP/s"
    if base == "flops":
        return "FLOPs"
    words = base.split("_")
    words = [w.upper() if w in ("cpu", "gpu", "ips") else w for w in words]
    text = " ".join(words)
    return (text[:1].upper() + text[1:]) + suffix


def _cell(value: Any, column: str, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if column.endswith("_ns"):
        return f"{value / TIME_UNITS[unit]:.3f}"
    if column.endswith("_pct"):
        return f"{value:.2f}"
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return f"{value:.3f}" if abs(value) >= 1 else f"{value:.4g}"
    text = str(value)
    return text.replace("\n", " <- ")


def format_table(
    frame: pd.DataFrame,
    title: str,
    *,
    time_unit: str = "ms",
    max_name_width: int = 60,
    note: str | None = None,
) -> str:
    """Return ``frame`` as an aligned text table under a ``title`` banner.

    Columns ending in ``_ns`` are shown in ``time_unit``; text columns are left-aligned and cut to
    ``max_name_width`` characters (with ``...``); numbers are right-aligned. NaN shows as ``-``.
    """
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time unit must be one of {', '.join(TIME_UNITS)}, not {time_unit!r}")
    columns = list(frame.columns)
    headers = [_label(c, time_unit) for c in columns]
    text_cols = {
        c
        for c in columns
        if frame[c].dtype == object or str(frame[c].dtype) in ("category", "string", "str")
    }
    body: list[list[str]] = []
    for row in frame.itertuples(index=False, name=None):
        cells = []
        for column, value in zip(columns, row, strict=True):
            cell = _cell(value, column, time_unit)
            if column in text_cols and len(cell) > max_name_width:
                cell = cell[: max_name_width - 3] + "..."
            cells.append(cell)
        body.append(cells)
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for column, cell, width in zip(columns, cells, widths, strict=True):
            parts.append(cell.ljust(width) if column in text_cols else cell.rjust(width))
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    total = max(len(rule), TABLE_WIDTH_MIN)
    banner = f" {title} ".center(total, "-")
    out = [banner]
    if any(c.endswith("_ns") for c in columns):
        out.append(f"Time unit: {time_unit}")
    if note:
        out.append(note)
    out += [rule, line(headers), rule]
    out += [line(r) for r in body] if body else ["(no rows)"]
    out.append(rule)
    return "\n".join(out)


VIEW_TITLES = {
    "model": "Model Summary",
    "operator": "Operator Summary",
    "user": "UserDefined Summary",
}


def run_header(run: Run) -> str:
    """Return a few lines describing ``run``: framework, source, ranks, steps, events, span."""
    meta = run.meta
    span = meta.get("span_ns") or [0, 0]
    devices = ", ".join(str(d.get("name")) for d in meta.get("devices") or []) or "none recorded"
    lines = [
        f"Framework:   {meta.get('framework')} {meta.get('framework_version') or ''}".rstrip(),
        f"Source:      {meta.get('source') or '-'}",
        f"Ranks:       {', '.join(map(str, meta.get('ranks', [])))} (world size {meta.get('world_size', 1)})",
        f"Steps:       {len(meta.get('steps', []))}",
        f"Events:      {len(run.events)}",
        f"Profiled:    {(span[1] - span[0]) / 1e6:.3f} ms",
        f"Devices:     {devices}",
    ]
    return "\n".join(lines)


def _indent_detail(frame: pd.DataFrame) -> pd.DataFrame:
    """Detail rows (level 1) shown indented under their parent row, as Paddle's op_detail."""
    out = frame.copy()
    out["name"] = [
        ("  " + str(n)) if lvl else str(n) for n, lvl in zip(out["name"], out["level"], strict=True)
    ]
    return out.drop(columns=[c for c in ("level", "detail_of") if c in out.columns])


def _has_device_events(run: Run) -> bool:
    return bool((run.events["stream"].to_numpy() >= 0).any())


def render_report(
    run: Run,
    views: Iterable[str] = ("model", "operator", "user"),
    *,
    time_unit: str = "ms",
    top: int | None = 30,
    options: dict[str, Any] | None = None,
    advice: bool = False,
) -> str:
    """Return the text report of ``run``: a header and one table per view."""
    from perfkit_core.progress import stage

    parts = [run_header(run)]
    with stage("summaries", total=len(list(views)) + int(advice)) as bar:
        return _render_report(
            run,
            list(views),
            parts,
            bar,
            time_unit=time_unit,
            top=top,
            options=options,
            advice=advice,
        )


def _render_report(
    run: Run,
    views: list[str],
    parts: list[str],
    bar: Any,
    *,
    time_unit: str,
    top: int | None,
    options: dict[str, Any] | None,
    advice: bool,
) -> str:
    if advice:
        bar.update(1)
        findings = run.advise()
        if findings:
            parts.append(render_findings(findings, time_unit=time_unit).rstrip())
    for view in views:
        bar.update(1)
        frame = run.summary(view, **(options or {}).get(view, {}))
        if "level" in frame.columns:
            frame = _indent_detail(frame)
        shown = frame.head(top) if top else frame
        notes = [str(frame.attrs["note"])] if frame.attrs.get("note") else []
        if top and len(frame) > top:
            notes.append(f"Top {len(shown)} of {len(frame)} rows")
        gpu_cols = [c for c in shown.columns if c.startswith("gpu_")]
        if gpu_cols and shown[gpu_cols].isna().all().all() and not _has_device_events(run):
            shown = shown.drop(columns=gpu_cols)
            notes.append("No device events were recorded: GPU columns omitted")
        unrecorded = [
            c for c in ("flops", "gflops_per_s") if c in shown.columns and shown[c].isna().all()
        ]
        shown = shown.drop(columns=unrecorded)
        note = "; ".join(notes) or None
        parts.append(
            format_table(
                shown,
                VIEW_TITLES.get(view, f"{view} summary".title()),
                time_unit=time_unit,
                note=note,
            )
        )
    return "\n\n".join(parts) + "\n"


def render_findings(findings: list[Any], *, time_unit: str = "ms") -> str:
    """Return advice findings as text: one block per finding, most valuable first."""
    if not findings:
        return "No advice: no rule found anything worth changing in this run.\n"
    scale = TIME_UNITS[time_unit]
    blocks = []
    for i, f in enumerate(findings, 1):
        step = f.evidence.get("step_time_ns") or 0
        share = f" ({100.0 * f.saving_ns / step:.1f}% of step time)" if step else ""
        lines = [
            f"{i}. [{f.severity}] {f.title}",
            f"   id: {f.id}    estimated saving: {f.saving_ns / scale:.3f} {time_unit}{share} over the profiled steps",
            "   evidence:",
        ]
        for key, value in f.evidence.items():
            if key in ("step_time_ns", "steps"):
                continue
            lines.append(f"     {key}: {_evidence_text(key, value, time_unit)}")
        if f.remedy:
            lines.append("   remedy:")
            lines += [f"     {line}" for line in str(f.remedy).splitlines()]
        blocks.append("\n".join(lines))
    return " Advice ".center(60, "-") + "\n" + "\n\n".join(blocks) + "\n"


def _evidence_text(key: str, value: Any, unit: str) -> str:
    if isinstance(value, list):
        return "; ".join(_evidence_text("", v, unit) for v in value[:5])
    if isinstance(value, dict):
        return ", ".join(f"{k}={_evidence_text(k, v, unit)}" for k, v in value.items())
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith("_ns"):
        return f"{value / TIME_UNITS[unit]:.3f} {unit}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


COMPARISON_TITLES = {
    "steps": "Step Time",
    "phases": "Phases per Step",
    "totals": "Totals per Step",
    "family": "Op Families per Step",
    "ops": "Operators per Step",
}


def render_comparison(comparison: Any, tables: dict[str, Any], *, time_unit: str = "ms") -> str:
    """Return the comparison tables as text. Columns named after runs hold ns per step (or per
    sample), shown in ``time_unit``."""
    parts = [
        f"Comparing {len(comparison.labels)} runs: "
        + ", ".join(
            f"{label} ({run.framework})"
            for label, run in zip(comparison.labels, comparison.runs, strict=True)
        )
    ]
    for name, frame in tables.items():
        shown = frame.copy()
        rename = {label: f"{label}_ns" for label in comparison.labels if label in shown.columns}
        shown = shown.rename(columns=rename)
        title = COMPARISON_TITLES.get(name, name)
        parts.append(
            format_table(
                shown,
                title + (" (per sample)" if comparison.per == "sample" else ""),
                time_unit=time_unit,
            )
        )
    return "\n\n".join(parts) + "\n"
