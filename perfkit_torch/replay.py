"""Replays of a finding's hot part on this machine, with and without its remedy
(``perfkit advise --measure``): the optimizer step over the recorded parameter shapes, as the
per-parameter loop (``foreach=False``) and as the remedy (``fused=True`` for the classes that
have it, else ``foreach=True``); the input pipeline's step, its batches loaded in the training
process and by loader workers."""

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
    replayed = (
        f"Measured on this machine: a replay of the {cls} step over the {len(shapes)} recorded "
        f"parameter shapes (float32, one thread, no profiler) ran {loop_ns / 1e6:.3f} ms as "
        f"recorded ({finding.evidence.get('implementation')}) and {remedy_ns / 1e6:.3f} ms with "
        f"{option}"
    )
    timed = finding.evidence.get("optimizer_unprofiled_per_step_ns")
    if finding.evidence.get("optimizer_unprofiled_from") == "timed" and loop_ns > 0:
        # The training loop's own optimizer time, as the step timer measured it, made as much
        # faster as the replay was: the replay gives the ratio, the real loop the time.
        saving = max(float(timed) * (1.0 - remedy_ns / loop_ns), 0.0)
        how = (
            f"{replayed}: {loop_ns / max(remedy_ns, 1.0):.2f}x faster. The optimizer step timed "
            f"in training without the profiler ({float(timed) / 1e6:.3f} ms) made that much "
            "faster."
        )
    else:
        saving = max(loop_ns - remedy_ns, 0.0)
        how = f"{replayed}, the difference per step."
    return {
        "saving_ns": saving,
        "estimate": how,
        "evidence": {
            "measured": "replay",
            "replay_loop_ns": loop_ns,
            "replay_remedy_ns": remedy_ns,
            "replay_option": option,
        },
    }


#: The loader replay: steps per timed round, rounds (the median step is kept), warm-up steps.
LOADER_STEPS = 40
LOADER_ROUNDS = 7
LOADER_WARMUP = 6
#: The batch the replay's workers send to the training process (float32 elements, 256 KiB):
#: torch records no shapes of the tensor lists its collate stacks, so the recorded batch's size
#: is unknown; what a batch costs to receive is mostly fixed (a shared-memory handle), not its
#: bytes.
LOADER_BATCH_ELEMENTS = 65_536


def _spin_units(budget_ns: float, unit: Any) -> int:
    """How many calls of ``unit`` take ``budget_ns`` on this machine now (at least 1)."""
    calls, start = 0, time.perf_counter_ns()
    while time.perf_counter_ns() - start < 100_000_000:  # 100 ms of calibration
        unit()
        calls += 1
    per_call = (time.perf_counter_ns() - start) / max(calls, 1)
    return max(round(budget_ns / per_call), 1)


def _python_work(n: int = 200) -> int:
    """A unit of Python work, as a Dataset's per-sample code does (holds the GIL)."""
    total = 0
    for i in range(n):
        total += i * i
    return total


class _ReplayBatches:
    """A map-style Dataset whose every item is one batch: ``units`` of Python work, then a
    tensor of ``LOADER_BATCH_ELEMENTS`` floats (``batch_size=None``: no collate)."""

    def __init__(self, units: int) -> None:
        self.units = units

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, index: int) -> Any:
        import torch

        for _ in range(self.units):
            _python_work()
        return torch.full((LOADER_BATCH_ELEMENTS,), float(index % 7))


def loader_step_times(
    data_ns: float, rest_ns: float, workers: int, *, threads: int | None = None
) -> tuple[float, float]:
    """(ns per step with the batches loaded in the training process, ns per step with
    ``workers`` loader workers) of a replayed step: ``data_ns`` of Python work per batch (in
    a map-style Dataset), then ``rest_ns`` of training (small matmuls with torch's
    ``threads`` intra-op threads: None leaves them), each a fixed amount of work calibrated
    on this machine before the workers start, so that it takes longer when the workers take
    CPU from it. The two are timed in interleaved rounds (medians)."""
    import torch

    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    a = torch.randn(64, 64)
    b = torch.randn(64, 64)
    iterators: dict[int, Any] = {}

    def train_unit() -> None:
        torch.mm(a, b).relu_()

    try:
        data_units = _spin_units(data_ns, _python_work) if data_ns > 0 else 0
        train_units = _spin_units(rest_ns, train_unit) if rest_ns > 0 else 0
        for n in (0, workers):
            options: dict[str, Any] = (
                {"num_workers": n, "persistent_workers": True, "prefetch_factor": 2} if n else {}
            )
            dataset: Any = _ReplayBatches(data_units)  # map-style, not a torch Dataset subclass
            loader: Any = torch.utils.data.DataLoader(dataset, batch_size=None, **options)
            iterators[n] = iter(loader)

        def step(iterator: Any) -> None:
            next(iterator)
            for _ in range(train_units):
                train_unit()

        for iterator in iterators.values():
            for _ in range(LOADER_WARMUP):
                step(iterator)
        rounds: dict[int, list[float]] = {n: [] for n in iterators}
        for _ in range(LOADER_ROUNDS):
            for n, iterator in iterators.items():
                start = time.perf_counter_ns()
                for _ in range(LOADER_STEPS):
                    step(iterator)
                rounds[n].append((time.perf_counter_ns() - start) / LOADER_STEPS)
    finally:
        for iterator in iterators.values():
            shutdown = getattr(iterator, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
        torch.set_num_threads(saved)
    return statistics.median(rounds[0]), statistics.median(rounds[workers])


def measure_loader(finding: Any) -> dict[str, Any] | None:
    """The input-pipeline finding's saving measured by a replay (``loader_step_times``) of its
    step: the recorded loading time per step (without the profiler's cost where the step timer
    measured it) and the rest of the step, with the batches loaded in the training process and
    with loader workers on the cores the rule found free (at least one). None when the finding
    lacks those figures or the replay cannot run here."""
    evidence = finding.evidence
    data = evidence.get("data_unprofiled_per_step_ns")
    rest = evidence.get("rest_per_step_ns")
    if not isinstance(data, (int, float)) or not isinstance(rest, (int, float)) or data <= 0:
        return None
    workers = max(int(evidence.get("free_cores") or 0), 1)
    try:
        inline_ns, workers_ns = loader_step_times(float(data), float(rest), workers)
    except (RuntimeError, OSError, ValueError):
        return None
    delta = inline_ns - workers_ns
    return {
        "saving_ns": max(delta, 0.0),
        "estimate": (
            f"Measured on this machine: a replay of the step ({data / 1e6:.3f} ms of Python "
            f"work per batch in a Dataset, then {rest / 1e6:.3f} ms of training work, no "
            f"profiler) ran {inline_ns / 1e6:.3f} ms with the batches loaded in the training "
            f"process and {workers_ns / 1e6:.3f} ms with num_workers={workers}: the worker's "
            "contention with training and the cost of receiving each batch included"
            + ("; the workers made it slower, so no saving is expected" if delta < 0 else ".")
        ),
        "evidence": {
            "measured": "replay",
            "replay_inline_ns": inline_ns,
            "replay_workers_ns": workers_ns,
            "replay_workers": workers,
        },
    }
