"""What a loader worker on a free core costs the work beside it: the two busy cores' slowdown.

A loader worker needs a core of its own, and the input-pipeline model counts the cores idle
while training ran. An idle core is not always a whole one: a virtual machine's two vCPUs are
often the two hyperthreads of one physical core, which share its execution units and caches,
so that once a worker keeps the second busy, the training step and the worker's loading each
run slower than they did alone. On a 2-core x86 KVM machine, in minutes when its vCPUs ran on
one physical core, a Dataset's Python work ran 1.7 to 1.8 times as long beside a training
step as alone, and a 512-wide MLP's training step 1.2 to 1.3 times; minutes later, on separate
cores, both ran as fast as alone; the replay below gave the same two figures as those two
workloads in the same seconds (1.75 and 1.30, then 1.0 and 1.0).

``corun_slowdowns`` times both: a unit of the framework's ops (the adapter's, on one intra-op
thread) and a unit of Python work like a Dataset's per-sample augmentation (``loading_work``),
each alone, then each while the other runs in a second process. The step timer records the two
on the machine that trained (``perfkit_corun_slowdowns``), and ``perfkit advise --measure``
times them again on the machine that reads the run."""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

#: The Python work that stands in for a Dataset's: per sample, small numpy transforms of this
#: many floats (normalise, clip, reverse, sort) and a pure-Python pass over a few fields, the
#: interpreter-bound work of a typical per-sample augmentation.
LOADING_SAMPLE_FLOATS = 96
#: Each timed unit of work runs about this long alone (ns), and the replay takes the median of
#: this many rounds (a round: each work alone, then each beside the other).
CORUN_UNIT_NS = 5_000_000.0
CORUN_ROUNDS = 9
#: Beside the other work, the timed side runs this many units, so that the other process,
#: started first and stopped after, is busy the whole time.
CORUN_UNITS_BESIDE = 3
#: How long the replay waits for its second process to start, answer or stop (s).
CORUN_TIMEOUT_S = 20.0


def loading_work(samples: int) -> float:
    """Run ``samples`` samples of the Python work that stands in for a Dataset's; return a
    number made from them (so that none of it is optimised away)."""
    import numpy as np

    total = 0.0
    x = np.linspace(-1.0, 1.0, LOADING_SAMPLE_FLOATS)
    for index in range(samples):
        y = (x - x.mean()) / (x.std() + 1e-6)
        y = np.clip(y * 1.01 + 0.1 * (index % 3), -2.0, 2.0)[::-1]
        y = np.sort(np.tanh(y))
        label, weight, name = index % 10, float(y[0]), f"sample-{index}"
        record = {"label": label, "weight": weight, "name": name}
        total += weight + len(str(record["name"])) + label
        x = y
    return total


def _calibrate(work: Callable[[int], Any], unit_ns: float) -> int:
    """How many of ``work``'s items run about ``unit_ns`` alone here (at least 1)."""
    count = 1
    while True:
        start = time.perf_counter_ns()
        work(count)
        took = time.perf_counter_ns() - start
        if took >= unit_ns / 4 or count >= 1 << 24:
            return max(int(count * unit_ns / max(took, 1)), 1)
        count *= 4


def _loading_process(conn: Any, samples: int) -> None:
    """The second process: on ``"alone"``, time one unit of loading work and send the ns; on
    ``"beside"``, run units until ``"stop"`` arrives and send each unit's ns but the last
    (which ran partly after the other side had stopped); on None, end."""
    while True:
        command = conn.recv()
        if command is None:
            return
        if command == "alone":
            start = time.perf_counter_ns()
            loading_work(samples)
            conn.send([time.perf_counter_ns() - start])
            continue
        times = []
        conn.send("busy")
        while not conn.poll():
            start = time.perf_counter_ns()
            loading_work(samples)
            times.append(time.perf_counter_ns() - start)
        conn.recv()  # "stop"
        conn.send(times[1:-1] or times[-1:])  # the first may have started before the other


def corun_slowdowns(
    training_work: Callable[[int], Any],
    *,
    unit_ns: float = CORUN_UNIT_NS,
    rounds: int = CORUN_ROUNDS,
) -> tuple[float, float]:
    """(how many times as long a unit of ``training_work`` takes while a second process runs
    ``loading_work``, how many times as long a unit of ``loading_work`` takes in that process
    while ``training_work`` runs here): the median over ``rounds`` rounds of each beside the
    other against each alone in the same round, each at least 1 (a busy core does not speed
    the other; less is the machine's noise). ``training_work(n)`` runs ``n`` items of the
    framework's ops on one intra-op thread. Raises OSError or RuntimeError when the second
    process cannot start or does not answer."""
    train_items = _calibrate(training_work, unit_ns)
    load_items = _calibrate(loading_work, unit_ns)
    context = multiprocessing.get_context()
    here, there = context.Pipe()
    process = context.Process(target=_loading_process, args=(there, load_items), daemon=True)
    process.start()
    training: list[float] = []
    loading: list[float] = []

    def answer() -> Any:
        if not here.poll(CORUN_TIMEOUT_S):
            raise RuntimeError("the co-run replay's second process did not answer")
        return here.recv()

    try:
        for _ in range(rounds):
            here.send("alone")
            load_alone = statistics.median(answer())
            start = time.perf_counter_ns()
            training_work(train_items)
            train_alone = time.perf_counter_ns() - start
            here.send("beside")
            answer()  # "busy": the loading runs
            start = time.perf_counter_ns()
            training_work(train_items * CORUN_UNITS_BESIDE)
            train_beside = (time.perf_counter_ns() - start) / CORUN_UNITS_BESIDE
            here.send("stop")
            load_beside = statistics.median(answer())
            training.append(train_beside / max(train_alone, 1))
            loading.append(load_beside / max(load_alone, 1))
        here.send(None)
    finally:
        process.join(CORUN_TIMEOUT_S)
        if process.is_alive():
            process.terminate()
            process.join()
        here.close()
        there.close()
    return max(statistics.median(training), 1.0), max(statistics.median(loading), 1.0)
