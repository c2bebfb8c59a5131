"""The torch CPU training run both benchmarks profile (shared by ``bench_load`` and ``bench_handler``).

A 12-block MLP (each block ``Linear(64, 64)`` + ``LayerNorm`` + ``ReLU``, then ``Linear(64, 10)``)
trained with Adam on random data from a ``DataLoader`` (batch 64), profiled with
``record_shapes=True`` under ``schedule(wait=1, warmup=1, active=steps, repeat=cycles)``, so each
profiled cycle holds ``steps`` ``ProfilerStep#N`` spans. About 2,700 events a step: 200 steps give
roughly 545k events, a ~220 MB chrome trace.

torch is imported inside the functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Where the benchmarks keep what they generate (gitignored).
OUT_DIR = Path(__file__).resolve().parent / "out"
DEFAULT_STEPS = 200
BATCH_SIZE = 64
WIDTH = 64
BLOCKS = 12
CLASSES = 10


def build_model() -> Any:
    """Return the 12-block MLP."""
    from torch import nn

    layers: list[nn.Module] = []
    for _ in range(BLOCKS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.LayerNorm(WIDTH), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, CLASSES))
    return nn.Sequential(*layers)


def profile_training(
    steps: int, on_trace_ready: Callable[[Any], None], *, cycles: int = 1, seed: int = 0
) -> None:
    """Train ``cycles`` profiler cycles of ``steps + 2`` steps; ``on_trace_ready`` gets each one.

    In each cycle the first two steps are the schedule's ``wait`` and ``warmup``; the next
    ``steps`` are recorded, and ``on_trace_ready(prof)`` is called after the last of them.
    torch can export a cycle's trace only once (``prof.export_chrome_trace`` a second time
    raises "Trace is already saved."), so comparing two exporters takes two cycles.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    total = (steps + 2) * cycles
    inputs = torch.randn(total * BATCH_SIZE, WIDTH)
    labels = torch.randint(0, CLASSES, (total * BATCH_SIZE,))
    loader = DataLoader(TensorDataset(inputs, labels), batch_size=BATCH_SIZE, shuffle=True)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    called = 0

    def ready(prof: Any) -> None:
        nonlocal called
        called += 1
        on_trace_ready(prof)

    with (
        warnings.catch_warnings(),
        quiet_stderr(),
        profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=1, warmup=1, active=steps, repeat=cycles),
            on_trace_ready=ready,
        ) as prof,
    ):
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            prof.step()
    if called != cycles:
        raise RuntimeError(f"on_trace_ready was called {called} times, expected {cycles}")


#: Lines of C-level stderr to drop (torch's "USDT" probe messages).
NOISE_MARKERS = ("USDT",)


@contextlib.contextmanager
def quiet_stderr(markers: tuple[str, ...] = NOISE_MARKERS) -> Iterator[None]:
    """Capture file descriptor 2 (C and Python stderr) and replay it without lines holding ``markers``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for line in capture.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not any(m in line for m in markers):
                    sys.stderr.write(line)
            sys.stderr.flush()
