"""A MindSpore profile folder (CPU or Ascend: ``<host>_<pid>_<time>_ascend_ms/``) as a perfkit
run.

The events come from ``ASCEND_PROFILER_OUTPUT/trace_view.json`` (or, when MindSpore's analysis
did not write it, from ``FRAMEWORK/cpu_op_execute_timestamp_<dev>.txt``); on Ascend, device
tasks from ``kernel_details.csv`` where the timeline has none. Operator rows are named by type
(``MatMul``) with the full name in ``full_name``; input shapes come from
``cpu_framework_<dev>.txt``; steps from ``perfkit_spans.json`` or the repeating sequence of
operators (``perfkit_mindspore.steps``); layer, backward and optimizer spans from the scopes
(``perfkit_mindspore.cells``). MindSpore's own per-type table, ``cpu_op_type_info_<dev>.csv``,
must agree with the events (the same types, the same calls): a folder where they disagree is
refused, naming the table.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from perfkit_core import TraceError
from perfkit_mindspore import ascend
from perfkit_mindspore.assemble import (
    add_shapes,
    add_steps_and_spans,
    check_types,
    find_steps,
    finish,
    host_ops,
    recorded_steps,
)
from perfkit_mindspore.cells import add_all_scope_spans
from perfkit_mindspore.layout import Layout
from perfkit_mindspore.rows import Rows, add_calls
from perfkit_mindspore.scopes import op_type
from perfkit_mindspore.spans import read_spans
from perfkit_mindspore.tables import read_timestamps, read_type_table
from perfkit_mindspore.trace_view import read_trace_view

#: Layers of the timeline recorded in the training process itself: their events take its pid
#: (the trace numbers its layers 0, 1, 2, ... instead). Derived layers keep the trace's number.
PROCESS_LAYERS = frozenset({"CPU OP", "MindSpore", "CANN", "python", "python3"})


def _pid(layer: str, trace_pid: int, pid: int | None) -> int:
    return pid if pid is not None and layer in PROCESS_LAYERS else trace_pid


def _operators_from_trace(rows: Rows, layout: Layout, trace: Path) -> dict[str, Any]:
    """Add the events of ``trace_view.json`` to ``rows``; return accounting facts."""
    timeline = read_trace_view(trace)
    pid = layout.pid
    first = len(rows)
    for i in range(len(timeline.name)):
        kind = timeline.kind[i]
        name = timeline.name[i]
        device = timeline.device[i]
        operator = kind == "operator"
        rows.add(
            kind=kind,
            name=op_type(name) if operator else name,
            full_name=name if operator else "",
            category=timeline.category[i],
            start_ns=timeline.start_ns[i],
            dur_ns=timeline.dur_ns[i],
            device_type="npu" if device else "cpu",
            device_index=layout.device if device else -1,
            pid=-1 if device else _pid(timeline.layer[i], timeline.pid[i], pid),
            tid=-1 if device else timeline.tid[i],
            stream=max(timeline.tid[i], 0) if device else -1,
            step=timeline.step[i],
        )
    ascend.add_launches(rows, [(first + a, first + b) for a, b in timeline.launches])
    return {
        "events_in_file": len(timeline.name) + timeline.metadata,
        "metadata": timeline.metadata,
        "skipped": dict(timeline.skipped),
    }


def _operators_from_timestamps(rows: Rows, layout: Layout, path: Path) -> dict[str, Any]:
    """Add the calls of ``cpu_op_execute_timestamp_<dev>.txt`` (durations in ms) to ``rows``."""
    calls = read_timestamps(path, 1e6)
    tids = [max(t, 0) for t in calls.tid]
    pid = layout.pid if layout.pid is not None else -1
    n = add_calls(rows, calls, category="HostCpuOps", tid=tids, pid=pid)
    return {"events_in_file": n}


def load_profile(layout: Layout) -> Any:
    """The run of the ``ascend_ms`` profile ``layout`` (see the module docstring)."""
    rows = Rows()
    trace = layout.get("trace_view")
    timestamps = layout.get("cpu_op_execute_timestamp")
    kernels = layout.get("kernel_details")
    source: Path
    if trace is not None:
        accounting = _operators_from_trace(rows, layout, trace)
        source = trace
    elif timestamps is not None:
        accounting = _operators_from_timestamps(rows, layout, timestamps)
        source = timestamps
    elif kernels is not None:
        accounting = {}
        source = kernels
    else:
        raise TraceError(
            layout.root,
            "a MindSpore profile folder without ASCEND_PROFILER_OUTPUT/trace_view.json or "
            "FRAMEWORK/cpu_op_execute_timestamp_*.txt: nothing to read (was the profiler "
            "stopped and analyse() run?)",
        )
    ascend.add_kernel_details(rows, layout)
    ops = host_ops(rows)
    type_path = layout.get("cpu_op_type_info")
    table = read_type_table(type_path) if type_path is not None else None
    if table is not None:
        cpu_ops = [r for r in ops if rows.columns["category"][r] == "HostCpuOps"] or ops
        counted = Counter(rows.columns["name"][r] for r in cpu_ops)
        check_types(type_path, table, counted, source.name)  # type: ignore[arg-type]
    skipped = dict(accounting.get("skipped", {}))
    shapes_path = layout.get("cpu_framework")
    if shapes_path is not None:
        unmatched = add_shapes(rows, ops, shapes_path)
        if unmatched:
            skipped["input shapes that do not line up with the calls (left empty)"] = unmatched
    spans_path = layout.get("perfkit_spans")
    spans = read_spans(spans_path) if spans_path is not None else None
    steps = recorded_steps(rows)
    if steps:
        steps_from = "the profiler's ProfilerStep spans"
        add_steps_and_spans(rows, ops, [], spans)
    else:
        steps, steps_from = find_steps(rows, ops, spans)
        add_steps_and_spans(rows, ops, steps, spans)
    add_all_scope_spans(rows, ops, steps)
    return finish(rows, layout, source, accounting, skipped, steps_from)
