"""How the PaddlePaddle adapter maps Paddle's events onto the event table
(``perfkit_paddle.kinds`` and ``perfkit_paddle.chrome``). Every example shown is run through the
adapter's own functions while the page is built; paddle itself is never imported."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gen import generator
from gen.markdown import DocsError, code, table
from perfkit_core.events import schema
from perfkit_paddle import chrome
from perfkit_paddle import kinds as pk

#: ``classify()`` examples: (TracerEventType name, event name, the kind the page says it gets).
CLASSIFY_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    ("Allocate", "[memory]", "memory"),
    ("ReservedFree", "[memory]", "memory"),
    ("Kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm, ...)", "communication"),
    ("Kernel", "volta_sgemm_128x64_nn", "kernel"),
    ("ProfileStep", "ProfileStep#5", "step"),
    ("Operator", "matmul dygraph", "operator"),
    ("UserDefined", "relu pybind_imperative_func", "other"),
    ("UserDefined", "backward", "other"),
    ("PythonUserDefined", "forward_and_loss", "user"),
    ("SomeFutureType", "anything", "other"),
)

#: ``parse_place()`` examples: (``place`` arg, device_type, device_index).
PLACE_EXAMPLES: tuple[tuple[str, str, int], ...] = (
    ("Place(cpu)", "cpu", -1),
    ("Place(gpu:0)", "gpu", 0),
    ("Place(gpu:1)", "gpu", 1),
    ("Place(gpu_pinned)", "cpu", -1),
    ("Place(xpu:2)", "xpu", 2),
)

#: Columns the JSON reader fills from an event's ``args``: ``_Args`` field -> column(s).
ARG_COLUMNS: dict[str, tuple[str, ...]] = {
    "start_time": ("start_ns",),
    "correlation": ("correlation",),
    "device": ("device_index",),
    "stream": ("stream",),
    "nbytes": ("bytes",),
    "increase_bytes": ("bytes",),
    "current_allocated": ("allocated_bytes",),
    "current_reserved": ("reserved_bytes",),
    "addr": ("address",),
    "place": ("device_type", "device_index"),
    "registers": ("registers",),
    "shared_memory": ("shared_memory",),
    "occupancy": ("occupancy_pct",),
    "grid": ("grid",),
    "block": ("block",),
    "input_shapes": ("input_shapes",),
    "input_dtypes": ("input_dtypes",),
    "callstack": ("stack",),
}
#: ``args`` the reader decodes but that fill no column of their own.
ARGS_WITHOUT_COLUMN = frozenset({"end_time", "meta_name"})

#: The JSON reader's conversions: (field, as written in the file, as stored in the table).
JSON_EXAMPLES: tuple[tuple[str, str, object], ...] = (
    ("name", "matmul dygraph[63.825 us]", "matmul dygraph"),
    ("name", "ProfileStep#1[1.270 ms]", "ProfileStep#1"),
    ("tid", "12796(Python)", 12796),
    ("tid", "12796(C++)", 12796),
    ("start_time", "326.275 us", 326275),
)
_JSON_HELPERS: dict[str, Callable[[str], object]] = {
    "name": lambda text: chrome._SUFFIX_RE.sub("", text),
    "tid": chrome._thread_id,
    "start_time": chrome._rel_ns,
}


def _fail(what: str) -> None:
    raise DocsError(f"{what}; update docs/gen/paddle_events.py and the schema page")


@generator("paddle.types")
def event_types() -> str:
    """One row per TracerEventType and TracerMemEventType name perfkit knows."""
    rows = []
    for type_name, kind in pk.TYPE_KINDS.items():
        if kind not in schema.KINDS:
            _fail(f"TYPE_KINDS maps {type_name!r} to {kind!r}, which is not a kind")
        where = "device" if type_name in pk.DEVICE_TYPES else "host"
        rows.append([code(type_name), code(kind), where])
    for type_name in sorted(pk.MEMORY_TYPES):
        rows.append([code(type_name), code("memory"), "host (memory instant)"])
    return table(["Paddle type", "kind", "runs on"], rows)


@generator("paddle.classify_examples")
def classify_examples() -> str:
    for type_name, name, kind in CLASSIFY_EXAMPLES:
        got = pk.classify(type_name, name)
        if got != kind:
            _fail(f"classify({type_name!r}, {name!r}) is {got!r}, the docs say {kind!r}")
    if pk.step_number("ProfileStep#5") != 5 or pk.step_number("x") != -1:
        _fail("step_number() no longer reads ProfileStep#N")
    rows = [[code(t), code(n), code(k)] for t, n, k in CLASSIFY_EXAMPLES]
    return table(["Paddle type", "name", "kind"], rows)


@generator("paddle.places")
def places() -> str:
    for place, device_type, index in PLACE_EXAMPLES:
        got = pk.parse_place(place)
        if got != (device_type, index):
            _fail(f"parse_place({place!r}) is {got!r}, the docs say {(device_type, index)!r}")
    rows = [[code(p), code(t), code(i)] for p, t, i in PLACE_EXAMPLES]
    return table(["place", "device_type", "device_index"], rows)


@generator("paddle.args")
def args_columns() -> str:
    """The ``args`` keys of Paddle's JSON export, by the column they fill."""
    fields = {f.name: f.encode_name for f in msgspec.structs.fields(chrome._Args)}
    by_column: dict[str, list[str]] = {}
    for attr, columns in ARG_COLUMNS.items():
        if attr not in fields or any(c not in schema.COLUMN_NAMES for c in columns):
            _fail(f"ARG_COLUMNS entry {attr!r} is stale")
        for column in columns:
            by_column.setdefault(column, []).append(code(fields[attr]))
    unread = set(fields) - set(ARG_COLUMNS) - ARGS_WITHOUT_COLUMN
    if unread:
        _fail(f"Paddle args {sorted(unread)} are read but not documented")
    rows = [[code(c), ", ".join(by_column[c])] for c in schema.COLUMN_NAMES if c in by_column]
    return table(["column", "Paddle args key(s)"], rows)


@generator("paddle.json_examples")
def json_examples() -> str:
    for what, text, expected in JSON_EXAMPLES:
        got = _JSON_HELPERS[what](text)
        if got != expected:
            _fail(f"the JSON reader turns {what} {text!r} into {got!r}, not {expected!r}")
    rows = [[what, code(text), code(expected)] for what, text, expected in JSON_EXAMPLES]
    return table(["field", "in the file", "in the table"], rows)
