"""What every MindSpore layout shares on its way to a run: checks against MindSpore's own
tables, input shapes, steps (recorded by perfkit or found from the repeating operators), the
user spans perfkit recorded, and the finished table and metadata."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfkit_core import TraceError
from perfkit_core.events import finish_events, make_run, note_skipped
from perfkit_mindspore.layout import ASCEND_MS_RE, Layout
from perfkit_mindspore.rows import Rows
from perfkit_mindspore.spans import Spans
from perfkit_mindspore.steps import infer_step_count, period_spans
from perfkit_mindspore.tables import TypeRow, read_shapes

FRAMEWORK = "mindspore"
#: Name of the step spans perfkit adds (MindSpore's own name for them, on Ascend).
STEP_NAME = "ProfilerStep#{}"


def check_types(path: Path, table: dict[str, TypeRow], counted: Counter[str], source: str) -> None:
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


def host_ops(rows: Rows) -> list[int]:
    """The host operator rows, in time order."""
    cols = rows.columns
    found = [r for r in range(len(rows)) if cols["kind"][r] == "operator" and cols["stream"][r] < 0]
    return sorted(found, key=lambda r: (cols["start_ns"][r], -cols["dur_ns"][r]))


def add_shapes(rows: Rows, ops: list[int], path: Path) -> int:
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


def find_steps(
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


def add_steps_and_spans(
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


def recorded_steps(rows: Rows) -> list[tuple[int, int, int]]:
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


def finish(
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
