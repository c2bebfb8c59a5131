"""What the profiler itself did to the runs: host events recorded per step (the profiler's cost
grows with them, and torch records about twice as many as Paddle for one model), and the step
times ``perfkit_core.step_timer`` took with and without the profiler recording."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events.steady import leading_warmup

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: Event densities (host events per step) this many times apart bias a profiled ratio.
DENSITY_RATIO_WARN = 1.5
#: Kinds that are not host work the profiler records per op: memory instants, the profiler's
#: own spans, device events.
_NOT_COUNTED = ("memory", "profiler")


@dataclass
class RunOverhead:
    """One run's profiler load: ``events_per_step`` (host events recorded per step),
    ``profiled_ns`` / ``unprofiled_ns`` (the step timer's step times, their leading warm-up
    left out by the steady-step rule, ``events.steady``; empty without a timer) and
    ``overhead_pct`` (mean profiled over mean unprofiled step time, minus one; NaN without
    both). ``whole_unprofiled_ns``: the unprofiled steps, warm-up included, and
    ``warmup_unprofiled`` how many the rule left out."""

    events_per_step: float
    profiled_ns: np.ndarray
    unprofiled_ns: np.ndarray
    whole_unprofiled_ns: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def warmup_unprofiled(self) -> int:
        return max(len(self.whole_unprofiled_ns) - len(self.unprofiled_ns), 0)

    @property
    def overhead_pct(self) -> float:
        if len(self.profiled_ns) == 0 or len(self.unprofiled_ns) == 0:
            return math.nan
        return 100.0 * (float(self.profiled_ns.mean()) / float(self.unprofiled_ns.mean()) - 1.0)

    def to_dict(self) -> dict[str, Any]:
        overhead = self.overhead_pct
        return {
            "events_per_step": self.events_per_step,
            "profiled_steps": len(self.profiled_ns),
            "unprofiled_steps": len(self.unprofiled_ns),
            "overhead_pct": None if math.isnan(overhead) else overhead,
        }


def host_events_per_step(run: Run) -> float:
    """Host events the profiler recorded inside steps, per step (NaN without steps)."""
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    steps = int((st.host & (st.kind == "step")).sum())
    if steps == 0:
        return math.nan
    counted = (
        st.host & (run.events["step"].to_numpy() >= 0) & ~np.isin(st.kind, [*_NOT_COUNTED, "step"])
    )
    return float(counted.sum()) / steps


def step_timer_times(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(profiled, unprofiled) step times in ns that ``perfkit_core.step_timer`` saved into the
    run's metadata, each without its leading warm-up (``events.steady.leading_warmup``: the
    steps every average leaves out); empty arrays when it saved none."""
    profiled, unprofiled = whole_step_timer_times(run)
    return profiled[leading_warmup(profiled) :], unprofiled[leading_warmup(unprofiled) :]


def whole_step_timer_times(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(profiled, unprofiled) step times in ns that ``perfkit_core.step_timer`` saved, every
    one of them (warm-up included); empty arrays when it saved none."""
    record = run.meta.get("step_timer") or {}
    return finite_ns(record.get("profiled_ns")), finite_ns(record.get("unprofiled_ns"))


def finite_ns(raw: object) -> np.ndarray:
    """The finite numbers of a list the step timer saved (times in ns), as floats; empty for
    anything else."""
    values = raw if isinstance(raw, list) else []
    return np.asarray(
        [
            float(v)
            for v in values
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ],
        dtype=np.float64,
    )


#: A phase timed in fewer of the steps timed without the profiler is not stated.
MIN_TIMED_STEPS = 3


def step_timer_phase(run: Run, phase: str, *, mean: bool = False) -> float | None:
    """The median time per step (ns) of ``phase`` (``optimizer``, ``data``, ``loading``) in the
    steps ``perfkit_core.step_timer`` timed without the profiler, as an adapter's phase timer
    measured it (``meta["step_timer"]["phases"]``), or with ``mean`` their mean: for work a
    background thread does as it can (a loader thread filling its queue does several batches
    in one step and none in the next); None when it was not timed in at least
    ``MIN_TIMED_STEPS`` such steps or never ran in them."""
    times = step_timer_phase_ns(run, phase)
    if len(times) < MIN_TIMED_STEPS or not times.any():
        return None
    return float(times.mean() if mean else np.median(times))


def step_timer_phase_ns(run: Run, phase: str) -> np.ndarray:
    """``phase``'s time (ns) in each step ``perfkit_core.step_timer`` timed without the
    profiler, warm-up included, as the adapter's phase timer saved it (0 in a step the phase
    did not run in); empty where it was not timed."""
    record = run.meta.get("step_timer") or {}
    phases = record.get("phases") if isinstance(record, dict) else None
    entry = phases.get(phase) if isinstance(phases, dict) else None
    return finite_ns(entry.get("unprofiled_ns") if isinstance(entry, dict) else None)


def run_overhead(run: Run) -> RunOverhead:
    """The profiler load of ``run``."""
    profiled, unprofiled = step_timer_times(run)
    _, whole = whole_step_timer_times(run)
    return RunOverhead(host_events_per_step(run), profiled, unprofiled, whole)


def density_warning(labels: list[str], overheads: list[RunOverhead]) -> str | None:
    """A sentence when the runs' event densities differ enough to bias a profiled ratio."""
    dens = [o.events_per_step for o in overheads]
    if any(math.isnan(d) or d <= 0 for d in dens):
        return None
    hi, lo = max(dens), min(dens)
    if hi / lo < DENSITY_RATIO_WARN:
        return None
    listed = ", ".join(f"{label} {d:.0f}" for label, d in zip(labels, dens, strict=True))
    return (
        f"host events recorded per step differ {hi / lo:.1f}x ({listed}): the profiler slows "
        "the denser run more, so the profiled ratio is biased"
    )
