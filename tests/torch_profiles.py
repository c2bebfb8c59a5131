"""Real torch CPU profiles for tests, recorded with the demo's training loop."""

from __future__ import annotations

from collections.abc import Callable
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


def slow_loader_run(
    directory: Path, *, width: int = 16, hidden: int = 0, batch_size: int = 8
) -> tuple[Path, dict]:
    """A torch CPU MLP (one intra-op thread; Linear(16, ``width``), ``hidden`` more
    Linear(``width``, ``width``), each with a ReLU, then Linear(``width``, 4)) fed by batches of
    ``batch_size`` samples of a Dataset whose samples cost CPU in NumPy, through
    ``torch.utils.data.DataLoader(num_workers=0)``: the training thread loads each batch
    itself. Profiled with perfkit's handler over four steps (two more unrecorded
    before them) and timed by the step timer over those and as many more steps without the
    profiler as take 0.2 s (8 at least). Returns (the saved run folder, the step timer's
    record); the thread count and the timer's wrappers are restored whatever happens
    (``timed_profiles.profile_and_time``)."""
    import numpy as np
    import torch

    class Slow(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            x = np.random.default_rng(index).standard_normal(128)
            for _ in range(8):
                x = np.sort(np.tanh(x * 1.01 + 0.1))
            return torch.from_numpy(x[:16].astype("float32")), index % 4

    loader = torch.utils.data.DataLoader(Slow(), batch_size=batch_size, num_workers=0)
    return _profiled_loader_run(directory, "loader", lambda: _mlp(width, hidden), loader)


#: The waiting Dataset's wait per sample (s), as a read from a slow disk or a network share.
SAMPLE_WAIT_S = 0.0005


class WaitingSamples:
    """A map-style Dataset whose samples wait for their bytes (``SAMPLE_WAIT_S``, asleep, as a
    read does) and cost little CPU."""

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import time

        import torch

        time.sleep(SAMPLE_WAIT_S)
        return torch.full((16,), float(index % 7)), index % 4


def waiting_worker_run(directory: Path, *, batch_size: int = 8) -> tuple[Path, dict]:
    """A small torch CPU MLP (one intra-op thread) fed by ``WaitingSamples`` through
    ``torch.utils.data.DataLoader(num_workers=1)``: the worker sleeps through most of each
    batch. Profiled with perfkit's handler over four steps and timed by the step timer as
    ``slow_loader_run``. Returns (the saved run folder, the step timer's record)."""
    import torch

    loader = torch.utils.data.DataLoader(
        WaitingSamples(), batch_size=batch_size, num_workers=1, persistent_workers=True
    )
    return _profiled_loader_run(directory, "waiting", lambda: _mlp(16, 0), loader)


def waiting_inline_run(directory: Path, *, batch_size: int = 8) -> tuple[Path, dict]:
    """The loop of ``waiting_worker_run`` with ``DataLoader(num_workers=0)``: the training
    thread loads each batch itself, asleep through most of it. Returns (the saved run folder,
    the step timer's record)."""
    import torch

    loader = torch.utils.data.DataLoader(WaitingSamples(), batch_size=batch_size, num_workers=0)
    return _profiled_loader_run(directory, "waiting-inline", lambda: _mlp(16, 0), loader)


def _mlp(width: int, hidden: int) -> Any:
    """Linear(16, ``width``), ``hidden`` more Linear(``width``, ``width``), each with a ReLU,
    then Linear(``width``, 4)."""
    import torch

    layers: list[Any] = [torch.nn.Linear(16, width), torch.nn.ReLU()]
    for _ in range(hidden):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 4))


def _profiled_loader_run(
    directory: Path, name: str, make_model: Callable[[], Any], loader: Any
) -> tuple[Path, dict]:
    """Train ``make_model()`` (one intra-op thread, seed 0) by SGD on ``loader``'s batches,
    profiled with perfkit's handler (worker ``name``) over four steps, two more unrecorded
    before them, and timed by the step timer over those and as many more steps without the
    profiler as take 0.2 s (8 at least, ``timed_profiles.profile_and_time``). Returns (the
    saved run folder, the step timer's record); the thread count, the timer's wrappers and
    the loader's workers are restored or shut down whatever happens."""
    import torch
    from timed_profiles import profile_and_time

    from perfkit_torch import on_trace_ready

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batches = iter(loader)

    def step() -> None:
        x, y = next(batches)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    handler = on_trace_ready(directory, worker_name=name, background=False)
    prof = torch.profiler.profile(
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=4, repeat=1),
        on_trace_ready=handler,
    )
    try:
        timer = profile_and_time(prof, step, handler)
    finally:
        torch.set_num_threads(threads)
        shutdown = getattr(batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
    assert not handler.failures, handler.failures
    return Path(handler.runs[0]), timer.record()
