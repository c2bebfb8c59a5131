"""The report's headline: the answer first. Step time and its spread, throughput, where the
step goes, the change worth most (the top finding) and what every finding together would save,
each saving a share of the step it was stated on (``format.saving_step``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.report.format import saving_step, upper_bound

if TYPE_CHECKING:
    from perfkit_core.events.profile import Profile


@dataclass
class HeaderItem:
    """One line of the report header: a label and a value in ``unit`` (see ``column_unit``)."""

    label: str
    value: Any
    unit: str = "text"


@dataclass
class PhaseShare:
    """One phase of the headline's stacked bar: its time per step (ns) and share of the step (%)."""

    name: str
    per_step_ns: float
    share_pct: float


@dataclass
class CombinedSaving:
    """What applying every finding would save per step (ns), how many findings, and how the
    savings were combined (``advice.engine.combined_saving``); only where at least two findings
    promise a saving."""

    saving_ns: float
    findings: int
    how: str
    step_ns: float
    #: How ``step_ns`` is named: ``the step`` (profiled), or the step without the profiler when
    #: every finding's saving was stated on it.
    of: str = "the step"
    #: How many of the findings promise a saving (more than 0); the others' remedies are not
    #: expected to pay on their own.
    promising: int = 0
    #: Whether a finding's saving in it is the most its model allows (``format.upper_bound``),
    #: so that the sum is one too: "up to", not "about".
    upper_bound: bool = False

    def about(self) -> str:
        """``about``, or ``up to`` for a saving that is at most that (``upper_bound``)."""
        return "up to" if self.upper_bound else "about"

    def findings_text(self) -> str:
        """``all 3 findings``, and how many of them promise a saving when not all do: ``all 3
        findings (1 of them promises a saving)``."""
        text = f"all {self.findings} findings"
        if self.promising < self.findings:
            verb = "promises" if self.promising == 1 else "promise"
            text += f" ({self.promising} of them {verb} a saving)"
        return text


@dataclass
class Headline:
    """The answer first: step time and its spread, throughput, where the step goes, and the one
    change worth most (the top finding, or why there is none), with what every finding together
    would save."""

    items: list[HeaderItem]
    phases: list[PhaseShare]
    finding: Any | None
    note: str | None = None
    combined: CombinedSaving | None = None
    #: Where ``finding`` stands among the findings, from 1 (the report's advice number).
    finding_number: int = 1


#: What a finding's label adds to its severity when its estimate says its saving is within its
#: model's error (``Finding.within_error``), in the text and HTML reports.
DOUBT_LABEL = ", within its error"


def severity_label(finding: Any) -> str:
    """A finding's label in the reports' advice: its severity, and ``DOUBT_LABEL`` when its
    estimate says its saving is within its model's error ("high, within its error")."""
    doubt = DOUBT_LABEL if getattr(finding, "within_error", False) else ""
    return f"{finding.severity}{doubt}"


#: The heading of a finding's remedy in the reports ...
REMEDY_LABEL = "What to change:"
#: ... and of the remedy of a finding that saves time but promises none here (its estimate
#: says why: loader workers that would cost more than they hide, a compile that would not pay).
UNPAID_REMEDY_LABEL = "The usual remedy, not expected to pay here (the estimate says why):"


def remedy_label(finding: Any) -> str:
    """The heading of ``finding``'s remedy in the reports: the rule's own
    (``Finding.remedy_heading``) where it words one, else ``UNPAID_REMEDY_LABEL`` for a
    finding that saves time (``Finding.saves_time``) but promises none, else
    ``REMEDY_LABEL``."""
    if getattr(finding, "remedy_heading", ""):
        return str(finding.remedy_heading)
    unpaid = getattr(finding, "saves_time", True) and not finding.saving_ns > 0
    return UNPAID_REMEDY_LABEL if unpaid else REMEDY_LABEL


#: The headline's note when no finding promises a saving beyond its estimate's error.
WITHIN_ERROR_NOTE = (
    "no finding promises a saving beyond its estimate's error; the advice below may not pay: "
    "try a change and check the steps before and after with perfkit compare."
)


#: The headline's note when no finding promises any saving (each says why in its estimate).
NO_SAVING_NOTE = (
    "no finding promises a shorter step (each one's estimate says why): act on the advice "
    "below for what it names, not for time."
)


def change_first(findings: list[Any] | None) -> tuple[Any | None, int]:
    """The finding the headline puts first, and its number among ``findings`` (from 1): the
    one with the largest saving that promises a saving (more than 0) beyond its estimate's
    error (not ``Finding.within_error``); (None, 0) when there is none."""
    for number, finding in enumerate(findings or (), 1):
        if finding.saving_ns > 0 and not getattr(finding, "within_error", False):
            return finding, number
    return None, 0


#: The views the headline reads: a job must be analysed with them for its report to have one.
HEADLINE_VIEWS = ("steps", "model")
#: Rows of the model view that make up a step, in the headline's stacking order.
HEADLINE_PHASES = ("data", "forward", "backward", "optimizer", "other")


def headline(
    run: Profile, findings: list[Any] | None, batch_size: int | None, note: str | None
) -> Headline:
    """The headline: the mean step (the step every share on the page divides by) and the
    spread of the steps (median, quartiles), throughput (samples/s with a batch size, else
    steps/s, from the mean step: steps over their total time), the model view's phases per step
    (they add up to the step), the top finding and what every finding together would save. Of a
    job: over every rank's steps, the phases per step of the mean rank (a job analysed without
    ``HEADLINE_VIEWS`` gets only the top finding)."""
    from perfkit_core.advice.combine import combined_saving

    try:
        steps = run.summary("steps")
        model = run.summary("model").set_index("name")
    except KeyError:
        return _with_top(Headline([], [], None, note), findings)
    durations = steps["dur_ns"].to_numpy(dtype=np.float64) if len(steps) else np.empty(0)
    items: list[HeaderItem] = []
    step_ns = float(model.loc["step", "per_step_ns"]) if "step" in model.index else 0.0
    if len(durations):
        median = float(np.median(durations))
        p25, p75 = (float(v) for v in np.percentile(durations, [25, 75]))
        ranks = steps["rank"].nunique()
        items.append(HeaderItem("Step time (mean)", step_ns, "time"))
        unprofiled = _unprofiled_step(run)
        if unprofiled is not None:
            # the step the CPU rules' savings are shares of (``advice.basis``)
            items.append(HeaderItem(UNPROFILED_STEP_ITEM, unprofiled, "time"))
        items += [
            HeaderItem("Median step", median, "time"),
            HeaderItem("25th percentile", p25, "time"),
            HeaderItem("75th percentile", p75, "time"),
            HeaderItem(
                "Steps" if ranks == 1 else f"Steps (of {ranks} ranks)", len(durations), "count"
            ),
        ]
        if batch_size:
            items.append(HeaderItem("Throughput (samples/s)", batch_size * 1e9 / step_ns, "number"))
        else:
            items.append(HeaderItem("Throughput (steps/s)", 1e9 / step_ns, "number"))
        items += _mfu_items(run)
    phases: list[PhaseShare] = []
    for name in HEADLINE_PHASES:
        if name in model.index:
            per_step = float(model.loc[name, "per_step_ns"])
            share = float(model.loc[name, "step_pct"])
            if per_step > 0:
                phases.append(PhaseShare(name, per_step, share))
    combined = None
    promising = sum(1 for f in findings or [] if f.saving_ns > 0)
    # with one finding that promises a saving, applying all is applying that one: "Change first"
    # says it, and a second line with the same figure would only add words
    if findings and promising > 1 and step_ns:
        # the step the findings' savings were stated on, when they share one
        bases = {saving_step(f) for f in findings}
        basis_ns, of = bases.pop() if len(bases) == 1 else (step_ns, "the step")
        saving, how = combined_saving(findings, basis_ns or step_ns)
        bound = any(upper_bound(f) for f in findings if f.saving_ns > 0)
        combined = CombinedSaving(
            saving, len(findings), how, basis_ns or step_ns, of, promising, bound
        )
    return _with_top(Headline(items, phases, None, note, combined), findings)


def _with_top(headline: Headline, findings: list[Any] | None) -> Headline:
    """``headline`` with its finding (``change_first``), or, when no finding promises a
    saving its estimate stands behind, why: ``WITHIN_ERROR_NOTE`` when some promise one within
    their estimate's error, ``NO_SAVING_NOTE`` when none promises any."""
    top, number = change_first(findings)
    if top is not None:
        headline.finding, headline.finding_number = top, number
    elif findings:
        promising = any(f.saving_ns > 0 for f in findings)
        headline.note = WITHIN_ERROR_NOTE if promising else NO_SAVING_NOTE
    return headline


#: The headline item of the step the step timer timed without the profiler.
UNPROFILED_STEP_ITEM = "Step without the profiler (median)"


def _unprofiled_step(run: Any) -> float | None:
    """The median step the step timer timed without the profiler, when it timed steps with
    and without it (the step a saving stated on the unprofiled basis is a share of); else
    None."""
    from perfkit_core.comparison.overhead import step_timer_times

    meta = getattr(run, "meta", None)
    if not isinstance(meta, dict) or not meta.get("step_timer"):
        return None
    profiled, unprofiled = step_timer_times(run)
    if not len(profiled) or not len(unprofiled):
        return None
    return float(np.median(unprofiled))


def _mfu_items(run: Profile) -> list[HeaderItem]:
    """The headline's model FLOPs per step and MFU: the ``mfu`` view's mean row, labelled as
    that view labels them; none when the run's model FLOPs or peaks are unknown."""
    try:
        mfu = run.summary("mfu")
    except (KeyError, ValueError):
        return []
    mean = mfu[mfu["name"] == "mean"] if "name" in mfu.columns else mfu.iloc[0:0]
    if mean.empty or "mfu_pct" not in mean.columns:
        return []
    row = mean.iloc[0]
    if math.isnan(float(row["mfu_pct"])) or not row.get("model_gflops"):
        return []
    labels = mfu.attrs.get("labels") or {}
    return [
        HeaderItem("Model GFLOP per step", float(row["model_gflops"]), "number"),
        HeaderItem(labels.get("mfu_pct", "MFU (% of the peak)"), float(row["mfu_pct"]), "pct"),
    ]
