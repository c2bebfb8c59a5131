"""The CPU clocks the step timer and the conversion helper read: the machine's idle time
(``machine_idle_s``: ``/proc/stat``, in clock ticks of ``clock_ticks_per_s``) and the CPU time
of this process's child processes (``children_cpu_ns``: each one's own CPU clock, exact to the
nanosecond). Each answers None where the system does not say (outside Linux)."""

from __future__ import annotations

import contextlib
import os
import time

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


def children_cpu_ns() -> dict[int, int] | None:
    """{pid: CPU time so far, ns} of this process's child processes (those any of its threads
    started: loader workers), leaving out those at the idle scheduling class (perfkit's
    conversion helper), which give way to any other process and so take no core from one; None
    where the system cannot list them (no ``/proc/<pid>/task/<tid>/children``). A child that
    ended since it was listed is left out."""
    task = f"/proc/{os.getpid()}/task"
    if not os.path.exists(f"{task}/{os.getpid()}/children"):
        return None  # no /proc, or a kernel that does not list children
    pids: set[int] = set()
    try:
        threads = os.listdir(task)
    except OSError:
        return None
    for tid in threads:
        # a thread that ended since it was listed has no file
        with contextlib.suppress(OSError, ValueError), open(f"{task}/{tid}/children", "rb") as f:
            pids.update(int(pid) for pid in f.read().split())
    idle = getattr(os, "SCHED_IDLE", None)
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError):  # it ended, or the system says nothing of it
            if idle is not None and os.sched_getscheduler(pid) == idle:
                continue
            ns = process_cpu_ns(pid)
            if ns is not None:
                found[pid] = ns
    return found


def read_clocks() -> Reading | None:
    """A ``Reading`` now, or None where the system does not say how idle the machine is."""
    idle = machine_idle_s()
    if idle is None:
        return None
    return idle, time.perf_counter_ns(), time.process_time_ns(), children_cpu_ns()
