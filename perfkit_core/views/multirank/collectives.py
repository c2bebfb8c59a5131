"""Collectives across ranks: each call lined up on every rank, its time split into waiting for
the slowest rank and transferring.

A collective cannot finish before every rank of its group has joined it, so the ranks that
arrive first wait. Lining the k-th call of a collective up across ranks (the same collective,
process group and step, counted in the order each rank issued them: NCCL and gloo require every
rank of a group to issue its collectives in the same order), the last rank to arrive starts the
transfer. For each rank: ``wait = last arrival - own start`` (clipped to the call's duration),
``transfer = duration - wait``. Arrivals are the device kernels' start times (host spans when
no device work was recorded), compared across hosts as recorded: the clocks of the hosts are
taken to agree, as Kineto's and Paddle's epoch timestamps do under NTP.

Per rank (``collective_calls``, on one rank's table, where the data is) each call is a few
numbers; only those calls cross the network in a Dask job, and ``align_calls`` lines them up.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events.schema import str_values
from perfkit_core.views.common import view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Columns of the per-rank call table ``collective_calls`` returns.
CALL_COLUMNS = (
    "rank",
    "collective",
    "process_group",
    "bytes",
    "step",
    "seq",
    "start_ns",
    "dur_ns",
    "side",
)
#: Event columns ``collective_calls`` reads (a saved job reads only these for this view).
CALL_EVENT_COLUMNS = (
    "rank",
    "kind",
    "name",
    "start_ns",
    "dur_ns",
    "stream",
    "step",
    "parent",
    "correlation",
    "bytes",
    "process_group",
    "input_shapes",
    "input_dtypes",
)

#: Bytes per element of the dtype names torch and Paddle record (lower-cased).
DTYPE_BYTES: dict[str, int] = {
    **dict.fromkeys(("double", "float64", "long", "int64", "complexfloat", "uint64"), 8),
    **dict.fromkeys(("float", "float32", "int", "int32", "uint32", "complexhalf"), 4),
    **dict.fromkeys(("half", "float16", "bfloat16", "short", "int16", "uint16"), 2),
    **dict.fromkeys(("char", "byte", "int8", "uint8", "bool", "float8_e4m3fn", "float8_e5m2"), 1),
    "complexdouble": 16,
    "complex128": 16,
    "complex64": 8,
}
#: Collective names by their letters, lower-cased, with framework prefixes and suffixes gone.
_CANONICAL = {
    "allreduce": "all_reduce",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
    "alltoallsingle": "all_to_all",
    "alltoallbase": "all_to_all",
    "allgather": "all_gather",
    "allgatherbase": "all_gather",
    "allgatherintotensor": "all_gather",
    "allgathercoalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "sendrecv": "send_recv",
    "allreducecoalesced": "all_reduce",
}
_PREFIX_RE = re.compile(r"^(nccl:|gloo:|mpi:|ucc:|c10d::|c_|nccldevkernel_|ncclkernel_)", re.I)
_KERNEL_RE = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", re.I)


def collective_name(name: str) -> str | None:
    """The canonical collective of an event name (``nccl:all_reduce``, ``c10d::allreduce_``,
    ``ncclKernel_AllReduce_RING_LL_Sum_float``, Paddle's ``c_allreduce_sum``), or None."""
    m = _KERNEL_RE.search(name)
    text = m.group(1) if m else _PREFIX_RE.sub("", name.strip())
    letters = re.sub(r"[^a-z]", "", text.lower())
    if letters in _CANONICAL:
        return _CANONICAL[letters]
    for suffix in ("sum", "max", "min", "prod", "avg"):
        if letters.endswith(suffix) and letters[: -len(suffix)] in _CANONICAL:
            return _CANONICAL[letters[: -len(suffix)]]
    return None


def message_bytes(shapes: str, dtypes: str) -> float:
    """Bytes of the tensors an op was called with, from its recorded input shapes and dtypes
    (``[[45310188]]``, ``["float"]``); NaN when they were not recorded or not understood."""
    import json

    try:
        dims = json.loads(shapes) if shapes else None
        types = json.loads(dtypes) if dtypes else None
    except ValueError:
        return math.nan
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return math.nan
    total = 0.0
    for shape, dtype in zip(dims, types, strict=True):
        size = DTYPE_BYTES.get(str(dtype).lower().replace("c10::", "").replace(" ", ""))
        if not isinstance(shape, list) or not shape or size is None:
            continue
        if not all(isinstance(d, int) for d in shape):
            continue
        total += float(np.prod(shape, dtype=np.float64)) * size
    return total if total > 0 else math.nan


def collective_calls(run: Run) -> pd.DataFrame:
    """Every collective call of one rank: ``CALL_COLUMNS`` (``seq`` counts the calls of the same
    collective, process group and step in time order; ``side`` is ``gpu`` for device kernels,
    ``cpu`` for host spans when no device communication was recorded)."""
    import pandas as pd

    from perfkit_core.events import links

    ev = run.events
    kind = str_values(ev["kind"])
    stream = ev["stream"].to_numpy()
    parent = ev["parent"].to_numpy()
    is_comm = kind == "communication"
    device_calls = np.flatnonzero(is_comm & (stream >= 0))
    names = str_values(ev["name"])
    host_comm = is_comm & (stream < 0)
    if len(device_calls):
        rows, side = device_calls, "gpu"
        launcher = links.run_launchers(run)[rows]
        start_from = np.where(launcher >= 0, launcher, -1)
    else:
        rows = np.flatnonzero(host_comm & ~links.has_ancestor(parent, host_comm))
        rows = rows[ev["dur_ns"].to_numpy()[rows] > 0]
        side = "cpu"
        start_from = rows.copy()
    if len(rows) == 0:
        return pd.DataFrame({c: [] for c in CALL_COLUMNS})
    own_bytes = ev["bytes"].to_numpy()[rows].astype(np.float64)
    own_group = str_values(ev["process_group"])[rows]
    host_bytes = _host_comm_bytes(ev, host_comm)
    groups = str_values(ev["process_group"])
    # Name, size and group from the call itself, else from the innermost host communication
    # span that holds it (or its launch).
    label = np.full(len(rows), None, dtype=object)
    size = own_bytes.copy()
    group = own_group.astype(object)
    cur = start_from.copy()
    for _ in range(64):
        active = np.flatnonzero(cur >= 0)
        if len(active) == 0:
            break
        at = cur[active]
        hit = host_comm[at]
        for i, r in zip(active[hit].tolist(), at[hit].tolist(), strict=True):
            if label[i] is None:
                label[i] = collective_name(names[r])
            if math.isnan(size[i]) and not math.isnan(host_bytes[r]):
                size[i] = host_bytes[r]
            if not group[i] and groups[r]:
                group[i] = groups[r]
        cur[active] = parent[at]
    for i, r in enumerate(rows.tolist()):
        if label[i] is None:
            label[i] = collective_name(names[r]) or names[r]
    start = ev["start_ns"].to_numpy()[rows]
    frame = pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy()[rows].astype(np.int64),
            "collective": label.astype(str),
            "process_group": group.astype(str),
            "bytes": size,
            "step": ev["step"].to_numpy()[rows],
            "start_ns": start,
            "dur_ns": ev["dur_ns"].to_numpy()[rows],
            "side": side,
        }
    ).sort_values("start_ns", kind="stable")
    frame["seq"] = frame.groupby(["collective", "process_group", "step"], sort=False).cumcount()
    return frame[list(CALL_COLUMNS)].reset_index(drop=True)


def _host_comm_bytes(ev: pd.DataFrame, host_comm: np.ndarray) -> np.ndarray:
    """Message bytes of each host communication row (recorded, else from its input shapes)."""
    out = ev["bytes"].to_numpy().astype(np.float64, copy=True)
    rows = np.flatnonzero(host_comm & np.isnan(out))
    if len(rows) == 0:
        return out
    shapes = ev["input_shapes"].cat.codes.to_numpy()[rows]
    dtypes = ev["input_dtypes"].cat.codes.to_numpy()[rows]
    shape_labels = ev["input_shapes"].cat.categories
    dtype_labels = ev["input_dtypes"].cat.categories
    cache: dict[tuple[int, int], float] = {}
    for i, (s, d) in enumerate(zip(shapes.tolist(), dtypes.tolist(), strict=True)):
        if (s, d) not in cache:
            cache[(s, d)] = (
                message_bytes(str(shape_labels[s]), str(dtype_labels[d]))
                if s >= 0 and d >= 0
                else math.nan
            )
        out[rows[i]] = cache[(s, d)]
    return out


def align_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """Line up the calls of every rank (``collective_calls`` of each, concatenated): adds
    ``ranks_in_call`` (ranks that made the call), ``last_rank`` (the last to arrive),
    ``wait_ns`` (time the rank waited for the last one, at most its duration) and
    ``transfer_ns`` (the rest of the call); both NaN for a call found on one rank only. Rows
    come out in rank order, whatever order the ranks' calls arrived in; of ranks arriving at
    the same nanosecond, the lowest is the last."""
    out = calls.sort_values("rank", kind="stable").reset_index(drop=True)
    if out.empty:
        for c in ("ranks_in_call", "last_rank", "wait_ns", "transfer_ns"):
            out[c] = np.empty(0, dtype=np.int64)
        return out
    keys = ["collective", "process_group", "step", "seq"]
    grouped = out.groupby(keys, sort=False)["start_ns"]
    last = grouped.transform("max").to_numpy()
    out["ranks_in_call"] = grouped.transform("size").to_numpy()
    latest = out.loc[grouped.idxmax().to_numpy(), [*keys, "rank"]].rename(
        columns={"rank": "last_rank"}
    )
    out = out.merge(latest, on=keys, how="left", sort=False)
    dur = out["dur_ns"].to_numpy()
    wait = np.clip(last - out["start_ns"].to_numpy(), 0, dur).astype(np.float64)
    # A call no other rank made (or whose ranks were not profiled) has no wait to measure.
    wait[out["ranks_in_call"].to_numpy() < 2] = np.nan
    out["wait_ns"] = wait
    out["transfer_ns"] = dur - wait
    return out


def collectives_frame(aligned: pd.DataFrame, *, by: str = "collective") -> pd.DataFrame:
    """The collectives view of lined-up calls (``align_calls``); see ``collectives_view``."""
    import pandas as pd

    if by not in ("collective", "rank"):
        raise ValueError(f"by must be 'collective' or 'rank', not {by!r}")
    base = ["name", "process_group", "bytes"]
    figures = [
        "calls",
        "time_ns",
        "wait_ns",
        "transfer_ns",
        "wait_pct",
        "algbw_gb_per_s",
    ]
    extra = (["rank"], []) if by == "rank" else (["ranks"], ["last_rank"])
    columns = [*base, *extra[0], *figures, *extra[1]]
    if aligned.empty:
        return view_frame([], columns, "no collectives were recorded")
    a = aligned.assign(
        name=aligned["collective"],
        size_key=aligned["bytes"].fillna(-1.0),
        moved=aligned["bytes"].fillna(0.0),
        known=aligned["bytes"].notna(),
    )
    keys = ["name", "process_group", "size_key"]
    # Bandwidth over the transfer time where a wait was measured, else over the whole call.
    a["busy"] = a["transfer_ns"].fillna(a["dur_ns"].astype(np.float64))
    g = a.groupby([*keys, "rank"], sort=False)
    per_rank = g.agg(
        calls=("dur_ns", "size"),
        time_ns=("dur_ns", "sum"),
        moved=("moved", "sum"),
        known=("known", "all"),
        busy=("busy", "sum"),
    )
    per_rank["wait_ns"] = g["wait_ns"].sum(min_count=1)
    per_rank["transfer_ns"] = g["transfer_ns"].sum(min_count=1)
    per_rank = per_rank.reset_index()
    if by == "rank":
        out = per_rank
    else:
        n_ranks = a.groupby(keys, sort=False)["rank"].nunique()
        out = per_rank.groupby(keys, sort=False).agg(
            calls=("calls", "mean"),
            time_ns=("time_ns", "mean"),
            wait_ns=("wait_ns", "mean"),
            transfer_ns=("transfer_ns", "mean"),
            moved=("moved", "sum"),
            known=("known", "all"),
            busy=("busy", "sum"),
        )
        out["ranks"] = n_ranks
        last = a.drop_duplicates(["name", "process_group", "size_key", "step", "seq"])
        out["last_rank"] = last.groupby(keys, sort=False)["last_rank"].agg(
            lambda s: int(s.mode().iloc[0]) if len(s) else -1
        )
        out = out.reset_index()
    busy = out["busy"]
    out["wait_pct"] = np.where(out["time_ns"] > 0, 100.0 * out["wait_ns"] / out["time_ns"], np.nan)
    out["algbw_gb_per_s"] = np.where(
        out["known"] & (busy > 0), out["moved"] / np.where(busy > 0, busy, 1), np.nan
    )
    out["bytes"] = out["size_key"].where(out["size_key"] >= 0, np.nan)
    out = out.sort_values(
        ["time_ns", "name", *(["rank"] if by == "rank" else [])],
        ascending=[False, True, *([True] if by == "rank" else [])],
        kind="stable",
    )
    notes = [
        "times per rank over the profiled steps"
        + (", mean over ranks" if by == "collective" else ""),
        "wait: time a rank waited in the call for the last rank to arrive (hosts' clocks taken "
        "to agree); transfer: the rest; last rank: the rank that arrived last most often",
        "algbw: bytes moved over transfer time (over the whole call where no wait was measured)",
    ]
    if not out["process_group"].astype(bool).any():
        notes.append("process groups were not recorded: calls are matched across every rank")
    single = int((aligned["ranks_in_call"] < 2).sum())
    if aligned["rank"].nunique() < 2:
        notes.append("one rank: waiting for other ranks cannot be measured")
    elif single:
        notes.append(f"{single} call(s) were found on one rank only: no wait measured for them")
    frame = pd.DataFrame(out[columns].reset_index(drop=True))
    frame.attrs["note"] = "; ".join(notes)
    return frame


def collectives_view(run: Run, *, by: str = "collective", rank: int | None = None) -> Any:
    """Collectives across ranks: one row per collective (name, process group, message size in
    ``bytes``) with, per rank and then the mean over ranks, its ``calls``, ``time_ns``, the
    ``wait_ns`` spent waiting for the slowest rank, ``transfer_ns`` (the rest), ``wait_pct``
    and the algorithm bandwidth ``algbw_gb_per_s`` (bytes over transfer time, where the size is
    known); ``last_rank`` is the rank the others waited for most often. ``by="rank"``: one row
    per collective and rank. ``rank`` keeps one rank's rows (waits still measured against all
    ranks)."""
    from perfkit_core.events.ranks import rank_run, run_ranks

    calls = [collective_calls(rank_run(run, r)) for r in run_ranks(run)]
    import pandas as pd

    aligned = align_calls(pd.concat(calls, ignore_index=True))
    if rank is not None:
        aligned = aligned[aligned["rank"] == rank]
        by = "rank"
    return collectives_frame(aligned, by=by)
