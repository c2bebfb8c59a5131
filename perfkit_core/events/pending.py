"""A run the conversion helper has yet to save: the note a handler leaves in the run's folder.

When a profiler handler queues a native trace for the conversion helper
(``perfkit_core.capture.background``), it first writes ``PENDING_FILE`` into the run's folder:
the trace's name, the metadata the run gets (the model, the step timing, the rank), whether
the native trace is kept, and the helper's process id and host. The helper removes the note
once the run is saved.

A program that exits does not wait for its queued conversions: the helper, which runs in a
session of its own at the lowest priority, finishes them after the program is gone, as the
framework's own handler leaves its export on disk and returns. The note makes that safe for
a reader: ``perfkit_core.load`` of such a folder (``finish``) waits while the helper lives,
and when the helper is gone before saving (killed with its machine, say) converts the trace
itself with the note's metadata, so the run read is the same either way.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfkit_core.events.atomic import process_alive, saving_owner, write_bytes
from perfkit_core.events.run import META_FILE, Run

#: The note's name in the run folder (hidden: no reader takes it for a trace).
PENDING_FILE = ".perfkit-pending"
#: How long a reader waits for a live helper to save a run, in seconds.
PENDING_WAIT_S = 600.0
#: How often a waiting reader looks again, in seconds.
POLL_S = 0.1


def write_note(
    run_dir: Path,
    trace: Path,
    meta: dict[str, Any],
    *,
    keep_trace: bool,
    helper_pid: int,
    program: int | None = None,
) -> bool:
    """Write the note for ``trace`` (inside ``run_dir``) queued by ``program`` (default: this
    process) for the helper ``helper_pid``; False when it cannot be written (the job still
    goes to the helper)."""
    note = {
        "trace": str(Path(trace).absolute()),
        "meta": meta,
        "keep_trace": keep_trace,
        "pid": helper_pid,
        "program": os.getpid() if program is None else program,
        "host": socket.gethostname(),
    }
    try:
        write_bytes(Path(run_dir) / PENDING_FILE, json.dumps(note, default=str).encode())
    except (OSError, TypeError, ValueError):
        return False
    return True


def read_note(run_dir: Path) -> dict[str, Any] | None:
    """The note in ``run_dir``, None when there is none (or it cannot be read)."""
    try:
        note = json.loads((Path(run_dir) / PENDING_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def has_note(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a note (a conversion queued and not saved yet)."""
    return os.path.lexists(Path(run_dir) / PENDING_FILE)


def remove_note(run_dir: Path) -> None:
    """Remove ``run_dir``'s note (the run is saved, or its conversion failed for good)."""
    with contextlib.suppress(OSError):
        (Path(run_dir) / PENDING_FILE).unlink()


def helper_will_save(note: dict[str, Any]) -> bool:
    """Whether the helper a note names still runs and has not given the run up (a note with
    an ``error``: ``mark_failed``)."""
    return not note.get("error") and _alive(note, "pid")


def mark_failed(run_dir: Path, error: str) -> None:
    """Say in ``run_dir``'s note that its helper could not save the run, and why: a reader
    then neither waits for the helper nor leaves the run to it, but converts the trace itself
    (saying what is wrong with it, or saving the run where the helper could not). Never
    raises; nothing is written where the folder holds no note."""
    note = read_note(run_dir)
    if note is None:
        return
    note["error"] = str(error)
    with contextlib.suppress(OSError, TypeError, ValueError):
        write_bytes(Path(run_dir) / PENDING_FILE, json.dumps(note, default=str).encode())


def apply_meta(run: Run, meta: dict[str, Any], *, keep_trace: bool) -> Run:
    """Merge a handler's ``meta`` into ``run``'s metadata, as the helper saves it: ``extra``
    merged key by key, a ``rank`` also set as the rank column of a one-rank trace (a launcher's
    rank the native file does not record), and no ``source`` when the native trace is not
    kept."""
    meta = dict(meta)
    extra = dict(meta.pop("extra", None) or {})
    rank = meta.get("rank")
    if isinstance(rank, int) and len(run.meta.get("ranks") or [0]) == 1:
        import numpy as np

        run.events["rank"] = np.full(len(run.events), rank, dtype=run.events["rank"].dtype)
        run.meta["ranks"] = [rank]
    run.meta.update(meta)
    run.meta.setdefault("extra", {})
    run.meta["extra"].update(extra)
    if not keep_trace:
        run.meta["source"] = None
    return run


def finish(
    run_dir: Path, load_trace: Callable[[Path], Run], *, wait_s: float = PENDING_WAIT_S
) -> Run | None:
    """The run of a folder whose conversion is queued (it holds a note); None when it holds
    none, or its trace is gone.

    - The program that queued it has exited and its helper lives (the helper finishes the
      program's queue after it), or a process is saving the run now: wait for the saved run
      (at most ``wait_s`` seconds, said on stderr).
    - The program still runs (the helper defers conversions while training keeps the cores
      busy): the trace converted here with the note's metadata, the same run the helper will
      save, and nothing written.
    - The helper is gone without saving it (killed with its machine, say), or could not save
      it (the note says why): the trace converted here with the note's metadata and saved in
      the folder where that can be done.
    """
    run_dir = Path(run_dir)
    meta_path = run_dir / META_FILE
    note = read_note(run_dir)
    if note is None:
        return None
    deadline = time.monotonic() + wait_s
    told = False
    while not meta_path.exists() and time.monotonic() < deadline:
        if not (finishing(note) or saving_owner(run_dir)):
            break
        if not told:
            told = True
            print(
                f"perfkit: waiting for the conversion helper (pid {note.get('pid')}) to save "
                f"{run_dir} as a run",
                file=sys.stderr,
                flush=True,
            )
        time.sleep(POLL_S)
        note = read_note(run_dir) or note
    if meta_path.exists():
        return Run.read(run_dir)
    trace = Path(str(note.get("trace") or ""))
    if not str(note.get("trace") or "") or not trace.exists():
        return None
    keep = bool(note.get("keep_trace"))
    run = apply_meta(load_trace(trace), dict(note.get("meta") or {}), keep_trace=keep)
    if helper_will_save(note) or saving_owner(run_dir):
        return run  # the helper's to save
    try:
        run.save(run_dir)
    except Exception:  # not this reader's to save (a read-only folder, say): still read
        return run
    remove_note(run_dir)
    if not keep:
        remove_trace(trace)
    return Run.read(run_dir)


def remove_trace(trace: Path) -> None:
    """Remove a converted native export: a file, or a log folder (TensorFlow's, say)."""
    import shutil

    if trace.is_dir() and not trace.is_symlink():
        shutil.rmtree(trace, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            trace.unlink()


def finishing(note: dict[str, Any]) -> bool:
    """Whether a note's helper is finishing the queue of a program that has exited (it
    converts at once then: a reader waits for it)."""
    return helper_will_save(note) and not _program_alive(note)


def _program_alive(note: dict[str, Any]) -> bool:
    """Whether the program that queued a note's conversion still runs."""
    return _alive(note, "program")


def _alive(note: dict[str, Any], key: str) -> bool:
    """Whether the process whose id a note holds under ``key`` still runs (False when the note
    holds none)."""
    try:
        return process_alive(int(note[key]), str(note.get("host") or socket.gethostname()))
    except (KeyError, TypeError, ValueError):
        return False
