"""Real torch CPU profiles for tests, recorded with the demo's training loop."""

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


def record(directory: Path, *, steps: int = 4, blocks: int = 3, **options: Any) -> TorchProfile:
    """Train the demo MLP under torch.profiler with perfkit's handler; capture key_averages of
    the same cycle through a chained handler, and keep the native trace."""
    from perfkit_torch.demo import train_mlp

    captured = TorchProfile(runs=[])

    def capture(prof: Any) -> None:
        captured.key_averages = list(prof.key_averages())
        captured.key_averages_by_shape = list(prof.key_averages(group_by_input_shape=True))

    runs, handler = train_mlp(
        directory,
        steps=steps,
        blocks=blocks,
        width=32,
        batch_size=16,
        chain=[capture],
        keep_trace=True,
        **options,
    )
    assert not handler.failures, handler.failures
    captured.runs = list(runs)
    if captured.runs:
        captured.trace = captured.runs[0] / "trace.pt.trace.json"
    return captured
