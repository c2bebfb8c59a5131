"""What every framework's ``on_trace_ready`` handler shares: run folders, metadata, chained
handlers that must not crash training, and failures warned about once."""

from __future__ import annotations

import logging
import os
import socket
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger("perfkit")


def default_worker_name() -> str:
    """``<host>_<pid>``, as torch's tensorboard handler names workers."""
    return f"{socket.gethostname()}_{os.getpid()}"


def new_run_dir(dir_name: Path, worker_name: str, step: int | None) -> Path:
    """A folder under ``dir_name`` for one profiled cycle: ``<worker>.step<N>`` (``.2``, ``.3``,
    ... appended when it exists already). Not created here."""
    stem = f"{worker_name}.step{step}" if step is not None else worker_name
    candidate = dir_name / stem
    suffix = 1
    while candidate.exists():
        suffix += 1
        candidate = dir_name / f"{stem}.{suffix}"
    return candidate


def handler_metadata(
    framework: str, version: str | None, prof: Any, worker_name: str | None
) -> dict[str, Any]:
    """What a handler adds to a run's metadata: framework and version, host, worker, step."""
    return {
        "framework": framework,
        "framework_version": version,
        "host": socket.gethostname(),
        "extra": {
            "worker_name": worker_name,
            "profiler_step_num": getattr(prof, "step_num", None),
            "recorded_at": time.time(),
        },
    }


class Failures:
    """Failures of one handler: kept in a list, warned about once, logged after that."""

    def __init__(self) -> None:
        self.items: list[tuple[Path, str]] = []
        self._warned = False
        self._warned_chain: set[str] = set()

    def record(self, kept: Path | None, fallback: Path, reason: str) -> None:
        """Record that a cycle was not saved; ``kept`` is where its native trace is, if anywhere."""
        where = str(kept) if kept else "nowhere: the profiler could not export it"
        self.items.append((kept or fallback, reason))
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"perfkit: could not save this profile as a perfkit run ({reason}); the native "
                f"trace is kept at {where}. Training goes on; later failures are logged, not warned.",
                RuntimeWarning,
                stacklevel=4,
            )
        else:
            logger.warning("perfkit: profile not converted (%s); native trace at %s", reason, where)

    def call_chained(self, handler: Callable[[Any], Any], prof: Any) -> None:
        """Call a chained handler; its error is warned about once and contained (an exception
        escaping ``on_trace_ready`` can crash the process when the profiler stops)."""
        try:
            handler(prof)
        except Exception as exc:
            name = getattr(handler, "__qualname__", repr(handler))
            if name not in self._warned_chain:
                self._warned_chain.add(name)
                warnings.warn(
                    f"perfkit: chained handler {name} failed ({type(exc).__name__}: {exc}); training goes on",
                    RuntimeWarning,
                    stacklevel=4,
                )
            logger.debug("chained handler %s failed", name, exc_info=True)
