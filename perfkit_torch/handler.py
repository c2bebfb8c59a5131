"""``on_trace_ready``: the handler a torch user passes to ``torch.profiler.profile``."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger("perfkit.torch")

NATIVE_TRACE_NAME = "trace.pt.trace.json"


class TraceHandler:
    """Callable for ``torch.profiler.profile(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per active cycle of the profiler's schedule) exports the profile with
    ``prof.export_chrome_trace``, converts it into a ``perfkit_core.Run``, saves it in its own
    folder under ``dir_name`` and appends that folder to ``runs``. Handlers given in ``chain``
    are called afterwards with the same profiler, whatever happened here.

    The handler never raises into the training loop: when anything fails it warns once, keeps
    the native chrome trace in the run's folder (so nothing recorded is lost) and records the
    failure in ``failures``.
    """

    def __init__(
        self,
        dir_name: str | os.PathLike[str] = "./perfkit_runs",
        *,
        worker_name: str | None = None,
        chain: Iterable[Callable[[Any], Any]] = (),
        keep_trace: bool = False,
    ) -> None:
        self.dir_name = Path(dir_name)
        self.worker_name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        self.chain = list(chain)
        self.keep_trace = keep_trace
        self.runs: list[Path] = []
        self.failures: list[tuple[Path, str]] = []
        self._warned = False

    def __call__(self, prof: Any) -> None:
        try:
            self._handle(prof)
        finally:
            for handler in self.chain:
                handler(prof)

    def _run_dir(self, prof: Any) -> Path:
        step = getattr(prof, "step_num", None)
        stem = f"{self.worker_name}.step{step}" if step is not None else self.worker_name
        candidate = self.dir_name / stem
        suffix = 1
        while candidate.exists():
            suffix += 1
            candidate = self.dir_name / f"{stem}.{suffix}"
        return candidate

    def _handle(self, prof: Any) -> None:
        run_dir: Path | None = None
        trace_path: Path | None = None
        try:
            run_dir = self._run_dir(prof)
            run_dir.mkdir(parents=True, exist_ok=False)
            trace_path = run_dir / NATIVE_TRACE_NAME
            prof.export_chrome_trace(str(trace_path))
            run = convert(trace_path, prof, worker_name=self.worker_name)
            if not self.keep_trace:
                run.meta["source"] = None  # removed below once the run is saved
            run.save(run_dir)
        except Exception as exc:
            self._fail(run_dir, trace_path, prof, exc)
            return
        if not self.keep_trace:
            with contextlib.suppress(OSError):
                trace_path.unlink()
        self.runs.append(run_dir)

    def _fail(self, run_dir: Path | None, trace_path: Path | None, prof: Any, exc: BaseException) -> None:
        kept = _keep_native_trace(run_dir, trace_path, prof)
        reason = f"{type(exc).__name__}: {exc}"
        where = str(kept) if kept else "nowhere (the trace could not be written)"
        self.failures.append((kept or Path(run_dir or self.dir_name), reason))
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"perfkit: could not save this profile as a perfkit run ({reason}); "
                f"the native trace is kept at {where}. Training goes on; later failures are "
                "logged, not warned.",
                RuntimeWarning,
                stacklevel=4,
            )
        else:
            logger.warning("perfkit: profile not converted (%s); native trace at %s", reason, where)


def _keep_native_trace(run_dir: Path | None, trace_path: Path | None, prof: Any) -> Path | None:
    """Make sure the native trace is on disk after a failure; return where it is."""
    if trace_path is not None and trace_path.is_file() and trace_path.stat().st_size > 0:
        return trace_path
    target = trace_path or (run_dir / NATIVE_TRACE_NAME if run_dir else None)
    if target is None:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(target))
    except Exception:
        return None
    return target if target.is_file() else None


def convert(trace_path: Path, prof: Any = None, *, worker_name: str | None = None) -> Any:
    """Return the ``Run`` of a chrome trace ``prof`` just exported to ``trace_path``."""
    from perfkit_torch.kineto import load_kineto

    extra: dict[str, Any] = {"framework": "torch", "host": socket.gethostname()}
    with contextlib.suppress(Exception):
        import torch

        extra["framework_version"] = torch.__version__
    run = load_kineto(trace_path, extra_meta=extra)
    run.meta.setdefault("extra", {})
    run.meta["extra"].update(
        {
            "worker_name": worker_name,
            "profiler_step_num": getattr(prof, "step_num", None),
            "converted_at": time.time(),
        }
    )
    return run


def on_trace_ready(
    dir_name: str | os.PathLike[str] = "./perfkit_runs",
    *,
    worker_name: str | None = None,
    chain: Iterable[Callable[[Any], Any]] = (),
    keep_trace: bool = False,
) -> TraceHandler:
    """Return a handler for ``torch.profiler.profile(on_trace_ready=...)``.

    Each profiled cycle is saved as a perfkit run in ``dir_name/<worker_name>.step<N>/``
    (``events.parquet`` + ``meta.json``); the folders are listed in ``handler.runs``.
    ``worker_name`` defaults to ``<host>_<pid>``. ``chain`` holds other handlers to call after
    this one, such as ``torch.profiler.tensorboard_trace_handler(...)``. ``keep_trace=True``
    keeps the native chrome trace beside the run (it is always kept when conversion fails).
    """
    return TraceHandler(dir_name, worker_name=worker_name, chain=chain, keep_trace=keep_trace)
