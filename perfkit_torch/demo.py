"""A small training loop profiled with ``torch.profiler`` and perfkit's handler (``perfkit demo``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def train_mlp(
    directory: Path,
    *,
    steps: int = 20,
    chain: Sequence[Callable[[Any], Any]] = (),
    keep_trace: bool = False,
    background: bool = True,
    blocks: int = 4,
    width: int = 64,
    batch_size: int = 32,
    record_shapes: bool = True,
    profile_memory: bool = False,
    with_stack: bool = False,
    seed: int = 0,
    timed_steps: int = 0,
) -> tuple[list[Path], Any]:
    """Train a ``blocks``-block MLP (Linear, LayerNorm, ReLU) with Adam for ``steps`` profiled
    steps on the CPU (after one wait and one warm-up step), saving one perfkit run under
    ``directory``. ``chain`` and ``keep_trace`` go to the handler. Returns (run folders,
    handler).

    With ``timed_steps``, that many more steps run before the profiled ones, without the
    profiler, and ``perfkit_core.step_timer`` times every step and saves their times into the
    run: its advice then states savings against the step without the profiler's cost. (They
    run first so that the handler's work on the saved trace, which runs in the background,
    slows none of them.)

    The loop is ``perfkit_paddle.demo.train_mlp``'s, line for line, so that the demo's
    comparison compares like with like: the same model, the same data (drawn with numpy from
    ``seed``) through a ``DataLoader`` of batches in order, no worker processes, the same
    annotated spans (``forward_and_loss``, ``backward``), the optimizer's step then its
    gradients cleared, and one CPU thread, as Paddle's CPU kernels use (torch's own thread
    count is restored afterwards). The handler records the layers.
    """
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    import perfkit_core
    from perfkit_torch.handler import on_trace_ready

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    layers: list[torch.nn.Module] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = steps + 2 + timed_steps
    rng = np.random.default_rng(seed)
    inputs = rng.standard_normal((total * batch_size, width)).astype("float32")
    labels = rng.integers(0, 10, (total * batch_size,)).astype("int64")
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(inputs), torch.from_numpy(labels))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False)
    handler = on_trace_ready(
        directory,
        worker_name="torch_mlp",
        chain=chain,
        keep_trace=keep_trace,
        background=background,
    )
    try:
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1 + timed_steps, warmup=1, active=steps, repeat=1),
            on_trace_ready=handler,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
        ) as prof:
            timer = perfkit_core.step_timer(prof) if timed_steps else None
            for x, y in loader:
                with timer.step() if timer else contextlib.nullcontext():
                    with record_function("forward_and_loss"):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                    with record_function("backward"):
                        loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                prof.step()
        if timer:
            handler.wait()
            timer.save(handler.runs)
    finally:
        torch.set_num_threads(threads)
    return handler.runs, handler
