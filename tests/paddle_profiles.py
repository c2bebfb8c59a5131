"""Real paddle CPU profiles for tests, with Paddle's own statistics of the same profile."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class PaddleProfile:
    """One profiled span: the perfkit run folder, Paddle's StatisticData, printed summary and
    per-name Operator counts/totals read straight from Paddle's result tree."""

    runs: list[Path]
    statistic: Any = None
    summary_text: str = ""
    tree_ops: dict[str, tuple[int, int]] = field(default_factory=dict)
    tree_parents: dict[tuple[int, int, int, str], str | None] = field(default_factory=dict)
    #: Paddle's merged CPU time and call count per TracerEventType name (TimeRangeSummary).
    cpu_range_sums: dict[str, int] = field(default_factory=dict)
    call_times: dict[str, int] = field(default_factory=dict)
    handler: Any = None
    #: Paddle's own exports of the last span, written by a chained handler: its chrome-tracing
    #: JSON and its protobuf file (the handler's native export, removed once converted).
    json_export: Path | None = None
    pb_export: Path | None = None


def record(
    directory: Path,
    *,
    steps: int = 4,
    blocks: int = 3,
    chain: tuple[Any, ...] | list[Any] = (),
    **options: Any,
) -> PaddleProfile:
    """Train the demo MLP under paddle.profiler with perfkit's handler, capturing Paddle's own
    view of the same profile through a chained handler."""
    from paddle.profiler.profiler_statistic import StatisticData

    from perfkit_paddle.demo import train_mlp

    captured = PaddleProfile(runs=[])
    exports = directory.with_name(directory.name + "_exports")
    exports.mkdir(parents=True, exist_ok=True)

    def capture(prof: Any) -> None:
        result = prof.profiler_result
        captured.json_export = exports / "span.paddle_trace.json"
        captured.pb_export = exports / "span.paddle_trace.pb"
        result.save(str(captured.json_export), "json")
        result.save(str(captured.pb_export), "pb")
        trees = result.get_data()
        captured.statistic = StatisticData(trees, result.get_extra_info())
        # Paddle's enum objects point into the profile, which is freed after this callback:
        # keep plain names and numbers only.
        ranges = captured.statistic.time_range_summary
        captured.cpu_range_sums = {
            key.name: int(value) for key, value in ranges.CPUTimeRangeSum.items()
        }
        captured.call_times = {key.name: int(value) for key, value in ranges.call_times.items()}
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            prof.summary(time_unit="us", op_detail=True)
        captured.summary_text = buffer.getvalue()
        ops: dict[str, list[int]] = {}
        for root in trees.values():
            stack = [(child, None) for child in root.children_node]
            while stack:
                node, parent = stack.pop()
                if node.type.name == "Operator":
                    entry = ops.setdefault(node.name, [0, 0])
                    entry[0] += 1
                    entry[1] += node.end_ns - node.start_ns
                captured.tree_parents[(node.thread_id, node.start_ns, node.end_ns, node.name)] = (
                    parent
                )
                stack.extend((child, node.name) for child in node.children_node)
        captured.tree_ops = {k: (v[0], v[1]) for k, v in ops.items()}

    runs, handler = train_mlp(
        directory,
        steps=steps,
        blocks=blocks,
        width=32,
        batch_size=16,
        chain=[capture, *chain],
        **options,
    )
    captured.runs = list(runs)
    captured.handler = handler
    assert not handler.failures, handler.failures
    return captured
