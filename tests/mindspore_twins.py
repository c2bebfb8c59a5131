"""The torch twins of the MindSpore models in tests/data/mindspore (the same layers, widths and
batches), profiled with perfkit's torch handler and ``perfkit_torch.record_modules``, so that a
torch run and a MindSpore run of one model can be compared layer by layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _profile(model: Any, loss_fn: Any, optimizer: Any, batches: list[Any], directory: Path) -> Path:
    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_torch

    handler = perfkit_torch.on_trace_ready(directory, worker_name="torch", background=False)
    with (
        perfkit_torch.record_modules(model, loss_fn),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=len(batches) - 2, repeat=1),
            on_trace_ready=handler,
        ) as prof,
    ):
        for x, y in batches:
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            prof.step()
    (run_dir,) = handler.runs
    return run_dir


def torch_mlp(directory: Path, *, steps: int = 3, blocks: int = 2, width: int = 64) -> Path:
    """The MLP of ``perfkit_mindspore.demo`` in torch (Linear, LayerNorm, ReLU blocks and a
    Linear head; cross-entropy; Adam), ``steps`` profiled steps; returns the saved run."""
    import torch

    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    batches = [(torch.randn(32, width), torch.randint(0, 10, (32,))) for _ in range(steps + 2)]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return _profile(model, torch.nn.CrossEntropyLoss(), optimizer, batches, directory)


def torch_cnn(directory: Path, *, steps: int = 3) -> Path:
    """The CNN of tests/data/mindspore/graph_cnn in torch (Conv2d 3-8 'same', ReLU, MaxPool2d,
    Flatten, Linear 512-10; cross-entropy; SGD with momentum); returns the saved run."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2, 2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 8 * 8, 10),
    )
    batches = [(torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))) for _ in range(steps + 2)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _profile(model, torch.nn.CrossEntropyLoss(), optimizer, batches, directory)
