"""Read Kineto chrome traces (what ``torch.profiler`` exports) into a perfkit ``Run``.

The JSON is decoded by msgspec straight into typed structs that keep only the fields perfkit
uses (shapes and grids stay raw bytes), which is several times faster than building dicts,
then every column is built in one pass. Works without torch installed.
"""

from __future__ import annotations

import gc
from functools import partial
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    TraceError,
    check_int_range,
    check_times_us,
    check_values_range,
    devices_from_properties,
    note_skipped,
    read_trace_bytes,
    us_to_ns,
)
from perfkit_torch.kineto_columns import (
    _categorical_from_raw,
    _describe,
    _floats,
    _from_codes,
    _get_args,
    _get_dims,
    _get_ph,
    _get_stack,
    _get_types,
    _ids,
    _ints,
    _scatter_categorical,
    _stack_categorical,
)
from perfkit_torch.kineto_format import (
    DEVICE_CATEGORIES,
    DEVICE_TYPE_OF_CATEGORY,
    FLOW_PHASES,
    FWDBWD_FLOW_CATEGORY,
    LAUNCH_FLOW_CATEGORIES,
    MEMORY_DEVICE_TYPES,
    STEP_RE,
    Event,
    classify,
    decode,
    int_id,
)

if TYPE_CHECKING:
    from perfkit_core.events import Run


def load_kineto(
    path: str | Path, data: bytes | None = None, *, extra_meta: dict[str, Any] | None = None
) -> Run:
    """Return the ``Run`` recorded in the Kineto chrome trace at ``path`` (``.json`` or ``.json.gz``).

    ``data`` may hold the file's (decompressed) bytes when the caller already has them.
    ``extra_meta`` is merged into the run's metadata. Raises ``TraceError`` for bad input.
    """
    # Hundreds of thousands of short-lived objects would otherwise set off the cyclic garbage
    # collector over and over; nothing made here forms cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_kineto(Path(path), data, extra_meta)
    finally:
        if was_enabled:
            gc.enable()


def _load_kineto(path: Path, data: bytes | None, extra_meta: dict[str, Any] | None) -> Run:
    from perfkit_torch.kineto_stream import NotStreamable, StreamedTrace

    path = Path(path)
    if data is None:
        # A file is read in pieces, so only one piece's bytes and events are in memory at a
        # time; one that cannot be is read whole, which names what is wrong with it.
        streamed = StreamedTrace(path)
        try:
            parts = []
            for events in streamed.pieces():
                parts.append(_Part.of(path, events, streamed.events_in_file - len(events)))
            assert streamed.trace is not None
            return _finish(path, streamed.trace, parts, streamed.events_in_file, extra_meta)
        except NotStreamable:
            pass
        data = read_trace_bytes(path)
    trace = decode(path, data)
    del data
    events = trace.traceEvents or []
    n_in_file = len(events)
    trace.traceEvents = []
    parts = [_Part.of(path, events)]
    del events
    return _finish(path, trace, parts, n_in_file, extra_meta)


class _Part:
    """The columns of a piece of a trace's events, its forward-backward and launch flows, the
    counts of its other flows and its metadata events."""

    def __init__(
        self,
        columns: dict[str, Any],
        n: int,
        fwdbwd: list[Event],
        flow_counts: dict[str, int],
        metadata: list[Event],
        launch: list[Event] | None = None,
    ) -> None:
        self.columns, self.n, self.fwdbwd = columns, n, fwdbwd
        self.launch = launch or []
        self.flow_counts, self.metadata = flow_counts, metadata

    @classmethod
    def of(cls, path: Path, events: list[Event], offset: int = 0) -> _Part:
        """The part of ``events``, the trace's events from ``traceEvents[offset]`` on."""
        import pandas as pd

        phase_codes, phases = pd.factorize(np.asarray(list(map(_get_ph, events)), dtype=object))
        is_flow = np.isin(phase_codes, [i for i, p in enumerate(phases) if p in FLOW_PHASES])
        is_meta = np.isin(phase_codes, [i for i, p in enumerate(phases) if p == "M"])
        is_row = ~is_flow & ~is_meta
        row_index = np.flatnonzero(is_row)  # position in this piece, for messages
        rows: list[Event] = list(compress(events, is_row.tolist()))
        flows: list[Event] = list(compress(events, is_flow.tolist()))
        metadata: list[Event] = list(compress(events, is_meta.tolist()))
        ts_us = _floats(rows, "ts")
        no_ts = np.isnan(ts_us)
        n_empty = n_no_ts = 0
        if no_ts.any():
            # An event without a start cannot be placed in time (time 0 would stretch the
            # profile back to 1970). "{}" (no phase either) is padding some writers end with.
            no_phase = np.isin(phase_codes[row_index], [i for i, p in enumerate(phases) if not p])
            n_empty = int((no_ts & no_phase).sum())
            n_no_ts = int(no_ts.sum()) - n_empty
            keep = ~no_ts
            rows = list(compress(rows, keep.tolist()))
            row_index, ts_us = row_index[keep], ts_us[keep]
        del phase_codes
        fb = [f for f in flows if f.cat == FWDBWD_FLOW_CATEGORY and f.ph in ("s", "f")]
        launch_flows = [f for f in flows if f.cat.lower() in LAUNCH_FLOW_CATEGORIES]
        launch = len(launch_flows)
        counts = {
            "flow_events": len(flows),
            "launch_flow_events": launch,
            "fwdbwd_flow_events": len(fb),
            "other_flow_events": len(flows) - launch - len(fb),
            "empty_events": n_empty,
            "events_without_ts": n_no_ts,
        }
        del flows
        row_index += offset
        columns = _row_columns(path, rows, row_index, ts_us) if rows else {}
        return cls(columns, len(rows), fb, counts, metadata, launch_flows)


def _row_columns(
    path: Path, rows: list[Event], row_index: np.ndarray, ts_us: np.ndarray
) -> dict[str, Any]:
    """The event-table columns of ``rows`` (``traceEvents[row_index]``, starting at ``ts_us``;
    start times relative to the trace's base time)."""
    import pandas as pd

    n = len(rows)
    cats_raw = [e.cat for e in rows]
    names_raw = [e.name for e in rows]
    cat_codes, cat_uniques = pd.factorize(np.asarray(cats_raw, dtype=object))
    name_codes, name_uniques = pd.factorize(np.asarray(names_raw, dtype=object))
    del cats_raw, names_raw
    n_names = max(len(name_uniques), 1)
    pair = cat_codes.astype(np.int64) * n_names + name_codes
    pair_uniques, pair_inverse = np.unique(pair, return_inverse=True)
    pair_kinds = [
        classify(str(cat_uniques[p // n_names]), str(name_uniques[p % n_names]))
        for p in pair_uniques.tolist()
    ]
    kind = np.asarray(pair_kinds, dtype=object)[pair_inverse]
    step_number = np.full(n, -1, dtype=np.int64)
    is_step = kind == "step"
    if is_step.any():
        step_of_name = {
            i: check_int_range(path, int(m.group(1)), f"{nm!r}: step number")
            for i, nm in enumerate(name_uniques)
            if (m := STEP_RE.match(str(nm)))
        }
        codes = name_codes[is_step]
        step_number[is_step] = [step_of_name.get(c, -1) for c in codes.tolist()]

    device_cats = [i for i, c in enumerate(cat_uniques) if str(c).lower() in DEVICE_CATEGORIES]
    is_memory = kind == "memory"
    args = list(map(_get_args, rows))
    on_device = np.isin(cat_codes, device_cats)
    other_rows = np.flatnonzero(kind == "other")
    if len(other_rows):
        # Unknown categories with a device stream are device events.
        other_stream = _ints([args[i] for i in other_rows.tolist()], "stream", path)
        on_device[other_rows[other_stream >= 0]] = True
    dev_rows = np.flatnonzero(on_device)
    dev_args = [args[i] for i in dev_rows.tolist()]

    pid = _ids(path, rows, "pid")
    tid_any = _ids(path, rows, "tid", device=True)
    tid = np.where(on_device, -1, tid_any)
    stream = np.full(n, -1, dtype=np.int64)
    device_index = np.full(n, -1, dtype=np.int64)
    if len(dev_rows):
        dev_stream = _ints(dev_args, "stream", path)
        dev_device = _ints(dev_args, "device", path)
        stream[dev_rows] = np.where(dev_stream >= 0, dev_stream, tid_any[dev_rows])
        device_index[dev_rows] = np.where(dev_device >= 0, dev_device, pid[dev_rows])
    columns_raw_ids = {"_pid": pid, "_tid": tid_any}  # as written, for binding flows
    pid = np.where(on_device, -1, pid)  # Kineto writes the device index as a device event's pid

    device_type_codes = np.zeros(n, dtype=np.int8)  # cpu
    device_type_labels = ["cpu", "gpu"]
    device_type_codes[on_device] = 1
    for i, c in enumerate(cat_uniques):
        label = DEVICE_TYPE_OF_CATEGORY.get(str(c).lower())
        if label is not None:
            if label not in device_type_labels:
                device_type_labels.append(label)
            code = device_type_labels.index(label)
            device_type_codes[on_device & (cat_codes == i)] = code
    nbytes = np.full(n, np.nan)
    allocated = np.full(n, np.nan)
    reserved = np.full(n, np.nan)
    if len(dev_rows):
        nbytes[dev_rows] = _floats(dev_args, "nbytes")
    mem_rows = np.flatnonzero(is_memory)
    if len(mem_rows):
        mem_args = [args[i] for i in mem_rows.tolist()]
        mem_type = _ints(mem_args, "mem_device_type", path)
        mem_dev = _ints(mem_args, "mem_device_id", path)
        for code in np.unique(mem_type).tolist():
            label = MEMORY_DEVICE_TYPES.get(code, "cpu" if code < 0 else f"device{code}")
            if label not in device_type_labels:
                device_type_labels.append(label)
            device_type_codes[mem_rows[mem_type == code]] = device_type_labels.index(label)
        device_index[mem_rows] = np.where(mem_type > 0, mem_dev, -1)
        nbytes[mem_rows] = _floats(mem_args, "mem_bytes")
        allocated[mem_rows] = _floats(mem_args, "total_allocated")
        reserved[mem_rows] = _floats(mem_args, "total_reserved")

    check_values_range(
        path,
        device_index,
        "device index",
        low=-INT32_MAX - 1,
        high=INT32_MAX,
        describe=partial(_describe, rows, row_index),
    )
    dur_us = _floats(rows, "dur")
    check_times_us(path, ts_us, dur_us, describe=partial(_describe, rows, row_index))
    start_ns = us_to_ns(ts_us)  # the trace's base time is added by the caller
    dur_ns = np.maximum(us_to_ns(dur_us), 0)
    del dur_us

    ext_new = _ints(args, "external_id", path)
    ext_old = _ints(args, "external_id_old", path)
    external_id = np.where(ext_new >= 0, ext_new, ext_old)

    columns: dict[str, Any] = {
        "kind": _from_codes(pair_inverse, pair_kinds),
        "name": pd.Categorical.from_codes(name_codes, categories=[str(x) for x in name_uniques]),
        "category": pd.Categorical.from_codes(cat_codes, categories=[str(x) for x in cat_uniques]),
        "framework": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=["torch"]),
        "start_ns": start_ns,
        "dur_ns": dur_ns,
        "device_type": pd.Categorical.from_codes(device_type_codes, categories=device_type_labels),
        "device_index": device_index,
        "pid": pid,
        "tid": tid,
        "stream": stream,
        "step": step_number,
        "correlation": _ints(args, "correlation", path),
        "external_id": external_id,
        "sequence": _ints(args, "sequence", path),
        "input_shapes": _categorical_from_raw(list(map(_get_dims, args))),
        "input_dtypes": _categorical_from_raw(list(map(_get_types, args))),
        "stack": _stack_categorical(list(map(_get_stack, args))),
        "flops": _floats(args, "flops"),
        "bytes": nbytes,
        "allocated_bytes": allocated,
        "reserved_bytes": reserved,
    }
    if len(dev_rows):
        columns["grid"] = _scatter_categorical(
            n, dev_rows, _categorical_from_raw([a.grid for a in dev_args], dims=True)
        )
        columns["block"] = _scatter_categorical(
            n, dev_rows, _categorical_from_raw([a.block for a in dev_args], dims=True)
        )
        for column, attr in (
            ("registers", "registers"),
            ("shared_memory", "shared_memory"),
            ("occupancy_pct", "occupancy"),
        ):
            full = np.full(n, np.nan)
            full[dev_rows] = _floats(dev_args, attr)
            columns[column] = full
    columns["_on_device"] = on_device
    columns.update(columns_raw_ids)
    return columns


def _merge(parts: list[_Part]) -> tuple[dict[str, Any], int]:
    """The columns of every part, end to end (a column a part lacks is "not recorded" there)."""
    import pandas as pd
    from pandas.api.types import union_categoricals

    filled = [p for p in parts if p.n]
    if len(filled) == 1:
        return filled[0].columns, filled[0].n
    names = {name for p in filled for name in p.columns}
    merged: dict[str, Any] = {}
    for name in names:
        pieces = []
        for p in filled:
            value = p.columns.get(name)
            if value is None:
                value = (
                    pd.Categorical.from_codes(np.zeros(p.n, dtype=np.int8), [""])
                    if name in ("grid", "block")
                    else np.full(p.n, np.nan)
                )
            pieces.append(value)
            p.columns.pop(name, None)
        if isinstance(pieces[0], pd.Categorical):
            merged[name] = union_categoricals(pieces, ignore_order=True)
        else:
            merged[name] = np.concatenate(pieces)
        del pieces
    return merged, sum(p.n for p in filled)


def _finish(
    path: Path, trace: Any, parts: list[_Part], n_in_file: int, extra_meta: dict[str, Any] | None
) -> Run:
    from perfkit_core.events import finish_events, make_run

    metadata = [m for p in parts for m in p.metadata]
    fb = [f for p in parts for f in p.fwdbwd]
    launch_flows = [f for p in parts for f in p.launch]
    counts = {k: sum(p.flow_counts[k] for p in parts) for k in parts[0].flow_counts}
    columns, n = _merge(parts)
    del parts
    if n == 0:
        raise TraceError(path, "the trace holds no events, only metadata and flows")
    base = int(trace.baseTimeNanoseconds or 0)
    start_rel = columns["start_ns"]
    # The time origin, and every start after it, within the range of perfkit's ns times.
    check_times_us(path, start_rel / 1000.0, np.zeros(0), base_ns=base)
    columns["start_ns"] = start_rel + base
    on_device = columns.pop("_on_device")
    raw_pid, raw_tid = columns.pop("_pid"), columns.pop("_tid")
    flow_links = _bind_launch_flows(
        path,
        launch_flows,
        raw_pid,
        raw_tid,
        start_rel,
        columns["correlation"],
        on_device,
        np.asarray(columns["kind"]) == "runtime",
    )
    del raw_pid, raw_tid, launch_flows
    forward_op, links = _bind_fwdbwd(
        path,
        fb,
        columns["pid"],
        columns["tid"],
        start_rel,
        rows_seq=columns["sequence"],
        dur_ns=columns["dur_ns"],
        host=~on_device,
    )
    del start_rel, on_device
    columns["forward_op"] = forward_op
    rank, world_size = _rank_info(path, trace.distributedInfo)
    columns["rank"] = np.full(n, rank, dtype=np.int32)
    n_flows = counts.pop("flow_events")
    n_no_ts = counts.pop("events_without_ts")
    finished = finish_events(columns, n, consume=True)
    del columns
    meta: dict[str, Any] = {
        "framework": "torch",
        "framework_version": None,
        "host": trace.host_name,
        "devices": devices_from_properties(trace.deviceProperties, path),
        "rank": rank,
        "world_size": world_size,
        "source": str(path),
        "accounting": {
            "events_in_file": n_in_file,
            "rows": n,
            "flow_events": n_flows,
            "metadata_events": len(metadata),
            **counts,
            "fwdbwd_links": links,
            "launch_flow_links": flow_links,
        },
        "threads": _thread_names(metadata),
        "extra": {
            "distributed": trace.distributedInfo or None,
            "profiler_options": {
                k: bool(v)
                for k, v in (
                    ("record_shapes", trace.record_shapes),
                    ("profile_memory", trace.profile_memory),
                    ("with_stack", trace.with_stack),
                    ("with_flops", trace.with_flops),
                    ("with_modules", trace.with_modules),
                )
                if v is not None
            },
            "base_time_ns": base,
        },
    }
    note_skipped(path, meta["accounting"], {"without a start time (ts)": n_no_ts})
    if extra_meta:
        meta.update(extra_meta)
    return make_run(finished, meta)


def _rank_info(path: Path, info: dict[str, Any]) -> tuple[int, int]:
    """(rank, world size) from ``distributedInfo``; ``TraceError`` for values that are not
    integers or do not fit the int32 ``rank`` column."""
    rank = info.get("rank", 0) if isinstance(info, dict) else 0
    world = info.get("world_size", 1) if isinstance(info, dict) else 1
    values = []
    for key, value in (("rank", rank), ("world_size", world)):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if value is None:
            value = 0 if key == "rank" else 1
        if not isinstance(value, int) or isinstance(value, bool):
            raise TraceError(path, f"distributedInfo.{key} is {value!r}, not an integer")
        values.append(check_int_range(path, value, f"distributedInfo.{key}", low=0, high=INT32_MAX))
    return values[0], max(values[1], 1)


def _thread_names(metadata: list[Event]) -> dict[str, str]:
    names: dict[str, str] = {}
    for e in metadata:
        if e.name == "thread_name" and e.args.meta_name:
            names[str(int_id(e.tid, device=True))] = e.args.meta_name.strip()
    return names


def _bind_launch_flows(
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
            "pid": np.array([_flow_id(path, f.pid, "pid") for f in flows], dtype=np.int64),
            "tid": np.array([_flow_id(path, f.tid, "tid") for f in flows], dtype=np.int64),
            "ts": us_to_ns(flow_ts),
            "id": np.array([_flow_id(path, f.id, "id") for f in flows], dtype=np.int64),
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


def _bind_fwdbwd(
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
    fb = [f for f in fb if f.ts == f.ts]
    if fb:
        flow_ts = np.array([f.ts for f in fb], dtype=np.float64)
        check_times_us(
            path, flow_ts, np.zeros(len(fb)), describe=lambda i: f"flow event {fb[i].id!r}"
        )
    if not fb:
        return forward_op, 0
    import pandas as pd

    host_rows = np.flatnonzero(host)
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
            "pid": np.array([_flow_id(path, f.pid, "pid") for f in fb], dtype=np.int64),
            "tid": np.array([_flow_id(path, f.tid, "tid") for f in fb], dtype=np.int64),
            "ts": us_to_ns(flow_ts),
            "id": [str(f.id) for f in fb],
            "ph": [f.ph for f in fb],
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


def _flow_id(path: Path, value: int | str | None, what: str) -> int:
    return check_int_range(path, int_id(value), f"flow event {what}", low=INT64_MIN, high=INT64_MAX)
