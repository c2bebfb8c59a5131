"""Replays of the input pipeline's costs on this machine (``perfkit advise --measure`` of a
Paddle run, and the step timer's ``save`` on the machine that trained): what handing a batch
from a ``paddle.io.DataLoader`` worker to the training process costs, what receiving one adds
to a busy training step, and what each op of the training thread costs when a single-process
DataLoader's loading thread runs beside it. The input-pipeline finding's model
(``perfkit_core.advice.loader``) then uses them in place of its constants. And the optimizer
step as the per-parameter loop and with ``use_multi_tensor=True``, over the parameter shapes
recorded with the model (the handler's ``model=``: Paddle's profiler records no input shapes
for its optimizer's ops)."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

#: The hand-over replay: batches per timed round, rounds (the median is kept), warm-up batches.
LOADER_BATCHES = 20
LOADER_ROUNDS = 7
LOADER_WARMUP = 6
#: The batch the replay's worker sends: features (float32, 4 KiB) and labels (int64), the two
#: tensors of a typical supervised batch, as torch's replay sends.
LOADER_BATCH_ELEMENTS = 1_024
LOADER_BATCH_LABELS = 16

#: The contention replay's training step: a small MLP of ``THREAD_BLOCKS`` blocks (a square
#: linear layer ``THREAD_WIDTH`` wide, then tanh) on ``THREAD_BATCH`` rows, its forward, the
#: backward of the mean and the per-parameter Adam step, as a training loop's step runs them.
#: The backward (Paddle's engine, one call from Python) and the optimizer hand the GIL over
#: otherwise than forward ops do: with a step of forward ops alone, the input-pipeline model
#: gave paddle-loader's loop (bench/bench_advice.py) 10 to 38% less than its worker saved,
#: and with this step 11% less to 8% more (once 34% less, on an outlier of the receive
#: replay), in two runs of four rounds (bench/README.md). ``THREAD_OPS``: the outermost ops a
#: Paddle profile records per step of it (what ``training_ops_per_step`` counts in a run; a
#: test profiles the step and counts them).
THREAD_BLOCKS = 8
THREAD_WIDTH = 64
THREAD_OPS = 82
#: Steps per timed round, rounds (the median is kept); samples per batch, and the Python work
#: of each sample (iterations over ``SAMPLE_SIZE`` floats): a batch takes several times as long
#: as the step (2.7 ms against 0.75 ms on a 2-core x86 machine), so the loading thread has
#: work beside every op of the step, as where loading bounds the step.
THREAD_STEPS = 30
THREAD_ROUNDS = 5
THREAD_BATCH = 16
SAMPLE_WORK = 60
SAMPLE_SIZE = 128
#: Samples in the replay's datasets: far more than it reads (Paddle's samplers go by the length).
DATASET_LENGTH = 100_000
#: The receive replay: rounds of ``THREAD_STEPS`` steps of the contention replay's training
#: step, on a batch in hand and fed by one worker in turn (the median difference is kept).
RECEIVE_ROUNDS = 9


def _ready_batches() -> Any:
    """A map-style Paddle Dataset whose every item is a ready batch (``batch_size=None``)."""
    import numpy as np
    import paddle

    class ReadyBatches(paddle.io.Dataset):
        def __len__(self) -> int:
            return DATASET_LENGTH

        def __getitem__(self, index: int) -> Any:
            features = np.full((LOADER_BATCH_ELEMENTS,), float(index % 7), dtype="float32")
            return features, np.full((LOADER_BATCH_LABELS,), index % 10, dtype="int64")

    return ReadyBatches()


def _shutdown(iterator: Any) -> None:
    """Stop a Paddle DataLoader iterator's workers or loading thread now (persistent workers
    otherwise live until the program exits)."""
    shutdown = getattr(iterator, "_try_shutdown_all", None)
    if callable(shutdown):
        shutdown()


@contextlib.contextmanager
def _one_worker() -> Iterator[Any]:
    """An iterator over a ``paddle.io.DataLoader`` whose one persistent worker delivers ready
    batches (``_ready_batches``), its worker stopped on leaving."""
    import paddle

    make: Any = paddle.io.DataLoader  # batch_size=None: each item is a batch already
    loader = make(_ready_batches(), batch_size=None, num_workers=1, persistent_workers=True)
    iterator = iter(loader)
    try:
        yield iterator
    finally:
        _shutdown(iterator)


def loader_batch_ns() -> float:
    """ns per batch that one ``paddle.io.DataLoader`` worker delivers to a training process
    that does nothing else, from a Dataset whose batches are ready: what handing a batch over
    costs, the worker sending it and the training process receiving it (the slower side
    bounds it). The median of ``LOADER_ROUNDS`` rounds of ``LOADER_BATCHES`` batches."""
    from perfkit_core.advice import delivery_ns

    with _one_worker() as iterator:
        return delivery_ns(
            iterator, warmup=LOADER_WARMUP, rounds=LOADER_ROUNDS, batches=LOADER_BATCHES
        )


def _slow_samples() -> Any:
    """A map-style Paddle Dataset whose samples cost Python and NumPy work on small arrays,
    which holds the GIL, as a Dataset that decodes and augments does."""
    import numpy as np
    import paddle

    class SlowSamples(paddle.io.Dataset):
        def __len__(self) -> int:
            return DATASET_LENGTH

        def __getitem__(self, index: int) -> Any:
            x = np.linspace(-1.0, 1.0, SAMPLE_SIZE) * (1 + index % 5)
            for _ in range(SAMPLE_WORK):
                x = np.sort(np.tanh(x * 1.01 + 0.1))
            return x[:16].astype("float32")

    return SlowSamples()


def _per_step(step: Callable[[], Any], steps: int, clock: Callable[[], int]) -> float:
    """``clock``'s time (ns) per call of ``step``, over ``steps`` calls."""
    start = clock()
    for _ in range(steps):
        step()
    return (clock() - start) / steps


def _training_step() -> tuple[Callable[[Any], None], Any]:
    """(the replayed training step of ``THREAD_OPS`` ops: a small MLP's forward on a batch of
    ``THREAD_BATCH`` x ``THREAD_WIDTH``, the backward of its mean and the per-parameter Adam
    step, each op handing the GIL over as a model's ops do; a batch in hand for it). The batch
    a step is given only paces it, as a model's input would: the step trains on the batch in
    hand."""
    import paddle

    layers: list[Any] = []
    for _ in range(THREAD_BLOCKS):
        layers += [paddle.nn.Linear(THREAD_WIDTH, THREAD_WIDTH), paddle.nn.Tanh()]
    model = paddle.nn.Sequential(*layers)
    optimizer = paddle.optimizer.Adam(
        learning_rate=1e-6, parameters=model.parameters(), use_multi_tensor=False
    )
    ready = paddle.ones([THREAD_BATCH, THREAD_WIDTH], dtype="float32")

    def train(batch: Any) -> None:
        model(ready).mean().backward()
        optimizer.step()
        optimizer.clear_grad()

    return train, ready


def thread_op_ns(dataset: Any = None) -> float:
    """ns of CPU time that each op of the training thread costs it when a single-process
    ``paddle.io.DataLoader``'s loading thread runs beside it (handing the GIL over and back):
    the training thread's CPU time in the replayed training step (``_training_step``: forward,
    backward and optimizer, ``THREAD_OPS`` ops) per batch fed by that loader, less its CPU
    time in the same step on a ready batch, per op; the median of ``THREAD_ROUNDS`` rounds (the
    two timed in turn in each), at least 0. The loader reads ``dataset`` (default: Python and
    NumPy work per sample, which holds the GIL: ``_slow_samples``)."""
    import paddle

    train, ready = _training_step()
    dataset = _slow_samples() if dataset is None else dataset
    loader = paddle.io.DataLoader(dataset, batch_size=THREAD_BATCH, num_workers=0)
    iterator = iter(loader)
    try:
        for _ in range(3):
            train(next(iterator))
        per_op = []
        for _ in range(THREAD_ROUNDS):
            alone = _per_step(lambda: train(ready), THREAD_STEPS, time.thread_time_ns)
            together = _per_step(lambda: train(next(iterator)), THREAD_STEPS, time.thread_time_ns)
            per_op.append((together - alone) / THREAD_OPS)
    finally:
        _shutdown(iterator)
    return max(statistics.median(per_op), 0.0)


#: How long a ``thread_op_ns`` replay is reused (s): the input-pipeline and the optimizer
#: findings of one ``perfkit advise --measure`` both need it, and it takes about 2 s.
THREAD_OP_REUSE_S = 120.0
_thread_op_timed: list[tuple[float, float]] = []  # (time.monotonic() when timed, ns)


def recent_thread_op_ns() -> float:
    """``thread_op_ns``, timed again only when the last replay in this process is older than
    ``THREAD_OP_REUSE_S``."""
    now = time.monotonic()
    if _thread_op_timed and now - _thread_op_timed[-1][0] < THREAD_OP_REUSE_S:
        return _thread_op_timed[-1][1]
    timed = thread_op_ns()
    _thread_op_timed[:] = [(time.monotonic(), timed)]
    return timed


def loader_receive_ns() -> float:
    """ns of wall time per step that receiving its batch from one ``paddle.io.DataLoader``
    worker adds to the contention replay's training step (``_training_step``): the step fed
    by a worker of ready batches, less the same step on a batch in hand; the median of
    ``RECEIVE_ROUNDS`` rounds of ``THREAD_STEPS`` steps of each in turn, at least 0. Paddle's
    reader thread takes each batch off the worker's queue in the training process and its
    feeder thread sends the worker the next indices, and both take the GIL that the training
    thread's ops hand over, so a busy training thread pays more than the 0.04 ms of CPU an
    idle one spends taking a batch from the queue."""
    train, ready = _training_step()
    with _one_worker() as iterator:
        for _ in range(LOADER_WARMUP):
            train(next(iterator))
        rounds = []
        for _ in range(RECEIVE_ROUNDS):
            in_hand = _per_step(lambda: train(ready), THREAD_STEPS, time.perf_counter_ns)
            fed = _per_step(lambda: train(next(iterator)), THREAD_STEPS, time.perf_counter_ns)
            rounds.append(fed - in_hand)
    return max(statistics.median(rounds), 0.0)


#: The co-run replay's unit of Paddle ops: a batch of this many rows through a square layer of
#: this width and a tanh (Paddle's CPU ops run on one thread unless told otherwise).
CORUN_ROWS = 16
CORUN_WIDTH = 512


def training_work(items: int) -> None:
    """Run ``items`` items of Paddle ops (``CORUN_ROWS`` rows through a ``CORUN_WIDTH``-wide
    layer and a tanh), the training side of the co-run replay. The layer is made once, so that
    every call times only its items."""
    import paddle

    if not _corun_tensors:
        _corun_tensors.append(
            paddle.full([CORUN_WIDTH, CORUN_WIDTH], 1.0 / CORUN_WIDTH, dtype="float32")
        )
        _corun_tensors.append(paddle.ones([CORUN_ROWS, CORUN_WIDTH], dtype="float32"))
    weight, rows = _corun_tensors
    with paddle.no_grad():
        for _ in range(items):
            rows = paddle.tanh(paddle.matmul(rows, weight))


_corun_tensors: list[Any] = []  # the co-run replay's layer and rows, made at its first call


def corun_slowdowns() -> tuple[float, float]:
    """How many times as long Paddle's ops (``training_work``) and a loader's Python work each
    take beside the other on two cores of this machine now as alone
    (``perfkit_core.advice.corun.corun_slowdowns``)."""
    from perfkit_core.advice import corun_slowdowns as replay

    return replay(training_work)


def measure_loader(finding: Any) -> dict[str, Any] | None:
    """The input-pipeline finding's saving with the input pipeline's costs measured on this
    machine: handing a batch over (``loader_batch_ns``) and what receiving one adds to a busy
    training step (``loader_receive_ns``) in place of the finding's costs and, where the
    finding split a loading thread's step
    (``training_ops_per_step``), each training op's cost beside it (``thread_op_ns``) in place
    of the finding's (the step timer's, or ``THREAD_OP_NS``); the same ``thread_split`` (of
    the finding's mean step, ``loader_step_ns``) and ``loader_saving`` of the finding's own
    figures, saying so where the hand-overs at the replayed cost would take all of the loading
    thread's CPU time. None when the finding lacks those figures or no worker can start here."""
    from perfkit_core.advice import (
        LOADING_OP_SHARE,
        RECEIVE_REPLAY,
        handover_exceeds_loading,
        loader_batch_cost,
        loader_saving,
        measured_loader_estimate,
        replay_figures,
        replay_slowdown_evidence,
        thread_split,
        waiting_workers,
    )

    evidence = finding.evidence
    figures = replay_figures(evidence)
    if figures is None:
        return None
    data, rest, workers = figures
    ops = evidence.get("training_ops_per_step")
    training_cpu = evidence.get("training_cpu_per_step_ns")
    thread_cpu = evidence.get("data_unprofiled_per_step_ns")
    step = evidence.get("loader_step_ns", evidence.get("basis_step_ns"))
    split = all(
        isinstance(v, (int, float)) and v > 0 for v in (ops, training_cpu, thread_cpu, step)
    )
    try:
        batch_ns = loader_batch_ns()
        receive_ns = loader_receive_ns()
        slowdowns = corun_slowdowns()
        op_ns = recent_thread_op_ns() if split else 0.0
    except (RuntimeError, OSError, ValueError):
        return None
    contention, capped = 0.0, False
    if split:
        data, rest, contention = thread_split(step, thread_cpu, training_cpu, ops, op_ns)
        # the replay's cost per op would take all of the loading thread's CPU: the split
        # counts none of it as loading
        capped = handover_exceeds_loading(thread_cpu, ops, op_ns)
    saving = loader_saving(data, rest, workers, batch_ns, contention, receive_ns, slowdowns)
    received = (
        f" Receiving each batch from that worker added {receive_ns / 1e6:.3f} ms to a "
        f"replayed training step here ({THREAD_OPS} ops: a small MLP's forward, backward and "
        "Adam step; the loader's reader thread in the training process takes the GIL the "
        "step's ops hand over)."
    )
    threads = received + (
        f" Each of the step's {ops:.0f} ops cost the training thread {op_ns / 1e3:.1f} us of CPU "
        f"beside a single-process DataLoader's loading thread here (handing the GIL over and "
        f"back; the loading thread pays {LOADING_OP_SHARE:g} times that), so alone the two "
        f"threads would take {data / 1e6:.3f} ms of loading and {rest / 1e6:.3f} ms of "
        f"training; the {contention / 1e6:.3f} ms left of the mean step "
        "goes with the thread."
        + (
            f" At that cost the step's hand-overs ({ops * op_ns / 1e6:.3f} ms) come to at "
            f"least the loading thread's whole CPU time ({thread_cpu / 1e6:.3f} ms), so the "
            "split takes the hand-overs to cost the training thread as much CPU time as the "
            "loading thread ran (the replay's loading thread runs Python and NumPy work; one "
            "that runs framework ops of its own, a Dataset of tensors sliced per sample, hands "
            "the GIL over at each)."
            if capped
            else ""
        )
        if split
        else ""
    )
    return {
        "saving_ns": saving,
        "estimate": measured_loader_estimate(
            batch_ns,
            float(evidence.get("loader_batch_ns") or loader_batch_cost("paddle")),
            data,
            rest,
            workers,
            saving,
            threads,
            receive_ns,
            slowdowns,
            "paddle",
            waiting_workers(evidence),
        ),
        "evidence": {
            "measured": "replay",
            "replay_batch_ns": batch_ns,
            "loader_receive_ns": receive_ns,
            "loader_receive_from": RECEIVE_REPLAY,
            "replay_free_cores": workers,
            **replay_slowdown_evidence(slowdowns),
            **(
                {
                    "replay_thread_op_ns": op_ns,
                    "loading_per_step_ns": data,
                    "rest_per_step_ns": rest,
                    "contention_per_step_ns": contention,
                    "handovers_capped": capped,
                }
                if split
                else {}
            ),
        },
    }


def optimizer_step_times(cls: str, shapes: list[list[int]]) -> tuple[float, float, str]:
    """(ns per step of ``paddle.optimizer.<cls>`` as the per-parameter loop, ns per step with
    ``use_multi_tensor=True``, that option) over float32 parameters of ``shapes`` with
    gradients set, on the CPU, the two timed in interleaved rounds (medians:
    ``perfkit_core.advice.optimizer.steps_in_turn``). The optimizer step alone: what
    the remedy also saves in the next forward and backward (fewer small tensors allocated) is
    not in it. Raises ValueError for a class without a multi-tensor implementation."""
    import paddle

    from perfkit_core.advice import steps_in_turn
    from perfkit_paddle.remedies import MULTI_TENSOR_OPTIMIZERS

    if cls not in MULTI_TENSOR_OPTIMIZERS:
        raise ValueError(f"paddle.optimizer.{cls} has no multi-tensor implementation")
    make: Any = getattr(paddle.optimizer, cls)
    device = paddle.get_device()
    paddle.set_device("cpu")
    try:
        optimizers = {}
        for multi in (False, True):
            params = [paddle.create_parameter(shape=list(s), dtype="float32") for s in shapes]
            paddle.add_n([(p * p).sum() for p in params]).backward()  # a gradient for each
            optimizers[multi] = make(learning_rate=1e-3, parameters=params, use_multi_tensor=multi)
        timed = steps_in_turn({"loop": optimizers[False].step, "multi": optimizers[True].step})
    finally:
        paddle.set_device(device)
    return timed["loop"], timed["multi"], "use_multi_tensor=True"


def measure_optimizer(finding: Any) -> dict[str, Any] | None:
    """The optimizer finding's saving measured by a replay (``optimizer_step_times``) of its
    parameter shapes (``perfkit_core.advice.optimizer``); None when the run gave no shapes (a
    Paddle run has them when its handler was given the model, ``model=``) or its class has no
    multi-tensor implementation. Where the run's step ran beside a single-process DataLoader's
    loading thread, each op's cost beside it (``recent_thread_op_ns``) states what the remedy's
    fewer ops save in hand-overs of the GIL (``replayed_optimizer_saving``)."""
    from perfkit_core.advice import replay_optimizer, shapes_text

    def what_ran(cls: str, loop_ns: float, remedy_ns: float, option: str) -> str:
        return (
            f"Measured on this machine: a replay of Paddle's {cls} step alone over "
            f"{shapes_text(finding)} (float32, on the CPU, no profiler) ran "
            f"{loop_ns / 1e6:.3f} ms as the per-parameter loop and {remedy_ns / 1e6:.3f} ms "
            f"with {option}"
        )

    return replay_optimizer(finding, optimizer_step_times, what_ran, recent_thread_op_ns)
