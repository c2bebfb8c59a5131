"""The conversion helper process (``python -m perfkit_core.capture``): the other end of
``BackgroundConverter``'s pipe.

It reads jobs from standard input, one JSON object a line, converts them one after the other
(``convert_file``) and replies on standard output. It runs at the lowest CPU priority the system
grants with one compute thread, and it starts a job it may defer only on a core that training
leaves idle.

Why wait for an idle core: even at ``SCHED_IDLE``, a conversion sharing the cores with training
slows it. A framework's intra-op threads sleep and wake many times a step, and each wake on the
core the helper holds pays a switch and a cache the helper has filled
(``bench/bench_training_overhead.py`` measured a two-thread torch loop's steps at 3x their time
while the helper converted beside it). So a deferrable job starts only when, over the last
``SAMPLE_S`` seconds, at least ``MIN_IDLE_CORES`` cores were idle, both on the machine and in
what the training process (this helper's parent) leaves of the cores this process may use.

Why a core and a half: with a bar of 0.75 the helper found that much idle beside a one- and a
two-thread torch loop on a two-core machine (a small model's intra-op threads idle between
ops), converted there, and the recorded steps ran 40% slower (8.7 to 12.7 ms, 10.2 to 14.3 ms;
``bench_training_overhead.py``, 2026-11-29). A conversion deferred costs the program nothing:
what is still queued when it exits, the helper converts after it. So the helper converts
during training only where a whole core is spare with room for training's own bursts (a GPU
job on a many-core host), and elsewhere after the program, or when the program waits.

While the parent exports a profile (``{"hold": true}`` until ``{"hold": false}``) no deferred job
starts, however idle the cores look: an export often leaves cores idle for a moment, and a
conversion begun then would run on into the training after it. A job is not deferred at all
when the parent says so: when its queue holds more than its ``defer_bytes``, when it waits for
the queue (``wait()``, a full queue, a full disk), and once it closes the pipe (at exit, or
because it died; the queued runs are then saved). Where idle cores cannot be measured (no
``/proc``), every job starts at once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from perfkit_core.capture.cpu_clocks import machine_idle_s, process_cpu_ns
from perfkit_core.capture.priority import lower_priority

#: A deferrable job starts once at least this many cores were idle over a sample.
MIN_IDLE_CORES = 1.5
#: How long the helper waits for a program that said it is exiting to exit before it converts
#: the program's queue, in seconds.
PARENT_EXIT_WAIT_S = 30.0
#: How long one sample of idle cores lasts, in seconds.
SAMPLE_S = 0.5


def convert_file(trace: Path, run_dir: Path, meta: dict[str, Any], *, keep_trace: bool) -> Path:
    """Load ``trace``, merge ``meta`` into its metadata, save it in ``run_dir``; return run_dir.

    A ``rank`` in ``meta`` also sets the rank column of a one-rank trace (a launcher's rank
    that the native file does not record). The native trace (a file, or a log folder) is
    removed after the run is saved unless ``keep_trace``, and so is the folder's note of the queued conversion
    (``perfkit_core.events.pending``). A run a reader already saved from the note (this job's
    first helper died before starting it) is left as it is.
    """
    from perfkit_core.events import pending
    from perfkit_core.events.loading import load
    from perfkit_core.events.run import META_FILE

    note = pending.read_note(run_dir)
    if note is None and (run_dir / META_FILE).exists() and not trace.exists():
        return run_dir  # saved from the note already
    if note is not None and note.get("pid") != os.getpid():
        # this helper converts it now (a job resent after its first helper died)
        pending.write_note(
            run_dir,
            trace,
            meta,
            keep_trace=keep_trace,
            helper_pid=os.getpid(),
            program=note.get("program"),
        )
    run = pending.apply_meta(load(trace), meta, keep_trace=keep_trace)
    run.save(run_dir)
    pending.remove_note(run_dir)
    if not keep_trace:
        pending.remove_trace(trace)
    return run_dir


def usable_cores() -> float:
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota."""
    try:
        cores = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = float(os.cpu_count() or 1)
    with contextlib.suppress(OSError, ValueError, ZeroDivisionError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, int(quota) / int(period))
    return cores


class IdleCores:
    """How many cores were idle over a stretch of time: the machine's idle time (``/proc/stat``)
    and what the process ``pid`` left of ``usable_cores()`` (its CPU clock), whichever
    is fewer. ``measurable`` is False where ``/proc`` cannot be read."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cores = usable_cores()
        self._start = self._read()
        self.measurable = self._start is not None

    def _read(self) -> tuple[float, float, float | None] | None:
        """(monotonic seconds, machine idle core-seconds, pid's CPU seconds or None when the
        process is gone); None when the machine's idle time cannot be read."""
        now = time.monotonic()
        idle = machine_idle_s()
        if idle is None:
            return None
        used = process_cpu_ns(self.pid)
        return now, idle, None if used is None else used / 1e9

    def restart(self) -> None:
        """Start a new stretch now."""
        self._start = self._read()

    def sample(self, min_s: float) -> float | None:
        """Cores idle on average since the stretch began, then start a new one; None (and the
        stretch goes on) when it is shorter than ``min_s`` seconds or cannot be read."""
        start, now = self._start, self._read()
        if start is None or now is None or now[0] - start[0] < min_s:
            if start is None:
                self._start = now
            return None
        self._start = now
        wall = now[0] - start[0]
        machine = (now[1] - start[1]) / wall
        if start[2] is None or now[2] is None:
            return machine  # the training process is gone: it leaves every core
        return min(machine, self.cores - (now[2] - start[2]) / wall)


def _job_id(job: dict[str, Any]) -> int:
    try:
        return int(job.get("id", -1))
    except (TypeError, ValueError):
        return -1


class Inbox:
    """The jobs read from the parent by a thread, in order, how far the parent asked the helper
    to hurry (``{"hurry": id}``: jobs up to that id are not deferred), whether it is
    exporting (``{"hold": bool}``: no deferred job starts meanwhile), and whether it closed
    (``{"close": true}``, or the pipe's end: a process the parent forked after starting the
    helper, such as a DataLoader worker, holds the pipe open, so the parent says it)."""

    def __init__(self, commands: IO[bytes], parent: int | None = None) -> None:
        self._cond = threading.Condition()
        self._jobs: deque[dict[str, Any]] = deque()
        self._hurry = -1
        self._held = False
        self._closed = False
        #: The program this helper converts for, and whether it said it is exiting
        #: (``{"close": true, "exiting": true}``): its queue then waits for its exit.
        self._parent = parent
        self._exiting = False
        #: Whether a job has started (``next_job`` gave one).
        self.started = False
        thread = threading.Thread(
            target=self._read, args=(commands,), name="perfkit-inbox", daemon=True
        )
        thread.start()

    def _read(self, commands: IO[bytes]) -> None:
        for raw in commands:
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # a blank or broken line carries no job
            if not isinstance(message, dict):
                continue
            if message.get("close"):
                self._exiting = bool(message.get("exiting"))
                break  # the jobs before it are all here; nothing follows
            with self._cond:
                if "hurry" in message:
                    self._hurry = max(self._hurry, _job_id({"id": message["hurry"]}))
                elif "hold" in message:
                    self._held = bool(message["hold"])
                else:
                    self._jobs.append(message)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """Whether the parent closed the pipe (it is done sending jobs, or exiting)."""
        with self._cond:
            return self._closed

    @property
    def held(self) -> bool:
        """Whether the parent is exporting a profile now."""
        with self._cond:
            return self._held

    def _deferred(self, job: dict[str, Any]) -> bool:
        return bool(job.get("defer")) and not self._closed and _job_id(job) > self._hurry

    def next_job(self, idle: IdleCores | None) -> dict[str, Any] | None:
        """The next job, once it may start: at once unless it is deferred, then when ``idle``
        saw ``MIN_IDLE_CORES`` idle cores over a sample taken while the parent was not
        exporting (at once when ``idle`` is None or cannot measure). None when the parent
        closed the pipe and no job is left."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._jobs) or self._closed)
            if not self._jobs:
                return None
            job = self._jobs[0]
            if idle is not None and idle.measurable:
                idle.restart()
                while self._deferred(job):
                    self._cond.wait(SAMPLE_S)
                    if self._held:
                        idle.restart()  # a sample starts once the export is over
                        continue
                    cores = idle.sample(SAMPLE_S * 0.8)
                    if cores is not None and cores >= MIN_IDLE_CORES:
                        break
            if self._closed and self._exiting:
                self._exiting = False
                self._cond.release()
                try:
                    self._wait_for_parent_exit()
                finally:
                    self._cond.acquire()
            self.started = True
            return self._jobs.popleft()

    def _wait_for_parent_exit(self) -> None:
        """Wait (at most ``PARENT_EXIT_WAIT_S``) until the program that said it is exiting has
        exited: converting beside its exit slows the exit (measured: a one-thread torch loop's
        program took 0.4 s longer to exit on two cores), and nothing reads the runs sooner."""
        if self._parent is None:
            return
        deadline = time.monotonic() + PARENT_EXIT_WAIT_S
        while os.getppid() == self._parent and time.monotonic() < deadline:
            time.sleep(0.02)


@functools.cache
def _one_thread() -> None:
    """Arrow's CPU and I/O pools at one thread each (its pools ignore most variables), once,
    when the helper is about to convert: importing Arrow is work the helper would otherwise do
    beside training, before any conversion needs it."""
    with contextlib.suppress(Exception):
        import pyarrow

        pyarrow.set_cpu_count(1)
        pyarrow.set_io_thread_count(1)


def _reply(replies: IO[bytes], message: dict[str, Any]) -> bool:
    """Write one reply line; False when the parent is gone (not an error: the helper finishes
    the queue of a program that exited)."""
    try:
        replies.write(json.dumps(message).encode() + b"\n")
        replies.flush()
    except (OSError, ValueError):
        return False
    return True


def serve(inbox: Inbox, replies: IO[bytes], idle: IdleCores | None) -> None:
    """Convert the jobs of ``inbox`` in order until the parent closes the pipe, replying
    ``{"id", "started"}`` when one begins and ``{"id", "ok", "error"}`` when it ends."""
    while (job := inbox.next_job(idle)) is not None:
        _reply(replies, {"id": job.get("id"), "started": True})
        _one_thread()
        try:
            convert_file(
                Path(job["trace"]),
                Path(job["run_dir"]),
                dict(job.get("meta") or {}),
                keep_trace=bool(job.get("keep_trace")),
            )
            reply: dict[str, Any] = {"id": job.get("id"), "ok": True}
        except OSError as exc:
            from perfkit_core.capture.handlers import os_error_reason

            error = f"the run could not be saved ({os_error_reason(exc)})"
            reply = {"id": job.get("id"), "ok": False, "error": error}
        except Exception as exc:
            reply = {"id": job.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if not reply["ok"] and job.get("run_dir"):
            from perfkit_core.events import pending

            pending.mark_failed(Path(str(job["run_dir"])), reply["error"])
        _reply(replies, reply)


def ready_loaders(inbox: Inbox, idle: IdleCores) -> None:
    """Import what a conversion needs (the loaders, pandas and Arrow, the plugins), on a core
    training leaves idle, so that a helper started before its first job (``BackgroundConverter
    .start()``) does not import them when the program waits for that job. Gives up once a job
    has started, which imports them itself, and once the program has closed the pipe: an
    exiting program's queue is converted after its exit, and importing beside the exit made a
    Keras program's exit up to 0.5 s longer. Never raises."""
    if not idle.measurable:
        return
    idle.restart()
    while not inbox.started and not inbox.closed:
        time.sleep(SAMPLE_S)
        cores = idle.sample(SAMPLE_S * 0.8)
        if cores is None or cores < MIN_IDLE_CORES or inbox.held or inbox.closed:
            continue
        with contextlib.suppress(Exception):
            import perfkit_core.events.loading  # noqa: F401
            from perfkit_core.plugins import get_plugin_manager

            get_plugin_manager()
            _one_thread()
        return


def main() -> None:
    """Serve conversion jobs read from stdin, one JSON object a line, until stdin closes."""
    parent = os.getppid()
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing but replies may reach the pipe
    # Ctrl-C in a terminal reaches every process of the group: the program decides when the
    # helper stops (it closes stdin, and the queued runs are saved first).
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    lower_priority()
    inbox = Inbox(sys.stdin.buffer, parent)
    threading.Thread(
        target=ready_loaders, args=(inbox, IdleCores(parent)), name="perfkit-ready", daemon=True
    ).start()
    serve(inbox, replies, IdleCores(parent))


if __name__ == "__main__":
    main()
