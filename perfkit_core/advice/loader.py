"""The input pipeline's model: what loader workers save, on the cores a machine leaves free
and at what cost per batch. The input-pipeline rule states its saving with it, the combined
saving of every finding simulates the loader with it, and the adapters' replays feed it what
they measured."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from perfkit_core.advice.loader_cores import waiting_workers
from perfkit_core.capture.machine_costs import (
    LOADER_BATCH_KEY,
    LOADER_RECEIVE_KEY,
    LOADING_SLOWDOWN_KEY,
    META_KEY,
    THREAD_OP_KEY,
    TRAINING_SLOWDOWN_KEY,
    finite_number,
    slowdown_pair,
)

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: What handing one batch from a loader worker to the training process costs each side (ns):
#: the worker puts the batch in shared memory and sends it, the training process receives and
#: maps it. Measured by the replay of ``perfkit advise --measure``
#: (``perfkit_torch.replay.loader_batch_ns``: one worker, batches of features and labels, two
#: tensors of 4 KiB) on a 2-core x86 KVM machine with torch 2.13 under the ``file_system``
#: sharing strategy that torch's remedy sets: 1.0 to 1.4 ms per batch over repeated replays
#: (under torch's default, ``file_descriptor``, 1.6 to 2.3 ms, and more beside a busy worker:
#: ``bench/bench_handover.py``). The advice uses this figure only when the step timer did not
#: time the cost on the machine that trained (``run_loader_batch_cost``); ``--measure``
#: measures it on the machine that reads the run. Traces record no batch sizes (torch records
#: no shapes of the tensor lists its collate stacks).
LOADER_BATCH_NS = 1_300_000.0

#: The same cost where a framework's loader workers hand batches over otherwise (ns per batch,
#: by the run's framework; others pay ``LOADER_BATCH_NS``). Paddle's workers put a batch in
#: shared memory and a reader thread of the training process moves it into the C++ queue the
#: training thread reads, mostly outside the GIL: one worker delivered ready batches of the same
#: two tensors every 0.32 to 0.55 ms over repeated replays
#: (``perfkit_paddle.replay.loader_batch_ns``, Paddle 3.3.1 on a 2-core x86 KVM machine where
#: torch's took 1.0 to 1.1 ms).
LOADER_BATCH_NS_BY_FRAMEWORK = {"paddle": 400_000.0}


#: How a framework's loader hands batches over where the remedy sets it (said after "in
#: torch's loader"): torch's remedy sets the ``file_system`` sharing strategy, which the
#: replays time (``perfkit_torch.remedies.REMEDY_SHARING_STRATEGY``).
LOADER_HANDOVER_BY_FRAMEWORK = {"torch": " under the file_system sharing strategy the remedy sets"}


def loader_batch_cost(framework: str) -> float:
    """What handing one batch from a loader worker over costs each side in ``framework``'s
    loader (ns): ``LOADER_BATCH_NS_BY_FRAMEWORK``, else ``LOADER_BATCH_NS``."""
    return LOADER_BATCH_NS_BY_FRAMEWORK.get(framework, LOADER_BATCH_NS)


#: How an estimate says that a cost was timed where the run trained (``StepTimer.save``).
TIMED_AT_SAVE = "timed on the machine that trained, when the step timer saved the run"

#: Where ``run_loader_batch_cost`` found the cost (the finding's ``loader_batch_from``): timed
#: on the machine that trained, or the model's; and how a finding's estimate says so.
TRAINING_MACHINE = "training machine"
MODEL_COST = "model"
LOADER_BATCH_SOURCES = {
    TRAINING_MACHINE: TIMED_AT_SAVE,
    MODEL_COST: "measured on a 2-core machine; perfkit advise --measure times it on this one",
}


def run_loader_batch_cost(run: Run) -> tuple[float, str]:
    """(what handing one batch from a loader worker over costs each side in ``run``'s loader,
    ns; where it was found, a key of ``LOADER_BATCH_SOURCES``): what the step timer timed on
    the machine that trained when it saved the run (``loader_batch_ns`` in its record:
    ``StepTimer.save``), else the model's ``loader_batch_cost`` of the run's framework."""
    record = run.meta.get(META_KEY) or {}
    timed = finite_number(record.get(LOADER_BATCH_KEY))
    if timed is not None and timed > 0:
        return timed, TRAINING_MACHINE
    return loader_batch_cost(run.framework), MODEL_COST


#: Where ``run_loader_receive_cost`` found what receiving a batch costs the training step (the
#: finding's ``loader_receive_from``), and how a finding's estimate says so.
RECEIVE_TIMED = TRAINING_MACHINE
RECEIVE_AS_SENDING = "hand-over"
#: ... and where ``perfkit advise --measure`` timed it on this machine in its place (Paddle's
#: replay, ``perfkit_paddle.replay``).
RECEIVE_REPLAY = "replay"
LOADER_RECEIVE_SOURCES = {
    RECEIVE_TIMED: (
        f"{TIMED_AT_SAVE}: a replayed training step (forward, backward and optimizer) fed by one "
        "worker against the same step on a batch in hand"
    ),
    RECEIVE_AS_SENDING: "each side pays the hand-over",
    RECEIVE_REPLAY: (
        "timed on this machine by perfkit advise --measure: a replayed training step (forward, "
        "backward and optimizer) fed by one worker against the same step on a batch in hand"
    ),
}


def run_loader_receive_cost(run: Run, batch_ns: float) -> tuple[float, str]:
    """(what receiving one batch from a loader worker adds to ``run``'s training step, ns;
    where it was found, a key of ``LOADER_RECEIVE_SOURCES``): what the step timer timed on the
    machine that trained when it saved the run (``loader_receive_ns`` in its record, from the
    adapter's ``perfkit_loader_receive_ns``: Paddle's), else ``batch_ns``, the hand-over's
    cost: the training process pays it as the worker does.

    Receiving is not free beside a busy training thread even where the batch arrives in
    shared memory: Paddle's DataLoader hands each batch to the training thread through a
    reader thread of the training process (and sends each batch's indices through a feeder
    thread), and those threads take the GIL that the training thread's ops hand over at each
    op. Replayed on a 2-core x86 KVM machine (Paddle 3.3.1), one worker of ready batches
    lengthened a step of small ops by 0.4 to 1.2 ms (its hand-over to an idle process: 0.5 to
    0.8 ms), about as much whatever the step's length (1.8 to 11 ms), and the ``perfkit
    demo`` loop's step by 0.4 to 1.1 ms, where the training thread alone spent 0.04 ms of CPU
    per batch taking it from the queue. That replay's step of forward ops alone read 1.3 to 3.2
    times what receiving added to ``bench/bench_advice.py``'s paddle-loader step (0.09 to 0.39
    ms); Paddle's replay now times a small MLP's whole training step, its backward and
    optimizer step too (``perfkit_paddle.replay``), which read 0.5 to 2.1 times it (once 3.9
    times, an outlier)."""
    record = run.meta.get(META_KEY) or {}
    timed = finite_number(record.get(LOADER_RECEIVE_KEY))
    if timed is not None and timed >= 0:
        return timed, RECEIVE_TIMED
    return batch_ns, RECEIVE_AS_SENDING


#: Where ``run_slowdowns`` found how much a worker on a free core and the training step slow
#: each other (the finding's ``slowdown_from``), and how a finding's estimate says so.
SLOWDOWN_TIMED = TRAINING_MACHINE
SLOWDOWN_REPLAY = "replay"
SLOWDOWN_NONE = "not timed"
SLOWDOWN_SOURCES = {
    SLOWDOWN_TIMED: TIMED_AT_SAVE,
    SLOWDOWN_REPLAY: "timed on this machine by perfkit advise --measure",
    SLOWDOWN_NONE: "not timed on the machine that trained: a step timer's save times it",
}


#: A slowdown at least this large says that the two cores share one physical core's hardware.
SHARED_CORE_SLOWDOWN = 1.15


def run_slowdowns(run: Run) -> tuple[tuple[float, float], str]:
    """((how many times as long the training step's work takes beside a loader worker as
    alone, how many times as long the worker's loading takes beside the training step), where
    they were found, a key of ``SLOWDOWN_SOURCES``): what the step timer timed on the machine
    that trained when it saved the run (``training_slowdown`` and ``loading_slowdown`` in its
    record, ``perfkit_core.advice.corun``), else (1, 1): a free core as fast as an idle one."""
    record = run.meta.get(META_KEY) or {}
    pair = slowdown_pair(record.get(TRAINING_SLOWDOWN_KEY), record.get(LOADING_SLOWDOWN_KEY))
    return ((1.0, 1.0), SLOWDOWN_NONE) if pair is None else (pair, SLOWDOWN_TIMED)


def slowdown_factors(slowdowns: tuple[float, float], source: str) -> tuple[str, str]:
    """The factors an input-pipeline estimate's formula shows on the rest of the step and on
    the loading (" x 1.27"), or "" for both where the slowdowns were not timed or are both 1."""
    if source == SLOWDOWN_NONE or slowdowns == (1.0, 1.0):
        return "", ""
    return f" x {slowdowns[0]:.2f}", f" x {slowdowns[1]:.2f}"


def slowdown_text(slowdowns: tuple[float, float], source: str, framework: str) -> str:
    """The sentence of an input-pipeline estimate that says how much a worker on a free core
    and the training step slow each other (``slowdowns``, found where ``source`` says)."""
    if source == SLOWDOWN_NONE:
        return (
            "A worker and the training step are taken to run as fast beside each other as "
            f"alone ({SLOWDOWN_SOURCES[source]})."
        )
    training, loading = slowdowns
    if training == loading == 1.0:
        return (
            f"Beside each other on two cores, {framework or 'the framework'}'s ops and a "
            f"Dataset's Python work ran as fast as alone ({SLOWDOWN_SOURCES[source]})."
        )
    shared = (
        ": the free core shares the training core's hardware (a hyperthread of the same "
        "physical core)"
        if max(training, loading) >= SHARED_CORE_SLOWDOWN
        else ""
    )
    return (
        f"Beside each other on two cores, {framework or 'the framework'}'s ops ran "
        f"{training:.2f} times and a Dataset's Python work {loading:.2f} times as long as alone "
        f"({SLOWDOWN_SOURCES[source]}){shared}."
    )


def loader_saving(
    data_ns: float,
    rest_ns: float,
    workers: float,
    batch_ns: float = LOADER_BATCH_NS,
    contention_ns: float = 0.0,
    receive_ns: float | None = None,
    slowdowns: tuple[float, float] = (1.0, 1.0),
) -> float:
    """The step time (ns) that ``workers`` loader workers save when the step is ``data_ns`` of
    loading, ``rest_ns`` of the rest and ``contention_ns`` besides (beside a loading thread of
    the training process, ``thread_split``: what the two threads' own work leaves of the step,
    negative where they ran at once on two cores): a worker hands each batch over at
    ``batch_ns`` and the training process receives it at ``receive_ns`` (by default the same),
    so the step becomes the longer of the rest plus receiving a batch and the loading plus
    sending it, spread over the workers; the contention goes with the thread. Beside each
    other, the rest takes ``slowdowns[0]`` times and the loading ``slowdowns[1]`` times as
    long as alone (``run_slowdowns``: a free core that shares the training core's hardware).
    It assumes each worker has a core of its own (on a machine whose cores are busy, the
    workers slow the training process instead)."""
    if workers <= 0:
        return 0.0  # no core free: a worker only takes CPU from the training process
    after = max(remedied_sides(data_ns, rest_ns, workers, batch_ns, receive_ns, slowdowns))
    return max(data_ns + rest_ns + contention_ns - after, 0.0)


def remedied_sides(
    data_ns: float,
    rest_ns: float,
    workers: float,
    batch_ns: float = LOADER_BATCH_NS,
    receive_ns: float | None = None,
    slowdowns: tuple[float, float] = (1.0, 1.0),
) -> tuple[float, float]:
    """(the rest of the step plus receiving a batch, the loading plus sending it spread over
    the ``workers``), ns per step, each side slowed as beside the other: the step with loader
    workers is the longer of the two (``loader_saving``, whose arguments these are; ``workers``
    more than 0)."""
    receive = batch_ns if receive_ns is None else receive_ns
    training, loading = slowdowns
    return rest_ns * training + receive, (data_ns * loading + batch_ns) / workers


def shared_turn_saving(
    step_ns: float,
    cpu_ns: float,
    data_ns: float,
    rest_ns: float,
    process_cores: float,
    usable_cores: float,
    batch_ns: float = LOADER_BATCH_NS,
    receive_ns: float | None = None,
    slowdowns: tuple[float, float] = (1.0, 1.0),
) -> float:
    """The step time (ns) one loader worker saves a training process that loads in a thread of
    its own on a machine whose cores other work keeps busy (no core free): the scheduler shares
    the cores among the busy processes, the training process had ``process_cores`` of the
    ``usable_cores`` (its step of ``step_ns`` ran ``cpu_ns`` of both threads' CPU time), and a
    worker is one more process with a turn as long: the training process's turn shrinks from
    ``process_cores`` to ``process_cores * usable / (usable + process_cores)``, and the worker
    loads beside it instead of between its ops. The step becomes the longer of
    ``remedied_sides`` (one worker) at that turn, ``step_ns * longer / cpu_ns`` made
    ``(usable + process_cores) / usable`` times as long; 0 where a figure is missing."""
    if min(step_ns, cpu_ns, process_cores, usable_cores) <= 0:
        return 0.0
    longer = max(remedied_sides(data_ns, rest_ns, 1.0, batch_ns, receive_ns, slowdowns))
    after = step_ns * longer / cpu_ns * (usable_cores + process_cores) / usable_cores
    return max(step_ns - after, 0.0)


#: What each op of the training thread costs its CPU time when a loading thread of the same
#: process runs beside it (ns per op): the GIL passes to the loading thread around the op and
#: back, a wake-up each way. The step timer's ``save`` times it on the machine that trained
#: (``perfkit_thread_op_ns``: Paddle's ``perfkit_paddle.replay.thread_op_ns``), and
#: ``perfkit advise --measure`` on the machine that reads the run; this figure serves where
#: neither did. On a 2-core x86 KVM machine (Paddle 3.3.1) that replay gave 7 to 12 us in one
#: day's sessions and 19 to 25 us on the next, and the training thread's CPU time per step
#: beside bench/bench_advice.py's single-process DataLoader less its CPU time fed by one
#: worker, per op, moved with it (9 to 16 us; then 12 to 37 us, and 7 to 14 us an hour later):
#: the cost is the machine's (its system calls and wake-ups), so it is timed where it can be.
THREAD_OP_NS = 20_000.0

#: What the same hand-over costs the loading thread, as a share of what it costs the training
#: thread. The loading thread's own CPU time per batch grows more than the training thread's
#: beside training (16 to 50 us per training op on the 2-core machine above, against its time
#: alone in the training process), but a worker that takes its loading over runs slower than
#: alone too, on a machine whose other core the training process keeps busy with its own
#: threads: by about as much. Half the training thread's cost put the remedied step within
#: -7% to +3% of the step one worker gave, in rounds where loading bounded it (bench/README.md).
LOADING_OP_SHARE = 0.5


#: Where ``run_thread_op_cost`` found what each op of the training thread costs beside a
#: loading thread (the finding's ``thread_op_from``), and how a finding's estimate says so.
THREAD_OP_SOURCES = {
    TRAINING_MACHINE: TIMED_AT_SAVE,
    MODEL_COST: "perfkit's figure where the step timer did not time it; perfkit advise "
    "--measure times it on this machine",
}


def run_thread_op_cost(run: Run) -> tuple[float, str]:
    """(what each op of ``run``'s training thread cost its CPU time beside a loading thread of
    the training process, ns; where it was found, a key of ``THREAD_OP_SOURCES``): what the
    step timer timed on the machine that trained when it saved the run (``thread_op_ns`` in
    its record), else ``THREAD_OP_NS``."""
    record = run.meta.get(META_KEY) or {}
    timed = finite_number(record.get(THREAD_OP_KEY))
    if timed is not None and timed >= 0:
        return timed, TRAINING_MACHINE
    return THREAD_OP_NS, MODEL_COST


def thread_split(
    step_ns: float,
    loading_cpu_ns: float,
    training_cpu_ns: float,
    ops_per_step: float,
    op_ns: float = THREAD_OP_NS,
) -> tuple[float, float, float]:
    """(loading, rest of the step, contention), ns per step, of a step of ``step_ns`` (the mean
    step) in which a loading thread of the training process spent ``loading_cpu_ns`` of CPU
    time beside the training thread's ``training_cpu_ns`` and ``ops_per_step`` ops: each thread
    alone takes its CPU time less its hand-overs (``handover_ns``: ``op_ns`` per op to the
    training thread, ``LOADING_OP_SHARE`` of that to the loading thread, handing the GIL over
    and back: the loading, and the rest), and the contention is what is left of the step (the
    training thread's waits for the GIL and for batches; negative where the two threads ran at
    once on two cores, as a loading thread's Python does while the training thread's ops run
    outside the GIL). The three add up to the step."""
    training_side, loading_side = handover_ns(loading_cpu_ns, training_cpu_ns, ops_per_step, op_ns)
    rest = max(training_cpu_ns - training_side, 0.0)
    loading = max(loading_cpu_ns - loading_side, 0.0)
    return loading, rest, step_ns - loading - rest


def handover_ns(
    loading_cpu_ns: float,
    training_cpu_ns: float,
    ops_per_step: float,
    op_ns: float = THREAD_OP_NS,
) -> tuple[float, float]:
    """What handing the GIL over and back costs (the training thread, the loading thread) per
    step (ns): ``op_ns`` per op of the training thread to it, but no more than either thread's
    CPU time (a hand-over happens only when the loading thread has work to take the GIL for,
    so the training thread cannot have paid more for them than that thread ran), and
    ``LOADING_OP_SHARE`` of that to the loading thread."""
    training = max(ops_per_step, 0.0) * max(op_ns, 0.0)
    training = min(training, max(training_cpu_ns, 0.0), max(loading_cpu_ns, 0.0))
    return training, training * LOADING_OP_SHARE


def handover_exceeds_loading(
    loading_cpu_ns: float, ops_per_step: float, op_ns: float = THREAD_OP_NS
) -> bool:
    """Whether ``op_ns`` per op of the training thread comes to at least the loading thread's
    whole CPU time: the model cannot then tell the thread's loading from its hand-overs (a
    loading thread that runs framework ops of its own, such as a Dataset of tensors sliced
    per sample, releases the GIL at each), and ``handover_ns`` caps the training thread's
    hand-overs at that CPU time."""
    return max(ops_per_step, 0.0) * max(op_ns, 0.0) >= max(loading_cpu_ns, 0.0)


def loader_figures(evidence: dict[str, Any]) -> tuple[float, float, float] | None:
    """(the loading workers would take over, the rest of the step, the workers) that an
    input-pipeline finding's saving was stated on (ns per step, ns per step, workers: one per
    free core, and the ``loader_waiting_workers`` besides for a Dataset that waits), from its
    evidence; None when any is missing or not a number, or for a loader that had workers
    (``loader_workers``, or ``loader_workers_untimed``: workers no step timer timed), whose
    saving ``advice.loader_workers`` states from other figures."""
    if "loader_workers" in evidence or "loader_workers_untimed" in evidence:
        return None
    figures = [evidence.get(k) for k in ("loading_per_step_ns", "rest_per_step_ns", "free_cores")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in figures):
        return None
    loading, rest, workers = (float(v) for v in figures)  # type: ignore[arg-type]
    if workers >= 1:
        workers += waiting_workers(evidence)
    return loading, rest, workers


def loader_slowdowns(evidence: dict[str, Any]) -> tuple[float, float]:
    """The (rest of the step's, loading's) slowdowns beside a worker that an input-pipeline
    finding's saving was stated on (``training_slowdown``, ``loading_slowdown``), both 1 where
    either is missing, not a number or under 1 (the rule states both or neither)."""
    pair = slowdown_pair(evidence.get("training_slowdown"), evidence.get("loading_slowdown"))
    return (1.0, 1.0) if pair is None else pair


def replay_slowdown_evidence(slowdowns: tuple[float, float]) -> dict[str, Any]:
    """The evidence of an input-pipeline finding whose saving a replay stated with the
    slowdowns it timed on this machine (``perfkit_core.advice.corun``), in place of the
    run's."""
    training, loading = slowdowns
    return {
        "training_slowdown": training,
        "loading_slowdown": loading,
        "slowdown_from": SLOWDOWN_REPLAY,
    }


def replay_figures(evidence: dict[str, Any]) -> tuple[float, float, float] | None:
    """``loader_figures`` of a finding an adapter's replay can improve on: None as well when it
    moves no loading, or when no core is free (no worker saves anything then, whatever a
    hand-over costs, so there is nothing to time)."""
    figures = loader_figures(evidence)
    if figures is None or figures[0] <= 0 or figures[2] <= 0:
        return None
    return figures


def delivery_ns(
    iterator: Iterator[Any], *, warmup: int = 6, rounds: int = 7, batches: int = 20
) -> float:
    """ns per batch that ``iterator`` (a loader's) delivers to a caller that does nothing else:
    ``warmup`` batches untimed, then the median of ``rounds`` rounds of ``batches`` batches.
    The adapters' replays time their loaders' hand-over with it."""
    for _ in range(warmup):
        next(iterator)
    timed = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(batches):
            next(iterator)
        timed.append((time.perf_counter_ns() - start) / batches)
    return statistics.median(timed)


def measured_loader_estimate(
    batch_ns: float,
    model_batch_ns: float,
    data_ns: float,
    rest_ns: float,
    workers: float,
    saving_ns: float,
    extra: str = "",
    receive_ns: float | None = None,
    slowdowns: tuple[float, float] = (1.0, 1.0),
    framework: str = "",
    waiting: int = 0,
) -> str:
    """The estimate sentence of an input-pipeline finding whose hand-over cost a replay timed
    (``batch_ns``, where the finding's own estimate took ``model_batch_ns``: its
    ``loader_batch_ns``), with the loading, the rest of the step, the workers (one per free
    core, and ``waiting`` of them besides for a Dataset that waits), what
    receiving a batch costs the training process (``receive_ns``, by default ``batch_ns``) and
    how much the two sides slow each other (``slowdowns``, replayed on this machine) it was
    stated on, and ``extra`` (a sentence or "") between."""
    receive = batch_ns if receive_ns is None else receive_ns
    rest_x, load_x = slowdown_factors(slowdowns, SLOWDOWN_REPLAY)
    with_workers = (
        f"{workers:.1f} free core(s)"
        if not waiting
        else f"{workers:.0f} workers ({workers - waiting:.0f} for the free core(s) and "
        f"{waiting} besides, for a Dataset that waits)"
    )
    return (
        f"Measured on this machine: one DataLoader worker handed a batch of features and "
        f"labels to the training process every {batch_ns / 1e6:.3f} ms when neither did "
        f"other work (the estimate without --measure took {model_batch_ns / 1e6:.3f} ms)."
        f"{extra} {slowdown_text(slowdowns, SLOWDOWN_REPLAY, framework)} With "
        f"{with_workers}, the step becomes the longer of the rest of the "
        f"step plus receiving a batch ({rest_ns / 1e6:.3f}{rest_x} + "
        f"{receive / 1e6:.3f} ms) and the loading plus sending it, spread over the workers "
        f"(({data_ns / 1e6:.3f}{load_x} + {batch_ns / 1e6:.3f}) / {workers:.1f} ms)"
        + ("; no saving is expected." if saving_ns <= 0 else ".")
    )
