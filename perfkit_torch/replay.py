"""Replays of a finding's hot part on this machine, with and without its remedy
(``perfkit advise --measure``): the optimizer step over the recorded parameter shapes, as the
per-parameter loop (``foreach=False``) and as the remedy (``fused=True`` for the classes that
have it, else ``foreach=True``); the input pipeline's cost of handing a batch from a loader
worker to the training process, how much a worker on a free core and torch's ops slow each
other, and the whole loop, loading in the training process and by workers, with stand-ins for
the run's rest of the step and its Dataset."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from perfkit_torch.remedies import FUSED_OPTIMIZERS


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


def loader_batch_ns(*, threads: int | None = 1) -> float:
    """ns per batch that one DataLoader worker (torch's defaults: this process's sharing
    strategy, ``prefetch_factor=2``) delivers to a training process that does nothing else,
    from a Dataset whose batches are ready: what handing a batch over costs, the worker
    sending it and the training process receiving it, each on a core of its own (the slower
    side bounds it). The median of ``LOADER_ROUNDS`` rounds of ``LOADER_BATCHES`` batches.
    ``threads``: torch's intra-op threads meanwhile (None leaves them)."""
    import torch

    from perfkit_core.advice import delivery_ns

    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    dataset: Any = _ReadyBatches()  # map-style, not a torch Dataset subclass
    loader: Any = torch.utils.data.DataLoader(
        dataset, batch_size=None, num_workers=1, persistent_workers=True, prefetch_factor=2
    )
    iterator = iter(loader)
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


class _LoadingBatches(_ReadyBatches):
    """``_ReadyBatches`` whose every batch first runs ``samples`` samples of a Dataset's
    Python work (``perfkit_core.advice.loading_work``): the loading of the pipeline replay."""

    def __init__(self, samples: int) -> None:
        self.samples = samples

    def __getitem__(self, index: int) -> Any:
        from perfkit_core.advice import loading_work

        loading_work(self.samples)
        return super().__getitem__(index)


def pipeline_rounds(data_ns: float, rest_ns: float, workers: int) -> list[tuple[float, float]]:
    """Replay a training loop whose steps are ``rest_ns`` of torch ops on one intra-op thread
    (``training_work``) fed by a Dataset whose batches take ``data_ns`` of Python work
    (``_LoadingBatches``): loaded in the training process, and by ``workers`` DataLoader
    workers (torch's defaults, ``persistent_workers=True``), in turn. Return the rounds'
    (ns per step loading in the training process, ns per step with the workers)
    (``perfkit_core.advice.paired_rounds``: ``PIPELINE_ROUNDS`` rounds of
    ``PIPELINE_STEPS`` steps of each loop; both times as replayed, already scaled by the
    caller). Before each loop's turn the replay waits for the workers to finish the batches
    they prefetched."""
    import torch

    from perfkit_core.advice import (
        PIPELINE_ROUNDS,
        PIPELINE_STEPS,
        loading_work,
        paired_rounds,
        unit_items,
    )

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    spread: Any = None
    try:
        samples = unit_items(loading_work, data_ns)
        items = unit_items(training_work, rest_ns)
        dataset: Any = _LoadingBatches(samples)  # map-style, not a torch Dataset subclass
        inline: Any = iter(torch.utils.data.DataLoader(dataset, batch_size=None))
        spread = iter(
            torch.utils.data.DataLoader(
                dataset,
                batch_size=None,
                num_workers=workers,
                persistent_workers=True,
                prefetch_factor=2,
            )
        )

        def loop(iterator: Any) -> Callable[[], float]:
            def steps() -> float:
                start = time.perf_counter_ns()
                for _ in range(PIPELINE_STEPS):
                    next(iterator)
                    training_work(items)
                return (time.perf_counter_ns() - start) / PIPELINE_STEPS

            return steps

        for _ in range(2 * workers + 2):  # the workers started and their first batches made
            next(spread)
        next(inline)
        prefetched_s = 2 * data_ns / 1e9 + 0.01  # two batches per worker, made side by side

        return paired_rounds(
            loop(inline), loop(spread), PIPELINE_ROUNDS, lambda: time.sleep(prefetched_s)
        )
    finally:
        if spread is not None:
            spread._shutdown_workers()
        torch.set_num_threads(saved)


#: What the pipeline replay's estimate says its loop shows that the parts' model leaves out,
#: under torch's default sharing strategy.
FILE_DESCRIPTOR_WAIT = (
    "It includes what a model of the parts leaves out: with torch's default file-descriptor "
    "sharing, the training process receives each batch from a thread of the worker that must "
    "take the GIL from the Dataset's Python, so a busy worker delays the batches it has made."
)


def replay_pipeline(
    data_ns: float, rest_ns: float, workers: float
) -> tuple[float, dict[str, Any], str] | None:
    """(the saving, ns per step; its evidence; its sentence) of ``workers`` DataLoader workers
    for a step of ``data_ns`` of loading and ``rest_ns`` of the rest, from ``pipeline_rounds``
    on this machine; None where this machine has fewer cores to spare than the workers (its
    loop would not be the run's) or the replay cannot run here."""
    import torch

    from perfkit_core.advice import pipeline_estimate, pipeline_saving, pipeline_scale

    whole = int(workers)
    if whole < 1 or whole > max((os.cpu_count() or 1) - 1, 1):
        return None
    scale = pipeline_scale(data_ns, rest_ns)
    try:
        pairs = pipeline_rounds(data_ns * scale, rest_ns * scale, whole)
    except (RuntimeError, OSError, ValueError):
        return None
    if not pairs or min(min(pair) for pair in pairs) <= 0:
        return None
    saving, ratio = pipeline_saving(data_ns + rest_ns, pairs)
    strategy = torch.multiprocessing.get_sharing_strategy()
    why = FILE_DESCRIPTOR_WAIT if strategy == "file_descriptor" else ""
    evidence = {
        "replay_pipeline_rounds": [[before, after] for before, after in pairs],
        "replay_pipeline_ratio": ratio,
        "replay_pipeline_scale": scale,
        "replay_pipeline_workers": whole,
    }
    sentence = pipeline_estimate(data_ns, rest_ns, whole, pairs, scale, saving, "torch", why)
    return saving, evidence, sentence


def measure_loader(finding: Any) -> dict[str, Any] | None:
    """The input-pipeline finding's saving replayed on this machine: the whole loop, its rest
    of the step and its loading (``loading_per_step_ns``) fed in turn by the training process
    and by the workers the rule found cores for (``replay_pipeline``); where this machine has
    fewer cores to spare, the rule's model of the parts (``loader_saving``) with the costs
    timed here (the hand-over, ``loader_batch_ns``, in place of ``LOADER_BATCH_NS`` or what the
    step timer timed on the machine that trained; the slowdowns, ``corun_slowdowns``). The
    evidence keeps both, for the combined saving's simulation of the loader. None when the
    finding lacks those figures or no worker can start here."""
    from perfkit_core.advice import (
        LOADER_BATCH_NS,
        loader_saving,
        measured_loader_estimate,
        replay_figures,
        replay_slowdown_evidence,
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
    modelled = loader_saving(data, rest, workers, batch_ns, 0.0, receive_ns, slowdowns)
    parts = measured_loader_estimate(
        batch_ns,
        float(evidence.get("loader_batch_ns") or LOADER_BATCH_NS),
        data,
        rest,
        workers,
        modelled,
        receive_ns=receive_ns,
        slowdowns=slowdowns,
        framework="torch",
    )
    found = {
        "measured": "replay",
        "replay_batch_ns": batch_ns,
        "loader_receive_ns": receive_ns,
        "replay_free_cores": workers,
        **replay_slowdown_evidence(slowdowns),
    }
    pipeline = replay_pipeline(data, rest, workers)
    if pipeline is None:  # no loop to replay here: the model of the parts, with their costs
        return {"saving_ns": modelled, "estimate": parts, "evidence": found}
    saving, replayed, sentence = pipeline
    return {
        "saving_ns": saving,
        "estimate": (
            f"{sentence} The model of the parts would promise {modelled / 1e6:.3f} ms: {parts}"
        ),
        "evidence": {
            **found,
            **replayed,
            "replay_parts_saving_ns": modelled,
        },
    }
