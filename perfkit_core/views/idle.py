"""The idle view: each device stream's idle time between its events, split by cause as HTA's
idle time breakdown splits it (host wait, kernel wait, other)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values
from perfkit_core.views.common import DEVICE_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Gaps shorter than this (ns) that the host did not cause are the cost of launching back-to-back
#: kernels ("kernel wait"); HTA's default threshold (30 in its trace's microseconds).
KERNEL_WAIT_THRESHOLD_NS = 30_000


def stream_idle_view(
    run: Run, *, rank: int | None = None, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
) -> pd.DataFrame:
    """Idle time of each device stream, split by cause, over the whole profile, in ns.

    On each stream the device events (kernels, copies, sets) are taken in start order, and the
    gap before each one (its start less the previous event's end) is idle time, filed as HTA's
    idle time breakdown files it: ``host_wait_ns`` when the host call that launched the event
    started only after the previous event had ended (the host did not queue work fast enough);
    else ``kernel_wait_ns`` when the gap is shorter than ``kernel_wait_threshold_ns`` (the cost
    of launching back-to-back kernels); else ``other_ns`` (waiting on something else, such as
    an event from another stream). An event whose launch was not recorded is never host wait.
    ``idle_ns`` is their sum; a negative gap (overlapping events) counts as 0.
    """
    columns = [
        "name",
        "rank",
        "device",
        "stream",
        "events",
        "idle_ns",
        "host_wait_ns",
        "kernel_wait_ns",
        "other_ns",
    ]
    ev = run.events
    stream = ev["stream"].to_numpy()
    sel = (stream >= 0) & kind_is(ev, *DEVICE_KINDS)
    ranks = ev["rank"].to_numpy()
    if rank is not None:
        sel &= ranks == rank
    if not sel.any():
        return view_frame([], columns, "no device events were recorded")
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    device = ev["device_index"].to_numpy()
    dev_type = str_values(ev["device_type"])
    launcher = links.run_launchers(run)
    launched_at = np.where(launcher >= 0, start[np.maximum(launcher, 0)], np.iinfo(np.int64).min)
    rows_sel = np.flatnonzero(sel)
    order = rows_sel[
        np.lexsort((start[rows_sel], stream[rows_sel], device[rows_sel], ranks[rows_sel]))
    ]
    key = np.stack([ranks[order], device[order], stream[order]], axis=1)
    first = np.r_[True, (key[1:] != key[:-1]).any(axis=1)]
    prev_end = np.r_[0, end[order][:-1]]
    gap = np.where(first, 0, np.maximum(start[order] - prev_end, 0))
    host_wait = ~first & (launched_at[order] > prev_end)
    kernel_wait = ~first & ~host_wait & (start[order] - prev_end < kernel_wait_threshold_ns)
    other = ~first & ~host_wait & ~kernel_wait
    group = np.cumsum(first) - 1
    n = int(group[-1]) + 1
    sums = {
        name: np.bincount(group, weights=np.where(mask, gap, 0), minlength=n).astype(np.int64)
        for name, mask in (("host", host_wait), ("kernel", kernel_wait), ("other", other))
    }
    counts = np.bincount(group, minlength=n)
    heads = np.flatnonzero(first)
    multi_rank = len(np.unique(ranks[order])) > 1
    rows = []
    for g, head in enumerate(heads.tolist()):
        r, d, s = (int(v) for v in key[head])
        host, kern, oth = int(sums["host"][g]), int(sums["kernel"][g]), int(sums["other"][g])
        rows.append(
            {
                "name": f"{dev_type[order[head]].upper()} {d} stream {s}"
                + (f" (rank {r})" if multi_rank else ""),
                "rank": r,
                "device": d,
                "stream": s,
                "events": int(counts[g]),
                "idle_ns": host + kern + oth,
                "host_wait_ns": host,
                "kernel_wait_ns": kern,
                "other_ns": oth,
            }
        )
    return view_frame(rows, columns)
