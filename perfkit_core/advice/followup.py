"""Closing the loop: which findings of a run BEFORE were acted on in a run AFTER, what each
promised and what it delivered.

A finding of BEFORE was acted on when the setting its remedy changes differs between the runs
(``advice.remedy_state``: the DataLoader's single process or workers, the optimizer's
implementation, compiled or eager code): what the remedy did, whatever else changed. Where
either run recorded no such setting, or BEFORE's is a remedy already (workers, asked for more of
them), it was acted on when AFTER no longer has the finding, or its evidence shrank: the
finding's measured time is at most ``ACTED_ON_SHARE`` of what it was in BEFORE. The measured
time is one figure of the evidence, the same in both runs: the first
``*_unprofiled_per_step_ns`` both have (the time without the profiler, which the saving was
stated on: a Paddle loader thread's loading, ``data_unprofiled_per_step_ns``, where the profiled
waits for data are near 0 with or without workers), else the first ``*_per_step_ns`` both have
(such as ``optimizer_per_step_ns``), else the saving. The measured time, not the saving,
decides: a saving can shrink because the profiler's cost was taken out of it differently. What
the changes delivered is the step time BEFORE less the step time AFTER (ns per step): the
means of the step timer's steps without the profiler when both runs have them
(``perfkit_core.step_timer``; the steps the comparison's verdict takes the ratio of, leading
warm-up left out), else the mean profiled steps. Means, as the verdict's: a loader whose
workers hand over their batches in bursts has many short steps and a few long ones, and its
median step is shorter than the time a step takes on average. When several findings were acted
on, the delivered time is split between them in proportion to each one's promised saving times
the share of its measured time that went; one finding acted on gets it all.

The delivered time comes with its 95% bootstrap interval, each run's steps resampled
(``delivered_interval``, ``comparison.statistics.difference_of_means``): of the step timer's
steps where both runs have them, else of the profiled steps. It is split the same way, and the
sentence says whether the promise lies within it, above it (less was delivered than
promised) or below it (more was). The
interval holds the runs' step-to-step spread, not a machine that ran slower while one run was
recorded than while the other was. For that, the step timer times the machine's pace beside the
steps (``pace_ns``: a fixed pure-Python loop's CPU time, ``capture.cpu_clocks.pace_probe_ns``):
where both runs have it and it moved by more than ``PACE_DRIFT`` beyond its noise
(``machine_drift``), the follow-up says so, and for runs without device work, whose step the
CPU's pace sets, it states the delivered time at one pace: the step time of BEFORE less AFTER's
divided by how many times as slow the machine ran for AFTER.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.advice.remedy_state import remedy_states
from perfkit_core.capture.cpu_clocks import PACE_LOOPS
from perfkit_core.comparison.overhead import finite_ns, step_timer_times
from perfkit_core.comparison.statistics import (
    CONFIDENCE,
    difference_of_means,
    ratio_of_medians,
)
from perfkit_core.events.facts import has_device

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: A finding still present in AFTER with at most this share of its measured time was acted on.
ACTED_ON_SHARE = 0.5
#: The machine's pace counts as moved between the runs when AFTER's is at least this share
#: slower or faster than BEFORE's and the ratio's 95% interval leaves out 1 ...
PACE_DRIFT = 0.05
#: ... each run with at least this many readings of it (one per 50 ms of unprofiled steps).
PACE_MIN_SAMPLES = 5


@dataclass
class FollowUp:
    """One finding of BEFORE: ``promised_ns`` (its saving in BEFORE, ns per step),
    ``remaining_ns`` (the same finding's saving in AFTER, 0 when gone), ``acted_on``, and
    ``delivered_ns`` (the step time its change saved, ns per step; None when not acted on)."""

    id: str
    rule: str
    title: str
    promised_ns: float
    remaining_ns: float
    acted_on: bool
    delivered_ns: float | None
    #: The setting the remedy changes in BEFORE and in AFTER (``advice.remedy_state``), or None
    #: where the run recorded none.
    state_before: str | None = None
    state_after: str | None = None
    #: The ends of ``delivered_ns``'s 95% interval (ns per step), where both runs have two
    #: steps or more to resample (the step timer's, else the profiled ones); else None.
    delivered_low_ns: float | None = None
    delivered_high_ns: float | None = None
    #: AFTER's machine pace over BEFORE's where it moved (``machine_drift``), else None; and
    #: the delivered time at one pace (ns per step) where the CPU's pace sets the step.
    pace_ratio: float | None = None
    delivered_at_pace_ns: float | None = None
    #: Whether ``promised_ns`` is the most the finding's model allowed
    #: (``Finding.upper_bound``): the promise was "up to" it.
    promised_up_to: bool = False

    @property
    def states_known(self) -> bool:
        """Whether both runs recorded the setting the remedy changes."""
        return self.state_before is not None and self.state_after is not None

    def sentence(self) -> str:
        """ "promised X ms/step, delivered Y ms/step" (with its interval where known, and the
        settings the remedy changes where both runs recorded them), or why nothing was
        delivered."""
        bound = "up to " if self.promised_up_to else ""
        promised = f"promised {bound}{self.promised_ns / 1e6:.2f} ms/step"
        if not self.acted_on or self.delivered_ns is None:
            left = f"still {self.remaining_ns / 1e6:.2f} ms/step"
            if self.states_known and self.remaining_ns <= 0:
                left = "its time fell below the rule's threshold with the other changes"
            setting = f"still {self.state_before}; " if self.states_known else ""
            return f"{promised}; not acted on ({setting}{left})"
        change = f" ({self.state_before} to {self.state_after})" if self.states_known else ""
        delivered = (
            f"delivered {self.delivered_ns / 1e6:.2f} ms/step{self._interval()}{self._pace()}"
        )
        return f"{promised}, {delivered}{change}"

    def _interval(self) -> str:
        """ ", 95% CI A to B: <where the promise lies>", or "" without an interval."""
        low, high = self.delivered_low_ns, self.delivered_high_ns
        if low is None or high is None:
            return ""
        where = (
            "more than promised"
            if self.promised_ns < low
            else "within the promise, which was at most that"
            if self.promised_up_to
            else "less than promised"
            if self.promised_ns > high
            else "the promise is within it"
        )
        return f", {100 * CONFIDENCE:.0f}% CI {low / 1e6:.2f} to {high / 1e6:.2f}: {where}"

    def _pace(self) -> str:
        """ "; the machine ran N% slower while the second run's steps were timed[: X ms/step at
        one pace]", or "" where its pace did not move."""
        ratio = self.pace_ratio
        if ratio is None:
            return ""
        moved = (
            f"; the machine ran {100 * abs(ratio - 1):.0f}% "
            f"{'slower' if ratio > 1 else 'faster'} while the second run's steps were timed"
        )
        if self.delivered_at_pace_ns is None:
            return moved
        return f"{moved}: {self.delivered_at_pace_ns / 1e6:.2f} ms/step at one pace"

    def to_dict(self) -> dict[str, Any]:
        """The follow-up as plain JSON-ready data (stable keys)."""
        return asdict(self)


def step_time(run: Run) -> tuple[float, str]:
    """(the run's step time in ns, its basis): the mean unprofiled step of the step timer
    (``unprofiled``), else the mean profiled step (``profiled``)."""
    from perfkit_core.advice.engine import make_context

    unprofiled = unprofiled_steps(run)
    if len(unprofiled):
        return float(np.mean(unprofiled)), "unprofiled"
    return make_context(run).step_ns, "profiled"


def unprofiled_steps(run: Run) -> np.ndarray:
    """The step timer's steps without the profiler (ns), finite ones, their leading warm-up
    left out (``events.steady``); empty without a timer."""
    return step_timer_times(run)[1]


def pace_samples(run: Run) -> np.ndarray:
    """The machine's pace the run's step timer took beside its unprofiled steps (ns, positive
    finite readings of ``PACE_LOOPS`` rounds); empty without them."""
    record = run.meta.get("step_timer") or {}
    if record.get("pace_loops") != PACE_LOOPS:
        return np.zeros(0)
    pace = finite_ns(record.get("pace_ns"))
    return pace[pace > 0]


def machine_drift(before: Run, after: Run) -> tuple[float, float, float, float, float] | None:
    """(AFTER's median pace over BEFORE's, the low and high ends of its 95% interval, BEFORE's
    and AFTER's median pace in ns) where both runs' step timers took at least
    ``PACE_MIN_SAMPLES`` readings of the machine's pace and it moved by at least
    ``PACE_DRIFT`` beyond their noise (the interval leaves out 1); else None. Above 1: the
    machine ran slower for AFTER."""
    first, second = pace_samples(before), pace_samples(after)
    if len(first) < PACE_MIN_SAMPLES or len(second) < PACE_MIN_SAMPLES:
        return None
    ratio, low, high = ratio_of_medians(first, second)
    if not (low > 1.0 or high < 1.0) or abs(ratio - 1.0) < PACE_DRIFT:
        return None
    return ratio, low, high, float(np.median(first)), float(np.median(second))


def delivered_interval(
    before: Run, after: Run, basis: str, delivered_ns: float
) -> tuple[float | None, float | None]:
    """The 95% interval of the delivered time ``delivered_ns`` (ns per step), from the steps it
    was taken from (``basis``), ``difference_of_means``: of the step timer's steps, else of
    the profiled steps (their durations, ``views.step_time``), set on
    ``delivered_ns``, the step figures' difference (the mean step of the advice, whose steps
    of several ranks overlap where the durations' do not). (None, None) where a run has fewer
    than two such steps."""
    from perfkit_core.views.anatomy.step_time import step_durations

    steps = unprofiled_steps if basis == "unprofiled" else step_durations
    point, low, high = difference_of_means(steps(before), steps(after))
    if not (np.isfinite(low) and np.isfinite(high)):
        return None, None
    return delivered_ns + (low - point), delivered_ns + (high - point)


def device_paced(run: Run) -> bool:
    """Whether the run recorded device work, whose time the machine's CPU pace does not set."""
    return has_device(run)


def measured_key(finding: Any, later: Any) -> str | None:
    """The evidence figure (ns per step) that measures ``finding`` of BEFORE and ``later``, the
    same finding in AFTER: the first ``*_unprofiled_per_step_ns`` of ``finding``'s evidence
    that ``later`` has too, else its first ``*_per_step_ns`` that ``later`` has too; None when
    they share none."""

    def timed(f: Any) -> list[str]:
        return [
            k
            for k, v in f.evidence.items()
            if k.endswith("_per_step_ns")
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
        ]

    keys, later_keys = timed(finding), set(timed(later))
    shared = [k for k in keys if k in later_keys]
    unprofiled = [k for k in shared if k.endswith("_unprofiled_per_step_ns")]
    chosen = unprofiled or shared
    return chosen[0] if chosen else None


def measured_time(finding: Any, key: str | None) -> float:
    """The time a finding is based on (ns per step): its evidence's ``key`` figure, else its
    saving; never 0 (a tiny floor keeps ratios finite)."""
    value = finding.evidence.get(key) if key is not None else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return max(float(value), 1e-9)
    return max(float(finding.saving_ns), 1e-9)


def follow_up(
    before: Run,
    after: Run,
    *,
    findings_before: list[Any] | None = None,
    findings_after: list[Any] | None = None,
) -> tuple[list[FollowUp], dict[str, Any]]:
    """(one ``FollowUp`` per finding of ``before``, largest promise first; the step figures:
    ``before_ns``, ``after_ns``, ``delivered_ns`` (before less after, ns per step) and
    ``basis`` (``unprofiled`` when both runs have step-timer steps, else ``profiled``))."""
    found_before = before.advise() if findings_before is None else findings_before
    found_after = after.advise() if findings_after is None else findings_after
    (before_ns, basis_b), (after_ns, basis_a) = step_time(before), step_time(after)
    if basis_b != basis_a:
        from perfkit_core.advice.engine import make_context

        before_ns, after_ns = make_context(before).step_ns, make_context(after).step_ns
        basis_b = "profiled"
    delivered_total = before_ns - after_ns
    low, high = delivered_interval(before, after, basis_b, delivered_total)
    drift = machine_drift(before, after) if basis_b == "unprofiled" else None
    at_pace = None
    if drift is not None and not (device_paced(before) or device_paced(after)):
        at_pace = before_ns - after_ns / drift[0]
    after_by_id = {f.id: f for f in found_after}
    rows, weights = [], []
    for finding in found_before:
        later = after_by_id.get(finding.id)
        if later is None:
            went = 1.0
        else:
            key = measured_key(finding, later)
            went = 1.0 - measured_time(later, key) / measured_time(finding, key)
        state_before, state_after = remedy_states(before, after, finding)
        acted_on = went >= 1.0 - ACTED_ON_SHARE
        if state_before is not None and state_after is not None:
            acted_on = state_before != state_after
            # the remedy applied: its share of the delivered time is its promise, in full when
            # the measured time no longer tells (it went up with the rest of the change)
            went = 1.0 if acted_on and went <= 0 else went
        rows.append(
            FollowUp(
                id=finding.id,
                rule=finding.rule,
                title=finding.title,
                promised_ns=float(finding.saving_ns),
                remaining_ns=0.0 if later is None else float(later.saving_ns),
                acted_on=bool(acted_on),
                delivered_ns=None,
                state_before=state_before,
                state_after=state_after,
                promised_up_to=bool(getattr(finding, "upper_bound", False)),
            )
        )
        weights.append(float(finding.saving_ns) * min(max(went, 0.0), 1.0))
    acted = [(r, w) for r, w in zip(rows, weights, strict=True) if r.acted_on]
    total_weight = sum(w for _r, w in acted)
    for row, weight in acted:
        share = weight / total_weight if total_weight else 1.0 / len(acted)
        row.delivered_ns = delivered_total * share
        if low is not None and high is not None:
            row.delivered_low_ns, row.delivered_high_ns = low * share, high * share
        if drift is not None:
            row.pace_ratio = drift[0]
            row.delivered_at_pace_ns = None if at_pace is None else at_pace * share
    rows.sort(key=lambda r: (-r.promised_ns, r.id))
    figures = {
        "before_ns": before_ns,
        "after_ns": after_ns,
        "delivered_ns": delivered_total,
        "delivered_low_ns": low,
        "delivered_high_ns": high,
        # the machine's pace, where it moved: AFTER's over BEFORE's, its interval, the medians
        "pace_ratio": None if drift is None else drift[0],
        "pace_low": None if drift is None else drift[1],
        "pace_high": None if drift is None else drift[2],
        "pace_before_ns": None if drift is None else drift[3],
        "pace_after_ns": None if drift is None else drift[4],
        "delivered_at_pace_ns": at_pace,
        "basis": basis_b,
    }
    return rows, figures
