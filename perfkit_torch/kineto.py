"""Read Kineto chrome traces (what ``torch.profiler`` exports) into a perfkit ``Run``.

The JSON is decoded by msgspec straight into typed structs that keep only the fields perfkit
uses (shapes and grids stay raw bytes), which is several times faster than building dicts,
then every column is built in one pass. Works without torch installed.
"""

from __future__ import annotations

import gc
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import (
    INT32_MAX,
    TraceError,
    check_int_range,
    check_times_us,
    devices_from_properties,
    note_skipped,
    read_trace_bytes,
    start_order,
)
from perfkit_torch.kineto_columns import FILL, event_ts_us, row_columns, trace_columns
from perfkit_torch.kineto_flows import bind_fwdbwd, bind_launch_flows
from perfkit_torch.kineto_format import Event, decode, int_id
from perfkit_torch.kineto_strings import (
    FLOW,
    FWDBWD_FLOW,
    KIND_CODE,
    LAUNCH_FLOW,
    META,
    ROW_NO_PHASE,
    TraceStrings,
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
        strings = TraceStrings(path)
        try:
            parts = []
            for events in streamed.pieces():
                offset = streamed.events_in_file - len(events)
                parts.append(_Part.of(path, events, strings, offset))
                del events
            assert streamed.trace is not None
            return _finish(
                path, streamed.trace, parts, strings, streamed.events_in_file, extra_meta
            )
        except NotStreamable:
            pass
        data = read_trace_bytes(path)
    trace = decode(path, data)
    del data
    events = trace.traceEvents or []
    n_in_file = len(events)
    trace.traceEvents = []
    strings = TraceStrings(path)
    parts = [_Part.of(path, events, strings)]
    del events
    return _finish(path, trace, parts, strings, n_in_file, extra_meta)


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
    def of(cls, path: Path, events: list[Event], strings: TraceStrings, offset: int = 0) -> _Part:
        """The part of ``events``, the trace's events from ``traceEvents[offset]`` on, coded
        with the trace's ``strings``."""
        keys = strings.keys
        key_codes = keys.encode(events)
        phase = keys.phase_class[key_codes]
        metadata: list[Event] = []
        fb: list[Event] = []
        launch_flows: list[Event] = []
        n_flows = 0
        if (phase <= ROW_NO_PHASE).all():
            rows = events
            row_index = np.arange(len(events), dtype=np.int64)  # position in this piece
            row_keys = key_codes
        else:
            is_row = phase <= ROW_NO_PHASE
            row_index = np.flatnonzero(is_row)
            rows = list(compress(events, is_row.tolist()))
            row_keys = key_codes[row_index]
            is_flow = phase == FLOW
            n_flows = int(is_flow.sum())
            if n_flows:
                flow = np.where(is_flow, keys.flow_class[key_codes], -1)
                fb = list(compress(events, (flow == FWDBWD_FLOW).tolist()))
                launch_flows = list(compress(events, (flow == LAUNCH_FLOW).tolist()))
            is_meta = phase == META
            if is_meta.any():
                metadata = list(compress(events, is_meta.tolist()))
        ts_us = event_ts_us(rows)
        no_ts = np.isnan(ts_us)
        n_empty = n_no_ts = 0
        if no_ts.any():
            # An event without a start cannot be placed in time (time 0 would stretch the
            # profile back to 1970). "{}" (no phase either) is padding some writers end with.
            no_phase = phase[row_index] == ROW_NO_PHASE
            n_empty = int((no_ts & no_phase).sum())
            n_no_ts = int(no_ts.sum()) - n_empty
            keep = ~no_ts
            rows = list(compress(rows, keep.tolist()))
            row_index, ts_us, row_keys = row_index[keep], ts_us[keep], row_keys[keep]
        del phase, key_codes
        launch = len(launch_flows)
        counts = {
            "flow_events": n_flows,
            "launch_flow_events": launch,
            "fwdbwd_flow_events": len(fb),
            "other_flow_events": n_flows - launch - len(fb),
            "empty_events": n_empty,
            "events_without_ts": n_no_ts,
        }
        row_index = row_index + offset
        columns = row_columns(path, rows, row_index, ts_us, row_keys, strings) if rows else {}
        return cls(columns, len(rows), fb, counts, metadata, launch_flows)


def _merge(path: Path, parts: list[_Part], base_ns: int) -> tuple[dict[str, Any], int]:
    """The columns of every part, end to end (a column a part lacks holds its ``FILL`` value
    there, or NaN: not recorded), and the rows sorted by start, longer first (``start_order``),
    so that ``finish_events`` has nothing to sort: each column is made once, in its final
    order. ``TraceError`` when a start is out of range after the time origin ``base_ns``."""
    filled = [p for p in parts if p.n]
    n = sum(p.n for p in filled)
    names = list(dict.fromkeys(name for p in filled for name in p.columns))
    scratch: dict[np.dtype, np.ndarray] = {}

    def pieces(name: str) -> list[np.ndarray]:
        out = []
        for p in filled:
            value = p.columns.pop(name, None)
            out.append(np.full(p.n, FILL.get(name, np.nan)) if value is None else value)
        return out

    start = np.concatenate(pieces("start_ns"))
    dur = np.concatenate(pieces("dur_ns"))
    _check_starts(path, start, base_ns)
    order = start_order(start, dur)
    merged: dict[str, Any] = {"start_ns": start, "dur_ns": dur}
    if order is not None:
        merged = {"start_ns": start[order], "dur_ns": dur[order]}
    del start, dur
    for name in names:
        if name in merged:
            continue
        values = pieces(name)
        if order is None:
            merged[name] = np.concatenate(values) if len(values) > 1 else values[0]
            continue
        dtype = np.result_type(*values)
        buffer = scratch.get(dtype)
        if buffer is None:
            buffer = scratch[dtype] = np.empty(n, dtype=dtype)
        np.concatenate(values, out=buffer)
        del values
        merged[name] = buffer.take(order)
    return merged, n


def _check_starts(path: Path, start_rel: np.ndarray, base_ns: int) -> None:
    """``TraceError`` unless the time origin and every start after it (ns) are within the range
    of perfkit's ns times (the first and last are tried first: one pass, no copy)."""
    if len(start_rel):
        bounds = np.array([start_rel.min(), start_rel.max()]) / 1000.0
        try:
            check_times_us(path, bounds, np.zeros(0), base_ns=base_ns)
            return
        except TraceError:
            pass  # name the first row out of range
    check_times_us(path, start_rel / 1000.0, np.zeros(0), base_ns=base_ns)


def _finish(
    path: Path,
    trace: Any,
    parts: list[_Part],
    strings: TraceStrings,
    n_in_file: int,
    extra_meta: dict[str, Any] | None,
) -> Run:
    from perfkit_core.events import finish_events, make_run

    metadata = [m for p in parts for m in p.metadata]
    fb = [f for p in parts for f in p.fwdbwd]
    launch_flows = [f for p in parts for f in p.launch]
    counts = {k: sum(p.flow_counts[k] for p in parts) for k in parts[0].flow_counts}
    base = int(trace.baseTimeNanoseconds or 0)
    if not any(p.n for p in parts):
        raise TraceError(path, "the trace holds no events, only metadata and flows")
    columns, n = _merge(path, parts, base)
    del parts
    kind = trace_columns(columns, strings)
    start_rel = columns["start_ns"]
    columns["start_ns"] = start_rel + base
    on_device = columns.pop("_on_device")
    raw_pid, raw_tid = columns.pop("_pid"), columns.pop("_tid")
    flow_links = bind_launch_flows(
        path,
        launch_flows,
        raw_pid,
        raw_tid,
        start_rel,
        columns["correlation"],
        on_device,
        kind == KIND_CODE["runtime"],
    )
    del raw_pid, raw_tid, launch_flows
    forward_op, links = bind_fwdbwd(
        path,
        fb,
        columns["pid"],
        columns["tid"],
        start_rel,
        rows_seq=columns["sequence"],
        dur_ns=columns["dur_ns"],
        host=~on_device,
    )
    del start_rel, on_device, kind
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
