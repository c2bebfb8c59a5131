"""The launches view: per operator, how long the work it launched waited between the launch
call's return and the start on the device (HTA's kernel launch delay, or queue time)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values
from perfkit_core.views.common import DEVICE_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: The row of launches made outside every operator.
NO_OPERATOR = "(no operator)"
#: Kinds of host events that are operators a launch can belong to: framework operators, and
#: the operators perfkit files as collectives or as autograd's backward functions.
OPERATOR_KINDS = ("operator", "communication", "backward")


def launch_delays(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (device rows, their launcher rows, launch delay in ns) for every device event
    (kernel, copy, set) whose launching runtime call was recorded. The delay is the event's
    start less the end of the call that launched it, 0 when it started before the call
    returned (HTA's ``launch_delay``)."""
    ev = run.events
    launcher = links.run_launchers(run)
    rows = np.flatnonzero(
        (launcher >= 0) & (ev["stream"].to_numpy() >= 0) & kind_is(ev, *DEVICE_KINDS)
    )
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    by = launcher[rows]
    return rows, by, np.maximum(start[rows] - end[by], 0)


def launches_view(run: Run, *, rank: int | None = None, top: int | None = None) -> pd.DataFrame:
    """Per operator: the device work it launched and how long that work queued, in ns.

    Each device event (kernel, copy, set) whose launching runtime call was recorded counts
    once, under the innermost operator enclosing that call (``(no operator)`` when none does;
    operators include collectives such as ``record_param_comms`` and autograd's backward
    functions).
    ``launch_delay_*`` is the event's start less the end of the launch call, 0 when it started
    before the call returned: HTA's kernel launch delay. A long delay means the device was
    still busy with earlier work (a deep queue, good); launches with short delays and a busy
    host mean the host is what the device waits for. ``runtime_avg_ns`` is the mean duration
    of the launch calls on the host (HTA's ``cpu_duration``). Sorted by total delay.
    """
    import pandas as pd

    columns = [
        "name",
        "launches",
        "launch_delay_avg_ns",
        "launch_delay_max_ns",
        "launch_delay_total_ns",
        "runtime_avg_ns",
    ]
    ev = run.events
    rows, by, delay = launch_delays(run)
    if rank is not None:
        keep = ev["rank"].to_numpy()[rows] == rank
        rows, by, delay = rows[keep], by[keep], delay[keep]
    if not len(rows):
        return view_frame([], columns, "no device launches were recorded")
    operator = _innermost_operator(run, by)
    names = str_values(ev["name"])
    op_name = np.where(operator >= 0, names[np.maximum(operator, 0)], NO_OPERATOR)
    frame = pd.DataFrame(
        {
            "name": op_name,
            "delay": delay.astype(np.float64),
            "runtime": ev["dur_ns"].to_numpy()[by].astype(np.float64),
        }
    )
    out = frame.groupby("name", sort=False).agg(
        launches=("delay", "size"),
        launch_delay_avg_ns=("delay", "mean"),
        launch_delay_max_ns=("delay", "max"),
        launch_delay_total_ns=("delay", "sum"),
        runtime_avg_ns=("runtime", "mean"),
    )
    out = out.reset_index().sort_values(
        ["launch_delay_total_ns", "name"], ascending=[False, True], kind="stable"
    )
    if top is not None:
        out = out.head(top)
    return view_frame(out[columns].to_dict("records"), columns)


def _innermost_operator(run: Run, rows: np.ndarray) -> np.ndarray:
    """For each row in ``rows``: the innermost host operator (``OPERATOR_KINDS``) enclosing it
    (-1 when none)."""
    ev = run.events
    parent = ev["parent"].to_numpy()
    is_op = kind_is(ev, *OPERATOR_KINDS) & (ev["stream"].to_numpy() < 0)
    out = np.full(len(rows), -1, dtype=np.int64)
    cur = parent[rows].copy()
    open_ = cur >= 0
    while open_.any():
        idx = np.flatnonzero(open_)
        hit = is_op[cur[idx]]
        out[idx[hit]] = cur[idx[hit]]
        open_[idx[hit]] = False
        idx = idx[~hit]
        cur[idx] = parent[cur[idx]]
        open_[idx] = cur[idx] >= 0
    return out


def queue_length_series(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Each device stream's queue length over time, HTA's way: the number of device events
    (kernels, copies, sets) launched on the stream and not yet started. One row per change:
    ``device_type``, ``rank``, ``device``, ``stream``, ``time_ns`` and ``queue_length`` after the change (a
    launch call's start adds one, the event's start takes one away; at equal times the start
    is counted first). Only events whose launch call was recorded count."""
    import pandas as pd

    ev = run.events
    rows, by, _ = launch_delays(run)
    ranks = ev["rank"].to_numpy()
    if rank is not None:
        keep = ranks[rows] == rank
        rows, by = rows[keep], by[keep]
    start = ev["start_ns"].to_numpy()
    key_cols = [ranks[rows], ev["device_index"].to_numpy()[rows], ev["stream"].to_numpy()[rows]]
    dev_type = str_values(ev["device_type"])[rows]
    frame = pd.DataFrame(
        {
            "device_type": np.concatenate([dev_type, dev_type]),
            "rank": np.concatenate([key_cols[0], key_cols[0]]).astype(np.int64),
            "device": np.concatenate([key_cols[1], key_cols[1]]).astype(np.int64),
            "stream": np.concatenate([key_cols[2], key_cols[2]]).astype(np.int64),
            "time_ns": np.concatenate([start[by], start[rows]]).astype(np.int64),
            "change": np.concatenate([np.ones(len(rows)), -np.ones(len(rows))]).astype(np.int64),
        }
    )
    frame = frame.sort_values(["rank", "device", "stream", "time_ns", "change"], kind="stable")
    frame["queue_length"] = frame.groupby(["rank", "device", "stream"])["change"].cumsum()
    return frame.drop(columns="change").reset_index(drop=True)


def queue_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Per device stream: how many launched events waited for it, from ``queue_length_series``.

    ``queue_max``: the longest queue. ``queue_mean``: the mean over the series' changes, the
    figure HTA's queue length summary gives. ``queue_time_mean``: the mean over time, from the
    first launch to the last start. ``empty_pct``: the share of that time with nothing queued,
    when the stream could only run what the host launched next. A stream that is busy while its
    queue is short is fed just in time by the host; a long queue means the host is ahead.
    """
    columns = [
        "name",
        "rank",
        "device",
        "stream",
        "launches",
        "queue_max",
        "queue_mean",
        "queue_time_mean",
        "empty_pct",
    ]
    series = queue_length_series(run, rank=rank)
    if series.empty:
        return view_frame([], columns, "no device launches were recorded")
    multi_rank = series["rank"].nunique() > 1
    out = []
    for (r, d, s), part in series.groupby(["rank", "device", "stream"], sort=True):
        times = part["time_ns"].to_numpy()
        length = part["queue_length"].to_numpy()
        held = np.diff(times)
        span = int(times[-1] - times[0])
        kind = str(part["device_type"].iloc[0]).upper()
        out.append(
            {
                "name": f"{kind} {d} stream {s}" + (f" (rank {r})" if multi_rank else ""),
                "rank": int(r),
                "device": int(d),
                "stream": int(s),
                "launches": len(part) // 2,
                "queue_max": int(length.max()),
                "queue_mean": float(length.mean()),
                "queue_time_mean": float((length[:-1] * held).sum() / span) if span else math.nan,
                "empty_pct": float(100.0 * held[length[:-1] == 0].sum() / span)
                if span
                else math.nan,
            }
        )
    return view_frame(out, columns)
