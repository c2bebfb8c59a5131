"""The conversion helper as a process: the environment it starts with, how its exit reads in
words, and its standard error passed on to the program's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

#: Environment variables that size the thread pools of the libraries a conversion uses.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OMP_THREAD_LIMIT",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "ARROW_NUM_THREADS",
    "POLARS_MAX_THREADS",
    "RAYON_NUM_THREADS",
)


def helper_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """Return the environment the helper process starts with: ``base`` (default ``os.environ``)
    with one thread for every numeric library, unbuffered output, and ``PYTHONPATH`` holding
    this process's ``sys.path`` (so the helper imports the same perfkit and plugins)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONUNBUFFERED"] = "1"
    for name in THREAD_VARIABLES:
        env[name] = "1"
    paths = [p for p in sys.path if p] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def exit_description(code: int) -> str:
    """``code`` of an exited process in words: "killed by SIGKILL" or "exit code 3"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def pass_on(proc: subprocess.Popen[bytes]) -> None:
    """Write what the helper prints on its stderr (a warning, a crash's traceback) to this
    program's stderr, line by line, until the helper or this program ends."""
    assert proc.stderr is not None
    with contextlib.suppress(Exception):
        for raw in proc.stderr:
            sys.stderr.write(raw.decode(errors="replace"))
            sys.stderr.flush()
    with contextlib.suppress(Exception):
        proc.stderr.close()
