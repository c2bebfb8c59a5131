"""Replays of a finding's hot part on this machine, with and without its remedy
(``perfkit advise --measure``): the optimizer step over the recorded parameter shapes, as the
per-parameter loop (``foreach=False``) and as the remedy (``fused=True`` for the classes that
have it, else ``foreach=True``); the input pipeline's cost of handing a batch from a loader
worker to the training process, and how much a worker on a free core and torch's ops slow each
other."""

from __future__ import annotations

from typing import Any

from perfkit_torch.remedies import FUSED_OPTIMIZERS, REMEDY_SHARING_STRATEGY


def optimizer_step_times(
    cls: str, shapes: list[list[int]], *, threads: int | None = 1, baseline: str = "for-loop"
) -> tuple[float, float, str]:
    """(ns per step of ``cls`` as recorded (``baseline``: ``for-loop``, the per-parameter loop,
    or ``foreach``), ns per step with the remedy, the remedy's option) over float32 parameters of ``shapes`` with gradients set, on the CPU, the
    two timed in interleaved rounds (medians). ``threads``: torch's intra-op threads during
    the replay (None: leave them). Raises ValueError for a class torch lacks."""
    import torch

    from perfkit_core.advice import steps_in_turn

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
        timed = steps_in_turn({name: opt.step for name, opt in optimizers.items()})
    finally:
        torch.set_num_threads(saved)
    return timed["loop"], timed[remedy], f"{remedy}=True"


def measure_optimizer(finding: Any) -> dict[str, Any] | None:
    """The optimizer finding's saving measured by a replay (``optimizer_step_times``) of its
    parameter shapes (``perfkit_core.advice.optimizer``); None when the run gave no shapes or
    no class torch has."""
    from perfkit_core.advice import replay_optimizer, shapes_text

    baseline = str(finding.evidence.get("implementation") or "for-loop")

    def what_ran(cls: str, loop_ns: float, remedy_ns: float, option: str) -> str:
        return (
            f"Measured on this machine: a replay of the {cls} step over {shapes_text(finding)} "
            f"(float32, one thread, no profiler) ran {loop_ns / 1e6:.3f} ms as recorded "
            f"({baseline}) and {remedy_ns / 1e6:.3f} ms with {option}"
        )

    return replay_optimizer(
        finding, lambda cls, shapes: optimizer_step_times(cls, shapes, baseline=baseline), what_ran
    )


#: The hand-over replay: batches per timed round, rounds (the median is kept), warm-up batches.
LOADER_BATCHES = 20
LOADER_ROUNDS = 7
LOADER_WARMUP = 6
#: The batch the replay's worker sends to the training process: features (float32 elements,
#: 4 KiB) and labels (int64), the two tensors of a typical supervised batch. torch records no
#: shapes of the tensor lists its collate stacks, so the recorded batch's size is unknown; what
#: a batch costs to hand over is mostly fixed per tensor (a shared-memory segment each, sent
#: between the processes), not its bytes.
LOADER_BATCH_ELEMENTS = 1_024
LOADER_BATCH_LABELS = 16


class _ReadyBatches:
    """A map-style Dataset whose every item is one ready batch: features of
    ``LOADER_BATCH_ELEMENTS`` floats and ``LOADER_BATCH_LABELS`` int64 labels
    (``batch_size=None``: no collate)."""

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, index: int) -> Any:
        import torch

        features = torch.full((LOADER_BATCH_ELEMENTS,), float(index % 7))
        return features, torch.full((LOADER_BATCH_LABELS,), index % 10, dtype=torch.int64)


def iter_sharing(loader: Any, strategy: str = REMEDY_SHARING_STRATEGY) -> Any:
    """``iter(loader)`` (a torch DataLoader), its workers started under the sharing
    ``strategy`` (by default the remedy's), which they keep; this process's strategy is set
    back as it was."""
    import torch

    before = torch.multiprocessing.get_sharing_strategy()
    torch.multiprocessing.set_sharing_strategy(strategy)
    try:
        return iter(loader)
    finally:
        torch.multiprocessing.set_sharing_strategy(before)


def loader_batch_ns(*, threads: int | None = 1) -> float:
    """ns per batch that one DataLoader worker (``prefetch_factor=2``, started under
    ``REMEDY_SHARING_STRATEGY``, the remedy's) delivers to a training process that does
    nothing else, from a Dataset whose batches are ready: what handing a batch over costs, the
    worker sending it and the training process receiving it, each on a core of its own (the
    slower side bounds it). The median of ``LOADER_ROUNDS`` rounds of ``LOADER_BATCHES``
    batches. ``threads``: torch's intra-op threads meanwhile (None leaves them). This
    process's sharing strategy is left as it was (``iter_sharing``)."""
    import torch

    from perfkit_core.advice import delivery_ns

    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    dataset: Any = _ReadyBatches()  # map-style, not a torch Dataset subclass
    loader: Any = torch.utils.data.DataLoader(
        dataset, batch_size=None, num_workers=1, persistent_workers=True, prefetch_factor=2
    )
    iterator = iter_sharing(loader)
    try:
        return delivery_ns(
            iterator, warmup=LOADER_WARMUP, rounds=LOADER_ROUNDS, batches=LOADER_BATCHES
        )
    finally:
        iterator._shutdown_workers()
        torch.set_num_threads(saved)


#: The co-run replay's unit of torch ops: a batch of this many rows through a square layer of
#: this width and a tanh, on one intra-op thread (a training step's matmuls and activations).
CORUN_ROWS = 16
CORUN_WIDTH = 512


def training_work(items: int) -> None:
    """Run ``items`` items of torch ops on one intra-op thread (``CORUN_ROWS`` rows through a
    ``CORUN_WIDTH``-wide layer and a tanh), the training side of the co-run replay; torch's
    threads are left as they were. The layer is made once, so that every call times only its
    items."""
    import torch

    if not _corun_tensors:
        with torch.no_grad():
            _corun_tensors.append(torch.full((CORUN_WIDTH, CORUN_WIDTH), 1.0 / CORUN_WIDTH))
            _corun_tensors.append(torch.ones(CORUN_ROWS, CORUN_WIDTH))
    weight, rows = _corun_tensors
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            for _ in range(items):
                rows = torch.tanh(rows @ weight)
    finally:
        torch.set_num_threads(saved)


_corun_tensors: list[Any] = []  # the co-run replay's layer and rows, made at its first call


def corun_slowdowns() -> tuple[float, float]:
    """How many times as long torch's ops (``training_work``) and a loader's Python work each
    take beside the other on two cores of this machine now as alone
    (``perfkit_core.advice.corun.corun_slowdowns``)."""
    from perfkit_core.advice import corun_slowdowns as replay

    return replay(training_work)


def measure_loader(finding: Any) -> dict[str, Any] | None:
    """The input-pipeline finding's saving with the cost of handing a batch over measured on
    this machine (``loader_batch_ns``) instead of the finding's (``LOADER_BATCH_NS``, or what
    the step timer timed on the machine that trained): the same
    ``loader_saving`` of the loading the rule moves to workers (``loading_per_step_ns``), the
    rest of the step and the cores the rule found free. None
    when the finding lacks those figures or no worker can start here."""
    from perfkit_core.advice import (
        LOADER_BATCH_NS,
        loader_saving,
        measured_loader_estimate,
        replay_figures,
        replay_slowdown_evidence,
        waiting_workers,
    )

    evidence = finding.evidence
    figures = replay_figures(evidence)
    if figures is None:
        return None
    data, rest, workers = figures
    try:
        batch_ns = loader_batch_ns()
        slowdowns = corun_slowdowns()
    except (RuntimeError, OSError, ValueError):
        return None
    receive_ns = batch_ns  # torch's training process unpickles each batch itself: each side pays
    saving = loader_saving(data, rest, workers, batch_ns, 0.0, receive_ns, slowdowns)
    return {
        "saving_ns": saving,
        "estimate": measured_loader_estimate(
            batch_ns,
            float(evidence.get("loader_batch_ns") or LOADER_BATCH_NS),
            data,
            rest,
            workers,
            saving,
            extra=(
                f" The worker handed them over under the {REMEDY_SHARING_STRATEGY} sharing "
                "strategy, which the remedy sets."
            ),
            receive_ns=receive_ns,
            slowdowns=slowdowns,
            framework="torch",
            waiting=waiting_workers(evidence),
        ),
        "evidence": {
            "measured": "replay",
            "replay_batch_ns": batch_ns,
            "loader_receive_ns": receive_ns,
            "replay_free_cores": workers,
            **replay_slowdown_evidence(slowdowns),
        },
    }
