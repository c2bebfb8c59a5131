"""Runs whose loader already had worker processes: what more workers would save.

The input-pipeline model of ``advice.loader`` moves loading out of the training process. A run
whose DataLoader already loaded in worker processes (``_MultiProcessingDataLoaderIter``,
``_DataLoaderIterMultiProcess``) has nothing left to move: its training thread waits for
batches the workers have not made yet. The step timer times those workers as the training
process's child processes (``children_cores``, ``children_ran``), so their CPU time per step
is what making and sending a batch costs them. More workers, one per core left free, spread
that cost further, and the step becomes the longest of the rest of the step plus receiving a
batch, the workers' pace and both processes' CPU per step over the cores they may use
together (``WorkerFigures``). The workers' pace is the longer of their CPU per step over the
cores they may use and the time a worker takes over a batch (the step times the workers the
run had: each step took one batch) spread over the workers: a worker waits for its reads as
well as computing, and more workers wait beside each other.

A run whose loader had workers that no step timer timed (a trace loaded from a file, a run
recorded without ``perfkit_core.step_timer``, workers started by another thread) says neither
how many there were nor what a batch cost them: ``untimed_workers_estimate`` states what more
of them can take off at most, the waits for batches less receiving one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfkit_core.advice.loader_cores import ROUNDED, UNTIMED_KEY, process_count, processes_text
from perfkit_core.advice.text import duration_text
from perfkit_core.capture.machine_costs import finite_number
from perfkit_core.views.common import names_of_kind

if TYPE_CHECKING:
    from collections.abc import Iterable

    from perfkit_core.events.run import Run


#: A loader that had workers gets one more for each core, whole or part, left free where at
#: least this much of one is (cores): the saving is bounded by the cores as found, unrounded,
#: so a worker on part of a core promises only what that part gives. On the 2-core machine one
#: worker beside a small model (``bench/bench_advice.py``'s ``torch-workers`` and
#: ``paddle-workers``) left 0.49 to 0.72 of a core in six profiles, and a second worker
#: delivered 22% to 40% of the step in each, the one that left 0.49 included (rounded to
#: whole cores, that profile promised nothing). Under a quarter of a core is within what the
#: machine's idle time, in clock ticks, can be off (``loader_cores.IDLE_RESOLUTION_CORES``).
MIN_FREE_CORE = 0.25


def more_workers(left: float) -> int:
    """The workers to add for ``left`` cores free (unrounded): one for each whole or partial
    core, none under ``MIN_FREE_CORE``."""
    return math.ceil(left - 1e-9) if left >= MIN_FREE_CORE else 0


#: Workers that spend part of each batch waiting (for reads from a slow disk or a network
#: share) take little CPU, so a loader that had them gets more than a worker per free core:
#: as many as take the step down, but no more than this many for each core the training
#: process and its workers may use. Each worker is a process holding its own copy of the
#: Dataset and its prefetched batches, and torch warns once they outnumber the CPUs; past a
#: few per core, reads that wait that long are better issued asynchronously within a worker.
MAX_WORKERS_PER_CORE = 4
#: ... and enough of them that they make a batch in at most this share of the time the rest of
#: the step (or the machine's cores) would take: a pace that only just keeps up leaves their
#: queue empty, so every batch that takes longer (a slow read) holds the step, while a faster
#: pace fills the prefetched batches, which absorb it. On the 2-core machine, a Dataset asleep
#: through 8 ms of each batch fed the 2-block MLP at 2.95 ms a step with 4 workers, the count
#: whose pace just met the rest of the step as modelled (2.58 ms), 2.44 ms with 5 and 2.05 ms
#: with 6, the count at three quarters of it (bench/README.md).
WORKER_PACE_SHARE = 0.75


def waiting_loader_workers(
    load_ns: float,
    load_cpu_ns: float,
    rest_ns: float,
    free: int,
    all_cores: float,
    batch_ns: float,
    receive_ns: float,
    slowdowns: tuple[float, float] = (1.0, 1.0),
) -> int:
    """How many loader workers to move loading to that the training thread did itself, between
    its steps' work, taking ``load_ns`` per step of which ``load_cpu_ns`` ran on its CPU (the
    step timer's ``data`` and ``data_cpu`` phases), with ``free`` whole cores free: one per
    free core, and where the Dataset waits (for reads, a sleep) enough of each batch that those
    workers would make a batch slower than ``WORKER_PACE_SHARE`` of the rest of the step plus
    receiving one, as many more as bring a worker's batch time (its loading plus sending the
    batch) spread over them down to that, the fewest that do. Never more than the free cores
    can keep computing (a worker's CPU per batch over the free cores bounds their pace; a
    Dataset that computes throughout gets a worker per free core) nor more than
    ``MAX_WORKERS_PER_CORE`` per core of ``all_cores``. Beside the workers, the rest of the step
    and the loading take ``slowdowns`` times as long as alone (``loader.remedied_sides``)."""
    if free < 1:
        return max(free, 0)
    rest_x, load_x = slowdowns
    kept = rest_ns * rest_x + receive_ns
    batch_time = load_ns * load_x + batch_ns  # a worker's time over a batch, its waits included
    batch_cpu = min(load_cpu_ns, load_ns) * load_x + batch_ns
    target = WORKER_PACE_SHARE * kept
    if target <= 0 or batch_cpu <= 0 or batch_time / free <= target:
        return free
    by_cpu = math.floor(free * batch_time / batch_cpu + 1e-9)
    cap = math.floor(MAX_WORKERS_PER_CORE * all_cores)
    return max(min(math.ceil(batch_time / target - 1e-9), by_cpu, cap), free)


def waiting_workers_text(
    free: int, waiting: int, cores: str, load_ns: float, load_cpu_ns: float
) -> str:
    """The start of the input-pipeline estimate's sentence on the workers, where
    ``waiting_loader_workers`` gave ``waiting`` more than the ``free`` cores (found as
    ``cores`` says) to a Dataset whose loading took ``load_ns`` per step, ``load_cpu_ns`` of it
    on the training thread's CPU; it ends where the step's two sides follow ("The step
    becomes ")."""
    return (
        f"{free + waiting} workers: one for each of the {free} free core(s) ({cores}) and "
        f"{waiting} besides. The Dataset spent {duration_text(load_ns - load_cpu_ns)} of its "
        f"{duration_text(load_ns)} per step waiting (for reads, a sleep), not on a CPU (its CPU "
        f"time, {duration_text(load_cpu_ns)}, timed as the training thread's while it took its "
        "batches), and a worker's waits take no core: the count is the fewest workers that make "
        f"a batch in at most {WORKER_PACE_SHARE:g} of the rest of the step plus receiving one (a "
        "pace that only just keeps up leaves no batch ready when a read is slow), and no more "
        "than the free cores can keep computing. The step becomes "
    )


def multi_process_loader(run: Run) -> bool:
    """Whether the run's data-loading spans are a multi-process iterator's (torch's
    ``_MultiProcessingDataLoaderIter``, Paddle's ``_DataLoaderIterMultiProcess``): its loader
    had worker processes."""
    return multi_process_names(names_of_kind(run, "dataloader"))


def multi_process_names(names: Iterable[str]) -> bool:
    """``multi_process_loader`` of the data-loading spans' ``names``, already read."""
    return any("MultiProcess" in name for name in names)


def timed_workers(run: Run) -> tuple[int, float, float] | None:
    """(how many worker processes the run's loader had, the cores they kept busy while the
    steps ran without the profiler, the cores the training process kept busy then), for a run
    whose loader had workers (``multi_process_loader``), where the step timer timed its child
    processes (``children_ran`` of 1 or more, ``children_cores`` over 0) and the process
    (``process_cores``); else None."""
    record = run.meta.get("step_timer") or {}
    ran = process_count(record.get("children_ran"))
    cores = finite_number(record.get("children_cores"))
    process = finite_number(record.get("process_cores"))
    if ran is None or cores is None or cores <= 0 or process is None or process < 0:
        return None
    return ran, cores, process


@dataclass(frozen=True)
class WorkerFigures:
    """What a step with loader workers is made of (ns per step, and cores): the step without
    the profiler; the training thread's own work, all but its waits for batches (``rest_ns``);
    what receiving a batch adds to it; the CPU time the workers and the training process
    (all its threads) spent; the workers the run had, the cores they may use in all (those
    they kept busy and those left free, unrounded) and the cores the training process and its
    workers may use together (those they kept busy and those left free)."""

    step_ns: float
    rest_ns: float
    receive_ns: float
    workers_cpu_ns: float
    process_cpu_ns: float
    had: int
    worker_cores: float
    all_cores: float

    @property
    def batch_ns(self) -> float:
        """How long a worker took over each batch it made (ns): the step times the workers the
        run had, since each step took one batch and the workers took turns. Only
        ``workers_cpu_ns`` of it ran on a CPU; the rest the worker waited: for its reads, a
        lock, a core, or, where it was ahead, for the step to ask for another batch (then the
        step hardly waited, and ``rest_ns`` bounds what more workers save)."""
        return self.step_ns * self.had

    def paces(self, workers: float) -> tuple[float, float]:
        """(a batch every so often with ``workers`` workers, each taking ``batch_ns`` over a
        batch, their waits beside each other's; the workers' CPU per step spread over
        ``workers``, a core each but no more than ``worker_cores`` in all), ns."""
        return (
            self.batch_ns / max(workers, 1e-9),
            self.workers_cpu_ns / max(min(workers, self.worker_cores), 1e-9),
        )

    def sides(self, workers: float) -> tuple[float, float, float]:
        """(the rest of the step plus receiving a batch; the workers' pace, the longer of
        ``paces``; the CPU the training process and the workers spend per step over
        ``all_cores``), ns: the step with that many workers is the longest of the three."""
        return (
            self.rest_ns + self.receive_ns,
            max(self.paces(workers)),
            (self.process_cpu_ns + self.workers_cpu_ns) / max(self.all_cores, 1e-9),
        )

    def target_pace(self, total: int) -> float:
        """The pace (ns a batch) that ``workers_to_add`` gives the workers, ``total`` of them:
        ``WORKER_PACE_SHARE`` of the longer of the rest of the step plus receiving a batch and
        both processes' CPU over their cores, but no faster than their CPU allows with that
        many (the second of ``paces``: more workers than cores only wait beside each other)."""
        kept, _, machine = self.sides(total)
        return max(WORKER_PACE_SHARE * max(kept, machine), self.paces(total)[1])

    def workers_to_add(self, left: float) -> tuple[int, int]:
        """(the workers to add, and how many of them are beyond a worker per free core): one
        for each core left free (``more_workers`` of ``left``), and, where a worker spends
        enough of each batch waiting that those would make a batch slower than the
        ``target_pace``, as many more as bring the workers' batch time spread over them down
        to it, the fewest that do: their waits take no core. At most
        ``MAX_WORKERS_PER_CORE`` workers per core of ``all_cores`` in all. None to add where
        no core is free."""
        base = more_workers(left)
        if base < 1 or self.had < 1:
            return 0, 0
        total = self.had + base
        target = self.target_pace(total)
        if target <= 0 or self.batch_ns / total <= target:
            return base, 0
        cap = max(math.floor(MAX_WORKERS_PER_CORE * self.all_cores), total)
        needed = min(math.ceil(self.batch_ns / target - 1e-9), cap)
        return needed - self.had, max(needed - total, 0)

    def saving(self, more: float) -> float:
        """The step time (ns) that ``more`` workers save: the step less the longest of
        ``sides`` with the workers the run had and ``more`` besides. With the workers the run
        had, the workers' pace is the step itself (each step took one of their batches), so
        their waits as well as their CPU time spread over the added workers: a worker that
        waits on its reads most of each batch gains as much from another as one that
        computes. The rest of the step bounds it: no more than the waits for batches less
        receiving one."""
        if more < 1 or self.had < 1:
            return 0.0
        return max(self.step_ns - max(self.sides(self.had + more)), 0.0)


def more_workers_estimate(
    step_ns: float,
    rest_ns: float,
    had: int,
    busy_cores: float,
    process_cores: float,
    free: tuple[float, float, str],
    receive_ns: float,
    receive_from: str,
) -> tuple[float, str, dict[str, Any]]:
    """(the saving, ns per step; the estimate's text; the finding's evidence) of a run whose
    loader had ``had`` workers keeping ``busy_cores`` busy beside a training process keeping
    ``process_cores`` busy, a step of ``step_ns`` and ``rest_ns`` of it besides the waits for
    batches, with ``free`` cores (``loader_cores.free_cores``: as found, rounded to whole ones,
    how; a worker is added per whole or partial core, ``more_workers``) and receiving a batch
    costing the training step ``receive_ns`` (``receive_from`` says where that figure came
    from). The evidence's ``free_cores`` is the workers added, which the remedy prescribes."""
    left, _, cores_text = free
    cores_text = cores_text.replace(ROUNDED, "")
    figures = WorkerFigures(
        step_ns,
        rest_ns,
        receive_ns,
        busy_cores * step_ns,
        process_cores * step_ns,
        had,
        busy_cores + left,
        process_cores + busy_cores + left,
    )
    more, waiting = figures.workers_to_add(left)
    saving = figures.saving(more)
    kept, _, machine = figures.sides(had)
    each = "each worker" if had > 1 else "the worker"
    ran = (
        f"The run's loader already loaded in worker processes: {processes_text(had)} of the "
        f"training process kept {busy_cores:.2f} cores busy while the steps ran without the "
        f"profiler, {duration_text(figures.workers_cpu_ns)} of CPU per step to make and send "
        f"each batch, and the training process {process_cores:.2f} cores, "
        f"{duration_text(figures.process_cpu_ns)} per step. "
    )
    now = (
        f"Each step ({duration_text(step_ns)}) took a batch, so {each} made one every "
        f"{duration_text(figures.batch_ns)}, {duration_text(figures.workers_cpu_ns)} of it on "
        "a CPU and the rest waiting (for its reads, a lock, a core, or for the step to ask); "
        "the rest of the step plus receiving a batch "
        f"takes {duration_text(rest_ns)} + {duration_text(receive_ns)} ({receive_from}); the "
        f"two processes' CPU per step over the {figures.all_cores:.2f} cores they kept busy "
        f"or found free takes {duration_text(machine)}. "
    )
    if more < 1:
        text = (
            f"{ran}{now}No core is free for more workers ({cores_text}; under "
            f"{MIN_FREE_CORE:g} of a core): another worker "
            "would take CPU from the training process or the workers it has, so no saving is "
            "expected until cores are freed or the Dataset makes its batches with less CPU."
        )
    else:
        total = had + more
        wall, cpu = figures.paces(total)
        after = max(kept, wall, cpu, machine)
        bound = (
            "the rest of the step bounds"
            if after == kept
            else "the workers' waits bound"
            if after == wall
            else "the workers' CPU bounds"
            if after == cpu
            else "the machine's cores bound"
        )
        added = (
            f"{more:.0f} more for the {left:.2f} core(s) left free ({cores_text})"
            if not waiting
            else f"{more:.0f} more: {more - waiting:.0f} for the {left:.2f} core(s) left free "
            f"({cores_text}) and {waiting:.0f} besides, since a worker spends part of each "
            "batch waiting, which takes no core (the fewest that make a batch in "
            f"{WORKER_PACE_SHARE:.0%} of the time the step would take with a batch always "
            "ready, so that their prefetched batches absorb a slow one"
            + (
                f"; at most {MAX_WORKERS_PER_CORE} per core"
                if wall > figures.target_pace(total)
                else ""
            )
            + ")"
        )
        text = (
            f"{ran}{now}With {total:.0f} workers, {added}"
            + (". A batch is then ready every " if waiting else ", a batch is ready every ")
            + f"{duration_text(max(wall, cpu))}: the {duration_text(figures.batch_ns)} a worker "
            f"takes over a batch, beside {total - 1:.0f} other(s), every "
            f"{duration_text(wall)}, and their CPU per step spread over "
            f"{min(total, figures.worker_cores):.2f} cores (a core each, no more than the "
            f"{figures.worker_cores:.2f} they kept busy or found free), every "
            f"{duration_text(cpu)}. The step would take about {duration_text(after)}, the "
            f"longest of these: {bound} it"
            + (", so more workers are not expected to pay here." if saving <= 0 else ".")
        )
    evidence = {
        "free_cores": float(more),
        # of those, the workers beyond one per free core, for the workers' waits
        "loader_waiting_workers": float(waiting),
        "loader_free_cores": left,
        "loader_workers": had,
        "loader_workers_cores": busy_cores,
        "loader_workers_core_limit": figures.worker_cores,
        "loader_workers_cpu_per_step_ns": figures.workers_cpu_ns,
        "loader_worker_batch_ns": figures.batch_ns,
        "loader_process_cpu_per_step_ns": figures.process_cpu_ns,
        "loader_machine_cores": figures.all_cores,
    }
    return saving, text, evidence


def untimed_workers_estimate(
    waits_ns: float,
    receive_ns: float,
    receive_from: str,
    free: tuple[float, float, str] | None,
) -> tuple[float, str, dict[str, Any]]:
    """(the saving, ns per step; the estimate's text; the finding's evidence) of a run whose
    loader had worker processes that no step timer timed, its training thread waiting
    ``waits_ns`` per step for batches: at most those waits less receiving a batch
    (``receive_ns``, at most the waits; ``receive_from`` says where that figure came from),
    which stays with the step however many workers make the batches. How much of that more
    workers take off depends on how many the loader had and what a batch costs them, which
    the run does not say. ``free``: the cores the step timer found free
    (``loader_cores.free_cores``), or None where no step timer timed the machine; with under
    ``MIN_FREE_CORE`` of a core free, no saving. The evidence's ``free_cores`` is the workers
    to add, which the remedy prescribes: one per core left, else one."""
    receive = min(max(receive_ns, 0.0), max(waits_ns, 0.0))
    ceiling = max(waits_ns - receive, 0.0)
    unknown = (
        "The run's loader already loaded in worker processes, but the run does not say how "
        "many, or what a batch cost them: the step timer times them as the training "
        "process's child processes where it runs beside the loop (perfkit_core.step_timer). "
    )
    if free is not None and more_workers(free[0]) < 1:
        text = (
            f"{unknown}No core is free for more workers ({free[2].replace(ROUNDED, '')}; under "
            f"{MIN_FREE_CORE:g} of a core): another worker would take CPU from the training "
            "process or the workers it has, so no saving is expected until cores are freed or "
            "the Dataset makes its batches with less CPU."
        )
        return 0.0, text, {"free_cores": 0.0, "loader_free_cores": free[0], UNTIMED_KEY: True}
    more = 1 if free is None else more_workers(free[0])
    cores = (
        "how many cores are free is not known either (no step timer timed the machine)"
        if free is None
        else f"{free[0]:.2f} core(s) were free ({free[2].replace(ROUNDED, '')})"
    )
    text = (
        f"At most {duration_text(ceiling)}. {unknown}More workers take off no more than the "
        f"waits for batches ({duration_text(waits_ns)}) less receiving one "
        f"({duration_text(receive)}, {receive_from}), which stays with the step; how much of "
        f"that they take depends on how many the loader has and on the free cores, and "
        f"{cores}. Time the loop with perfkit_core.step_timer for an estimate of what more "
        "workers save."
    )
    evidence: dict[str, Any] = {"free_cores": float(more), UNTIMED_KEY: True}
    if free is not None:
        evidence["loader_free_cores"] = free[0]
    return ceiling, text, evidence
