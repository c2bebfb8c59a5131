"""What the profiler adds to the time a rule measures, and the step time a saving is stated
against.

A profiler slows the steps it records, by a cost per event it records: host-heavy work of many
small ops (a per-parameter optimizer loop, Python between tiny ops) is inflated most. When
``perfkit_core.step_timer`` saved step times with and without the profiler recording
(``meta["step_timer"]``), the cost per recorded host event is

    (mean profiled step - mean unprofiled step) / host events recorded per step

and a rule removes it from the time it bases a saving on (``unprofiled``): the time of a phase
less its events times that cost. Without the timer's figures the time is used as recorded and
the finding says so (``profiled``).

Where an adapter timed a phase of the step as it ran (``perfkit_phase_timers``: torch's
optimizer step), the phase's unprofiled time is measured, not corrected: ``timed_phase`` gives
it, and a rule prefers it to the correction, which subtracts two large, noisy figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.advice.timeline import COUNTED_KINDS, replayed_event_cost
from perfkit_core.capture.step_timer import TRAINING_CPU
from perfkit_core.comparison.overhead import finite_ns, step_timer_phase
from perfkit_core.events.links import kind_is

if TYPE_CHECKING:
    from perfkit_core.advice.engine import Context


@dataclass
class Basis:
    """The step time savings are stated against: ``step_ns`` (ns per step), ``name``
    (``unprofiled``: the step timer's mean step without the profiler; ``profiled``: the recorded
    steps), and ``event_cost_ns`` (the profiler's cost per recorded host event, ns; 0 when
    unknown)."""

    name: str
    step_ns: float
    event_cost_ns: float = 0.0
    events_per_step: float = 0.0
    #: The median profiled step the cost per event came from (ns; 0 when unknown).
    profiled_step_ns: float = 0.0
    #: How ``event_cost_ns`` was found: ``steps`` (the profiled step's extra time over the
    #: recorded events) or ``replay`` (``advice.timeline.replayed_event_cost``).
    event_cost_from: str = "steps"

    def corrected(self, recorded_ns: float, events_per_step: float) -> float:
        """``recorded_ns`` (a time per step) less the profiler's cost of ``events_per_step``
        recorded events; never below 0."""
        return max(recorded_ns - events_per_step * self.event_cost_ns, 0.0)

    def scaled(self, recorded_ns: float) -> float:
        """``recorded_ns`` (a time per step) scaled by the unprofiled step over the profiled
        one: for work whose share of the step the profiler changes little (library kernels,
        C++ bookkeeping between Python-heavy ops), where subtracting the average cost per
        event, which Python-heavy work inflates, would take out more than the profiler added."""
        if self.name != "unprofiled" or self.profiled_step_ns <= 0:
            return recorded_ns
        return recorded_ns * self.step_ns / self.profiled_step_ns

    def text(self) -> str:
        """One sentence naming the basis, for a finding's estimate."""
        if self.name == "unprofiled":
            against = (
                f"Against the step without the profiler ({self.step_ns / 1e6:.2f} ms, from the "
                "step timer); "
            )
            if self.event_cost_ns <= 0:
                return against + (
                    "the profiled steps were no slower, so nothing is taken out of the recorded "
                    "time."
                )
            found = (
                ", the cost at which the recorded steps, replayed with the device's work as "
                "recorded, last as long as the step without the profiler,"
                if self.event_cost_from == "replay"
                else ""
            )
            return against + (
                f"the profiler's {self.event_cost_ns / 1e3:.1f} us per recorded event{found} is "
                "taken out of the recorded time."
            )
        return (
            "Against the profiled step: no step timer recorded the step without the profiler, "
            "so the profiler's own cost is still in the figure."
        )


def device_basis_text(basis: Basis) -> str:
    """One sentence naming the basis of a saving made of device time (kernels, copies), which
    the profiler does not slow: it is used as recorded, against the step without the profiler
    where the step timer timed it."""
    if basis.name == "unprofiled":
        return (
            f"Against the step without the profiler ({basis.step_ns / 1e6:.2f} ms, from the step "
            "timer); the device's time is used as recorded, since the profiler slows the host, "
            "not the device."
        )
    return basis.text()


def scaled_basis_text(basis: Basis) -> str:
    """One sentence naming the basis of a saving made of host time the profiler slows with the
    rest of the step (``Basis.scaled``): the recorded time scaled by the step without the
    profiler over the profiled one where the step timer timed both."""
    if basis.name == "unprofiled" and basis.profiled_step_ns > 0:
        return (
            f"Against the step without the profiler ({basis.step_ns / 1e6:.2f} ms, from the step "
            f"timer); the recorded time is scaled by it over the profiled step "
            f"({basis.profiled_step_ns / 1e6:.2f} ms), as the profiler slowed the whole step."
        )
    return basis.text()


def step_basis(ctx: Context) -> Basis:
    """The basis of ``ctx``'s run (cached on the run): ``unprofiled`` when the step timer saved
    step times with and without the profiler (with the profiler's cost per event when it made
    the steps slower; 0 when the profiled steps were no slower, as a loader thread that
    loaded ahead while the profiler started makes them); else ``profiled``. On a run with
    device work whose steps the replay gives back and whose host paces them enough to tell
    (``advice.timeline.replayed_event_cost``), the cost per event is the one at which the
    replayed steps last as long as the step without the profiler: there the host's slowdown
    partly shows as shorter waits for the device, not only as a longer step, so the step's
    extra time over its events does not measure it."""
    cached = ctx.run.cache.get("advice_basis")
    if cached is not None:
        return cached
    basis = Basis("profiled", ctx.step_ns)
    record = ctx.run.meta.get("step_timer") or {}
    profiled = finite_ns(record.get("profiled_ns"))
    unprofiled = finite_ns(record.get("unprofiled_ns"))
    events = recorded_events_per_step(ctx)
    if len(profiled) and len(unprofiled) and events > 0:
        # medians: a step that waited for another process is not the profiler's doing
        extra = float(np.median(profiled)) - float(np.median(unprofiled))
        basis = Basis(
            "unprofiled",
            float(np.median(unprofiled)),
            max(extra, 0.0) / events,
            events,
            float(np.median(profiled)),
        )
        if ctx.has_device:
            cost = replayed_event_cost(ctx.run, basis.step_ns * max(ctx.steps, 1))
            if cost is not None:
                basis.event_cost_ns, basis.event_cost_from = cost, "replay"
    ctx.run.cache.put("advice_basis", basis)
    return basis


def recorded_events_per_step(ctx: Context, mask: np.ndarray | None = None) -> float:
    """Host events the profiler recorded per step (of the rows in ``mask`` when given)."""
    ev = ctx.run.events
    counted = (
        (ev["stream"].to_numpy() < 0) & (ev["step"].to_numpy() >= 0) & kind_is(ev, *COUNTED_KINDS)
    )
    if mask is not None:
        counted &= mask
    return float(counted.sum()) / max(ctx.steps, 1)


def timed_phase(ctx: Context, phase: str, *, mean: bool = False) -> float | None:
    """The time per step (ns) of ``phase`` in the steps the step timer timed without the
    profiler, the median or with ``mean`` the mean (``step_timer_phase``: the figure
    ``perfkit compare`` states too); None when it was not timed in enough of them."""
    return step_timer_phase(ctx.run, phase, mean=mean)


def loading_thread_times(ctx: Context) -> tuple[float, float] | None:
    """(the CPU time per step of a loading thread of the training process, the training
    thread's own CPU time per step), ns, means over the steps the step timer timed without the
    profiler: Paddle's single-process DataLoader loads in such a thread beside training, and
    its adapter times both (the ``loading`` and ``training_cpu`` phases). None when either
    was not timed, or the thread's loading was no longer than the training thread's waits for
    its batches (the ``data`` phase): no thread then took the CPU and the GIL from training."""
    thread = timed_phase(ctx, "loading", mean=True)
    if thread is None or thread <= (timed_phase(ctx, "data", mean=True) or 0.0):
        return None
    training = timed_phase(ctx, TRAINING_CPU, mean=True)
    if training is None or training <= 0:
        return None
    return thread, training


#: A step timed without the profiler that took more than this many times the
#: median step is left out of the mean step a loading thread's split takes apart. A loading
#: thread that lets its queue run dry makes a step wait for about one batch's loading, so its
#: steps stay within about twice the median; a step ten times as long waited for something
#: else (the machine, the collector), and on ``bench/bench_advice.py``'s ``paddle-demo`` one
#: such step put the mean step at over three times the median and the promised saving at 2.7
#: times the step.
OUTLIER_STEP_TIMES_MEDIAN = 5.0


def typical_mean_step(unprofiled: np.ndarray, median_ns: float) -> tuple[float, int]:
    """(the mean of the steps in ``unprofiled`` no longer than ``OUTLIER_STEP_TIMES_MEDIAN`` times
    their median, how many were left out), ns; (``median_ns``, 0) when there are none."""
    if not len(unprofiled):
        return median_ns, 0
    typical = unprofiled[unprofiled <= OUTLIER_STEP_TIMES_MEDIAN * float(np.median(unprofiled))]
    return float(typical.mean()), int(len(unprofiled) - len(typical))
