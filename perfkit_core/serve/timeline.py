"""The timeline of a run, as ``perfkit serve``'s Timeline tab draws it: lanes, bands and slices.

**Lanes.** One lane per host thread (rank, process, thread) and per device stream (rank, device,
stream), host threads first. Each event of the table is drawn in its lane at its nesting depth
(the ``parent`` column; a stream's overlapping work on a second row), except memory instants
(the Memory tab has them), the step spans (drawn as bands) and the profiler's own spans.
A thread's Python-level events (``python``, ``user``, ``dataloader``, ``forward``, ``backward``,
``optimizer`` spans) and its framework-level events (operators, their stages, runtime calls) can
be folded: a folded thread shows its Python-level events alone, at their depth among themselves.

**Bands.** Steps (stretched over the device work they launched, as every step time perfkit
prints: ``events.intervals.step_spans``) and the phases of each step (data, forward, backward,
optimizer, other: the slices of the ``model`` view, ``views.anatomy.attribution.step_slices``,
merged where consecutive slices share a phase) run across the lanes.

**Level of detail.** A slice (``Timeline.slice``) returns, for a time window drawn ``px_ns``
nanoseconds to the pixel, every event in the window at least a pixel long, and merges the
shorter ones of each row into runs (first start, last end, how many), so what is sent grows
with the pixels drawn, never with the events in the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events.links import group_codes, kind_is
from perfkit_core.events.schema import coded, str_values

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: Kinds drawn at the Python level of a thread: a folded thread shows these alone.
PYTHON_LEVEL = ("python", "user", "dataloader", "forward", "backward", "optimizer")
#: Kinds never drawn in a lane.
NOT_DRAWN = ("memory", "step", "profiler")
#: Views of the lanes: every event, or folded threads' Python-level events alone.
ALL, FOLDED = 0, 1


@dataclass
class Lane:
    """A lane: ``label``, ``kind`` (``thread`` or ``stream``), its rows with every event drawn
    and with a thread folded, and the ids that name it."""

    id: int
    label: str
    kind: str
    rows: int
    folded_rows: int
    rank: int
    pid: int
    tid: int
    device: int
    stream: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Rows:
    """The events of one view ordered by (lane, row, start), with per-(lane, row) bounds."""

    order: np.ndarray
    start: np.ndarray
    end: np.ndarray
    reach: np.ndarray  # the latest end so far within each (lane, row): a search key for t0
    bounds: dict[tuple[int, int], tuple[int, int]]


def _depths(parent: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """How many ancestors of each row (along ``parent``) are ``counted``."""
    depth = np.zeros(len(parent), dtype=np.int64)
    cur = parent.copy()
    active = np.flatnonzero(cur >= 0)
    while len(active):
        up = cur[active]
        depth[active] += counted[up]
        cur[active] = parent[up]
        active = active[cur[active] >= 0]
    return depth


def _stream_rows(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """Row 0 for each device event of ``rows``, row 1 where it starts before earlier work of
    its stream has ended."""
    out = np.zeros(len(start), dtype=np.int64)
    order = rows[np.lexsort((start[rows], lane[rows]))]
    ln = lane[order]
    if not len(order):
        return out[rows]
    cut = np.flatnonzero(np.r_[True, ln[1:] != ln[:-1]])
    for a, b in zip(cut.tolist(), [*cut[1:].tolist(), len(order)], strict=True):
        seg = order[a:b]
        before = np.maximum.accumulate(np.r_[np.iinfo(np.int64).min, end[seg][:-1]])
        out[seg] = start[seg] < before
    return out[rows]


def _order(
    lane: np.ndarray, row: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray
) -> _Rows:
    order = rows[np.lexsort((start[rows], row[rows], lane[rows]))]
    ln, rw = lane[order], row[order]
    s, e = start[order], end[order]
    cut = np.flatnonzero(np.r_[True, (ln[1:] != ln[:-1]) | (rw[1:] != rw[:-1])])
    ends = [*cut[1:].tolist(), len(order)]
    reach = e.copy()
    bounds: dict[tuple[int, int], tuple[int, int]] = {}
    for a, b in zip(cut.tolist(), ends, strict=True):
        reach[a:b] = np.maximum.accumulate(e[a:b])
        bounds[(int(ln[a]), int(rw[a]))] = (a, b)
    return _Rows(order, s, e, reach, bounds)


class Timeline:
    """The lanes, bands and level-of-detail slices of one run (built once, then queried)."""

    def __init__(self, run: Run, *, ranks: list[int] | None = None) -> None:
        ev = run.events
        self.run = run
        #: The ranks of the job this run is one rank of (empty for a run of its own).
        self.job_ranks = list(ranks or [])
        n = len(ev)
        start = ev["start_ns"].to_numpy().astype(np.int64)
        end = start + ev["dur_ns"].to_numpy().astype(np.int64)
        stream = ev["stream"].to_numpy()
        drawn = ~kind_is(ev, *NOT_DRAWN)
        host = drawn & (stream < 0)
        device = drawn & (stream >= 0)
        python = kind_is(ev, *PYTHON_LEVEL)
        rank = ev["rank"].to_numpy().astype(np.int64)
        pid = ev["pid"].to_numpy().astype(np.int64)
        tid = ev["tid"].to_numpy().astype(np.int64)
        dev = ev["device_index"].to_numpy().astype(np.int64)
        # lanes: host threads by (rank, pid, tid), device streams by (rank, device, stream)
        key = np.where(host, 0, 1)
        a = np.where(host, pid, dev)
        b = np.where(host, tid, stream)
        codes = group_codes(rank, key, a, b)
        lane = np.full(n, -1, dtype=np.int64)
        chosen = np.flatnonzero(host | device)
        uniq, first = np.unique(codes[chosen], return_index=True)
        firsts = chosen[first]
        steps_of_thread = self._step_threads(ev, rank, pid, tid)
        order = sorted(
            range(len(uniq)),
            key=lambda i: (
                int(rank[firsts[i]]),
                int(key[firsts[i]]),
                (int(rank[firsts[i]]), int(pid[firsts[i]]), int(tid[firsts[i]]))
                not in steps_of_thread,
                int(a[firsts[i]]),
                int(b[firsts[i]]),
            ),
        )
        rank_of = np.empty(len(uniq), dtype=np.int64)
        rank_of[np.asarray(order, dtype=np.int64)] = np.arange(len(uniq))
        lane[chosen] = rank_of[np.searchsorted(uniq, codes[chosen])]
        parent = ev["parent"].to_numpy().astype(np.int64)
        depth = _depths(parent, host.astype(np.int64))
        folded_depth = _depths(parent, (host & python).astype(np.int64))
        device_rows = np.flatnonzero(device)
        depth[device_rows] = _stream_rows(lane, start, end, device_rows)
        self.lane_of, self.depth, self.folded_depth = lane, depth, folded_depth
        self.start, self.end = start, end
        self.python = python
        self.host = host
        self.views = (
            _order(lane, depth, start, end, chosen),
            _order(lane, folded_depth, start, end, np.flatnonzero(host & python)),
        )
        self.names = coded(ev["name"])
        self.kinds = coded(ev["kind"])
        self.lanes = self._lanes(ev, firsts[order], rank, pid, tid, dev, stream, host)
        self.steps, self.phases = _bands(run)
        spans = [start[chosen].min(initial=np.iinfo(np.int64).max)]
        ends = [end[chosen].max(initial=np.iinfo(np.int64).min)]
        if len(self.steps["start"]):
            spans.append(int(self.steps["start"].min()))
            ends.append(int(self.steps["end"].max()))
        self.origin = int(min(spans)) if len(chosen) or len(self.steps["start"]) else 0
        self.span_end = int(max(ends)) if len(chosen) or len(self.steps["start"]) else 0

    @staticmethod
    def _step_threads(
        ev: Any, rank: np.ndarray, pid: np.ndarray, tid: np.ndarray
    ) -> set[tuple[int, int, int]]:
        rows = np.flatnonzero(kind_is(ev, "step"))
        return {(int(rank[r]), int(pid[r]), int(tid[r])) for r in rows.tolist()}

    def _lanes(
        self,
        ev: Any,
        firsts: np.ndarray,
        rank: np.ndarray,
        pid: np.ndarray,
        tid: np.ndarray,
        dev: np.ndarray,
        stream: np.ndarray,
        host: np.ndarray,
    ) -> list[Lane]:
        threads = self.run.meta.get("threads") or {}
        device_type = str_values(ev["device_type"])
        ranks = len(np.unique(rank[firsts])) > 1
        pids = len(np.unique(pid[firsts][host[firsts]])) > 1
        out = []
        for i, r in enumerate(firsts.tolist()):
            rows = self.views[ALL].bounds
            n_rows = 1 + max((row for (ln, row) in rows if ln == i), default=0)
            folded = self.views[FOLDED].bounds
            n_folded = 1 + max((row for (ln, row) in folded if ln == i), default=-1)
            prefix = f"rank {int(rank[r])} · " if ranks else ""
            if host[r]:
                name = threads.get(str(int(tid[r]))) or f"thread {int(tid[r])}"
                if pids:
                    name = f"process {int(pid[r])} · {name}"
                label, kind = prefix + name, "thread"
            else:
                kind_name = (device_type[r] or "device").upper()
                label = f"{prefix}{kind_name} {int(dev[r])} · stream {int(stream[r])}"
                kind, n_folded = "stream", n_rows
            out.append(
                Lane(
                    i,
                    label,
                    kind,
                    n_rows,
                    n_folded,
                    int(rank[r]),
                    int(pid[r]),
                    int(tid[r]),
                    int(dev[r]),
                    int(stream[r]),
                )
            )
        return out

    def meta(self) -> dict[str, Any]:
        """Lanes, bands and the span (times in ns from ``origin``, the first thing drawn)."""
        o = self.origin
        return {
            "origin_ns": o,
            "span_ns": self.span_end - o,
            "lanes": [lane.to_dict() for lane in self.lanes],
            "steps": [
                [int(s - o), int(e - o), int(n), int(r)]
                for s, e, n, r in zip(
                    self.steps["start"],
                    self.steps["end"],
                    self.steps["step"],
                    self.steps["rank"],
                    strict=True,
                )
            ],
            "phases": [
                [int(s - o), int(e - o), p]
                for s, e, p in zip(
                    self.phases["start"], self.phases["end"], self.phases["phase"], strict=True
                )
            ],
            "kinds": list(self.kinds.categories),
            "job_ranks": self.job_ranks,
            "rank": int(self.run.meta.get("rank") or 0),
        }

    def slice(self, t0: int, t1: int, px_ns: float, folded: set[int]) -> dict[str, Any]:
        """What the window [t0, t1) (ns from ``origin``) shows at ``px_ns`` ns to the pixel:
        per lane, ``events`` (flat: start, duration, row, event id, name code, kind code) at
        least a pixel long, and ``merged`` (flat: start, end, row, count) runs of shorter ones;
        ``names`` maps the name codes sent to their names."""
        o = self.origin
        a_ns, b_ns = int(t0) + o, int(t1) + o
        px = max(float(px_ns), 1.0)
        lanes = []
        name_codes: set[int] = set()
        for lane in self.lanes:
            view = self.views[FOLDED if lane.kind == "thread" and lane.id in folded else ALL]
            n_rows = lane.folded_rows if view is self.views[FOLDED] else lane.rows
            events: list[np.ndarray] = []
            merged: list[np.ndarray] = []
            for row in range(n_rows):
                found = view.bounds.get((lane.id, row))
                if found is None:
                    continue
                lo, hi = found
                i0 = lo + int(np.searchsorted(view.reach[lo:hi], a_ns, side="right"))
                i1 = lo + int(np.searchsorted(view.start[lo:hi], b_ns, side="left"))
                if i1 <= i0:
                    continue
                s, e = view.start[i0:i1], view.end[i0:i1]
                big = (e - s) >= px
                if big.any():
                    rows = view.order[i0:i1][big]
                    codes = self.names.codes[rows]
                    name_codes.update(np.unique(codes).tolist())
                    events.append(
                        np.column_stack(
                            [
                                s[big] - o,
                                e[big] - s[big],
                                np.full(len(rows), row),
                                rows,
                                codes,
                                self.kinds.codes[rows],
                            ]
                        ).ravel()
                    )
                small = ~big
                if small.any():
                    merged.append(_merge_runs(s[small] - o, e[small] - o, px, row))
            lanes.append(
                {
                    "lane": lane.id,
                    "events": np.concatenate(events).tolist() if events else [],
                    "merged": np.concatenate(merged).tolist() if merged else [],
                }
            )
        names = {int(c): self.names.categories[c] for c in name_codes if c >= 0}
        return {"t0": int(t0), "t1": int(t1), "px_ns": px, "lanes": lanes, "names": names}


def _merge_runs(s: np.ndarray, e: np.ndarray, px: float, row: int) -> np.ndarray:
    """Runs of events shorter than a pixel (in start order) whose pixels touch: flat
    (start, end, row, count) per run."""
    first = np.floor(s / px).astype(np.int64)
    last = np.floor(e / px).astype(np.int64)
    reach = np.maximum.accumulate(last)
    new = np.r_[True, first[1:] > reach[:-1] + 1]
    at = np.flatnonzero(new)
    starts = s[at]
    ends = np.maximum.reduceat(e, at)
    counts = np.diff(np.r_[at, len(s)])
    return np.column_stack([starts, ends, np.full(len(at), row), counts]).ravel()


def _bands(run: Run) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The steps (stretched, as every step time is) and each step's phases, merged where
    consecutive slices of the step share a phase."""
    from perfkit_core.events.intervals import step_spans

    spans = step_spans(run)
    steps = {
        "start": spans["start_ns"],
        "end": spans["end_ns"],
        "step": spans["step"],
        "rank": spans["rank"],
    }
    empty: dict[str, Any] = {
        "start": np.zeros(0, np.int64),
        "end": np.zeros(0, np.int64),
        "phase": [],
    }
    if not len(spans["step"]):
        return steps, empty
    from perfkit_core.views.anatomy.attribution import step_slices

    slices = step_slices(run)
    if not len(slices):
        return steps, empty
    slices = slices.sort_values(["rank", "step", "start_ns"], kind="stable")
    start = slices["start_ns"].to_numpy().astype(np.int64)
    end = start + slices["ns"].to_numpy().astype(np.int64)
    phase = np.asarray(slices["phase"].astype(str).to_numpy())
    group = group_codes(
        slices["rank"].to_numpy().astype(np.int64), slices["step"].to_numpy().astype(np.int64)
    )
    new = np.r_[True, (phase[1:] != phase[:-1]) | (group[1:] != group[:-1])]
    at = np.flatnonzero(new)
    return steps, {
        "start": start[at],
        "end": np.maximum.reduceat(end, at),
        "phase": phase[at].tolist(),
    }
