"""A profile of MindSpore's GPU profiler (its flat folder, ``<output_path>/profiler/``) as a
perfkit run.

MindSpore's GPU data saver writes, per device ``<dev>`` (layouts from its sources,
``gpu_data_saver.cc`` and ``data_saver.h``, and the timeline generator that reads them):

- ``gpu_op_execute_timestamp_<dev>.txt``: per operator, ``full name;stream;start,duration ...``
  (start in ns on the GPU's clock, duration in us);
- ``cpu_op_execute_timestamp_<dev>.txt``: the host operators, durations in ms, starts on the
  host's monotonic clock, which ``start_time_<dev>.txt`` relates to the GPU's;
- ``activity_execute_timestamp_<dev>.txt``: per CUDA kernel launch,
  ``kernel name;stream;start (ns);duration (us)``;
- ``gpu_activity_data_<dev>.csv``: per kernel name, the operator that launched it
  (``op_full_name``), its stream, calls and times;
- ``gpu_op_type_info_<dev>.csv`` and ``gpu_op_detail_info_<dev>.csv``: MindSpore's per-type and
  per-operator tables (times in us), checked against the calls;
- ``gpu_framework_<dev>.txt``: input shapes per call; ``step_trace_profiling_<dev>.txt``: each
  step's first and last operator times.

Each kernel launch is tied to the latest call of its launching operator that started before it.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from perfkit_core import TraceError
from perfkit_mindspore.ascend import add_launches
from perfkit_mindspore.assemble import (
    add_shapes,
    add_steps_and_spans,
    check_types,
    find_steps,
    finish,
    host_ops,
)
from perfkit_mindspore.cells import add_all_scope_spans
from perfkit_mindspore.layout import Layout
from perfkit_mindspore.rows import Rows, add_calls
from perfkit_mindspore.spans import read_spans
from perfkit_mindspore.tables import (
    ACTIVITY_COLUMNS,
    read_csv,
    read_kernel_timestamps,
    read_start_time,
    read_text,
    read_timestamps,
    read_type_table,
)


def _step_trace(path: Path) -> list[tuple[int, int, int]]:
    """Step spans ``(number from 1, start, end)`` in ns from ``step_trace_profiling_<dev>.txt``:
    either one line per step, ``iter_start,ts fp_start,ts bp_end,ts iter_end,ts_end ...`` (ns),
    or one line per marker operator (forward start, backward end, iteration end),
    ``name start,end start,end ...`` in units of 10 ns."""
    lines = [t.split() for t in read_text(path).splitlines() if t.strip()]
    if not lines:
        return []
    out: list[tuple[int, int, int]] = []
    try:
        if "," in lines[0][0]:
            for i, fields in enumerate(lines, start=1):
                start = int(fields[0].rsplit(",", 1)[1])
                end = int(fields[3].rsplit(",", 1)[1])
                out.append((i, start, end))
            return out
        if len(lines) < 3:
            raise ValueError
        fp = [int(x.split(",")[0]) * 10 for x in lines[0][1:]]
        iter_end = [int(x.split(",")[1]) * 10 for x in lines[2][1:]]
        return [(i + 1, a, b) for i, (a, b) in enumerate(zip(fp, iter_end, strict=False))]
    except (ValueError, IndexError):
        raise TraceError(path, "is not a MindSpore step trace (op,start ... per line)") from None


def load_gpu_profile(layout: Layout) -> Any:
    """The run of MindSpore's GPU profiler folder ``layout`` (see the module docstring)."""
    rows = Rows()
    ops_path = layout.get("gpu_op_execute_timestamp")
    if ops_path is None:
        raise TraceError(layout.root, "has no gpu_op_execute_timestamp_<dev>.txt: nothing to read")
    n = add_calls(rows, read_timestamps(ops_path, 1e3), category="GPU op", tid=0)
    host_path = layout.get("cpu_op_execute_timestamp")
    if host_path is not None:
        start_path = layout.get("start_time")
        offset = read_start_time(start_path) if start_path is not None else 0
        host = read_timestamps(host_path, 1e6)
        tids = [1 + max(t, 0) for t in host.tid]
        add_calls(rows, host, category="HostCpuOps", tid=tids, offset_ns=offset)
    type_path = layout.get("gpu_op_type_info")
    table = read_type_table(type_path, gpu=True) if type_path is not None else None
    if table is not None:
        counted = Counter(rows.columns["name"][:n])
        check_types(type_path, table, counted, ops_path.name)  # type: ignore[arg-type]
    _add_kernels(rows, layout, n)
    ops = host_ops(rows)
    skipped: dict[str, int] = {}
    shapes_path = layout.get("gpu_framework")
    if shapes_path is not None:
        gpu_rows = [r for r in ops if r < n]
        unmatched = add_shapes(rows, gpu_rows, shapes_path)
        if unmatched:
            skipped["input shapes that do not line up with the calls (left empty)"] = unmatched
    spans_path = layout.get("perfkit_spans")
    spans = read_spans(spans_path) if spans_path is not None else None
    trace_path = layout.get("step_trace_profiling")
    steps = _step_trace(trace_path) if trace_path is not None else []
    if steps:
        steps_from = "step_trace_profiling"
    else:
        steps, steps_from = find_steps(rows, [r for r in ops if r < n], spans)
    add_steps_and_spans(rows, [r for r in ops if r < n], steps, spans)
    add_all_scope_spans(rows, ops, steps)
    for r in range(len(rows)):
        if rows.columns["stream"][r] >= 0:
            rows.columns["device_type"][r] = "gpu"
            rows.columns["device_index"][r] = layout.device
    run = finish(rows, layout, ops_path, {"events_in_file": len(rows)}, skipped, steps_from)
    run.meta["devices"] = [{"type": "gpu", "index": layout.device, "name": f"GPU {layout.device}"}]
    return run


def _add_kernels(rows: Rows, layout: Layout, n_ops: int) -> None:
    """Add the kernel launches and tie each to the latest earlier call of its operator."""
    path = layout.get("activity_execute_timestamp")
    if path is None:
        return
    kernels = read_kernel_timestamps(path)
    launcher: dict[str, str] = {}
    activity = layout.get("gpu_activity_data")
    if activity is not None:
        for row in read_csv(activity, ACTIVITY_COLUMNS):
            launcher[row["name"]] = row["op_full_name"]
    cols = rows.columns
    calls: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in range(n_ops):
        calls[cols["full_name"][r]].append((cols["start_ns"][r], r))
    for starts in calls.values():
        starts.sort()
    pairs = []
    for i, name in enumerate(kernels.names):
        device = rows.add(
            kind="communication" if name.startswith("nccl") else "kernel",
            name=name,
            category="CUDA kernel",
            start_ns=kernels.start_ns[i],
            dur_ns=kernels.dur_ns[i],
            stream=max(kernels.tid[i], 0),
        )
        op_calls = calls.get(launcher.get(name, ""))
        if op_calls:
            at = bisect.bisect_right(op_calls, (kernels.start_ns[i], len(rows))) - 1
            if at >= 0:
                pairs.append((op_calls[at][1], device))
    add_launches(rows, pairs)
