"""Real paddle CPU profiles for tests, with Paddle's own statistics of the same profile."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
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


def slow_loader_run(directory: Path, workers: int, *, name: str = "loader") -> tuple[Path, dict]:
    """A small Paddle CPU loop fed by a Dataset whose samples cost CPU, loaded by
    ``paddle.io.DataLoader(num_workers=workers)`` (0: its loading thread in this process),
    profiled with perfkit's handler over 4 steps and timed by the step timer over those and 8
    steps or more without the profiler (0.2 s of them). Returns (the saved run folder, the step
    timer's record); the timer's wrappers are removed whatever happens."""
    import paddle

    from perfkit_paddle.handler import on_trace_ready

    paddle.set_device("cpu")
    paddle.seed(0)
    model = paddle.nn.Sequential(
        paddle.nn.Linear(16, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 4)
    )
    optimizer = paddle.optimizer.SGD(learning_rate=1e-3, parameters=model.parameters())
    handler = on_trace_ready(directory, worker_name=name, background=False)
    timer = _profile_and_time(_slow_loader_step(model, optimizer, workers), handler)
    return Path(handler.runs[0]), timer.record()


def _slow_loader_step(
    model: Any, optimizer: Any, workers: int, batch_size: int = 8
) -> Callable[[], None]:
    """A training step of ``model`` by ``optimizer`` on the next batch of ``batch_size``
    ``_slow_samples`` from ``paddle.io.DataLoader(num_workers=workers)``."""
    import paddle

    batches = iter(
        paddle.io.DataLoader(_slow_samples(), batch_size=batch_size, num_workers=workers)
    )

    def step() -> None:
        x, y = next(batches)
        paddle.nn.functional.cross_entropy(model(x), y.squeeze(-1)).backward()
        optimizer.step()
        optimizer.clear_grad()

    return step


def loading_thread_ids(run: Any) -> list[int]:
    """The ids of ``run``'s threads that Paddle's DataLoader named for its loading
    (``Dataloader_<id>``), read from the run's thread names: the tests' own reading, apart
    from the adapter's hook."""
    names = run.meta.get("threads") or {}
    return sorted(int(t) for t, name in names.items() if str(name).startswith("Dataloader_"))


def tensor_loader_run(directory: Path) -> Path:
    """A small Paddle CPU MLP fed batches of 16 rows from a ``paddle.io.TensorDataset`` by
    the single-process DataLoader, whose loading thread (Paddle's ``Dataloader_`` thread)
    slices the tensors per sample: framework ops of the loading, recorded on that thread.
    Profiled with perfkit's handler and timed as ``slow_loader_run``; returns the saved run
    folder."""
    import paddle

    from perfkit_paddle.handler import on_trace_ready

    model = _mlp(2, 16, "LayerNorm")
    optimizer = paddle.optimizer.SGD(learning_rate=1e-3, parameters=model.parameters())
    rows = paddle.io.TensorDataset([paddle.randn([4096, 16]), paddle.randint(0, 4, [4096, 1])])

    class Endless(paddle.io.Sampler):  # type: ignore[misc]
        """The rows in order, over and over: the timed steps may outnumber them."""

        def __iter__(self) -> Any:
            while True:
                yield from range(4096)

        def __len__(self) -> int:
            return 2**62

    sampler = paddle.io.BatchSampler(sampler=Endless(), batch_size=16)
    batches = iter(paddle.io.DataLoader(rows, batch_sampler=sampler, num_workers=0))

    def step() -> None:
        x, y = next(batches)
        paddle.nn.functional.cross_entropy(model(x), y.squeeze(-1)).backward()
        optimizer.step()
        optimizer.clear_grad()

    handler = on_trace_ready(directory, worker_name="tensor-loader", background=False)
    _profile_and_time(step, handler)
    return Path(handler.runs[0])


def adam_beside_loading_thread_run(directory: Path) -> tuple[Path, dict]:
    """Paddle's per-parameter Adam on a narrow MLP (sixteen blocks of Linear(16, 16) and
    LayerNorm, 66 parameters) fed batches of 96 samples of the Dataset of ``slow_loader_run``
    through the single-process DataLoader, whose loading thread runs beside training (about
    10 ms of its CPU a step on a 2-core x86 machine: more than the hand-overs of the step's
    274 ops would cost at the 12 to 27 us an op replays there); profiled with
    perfkit's handler (given the model) and timed by the step timer as ``slow_loader_run``.
    Returns (the saved run folder, the step timer's record)."""
    import paddle

    from perfkit_paddle.handler import on_trace_ready

    model = _mlp(16, 16, "LayerNorm")
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    handler = on_trace_ready(directory, worker_name="adam-loader", background=False, model=model)
    timer = _profile_and_time(_slow_loader_step(model, optimizer, 0, batch_size=96), handler)
    return Path(handler.runs[0]), timer.record()


def _mlp(blocks: int, width: int, norm: str) -> Any:
    """A Paddle CPU MLP of ``blocks`` blocks of Linear(width, width), ``paddle.nn.<norm>`` and
    ReLU, then Linear(width, 4), seeded."""
    import paddle

    paddle.set_device("cpu")
    paddle.seed(0)
    layers: list[Any] = []
    for _ in range(blocks):
        layers += [paddle.nn.Linear(width, width), getattr(paddle.nn, norm)(width), paddle.nn.ReLU()]
    return paddle.nn.Sequential(*layers, paddle.nn.Linear(width, 4))


def _slow_samples() -> Any:
    """A Paddle Dataset whose samples cost CPU in NumPy (sorting and tanh of 128 values, eight
    times), holding the GIL as a Dataset that decodes and augments does."""
    import numpy as np
    import paddle

    class Slow(paddle.io.Dataset):
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            x = np.random.default_rng(index).standard_normal(128)
            for _ in range(8):
                x = np.sort(np.tanh(x * 1.01 + 0.1))
            return x[:16].astype("float32"), np.array([index % 4], dtype="int64")

    return Slow()


def _profile_and_time(step: Any, handler: Any) -> Any:
    """Run ``step`` under paddle.profiler with ``handler`` (two steps unrecorded, four
    recorded) and then without it, all timed by a step timer saved into the handler's runs
    (``timed_profiles.profile_and_time``); return the timer."""
    import paddle.profiler as profiler
    from timed_profiles import profile_and_time

    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 6), on_trace_ready=handler
    )
    return profile_and_time(prof, step, handler)


def adam_run(directory: Path, *, describe: bool = True) -> tuple[Path, Any]:
    """A small Paddle CPU MLP (Linear, BatchNorm1D, whose running statistics are parameters
    training does not update, and ReLU, four blocks 32 wide) trained by Paddle's per-parameter
    Adam on batches in hand, profiled with perfkit's handler over 4 steps (given the model when
    ``describe``) and timed by the step timer over those and 8 steps or more without the
    profiler (0.2 s of them). Returns (the saved run folder, the model)."""
    import paddle

    from perfkit_paddle.handler import on_trace_ready

    model = _mlp(4, 32, "BatchNorm1D")
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    x = paddle.randn([16, 32])
    y = paddle.randint(0, 4, [16])

    def step() -> None:
        paddle.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.clear_grad()

    handler = on_trace_ready(
        directory, worker_name="adam", background=False, model=model if describe else None
    )
    _profile_and_time(step, handler)
    return Path(handler.runs[0]), model
