"""Turn the columns an adapter extracted into a finished event table and ``Run``.

Adapters hand over plain arrays in the order the native profiler wrote events. This module
sorts them by start time, remaps row links, nests host events per thread and assigns every
event to its step, so all adapters share one implementation of those rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links, schema

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


def _take(value: Any, order: np.ndarray) -> Any:
    import pandas as pd

    if isinstance(value, pd.Categorical):
        return pd.Categorical.from_codes(value.codes[order], dtype=value.dtype)
    return np.asarray(value)[order]


def start_order(start: np.ndarray, dur: np.ndarray) -> np.ndarray | None:
    """The order that sorts rows by ``start``, longer ``dur`` first among equal starts, rows
    in their order otherwise (``np.lexsort((-dur, start))``); None when they are in it already.

    Traces are written nearly in time order, which a stable sort of ``start`` alone (timsort)
    finishes in about one pass; the full two-key sort is needed only when equal starts are out
    of order.
    """
    if len(start) < 2:
        return None
    if links.in_start_order(start, dur):
        return None
    order = np.argsort(start, kind="stable")
    s, d = start[order], dur[order]
    if ((s[1:] == s[:-1]) & (d[1:] > d[:-1])).any():
        order = np.lexsort((-dur, start))
    return order


def finish_events(columns: Mapping[str, Any], n: int, *, consume: bool = False) -> pd.DataFrame:
    """Return the finished event table for ``n`` events given as ``columns`` in native order.

    ``columns`` follows ``perfkit_core.events.schema``; row-link columns (``forward_op``) hold native
    row positions. For rows of kind ``step``, ``step`` holds the step number; it is replaced by
    the step assignment of every row. ``parent`` is computed here and must not be given.
    With ``consume`` (``columns`` a dict), each column is taken out of ``columns`` as it is
    sorted, so a big table is not held twice.
    """
    if "parent" in columns:
        raise ValueError("parent is computed by finish_events")
    start = np.asarray(columns["start_ns"], dtype=np.int64)
    dur = np.asarray(columns["dur_ns"], dtype=np.int64)
    order = start_order(start, dur)
    if order is None and not consume:
        order = np.arange(n)  # the caller keeps its columns: the table gets copies
    del start, dur
    inverse = None
    if order is not None:
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n, dtype=np.int64)
    sorted_cols: dict[str, Any] = {}
    for name in list(columns):
        value = columns.pop(name) if consume else columns[name]  # type: ignore[attr-defined]
        if order is None or inverse is None:
            sorted_cols[name] = value
            continue
        taken = _take(value, order)
        del value
        if name in schema.ROW_LINK_COLUMNS:
            taken = np.where(taken >= 0, inverse[np.maximum(taken, 0)], -1)
        sorted_cols[name] = taken
    events = schema.build_events(sorted_cols, n=n)

    host = events["stream"].to_numpy() < 0
    group = links.group_codes(
        events["rank"].to_numpy(), events["pid"].to_numpy(), events["tid"].to_numpy()
    )
    events["parent"] = links.nest(
        group, events["start_ns"].to_numpy(), events["dur_ns"].to_numpy(), host
    )
    step_numbers = events["step"].to_numpy().copy()
    events["step"] = links.assign_steps(events, step_numbers)
    return events


def step_list(events: pd.DataFrame) -> list[int]:
    """Return the step numbers of the run's step spans, in time order, without repeats."""
    steps = events.loc[events["kind"] == "step", "step"].to_numpy()
    seen: dict[int, None] = {}
    for s in steps.tolist():
        if s >= 0:
            seen.setdefault(int(s), None)
    return list(seen)


def make_run(events: pd.DataFrame, meta: Mapping[str, Any]) -> Run:
    """Return a ``Run`` of ``events`` with ``meta`` completed (schema version, steps, span, ranks)."""
    from perfkit_core.events.run import Run

    full = dict(meta)
    full["schema_version"] = schema.SCHEMA_VERSION
    full["steps"] = step_list(events)
    rank = events["rank"].to_numpy()
    if len(rank) and (rank == rank[0]).all():
        ranks = [int(rank[0])]
    else:
        ranks = sorted({int(r) for r in np.unique(rank)}) or [int(full.get("rank", 0))]
    full.setdefault("rank", ranks[0])
    full["ranks"] = ranks
    full.setdefault("world_size", 1)
    # The profiled span is that of the recorded work: the profiler's own span and markers (which
    # run to its "Record Window End", well after the last step) do not stretch it.
    work = ~links.kind_is(events, "profiler")
    if work.any():
        start = events["start_ns"].to_numpy()
        end = start + events["dur_ns"].to_numpy()
        full["span_ns"] = [
            int(np.min(start, where=work, initial=np.iinfo(np.int64).max)),
            int(np.max(end, where=work, initial=np.iinfo(np.int64).min)),
        ]
    else:
        full["span_ns"] = [0, 0]
    return Run(events, full)
