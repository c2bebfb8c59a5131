"""A small training loop profiled with ``paddle.profiler`` and perfkit's handler (``perfkit demo``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any


def batches_then_profile(
    loader: Iterable[Any], prof: Any, unprofiled: int, num_samples: int
) -> Iterator[Any]:
    """Each batch of ``loader``, with ``prof`` (a ``paddle.profiler.Profiler``) started after the
    first ``unprofiled`` of them and stepped (``prof.step(num_samples=...)``) after each later
    one: a started Profiler slows even the steps its scheduler keeps closed, so the steps meant
    to run without the profiler run before ``prof.start()``. The profiler numbers its steps
    from its start."""
    for index, batch in enumerate(loader):
        if index == unprofiled:
            prof.start()
        yield batch
        if index >= unprofiled:
            prof.step(num_samples=num_samples)


def train_mlp(
    directory: Path,
    *,
    steps: int = 20,
    chain: Sequence[Callable[[Any], Any]] = (),
    keep_trace: bool = False,
    blocks: int = 4,
    width: int = 64,
    batch_size: int = 32,
    record_shapes: bool = True,
    profile_memory: bool = False,
    seed: int = 0,
    background: bool = True,
    timed_steps: int = 0,
) -> tuple[list[Path], Any]:
    """Train a ``blocks``-block MLP (Linear, LayerNorm, ReLU) with Adam for ``steps`` profiled
    steps on the CPU (after two unprofiled ones), reading batches from a ``paddle.io.DataLoader``,
    saving one perfkit run under ``directory`` (``background`` is the handler's option).
    Returns (run folders, handler).

    With ``timed_steps``, that many more steps (after the step timer's two warm-up steps) run
    before the profiler starts, and ``perfkit_core.step_timer`` times every step and saves their
    times into the run: its advice then states savings against the step without the
    profiler's cost. (They run first so that the handler's work on the saved trace, which
    runs in the background, slows none of them, and before ``prof.start()`` because a started
    Profiler slows the steps its scheduler keeps closed too; its steps are then numbered from
    its start.)

    The loop is ``perfkit_torch.demo.train_mlp``'s, line for line: the same model, data (drawn
    with numpy from ``seed``), batches in order without worker processes (Paddle's loader
    still prefetches them on a thread of its own), annotated spans (``forward_and_loss``,
    ``backward``) and optimizer order, so that the demo's comparison compares like with like.
    """
    import numpy as np
    import paddle
    import paddle.profiler as profiler

    import perfkit_core
    from perfkit_paddle.handler import on_trace_ready

    paddle.seed(seed)
    paddle.set_device("cpu")
    layers: list[paddle.nn.Layer] = []
    for _ in range(blocks):
        layers += [paddle.nn.Linear(width, width), paddle.nn.LayerNorm(width), paddle.nn.ReLU()]
    model = paddle.nn.Sequential(*layers, paddle.nn.Linear(width, 10))
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    # the step timer's warm-up and the unprofiled steps, then the profiler's two closed steps
    # and its recorded ones
    before = timed_steps + 2 if timed_steps else 0
    total = before + 2 + steps
    rng = np.random.default_rng(seed)
    inputs = rng.standard_normal((total * batch_size, width)).astype("float32")
    labels = rng.integers(0, 10, (total * batch_size,)).astype("int64")
    dataset = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
    loader = paddle.io.DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0)
    handler = on_trace_ready(
        directory,
        worker_name="paddle_mlp",
        chain=chain,
        keep_trace=keep_trace,
        background=background,
        model=model,  # its parameters: the layers view's, and the optimizer replay's shapes
    )
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU],
        scheduler=(2, 2 + steps),
        on_trace_ready=handler,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
    )
    timer = perfkit_core.step_timer(prof) if timed_steps else None
    for x, y in batches_then_profile(loader, prof, before, batch_size):
        with timer.step() if timer else contextlib.nullcontext():
            with profiler.RecordEvent("forward_and_loss"):
                loss = paddle.nn.functional.cross_entropy(model(x), y)
            with profiler.RecordEvent("backward"):
                loss.backward()
            optimizer.step()
            optimizer.clear_grad()
    # Paddle prints its own "Perf Summary" when the profiler stops; perfkit's report replaces it.
    with contextlib.redirect_stdout(io.StringIO()):
        prof.stop()
    if timer:
        handler.wait()
        timer.save(handler.runs)
    return handler.runs, handler
