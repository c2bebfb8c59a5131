"""Replays of a finding's hot part on this machine, with and without its remedy
(``perfkit advise --measure``): the optimizer step over the recorded parameter shapes, as the
per-parameter loop (``foreach=False``) and as the remedy (``fused=True`` for the classes that
have it, else ``foreach=True``)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from perfkit_torch.remedies import FUSED_OPTIMIZERS

#: Optimizer steps per timed round, rounds (the median is kept), and warm-up steps.
REPLAY_STEPS = 50
REPLAY_ROUNDS = 5
REPLAY_WARMUP = 5


def optimizer_step_times(
    cls: str, shapes: list[list[int]], *, threads: int | None = 1, baseline: str = "for-loop"
) -> tuple[float, float, str]:
    """(ns per step of ``cls`` as recorded (``baseline``: ``for-loop``, the per-parameter loop,
    or ``foreach``), ns per step with the remedy, the remedy's option) over float32 parameters of ``shapes`` with gradients set, on the CPU, the
    two timed in interleaved rounds (medians). ``threads``: torch's intra-op threads during
    the replay (None: leave them). Raises ValueError for a class torch lacks."""
    import torch

    make: Any = getattr(torch.optim, cls, None)
    if make is None or not isinstance(make, type) or not issubclass(make, torch.optim.Optimizer):
        raise ValueError(f"torch has no optimizer class {cls!r}")
    factory: Any = make  # the class's own keyword arguments (lr, foreach, fused)
    remedy = "fused" if cls in FUSED_OPTIMIZERS else "foreach"
    extra: dict[str, Any] = {"momentum": 0.9} if cls == "SGD" else {}
    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        optimizers = {}
        variants: dict[str, dict[str, Any]] = {
            "loop": {"foreach": baseline == "foreach"},
            remedy: {remedy: True},
        }
        for key, options in variants.items():
            params = [torch.nn.Parameter(torch.randn(*shape)) for shape in shapes]
            for p in params:
                p.grad = torch.randn_like(p)
            optimizers[key] = factory(params, lr=1e-3, **extra, **options)
        for opt in optimizers.values():
            for _ in range(REPLAY_WARMUP):
                opt.step()
        rounds: dict[str, list[float]] = {name: [] for name in optimizers}
        for _ in range(REPLAY_ROUNDS):
            for name, opt in optimizers.items():
                start = time.perf_counter_ns()
                for _ in range(REPLAY_STEPS):
                    opt.step()
                rounds[name].append((time.perf_counter_ns() - start) / REPLAY_STEPS)
    finally:
        torch.set_num_threads(saved)
    return statistics.median(rounds["loop"]), statistics.median(rounds[remedy]), f"{remedy}=True"


def measure_optimizer(finding: Any) -> dict[str, Any] | None:
    """The optimizer finding's saving measured by a replay (``optimizer_step_times``) of its
    recorded parameter shapes: {"saving_ns", "estimate", "evidence"}; None when the trace
    recorded no shapes or no class torch has."""
    shapes = finding.evidence.get("parameter_shapes") or []
    cls = finding.evidence.get("optimizer_class")
    if not shapes or not cls:
        return None
    try:
        loop_ns, remedy_ns, option = optimizer_step_times(
            str(cls), shapes, baseline=str(finding.evidence.get("implementation") or "for-loop")
        )
    except (ValueError, RuntimeError, TypeError):
        return None
    saving = max(loop_ns - remedy_ns, 0.0)
    return {
        "saving_ns": saving,
        "estimate": (
            f"Measured on this machine: a replay of the {cls} step over the "
            f"{len(shapes)} recorded parameter shapes (float32, one thread, no profiler) ran "
            f"{loop_ns / 1e6:.3f} ms as recorded ({finding.evidence.get('implementation')}) and {remedy_ns / 1e6:.3f} ms with "
            f"{option}, the difference per step."
        ),
        "evidence": {
            "measured": "replay",
            "replay_loop_ns": loop_ns,
            "replay_remedy_ns": remedy_ns,
            "replay_option": option,
        },
    }
