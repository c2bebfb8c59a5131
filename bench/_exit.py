"""A benchmark's child program timed to its exit, and its conversion helper's work after it.

perfkit's handlers leave the conversions still queued when a program exits to their helper
process, which finishes them after the program (``perfkit_core.capture.background``). What a
user's program pays is its loop and its exit; the helper's time after the exit is the
machine's, printed beside it. The next mode of a benchmark starts only once the helper is done
and the runs are counted, so its work never lands on another mode's clock.

The child prints ``LOOP_END <epoch seconds> <helper pid>`` when its loop ends (``loop_ended``);
``run_child`` takes the time from there to the child's exit (its pipes closed and its status
read), the same for every mode, the unprofiled one included.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfkit_core.events.pending import PENDING_FILE

LOOP_END = "LOOP_END"


def loop_ended(helper_pid: int | None = None) -> None:
    """In the child, when its loop (``fit``, ``train``) has returned: say when, and which
    conversion helper, if any, may work on after the child exits."""
    print(f"{LOOP_END} {time.time()!r} {helper_pid or 0}", flush=True)


def helper_pid() -> int | None:
    """The pid of this process's conversion helper, None when it has none."""
    from perfkit_core.capture import shared_converter

    return shared_converter().helper_pid


@dataclass
class Exited:
    """A child that ran to its exit: its output, status, the seconds from its loop's end to
    its exit (None when it never said its loop ended), and its helper's pid (0: none)."""

    stdout: str
    stderr: str
    returncode: int
    exit_s: float | None
    helper: int


def run_child(command: list[str], cwd: Path) -> Exited:
    """Run ``command`` to its exit and time its end (see the module's docstring)."""
    proc = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = proc.communicate()
    exited = time.time()
    exit_s, helper = None, 0
    for line in out.splitlines():
        if line.startswith(LOOP_END + " "):
            _, when, pid = line.split()
            exit_s, helper = exited - float(when), int(pid)
    return Exited(out, err, proc.returncode, exit_s, helper)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that nobody reaped yet has ended)."""
    if pid <= 0:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return state not in ("Z", "X")


def helper_done(pid: int, timeout: float = 900.0) -> float:
    """Wait until the helper ``pid`` has ended (it ends once it has finished its program's
    queue); return the seconds waited: its time after its program's exit."""
    began = time.monotonic()
    deadline = began + timeout
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.05)
    return time.monotonic() - began


def saved_runs(folder: Path) -> tuple[int, int]:
    """(saved runs, runs still queued or failed) under ``folder``."""
    if not folder.is_dir():
        return 0, 0
    saved = sum(1 for _ in folder.rglob("meta.json"))
    unsaved = sum(1 for _ in folder.rglob(PENDING_FILE))
    return saved, unsaved


def run_to_exit(command: list[str], cwd: Path, prefix: str) -> dict[str, Any] | None:
    """Run a benchmark's child ``command`` in a fresh work folder (passed as ``--work``) to its
    exit and wait for its helper; return the ``RESULT`` line it printed with ``exit_s`` (from
    its loop's end to its exit), ``helper_after_s`` and ``runs`` (saved and unsaved perfkit
    runs under ``work/runs``) added; None, its output printed, when it failed."""
    from _workload import OUT_DIR

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT_DIR, prefix=prefix) as work:
        done = run_child([*command, "--work", work], cwd)
        line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        if done.returncode != 0 or not line or done.exit_s is None:
            print(done.stdout[-2000:], done.stderr[-3000:])
            return None
        result: dict[str, Any] = json.loads(line[-1].split(" ", 1)[1])
        result["exit_s"] = done.exit_s
        result["helper_after_s"] = helper_done(done.helper)
        result["runs"] = saved_runs(Path(work) / "runs")
    return result
