"""Flow events of a Kineto trace turned into links between rows: launch flows (``ac2g``) give a
correlation to events that lack one, forward-to-backward flows (``fwdbwd``) give the
``forward_op`` column. Works without torch installed."""

from __future__ import annotations

from itertools import compress
from operator import attrgetter
from pathlib import Path

import numpy as np

from perfkit_core.events import INT64_MAX, INT64_MIN, check_int_range, check_times_us, us_to_ns
from perfkit_torch.kineto_columns import event_ts_us
from perfkit_torch.kineto_format import Event, int_id

_get_id = attrgetter("id")
_get_ph = attrgetter("ph")


def bind_launch_flows(
    path: Path,
    flows: list[Event],
    pid: np.ndarray,
    tid: np.ndarray,
    start_rel_ns: np.ndarray,
    correlation: np.ndarray,
    on_device: np.ndarray,
    runtime: np.ndarray,
) -> int:
    """Give rows without a ``correlation`` arg the id of the launch flow (``ac2g``) bound to
    them, in place: a flow starts (``s``) at its runtime call (a host row of kind ``runtime``)
    and finishes (``f``) at the device event it launched, each at the event's pid, tid and
    start. Returns the number of rows
    linked. Rows that carry a ``correlation`` keep it (writers put the flow's id there too)."""
    host_rows = np.flatnonzero((correlation < 0) & ~on_device & runtime)
    dev_rows = np.flatnonzero((correlation < 0) & on_device)
    flows = [f for f in flows if f.ph in ("s", "f") and f.ts == f.ts]
    if not flows or not (len(host_rows) and len(dev_rows)):
        return 0
    import pandas as pd

    flow_ts = np.array([f.ts for f in flows], dtype=np.float64)
    check_times_us(
        path, flow_ts, np.zeros(len(flows)), describe=lambda i: f"flow event {flows[i].id!r}"
    )
    flow_table = pd.DataFrame(
        {
            "pid": flow_ids(path, flows, "pid"),
            "tid": flow_ids(path, flows, "tid"),
            "ts": us_to_ns(flow_ts),
            "id": flow_ids(path, flows, "id"),
            "ph": [f.ph for f in flows],
        }
    )
    flow_table = flow_table[flow_table["id"] >= 0]
    linked = 0
    for phase, rows in (("s", host_rows), ("f", dev_rows)):
        table = pd.DataFrame(
            {"pid": pid[rows], "tid": tid[rows], "ts": start_rel_ns[rows], "row": rows}
        )
        ends = flow_table[flow_table["ph"] == phase]
        merged = ends.merge(table, on=["pid", "tid", "ts"], how="inner")
        merged = merged.drop_duplicates("row")
        correlation[merged["row"].to_numpy()] = merged["id"].to_numpy()
        linked += len(merged)
    return linked


def bind_fwdbwd(
    path: Path,
    fb: list[Event],
    pid: np.ndarray,
    tid: np.ndarray,
    start_rel_ns: np.ndarray,
    *,
    rows_seq: np.ndarray,
    dur_ns: np.ndarray,
    host: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Bind forward-to-backward flows (``fb``: their ``s`` and ``f`` events) to rows: the host
    event on the flow's thread that starts at the flow's time (the one with an autograd
    sequence number first, then the longest). Returns the ``forward_op`` column and the number
    of links made."""
    n = len(pid)
    forward_op = np.full(n, -1, dtype=np.int64)
    # A flow without a time binds to nothing; one far out of range is a broken file.
    flow_ts = event_ts_us(fb)
    timed = flow_ts == flow_ts
    if not timed.all():
        fb = list(compress(fb, timed.tolist()))
        flow_ts = flow_ts[timed]
    if not fb:
        return forward_op, 0
    check_times_us(path, flow_ts, np.zeros(len(fb)), describe=lambda i: f"flow event {fb[i].id!r}")
    import pandas as pd

    flow_ts_ns = us_to_ns(flow_ts)
    # Only rows that start when a flow does can match: the merge below then sees a few
    # thousand rows instead of every host row (the same matches, in the same order).
    host_rows = np.flatnonzero(_starts_at(start_rel_ns, flow_ts_ns) & host)
    table = pd.DataFrame(
        {
            "pid": pid[host_rows],
            "tid": tid[host_rows],
            "ts": start_rel_ns[host_rows],
            "row": host_rows,
            "has_seq": rows_seq[host_rows] >= 0,
            "dur": dur_ns[host_rows],
        }
    )
    flow_table = pd.DataFrame(
        {
            "pid": flow_ids(path, fb, "pid"),
            "tid": flow_ids(path, fb, "tid"),
            "ts": flow_ts_ns,
            "id": list(map(str, map(_get_id, fb))),
            "ph": list(map(_get_ph, fb)),
        }
    )
    merged = flow_table.merge(table, on=["pid", "tid", "ts"], how="inner")
    merged = merged.sort_values(["has_seq", "dur"], ascending=False, kind="stable").drop_duplicates(
        ["id", "ph"]
    )
    src = merged[merged["ph"] == "s"].set_index("id")["row"]
    dst = merged[merged["ph"] == "f"].set_index("id")["row"]
    both = src.index.intersection(dst.index)
    forward_op[dst.loc[both].to_numpy()] = src.loc[both].to_numpy()
    return forward_op, len(both)


def flow_id(path: Path, value: int | str | None, what: str) -> int:
    return check_int_range(path, int_id(value), f"flow event {what}", low=INT64_MIN, high=INT64_MAX)


def flow_ids(path: Path, flows: list[Event], what: str) -> np.ndarray:
    """``flow_id`` of each of ``flows``' ``what`` (pid, tid or id), as an int64 array."""
    values = list(map(attrgetter(what), flows))
    if set(map(type, values)) <= {int}:  # as Kineto writes them; msgspec checked the range
        return np.array(values, dtype=np.int64)
    return np.array([flow_id(path, v, what) for v in values], dtype=np.int64)


def _starts_at(starts: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Whether each of ``starts`` is one of ``times``."""
    if not len(times):
        return np.zeros(len(starts), dtype=bool)
    times = np.unique(times)
    pos = np.minimum(np.searchsorted(times, starts), len(times) - 1)
    return times[pos] == starts
