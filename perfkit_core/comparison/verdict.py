"""The verdict: which run is faster, by how much (with its uncertainty) and which op families,
layers, ops and phases explain the difference, as numbers and as the sentences every form of a
comparison opens with."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfkit_core.comparison.attribution import TOTAL, attribution_table
from perfkit_core.comparison.overhead import RunOverhead, density_warning, run_overhead
from perfkit_core.comparison.statistics import RatioEstimate, ratio_of_means
from perfkit_core.views.attribution import UNATTRIBUTED

if TYPE_CHECKING:
    from perfkit_core.comparison.compare import Comparison

#: Views whose top rows the verdict names, the first being the one its sentence uses.
CAUSE_VIEWS = ("family", "layers", "ops", "phases")
#: How many causes a verdict names per view.
TOP_CAUSES = 3
#: A row explaining less than this share of the difference is not named as a cause.
MIN_CAUSE_PCT = 2.0
_SCALE = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}


@dataclass
class Cause:
    """One row of an attribution table that explains part of the difference: its ``view``,
    ``name``, ``delta_ns`` (last run minus first, per step or sample) and ``share_pct`` of the
    step-time difference."""

    view: str
    name: str
    delta_ns: float
    share_pct: float

    def text(self, time_unit: str) -> str:
        """``conv (backward) +8.420 ms``."""
        return f"{self.name} {self.delta_ns / _SCALE[time_unit]:+.3f} {time_unit}"


@dataclass
class Verdict:
    """Which run is faster and why: ``baseline`` (first run) against ``candidate`` (last run).

    ``profiled``: the ratio of mean step (or sample) times of the profiled steps;
    ``unprofiled``: the same from ``perfkit_core.step_timer`` times taken without the profiler,
    when both runs carry them; ``headline`` is ``unprofiled`` when known, else ``profiled``.
    ``causes[view]``: the rows of each view that explain most of the difference, largest first.
    """

    baseline: str
    candidate: str
    per: str
    profiled: RatioEstimate
    unprofiled: RatioEstimate | None
    causes: dict[str, list[Cause]]
    unattributed_pct: float
    overheads: list[RunOverhead]
    labels: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def headline(self) -> RatioEstimate:
        """The estimate the verdict leads with."""
        return self.unprofiled if self.unprofiled is not None else self.profiled

    @property
    def explained_pct(self) -> float:
        """Share of the difference the named family causes explain."""
        return sum(c.share_pct for c in self.causes.get("family", []))

    def sentence(self, time_unit: str = "ms") -> str:
        """The one-sentence answer: which is faster, by how much, and the main causes."""
        est = self.headline
        if math.isnan(est.ratio):
            return f"{self.candidate} and {self.baseline} cannot be compared: no step times"
        source = " without the profiler" if self.unprofiled is not None else ""
        steps = f"{est.candidate_n} vs {est.baseline_n} steps"
        ci = f"{100 * est.confidence:.0f}% CI"
        factor, low, high = est.factor
        if est.direction == "same":
            head = (
                f"{self.candidate} and {self.baseline} take the same time per {self.per}"
                f"{source} within the noise (ratio {factor:.2f}, {ci} {low:.2f}-"
                f"{high:.2f}, {steps})"
            )
        else:
            head = (
                f"{self.candidate} is {factor:.2f}x {est.direction} per {self.per} than "
                f"{self.baseline}{source} ({ci} {low:.2f}-{high:.2f}, {steps})"
            )
        causes = self.causes.get("family", [])
        if not causes:
            return head
        delta = self.profiled.delta / _SCALE[time_unit]
        explained = self.explained_pct
        if explained <= 100.0:
            listed = ", ".join(c.text(time_unit) for c in causes)
            return (
                f"{head}; {explained:.0f}% of the {delta:+.3f} {time_unit} profiled "
                f"difference is in: {listed}"
            )
        listed = ", ".join(f"{c.text(time_unit)} ({c.share_pct:.0f}%)" for c in causes)
        return (
            f"{head}; the {delta:+.3f} {time_unit} profiled difference is in: {listed}, "
            f"partly offset by other rows ({100.0 - explained:+.0f}%)"
        )

    def lines(self, time_unit: str = "ms") -> list[str]:
        """The sentence, then one line per further fact: the other views' causes, the baseline
        and sign convention, the noise floor, the profiler's effect, warnings."""
        out = [self.sentence(time_unit)]
        names = {"layers": "by layer", "ops": "by op", "phases": "by phase"}
        for view, title in names.items():
            causes = self.causes.get(view) or []
            if causes:
                out.append(f"{title}: " + ", ".join(c.text(time_unit) for c in causes))
        out.append(
            f"baseline: {self.baseline}; differences are {self.candidate} minus "
            f"{self.baseline}, positive when {self.candidate} takes longer; "
            f"{self.unattributed_pct:.1f}% of the difference is unattributed"
        )
        est = self.headline
        if not math.isnan(est.resolvable_pct):
            out.append(
                f"these runs resolve changes of {est.resolvable_pct:.1f}% or more "
                f"({100 * est.confidence:.0f}% confidence, 80% power)"
            )
        if self.unprofiled is not None:
            prof = self.profiled
            effects = ", ".join(
                f"{label} {round(o.overhead_pct) + 0:+d}%"
                for label, o in zip(self.labels, self.overheads, strict=True)
                if not math.isnan(o.overhead_pct)
            )
            out.append(
                f"profiled steps give {prof.ratio:.2f}x ({100 * prof.confidence:.0f}% CI "
                f"{prof.low:.2f}-{prof.high:.2f}); profiled against unprofiled step time: "
                f"{effects}"
            )
        out += self.warnings
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "per": self.per,
            "headline": "unprofiled" if self.unprofiled is not None else "profiled",
            "profiled": self.profiled.to_dict(),
            "unprofiled": None if self.unprofiled is None else self.unprofiled.to_dict(),
            "causes": {view: [c.__dict__ for c in causes] for view, causes in self.causes.items()},
            "explained_pct": self.explained_pct,
            "unattributed_pct": self.unattributed_pct,
            "overhead": {
                label: o.to_dict() for label, o in zip(self.labels, self.overheads, strict=True)
            },
            "warnings": list(self.warnings),
        }


def top_causes(comparison: Comparison, view: str, limit: int = TOP_CAUSES) -> list[Cause]:
    """The rows of ``view`` that explain most of the difference (same sign as the step delta,
    at least ``MIN_CAUSE_PCT`` of it), largest first; the total and unattributed rows are never
    causes."""
    table = attribution_table(comparison, view)
    rows = table[~table["name"].isin([TOTAL, UNATTRIBUTED])]
    rows = rows[rows["share_pct"] >= MIN_CAUSE_PCT].sort_values("share_pct", ascending=False)
    return [
        Cause(view, str(r.name), float(r.delta_ns), float(r.share_pct))
        for r in rows.head(limit).itertuples(index=False)
    ]


def build_verdict(comparison: Comparison) -> Verdict:
    """The verdict of ``comparison``: its last run against its first."""
    first, last = 0, len(comparison.runs) - 1
    profiled = ratio_of_means(comparison.step_samples(first), comparison.step_samples(last))
    overheads = [run_overhead(run) for run in comparison.runs]
    unprofiled = None
    if len(overheads[first].unprofiled_ns) and len(overheads[last].unprofiled_ns):
        unprofiled = ratio_of_means(
            overheads[first].unprofiled_ns / comparison.sample_scale(first),
            overheads[last].unprofiled_ns / comparison.sample_scale(last),
        )
    causes = {view: top_causes(comparison, view) for view in CAUSE_VIEWS}
    family = attribution_table(comparison, "family").set_index("name")
    unattributed = (
        float(family.loc[UNATTRIBUTED, "share_pct"]) if UNATTRIBUTED in family.index else 0.0
    )
    warnings = []
    dense = density_warning(comparison.labels, overheads)
    if dense and unprofiled is None:
        warnings.append(
            dense + "; time steps without the profiler with perfkit_core.step_timer() for an "
            "unbiased ratio"
        )
    elif dense:
        warnings.append(dense + "; the headline uses the unprofiled step-timer times")
    return Verdict(
        baseline=comparison.labels[first],
        candidate=comparison.labels[last],
        per=comparison.per,
        profiled=profiled,
        unprofiled=unprofiled,
        causes=causes,
        unattributed_pct=unattributed if not math.isnan(unattributed) else 0.0,
        overheads=overheads,
        labels=list(comparison.labels),
        warnings=warnings,
    )
