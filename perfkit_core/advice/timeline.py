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

The profiler slows the host, not the kernels, by a cost per event it records
(``advice.basis``): each stretch of host work before a call loses that cost for each host event
recorded in it, and the time a wait held the host is kept as recorded. With the cost per event
at which the replayed steps last as long as the step timer's steps without the profiler
(``calibrate``), taking out the host spans of some ops (``removed``) gives the step as a remedy
that removes those calls would leave it, without the profiler. With no cost taken out and
nothing removed, the replay gives back the recorded steps: ``Replay.fidelity`` is how close,
and a rule trusts the replay only where it is close (``FAITHFUL``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import merge_intervals, overlap_per_window, step_window
from perfkit_core.events.links import kind_is
from perfkit_core.events.run import Run
from perfkit_core.views.common import DEVICE_KINDS

from .waits import waiting_rows

#: The replay as recorded must give the recorded steps' time within this share to be trusted.
FAITHFUL = 0.05
#: The share of the recorded events' cost that must show in the replayed steps for the replay
#: to measure the profiler's cost per event (``replayed_event_cost``).
HOST_PACED = 0.5
#: Kinds of the host events the profiler records one by one, each at a cost to the host (the
#: events ``advice.basis`` counts its cost per event over).
COUNTED_KINDS = ("operator", "python", "user", "dataloader", "optimizer", "runtime", "memcpy")


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
    #: The starts of the host events the profiler recorded in the steps (``COUNTED_KINDS``),
    #: sorted: each costs the host the profiler's cost per event.
    events: np.ndarray
    #: Device work: the call (index into the calls) that launched it, its stream, its duration.
    dev_call: np.ndarray
    dev_stream: np.ndarray
    dev_dur: np.ndarray
    #: Launch latency: from a launch call's start to its kernel's start on an idle device.
    latency: float
    #: ``calibrate``'s answers by target: the basis and placement ask for the same step.
    calibrated: dict[float, float | None] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, run: Run) -> Replay | None:
        """The replay of ``run``'s steps (cached on the run), or None without steps, device
        work or host calls that launched it."""
        return run.cached("advice_timeline_replay", lambda: _build(run))

    def total(
        self, event_cost: float = 0.0, removed: tuple[np.ndarray, np.ndarray] | None = None
    ) -> float:
        """The replayed steps' time (ns, all steps together) with ``event_cost`` (ns) taken out
        of the host's work for each host event recorded in it, and the host spans ``removed``
        (merged (starts, ends), recorded times) taken out: the calls and events that start in
        them are not made, and the host work in them is not done."""
        keep = np.ones(len(self.start), dtype=bool)
        gap = np.maximum(self.start - self.before, 0.0)
        tail = max(self.hi - self.last_end, 0.0)
        events = self.events
        if removed is not None and len(removed[0]):
            r_start, r_end = removed
            at = np.searchsorted(r_start, self.start, side="right") - 1
            keep = ~((at >= 0) & (self.start < r_end[np.maximum(at, 0)]))
            # times are whole ns from the origin: the overlaps are exact in int64
            gap = np.maximum(gap - overlap_per_window(removed, self.before, self.start), 0.0)
            covered = overlap_per_window(removed, np.array([self.last_end]), np.array([self.hi]))
            tail = max(tail - float(covered[0]), 0.0)
            at = np.searchsorted(r_start, events, side="right") - 1
            events = events[~((at >= 0) & (events < r_end[np.maximum(at, 0)]))]
        cost = np.where(keep, self.cost, 0.0)
        # The host's work before each call and after the last: the gap before it and the
        # previous call's own time (not a wait's: the time the device held it is not the
        # profiler's), less the profiler's cost of the events recorded from the previous
        # call's start to this one's.
        counts = np.diff(np.searchsorted(events, self.start), prepend=0, append=len(events))
        own = np.concatenate(([0.0], np.where(self.waits, 0.0, cost)))
        held = np.concatenate(([0.0], np.where(self.waits, cost, 0.0)))
        work = np.maximum(np.append(gap, tail) + own - event_cost * counts, 0.0) + held
        # the host's position at each call's start, before any wait held it
        at_call = np.cumsum(work)
        host = at_call[:-1]
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
                returned = host[w] + delay + cost[w]
                delay += max(max(free.values(), default=-np.inf) - returned, 0.0)
            first = last
        end_host = float(at_call[-1]) + delay
        return max(end_host, max(free.values(), default=-np.inf))

    @property
    def fidelity(self) -> float:
        """The replay as recorded against the recorded steps: its time over theirs, less 1."""
        return self.total() / self.hi - 1.0 if self.hi > 0 else float("inf")

    def calibrate(self, target_ns: float) -> float | None:
        """The profiler's cost per recorded host event (ns) at which the replayed steps take
        ``target_ns`` (all steps together): 0 when they take no longer as recorded; None when
        no cost gets them there (with no host work left where events were recorded, the device
        and the waits still take longer). The replay's time shrinks as the cost grows."""
        if target_ns not in self.calibrated:
            self.calibrated[target_ns] = self._calibrate(target_ns)
        return self.calibrated[target_ns]

    def _calibrate(self, target_ns: float) -> float | None:
        low = 0.0
        high = float(max(np.max(self.start - self.before, initial=0.0), self.hi - self.last_end))
        high += float(np.max(self.cost, initial=0.0)) + 1.0
        if self.total(low) <= target_ns:
            return low
        if self.total(high) >= target_ns:
            return None
        for _ in range(40):
            mid = 0.5 * (low + high)
            if self.total(mid) > target_ns:
                low = mid
            else:
                high = mid
        return 0.5 * (low + high)


def replayed_event_cost(run: Run, target_ns: float) -> float | None:
    """The profiler's cost per recorded host event (ns) as ``run``'s replay measures it: the
    cost at which the replayed steps last ``target_ns`` (all steps together: the step timer's
    steps without the profiler), where the host paces the replayed steps enough to tell it.
    None where the run cannot be replayed, its replay does not give back the recorded steps
    within FAITHFUL, no cost gets there (``Replay.calibrate``), or less than HOST_PACED of
    the events' cost shows in the replayed steps at that cost (the device paces the rest, and
    a step the device paces hardly moves with the host's cost, so the figure would be noise:
    an H200 step of 32 ms with 31.4 ms of kernels read 16 us an event, the step's own extra
    time 0.5 us)."""
    replay = Replay.of(run)
    if replay is None or abs(replay.fidelity) > FAITHFUL:
        return None
    cost = replay.calibrate(target_ns)
    if cost is None or cost <= 0:
        return cost
    shown = replay.total(0.9 * cost) - replay.total(1.1 * cost)
    return cost if shown >= HOST_PACED * 0.2 * cost * len(replay.events) else None


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
    recorded = (stream < 0) & kind_is(ev, *COUNTED_KINDS) & (start >= 0) & (start < hi)
    return Replay(
        origin=origin,
        hi=hi,
        start=c_start,
        dur=c_dur,
        cost=cost,
        waits=waits,
        before=before,
        last_end=max(float(before[-1]), float(ends[-1])),
        events=np.sort(start[recorded]),
        dev_call=dev_call,
        dev_stream=stream[launched].astype(np.int64),
        dev_dur=dur[launched],
        latency=latency,
    )
