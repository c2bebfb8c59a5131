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
thread) and a unit of Python work like a Dataset's per-sample augmentation
(``corun_loading.loading_work``), each alone, then each while the other runs in a second
process (a fresh interpreter running ``corun_loading``). The step timer records the two
on the machine that trained (``perfkit_corun_slowdowns``), and ``perfkit advise --measure``
times them again on the machine that reads the run."""

from __future__ import annotations

import os
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from perfkit_core.advice import corun_loading
from perfkit_core.advice.corun_loading import unit_items

#: Each timed unit of work runs about this long alone (ns), and the replay takes the median of
#: this many rounds (a round: each work alone, then each beside the other).
CORUN_UNIT_NS = 5_000_000.0
CORUN_ROUNDS = 9
#: Beside the other work, the timed side runs this many units, so that the other process,
#: started first and stopped after, is busy the whole time; alone, each side runs as many.
CORUN_UNITS_BESIDE = 3
#: How long the replay waits for its second process to start, answer or stop (s).
CORUN_TIMEOUT_S = 20.0


class _LoadingProcess:
    """The second process: a fresh interpreter running ``corun_loading`` on units of about
    ``unit_ns`` of loading work (as it finds them), spoken to a line at a time."""

    def __init__(self, unit_ns: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, corun_loading.__file__, repr(float(unit_ns))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.pending = b""

    def say(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command.encode() + b"\n")
        self.process.stdin.flush()

    def answer(self) -> list[str]:
        """The next line the process answers, as words; RuntimeError after
        ``CORUN_TIMEOUT_S`` without one, or when it ends."""
        assert self.process.stdout is not None
        out = self.process.stdout.fileno()
        deadline = time.monotonic() + CORUN_TIMEOUT_S
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise RuntimeError("the co-run replay's second process did not answer")
            chunk = os.read(out, 4096)
            if not chunk:
                raise RuntimeError("the co-run replay's second process ended")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode().split()

    def times(self) -> float | None:
        """The median of the unit times (ns) in the next answer; None when it timed none."""
        words = self.answer()
        return statistics.median(float(word) for word in words) if words else None

    def close(self) -> None:
        try:
            self.say("end")
            self.process.wait(CORUN_TIMEOUT_S)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()


def corun_slowdowns(
    training_work: Callable[[int], Any],
    *,
    unit_ns: float = CORUN_UNIT_NS,
    rounds: int = CORUN_ROUNDS,
) -> tuple[float, float]:
    """(how many times as long a unit of ``training_work`` takes while a second process runs
    ``corun_loading.loading_work``, how many times as long a unit of it takes in that process
    while ``training_work`` runs here): the least over ``rounds`` rounds of each beside the
    other against each alone in the same round, each at least 1 (a busy core does not speed
    the other; less is the machine's noise). The least, not the median: two hyperthreads of
    one core slow each other in every round, while a burst of another tenant's work on a
    shared host slows some rounds for a fraction of a second, and a worker that runs for the
    rest of training meets the first, not the second. On a 2-core KVM machine, in one
    benchmark run, four of sixteen 0.5 s replays caught bursts of up to 1.56 and 1.64 to
    1.92 in most of their rounds (their medians), while the same slowdowns timed after each
    of 41 rounds of a loop (about 15 s) had medians of 1.00 and 1.01 to 1.04 in every
    session. ``training_work(n)`` runs ``n`` items of the
    framework's ops on one intra-op thread. A round in which the second process ran no whole
    unit beside this one is left out. Raises OSError or RuntimeError when the second process
    cannot start or does not answer, or when it ran a whole unit beside this one in fewer than
    half the rounds."""
    train_items = unit_items(training_work, unit_ns)
    other = _LoadingProcess(unit_ns)
    training: list[float] = []
    loading: list[float] = []
    try:
        for _ in range(rounds):
            other.say("alone")
            load_alone = other.times()
            start = time.perf_counter_ns()
            training_work(train_items * CORUN_UNITS_BESIDE)
            train_alone = (time.perf_counter_ns() - start) / CORUN_UNITS_BESIDE
            other.say("beside")
            other.answer()  # "busy": the loading runs
            start = time.perf_counter_ns()
            training_work(train_items * CORUN_UNITS_BESIDE)
            train_beside = (time.perf_counter_ns() - start) / CORUN_UNITS_BESIDE
            other.say("stop")
            load_beside = other.times()
            if load_alone is None or load_beside is None:
                continue  # the other side stopped before a whole unit ran beside this one
            training.append(train_beside / max(train_alone, 1))
            loading.append(load_beside / max(load_alone, 1))
    finally:
        other.close()
    if len(training) < max(rounds // 2, 1):
        raise RuntimeError("the co-run replay's second process ran too few units beside this one")
    return max(min(training), 1.0), max(min(loading), 1.0)
