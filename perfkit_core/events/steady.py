"""Which steps a step average leaves out: one rule for the report, the advice, the comparison
and the regression gate.

**Leading** steps far above the rest are warm-up: a framework's first steps that compile a
graph (MindSpore's graph mode, XLA's jit, ``torch.compile``), tune kernels or fill caches. The
first steps of a rank are left out up to the last of them that took over
``WARMUP_TIMES_MEDIAN`` times the median of the steps after it, as long as none of them took
under ``ELEVATED_TIMES_MEDIAN`` times that median (a steady step ends the warm-up), and at
most half of the rank's steps. A slow step **later** in the run (a
checkpoint, a collective that stalled, a garbage collection) is the run's real cost: it stays in
every average, and is named (``SLOW_TIMES_MEDIAN`` times the median of the kept steps or more).
The mean of the kept steps stays the estimator, so throughput and slow tails still count.

``steady_steps(run)`` says which steps the rule leaves out and which slow steps it keeps;
``steady_run(run)`` is the run without the left-out steps' events, which every step average is
taken over. ``leading_warmup(durations)`` is the rule itself, for step times that are not a run's
(the step timer's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: A leading step over this many times the median of the steps after it is warm-up.
WARMUP_TIMES_MEDIAN = 5.0
#: Each step of a leading warm-up took over this many times the median of the steps after it.
ELEVATED_TIMES_MEDIAN = 2.0
#: A kept step of this many times the median of the kept steps or more is named as slow.
SLOW_TIMES_MEDIAN = 5.0
#: The metadata key of a steady run: what the rule left out and what it kept.
META_KEY = "steady_steps"


def leading_warmup(durations: Any) -> int:
    """How many of the first ``durations`` (step times in order, any unit) are warm-up: the
    longest run of leading steps, at most half of them, whose last step took over
    ``WARMUP_TIMES_MEDIAN`` times the median of the steps after it and each of whose steps took
    over ``ELEVATED_TIMES_MEDIAN`` times that median (a compile that spreads over a few steps:
    10, 16, 60, 77, 45 ms, then 3 ms steps). A slow step after a step of ordinary length is not
    warm-up."""
    d = np.asarray(durations, dtype=np.float64)
    found = 0
    smallest = np.inf  # the shortest step before the candidate's last
    for last in range(len(d) // 2):
        median = float(np.median(d[last + 1 :]))
        if not median > 0 or smallest <= ELEVATED_TIMES_MEDIAN * median:
            # an ordinary step came first, or the later steps took no time (a step far above
            # nothing says nothing): what follows is not warm-up
            break
        if d[last] > WARMUP_TIMES_MEDIAN * median:
            found = last + 1
        smallest = min(smallest, float(d[last]))
    return found


def without_warmup(durations: Any) -> np.ndarray:
    """``durations`` (step times in order) without their leading warm-up (``leading_warmup``),
    as floats."""
    d = np.asarray(durations, dtype=np.float64)
    return d[leading_warmup(d) :]


@dataclass(frozen=True)
class StepTime:
    """One step the rule names: its ``rank``, ``step`` number, time ``dur_ns`` and that time
    over the median of the rank's kept steps (``times_median``)."""

    rank: int
    step: int
    dur_ns: float
    times_median: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "step": self.step,
            "dur_ns": self.dur_ns,
            "times_median": self.times_median,
        }


@dataclass(frozen=True)
class SteadySteps:
    """What the rule made of a run's steps: ``warmup`` (the leading steps left out of every
    step average), ``slow`` (the kept steps of at least ``SLOW_TIMES_MEDIAN`` times the kept
    steps' median, which stay in), ``steps`` (how many steps the run recorded, every rank),
    ``mean_all_ns`` and ``mean_kept_ns`` (the mean step with and without the warm-up)."""

    warmup: list[StepTime] = field(default_factory=list)
    slow: list[StepTime] = field(default_factory=list)
    steps: int = 0
    mean_all_ns: float = float("nan")
    mean_kept_ns: float = float("nan")

    @property
    def kept(self) -> int:
        """How many steps the averages are taken over."""
        return self.steps - len(self.warmup)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": RULE_TEXT,
            "steps": self.steps,
            "kept": self.kept,
            "warmup": [s.to_dict() for s in self.warmup],
            "slow": [s.to_dict() for s in self.slow],
            "mean_all_ns": self.mean_all_ns,
            "mean_kept_ns": self.mean_kept_ns,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SteadySteps:
        def times(key: str) -> list[StepTime]:
            return [
                StepTime(
                    int(s["rank"]), int(s["step"]), float(s["dur_ns"]), float(s["times_median"])
                )
                for s in data.get(key) or []
            ]

        return cls(
            times("warmup"),
            times("slow"),
            int(data.get("steps") or 0),
            float(data.get("mean_all_ns", float("nan"))),
            float(data.get("mean_kept_ns", float("nan"))),
        )


#: The rule in words, as the reports and the JSON state it.
RULE_TEXT = (
    f"leading steps up to the last one over {WARMUP_TIMES_MEDIAN:g}x the median of the steps "
    f"after it, none of them under {ELEVATED_TIMES_MEDIAN:g}x, are warm-up, left out of every "
    "step average; a slow step after a steady one stays in"
)


def steady_steps(run: Run) -> SteadySteps:
    """What the rule leaves out of ``run``'s steps and which slow steps it keeps (per rank, in
    step order, each step stretched over the device work it launched, as the report times
    it). Of a steady run (``steady_run``): what was left out of the run it came from. Cached."""
    saved = run.meta.get(META_KEY)
    if isinstance(saved, dict):
        return SteadySteps.from_dict(saved)
    return run.cached(META_KEY, lambda: _judge(run))


def _judge(run: Run) -> SteadySteps:
    from perfkit_core.events.intervals import step_spans

    spans = step_spans(run)
    durations = (spans["end_ns"] - spans["start_ns"]).astype(np.float64)
    if not len(durations):
        return SteadySteps()
    warmup: list[StepTime] = []
    slow: list[StepTime] = []
    kept_mask = np.ones(len(durations), dtype=bool)
    for rank in np.unique(spans["rank"]).tolist():
        mine = np.flatnonzero(spans["rank"] == rank)
        d = durations[mine]
        lead = leading_warmup(d)
        rest = d[lead:]
        median = float(np.median(rest)) if len(rest) else 0.0
        for j in range(lead):  # a lead is only found over a positive median
            warmup.append(
                StepTime(int(rank), int(spans["step"][mine[j]]), float(d[j]), float(d[j]) / median)
            )
        kept_mask[mine[:lead]] = False
        for j in np.flatnonzero(rest >= SLOW_TIMES_MEDIAN * median).tolist() if median > 0 else []:
            i = mine[lead + j]
            slow.append(
                StepTime(
                    int(rank),
                    int(spans["step"][i]),
                    float(durations[i]),
                    float(durations[i]) / median,
                )
            )
    return SteadySteps(
        warmup,
        slow,
        len(durations),
        float(durations.mean()),
        float(durations[kept_mask].mean()),
    )


def steady_run(run: Run) -> Run:
    """``run`` without the events of its warm-up steps (``steady_steps``): the run every step
    average is taken over. Its ``meta["steady_steps"]`` says what was left out (and keeps
    saying it of the steady run); its row links are remapped. ``run`` itself when no step is
    warm-up. Cached."""
    if isinstance(run.meta.get(META_KEY), dict):
        return run
    return run.cached("steady_run", lambda: _steady(run))


def _steady(run: Run) -> Run:
    from perfkit_core.events.build import make_run
    from perfkit_core.events.ranks import take_rows

    judged = steady_steps(run)
    if not judged.warmup:
        return run
    ev = run.events
    rank = ev["rank"].to_numpy()
    step = ev["step"].to_numpy()
    drop = np.zeros(len(ev), dtype=bool)
    for s in judged.warmup:
        drop |= (rank == s.rank) & (step == s.step)
    rows = np.flatnonzero(~drop)
    meta = {k: v for k, v in run.meta.items() if k != "steps"}
    meta[META_KEY] = judged.to_dict()
    steady = make_run(take_rows(ev, rows), meta)
    steady.origin = run.origin
    return steady


def warmup_text(judged: SteadySteps, scale: float = 1e6, unit: str = "ms") -> str:
    """``steps 1, 2 (52.9 and 35.1 ms, 36x and 24x the median kept step)``, or "" when no step
    was left out; ranks are named for a run of several."""
    return _steps_text(judged.warmup, _several(judged), scale, unit)


def slow_text(judged: SteadySteps, scale: float = 1e6, unit: str = "ms") -> str:
    """``step 12 (45.0 ms, 9x the median kept step)``, or "" when no kept step is slow."""
    return _steps_text(judged.slow, _several(judged), scale, unit)


def _several(judged: SteadySteps) -> bool:
    return len({s.rank for s in judged.warmup + judged.slow}) > 1


def _steps_text(steps: list[StepTime], several: bool, scale: float, unit: str) -> str:
    if not steps:
        return ""
    names = ", ".join(str(s.step) + (f" of rank {s.rank}" if several else "") for s in steps[:6])
    if len(steps) > 6:
        names += f" and {len(steps) - 6} more"
    times = [s.dur_ns / scale for s in steps]
    ratios = [s.times_median for s in steps]
    if len(steps) == 1:
        figures = f"{times[0]:.3g} {unit}, {ratios[0]:.0f}x"
    elif len(steps) == 2:
        figures = f"{times[0]:.3g} and {times[1]:.3g} {unit}, {ratios[0]:.0f}x and {ratios[1]:.0f}x"
    else:
        figures = (
            f"{min(times):.3g} to {max(times):.3g} {unit}, {min(ratios):.0f}x to {max(ratios):.0f}x"
        )
    word = "step" if len(steps) == 1 else "steps"
    return f"{word} {names} ({figures} the median kept step)"
