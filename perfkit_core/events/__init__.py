"""The event table and the runs that hold it: what every adapter builds and every view reads.

Modules, in the order data flows through them:

- ``schema``: every column, its dtype and unit, every ``kind`` (``docs/reference/schema.md``).
- ``build``: turns the columns an adapter extracted into a finished table (sorted, nested,
  assigned to steps) and a ``Run``.
- ``links``: links between rows, computed in bulk (nesting, launches, steps, tree sums).
- ``intervals``: unions and clipping of time intervals; the step window of a run.
- ``run``: ``Run``, saved as ``events.parquet`` + ``meta.json``.
- ``loading``: ``load(path)`` for saved runs, trace files and folders of per-rank traces.
- ``devices``, ``atomic``: device descriptions from traces; atomic file writes.
- ``model_entries``: the entries of ``meta["model"]`` (a parameter, a layer and its key), which
  every adapter writes the same way; ``cache``: what a run computes once (``Run.cache``).
- ``checks``, ``metadata``: range checks on what traces hold (nothing may wrap around int64)
  and the shape of ``Run.meta``, checked when a saved run is read.

The names below are the API adapters use (``perfkit-torch`` and ``perfkit-paddle`` use nothing
else from here).
"""

from __future__ import annotations

from perfkit_core.errors import TraceError
from perfkit_core.events.atomic import atomic_path, write_bytes
from perfkit_core.events.build import finish_events, make_run, start_order
from perfkit_core.events.checks import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    TIME_LIMIT_NS,
    address_column,
    check_int_range,
    check_times_us,
    check_values_range,
    decode_error_reason,
    note_skipped,
    us_to_ns,
)
from perfkit_core.events.devices import devices_from_properties
from perfkit_core.events.inflate import InflateLimit, inflate_limit
from perfkit_core.events.loading import combine_runs, load, read_head, read_trace_bytes
from perfkit_core.events.model_entries import (
    SiblingKeys,
    layer_entry,
    layer_key,
    model_description,
    parameter_entry,
)
from perfkit_core.events.run import Run, is_saved_run
from perfkit_core.events.schema import (
    COLUMNS,
    KINDS,
    SCHEMA_VERSION,
    build_events,
    concat_events,
    empty_events,
)

__all__ = [
    "COLUMNS",
    "INT32_MAX",
    "INT64_MAX",
    "INT64_MIN",
    "KINDS",
    "SCHEMA_VERSION",
    "TIME_LIMIT_NS",
    "InflateLimit",
    "Run",
    "SiblingKeys",
    "TraceError",
    "address_column",
    "atomic_path",
    "build_events",
    "check_int_range",
    "check_times_us",
    "check_values_range",
    "combine_runs",
    "concat_events",
    "decode_error_reason",
    "devices_from_properties",
    "empty_events",
    "finish_events",
    "inflate_limit",
    "is_saved_run",
    "layer_entry",
    "layer_key",
    "load",
    "make_run",
    "model_description",
    "note_skipped",
    "parameter_entry",
    "read_head",
    "read_trace_bytes",
    "start_order",
    "us_to_ns",
    "write_bytes",
]
