"""Real torch CPU profiles for tests, recorded once per session."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TorchProfile:
    """One profiled cycle: the perfkit run folder(s), and torch's own summaries of that cycle."""

    runs: list[Path]
    key_averages: list[Any] = field(default_factory=list)
    key_averages_by_shape: list[Any] = field(default_factory=list)
    trace: Path | None = None


def record(
    directory: Path,
    *,
    steps: int = 4,
    blocks: int = 3,
    profile_memory: bool = False,
    with_stack: bool = False,
) -> TorchProfile:
    """Train a small MLP under torch.profiler with perfkit's handler; capture key_averages of the
    same cycle through a chained handler, and keep the native trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    import perfkit_torch

    captured = TorchProfile(runs=[])

    def capture(prof: Any) -> None:
        captured.key_averages = list(prof.key_averages())
        captured.key_averages_by_shape = list(prof.key_averages(group_by_input_shape=True))

    handler = perfkit_torch.on_trace_ready(
        directory, worker_name="test", chain=[capture], keep_trace=True
    )
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(32, 32), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(
            torch.randn(16 * (steps + 2), 32), torch.randint(0, 4, (16 * (steps + 2),))
        ),
        batch_size=16,
    )
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
        on_trace_ready=handler,
        record_shapes=True,
        profile_memory=profile_memory,
        with_stack=with_stack,
    ) as prof:
        for x, y in data:
            with record_function("model_forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            with record_function("model_backward"):
                loss.backward()
            opt.step()
            prof.step()
    captured.runs = list(handler.runs)
    assert not handler.failures, handler.failures
    if captured.runs:
        captured.trace = captured.runs[0] / "trace.pt.trace.json"
    return captured
