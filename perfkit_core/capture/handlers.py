"""What every framework's ``on_trace_ready`` handler shares: run folders claimed atomically,
metadata, room on disk and in the conversion queue before an export, exports checked for being
cut short, chained handlers that must not crash training, and failures warned about once."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_core.capture.background import BackgroundConverter

logger = logging.getLogger("perfkit")


def default_worker_name() -> str:
    """``<host>_<pid>``, as torch's tensorboard handler names workers."""
    return f"{socket.gethostname()}_{os.getpid()}"


def claim_run_dir(dir_name: Path, worker_name: str, step: int | None) -> Path:
    """Create and return a new folder under ``dir_name`` for one profiled cycle:
    ``<worker>.step<N>``, with ``.2``, ``.3``, ... appended when that name is taken.

    The folder is created with an exclusive ``mkdir``, so two processes sharing ``dir_name``
    and ``worker_name`` never get the same folder. Raises ``OSError`` when it cannot be made.
    """
    stem = f"{worker_name}.step{step}" if step is not None else worker_name
    dir_name.mkdir(parents=True, exist_ok=True)
    suffix = 1
    while True:
        candidate = dir_name / (stem if suffix == 1 else f"{stem}.{suffix}")
        try:
            candidate.mkdir()
        except FileExistsError:
            suffix += 1
            continue
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
            "pid": os.getpid(),
            "profiler_step_num": getattr(prof, "step_num", None),
            "recorded_at": time.time(),
        },
    }


#: Room kept free beyond a trace's own size before exporting it, in bytes.
MIN_FREE_BYTES = 64 << 10
#: How long the training loop may wait for queued conversions before an export, in seconds.
ROOM_TIMEOUT_S = 300.0


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the filesystem holding ``path`` (or its nearest existing
    parent); None when that cannot be told."""
    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
        except FileNotFoundError:
            continue
        except (OSError, AttributeError):
            return None
        return st.f_bavail * st.f_frsize
    return None


def megabytes(nbytes: float) -> str:
    """``nbytes`` as "12.3 MB" (10**6 bytes)."""
    return f"{nbytes / 1e6:.1f} MB"


def make_room(
    directory: Path,
    estimate: int,
    converter: BackgroundConverter | None = None,
    *,
    timeout: float = ROOM_TIMEOUT_S,
) -> str | None:
    """Wait until a native trace of about ``estimate`` bytes can be exported under ``directory``;
    return None, or why it cannot (the disk is full).

    With a ``converter``, waits first until the trace fits its queue (``wait_for_room``); when
    the disk lacks ``estimate`` plus a quarter (for the run saved beside it) plus
    ``MIN_FREE_BYTES``, waits for the queued conversions, which remove their traces. Waits at
    most ``timeout`` seconds for each. The training loop waits here only when the bounds are
    reached.
    """
    if converter is not None:
        converter.wait_for_room(estimate, timeout=timeout)
    need = estimate + estimate // 4 + MIN_FREE_BYTES
    free = free_bytes(directory)
    if free is not None and free < need and converter is not None and converter.pending():
        converter.wait(timeout=timeout)
        free = free_bytes(directory)
    if free is None or free >= need:
        return None
    last = f", and the last native trace took at least {megabytes(estimate)}" if estimate else ""
    return f"disk full: {megabytes(free)} free on the filesystem of {directory}{last}"


def fallback_dir() -> Path:
    """Where a native trace goes when its run folder cannot take it:
    ``<temp dir>/perfkit_unsaved``."""
    return Path(tempfile.gettempdir()) / "perfkit_unsaved"


#: The most the fallback folder may hold before no more traces go there, in bytes: it lives in
#: the temp dir, which nothing empties while the machine runs, and it is for a few cycles that
#: could not be saved, not for a whole training run's.
FALLBACK_MAX_BYTES = 2 << 30


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def fallback_refusal(estimate: int, folder: Path | None = None) -> str | None:
    """Why the fallback folder (``fallback_dir()``) cannot take a native trace of about
    ``estimate`` bytes: it already holds ``FALLBACK_MAX_BYTES``, or its filesystem lacks the
    room; None when it can."""
    folder = folder or fallback_dir()
    held = folder_bytes(folder)
    if held + estimate > FALLBACK_MAX_BYTES:
        return (
            f"the fallback folder {folder} already holds {megabytes(held)} of traces not saved as "
            f"runs (it takes at most {megabytes(FALLBACK_MAX_BYTES)}): read or remove them"
        )
    free = free_bytes(folder)
    if free is not None and free < estimate + MIN_FREE_BYTES:
        return f"disk full: {megabytes(free)} free on the filesystem of {folder}"
    return None


def export_is_complete(path: Path, last: bytes = b"}") -> bool:
    """True when ``path`` is a non-empty file whose last non-blank bytes are ``last``
    (a JSON export cut short by a full disk or a killed writer ends elsewhere, or is empty)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return False
            fh.seek(max(size - 4096, 0))
            tail = fh.read().rstrip()
    except OSError:
        return False
    return tail.endswith(last)


def partial_files(path: Path) -> list[Path]:
    """``path`` and the temporary files an exporter writes before renaming (torch's
    ``<path>.tmp``) that exist."""
    return [p for p in (path, path.with_name(path.name + ".tmp")) if p.exists()]


def remove_partial(path: Path) -> int:
    """Remove what a cut-short export left at ``path`` (see ``partial_files``); return the
    bytes it had written."""
    written = 0
    for part in partial_files(path):
        with contextlib.suppress(OSError):
            written = max(written, part.stat().st_size)
            part.unlink()
    return written


def cut_short_reason(path: Path, what: str, written: int) -> str:
    """Why the export at ``path`` is incomplete, in words: "disk full" when its filesystem has
    less than ``MIN_FREE_BYTES`` free (``written`` bytes still counted as used), else "cut
    short"."""
    text = "nothing written" if not written else f"{megabytes(written)} written"
    free = free_bytes(path.parent)
    if free is not None and free - written < MIN_FREE_BYTES:
        return (
            f"disk full: {what} was cut short at {path} ({text}; "
            f"{megabytes(max(free - written, 0))} free on its filesystem)"
        )
    return f"{what} was cut short at {path} ({text})"


def os_error_reason(exc: BaseException, path: Path | None = None) -> str:
    """An ``OSError`` in words that name the real problem and the real path: "disk full",
    "read-only file system", "permission denied"; other errors as ``Type: message``."""
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else path
        text = {
            errno.ENOSPC: "disk full",
            errno.EDQUOT: "disk quota exceeded",
            errno.EROFS: "read-only file system",
            errno.EACCES: "permission denied",
            errno.EPERM: "permission denied",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        return f"{text}: {where}" if where is not None else text
    return f"{type(exc).__name__}: {exc}"


class Failures:
    """What went wrong in one handler: kept in a list, warned about once, logged after that."""

    def __init__(self) -> None:
        self.items: list[tuple[Path, str]] = []
        self._lock = threading.Lock()
        self._warned = False
        self._warned_chain: set[str] = set()

    def record(self, kept: Path | None, fallback: Path, reason: str) -> None:
        """Record that a cycle was not saved as a run: ``kept`` is the native trace on disk (a
        complete file) or None when nothing could be kept; ``fallback`` is the run folder meant
        for it, listed instead when nothing was kept."""
        where = f"the native trace is kept at {kept}" if kept else "no native trace could be kept"
        with self._lock:
            self.items.append((kept or fallback, reason))
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(
                f"perfkit: could not save this profile as a perfkit run ({reason}); {where}. "
                "Training goes on; later failures are logged, not warned.",
                RuntimeWarning,
                stacklevel=4,
            )
        else:
            logger.warning("perfkit: profile not saved as a run (%s); %s", reason, where)

    def call_chained(self, handler: Callable[[Any], Any], prof: Any, where: Path) -> None:
        """Call a chained handler; its error is recorded in ``items`` as ``(where, reason)``,
        warned about once per handler and contained (an exception escaping ``on_trace_ready``
        can crash the process when the profiler stops)."""
        try:
            handler(prof)
        except Exception as exc:
            name = getattr(handler, "__qualname__", None) or repr(handler)
            reason = f"chained handler {name} raised {type(exc).__name__}: {exc}"
            with self._lock:
                self.items.append((where, reason))
            if name not in self._warned_chain:
                self._warned_chain.add(name)
                warnings.warn(f"perfkit: {reason}; training goes on", RuntimeWarning, stacklevel=4)
            logger.debug("chained handler %s failed", name, exc_info=True)


def conversion_reason(exc: BaseException, run_dir: Path) -> str:
    """Why a run could not be converted or saved, in one line (an ``OSError`` in words)."""
    if isinstance(exc, OSError):
        return f"the run could not be saved ({os_error_reason(exc, run_dir)})"
    return f"{type(exc).__name__}: {exc}"
