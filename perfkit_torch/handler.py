"""``on_trace_ready``: the handler a torch user passes to ``torch.profiler.profile``."""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import shutil
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
    are called afterwards with the same profiler, whatever happened here; their
    ``prof.export_chrome_trace(path)`` copies the trace exported here, because torch cannot
    export one profile twice.

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
        self._warned_chain: set[str] = set()

    def __call__(self, prof: Any) -> None:
        trace_path: Path | None = None
        saved = False
        try:
            trace_path, saved = self._handle(prof)
        finally:
            try:
                if self.chain:
                    # torch cannot export one profile twice (a second export crashes the
                    # process later), so chained handlers get the trace exported above.
                    shared = ExportedProfile(prof, trace_path)
                    for handler in self.chain:
                        self._call_chained(handler, shared)
            finally:
                if saved and not self.keep_trace and trace_path is not None:
                    with contextlib.suppress(OSError):
                        trace_path.unlink()

    def _call_chained(self, handler: Callable[[Any], Any], prof: Any) -> None:
        # An exception escaping on_trace_ready leaves torch's profiler half stopped (torch 2.x
        # then crashes the process when the profiler exits), so a chained handler's error is
        # reported and contained like our own.
        try:
            handler(prof)
        except Exception as exc:
            name = getattr(handler, "__qualname__", repr(handler))
            key = f"chain:{name}"
            if key not in self._warned_chain:
                self._warned_chain.add(key)
                warnings.warn(
                    f"perfkit: chained handler {name} failed ({type(exc).__name__}: {exc}); "
                    "training goes on",
                    RuntimeWarning,
                    stacklevel=4,
                )
            logger.debug("chained handler %s failed", name, exc_info=True)

    def _run_dir(self, prof: Any) -> Path:
        step = getattr(prof, "step_num", None)
        stem = f"{self.worker_name}.step{step}" if step is not None else self.worker_name
        candidate = self.dir_name / stem
        suffix = 1
        while candidate.exists():
            suffix += 1
            candidate = self.dir_name / f"{stem}.{suffix}"
        return candidate

    def _handle(self, prof: Any) -> tuple[Path | None, bool]:
        """Export, convert and save; return (native trace path or None, whether the run saved)."""
        run_dir: Path | None = None
        trace_path: Path | None = None
        exported = False
        try:
            run_dir = self._run_dir(prof)
            run_dir.mkdir(parents=True, exist_ok=False)
            trace_path = run_dir / NATIVE_TRACE_NAME
            prof.export_chrome_trace(str(trace_path))
            exported = True
            run = convert(trace_path, prof, worker_name=self.worker_name)
            if not self.keep_trace:
                run.meta["source"] = None  # the native trace is removed once the run is saved
            run.save(run_dir)
        except Exception as exc:
            self._fail(run_dir, trace_path if exported else None, exc)
            return (trace_path if exported else None), False
        self.runs.append(run_dir)
        return trace_path, True

    def _fail(self, run_dir: Path | None, trace_path: Path | None, exc: BaseException) -> None:
        kept = trace_path if trace_path is not None and trace_path.is_file() else None
        reason = f"{type(exc).__name__}: {exc}"
        where = str(kept) if kept else "nowhere: the profiler could not export it"
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


class ExportedProfile:
    """A stand-in for a torch profiler whose trace perfkit already exported.

    ``export_chrome_trace(path)`` copies (or hard-links) that trace instead of exporting again,
    gzip-compressing it for ``.gz`` paths; every other attribute is the real profiler's.
    """

    def __init__(self, prof: Any, trace_path: Path | None) -> None:
        self._prof = prof
        self._trace_path = trace_path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._prof, name)

    def export_chrome_trace(self, path: str, use_python_export: bool = False) -> None:
        """Write the already exported trace to ``path`` (export it now if none exists yet)."""
        source = self._trace_path
        if source is None or not source.is_file():
            self._trace_path = Path(path)
            self._prof.export_chrome_trace(path, use_python_export=use_python_export)
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.name.endswith(".gz"):
            with open(source, "rb") as src, gzip.open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            return
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)


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
