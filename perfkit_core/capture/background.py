"""Convert native traces into saved runs in a helper process, off the training loop.

A profiler callback runs inside the training loop, and every second it takes stalls training
(and, in a distributed job, every other rank). The native export has to happen there, because
the profiler frees its buffers afterwards; turning the exported file into a run does not.
``BackgroundConverter`` starts one helper process (``python -m perfkit_core.capture``) on
first use and sends it one job per trace over a pipe. The helper loads the file with
``perfkit_core.load`` (any installed adapter), adds the given metadata, saves the run and, unless
asked to keep it, removes the native trace. Jobs run one after the other, in order.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: Called as ``done(run_dir, error)`` when a job ends; ``error`` is None on success.
DoneCallback = Callable[[Path, "str | None"], None]


@dataclass
class _Job:
    run_dir: Path
    trace: Path
    done: DoneCallback


class BackgroundConverter:
    """One helper process converting traces to runs, in submission order."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._pending: dict[int, _Job] = {}
        self._next_id = 0
        self._closed = False
        # Conversions still queued at exit are finished (the native traces stay on disk if not).
        atexit.register(self.close, 600.0)

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # The helper must import the same perfkit (and plugins) as this process, even when the
        # program extended sys.path at run time.
        paths = [p for p in sys.path if p] + [
            p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
        ]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfkit_core.capture"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        reader = threading.Thread(
            target=self._read_replies, args=(proc,), name="perfkit-converter", daemon=True
        )
        reader.start()
        self._proc, self._reader = proc, reader
        return proc

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
        helper thread when the job ends. Raises ``OSError`` when the helper cannot be started or
        reached (callers then convert in-process).
        """
        with self._lock:
            if self._closed:
                raise OSError("the background converter is closed")
            proc = self._proc
            if proc is None or proc.poll() is not None:
                proc = self._start()
            job_id = self._next_id
            self._next_id += 1
            self._pending[job_id] = _Job(run_dir, trace, done)
            line = json.dumps(
                {
                    "id": job_id,
                    # Absolute: the helper keeps the directory it started in, the program may not.
                    "trace": str(Path(trace).absolute()),
                    "run_dir": str(Path(run_dir).absolute()),
                    "meta": meta,
                    "keep_trace": keep_trace,
                },
                default=str,
            )
            try:
                assert proc.stdin is not None
                proc.stdin.write(line.encode() + b"\n")
                proc.stdin.flush()
            except (OSError, ValueError) as exc:
                del self._pending[job_id]
                raise OSError(f"cannot reach the conversion helper: {exc}") from exc

    def _read_replies(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                reply = json.loads(raw)
            except ValueError:
                continue
            with self._lock:
                job = self._pending.pop(int(reply.get("id", -1)), None)
                self._lock.notify_all()
            if job is not None:
                job.done(job.run_dir, None if reply.get("ok") else str(reply.get("error")))
        code = proc.wait()
        with self._lock:
            lost = [job for job in self._pending.values()]
            self._pending.clear()
            self._lock.notify_all()
        for job in lost:
            job.done(
                job.run_dir,
                f"the conversion helper exited (code {code}) before converting {job.trace}",
            )

    def pending(self) -> int:
        """Return how many submitted conversions have not finished."""
        with self._lock:
            return len(self._pending)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted conversion has finished; False if ``timeout`` ran out."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._pending, timeout=timeout)

    def close(self, timeout: float | None = None) -> None:
        """Finish the queued conversions, then stop the helper process."""
        with self._lock:
            self._closed = True
            proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


_shared: BackgroundConverter | None = None
_shared_lock = threading.Lock()


def shared_converter() -> BackgroundConverter:
    """Return the process-wide converter (one helper process however many handlers exist)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._closed:
            _shared = BackgroundConverter()
        return _shared


def convert_file(trace: Path, run_dir: Path, meta: dict[str, Any], *, keep_trace: bool) -> Path:
    """Load ``trace``, merge ``meta`` into its metadata, save it in ``run_dir``; return run_dir.

    The native trace is removed after the run is saved unless ``keep_trace``.
    """
    from perfkit_core.events.loading import load

    run = load(trace)
    extra = dict(meta.pop("extra", None) or {})
    run.meta.update(meta)
    run.meta.setdefault("extra", {})
    run.meta["extra"].update(extra)
    if not keep_trace:
        run.meta["source"] = None
    run.save(run_dir)
    if not keep_trace:
        with contextlib.suppress(OSError):
            trace.unlink()
    return run_dir


def _serve(commands: IO[bytes], replies: IO[bytes]) -> None:
    for raw in commands:
        if not raw.strip():
            continue
        job: dict[str, Any] = {}
        try:
            job = json.loads(raw)
            convert_file(
                Path(job["trace"]),
                Path(job["run_dir"]),
                dict(job.get("meta") or {}),
                keep_trace=bool(job.get("keep_trace")),
            )
            reply: dict[str, Any] = {"id": job.get("id"), "ok": True}
        except Exception as exc:
            reply = {"id": job.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply).encode() + b"\n")
        replies.flush()


def main() -> None:
    """Serve conversion jobs read from stdin, one JSON object a line, until stdin closes."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing but replies may reach the pipe
    _serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
