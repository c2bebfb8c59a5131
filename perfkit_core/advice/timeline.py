"""The recorded steps replayed: what the step would take with some of the host's calls taken
out, and with the host as fast as it runs without the profiler.

The replay walks the host's runtime calls (launches, copies, syncs) in the order the trace
recorded them, each after the host work recorded before it, and queues the device work each
call launched on its stream: a kernel starts once its launch has been made (plus the launch
latency the trace shows) and its stream is free, and runs for its recorded time. A call that
waited for the device (``waits.waiting_rows``: syncs and blocking copies) holds the host until
the device has finished all the work queued before it (on every stream: the trace does not say
which stream a sync waited for); its own cost is the part of its recorded time during which
the device was idle.

Host time is scaled (the profiler slows the host, not the kernels): with the scale that makes
the replayed steps last as long as the step timer's steps without the profiler (``calibrate``),
taking out the host spans of some ops (``removed``) gives the step as a remedy that removes
those calls would leave it, without the profiler. Run at scale 1 with nothing removed, the
replay gives back the recorded steps: ``Replay.fidelity`` is how close, and a rule trusts the
replay only where it is close (``FAITHFUL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.advice.basis import step_basis
from perfkit_core.advice.text import duration_text
from perfkit_core.events import links
from perfkit_core.events.intervals import merge_intervals, overlap_per_window, step_window
from perfkit_core.events.links import kind_is
from perfkit_core.events.run import Run
from perfkit_core.views.common import DEVICE_KINDS

from .waits import waiting_rows

if TYPE_CHECKING:
    from perfkit_core.advice.engine import Context

#: The replay at scale 1 must give the recorded steps' time within this share to be trusted.
FAITHFUL = 0.05
#: The host scales ``calibrate`` searches between.
SCALE_RANGE = (0.02, 2.0)


@dataclass
class Replay:
    """The recorded steps of one rank, ready to replay (``Replay.of``). Host calls are in the
    order recorded; times in ns."""

    #: The first step's start (epoch ns); every time below is from it.
    origin: int
    #: The end of the last step (ns from ``origin``): the recorded steps' time together.
    hi: float
    #: Per host runtime call, in order: start, recorded duration, cost when replayed (its
    #: duration, or for a wait the part of it the device was idle), whether it waited.
    start: np.ndarray
    dur: np.ndarray
    cost: np.ndarray
    waits: np.ndarray
    #: The latest end of the calls before each (the host's recorded position before the gap),
    #: and after the last.
    before: np.ndarray
    last_end: float
    #: Device work: the call (index into the calls) that launched it, its stream, its duration.
    dev_call: np.ndarray
    dev_stream: np.ndarray
    dev_dur: np.ndarray
    #: Launch latency: from a launch call's start to its kernel's start on an idle device.
    latency: float

    @classmethod
    def of(cls, run: Run) -> Replay | None:
        """The replay of ``run``'s steps (cached on the run), or None without steps, device
        work or host calls that launched it."""
        return run.cached("advice_timeline_replay", lambda: _build(run))

    def total(
        self, scale: float = 1.0, removed: tuple[np.ndarray, np.ndarray] | None = None
    ) -> float:
        """The replayed steps' time (ns, all steps together) with host time scaled by ``scale``
        and the host spans ``removed`` (merged (starts, ends), recorded times) taken out: the
        calls that start in them are not made, and the host work in them is not done."""
        keep = np.ones(len(self.start), dtype=bool)
        gap = np.maximum(self.start - self.before, 0.0)
        tail = max(self.hi - self.last_end, 0.0)
        if removed is not None and len(removed[0]):
            r_start, r_end = removed
            at = np.searchsorted(r_start, self.start, side="right") - 1
            keep = ~((at >= 0) & (self.start < r_end[np.maximum(at, 0)]))
            # times are whole ns from the origin: the overlaps are exact in int64
            gap = np.maximum(gap - overlap_per_window(removed, self.before, self.start), 0.0)
            covered = overlap_per_window(removed, np.array([self.last_end]), np.array([self.hi]))
            tail = max(tail - float(covered[0]), 0.0)
        cost = np.where(keep, self.cost, 0.0)
        # the host's position at each call's start, before any wait held it
        host = scale * (np.cumsum(gap) + np.concatenate(([0.0], np.cumsum(cost)[:-1])))
        dev_keep = keep[self.dev_call]
        d_call = self.dev_call[dev_keep]  # in call order
        d_stream = self.dev_stream[dev_keep]
        d_dur = self.dev_dur[dev_keep]
        waits = np.flatnonzero(keep & self.waits)
        # the device work each wait's segment launched: calls after the last wait, to it
        bounds = [*np.searchsorted(d_call, waits, side="right").tolist(), len(d_call)]
        free: dict[int, float] = {}
        delay = 0.0
        first = 0
        for i, last in enumerate(bounds):
            calls, streams = d_call[first:last], d_stream[first:last]
            for s in np.unique(streams).tolist():
                mine = streams == s
                ready = host[calls[mine]] + delay + self.latency
                done = np.cumsum(d_dur[first:last][mine])
                queued = np.concatenate(([0.0], done[:-1]))
                first_start = max(free.get(s, -np.inf), float(np.max(ready - queued)))
                free[s] = first_start + float(done[-1])
            if i < len(waits):
                w = waits[i]
                returned = host[w] + delay + scale * cost[w]
                delay += max(max(free.values(), default=-np.inf) - returned, 0.0)
            first = last
        end_host = host[-1] + scale * cost[-1] + delay + scale * tail
        return max(end_host, max(free.values(), default=-np.inf))

    @property
    def fidelity(self) -> float:
        """The replay at scale 1 against the recorded steps: its time over theirs, less 1."""
        return self.total(1.0) / self.hi - 1.0 if self.hi > 0 else float("inf")

    def calibrate(self, target_ns: float) -> float:
        """The host scale at which the replayed steps take ``target_ns`` (all steps together),
        within ``SCALE_RANGE``: the replay's time grows with the scale."""
        low, high = SCALE_RANGE
        if self.total(low) >= target_ns:
            return low
        if self.total(high) <= target_ns:
            return high
        for _ in range(30):
            mid = 0.5 * (low + high)
            if self.total(mid) > target_ns:
                high = mid
            else:
                low = mid
        return 0.5 * (low + high)


def saving_without(ctx: Context, rows: list[int]) -> dict[str, Any] | None:
    """What the step would lose without the host spans of ``rows`` (ops of ``ctx``'s run), by
    the replay: ``saving_ns`` per step, against the step without the profiler where the step
    timer timed it (the host scaled to match it), else the profiled step; a ``text`` for the
    finding's details, its ``estimate`` and ``evidence``. None where the run cannot be
    replayed or the replay does not give back the recorded steps within FAITHFUL."""
    replay = Replay.of(ctx.run)
    if replay is None or not rows:
        return None
    fidelity = replay.fidelity
    if abs(fidelity) > FAITHFUL:
        return None
    ev = ctx.run.events
    begin = (ev["start_ns"].to_numpy()[rows] - replay.origin).astype(np.float64)
    removed = merge_intervals(begin, begin + ev["dur_ns"].to_numpy()[rows])
    steps = max(ctx.steps, 1)
    basis = step_basis(ctx)
    unprofiled = basis.name == "unprofiled"
    scale = replay.calibrate(basis.step_ns * steps) if unprofiled else 1.0
    now = replay.total(scale) / steps
    remedied = replay.total(scale, removed) / steps
    saving = max(now - remedied, 0.0)
    # shown against the step the saving is stated against (the replay gives it back within
    # its fidelity, or within the calibration's tolerance)
    step = basis.step_ns
    against = (
        f"the step without the profiler, the host run at {scale:.2f}x its recorded pace to match it"
        if unprofiled
        else "the profiled step, the host at its recorded pace"
    )
    text = (
        f"Replayed without these calls, the steps would take {duration_text(step - saving)} "
        f"against {duration_text(step)} ({against}): {duration_text(saving)} per step less, as the "
        "calls' own host time goes and the host, no longer waiting, queues the device's next "
        "work while it still runs."
    )
    pace = (
        f"The host runs at {scale:.2f}x its recorded pace, at which the replayed steps last as "
        f"long as the step timer's steps without the profiler ({basis.step_ns / 1e6:.2f} ms)."
        if unprofiled
        else "The host runs at its recorded pace: without the step timer's figures the saving "
        "is against the profiled step."
    )
    estimate = (
        "The recorded steps replayed with and without these calls: each host call after the "
        "host work recorded before it, each kernel once its launch is made and its stream is "
        "free, each wait until the device has finished the work queued before it. Without the "
        "calls the host neither makes them nor waits there; device work queued before them "
        f"still runs. The replay gives back the recorded steps within "
        f"{max(100 * abs(fidelity), 0.1):.1f}%. " + pace
    )
    evidence = {
        "host_scale": float(scale),
        "fidelity": float(fidelity),
        "replayed_step_ns": float(now),
        "replayed_remedied_step_ns": float(remedied),
    }
    return {"saving_ns": saving, "text": text, "estimate": estimate, "evidence": evidence}


def _launch_latency(
    begin: np.ndarray, dur: np.ndarray, stream: np.ndarray, launch: np.ndarray
) -> float:
    """The median time from a launch call's start to its work's start, over the work launched
    while its stream was idle (its previous work on the stream had ended): the rest waited in
    the queue. 0 when no work was launched on an idle stream."""
    idle = np.zeros(len(begin), dtype=bool)
    for s in np.unique(stream).tolist():
        rows = np.flatnonzero(stream == s)
        previous_end = np.concatenate(([-np.inf], (begin[rows] + dur[rows])[:-1]))
        idle[rows] = np.maximum.accumulate(previous_end) <= launch[rows]
    waited = begin[idle] - launch[idle]
    return float(np.median(np.maximum(waited, 0.0))) if len(waited) else 0.0


def _build(run: Run) -> Replay | None:
    ev = run.events
    (w_start, w_end), found = step_window(run)
    if not found or not len(w_start):
        return None
    # times from the first step's start: epoch nanoseconds lose 256 ns as float64
    origin = int(w_start.min())
    hi = float(int(w_end.max()) - origin)
    start = (ev["start_ns"].to_numpy() - origin).astype(np.float64)
    dur = ev["dur_ns"].to_numpy().astype(np.float64)
    stream = ev["stream"].to_numpy()
    calls = np.flatnonzero(kind_is(ev, "runtime") & (stream < 0) & (start >= 0) & (start < hi))
    device = np.flatnonzero((stream >= 0) & kind_is(ev, *DEVICE_KINDS))
    if not len(calls) or not len(device):
        return None
    calls = calls[np.argsort(start[calls], kind="stable")]
    position = np.full(len(ev), -1, dtype=np.int64)
    position[calls] = np.arange(len(calls))
    launcher = links.run_launchers(run)
    launched = device[launcher[device] >= 0]
    launched = launched[position[launcher[launched]] >= 0]
    if not len(launched):
        return None
    # in the order of the calls that launched them (each stream's order of execution)
    launched = launched[np.lexsort((start[launched], position[launcher[launched]]))]
    dev_call = position[launcher[launched]]
    latency = _launch_latency(
        start[launched], dur[launched], stream[launched], start[calls[dev_call]]
    )
    busy = merge_intervals(start[device], start[device] + dur[device])
    waits = np.isin(calls, waiting_rows(run))
    c_start, c_dur = start[calls], dur[calls]
    cost = np.where(
        waits, np.maximum(c_dur - overlap_per_window(busy, c_start, c_start + c_dur), 0.0), c_dur
    )
    ends = c_start + c_dur
    before = np.maximum.accumulate(np.concatenate(([0.0], ends[:-1])))
    return Replay(
        origin=origin,
        hi=hi,
        start=c_start,
        dur=c_dur,
        cost=cost,
        waits=waits,
        before=before,
        last_end=max(float(before[-1]), float(ends[-1])),
        dev_call=dev_call,
        dev_stream=stream[launched].astype(np.int64),
        dev_dur=dur[launched],
        latency=latency,
    )
