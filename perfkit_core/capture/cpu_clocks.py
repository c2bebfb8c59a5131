"""The CPU clocks the step timer and the conversion helper read: the machine's idle time
(``machine_idle_s``: ``/proc/stat``, in clock ticks of ``clock_ticks_per_s``) and a process's
CPU time from its own CPU clock, exact to the nanosecond (``process_cpu_ns``: the helper reads
the training process's; ``children_cpu_ns``: the step timer reads the training process's
children, ``child_pids``). Each answers None where the system does not say (outside Linux)."""

from __future__ import annotations

import contextlib
import os
import threading
import time

#: The machine's pace (``pace_probe_ns``): rounds of a fixed pure-Python loop, about 40 us on a
#: 2-core x86 VM. There, the loop's time followed a CPU-bound training step's as the machine
#: slowed and recovered: over 1 s blocks of ``bench/bench_advice.py``'s ``paddle-adam`` their
#: correlation was 0.91 to 0.96 in a noisy hour (the step 2.47 to 4.49 ms, a loop three times as
#: long 115 to 168 us: it moves less than the step) and 0.79 in a quieter one, and the loop's
#: CPU time moved as its wall time did (the cores ran slower; the scheduler did not take them).
PACE_LOOPS = 1_000


def pace_probe_ns() -> int:
    """The calling thread's CPU time (ns) for ``PACE_LOOPS`` rounds of a fixed pure-Python loop:
    a reference whose time moves only with how fast the machine runs Python."""
    start = time.thread_time_ns()
    total = 0
    for i in range(PACE_LOOPS):
        total += i * i
    return time.thread_time_ns() - start


#: A reading of the CPU clocks (``read_clocks``): the machine's idle time (s), the wall clock
#: (``time.perf_counter_ns``), this process's CPU time (ns, all its threads), its child
#: processes' (``children_cpu_ns``).
Reading = tuple[float, int, int, "dict[int, int] | None"]


def clock_ticks_per_s() -> int | None:
    """The clock ticks a second ``/proc/stat`` counts in (``SC_CLK_TCK``), or None."""
    try:
        ticks = int(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, AttributeError):
        return None
    return ticks if ticks > 0 else None


def machine_idle_s() -> float | None:
    """The machine's idle CPU time so far, all cores together, in seconds (the ``idle`` and
    ``iowait`` columns of ``/proc/stat``, in clock ticks); None where there is no such file or
    it cannot be read."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = stat.readline().split()
        ticks = clock_ticks_per_s()
        if fields[:1] != [b"cpu"] or ticks is None:
            return None
        return (int(fields[4]) + int(fields[5])) / ticks
    except (OSError, ValueError, IndexError):
        return None


def _process_clock(pid: int) -> int:
    """The clock id of process ``pid``'s CPU clock, all its threads (Linux's ``clockid_t`` for
    another process: ``CPUCLOCK_SCHED`` of ``-pid``, as ``clock_getcpuclockid`` makes it)."""
    return ((~pid) << 3) | 2


def process_cpu_ns(pid: int) -> int | None:
    """Process ``pid``'s CPU time so far, all its threads (ns, from its CPU clock); None when it
    ended or the system does not say."""
    try:
        return time.clock_gettime_ns(_process_clock(pid))
    except (OSError, AttributeError):
        return None


def child_pids() -> list[int] | None:
    """The child processes that this process's main thread and the calling thread started (a
    loader's workers start with its iterator, in the thread that iterates: the training
    thread), leaving out those at the idle scheduling class (perfkit's conversion helper),
    which give way to any other process and so take no core from one; None where the system
    cannot list them (no ``/proc/<pid>/task/<tid>/children``). Listing them reads a file per
    thread asked, and each read lets another thread of this process take the GIL: list them
    seldom (``ChildrenCpu``), and read their clocks (``children_cpu_ns``) as often as needed."""
    pid = os.getpid()
    pids: set[int] = set()
    for tid in dict.fromkeys((pid, threading.get_native_id())):
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as listed:
                pids.update(int(child) for child in listed.read().split())
        except (OSError, ValueError):
            if tid == pid:
                return None  # no /proc, or a kernel that does not list children
    idle = getattr(os, "SCHED_IDLE", None)
    found = []
    for child in sorted(pids):
        with contextlib.suppress(OSError):  # it ended, or the system says nothing of it
            if idle is None or os.sched_getscheduler(child) != idle:
                found.append(child)
    return found


def children_cpu_ns(pids: list[int] | None) -> dict[int, int] | None:
    """{pid: CPU time so far, ns} of the processes ``pids`` (``child_pids``) that are still
    running, each from its own CPU clock (no file is read); None for None."""
    if pids is None:
        return None
    found = {}
    for pid in pids:
        ns = process_cpu_ns(pid)
        if ns is not None:
            found[pid] = ns
    return found


#: ``ChildrenCpu`` lists the child processes again once its list is this old (ns): listing
#: them reads two files, and each read lets another thread take the GIL (a Paddle loading
#: thread then keeps it until its next release); reading their clocks reads no file. A
#: loader's workers start with its iterator: within a second they are timed.
CHILDREN_LIST_NS = 1_000_000_000


class ChildrenCpu:
    """The CPU time this process's child processes ran between pairs of readings, all told
    (``ns``; None once a reading could not list them) and which of them ran (``ran``)."""

    def __init__(self) -> None:
        self.ns: int | None = 0
        self.ran: set[int] = set()
        self._pids: list[int] | None = None
        self._listed: int | None = None  # when the list was made (``time.perf_counter_ns``)

    def read(self, now_ns: int) -> dict[int, int] | None:
        """The children's CPU times now (``children_cpu_ns``), at ``now_ns``
        (``time.perf_counter_ns``), listed again where the list is ``CHILDREN_LIST_NS`` old."""
        if self._listed is None or now_ns - self._listed >= CHILDREN_LIST_NS:
            self._pids, self._listed = child_pids(), now_ns
        return children_cpu_ns(self._pids)

    def count(self, then: dict[int, int] | None, now: dict[int, int] | None) -> None:
        """Add the CPU time each child read at both ``then`` and ``now`` ran between them."""
        if then is None or now is None or self.ns is None:
            self.ns = None
            return
        for pid in then.keys() & now.keys():
            ran = now[pid] - then[pid]
            if ran > 0:
                self.ns += ran
                self.ran.add(pid)


def read_clocks(children: ChildrenCpu) -> Reading | None:
    """A ``Reading`` now, with ``children``'s CPU times, or None where the system does not say
    how idle the machine is."""
    idle = machine_idle_s()
    if idle is None:
        return None
    now = time.perf_counter_ns()
    return idle, now, time.process_time_ns(), children.read(now)
