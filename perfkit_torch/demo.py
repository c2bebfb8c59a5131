"""A small training loop profiled with ``torch.profiler`` and perfkit's handler (``perfkit demo``)."""

from __future__ import annotations

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
) -> tuple[list[Path], Any]:
    """Train a ``blocks``-block MLP for ``steps`` profiled steps on the CPU (after one wait and
    one warm-up step), saving one perfkit run under ``directory``. ``chain`` and ``keep_trace``
    go to the handler. Returns (run folders, handler).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from perfkit_torch.handler import on_trace_ready

    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = steps + 2
    data = torch.utils.data.TensorDataset(
        torch.randn(total * batch_size, width), torch.randint(0, 10, (total * batch_size,))
    )
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
    handler = on_trace_ready(
        directory,
        worker_name="torch_mlp",
        chain=chain,
        keep_trace=keep_trace,
        background=background,
    )
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
        on_trace_ready=handler,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
    ) as prof:
        for x, y in loader:
            with record_function("forward_and_loss"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            with record_function("backward"):
                loss.backward()
            optimizer.step()
            prof.step()
    return handler.runs, handler
