"""What an Ascend profile adds to the CPU layout: device tasks and the links to the operators
that launched them.

MindSpore's Ascend output (``ASCEND_PROFILER_OUTPUT/``) holds, beside ``trace_view.json``:

- ``kernel_details.csv``: one row per task a device stream ran: ``Name``, ``Type``,
  ``Accelerator Core``, ``Start Time(us)``, ``Duration(us)``, ``Stream ID`` (and ``Step ID``
  with a schedule, ``Input Shapes`` at profiler level 1 and above);
- ``op_statistic.csv``: per ``OP Type``: ``Count``, ``Total Time(us)``, ...;
- ``step_trace_time.csv``: per ``Step``: computing, communication and free time (us).

The device tasks come from the timeline's ``Ascend Hardware`` layer when it has them, else
from ``kernel_details.csv``; a task is tied to its operator by the timeline's ``async_npu``
flows. ``op_statistic.csv`` must count the same tasks per type as ``kernel_details.csv``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from perfkit_core import TraceError
from perfkit_mindspore.layout import Layout
from perfkit_mindspore.rows import Rows
from perfkit_mindspore.tables import count, read_csv
from perfkit_mindspore.trace_view import us_text_to_ns

#: Columns of ``kernel_details.csv`` perfkit reads.
KERNEL_COLUMNS = ("Name", "Type", "Start Time(us)", "Duration(us)")
#: Columns of ``op_statistic.csv`` perfkit reads.
STATISTIC_COLUMNS = ("OP Type", "Count")
#: Name of the zero-length runtime rows that tie a device task to the operator that launched it.
LAUNCH_NAME = "launch"


def add_launches(rows: Rows, pairs: list[tuple[int, int]]) -> None:
    """Tie each device row to the host operator row that launched it (``pairs`` of (host row,
    device row)): a zero-length ``runtime`` row at the operator's start, on its thread, shares a
    ``correlation`` with the device row, as a launch call does in torch's traces."""
    cols = rows.columns
    for host, device in pairs:
        correlation = len(rows)
        cols["correlation"][device] = correlation
        rows.add(
            kind="runtime",
            name=LAUNCH_NAME,
            category="async_npu",
            start_ns=cols["start_ns"][host],
            dur_ns=0,
            pid=cols["pid"][host],
            tid=cols["tid"][host],
            correlation=correlation,
        )


def _kernel_time(path: Path, line: int, column: str, text: str) -> int:
    value = us_text_to_ns(text.strip().rstrip("\t"))
    if value is None:
        raise TraceError(path, f"line {line}: {column} {text!r} is not a number")
    return value


def add_kernel_details(rows: Rows, layout: Layout) -> None:
    """Add the device tasks of ``kernel_details.csv`` when the timeline had none, and check
    ``op_statistic.csv`` against them."""
    path = layout.get("kernel_details")
    if path is None:
        return
    table = read_csv(path, KERNEL_COLUMNS)
    types = Counter(row["Type"] for row in table)
    statistic = layout.get("op_statistic")
    if statistic is not None:
        counted: Counter[str] = Counter()
        for line, row in enumerate(read_csv(statistic, STATISTIC_COLUMNS), start=2):
            counted[row["OP Type"]] += count(statistic, line, "Count", row["Count"])
        if counted != types:
            diff = sorted(set(counted.items()) ^ set(types.items()))[:3]
            raise TraceError(
                statistic,
                f"disagrees with kernel_details.csv on the tasks per type (for example {diff})",
            )
    if any(s >= 0 for s in rows.columns["stream"]):
        return  # the timeline's Ascend Hardware layer holds the same tasks
    for line, row in enumerate(table, start=2):
        start = _kernel_time(path, line, "Start Time(us)", row["Start Time(us)"])
        dur = _kernel_time(path, line, "Duration(us)", row["Duration(us)"])
        stream_text = row.get("Stream ID", "").strip() or "0"
        stream = count(path, line, "Stream ID", stream_text)
        kind = "communication" if row["Type"].lower().startswith(("hcom", "hccl")) else "kernel"
        rows.add(
            kind=kind,
            name=row["Name"],
            category=row.get("Accelerator Core", "") or "kernel_details",
            start_ns=start,
            dur_ns=max(dur, 0),
            device_type="npu",
            device_index=layout.device,
            stream=stream,
            input_shapes=_shapes(row.get("Input Shapes", "")),
        )


def _shapes(text: str) -> str:
    """kernel_details' ``Input Shapes`` (``"32,64;64"``) as ``[[32, 64], [64]]``."""
    text = text.strip().strip('"')
    if not text:
        return ""
    parts = [p.strip() for p in text.split(";")]
    return (
        "["
        + ", ".join(
            "[" + ", ".join(x.strip() for x in p.split(",") if x.strip()) + "]" for p in parts
        )
        + "]"
    )
