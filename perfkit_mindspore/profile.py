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

import pandas as pd

from perfkit_core import TraceError
from perfkit_core.events import finish_events, make_run, note_skipped
from perfkit_mindspore import ascend
from perfkit_mindspore.cells import add_all_scope_spans
from perfkit_mindspore.layout import ASCEND_MS_RE, Layout, find_layout
from perfkit_mindspore.rows import Rows
from perfkit_mindspore.scopes import op_type
from perfkit_mindspore.spans import Spans, read_spans
from perfkit_mindspore.steps import infer_step_count, period_spans
from perfkit_mindspore.tables import TypeRow, read_shapes, read_timestamps, read_type_table
from perfkit_mindspore.trace_view import read_trace_view

FRAMEWORK = "mindspore"
#: Name of the step spans perfkit adds (MindSpore's own name for them, on Ascend).
STEP_NAME = "ProfilerStep#{}"


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
    n = len(calls.names)
    rows.extend(
        n,
        kind="operator",
        name=[op_type(x) for x in calls.names],
        full_name=list(calls.names),
        category="HostCpuOps",
        start_ns=list(calls.start_ns),
        dur_ns=list(calls.dur_ns),
        pid=layout.pid if layout.pid is not None else -1,
        tid=[max(t, 0) for t in calls.tid],
    )
    return {"events_in_file": n}


def _check_types(path: Path, table: dict[str, TypeRow], counted: Counter[str], source: str) -> None:
    """``TraceError`` naming MindSpore's per-type table when it and the events disagree."""
    missing = sorted(set(table) - set(counted))
    extra = sorted(set(counted) - set(table))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"types {', '.join(missing[:5])} are not in {source}")
        if extra:
            parts.append(f"{source} has types {', '.join(extra[:5])} the table lacks")
        raise TraceError(path, f"disagrees with {source}: {'; '.join(parts)}")
    for kind, row in table.items():
        if row.calls != counted[kind]:
            raise TraceError(
                path,
                f"disagrees with {source}: {kind} has {row.calls} calls here and "
                f"{counted[kind]} there",
            )


def _host_ops(rows: Rows) -> list[int]:
    """The host operator rows, in time order."""
    cols = rows.columns
    found = [r for r in range(len(rows)) if cols["kind"][r] == "operator" and cols["stream"][r] < 0]
    return sorted(found, key=lambda r: (cols["start_ns"][r], -cols["dur_ns"][r]))


def _add_shapes(rows: Rows, ops: list[int], path: Path) -> int:
    """Attach the input shapes of ``cpu_framework_<dev>.txt`` (one line per call, in execution
    order) to ``ops``; return how many calls could not be matched (all, when the file and the
    events do not line up type by type)."""
    shapes = read_shapes(path)
    cols = rows.columns
    if len(shapes) != len(ops) or any(
        kind and kind != cols["name"][r] for (kind, _), r in zip(shapes, ops, strict=True)
    ):
        return len(ops)
    for (_, text), r in zip(shapes, ops, strict=True):
        cols["input_shapes"][r] = text
    return 0


def _steps(
    rows: Rows, ops: list[int], spans: Spans | None
) -> tuple[list[tuple[int, int, int]], str]:
    """Step spans ``(number, start, end)`` and where they came from."""
    cols = rows.columns
    if spans is not None and spans.steps and ops:
        first = min(cols["start_ns"][r] for r in ops)
        last = max(cols["start_ns"][r] + cols["dur_ns"][r] for r in ops)
        steps = [
            (n, first if start is None else start, end)
            for n, start, end in spans.steps
            if end > first and (start is None or start < last)
        ]
        if steps:
            return steps, spans.steps_from or "recorded by perfkit"
    names = [cols["full_name"][r] or cols["name"][r] for r in ops]
    wanted = len(spans.step_numbers) if spans is not None and spans.step_numbers else None
    n = infer_step_count(names, wanted)
    if n is None:
        return [], ""
    numbers = spans.step_numbers if spans is not None and wanted else list(range(1, n + 1))
    bounds = period_spans(
        [cols["start_ns"][r] for r in ops],
        [cols["start_ns"][r] + cols["dur_ns"][r] for r in ops],
        n,
    )
    return [(num, a, b) for num, (a, b) in zip(numbers, bounds, strict=True)], (
        "the repeating sequence of operators"
    )


def _add_steps_and_spans(
    rows: Rows, ops: list[int], steps: list[tuple[int, int, int]], spans: Spans | None
) -> None:
    """Step rows on the operators' thread, and the user spans perfkit recorded."""
    cols = rows.columns
    if ops:
        pid = cols["pid"][ops[0]]
        tid = Counter(cols["tid"][r] for r in ops).most_common(1)[0][0]
    else:
        pid, tid = -1, 0
    for number, start, end in steps:
        rows.add(
            kind="step",
            name=STEP_NAME.format(number),
            category="perfkit step",
            start_ns=start,
            dur_ns=max(end - start, 0),
            pid=pid,
            tid=tid,
            step=number,
        )
    if spans is None:
        return
    for name, start, end, thread in spans.spans:
        if steps and (end <= steps[0][1] or start >= max(s[2] for s in steps)):
            continue  # outside the profiled steps
        rows.add(
            kind="user",
            name=name,
            category="perfkit annotate",
            start_ns=start,
            dur_ns=max(end - start, 0),
            pid=pid,
            tid=tid if thread == spans.thread else thread,
        )


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
    ops = _host_ops(rows)
    type_path = layout.get("cpu_op_type_info")
    table = read_type_table(type_path) if type_path is not None else None
    if table is not None:
        cpu_ops = [r for r in ops if rows.columns["category"][r] == "HostCpuOps"] or ops
        counted = Counter(rows.columns["name"][r] for r in cpu_ops)
        _check_types(type_path, table, counted, source.name)  # type: ignore[arg-type]
    skipped = dict(accounting.get("skipped", {}))
    shapes_path = layout.get("cpu_framework")
    if shapes_path is not None:
        unmatched = _add_shapes(rows, ops, shapes_path)
        if unmatched:
            skipped["input shapes that do not line up with the calls (left empty)"] = unmatched
    spans_path = layout.get("perfkit_spans")
    spans = read_spans(spans_path) if spans_path is not None else None
    steps = _recorded_steps(rows)
    if steps:
        steps_from = "the profiler's ProfilerStep spans"
        _add_steps_and_spans(rows, ops, [], spans)
    else:
        steps, steps_from = _steps(rows, ops, spans)
        _add_steps_and_spans(rows, ops, steps, spans)
    add_all_scope_spans(rows, ops, steps)
    return _finish(rows, layout, source, accounting, skipped, steps_from)


def _recorded_steps(rows: Rows) -> list[tuple[int, int, int]]:
    cols = rows.columns
    return [
        (cols["step"][r], cols["start_ns"][r], cols["start_ns"][r] + cols["dur_ns"][r])
        for r in range(len(rows))
        if cols["kind"][r] == "step"
    ]


#: Kinds of the spans perfkit adds around operators: put before them, so that a span and the one
#: operator it holds (same start, same duration) nest span first.
SPAN_KINDS = ("step", "forward", "backward", "optimizer", "user")


def _spans_first(columns: dict[str, Any]) -> dict[str, Any]:
    """``columns`` with the span rows first (row links remapped), the rest in their order."""
    import numpy as np

    kinds = np.asarray(columns["kind"], dtype=object)
    spans = np.isin(kinds, SPAN_KINDS)
    if not spans.any():
        return columns
    order = np.concatenate([np.flatnonzero(spans), np.flatnonzero(~spans)])
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order))
    out: dict[str, Any] = {}
    for name, values in columns.items():
        if isinstance(values, np.ndarray):
            out[name] = values[order]
        else:
            out[name] = [values[i] for i in order.tolist()]
    link = out["forward_op"]
    out["forward_op"] = np.where(link >= 0, inverse[np.maximum(link, 0)], -1)
    return out


def _finish(
    rows: Rows,
    layout: Layout,
    source: Path,
    accounting: dict[str, Any],
    skipped: dict[str, int],
    steps_from: str,
) -> Any:
    n = len(rows)
    columns = _spans_first(rows.arrays())
    for name in ("kind", "name", "full_name", "category", "device_type", "input_shapes"):
        columns[name] = pd.Categorical(columns[name])
    columns["framework"] = pd.Categorical.from_codes([0] * n, [FRAMEWORK]) if n else []
    events = finish_events(columns, n, consume=True)
    m = ASCEND_MS_RE.match(layout.root.name)
    facts = {"rows": n, **{k: v for k, v in accounting.items() if k != "skipped"}}
    devices = sorted({int(d) for d in events.loc[events["stream"] >= 0, "device_index"]})
    meta: dict[str, Any] = {
        "framework": FRAMEWORK,
        "framework_version": None,
        "host": m["worker"] if m else None,
        "devices": [{"type": "npu", "index": d, "name": f"NPU {d}"} for d in devices],
        "rank": 0,
        "rank_recorded": False,
        "world_size": 1,
        "source": str(layout.root),
        "accounting": facts,
        "extra": {
            "layout": layout.kind,
            "read": str(source.relative_to(layout.root))
            if source.is_relative_to(layout.root)
            else str(source),
            "steps_from": steps_from or "none: the profile's operators do not repeat step by step",
            "pid": layout.pid,
        },
    }
    note_skipped(layout.root, meta["accounting"], skipped)
    return make_run(events, meta)


def load_folder(path: str | Path) -> Any:
    """The run of the MindSpore profile at ``path`` (a ``*_ascend_ms`` folder, the folder
    ``tensorboard_trace_handler`` wrote it into, or the GPU profiler's folder); ``TraceError``
    naming the file for bad input."""
    from perfkit_mindspore.gpu import load_gpu_profile

    path = Path(path)
    layout = find_layout(path)
    if layout is None:
        raise TraceError(path, "not a MindSpore profiler folder")
    if layout.kind == "gpu":
        return load_gpu_profile(layout)
    return load_profile(layout)


def load_trace_view(path: str | Path) -> Any:
    """The run of a MindSpore ``trace_view.json``: of its whole profile folder when it sits in
    one (``<profile>/ASCEND_PROFILER_OUTPUT/``), else of the timeline alone."""
    path = Path(path)
    parent = path.parent
    if parent.name == "ASCEND_PROFILER_OUTPUT":
        layout = find_layout(parent.parent)
        if layout is not None and layout.get("trace_view") == path:
            return load_profile(layout)
    return load_profile(Layout("ascend_ms", parent, {"trace_view": path}))
