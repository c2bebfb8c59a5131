"""``step_timer()``: wall-clock step times taken around the user's steps, with and without the
profiler recording, so a comparison can state its ratio as the unprofiled program would see it.

A profiler slows the steps it records, and not by the same amount in every framework (torch
records about twice as many host events per step as Paddle for the same model). The timer
times every step with ``time.perf_counter_ns``, asks the adapters whether the profiler it was
given was recording during that step (``perfkit_profiler_recording``), and ``save`` merges the
times into the saved run's ``meta.json`` under ``step_timer``, where ``perfkit compare`` finds
them.

Where an adapter can see a phase of the step as it runs (``perfkit_phase_timers``: torch's
optimizer step), the timer also keeps that phase's time in each step, with and without the
profiler, so advice can state the phase's unprofiled time as measured. A phase the thread
running the step reports ends as it is reported, so the timer counts it from the step's start
at the earliest: torch's ``forward`` runs from the last optimizer step, which the step before
ran, and the code between two steps (the loop's own, ``zero_grad``, this timer's bookkeeping,
``prof.step()``) belongs to neither. The last batch the thread running the steps takes from
a loader between two steps (``for x, y in loader: with timer.step(): ...``: the ``data`` phase
of ``BETWEEN_STEPS_PHASES``) belongs to the step after it, in its phase and in its wall time,
as the profiler's step counts it: the step that waited for its batch took that long. Batches
taken before it (an evaluation loop between two steps) belong to no step. The timer itself
keeps the CPU time of the thread that ran each step (the ``training_cpu`` phase,
``time.thread_time_ns``): beside a loading thread of the same process, the step's wall time is
shared between the two threads in about the ratio of their CPU times. Beside ``data``, torch's
adapter reports the same thread's CPU time over each batch (``data_cpu``, a ``CPU_PHASES``
phase: within the wall time, not added to it): a loader without workers runs its Dataset in
that thread, so the two tell a Dataset's waits (reads, a sleep) from its computing.

When the steps loaded data in the training process, ``save`` also has the run's adapter time
what handing a batch from a loader worker over costs on this machine (``loader_batch_ns``),
and, where the adapter can, what receiving one adds to a busy training step
(``loader_receive_ns``), and how much a worker on a free core and the training step slow
each other (``training_slowdown``, ``loading_slowdown``): the input-pipeline advice needs the
costs of the machine that trained, which may not be the one that reads the run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from perfkit_core.capture.cpu_clocks import (
    PACE_LOOPS,
    ChildrenCpu,
    Reading,
    clock_ticks_per_s,
    pace_probe_ns,
    read_clocks,
)
from perfkit_core.capture.helper import usable_cores
from perfkit_core.capture.machine_costs import (
    EAGER_PASS_KEY,
    META_KEY,
    eager_pass_ns,
    loader_costs_here,
)

#: The phase holding the CPU time (ns) of the thread that ran each step (``time.thread_time_ns``
#: over the ``with timer.step()`` block): the training thread's own work, without the time it
#: waited for the GIL, for a loading thread or for the operating system.
TRAINING_CPU = "training_cpu"

#: The phase holding the CPU time (ns) of the training thread while it took its batches from a
#: loader (``time.thread_time_ns`` around each, beside the ``data`` phase's wall time, which
#: torch's adapter times): a loader without workers runs its Dataset in that thread, so the
#: ``data`` phase less this one is what the Dataset spent waiting (for reads, a sleep) rather
#: than computing.
DATA_CPU = "data_cpu"
#: Phases that the thread running the steps may report between two steps, and that belong to
#: the step after them (its wall time and its phase): taking a batch from a loader before the
#: ``with timer.step()`` block.
BETWEEN_STEPS_PHASES = frozenset({"data", DATA_CPU})
#: ... of which these are CPU times within the others' wall time: they add nothing to the step's.
CPU_PHASES = frozenset({DATA_CPU})

#: The timer reads the machine's idle CPU time (``machine_idle_s``: ``/proc/stat``) at the
#: start of a stretch of kept steps the profiler does not record, then at the end of the first
#: such step at least this long (ns) after the last reading, and where the stretch ends. A
#: reading each step cost a Paddle loop fed by its loading thread 0.25 to 0.36 ms a step of
#: about 2 ms (2-core x86 KVM machine): the file's reads release the GIL, and the loading
#: thread keeps it until its next release. At one reading per 50 ms that is under 1% of the
#: loop, and the clock ticks ``/proc/stat`` counts in (10 ms) average out as well, since each
#: window starts where the last ended.
IDLE_WINDOW_NS = 50_000_000
#: ``/proc/stat`` counts the machine's idle time in clock ticks (10 ms a core at the usual
#: ``CLK_TCK`` of 100): where a stretch of steps starts and ends, up to one tick a core is
#: counted or missed. Over 30 steps of 1.5 ms (a 2-core machine, ``bench/bench_advice.py``'s
#: ``paddle-demo``) that is 0.7 cores either way, and the timer's readings of the cores idle
#: beside the same loop went from 0.0 to 2.7. The record says how far off the reading can be
#: (``idle_resolution_cores``), and it keeps the training process's own CPU time over the same
#: windows, which the process's CPU clock counts exactly (``process_cores``).


class _StepBlock:
    """What ``StepTimer.step`` returns: one object per timer, reused for every step, whose
    ``with`` runs the timer's start and end of a step. It holds the timer weakly: a cycle
    would keep the timer, and the profiler it was given, alive until the garbage collector
    runs, and Paddle creates no second Profiler while one lives."""

    __slots__ = ("_timer",)

    def __init__(self, timer: StepTimer) -> None:
        self._timer = weakref.ref(timer)

    def __enter__(self) -> None:
        timer = self._timer()
        if timer is not None:
            timer._begin()

    def __exit__(self, *exc: object) -> None:
        timer = self._timer()
        if timer is not None:
            timer._end()


class StepTimer:
    """Times steps: ``with timer.step(): ...`` around each training step.

    ``profiled_ns`` and ``unprofiled_ns`` hold the wall time (ns) of each step after the first
    ``warmup`` steps, split by whether the profiler was recording at the step's start;
    ``unknown_ns`` the steps no adapter could tell about (no profiler given, or one of a
    framework no installed adapter knows) and those a profiler slowed without recording them
    (a started Paddle Profiler its scheduler keeps closed: time the steps without the
    profiler before ``prof.start()`` or after ``prof.stop()``). ``phase_ns`` holds, per phase
    an adapter times (``optimizer``), the phase's time in each kept step (ns), in three lists
    that line up with those (0 for a step the phase did not run in), and under
    ``training_cpu`` the CPU time of the thread that ran each step.
    """

    def __init__(self, profiler: Any = None, *, warmup: int = 2) -> None:
        if warmup < 0:
            raise ValueError(f"warmup must be 0 or more steps, not {warmup}")
        self.profiler = profiler
        self.warmup = int(warmup)
        self.seen = 0
        self.profiled_ns: list[int] = []
        self.unprofiled_ns: list[int] = []
        self.unknown_ns: list[int] = []
        self.phase_ns: dict[str, dict[str, list[int]]] = {}
        self._removers: list[Callable[[], None]] | None = None
        # the adapters' answers to "is the profiler recording?", called directly each step
        # (``_askers``); None: ask through the plugin manager
        self._askers: list[Callable[[], Any]] | None = None
        self._block = _StepBlock(self)
        # the step running now: whether the profiler recorded it, whether it is a kept step
        # the profiler did not record, the phases taken before it, its CPU clock at the start
        self._state: bool | None = None
        self._kept_unrecorded = False
        self._before: dict[str, int] = {}
        self._cpu_start = 0
        self._open: dict[str, int] | None = None  # phase times of the step running now
        # phases of BETWEEN_STEPS_PHASES reported since the last step ended, for the next one
        self._pending: dict[str, int] = {}
        # when the step running now started, and the thread running it
        self._started = (0, 0)
        # the machine's idle CPU time over the stretches of kept steps the profiler did not
        # record, and their wall time: the cores the training left idle (``idle_cores``)
        self._idle_s = 0.0
        self._idle_wall_ns = 0
        # over the same windows: the training process's CPU time (all its threads), and how
        # many stretches of adjacent windows they make (each stretch's ends are a tick off)
        self._process_ns = 0
        self._idle_stretches = 0
        self._idle_joined = False
        # the open window's first reading (idle s, perf_counter ns, the process's CPU time ns),
        # and the end of the last step kept (perf_counter ns): a step ended in the window when
        # it is after the reading
        self._idle_mark: Reading | None = None
        # over the same windows: the child processes' CPU time (loader workers)
        self._children = ChildrenCpu()
        self._idle_last_end = 0
        # the machine's pace, timed after each such window (``pace_probe_ns``)
        self._pace_ns: list[int] = []

    def recording(self) -> bool | None:
        """Whether the profiler is recording now: True, False, or None when no adapter can tell
        (or an adapter's answer raised: the step is then neither profiled nor unprofiled)."""
        askers = self._askers
        try:
            if askers is None:
                from perfkit_core.plugins import get_plugin_manager

                hook = get_plugin_manager().hook.perfkit_profiler_recording
                answers = hook(profiler=self.profiler)
            else:
                answers = [ask() for ask in askers]
        except Exception:  # an adapter's error must not stop training
            return None
        known = [a for a in answers if a is not None]
        return any(known) if known else None

    def _find_askers(self) -> None:
        """Take the adapters' ``perfkit_profiler_recording`` functions out of the plugin
        manager, bound to the profiler, so each step calls them directly: through the plugin
        manager, the question cost the first step after each training step 14 to 18 us (its
        code runs with the caches the step left cold), a third of the timer's cost on a 1 ms
        step. The adapters registered when the timer starts timing (its first step, and the
        first after each ``close``) are the ones asked; the plugin manager is asked each step
        where an adapter wraps the hook (a wrapper needs the plugin manager's call)."""
        from perfkit_core.plugins import get_plugin_manager

        self._askers = None
        try:
            impls = get_plugin_manager().hook.perfkit_profiler_recording.get_hookimpls()
        except Exception:
            return
        if any(impl.hookwrapper or getattr(impl, "wrapper", False) for impl in impls):
            return
        self._askers = [
            functools.partial(impl.function, profiler=self.profiler)
            if impl.argnames
            else impl.function
            for impl in impls
        ]

    def _on_phase(self, phase: str, ns: int) -> None:
        # the adapters' timers call this inside training (a loader thread too, while step()
        # closes the step: the dict is read once); it never raises into their caller
        opened = self._open
        try:
            ns = int(ns)
        except (TypeError, ValueError, OverflowError):
            return
        if opened is not None:
            thread, start = self._started
            if thread == threading.get_ident():  # it ends now, inside the step
                ns = min(ns, max(time.perf_counter_ns() - start, 0))
            opened[phase] = opened.get(phase, 0) + ns
        elif (
            ns > 0
            and phase in BETWEEN_STEPS_PHASES
            and self._started[0] in (0, threading.get_ident())
        ):
            # between two steps, on the thread that runs them: the last batch taken is the next
            # step's (the batches of an evaluation loop run between two steps are not)
            self._pending[phase] = ns

    def _start_phase_timers(self) -> None:
        from perfkit_core.plugins import get_plugin_manager

        try:
            found = get_plugin_manager().hook.perfkit_phase_timers(on_phase=self._on_phase)
        except Exception:  # a timer that fails to install must not stop training
            found = []
        self._removers = [r for r in found if callable(r)]
        self._find_askers()

    def _close_idle_window(
        self, reading: Reading | None, *, reopen: bool, count: bool = True
    ) -> None:
        """Count (when ``count``) the idle time, the process's and its children's CPU time and
        the wall time from the open window's first reading to ``reading``, where a step ended
        between them, and open the next window at ``reading`` when ``reopen`` (else none is
        open)."""
        mark = self._idle_mark
        if count and mark is not None and reading is not None and self._idle_last_end > mark[1]:
            self._idle_s += max(reading[0] - mark[0], 0.0)
            self._idle_wall_ns += max(reading[1] - mark[1], 0)
            self._process_ns += max(reading[2] - mark[2], 0)
            self._children.count(mark[3], reading[3])
            self._idle_stretches += 0 if self._idle_joined else 1
            self._idle_joined = reopen  # the next window, if any, goes on this stretch
        else:
            self._idle_joined = False
        self._idle_mark = reading if reopen else None

    def close(self) -> None:
        """Remove the adapters' phase timers (``save`` does it too); timing steps again
        installs them again. The stretch of steps the profiler did not record ends here too:
        the steps since the timer last read the machine's idle time count toward
        ``idle_cores`` when ``close`` comes right after them (within a tenth of the time
        since that reading), as ``timer.close()`` after the loop does, and not when the
        program did other work first."""
        if self._idle_mark is not None:
            reading = read_clocks(self._children)
            window = self._idle_last_end - self._idle_mark[1]
            # the time since the last step holds other work when longer than that
            right_after = reading is not None and (reading[1] - self._idle_last_end) * 10 <= window
            self._close_idle_window(reading, reopen=False, count=right_after)
        for remove in self._removers or ():
            with contextlib.suppress(Exception):
                remove()
        self._removers = None

    def step(self) -> contextlib.AbstractContextManager[None]:
        """Time one step (the ``with`` block, and the last batch the same thread took from a
        loader since the last step: ``BETWEEN_STEPS_PHASES``); the first ``warmup`` steps are
        not kept. Steps of one timer do not nest."""
        return self._block

    def _begin(self) -> None:
        """The start of a step (``with timer.step()``)."""
        if self._removers is None:
            self._start_phase_timers()
        state = self._state = self.recording()
        self._before, self._pending = self._pending, {}
        self._open = {}
        # the machine's idle time, over stretches of steps kept and not recorded by the profiler
        kept_unrecorded = self._kept_unrecorded = state is not True and self.seen >= self.warmup
        if kept_unrecorded and self._idle_mark is None:
            self._idle_mark = read_clocks(self._children)
        elif not kept_unrecorded and self._idle_mark is not None:
            self._close_idle_window(read_clocks(self._children), reopen=False)  # the stretch ended
        start = time.perf_counter_ns()
        self._started = (threading.get_ident(), start)
        self._cpu_start = time.thread_time_ns()  # inside the wall-clock span: never outlasts it

    def _end(self) -> None:
        """The end of a step: keep its times (after the warm-up)."""
        cpu = time.thread_time_ns() - self._cpu_start
        end = time.perf_counter_ns()
        start = self._started[1]
        phases, self._open = self._open, None
        if phases is None:  # a step inside this one ended it: its own times are lost
            phases = {}
        else:
            phases[TRAINING_CPU] = cpu
        before = self._before
        for phase, ns in before.items():
            phases[phase] = phases.get(phase, 0) + ns
        self.seen += 1
        if self.seen <= self.warmup:
            return
        if self._kept_unrecorded and self._idle_mark is not None:
            self._idle_last_end = end
            if end - self._idle_mark[1] >= IDLE_WINDOW_NS:
                self._close_idle_window(read_clocks(self._children), reopen=True)
                self._pace_ns.append(pace_probe_ns())  # between steps: in neither's time
        state = self._state
        key = "profiled_ns" if state else "unknown_ns" if state is None else "unprofiled_ns"
        phase_ns = self.phase_ns
        for phase in phases:
            if phase not in phase_ns:
                # a phase first seen now ran in none of the steps kept before
                phase_ns[phase] = {
                    k: [0] * len(getattr(self, k))
                    for k in ("profiled_ns", "unprofiled_ns", "unknown_ns")
                }
        waited = sum(ns for phase, ns in before.items() if phase not in CPU_PHASES)
        getattr(self, key).append(end - start + waited)
        for phase, lists in phase_ns.items():
            lists[key].append(phases.get(phase, 0))

    def seconds(self) -> list[float]:
        """Every kept step's wall time, in seconds, in the order they ran per kind (profiled,
        then unprofiled, then unknown)."""
        return [ns / 1e9 for ns in (*self.profiled_ns, *self.unprofiled_ns, *self.unknown_ns)]

    def record(self) -> dict[str, Any]:
        """What ``save`` stores: the three lists of step times (ns), the warm-up count, and the
        machine the steps ran on: ``cpu_count`` (``os.cpu_count()``) and ``load_average`` (the
        1-minute load average when saved, the training process included; None where the
        system has none), ``idle_cores`` (the cores the machine left idle while the kept steps
        the profiler did not record ran: its idle CPU time over the windows between the
        timer's readings of it, ``IDLE_WINDOW_NS`` or more of such steps each, / their wall
        time; the steps since the last reading count once ``close`` ends them; None where no
        window closed or the system does not say, as outside Linux), ``process_cores`` (this
        process's CPU time over the same windows, all its threads, / their wall time: the cores
        the training process kept busy), ``children_cores`` (the CPU time over the same
        windows, / their wall time, of the child processes that the main thread and the thread
        running the steps started, ``cpu_clocks.child_pids``: the cores its loader workers kept
        busy, which ``process_cores`` leaves out; None where they cannot be listed) and
        ``children_ran`` (how many of them ran then), ``usable_cores`` (the cores this process
        may run on), ``idle_resolution_cores`` (how far off ``idle_cores`` can be from
        counting in clock ticks: a tick a core at each end of each stretch of adjacent windows,
        over their wall time), ``pace_ns`` (the machine's pace after each of those windows:
        ``cpu_clocks.pace_probe_ns``, of ``pace_loops`` rounds) and ``phases``: ``phase_ns``."""
        try:
            load: float | None = os.getloadavg()[0]
        except OSError:
            load = None
        wall_s, children = self._idle_wall_ns / 1e9, self._children.ns
        ticks = clock_ticks_per_s()
        return {
            "profiled_ns": list(self.profiled_ns),
            "unprofiled_ns": list(self.unprofiled_ns),
            "unknown_ns": list(self.unknown_ns),
            "warmup": self.warmup,
            "cpu_count": os.cpu_count(),
            "load_average": load,
            "idle_cores": self._idle_s / wall_s if wall_s > 0 else None,
            "process_cores": self._process_ns / 1e9 / wall_s if wall_s > 0 else None,
            "usable_cores": usable_cores(),
            "children_cores": (
                children / 1e9 / wall_s if wall_s > 0 and children is not None else None
            ),
            "children_ran": len(self._children.ran) if children is not None else None,
            "idle_resolution_cores": (
                self._idle_stretches * (os.cpu_count() or 1) / ticks / wall_s
                if wall_s > 0 and ticks
                else None
            ),
            "pace_ns": list(self._pace_ns),
            "pace_loops": PACE_LOOPS,
            "phases": {
                phase: {k: list(v) for k, v in lists.items()}
                for phase, lists in self.phase_ns.items()
            },
        }

    def loaded_data(self) -> bool:
        """Whether the kept steps spent time loading data in the training process or waiting
        for it (an adapter timed a ``data`` or ``loading`` phase)."""
        return self._timed_phase("data", "loading")

    def loaded_in_thread(self) -> bool:
        """Whether a thread of the training process loaded the kept steps' batches (an
        adapter timed a ``loading`` phase: Paddle's single-process DataLoader)."""
        return self._timed_phase("loading")

    def _timed_phase(self, *phases: str) -> bool:
        """Whether any kept step spent time in any of ``phases``."""
        return any(
            any(ns > 0 for ns in self.phase_ns.get(phase, {}).get(key, ()))
            for phase in phases
            for key in ("profiled_ns", "unprofiled_ns", "unknown_ns")
        )

    def save(
        self,
        runs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        loader_costs: bool = True,
        eager_pass: bool = True,
    ) -> list[Path]:
        """Merge the step times into each saved run folder's ``meta.json`` (atomically); return
        the folders written, and remove the phase timers (``close``). Wait for a background
        handler (``handler.wait()``) before saving.

        When the steps loaded data (``loaded_data``) and ``loader_costs`` is true, the adapter
        of each run's framework also times, on this machine, the one that trained, what
        handing a batch from a loader worker over costs (``perfkit_loader_batch_ns``: a worker
        process starts, about a second once per framework) and, where it can, what receiving
        one adds to a busy training step (``perfkit_loader_receive_ns``: Paddle's, about a
        second more) and how much a worker on a free core and the training step slow each
        other (``perfkit_corun_slowdowns``, about half a second), and, where a thread of the
        training process loaded the batches (``loaded_in_thread``), what each op of the
        training thread costs it beside such a thread (``perfkit_thread_op_ns``: Paddle's,
        about two seconds, on a replayed training step), and the record keeps them as
        ``loader_batch_ns``, ``loader_receive_ns``, ``training_slowdown``, ``loading_slowdown`` and
        ``thread_op_ns``: the input-pipeline advice states its saving with them. With
        ``eager_pass``, the adapter also times an eager forward and backward of a tiny model
        where it can (``perfkit_eager_pass_ns``: torch's, about 50 ms once per framework),
        kept as ``eager_pass_ns``: the compile advice scales its per-call and per-kernel costs
        by it."""
        from perfkit_core.errors import TraceError
        from perfkit_core.events import atomic_path

        self.close()
        measured: dict[str, dict[str, float]] = {}
        passes: dict[str, float | None] = {}

        folders = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
        written = []
        for folder in folders:
            meta_path = Path(folder) / "meta.json"
            try:
                meta = json.loads(meta_path.read_text())
            except (OSError, ValueError) as exc:
                raise TraceError(meta_path, f"cannot add step times to the run: {exc}") from None
            record = self.record()
            framework = str(meta.get("framework", ""))
            if loader_costs and framework and self.loaded_data():
                if framework not in measured:
                    measured[framework] = loader_costs_here(framework, self.loaded_in_thread())
                record.update(measured[framework])
            if eager_pass and framework:
                if framework not in passes:
                    passes[framework] = eager_pass_ns(framework)
                if passes[framework] is not None:
                    record[EAGER_PASS_KEY] = passes[framework]
            meta[META_KEY] = record
            with atomic_path(meta_path) as tmp:
                tmp.write_text(json.dumps(meta, indent=1, default=str))
            written.append(Path(folder))
        return written


def step_timer(profiler: Any = None, *, warmup: int = 2) -> StepTimer:
    """Return a ``StepTimer`` for ``profiler`` (a ``torch.profiler.profile`` or
    ``paddle.profiler.Profiler``; None: whichever the adapters can see), keeping the steps after
    the first ``warmup``::

        timer = perfkit_core.step_timer(prof)
        for batch in loader:
            with timer.step():
                train_step(batch)
            prof.step()
        ...  # a few more steps after prof.stop(): the unprofiled times
        timer.save(handler.runs)
    """
    return StepTimer(profiler, warmup=warmup)
