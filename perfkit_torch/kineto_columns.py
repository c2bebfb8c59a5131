"""Column builders for the Kineto reader: a piece's rows (typed events) to numpy columns, with
names, categories and argument texts as per-trace codes (``kineto_strings``), and how a row is
named in messages."""

from __future__ import annotations

from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from perfkit_core.events import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    TraceError,
    address_column,
    check_int_range,
    check_times_us,
    check_values_range,
    us_to_ns,
)
from perfkit_torch.kineto_format import MEMORY_DEVICE_TYPES, Event, _Args, parse_int
from perfkit_torch.kineto_strings import (
    KIND_CODE,
    KIND_ORDER,
    TraceStrings,
    categorical,
    code_dtype,
    encode_rare,
    text_fields,
    text_labels,
)

#: The JSON key of each ``_Args`` field, for messages.
_ARG_KEYS = dict(zip(_Args.__struct_fields__, _Args.__struct_encode_fields__, strict=True))


_get_ts = attrgetter("ts")
_get_dur = attrgetter("dur")
_get_args = attrgetter("args")
_get_inputs = attrgetter("input_dims", "input_type", "input_values")
#: ``Input Dims``, ``Input type`` and ``Concrete Inputs`` as one key: JSON text holds no control
#: character, so ``\x01`` parts them unambiguously.
_inputs_key = b"\x01".join


def _ints(objs: list[Any], attr: str, path: Path) -> np.ndarray:
    """Int64 column of ``attr`` of ``objs`` (events' args read from ``path``). Kineto writers
    put ints, or text: ROCm's writes ``"stream": "0x0"``. Decimal and hex text are read as the
    number they write; other text, or a number out of the int64 range, raises ``TraceError``."""
    try:
        return np.fromiter(map(attrgetter(attr), objs), np.int64, len(objs))
    except (ValueError, TypeError, OverflowError):
        pass  # text numpy does not read (hex): convert one at a time
    key = _ARG_KEYS.get(attr, attr)
    get = attrgetter(attr)
    out = np.empty(len(objs), dtype=np.int64)
    for i, obj in enumerate(objs):
        value = get(obj)
        number = value if type(value) is int else parse_int(str(value))
        if number is None:
            raise TraceError(
                path, f"args[{key!r}] is {value!r}: not an integer (decimal or 0x hex)"
            )
        out[i] = check_int_range(path, number, f"args[{key!r}]", low=INT64_MIN, high=INT64_MAX)
    return out


def event_ts_us(events: list[Event]) -> np.ndarray:
    """The ``ts`` of each of ``events`` (us, NaN where it has none), as a float64 array."""
    return np.fromiter(map(_get_ts, events), np.float64, len(events))


def _floats(objs: list[Any], attr: str) -> np.ndarray:
    """Float column of ``attr``; None (not recorded) becomes NaN."""
    return np.array(list(map(attrgetter(attr), objs)), dtype=np.float64)


def _describe(rows: list[Event], row_index: np.ndarray, i: int) -> str:
    """``traceEvents[7] ("aten::add")``: where row ``i`` came from, for messages."""
    name = rows[i].name
    shown = name if len(name) <= 60 else name[:57] + "..."
    return f"traceEvents[{int(row_index[i])}] ({shown!r})"


#: What a piece lacks a column for holds (``_merge`` fills it in): no device, no bytes.
FILL: dict[str, Any] = {
    "_on_device": False,
    "_device_type": 0,
    "device_index": -1,
    "stream": -1,
    "_grid": -1,
    "_block": -1,
    "address": -1,
}


def row_columns(
    path: Path,
    rows: list[Event],
    row_index: np.ndarray,
    ts_us: np.ndarray,
    row_keys: np.ndarray,
    strings: TraceStrings,
) -> dict[str, Any]:
    """The event-table columns of ``rows`` (``traceEvents[row_index]``, starting at ``ts_us``,
    with event-key codes ``row_keys``; start times relative to the trace's base time).

    Columns named with a leading ``_`` are codes (``_key``, ``_rare``, ``_inputs``,
    ``_device_type``, ``_grid``, ``_block``) or ``_on_device``, which ``trace_columns`` turns
    into the table's columns once every piece was read. Columns of device and memory events
    are left out of a piece that has none (``FILL`` and NaN stand for them).
    """
    keys = strings.keys
    keys.describe_rows(row_keys)
    n = len(rows)
    columns: dict[str, Any] = {"_key": row_keys}
    kind = keys.kind[row_keys]
    on_device = keys.device_category[row_keys]
    other_rows = np.flatnonzero(kind == KIND_CODE["other"])
    if len(other_rows):
        # Unknown categories with a device stream are device events.
        other_stream = _ints([rows[i].args for i in other_rows.tolist()], "stream", path)
        on_device[other_rows[other_stream >= 0]] = True
    dev_rows = np.flatnonzero(on_device)
    mem_rows = np.flatnonzero(kind == KIND_CODE["memory"])
    if len(dev_rows) or len(mem_rows):
        columns.update(
            _device_columns(path, rows, row_index, row_keys, on_device, mem_rows, strings)
        )
    del kind, on_device
    dur_us = np.fromiter(map(_get_dur, rows), np.float64, n)
    check_times_us(path, ts_us, dur_us, describe=partial(_describe, rows, row_index))
    columns["start_ns"] = us_to_ns(ts_us)  # the trace's base time is added by the caller
    columns["dur_ns"] = np.maximum(us_to_ns(dur_us), 0)
    del dur_us

    args = list(map(_get_args, rows))
    ext_new = _ints(args, "external_id", path)
    rare = encode_rare(strings, args)
    if strings.rare_int[rare].all():
        ext_old = strings.rare_ext_old[rare]
    else:  # text (hex, or not a number): read or refused one at a time
        ext_old = _ints(args, "external_id_old", path)
    columns["external_id"] = np.where(ext_new >= 0, ext_new, ext_old)
    del ext_new, ext_old
    columns["_rare"] = rare
    columns["correlation"] = _ints(args, "correlation", path)
    columns["sequence"] = _ints(args, "sequence", path)
    columns["_inputs"] = strings.inputs.encode(map(_inputs_key, map(_get_inputs, args)), n)
    return columns


def _device_columns(
    path: Path,
    rows: list[Event],
    row_index: np.ndarray,
    row_keys: np.ndarray,
    on_device: np.ndarray,
    mem_rows: np.ndarray,
    strings: TraceStrings,
) -> dict[str, Any]:
    """The columns of device events (``on_device``) and memory events (``mem_rows``)."""
    keys = strings.keys
    n = len(rows)
    dev_rows = np.flatnonzero(on_device)
    dev_args = [rows[i].args for i in dev_rows.tolist()]
    raw_pid = keys.pid[row_keys]
    raw_tid = keys.tid[row_keys]
    stream = np.full(n, -1, dtype=np.int64)
    device_index = np.full(n, -1, dtype=np.int64)
    if len(dev_rows):
        dev_stream = _ints(dev_args, "stream", path)
        dev_device = _ints(dev_args, "device", path)
        stream[dev_rows] = np.where(dev_stream >= 0, dev_stream, raw_tid[dev_rows])
        device_index[dev_rows] = np.where(dev_device >= 0, dev_device, raw_pid[dev_rows])
    # cpu, else the device type of the category ("gpu" unless DEVICE_TYPE_OF_CATEGORY says)
    device_type = np.where(on_device, keys.device_type[row_keys], 0).astype(np.int16)
    nbytes = np.full(n, np.nan)
    allocated = np.full(n, np.nan)
    reserved = np.full(n, np.nan)
    address = np.full(n, -1, dtype=np.int64)
    if len(dev_rows):
        nbytes[dev_rows] = _floats(dev_args, "nbytes")
    if len(mem_rows):
        mem_args = [rows[i].args for i in mem_rows.tolist()]
        mem_type = _ints(mem_args, "mem_device_type", path)
        mem_dev = _ints(mem_args, "mem_device_id", path)
        for code in np.unique(mem_type).tolist():
            label = MEMORY_DEVICE_TYPES.get(code, "cpu" if code < 0 else f"device{code}")
            device_type[mem_rows[mem_type == code]] = keys.device_type_code(label)
        device_index[mem_rows] = np.where(mem_type > 0, mem_dev, -1)
        nbytes[mem_rows] = _floats(mem_args, "mem_bytes")
        allocated[mem_rows] = _floats(mem_args, "total_allocated")
        reserved[mem_rows] = _floats(mem_args, "total_reserved")
        address[mem_rows] = address_column([a.mem_addr for a in mem_args])
    check_values_range(
        path,
        device_index,
        "device index",
        low=-INT32_MAX - 1,
        high=INT32_MAX,
        describe=partial(_describe, rows, row_index),
    )
    columns: dict[str, Any] = {
        "_on_device": on_device,
        "_device_type": device_type,
        "device_index": device_index,
        "stream": stream,
        "bytes": nbytes,
        "allocated_bytes": allocated,
        "reserved_bytes": reserved,
        "address": address,
    }
    if len(dev_rows):
        for column, codes in (("_grid", strings.grids), ("_block", strings.blocks)):
            full = np.full(n, -1, dtype=np.int32)
            full[dev_rows] = codes.encode_raw([getattr(a, column[1:]) for a in dev_args])
            columns[column] = full
        for column, attr in (
            ("registers", "registers"),
            ("shared_memory", "shared_memory"),
            ("occupancy_pct", "occupancy"),
        ):
            full = np.full(n, np.nan)
            full[dev_rows] = _floats(dev_args, attr)
            columns[column] = full
    return columns


def trace_columns(columns: dict[str, Any], strings: TraceStrings) -> np.ndarray:
    """Turn the code columns of a whole trace (``row_columns``, pieces end to end) into the
    event table's columns, in place, and add ``_pid``/``_tid`` (as written, for binding flows)
    and ``_on_device``; return the ``kind`` codes (into ``KIND_ORDER``)."""
    import pandas as pd

    keys = strings.keys
    key = columns.pop("_key")
    n = len(key)
    kind = keys.kind[key]
    columns["kind"] = pd.Categorical.from_codes(kind, categories=list(KIND_ORDER))
    for column, codes, table in (
        ("name", keys.name, keys.names),
        ("category", keys.category, keys.categories),
    ):
        narrow = codes.astype(code_dtype(len(table.values_in_order)))
        columns[column] = pd.Categorical.from_codes(
            narrow[key], categories=list(table.values_in_order)
        )
    columns["framework"] = pd.Categorical.from_codes(
        np.zeros(n, dtype=np.int8), categories=["torch"]
    )
    columns["step"] = keys.step[key]
    on_device = columns.setdefault("_on_device", np.zeros(n, dtype=bool))
    columns["_pid"] = keys.pid[key]
    columns["_tid"] = keys.tid[key]
    if on_device.any():
        # Kineto writes the device index as a device event's pid, the stream as its tid.
        columns["pid"] = np.where(on_device, -1, columns["_pid"])
        columns["tid"] = np.where(on_device, -1, columns["_tid"])
    else:
        columns["pid"], columns["tid"] = columns["_pid"], columns["_tid"]
    del key
    device_type = columns.pop("_device_type", None)
    if device_type is None:
        device_type = np.zeros(n, dtype=np.int8)
    columns["device_type"] = pd.Categorical.from_codes(
        device_type, categories=list(keys.device_types)
    )
    inputs = columns.pop("_inputs")
    shapes, dtypes, values = text_fields(strings.inputs.values_in_order, 3)
    columns["input_shapes"] = categorical(inputs, shapes)
    columns["input_dtypes"] = categorical(inputs, dtypes)
    columns["input_values"] = categorical(inputs, values)
    del shapes, dtypes, values
    del inputs
    rare = columns.pop("_rare")
    columns["flops"] = strings.rare_flops[rare]
    columns["stack"] = categorical(
        strings.rare_stack[rare],
        ["\n".join(f for f in s.split(";") if f) for s in strings.stacks.values_in_order],
    )
    del rare
    for column, texts in (("grid", strings.grids), ("block", strings.blocks)):
        if "_" + column in columns:
            values = columns.pop("_" + column)
            labels = [*text_labels(texts.values_in_order, _dims_label), ""]
            values[values < 0] = len(labels) - 1  # not a device event
            columns[column] = categorical(values, labels)
    return kind


def _dims_label(label: str) -> str:
    """``[64, 1, 1]`` as ``64,1,1``."""
    return label.strip("[]").replace(" ", "")
