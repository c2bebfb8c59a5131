"""The comparison's report model: the verdict, one table per comparison view and the chart of
the difference, computed once for the text, JSON and HTML renderers (as ``model`` does for one
run)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.report.model import Chart, Table
from perfkit_core.report.tables import drop_empty_columns, table_from_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.comparison import Comparison, GateResult, Verdict


@dataclass
class ComparisonReport:
    """Everything a comparison shows: the verdict (its sentences in ``verdict_lines``, written
    in ``time_unit``), the runs, the tables, charts, and the gate if asked."""

    title: str
    time_unit: str
    per: str
    labels: list[str]
    frameworks: list[str]
    tables: list[Table]
    charts: list[Chart]
    gate: GateResult | None = None
    verdict: Verdict | None = None
    verdict_lines: list[str] = field(default_factory=list)

    def table(self, table_id: str) -> Table:
        """The table with id ``table_id``."""
        return next(t for t in self.tables if t.id == table_id)


#: Titles of the comparison tables.
COMPARISON_TITLES = {
    "steps": "Step Time",
    "phases": "Difference by Phase",
    "totals": "Totals",
    "family": "Difference by Op Family",
    "layers": "Difference by Layer",
    "user": "Difference by Annotated Span",
    "ops": "Matched Ops",
    "efficiency": "Efficiency by Op",
    "layer_efficiency": "Efficiency by Layer",
    "advice": "Advice Acted On",
}
DEFAULT_COMPARISON_VIEWS = (
    "steps",
    "family",
    "layers",
    "ops",
    "efficiency",
    "layer_efficiency",
    "phases",
    "user",
    "totals",
    "advice",
)
#: Every table a comparison report can show: the comparison views, and ``advice`` (the first
#: run's findings, promised against delivered).
#: (``perfkit_core.comparison.VIEWS`` is not imported here: the CLI reads this module at start.)
REPORT_VIEWS = (
    "steps",
    "phases",
    "family",
    "layers",
    "user",
    "ops",
    "totals",
    "efficiency",
    "layer_efficiency",
    "advice",
)
#: Comparison views that, for runs with device work, come twice: by host wall time and by the
#: kernel time each row launched.
DEVICE_TIME_VIEWS = frozenset({"family", "layers", "ops"})
#: How a table's title names the time it compares.
TIME_WORDS = {"host": "host wall time", "device": "GPU kernel time"}
#: Comparison views whose ranked rows ``top`` cuts (the rest summed into one row).
RANKED_COMPARISON_VIEWS = frozenset({"family", "layers", "ops", "user"})


def _labels(comparison: Comparison, time: str | None) -> dict[str, str]:
    """Header labels of a comparison table: each run's columns as the run's label (its calls
    and ops columns too), the difference and its share."""
    labels: dict[str, str] = {}
    for label in comparison.labels:
        labels[label] = label
        labels[f"{label} calls"] = f"{label} calls per {comparison.per}"
        labels[f"{label} ops"] = f"{label} ops"
    share = "the GPU-time difference" if time == "device" else "the difference"
    labels.update({"share_pct": f"Share (% of {share})", "delta_ns": "Delta"})
    return labels


def _has_spans(comparison: Comparison, column: str) -> bool:
    """Whether any run has slices inside a layer (``layer``) or user span (``user``)."""
    return any((comparison.slices(i)[column] != "").any() for i in range(len(comparison.runs)))


def _has_flops(frame: pd.DataFrame) -> bool:
    """Whether an efficiency table holds any FLOPs: without input shapes no op has any, and a
    table of zeros says nothing (the single-run roofline view says what to record)."""
    rates = frame[[c for c in frame.columns if str(c).endswith(" TFLOP/s")]]
    return bool(len(rates) and (rates.fillna(0.0).to_numpy() > 0).any())


def build_comparison_report(
    comparison: Comparison,
    views: Iterable[str] = DEFAULT_COMPARISON_VIEWS,
    *,
    time_unit: str = "ms",
    top: int | None = 20,
    gate: GateResult | None = None,
) -> ComparisonReport:
    """Return the comparison model: the verdict, one table per comparison view (runs' columns
    in ns per step, or per sample; the ranked views cut to ``top`` rows with the rest summed),
    the chart of the difference by op family, and the gate result when one was asked for. The
    layer and annotated-span tables are left out when no run recorded such spans."""
    from perfkit_core.comparison.attribution import attribution_table
    from perfkit_core.comparison.compare import ATTRIBUTION_VIEWS

    per = comparison.per
    verdict = comparison.verdict()
    device = comparison.has_device()
    tables = []
    for view in views:
        if view == "advice":
            table = advice_table(comparison)
            if table is not None:
                tables.append(table)
            continue
        if view in ("layers", "user", "layer_efficiency") and not _has_spans(
            comparison, "layer" if view != "user" else "user"
        ):
            continue
        times = ["host", "device"] if device and view in DEVICE_TIME_VIEWS else [None]
        for time in times:
            if view in ATTRIBUTION_VIEWS:
                frame = attribution_table(
                    comparison,
                    view,
                    top=top if view in RANKED_COMPARISON_VIEWS else None,
                    time=time or "host",
                )
            else:
                frame = comparison.summary(view)
                if view in ("efficiency", "layer_efficiency") and not _has_flops(frame):
                    continue
            title = COMPARISON_TITLES.get(view, view)
            if time is not None:
                title += f" ({TIME_WORDS[time]} per {per})"
            else:
                title += f" (per {per})"
            table = table_from_frame(
                view if time in (None, "host") else f"{view}_gpu",
                title,
                frame,
                labels=_labels(comparison, time),
                units={label: "time" for label in comparison.labels if label in frame.columns},
            )
            drop_empty_columns(table, ("",), "")
            tables.append(table)
    charts = []
    if any(t.id == "family" for t in tables):
        charts.append(
            Chart(
                "chart-difference",
                f"Where the difference comes from ({comparison.labels[-1]} minus "
                f"{comparison.labels[0]}, per {per})",
                "hbar",
                "family",
                "name",
                ["delta_ns"],
                skip_rows=["step"],
                subject=comparison.labels[-1],
            )
        )
    return ComparisonReport(
        title=f"{' vs '.join(comparison.labels)} — perfkit comparison",
        time_unit=time_unit,
        per=per,
        labels=list(comparison.labels),
        frameworks=[run.framework for run in comparison.runs],
        tables=tables,
        charts=charts,
        gate=gate,
        verdict=verdict,
        verdict_lines=verdict.lines(time_unit),
    )


def advice_table(comparison: Comparison) -> Table | None:
    """The findings of the first run and whether the second acted on them: per finding, the
    saving promised and the step time delivered (ns per step, ``advice.followup``); None
    unless exactly two runs of one framework both got advice."""
    import pandas as pd

    from perfkit_core.advice.followup import follow_up

    if len(comparison.runs) != 2:
        return None
    if len({run.framework for run in comparison.runs}) > 1:
        return None  # two frameworks: the second run did not act on the first one's advice
    rows, figures = follow_up(*comparison.runs)
    if not rows:
        return None
    frame = pd.DataFrame(
        {
            "name": [r.id for r in rows],
            "promised_ns": [r.promised_ns for r in rows],
            "delivered_ns": [_or_nan(r.delivered_ns) for r in rows],
            "delivered_low_ns": [_or_nan(r.delivered_low_ns) for r in rows],
            "delivered_high_ns": [_or_nan(r.delivered_high_ns) for r in rows],
            "delivered_at_pace_ns": [_or_nan(r.delivered_at_pace_ns) for r in rows],
            "remaining_ns": [r.remaining_ns for r in rows],
            "status": ["acted on" if r.acted_on else "not acted on" for r in rows],
        }
    )
    before, after = comparison.labels
    frame.attrs["labels"] = {
        "name": "Finding",
        "promised_ns": f"Promised by {before} (per step)",
        "delivered_ns": "Delivered (per step)",
        "delivered_low_ns": "Delivered, 95% CI from",
        "delivered_high_ns": "Delivered, 95% CI to",
        "delivered_at_pace_ns": "Delivered at one machine pace (per step)",
        "remaining_ns": f"Left in {after} (per step)",
        "status": "Status",
    }
    unprofiled = figures["basis"] == "unprofiled"
    word = "without the profiler (step timer)" if unprofiled else "profiled"
    steps = ("step-timer" if unprofiled else "profiled") + " steps (their means)"
    interval = (
        f" The 95% CI resamples each run's {steps}: it holds their step-to-step spread, not "
        "a machine that ran slower while one run was recorded."
        if figures["delivered_low_ns"] is not None
        else ""
    ) + pace_note(figures, before, after)
    said = "; ".join(f"{r.id}: {r.sentence()}" for r in rows if r.acted_on or r.states_known)
    return table_from_frame(
        "advice",
        f"Advice of {before} acted on in {after} (per step)",
        frame,
        note=(
            f"{said or 'No finding was acted on'}. Delivered: the step time of {before} less "
            f"that of {after}, {word}, shared among the findings acted on in proportion to each "
            "one's promised saving times the share of its measured time that went."
            f"{interval}"
        ),
        units={
            k: "time"
            for k in (
                "promised_ns",
                "delivered_ns",
                "delivered_low_ns",
                "delivered_high_ns",
                "delivered_at_pace_ns",
                "remaining_ns",
            )
        },
    )


def _or_nan(value: float | None) -> float:
    """``value``, or NaN for None (a table's empty cell)."""
    return np.nan if value is None else value


def pace_note(figures: dict[str, Any], before: str, after: str) -> str:
    """What the advice table's note says of the machine's pace where it moved between the runs
    (``advice.followup.machine_drift``), else ""."""
    ratio = figures.get("pace_ratio")
    if ratio is None:
        return ""
    text = (
        f" The machine ran {100 * abs(ratio - 1):.0f}% {'slower' if ratio > 1 else 'faster'} "
        f"while {after}'s steps were timed than while {before}'s: the step timer's reference "
        f"loop took {figures['pace_after_ns'] / 1e3:.1f} us against "
        f"{figures['pace_before_ns'] / 1e3:.1f} us (medians; the ratio's 95% CI "
        f"{figures['pace_low']:.2f} to {figures['pace_high']:.2f})"
    )
    at_pace = figures.get("delivered_at_pace_ns")
    if at_pace is None:
        return text + (
            ". The runs recorded device work, whose time the CPU's pace does not set: "
            "no figure at one pace."
        )
    return text + (
        f". At {before}'s pace, {after}'s step would take "
        f"{figures['after_ns'] / ratio / 1e6:.2f} ms, and the changes delivered "
        f"{at_pace / 1e6:.2f} ms/step."
    )
