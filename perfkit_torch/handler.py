"""``on_trace_ready``: the handler a torch user passes to ``torch.profiler.profile``."""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from perfkit_core.capture import Failures, default_worker_name, handler_metadata, new_run_dir


def _require_framework() -> None:
    """Raise ImportError with one line saying what to install when torch is missing."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            "perfkit-torch needs PyTorch, which is not installed: install your torch build first (CPU or CUDA wheel, see pytorch.org), then use this handler"
        )


_require_framework()

logger = logging.getLogger("perfkit.torch")

NATIVE_TRACE_NAME = "trace.pt.trace.json"


class TraceHandler:
    """Callable for ``torch.profiler.profile(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per active cycle of the profiler's schedule) exports the profile with
    ``prof.export_chrome_trace`` into its own folder under ``dir_name``, converts it into a
    ``perfkit_core.Run`` and saves the run there. With ``background=True`` (the default) the
    conversion runs in a helper process, so the training loop only waits for the export; reading
    ``runs`` or ``failures``, or calling ``wait()``, waits for the conversions still running, and
    they are finished before the interpreter exits.

    Handlers given in ``chain`` are called after the export with the same profiler, whatever
    happened here; their ``prof.export_chrome_trace(path)`` copies the trace exported here,
    because torch cannot export one profile twice.

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
        background: bool = True,
    ) -> None:
        self.dir_name = Path(dir_name)
        self.worker_name = worker_name or default_worker_name()
        self.chain = list(chain)
        self.keep_trace = keep_trace
        self.background = background
        self._runs: list[Path] = []
        self._failures_log = Failures()
        self._outstanding: set[Path] = set()
        self._state = threading.Condition()

    @property
    def runs(self) -> list[Path]:
        """Folders of the saved runs, in the order they were saved (waits for pending ones)."""
        self.wait()
        with self._state:
            return list(self._runs)

    @property
    def failures(self) -> list[tuple[Path, str]]:
        """(native trace kept, reason) for each cycle that was not saved (waits for pending ones)."""
        self.wait()
        with self._state:
            return list(self._failures_log.items)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every conversion this handler started has ended; False on timeout."""
        with self._state:
            return self._state.wait_for(lambda: not self._outstanding, timeout=timeout)

    def __call__(self, prof: Any) -> None:
        exported: tuple[Path, Path] | None = None
        try:
            exported = self._export(prof)
        finally:
            try:
                if self.chain:
                    # torch cannot export one profile twice (a second export raises, and an
                    # exception here crashes the process when the profiler exits), so chained
                    # handlers get the trace exported above.
                    shared = ExportedProfile(prof, exported[1] if exported else None)
                    for handler in self.chain:
                        self._failures_log.call_chained(handler, shared)
            finally:
                if exported is not None:
                    self._convert(*exported, prof)

    def _export(self, prof: Any) -> tuple[Path, Path] | None:
        """Export the native trace into a new run folder; return (run folder, trace) or None."""
        run_dir: Path | None = None
        try:
            run_dir = new_run_dir(self.dir_name, self.worker_name, getattr(prof, "step_num", None))
            run_dir.mkdir(parents=True, exist_ok=False)
            trace_path = run_dir / NATIVE_TRACE_NAME
            prof.export_chrome_trace(str(trace_path))
        except Exception as exc:
            self._finished(run_dir or self.dir_name, None, f"{type(exc).__name__}: {exc}")
            return None
        return run_dir, trace_path

    def _convert(self, run_dir: Path, trace_path: Path, prof: Any) -> None:
        """Convert and save, in the helper process or here; never raises."""
        meta = run_metadata(prof, worker_name=self.worker_name)
        with self._state:
            self._outstanding.add(run_dir)
        if self.background:
            from perfkit_core.capture import shared_converter

            try:
                shared_converter().submit(
                    trace_path,
                    run_dir,
                    meta,
                    keep_trace=self.keep_trace,
                    done=lambda d, err: self._finished(d, trace_path, err),
                )
                return
            except Exception as exc:
                logger.info("perfkit: converting in-process (%s)", exc)
        try:
            from perfkit_core.capture import convert_file

            convert_file(trace_path, run_dir, meta, keep_trace=self.keep_trace)
        except Exception as exc:
            self._finished(run_dir, trace_path, f"{type(exc).__name__}: {exc}")
        else:
            self._finished(run_dir, trace_path, None)

    def _finished(self, run_dir: Path, trace_path: Path | None, error: str | None) -> None:
        with self._state:
            self._outstanding.discard(run_dir)
            if error is None:
                self._runs.append(run_dir)
            else:
                kept = trace_path if trace_path is not None and trace_path.is_file() else None
                self._failures_log.record(kept, run_dir, error)
            self._state.notify_all()


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


def run_metadata(prof: Any = None, *, worker_name: str | None = None) -> dict[str, Any]:
    """Return what the handler adds to a run's metadata: torch version, host, worker, step."""
    version = None
    with contextlib.suppress(Exception):
        import torch

        version = torch.__version__
    return handler_metadata("torch", version, prof, worker_name)


def on_trace_ready(
    dir_name: str | os.PathLike[str] = "./perfkit_runs",
    *,
    worker_name: str | None = None,
    chain: Iterable[Callable[[Any], Any]] = (),
    keep_trace: bool = False,
    background: bool = True,
) -> TraceHandler:
    """Return a handler for ``torch.profiler.profile(on_trace_ready=...)``.

    Each profiled cycle is saved as a perfkit run in ``dir_name/<worker_name>.step<N>/``
    (``events.parquet`` + ``meta.json``); the folders are listed in ``handler.runs``.
    ``worker_name`` defaults to ``<host>_<pid>``. ``chain`` holds other handlers to call after
    this one, such as ``torch.profiler.tensorboard_trace_handler(...)``. ``keep_trace=True``
    keeps the native chrome trace beside the run (it is always kept when conversion fails).
    ``background=True`` converts in a helper process so the training loop waits only for the
    export; ``False`` converts before the call returns.
    """
    return TraceHandler(
        dir_name, worker_name=worker_name, chain=chain, keep_trace=keep_trace, background=background
    )
