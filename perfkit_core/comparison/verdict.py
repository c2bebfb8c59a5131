"""The verdict: which run is faster, by how much (with its uncertainty) and which op families,
layers, ops and phases explain the difference, as numbers and as the sentences every form of a
comparison opens with."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from perfkit_core.comparison.loading_line import hidden_loading_line
from perfkit_core.comparison.overhead import (
    RunOverhead,
)
from perfkit_core.comparison.statistics import RatioEstimate
from perfkit_core.comparison.steady_text import left_out_clause, steady_lines
from perfkit_core.events.steady import SteadySteps

#: Views whose top rows the verdict names, the first being the one its sentence uses.
CAUSE_VIEWS = ("family", "layers", "ops", "phases")
#: How many causes a verdict names per view.
TOP_CAUSES = 3
#: The verdict's first sentence has at most this many words.
LEAD_WORDS = 40
#: A row explaining less than this share of the difference is not named as a cause.
MIN_CAUSE_PCT = 2.0
_SCALE = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}


@dataclass
class Cause:
    """One row of an attribution table that differs between the runs: its ``view``, ``name``,
    ``delta_ns`` (last run minus first, per step or sample), ``share_pct`` of the step-time
    difference (NaN when the steps do not differ beyond their noise), and the row's own 95%
    interval (``low_ns``, ``high_ns``; NaN with fewer than two steps a run) with whether it
    leaves out 0 (``resolvable``)."""

    view: str
    name: str
    delta_ns: float
    share_pct: float
    low_ns: float = math.nan
    high_ns: float = math.nan
    resolvable: bool = False

    def text(self, time_unit: str, *, interval: bool = False, share: bool = False) -> str:
        """``conv (backward) +8.420 ms``, with ``(95% CI +7.9 to +8.9 ms)`` or ``(81%)``."""
        scale = _SCALE[time_unit]
        out = f"{self.name} {self.delta_ns / scale:+.3f} {time_unit}"
        if interval and not math.isnan(self.low_ns):
            out += f" (95% CI {self.low_ns / scale:+.3f} to {self.high_ns / scale:+.3f})"
        elif share and not math.isnan(self.share_pct):
            out += f" ({abs(self.share_pct):.0f}%)"
        return out


@dataclass
class Verdict:
    """Which run is faster and why: ``baseline`` (first run) against ``candidate`` (last run).

    ``profiled``: the ratio of mean step (or sample) times of the profiled steps;
    ``unprofiled``: the same from ``perfkit_core.step_timer`` times taken without the profiler,
    when both runs carry them; ``headline`` is ``unprofiled`` when known, else ``profiled``.
    ``slower[view]`` / ``faster[view]``: the rows of each view that take longer / less time in
    the candidate, largest first (when the steps differ within their noise, only rows that
    differ beyond their own noise); ``causes[view]``: the side that goes the way the step does
    (the resolvable rows of both sides, within the noise). ``gpu_slower`` / ``gpu_faster``: the
    same by the kernel time the op families launched, for runs with device work.
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
    slower: dict[str, list[Cause]] = field(default_factory=dict)
    faster: dict[str, list[Cause]] = field(default_factory=dict)
    unattributed_ns: float = 0.0
    gpu_slower: list[Cause] = field(default_factory=list)
    gpu_faster: list[Cause] = field(default_factory=list)
    #: Why layers are not compared (a run without layer spans), else empty.
    layers_missing: str = ""
    #: Per run (in ``labels`` order), the CPU time per step a thread of the training process
    #: spent loading batches beside the training thread, timed without the profiler (the step
    #: timer's ``loading`` phase, its mean); None where none was timed.
    loading_thread_ns: list[float | None] = field(default_factory=list)
    #: Per run (in ``labels`` order), what the steady-step rule left out of its profiled steps
    #: and the slow steps it kept (``events.steady``).
    steady: list[SteadySteps] = field(default_factory=list)
    #: Per run, how many leading step-timer steps without the profiler the rule left out.
    unprofiled_warmup: list[int] = field(default_factory=list)
    #: The headline's ratio with the warm-up steps left in, where the rule left any out of the
    #: steps it is taken over; else None.
    with_warmup: RatioEstimate | None = None
    #: The phases both runs timed without the profiler (the step timer's, ``causes.WALL_PHASES``),
    #: as ``unprofiled_phases`` gives them: differences of the steps the unprofiled headline is
    #: taken over, largest first; empty without an unprofiled headline.
    unprofiled_phases: list[Cause] = field(default_factory=list)

    @property
    def headline(self) -> RatioEstimate:
        """The estimate the verdict leads with."""
        return self.unprofiled if self.unprofiled is not None else self.profiled

    @property
    def explained_pct(self) -> float:
        """Share of the difference the named family causes explain (NaN within the noise)."""
        if not self.profiled.significant:
            return math.nan
        return sum(c.share_pct for c in self.causes.get("family", []))

    def _sides(
        self, slower: list[Cause], faster: list[Cause], time_unit: str, *, plain: bool = False
    ) -> str:
        """``slower in B: x +1 ms, ...; faster in B: y -2 ms, ...``: the side the step went
        first, with shares of the difference when it is significant (``plain``: neither the
        shares nor the offsetting side, for rows that do not split the step's difference)."""
        significant = self.profiled.significant and not plain
        parts = []
        sides = [("slower", slower), ("faster", faster)]
        if self.profiled.delta < 0:
            sides.reverse()
        for i, (word, rows) in enumerate(sides):
            if not rows:
                continue
            offsetting = significant and i == 1
            listed = ", ".join(
                c.text(time_unit, interval=not significant, share=significant and not offsetting)
                for c in rows
            )
            lead = f"{word} in {self.candidate}"
            if offsetting:
                lead += ", offsetting part of it"
            parts.append(f"{lead}: {listed}")
        return "; ".join(parts)

    def sentence(self, time_unit: str = "ms") -> str:
        """The answer in one sentence (at most ``LEAD_WORDS`` words): which run is faster, by
        how much (with its interval, and the warm-up steps left out), and the biggest cause:
        the op family that explains most of the difference, or, within the noise, the one
        that differs most beyond its own noise. Where the profiled steps, which the rows come
        from, say the opposite of the unprofiled headline, no row is its cause: the sentence
        names the phase timed without the profiler that differs most the headline's way, or
        says that the profiled steps say the opposite. The rest is in ``lines``."""
        est = self.headline
        if math.isnan(est.ratio):
            return f"{self.candidate} and {self.baseline} cannot be compared: no step times"
        source = " without the profiler" if self.unprofiled is not None else ""
        ci = f"{100 * est.confidence:.0f}% CI"
        factor, low, high = est.factor
        if est.direction == "same":
            head = (
                f"{self.candidate} and {self.baseline} take the same time per {self.per}"
                f"{source} within the noise (ratio {factor:.2f}, {ci} {low:.2f}-"
                f"{high:.2f}{self._left_out_clause()})"
            )
        else:
            head = (
                f"{self.candidate} is {factor:.2f}x {est.direction} per {self.per} than "
                f"{self.baseline}{source} ({ci} {low:.2f}-{high:.2f}{self._left_out_clause()})"
            )
        if self.rows_disagree:
            phase = self._unprofiled_cause()
            if phase is None:
                return f"{head}; the profiled steps, which the rows come from, say the opposite"
            return (
                f"{head}; the biggest timed phase without the profiler: {phase.name} "
                f"{phase.delta_ns / _SCALE[time_unit]:+.3f} {time_unit} per {self.per} "
                f"({abs(phase.share_pct):.0f}% of the difference)"
            )
        causes = self.causes.get("family", [])
        if not causes:
            return head + (
                "; no op family differs beyond its own noise"
                if not self.profiled.significant
                else ""
            )
        word = "the biggest cause" if self.profiled.significant else "the op family differing most"
        return f"{head}; {word}: {causes[0].text(time_unit)} per {self.per}"

    @property
    def rows_disagree(self) -> bool:
        """Whether the headline is the unprofiled ratio and the profiled steps the rows come
        from say the opposite, each beyond its noise: then no profiled row is a cause of the
        headline's difference, and the sentence names a phase timed without the profiler."""
        directions = {self.headline.direction, self.profiled.direction}
        return len(directions) == 2 and "same" not in directions

    def _unprofiled_cause(self) -> Cause | None:
        """The phase timed without the profiler that differs most the headline's way beyond
        its own noise, or None."""
        going = self.headline.delta > 0
        for cause in self.unprofiled_phases:
            if cause.resolvable and (cause.delta_ns > 0) == going:
                return cause
        return None

    def unprofiled_phases_line(self, time_unit: str = "ms") -> str:
        """The phases both runs timed without the profiler, with their shares of the
        unprofiled difference and what no phase timed in both holds; "" without them."""
        if not self.unprofiled_phases or self.unprofiled is None:
            return ""
        scale = _SCALE[time_unit]
        listed = ", ".join(
            f"{c.name} {c.delta_ns / scale:+.3f} {time_unit}"
            + ("" if math.isnan(c.share_pct) else f" ({c.share_pct:.0f}%)")
            for c in self.unprofiled_phases
        )
        total = self.unprofiled.delta
        rest = total - sum(c.delta_ns for c in self.unprofiled_phases)
        rest_share = f" ({100.0 * rest / total:.0f}%)" if total else ""
        return (
            f"without the profiler, of the {total / scale:+.3f} {time_unit} difference in mean "
            f"{self.per} time, the phases both runs timed: {listed}; {rest / scale:+.3f} "
            f"{time_unit}{rest_share} in the rest of the {self.per}"
        )

    def family_line(self, time_unit: str = "ms") -> str:
        """The op families behind the difference, in both directions: the largest rows that
        went the way the step went, with their share of the profiled difference, then the
        largest that went the other way; within the noise, the rows that differ beyond their
        own noise, with their intervals. "" when none is named."""
        sides = self._sides(self.slower.get("family", []), self.faster.get("family", []), time_unit)
        if not sides:
            return ""
        if not self.profiled.significant:
            return f"by op family, beyond their own noise: {sides}"
        delta = self.profiled.delta / _SCALE[time_unit]
        return (
            f"by op family: of the {delta:+.3f} {time_unit} profiled difference per "
            f"{self.per}, {sides}"
        )

    def profiled_line(self) -> str:
        """Why the rows carry no shares, or point the other way, where the headline is the
        step timer's unprofiled ratio and the profiled steps (which the rows come from)
        differ only within the noise, or say the opposite; else ""."""
        est, prof = self.headline, self.profiled
        if est is prof or math.isnan(est.ratio):
            return ""
        if not prof.significant:
            if est.direction == "same":
                return ""
            return (
                "the profiled steps differ only within the noise: the rows by op family, "
                "layer, op and phase come from them, so they carry intervals, not shares"
            )
        if prof.direction not in ("same", est.direction):
            factor, _, _ = prof.factor
            return (
                f"the profiled steps say the opposite ({factor:.2f}x {prof.direction}; "
                f"profiled against unprofiled step time: {self.profiler_effects()}), so the "
                "rows by op family, layer, op and phase are the profiled difference's"
            )
        return ""

    def _left_out_clause(self) -> str:
        """``; mindspore's first 2 left out as warm-up``, or ""."""
        return left_out_clause(self.labels, self.steady, self.unprofiled_warmup, self.unprofiled)

    def steady_lines(self, time_unit: str = "ms") -> list[str]:
        """The steps the averages leave out (warm-up) and the slow steps they keep, each run's
        named, with the ratio the warm-up would have given (``comparison.steady_text``)."""
        return steady_lines(
            self.labels,
            self.steady,
            self.unprofiled_warmup,
            self.with_warmup,
            _SCALE[time_unit],
            time_unit,
        )

    def profiler_effects(self) -> str:
        """How much the profiler lengthened each run's step, from the step timer's profiled
        and unprofiled steps ("torch +82%, paddle +13%"); "" without them."""
        return ", ".join(
            f"{label} {round(o.overhead_pct) + 0:+d}%"
            for label, o in zip(self.labels, self.overheads, strict=True)
            if not math.isnan(o.overhead_pct)
        )

    def lines(self, time_unit: str = "ms") -> list[str]:
        """The sentence, then one line per further fact: the other views' rows in both
        directions, the GPU time by op family, the baseline and sign convention, the noise
        floor, the profiler's effect, warnings."""
        out = [self.sentence(time_unit), *self.steady_lines(time_unit)]
        for line in (
            self.profiled_line(),
            self.unprofiled_phases_line(time_unit),
            self.family_line(time_unit),
        ):
            if line:
                out.append(line)
        hidden = self.hidden_loading(time_unit)
        if hidden:
            out.append(hidden)
        names = {"layers": "by layer", "ops": "by op", "phases": "by phase"}
        for view, title in names.items():
            if view == "layers" and self.layers_missing:
                out.append(f"{title}: {self.layers_missing}")
                continue
            sides = self._sides(self.slower.get(view, []), self.faster.get(view, []), time_unit)
            if sides:
                out.append(f"{title}: {sides}")
        gpu = self._sides(self.gpu_slower, self.gpu_faster, time_unit, plain=True)
        if gpu:
            out.append(f"GPU time by op family (the kernels each family launched): {gpu}")
        scale = _SCALE[time_unit]
        unattributed = f"{self.unattributed_ns / scale:+.3f} {time_unit} per {self.per}"
        if self.profiled.significant:
            unattributed += f" ({self.unattributed_pct:.1f}%)"
        out.append(
            f"baseline: {self.baseline}; differences are {self.candidate} minus "
            f"{self.baseline}, positive when {self.candidate} takes longer; "
            f"{unattributed} of the difference is in step time no event covers"
        )
        est = self.headline
        if not math.isnan(est.resolvable_pct):
            out.append(
                f"these runs ({est.candidate_n} vs {est.baseline_n} steps) resolve changes of "
                f"{est.resolvable_pct:.1f}% or more ({100 * est.confidence:.0f}% confidence, "
                "80% power)"
            )
        if self.unprofiled is not None:
            prof = self.profiled
            effects = self.profiler_effects()
            factor, low, high = prof.factor
            reading = (
                f"{factor:.2f}x {prof.direction}"
                if prof.direction != "same"
                else f"a ratio of {factor:.2f}, within the noise"
            )
            out.append(
                f"profiled steps give {reading} ({100 * prof.confidence:.0f}% "
                f"CI {low:.2f}-{high:.2f}); profiled against unprofiled step time: {effects}"
            )
        out += self.warnings
        return out

    def _loading(self) -> list[float | None]:
        """``loading_thread_ns``, one per run (None for each when it was not given)."""
        return list(self.loading_thread_ns) or [None] * len(self.labels)

    def hidden_loading(self, time_unit: str = "ms") -> str:
        """A line for runs whose batches a thread of the training process loaded, which no
        row shows (``comparison.loading_line``); empty when no run timed such loading."""
        return hidden_loading_line(
            self.labels, self._loading(), self.overheads, _SCALE[time_unit], time_unit
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""

        def rows(found: dict[str, list[Cause]]) -> dict[str, list[dict[str, Any]]]:
            return {view: [_plain(c) for c in causes] for view, causes in found.items()}

        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "per": self.per,
            "headline": "unprofiled" if self.unprofiled is not None else "profiled",
            "profiled": self.profiled.to_dict(),
            "unprofiled": None if self.unprofiled is None else self.unprofiled.to_dict(),
            "causes": rows(self.causes),
            "slower": rows(self.slower),
            "faster": rows(self.faster),
            "gpu_slower": [_plain(c) for c in self.gpu_slower],
            "gpu_faster": [_plain(c) for c in self.gpu_faster],
            "explained_pct": None if math.isnan(self.explained_pct) else self.explained_pct,
            "unattributed_ns": self.unattributed_ns,
            "unattributed_pct": self.unattributed_pct if self.profiled.significant else None,
            "overhead": {
                label: o.to_dict() for label, o in zip(self.labels, self.overheads, strict=True)
            },
            "warnings": list(self.warnings),
            "layers_missing": self.layers_missing,
            "loading_thread_ns": dict(zip(self.labels, self._loading(), strict=True)),
            "steady_steps": {
                label: s.to_dict() for label, s in zip(self.labels, self.steady, strict=False)
            },
            "unprofiled_warmup": dict(zip(self.labels, self.unprofiled_warmup, strict=False)),
            "with_warmup": None if self.with_warmup is None else self.with_warmup.to_dict(),
            "unprofiled_phases": [_plain(c) for c in self.unprofiled_phases],
        }


def _plain(cause: Cause) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and math.isnan(v) else v)
        for k, v in cause.__dict__.items()
    }
