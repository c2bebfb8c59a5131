"""Timelines: the profile cut into time slices that line up with the steps, with what each
device did in each slice (memory allocated, busy share), for the report's line charts.

With steps, each step (``perfkit_core.events.intervals.step_spans``, stretched over the device
work it launched) is cut into the same whole number of equal slices, so slice boundaries fall
on step boundaries; time outside the steps is left out. Without steps, the profile is cut into
equal slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.intervals import clip_to, length, step_spans
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values
from perfkit_core.views.allocations import allocations
from perfkit_core.views.common import DEVICE_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: About how many time slices a timeline has (a whole number per step, at least one).
TIMELINE_SLICES = 24


@dataclass
class Slices:
    """Time slices of a run: absolute ``start``/``end`` (ns), ``name`` and the note that says
    how they were cut; ``origin`` is the first slice's start."""

    start: np.ndarray
    end: np.ndarray
    name: list[str]
    origin: int
    note: str

    def frame_columns(self) -> dict[str, object]:
        """The columns every timeline starts with: name, offset from the first slice, length
        and number of each slice."""
        return {
            "name": self.name,
            "offset_ns": self.start - self.origin,
            "dur_ns": self.end - self.start,
            "slice": np.arange(len(self.name), dtype=np.int64),
        }


#: Header labels of the columns every timeline has.
SLICE_LABELS = {
    "name": "Slice",
    "offset_ns": "Start (from the first slice)",
    "dur_ns": "Slice length",
    "slice": "Slice number",
}


def time_slices(run: Run, slices: int, rank: int | None, work: tuple[int, int]) -> Slices:
    """Slices of ``run`` (of ``rank``, or all ranks): each step cut into ``round(slices /
    steps)`` equal slices (at least one), named ``step 7`` or ``step 7 (2/4)``; without steps,
    ``work`` (first start, last end, ns) cut into ``slices`` equal slices named by their start
    (``12.5 ms``). Integer edges: epoch nanoseconds do not fit a float64 exactly."""
    if slices < 1:
        raise ValueError(f"slices must be at least 1, not {slices}")
    spans = step_spans(run, rank)
    if len(spans["step"]):
        # One span per step number: of several ranks, the earliest start and latest end.
        order = np.argsort(spans["step"], kind="stable")
        numbers, first = np.unique(spans["step"][order], return_index=True)
        starts = np.minimum.reduceat(spans["start_ns"][order], first)
        ends = np.maximum.reduceat(spans["end_ns"][order], first)
        per = max(1, round(slices / len(numbers)))
        parts = np.arange(per + 1, dtype=np.int64)
        edges = starts[:, None] + (parts[None, :] * (ends - starts)[:, None]) // per
        start, end = edges[:, :-1].ravel(), edges[:, 1:].ravel()
        names = [
            f"step {n}" if per == 1 else f"step {n} ({j + 1}/{per})"
            for n in numbers.tolist()
            for j in range(per)
        ]
        note = (
            f"each of the {len(numbers)} steps cut into {per} equal slices"
            if per > 1
            else f"one slice per step, {len(numbers)} steps"
        )
        return Slices(start, end, names, int(start[0]), note)
    origin, finish = work
    edges = origin + (np.arange(slices + 1, dtype=np.int64) * (finish - origin)) // slices
    names = [f"{(e - origin) / 1e6:.1f} ms" for e in edges[:-1].tolist()]
    note = f"no steps were recorded: the profile cut into {slices} equal slices"
    return Slices(edges[:-1], edges[1:], names, origin, note)


def _work_span(run: Run, rank: int | None) -> tuple[int, int]:
    """First start and last end (ns) of the events of ``rank`` (or all), the profiler's own
    spans left out."""
    ev = run.events
    sel = (ev["kind"] != "profiler").to_numpy()
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    start = ev["start_ns"].to_numpy()[sel]
    end = start + ev["dur_ns"].to_numpy()[sel]
    return (int(start.min()), int(end.max())) if len(start) else (0, 1)


def memory_timeline_view(
    run: Run, *, slices: int = TIMELINE_SLICES, rank: int | None = None
) -> pd.DataFrame:
    """Memory allocated over time, in slices that line up with the steps (``time_slices``):
    one row per slice, one column per device with the highest level of memory in the slice:
    ``<device>_peak_allocated_bytes`` from the allocator's totals where the profiler recorded
    them, else ``<device>_peak_above_start_bytes``, the bytes allocated less freed since the
    start of the profile. A level holds from one memory event to the next, so a slice without
    events has the level it started with."""
    import pandas as pd

    mem = allocations(run, rank)
    if not len(mem.start_ns):
        frame = view_frame([], ["name", "offset_ns"], "no memory events were recorded")
        frame.attrs["labels"] = dict(SLICE_LABELS)
        return frame
    cut = time_slices(run, slices, rank, _work_span(run, rank))
    labels = dict(SLICE_LABELS)
    columns: dict[str, np.ndarray] = {}
    change = np.nan_to_num(mem.bytes)
    for device in sorted(set(mem.device.tolist())):
        mine = mem.device == device
        times = mem.start_ns[mine]
        totals = mem.allocated_total[mine]
        if not np.isnan(totals).all():
            known = ~np.isnan(totals)
            times, level, before = times[known], totals[known], np.nan
            key, label = f"{device}_peak_allocated_bytes", f"{device} peak allocated"
        else:
            level, before = np.cumsum(change[mine]), 0.0
            key = f"{device}_peak_above_start_bytes"
            label = f"{device} peak above the profile's start"
        columns[key] = _slice_peaks(times, level, before, cut)
        labels[key] = label
    frame = pd.DataFrame({**cut.frame_columns(), **columns})
    frame.attrs["labels"] = labels
    frame.attrs["note"] = f"highest memory level of each device in each slice; {cut.note}"
    return frame


def _slice_peaks(times: np.ndarray, level: np.ndarray, before: float, cut: Slices) -> np.ndarray:
    """The highest ``level`` (after each event at ``times``, sorted) in each slice of ``cut``,
    the level the slice started with included (``before`` when no event came before it)."""
    lo = np.searchsorted(times, cut.start, side="left")
    hi = np.searchsorted(times, cut.end, side="left")
    out = np.empty(len(lo))
    for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        carried = level[a - 1] if a > 0 else before
        inside = level[a:b].max() if b > a else np.nan
        out[k] = np.fmax(carried, inside)
    return out


def device_timeline_view(
    run: Run, *, slices: int = TIMELINE_SLICES, rank: int | None = None
) -> pd.DataFrame:
    """Device utilisation over time, in slices that line up with the steps (``time_slices``):
    one row per slice, one column per device with the share of the slice it was busy
    (``<device>_busy_pct``: kernels, copies and sets, overlaps merged). Empty when no device
    events were recorded."""
    import pandas as pd

    ev = run.events
    device = (ev["stream"].to_numpy() >= 0) & kind_is(ev, *DEVICE_KINDS)
    if rank is not None:
        device &= ev["rank"].to_numpy() == rank
    if not device.any():
        frame = view_frame([], ["name", "offset_ns"], "no device events were recorded")
        frame.attrs["labels"] = dict(SLICE_LABELS)
        return frame
    cut = time_slices(run, slices, rank, _work_span(run, rank))
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    labels = dict(SLICE_LABELS)
    columns: dict[str, list[float]] = {}
    dev_type = str_values(ev["device_type"])
    dev_index = ev["device_index"].to_numpy()
    for t, i in sorted(
        {(str(a), int(b)) for a, b in zip(dev_type[device], dev_index[device], strict=True)}
    ):
        rows = device & (dev_type == t) & (dev_index == i)
        shares = []
        for a, b in zip(cut.start.tolist(), cut.end.tolist(), strict=True):
            busy = length(clip_to(start[rows], end[rows], (np.array([a]), np.array([b]))))
            shares.append(100.0 * busy / (b - a) if b > a else float("nan"))
        columns[f"{t}:{i}_busy_pct"] = shares
        labels[f"{t}:{i}_busy_pct"] = f"{t}:{i} busy (% of the slice)"
    frame = pd.DataFrame({**cut.frame_columns(), **columns})
    frame.attrs["labels"] = labels
    frame.attrs["note"] = f"busy share of each device in each slice; {cut.note}"
    return frame
