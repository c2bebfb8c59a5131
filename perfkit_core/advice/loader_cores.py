"""The cores loader workers can use: what the machine that trained left of its cores while the
steps ran without the profiler (``loader_cores``), and the worker count a remedy prescribes from
it (``remedy_workers``)."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from perfkit_core.capture.machine_costs import finite_number

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: The clause of ``free_cores``'s text that says its count was rounded (a caller that takes the
#: cores as found leaves it out).
ROUNDED = ", rounded to whole cores"

#: ``loader_cores`` takes the machine's idle cores the step timer counted only where they may be
#: off by at most this many cores (its ``idle_resolution_cores``: ``/proc/stat`` counts in clock
#: ticks); beyond, it takes the cores the training process left, which its CPU clock counts
#: exactly, and cannot see other work.
IDLE_RESOLUTION_CORES = 0.25


def loader_cores(run: Run, thread_cores: float = 0.0) -> tuple[float, str]:
    """(the cores loader workers can use, how that was found), rounded to whole cores (a core
    at least half idle counts as free: the remedy prescribes whole workers), at least 0: the
    last two of ``free_cores``."""
    _, whole, how = free_cores(run, thread_cores)
    return whole, how


def free_cores(run: Run, thread_cores: float = 0.0) -> tuple[float, float, str]:
    """(the cores loader workers can use, at least 0; the same rounded to whole cores; how that
    was found):

    - the cores the training process left while the run's steps ran without the profiler (the
      step timer's ``usable_cores`` less its ``process_cores`` and its child processes'
      ``children_cores``: loader workers the run already had), or the cores the machine left
      idle then (``idle_cores``) where fewer by more than that reading may be off
      (``idle_resolution_cores``, itself at most ``IDLE_RESOLUTION_CORES``): other work took
      the rest;
    - for a run whose step timer did not time the process: the machine's idle cores;
    - else the cores less the 1-minute load average when the run was saved (the step timer's
      ``cpu_count`` and ``load_average``, the training process included). That average lags:
      a run saved a few seconds after training started, on a machine idle before, shows the
      machine idle;
    - else this machine's cores less one for the training process, at least 1, said to stand
      in for the run's machine, which the run does not describe.

    ``thread_cores``: the cores a loading thread of the training process keeps busy beside
    training (Paddle's single-process DataLoader: its CPU time per step over the step), which
    workers take over; added to the first three."""
    record = run.meta.get("step_timer") or {}
    cores, load = record.get("cpu_count"), record.get("load_average")
    idle = finite_number(record.get("idle_cores"))
    process = finite_number(record.get("process_cores"))
    usable = finite_number(record.get("usable_cores"))
    resolution = finite_number(record.get("idle_resolution_cores"))
    thread = max(float(thread_cores), 0.0) if math.isfinite(thread_cores) else 0.0
    by_thread = (
        f", plus the {thread:.1f} core the loading thread keeps busy, which workers take over"
        if thread > 0
        else ""
    )

    def whole(free: float, how: str) -> tuple[float, float, str]:
        # with the thread's share, as it is and to the nearest whole core
        exact = max(free, 0.0) + thread
        return exact, float(math.floor(exact + 0.5)), how

    children = finite_number(record.get("children_cores"))
    if process is not None and usable is not None:
        children = children if children is not None and children > 0 else 0.0
        left = usable - process - children
        ran = "while its steps ran without the profiler"
        busy = f"the {process:.2f} the training process kept busy" + (
            f" and the {children:.2f} its {processes_text(record.get('children_ran'))} "
            "(such as loader workers) kept busy"
            if children
            else ""
        )
        by = "the training process and its children" if children else "the training process"
        # the idle cores' error where fine enough to take them, else None
        error = (
            resolution if resolution is not None and resolution <= IDLE_RESOLUTION_CORES else None
        )
        # fewer idle than the process left, beyond what the ticks can put them off by: other
        # work took the rest
        if idle is not None and error is not None and idle < left - error:
            return whole(
                idle,
                f"{idle:.2f} cores idle on the run's machine {ran} (other work took "
                f"{left - idle:.2f} of the {left:.2f} {by} left)"
                f"{by_thread}{ROUNDED}",
            )
        if idle is not None and error is not None:
            other = "the machine's idle time shows no other work taking them"
        else:
            off = f"{resolution:.2f} cores off" if resolution is not None else "far off"
            other = (
                "over so few steps the machine's idle time, counted in clock ticks, could be "
                f"{off}, too coarse to tell what other work took"
            )
        return whole(left, f"{usable:g} cores less {busy} {ran}{by_thread}{ROUNDED}; {other}")
    if idle is not None:
        return whole(
            idle,
            f"{idle:.1f} cores idle on the run's machine while its steps ran without the "
            f"profiler{by_thread}{ROUNDED}",
        )
    if isinstance(cores, int) and cores > 0 and isinstance(load, (int, float)) and load >= 0:
        return whole(
            float(cores) - float(load),
            f"{cores} cores less a load average of {load:.1f} on the run's machine, the training "
            f"process included{by_thread}{ROUNDED}",
        )
    cores = os.cpu_count() or 1
    left = float(max(cores - 1, 1))
    return (
        left,
        left,
        (
            f"{cores} cores on this machine, one left to training: the run does not record its "
            "own machine's cores, so count the free cores where it trains if that is elsewhere"
        ),
    )


def process_count(value: object) -> int | None:
    """``value`` where it is a count of processes: a whole number (not a bool) of 1 or more;
    else None (a record or evidence read back may hold anything)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


def processes_text(count: object) -> str:
    """``count`` child processes in words: "1 child process", "3 child processes", or "child
    processes" where the count is not a ``process_count``."""
    found = process_count(count)
    if found is None:
        return "child processes"
    return f"{found} child process{'' if found == 1 else 'es'}"


def loader_workers_had(evidence: dict[str, Any]) -> int | None:
    """The workers an input-pipeline finding's run had (``loader_workers``, a
    ``process_count``), else None."""
    return process_count(evidence.get("loader_workers"))


#: Key of an input-pipeline finding's evidence: True where the run's loader had worker
#: processes that no step timer timed (``advice.loader_workers.untimed_workers_estimate``).
UNTIMED_KEY = "loader_workers_untimed"


def remedy_lead(text: str, evidence: dict[str, Any]) -> str:
    """An adapter's loader remedy ``text``, whose first line says to load in worker processes,
    with that line saying to add workers instead where the run had some
    (``loader_workers_had``, or workers no step timer counted: ``UNTIMED_KEY``)."""
    had = loader_workers_had(evidence)
    untimed = evidence.get(UNTIMED_KEY) is True
    if had is None and not untimed:
        return text
    _, _, rest = text.partition("\n")
    has = f"it has {had}" if had is not None else "the run does not say how many it has"
    return (
        f"Give the loader more worker processes ({has}), so a batch is ready when the "
        f"step asks for it:\n{rest}"
    )


#: What the remedy's note says of workers beyond the free cores: torch warns about them.
_OUTNUMBER_NOTE = (
    "A DataLoader may warn that its workers outnumber the CPUs: for a Dataset that waits on its "
    "reads, that is expected."
)


def waiting_workers(evidence: dict[str, Any]) -> int:
    """The workers an input-pipeline finding prescribes beyond one per free core, for workers
    that spend part of each batch waiting (``loader_waiting_workers``); 0 where none."""
    return max(int(finite_number(evidence.get("loader_waiting_workers")) or 0), 0)


def remedy_workers(evidence: dict[str, Any]) -> tuple[int | str, str] | None:
    """(``num_workers`` for an input-pipeline finding's remedy, a sentence saying why): the
    workers its saving was estimated for (its ``free_cores``, a whole number, more than the
    ``loader_workers`` the run had, if any), or, when none was free, one worker (or as many as
    the run had) and the advice to free a core first; None when the finding does not count
    free cores. Where the run had workers no step timer counted (``UNTIMED_KEY``), the
    expression ``num_workers + N``: the user's count, and ``free_cores`` more."""
    free = finite_number(evidence.get("free_cores"))
    if free is None:
        return None
    if evidence.get(UNTIMED_KEY) is True:
        more = max(int(free), 0)
        if more == 0:
            return "num_workers", (
                "(num_workers: the workers your loader has now. No core was free for more: "
                "free one first, or make the Dataset's batches cheaper.)"
            )
        found = "loader_free_cores" in evidence  # a step timer found the free cores
        return f"num_workers + {more}", (
            "(num_workers: the workers your loader has now, which the run does not record; "
            + (
                f"{more} more for the free core(s)"
                if found
                else f"{more} more, where a core is free for it"
            )
            + ", each needing a core of its own. Time the loop with perfkit_core.step_timer "
            "to see what they save.)"
        )
    had = loader_workers_had(evidence)
    if had is not None:
        more = max(int(free), 0)
        if more == 0:
            return had, (
                f"(No core was free for more than the {had} worker(s) the run had: free one "
                "first, or make the Dataset's batches cheaper.)"
            )
        waiting = waiting_workers(evidence)
        if waiting:
            return had + more, (
                f"({had + more} workers: the {had} the run had, {more - waiting} for the free "
                f"core(s) and {waiting} besides, since the workers spend part of each batch "
                "waiting, not on a CPU; the saving was estimated for that count. "
                f"{_OUTNUMBER_NOTE})"
            )
        return had + more, (
            f"({had + more} workers: the {had} the run had, and {more} for the free core(s) "
            "the saving was estimated for; each worker needs a core of its own.)"
        )
    workers = max(int(free), 0)
    waiting = waiting_workers(evidence)
    if workers and waiting:
        return workers + waiting, (
            f"({workers + waiting} workers: {workers} for the free core(s) and {waiting} "
            "besides, since the Dataset spends part of each batch waiting, not on a CPU; the "
            f"saving was estimated for that count. {_OUTNUMBER_NOTE})"
        )
    if workers == 0 and evidence.get("turn_process_cores") is not None:
        return 1, (
            "(1 worker: no core was free while the steps ran, but other work kept the cores "
            "busy, and a worker process gets a turn on them of its own, which the saving was "
            "estimated for; a freed core gives it more.)"
        )
    if workers == 0:
        return 1, (
            "No core was free while the steps ran: free one first, or a worker takes its CPU "
            "from the training process."
        )
    return workers, (
        f"({workers} worker(s): the free core(s) the saving was estimated for; each worker "
        "needs a core of its own.)"
    )
