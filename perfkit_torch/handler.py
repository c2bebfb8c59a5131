"""``on_trace_ready``: the handler a torch user passes to ``torch.profiler.profile``."""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import logging
import os
import shutil
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_core.capture import (
    RunHandler,
    claim_run_dir,
    cut_short_reason,
    export_is_complete,
    handler_metadata,
    make_room,
    os_error_reason,
    partial_files,
    remove_partial,
)
from perfkit_torch.modules import ModuleSpans

if TYPE_CHECKING:
    from perfkit_core.capture import BackgroundConverter


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


class TraceHandler(RunHandler):
    """Callable for ``torch.profiler.profile(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per active cycle of the profiler's schedule) exports the profile with
    ``prof.export_chrome_trace`` into its own folder under ``dir_name``, converts it into a
    ``perfkit_core.Run`` and saves the run there. With ``background=True`` (the default) the
    conversion runs in a helper process at the lowest CPU priority (started with the handler),
    so the training loop only waits for the export; reading ``runs`` or ``failures``, or calling ``wait()``, waits for the
    conversions still running, and they are finished before the interpreter exits.

    The helper converts a trace only on a core training leaves idle (while every core is
    busy, the traces wait on disk until the program waits for them, at exit at the latest, or
    until 1 GiB of them is queued). What waits for it is bounded (eight traces, 4 GiB, see
    ``perfkit_core.capture.background``), and before each export the handler checks that the
    disk has room for a trace as large as its largest so far; when either is short it first
    waits for the queued conversions (which remove their traces).

    Handlers given in ``chain`` are called after the export with the same profiler, whatever
    happened here; their ``prof.export_chrome_trace(path)`` copies the trace exported here,
    because torch cannot export one profile twice. A chained handler that raises is recorded in
    ``failures`` and warned about once.

    The handler never raises into the training loop: when anything fails it warns once, keeps
    the native chrome trace (in the run's folder, or in ``<temp dir>/perfkit_unsaved`` when the
    run's folder cannot be made or its disk is full) and records the failure in ``failures``
    with the path of what was kept.

    With ``layers=True`` (the default) every ``nn.Module`` call is recorded as a layer span
    (``nn.Module: Type_k``) while the profiler records, as Paddle's profiler records its
    layers (``perfkit_torch.modules``): armed from the handler's creation for the profiler's
    first cycle, then, from the end of each cycle on, in the schedule's warm-up and recording
    steps only. ``layers=False`` records none.
    """

    native_name = NATIVE_TRACE_NAME

    def __init__(
        self,
        dir_name: str | os.PathLike[str] = "./perfkit_runs",
        *,
        layers: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(dir_name, **options)
        converter = self._converter()
        if converter is not None:
            # Now, before training, at the lowest priority: not in the first callback.
            with contextlib.suppress(OSError):
                converter.start()
        self.layers = layers
        self._module_spans: ModuleSpans | None = None
        if layers:
            spans = ModuleSpans()
            spans.arm(True)
            weakref.finalize(self, spans.release)
            self._module_spans = spans

    def __call__(self, prof: Any) -> None:
        if self._module_spans is not None:
            self._module_spans.follow(prof)
        converter = self._converter()
        if converter is None:
            self._handle(prof)
            return
        # The helper starts no deferred conversion during the export and the chained handlers.
        with converter.exporting():
            self._handle(prof)

    def _handle(self, prof: Any) -> None:
        run_dir: Path | None = None
        trace: Path | None = None
        try:
            run_dir, trace = self._export(prof)
        except Exception as exc:  # a bug here must not reach training either
            self._fail(None, self.dir_name, f"{type(exc).__name__}: {exc}")
        finally:
            try:
                if self.chain:
                    # torch cannot export one profile twice (a second export raises, and an
                    # exception here crashes the process when the profiler exits), so chained
                    # handlers get the trace exported above.
                    shared = ExportedProfile(prof, trace)
                    where = run_dir or (trace.parent if trace else self.dir_name)
                    for handler in self.chain:
                        self._failures_log.call_chained(handler, shared, where)
            finally:
                if run_dir is not None and trace is not None:
                    self._convert(run_dir, trace, prof)

    def _converter(self) -> BackgroundConverter | None:
        if not self.background:
            return None
        try:
            from perfkit_core.capture import shared_converter

            return shared_converter()
        except Exception:
            return None

    def _export(self, prof: Any) -> tuple[Path | None, Path | None]:
        """Export the native trace; return (run folder to convert it in, trace), where the run
        folder is None when the trace went to the fallback folder, and both are None when
        nothing was exported (the failure is recorded)."""
        step = getattr(prof, "step_num", None)
        full = make_room(self.dir_name, self._estimate, self._converter())
        if full is not None:
            return None, self._export_elsewhere(prof, step, full)
        try:
            run_dir = claim_run_dir(self.dir_name, self.worker_name, step)
        except OSError as exc:
            reason = f"cannot create a run folder under {self.dir_name} ({os_error_reason(exc)})"
            return None, self._export_elsewhere(prof, step, reason)
        trace = run_dir / NATIVE_TRACE_NAME
        failed = self._export_native(prof, trace)
        if failed is not None:
            with contextlib.suppress(OSError):
                run_dir.rmdir()  # empty: it must not look like a run
            self._fail(None, run_dir, failed)
            return None, None
        with contextlib.suppress(OSError):
            self._estimate = max(self._estimate, trace.stat().st_size)
        return run_dir, trace

    def _export_native(self, prof: Any, trace: Path) -> str | None:
        """Export to ``trace``; None when a complete file is there, else why not (what an
        incomplete export left is removed: it holds nothing perfkit or a trace viewer can read,
        and it takes the room other runs need)."""
        try:
            prof.export_chrome_trace(str(trace))
        except OSError as exc:
            reason: str | None = f"torch could not export the trace ({os_error_reason(exc, trace)})"
        except Exception as exc:
            reason = f"torch could not export the trace ({type(exc).__name__}: {exc})"
        else:
            reason = None
        if reason is None and export_is_complete(trace):
            return None
        parts = partial_files(trace)
        written = remove_partial(trace) if parts else 0
        if reason is None or parts:
            cut = cut_short_reason(trace, "torch's export", written)
            reason = cut if reason is None else f"{reason}; {cut}"
        # The next export needs more than the room this one had.
        self._estimate = max(self._estimate, written + 1)
        return reason

    def _convert(self, run_dir: Path, trace_path: Path, prof: Any) -> None:
        """Convert and save, in the helper process or here; never raises."""
        meta = run_metadata(prof, worker_name=self.worker_name)
        if self._module_spans is not None:
            from perfkit_torch.modules import describe_modules

            model = describe_modules()
            if model is not None:
                meta["model"] = model
        self._started(run_dir)
        self._convert_export(trace_path, run_dir, meta, self._converter())


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
    layers: bool = True,
) -> TraceHandler:
    """Return a handler for ``torch.profiler.profile(on_trace_ready=...)``.

    Each profiled cycle is saved as a perfkit run in ``dir_name/<worker_name>.step<N>/``
    (``events.parquet`` + ``meta.json``); the folders are listed in ``handler.runs``.
    ``worker_name`` defaults to ``<host>_<pid>``. ``chain`` holds other handlers to call after
    this one, such as ``torch.profiler.tensorboard_trace_handler(...)``. ``keep_trace=True``
    keeps the native chrome trace beside the run (it is always kept when conversion fails).
    ``background=True`` converts in a helper process so the training loop waits only for the
    export; ``False`` converts before the call returns. ``layers=True`` records every
    ``nn.Module`` call as a layer span while the profiler records (so comparisons line up by
    layer); ``False`` leaves torch's hooks alone.
    """
    return TraceHandler(
        dir_name,
        worker_name=worker_name,
        chain=chain,
        keep_trace=keep_trace,
        background=background,
        layers=layers,
    )
