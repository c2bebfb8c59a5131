"""Convert native traces into saved runs in a helper process, off the training loop.

A profiler callback runs inside the training loop, and every second it takes stalls training
(and, in a distributed job, every other rank). The native export has to happen there, because
the profiler frees its buffers afterwards; turning the exported file into a run does not.
``BackgroundConverter`` starts one helper process (``python -m perfkit_core.capture``, see
``perfkit_core.capture.helper``; it imports perfkit only once the program sends it a first
line, see ``BOOTSTRAP``) on first use (``start()``, which the torch handler calls when
it is made, or the first job) and sends it one job per trace over a pipe. The
helper loads the file with ``perfkit_core.load`` (any installed adapter), adds the given
metadata, saves the run and, unless asked to keep it, removes the native trace. Jobs run one
after the other, in order.

The helper must not slow the training it runs beside. It runs at the lowest CPU priority the
system grants (nice 19, and ``SCHED_IDLE`` on Linux; its disk priority follows its nice value)
with one compute thread (``OMP_NUM_THREADS`` and the other thread-count variables set to 1,
Arrow's pools at one thread), and it starts a conversion only on a core that training leaves
idle: while training keeps every core busy, the traces wait on disk, up to ``defer_bytes``
(``DEFAULT_DEFER_BYTES``) of them. Beyond that, and whenever the program waits for the helper
(``wait()``, a full queue, a full disk, exit), it converts at once.

A program that exits does not wait for its queued conversions (unless
``PERFKIT_WAIT_AT_EXIT=1``): the helper, in a session of its own, finishes them after it, as
the framework's own handler leaves its export on disk and returns. Each queued trace's run
folder holds a note (``perfkit_core.events.pending``) with the run's metadata, which the helper
removes once the run is saved: ``perfkit_core.load`` of such a folder waits for the helper
that is finishing it, or converts it itself when the helper is gone, so no reader gets a run
without its metadata and no profile is lost.

What waits for it is bounded: at most ``max_jobs`` traces (``DEFAULT_MAX_JOBS``) holding at
most ``max_bytes`` bytes (``DEFAULT_MAX_BYTES``) are queued; ``wait_for_room`` blocks the caller
until the next trace fits, and while training waits there the helper has the cores to itself.

Each helper process has its own jobs: a helper that dies (killed, out of memory) fails exactly
the jobs it was given, and a job sent after that goes to a new helper, whose replies only its own
reader reads.

The helper is a fresh interpreter started with ``subprocess``, not ``multiprocessing``: it never
re-imports the user's training script and never inherits the parent's threads or device state.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfkit_core.capture.helper_process import exit_description, helper_environment, pass_on
from perfkit_core.capture.priority import lower_priority
from perfkit_core.events import pending
from perfkit_core.events.atomic import remove_leftovers

#: Called as ``done(run_dir, error)`` when a job ends; ``error`` is None on success.
DoneCallback = Callable[[Path, "str | None"], None]

#: At most this many traces wait for the helper at once (the one it converts included).
DEFAULT_MAX_JOBS = 8
#: At most this many bytes of native traces wait for the helper at once.
DEFAULT_MAX_BYTES = 4 << 30
#: While at most this many bytes of traces are queued, the helper converts only on an idle core.
DEFAULT_DEFER_BYTES = 1 << 30

#: Set to 1, a program waits at exit for its queued conversions instead of leaving them to
#: the helper.
WAIT_AT_EXIT_VARIABLE = "PERFKIT_WAIT_AT_EXIT"


#: The helper's first instructions: wait, having imported nothing of perfkit, until the
#: program sends its first line (a job, an export's hold, a close) or closes the pipe; then run
#: the helper (``python -m perfkit_core.capture``). Its imports (numpy, the event model, the
#: plugins: about 0.45 s of CPU) would otherwise run beside the training loop's first steps,
#: which ``bench_training_overhead.py`` measured 0.2-0.4 s slower for it, at the lowest priority.
BOOTSTRAP = (
    "import select, sys\n"
    "select.select([sys.stdin], [], [])\n"
    "from perfkit_core.capture.helper import main\n"
    "main()\n"
)


@dataclass
class _Job:
    run_dir: Path
    trace: Path
    done: DoneCallback
    nbytes: int
    command: dict[str, Any]
    helper: subprocess.Popen[bytes] | None = None
    #: Set when the helper said it began this job; a job never begun is resent to a new helper.
    started: bool = False


class BackgroundConverter:
    """One helper process converting traces to runs, in submission order.

    ``max_jobs`` and ``max_bytes`` bound what waits for the helper (see ``wait_for_room``).
    While the queued traces hold at most ``defer_bytes`` bytes, the helper starts each one only
    on a core training leaves idle; ``defer_bytes=0`` converts every trace at once.
    """

    def __init__(
        self,
        *,
        max_jobs: int = DEFAULT_MAX_JOBS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        defer_bytes: int = DEFAULT_DEFER_BYTES,
    ) -> None:
        self.max_jobs = max(int(max_jobs), 1)
        self.max_bytes = max(int(max_bytes), 0)
        self.defer_bytes = max(int(defer_bytes), 0)
        #: Jobs up to this id are not deferred (the program waits for them, or too much waits).
        self._hurry_through = -1
        #: How many callers are inside ``urgent()``: while any is, no job is deferred.
        self._urgent = 0
        self._lock = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._readers: list[threading.Thread] = []
        self._pending: dict[int, _Job] = {}
        self._next_id = 0
        self._closed = False
        # At exit the queued conversions are left to the helper (or waited for; see
        # ``_close_at_exit``); each run folder's note lets a reader finish what it leaves.
        atexit.register(self._close_at_exit)

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Not the program's own: the helper outlives the program, and holding its stderr
            # would keep a pipe the program wrote into (``python train.py 2>&1 | tee log``)
            # open until the helper ends. Its lines are passed on while the program runs.
            stderr=subprocess.PIPE,
            env=helper_environment(),
            # Its own session: a Ctrl-C in the terminal interrupts training, not the helper,
            # which saves the queued runs when the program closes it at exit.
            start_new_session=True,
        )
        # At the lowest priority from its first moment: its interpreter's start and its
        # imports would otherwise compete with training until it lowers its own.
        lower_priority(proc.pid)
        reader = threading.Thread(
            target=self._read_replies, args=(proc,), name="perfkit-converter", daemon=True
        )
        reader.start()
        threading.Thread(
            target=pass_on, args=(proc,), name="perfkit-converter-stderr", daemon=True
        ).start()
        self._proc = proc
        self._readers = [r for r in self._readers if r.is_alive()] + [reader]
        return proc

    def start(self) -> None:
        """Start the helper process now, when none is running: it readies its loaders on a core
        training leaves idle, so the first conversion does not wait for the helper to start
        and import them. Raises ``OSError`` when it cannot be started."""
        with self._lock:
            if self._closed:
                raise OSError("the background converter is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    @property
    def helper_pid(self) -> int | None:
        """The process id of the current helper process, None before it started (``start()`` or
        the first job)."""
        with self._lock:
            return self._proc.pid if self._proc is not None else None

    def submit(
        self,
        trace: Path,
        run_dir: Path,
        meta: dict[str, Any],
        *,
        keep_trace: bool,
        done: DoneCallback,
    ) -> None:
        """Queue the conversion of ``trace`` into a run saved in ``run_dir``; return at once.

        ``meta`` is merged into the run's metadata. ``done(run_dir, error)`` is called from a
        helper thread when the job ends; ``error`` names the helper's exit when it died while
        converting this job (jobs it had not begun go to a new helper). Raises ``OSError`` when
        no helper can be started or reached (callers then convert in-process). The bound of
        ``wait_for_room`` is not enforced here.
        """
        trace = Path(trace)
        try:
            nbytes = trace.stat().st_size
        except OSError:
            nbytes = 0
        command = {
            # Absolute: the helper keeps the directory it started in, the program may not.
            "trace": str(trace.absolute()),
            "run_dir": str(Path(run_dir).absolute()),
            "meta": meta,
            "keep_trace": keep_trace,
        }
        job = _Job(Path(run_dir), trace, done, nbytes, command)
        with self._lock:
            if self._closed:
                raise OSError("the background converter is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            assert self._proc is not None
            # the note lets a reader finish this run if the helper cannot (see ``pending``)
            noted = pending.write_note(
                job.run_dir, trace, meta, keep_trace=keep_trace, helper_pid=self._proc.pid
            )
            job_id = self._next_id
            self._next_id += 1
            try:
                self._send(job_id, job)
            except OSError:
                if noted:
                    pending.remove_note(job.run_dir)  # the caller converts it itself
                raise
            if self._urgent or self.defer_bytes == 0 or self._queued_bytes() > self.defer_bytes:
                self._hurry()

    def _send(self, job_id: int, job: _Job) -> None:
        """Write ``job`` to the live helper (starting one if needed; called holding the lock)."""
        error: BaseException | None = None
        for _attempt in range(2):
            proc = self._proc
            if proc is None or proc.poll() is not None:
                proc = self._start()
            job.helper, job.started = proc, False
            self._pending[job_id] = job
            try:
                assert proc.stdin is not None
                defer = job_id > self._hurry_through
                line = json.dumps({"id": job_id, **job.command, "defer": defer}, default=str)
                proc.stdin.write(line.encode() + b"\n")
                proc.stdin.flush()
                return
            except (OSError, ValueError) as exc:
                # The helper died since poll(): this job goes to a new helper.
                del self._pending[job_id]
                error = exc
                with contextlib.suppress(Exception):
                    proc.kill()
                self._proc = None
        raise OSError(f"cannot reach the conversion helper: {error}")

    def _read_replies(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                reply = json.loads(raw)
                job_id = int(reply.get("id", -1))
            except (ValueError, TypeError, AttributeError):
                continue
            with self._lock:
                job = self._pending.get(job_id)
                if job is None or job.helper is not proc:
                    continue
                if reply.get("started"):
                    job.started = True
                    continue
                del self._pending[job_id]
                self._lock.notify_all()
            job.done(job.run_dir, None if reply.get("ok") else str(reply.get("error")))
        code = proc.wait()
        lost: list[_Job] = []
        with self._lock:
            # Only this helper's jobs: one sent to a newer helper is that helper's to answer.
            mine = sorted((i, j) for i, j in self._pending.items() if j.helper is proc)
            for job_id, job in mine:
                del self._pending[job_id]
                if job.started or self._closed:
                    lost.append(job)
                    continue
                try:
                    self._send(job_id, job)
                except OSError:
                    lost.append(job)
            self._lock.notify_all()
        for job in lost:
            if job.started:
                # The helper was the run folder's only writer: what it left half-written (its
                # hidden temporary files, its claim on the folder) goes with it.
                with contextlib.suppress(OSError):
                    remove_leftovers(job.run_dir)
            job.done(
                job.run_dir,
                f"the conversion helper (pid {proc.pid}) stopped ({exit_description(code)}) "
                "while converting this run",
            )

    def _hurry(self) -> None:
        """Tell the helper to convert every job sent so far without waiting for an idle core
        (called holding the lock; a helper that is gone gets its jobs resent undeferred)."""
        through = self._next_id - 1
        if through <= self._hurry_through:
            return  # nothing sent since the last hurry
        self._hurry_through = through
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(json.dumps({"hurry": through}).encode() + b"\n")
            proc.stdin.flush()

    @contextlib.contextmanager
    def urgent(self) -> Iterator[None]:
        """While this block runs (someone waits for the runs), every queued conversion and every
        one submitted meanwhile starts at once, idle core or not."""
        with self._lock:
            self._urgent += 1
            self._hurry()
        try:
            yield
        finally:
            with self._lock:
                self._urgent -= 1

    @contextlib.contextmanager
    def exporting(self) -> Iterator[None]:
        """Around a native export in the training loop: the helper starts no deferred
        conversion until the block ends (an export leaves cores idle for a moment; a
        conversion begun then would run on into training)."""
        self._tell({"hold": True})
        try:
            yield
        finally:
            self._tell({"hold": False})

    def _tell(self, message: dict[str, Any]) -> None:
        """Send ``message`` to the live helper, if there is one; never raises."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or proc.poll() is not None:
                return
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.write(json.dumps(message).encode() + b"\n")
                proc.stdin.flush()

    def _queued_bytes(self) -> int:
        return sum(job.nbytes for job in self._pending.values())

    def pending(self) -> int:
        """Return how many submitted conversions have not finished."""
        with self._lock:
            return len(self._pending)

    def pending_bytes(self) -> int:
        """Return the bytes of the native traces whose conversion has not finished."""
        with self._lock:
            return self._queued_bytes()

    def has_room(self, nbytes: int = 0) -> bool:
        """True when one more trace of ``nbytes`` fits the queue's bounds (always when empty)."""
        with self._lock:
            return self._has_room(nbytes)

    def _has_room(self, nbytes: int) -> bool:
        if not self._pending:
            return True
        queued = self._queued_bytes()
        return len(self._pending) < self.max_jobs and queued + nbytes <= self.max_bytes

    def wait_for_room(self, nbytes: int = 0, timeout: float | None = None) -> bool:
        """Block until one more trace of ``nbytes`` bytes fits: fewer than ``max_jobs`` queued
        and at most ``max_bytes`` in all (an empty queue always has room). Returns False if
        ``timeout`` (seconds) ran out first."""
        with self._lock:
            if not self._has_room(nbytes):
                self._hurry()
            return self._lock.wait_for(lambda: self._has_room(nbytes), timeout=timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted conversion has finished (the helper converts them at
        once from here on, idle core or not); False if ``timeout`` ran out."""
        with self.urgent(), self._lock:
            return self._lock.wait_for(lambda: not self._pending, timeout=timeout)

    def _close_at_exit(self) -> None:
        """At exit: leave the queued conversions to the helper, which finishes them after this
        program, and say so on stderr; with ``PERFKIT_WAIT_AT_EXIT=1`` in the environment,
        wait for them instead (``close``)."""
        waiting = self.pending()
        if os.environ.get(WAIT_AT_EXIT_VARIABLE, "").strip() not in ("", "0"):
            if waiting:
                self._say(
                    f"perfkit: saving {waiting} profile(s) as runs before exiting "
                    "(their native traces are kept if this is interrupted)"
                )
            self.close(600.0)
            return
        pid = self.helper_pid
        if waiting:
            self._say(
                f"perfkit: {waiting} profile(s) are being saved as runs by the conversion helper "
                f"(pid {pid}), which finishes after this program at the lowest priority; "
                "perfkit report and perfkit serve wait for them"
            )
        self.let_go()

    @staticmethod
    def _say(line: str) -> None:
        with contextlib.suppress(Exception):
            print(line, file=sys.stderr, flush=True)

    def let_go(self) -> None:
        """Close the helper's pipe without waiting: it converts what is queued, at once and at
        the lowest priority, once this program has exited, and exits; the jobs' ``done``
        callbacks are not called."""
        self._end_pipe(exiting=True)

    def close(self, timeout: float | None = None) -> None:
        """Finish the queued conversions, then stop the helper process."""
        proc, readers = self._end_pipe(exiting=False)
        if proc is None:
            return
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
        for reader in readers:
            reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()

    def _end_pipe(
        self, *, exiting: bool
    ) -> tuple[subprocess.Popen[bytes] | None, list[threading.Thread]]:
        """Mark this converter closed, tell the helper (``exiting``: to start once this program
        has exited, not beside its exit) and close its pipe; (the helper, its readers)."""
        with self._lock:
            self._closed = True
            proc = self._proc
            readers = list(self._readers)
            if proc is None or proc.stdin is None:
                return proc, readers
            # said, not only closed: a process forked from this one since the helper started
            # (a DataLoader worker) holds the pipe open, and the helper would wait for it
            # while this process waits for the helper
            message = {"close": True, "exiting": True} if exiting else {"close": True}
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.write(json.dumps(message).encode() + b"\n")
                proc.stdin.flush()
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()
        return proc, readers


_shared: BackgroundConverter | None = None
_shared_lock = threading.Lock()


def shared_converter() -> BackgroundConverter:
    """Return the process-wide converter (one helper process however many handlers exist)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._closed:
            _shared = BackgroundConverter()
        return _shared
