"""``RunHandler``: what every framework's ``on_trace_ready`` handler keeps and does the same
way (its settings, saved runs and failures, the fallback export, the conversion of a native
export into a run); each adapter's handler subclasses it."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from perfkit_core.capture.background import shared_converter
from perfkit_core.capture.handlers import (
    Failures,
    claim_run_dir,
    conversion_reason,
    default_worker_name,
    fallback_dir,
    fallback_refusal,
    os_error_reason,
)
from perfkit_core.capture.helper import convert_file

logger = logging.getLogger("perfkit")


class RunHandler:
    """What every framework's ``on_trace_ready`` handler keeps: its settings, the runs it saved,
    what went wrong, and the profiles still being saved (``runs``, ``failures`` and ``wait()``
    wait for those). A subclass implements ``__call__`` and ``_export_native`` (its framework's
    own export of a profile, under ``native_name``), and reports each profile it takes with
    ``_started``, then ``_finished`` (or ``_fail`` for what never became a run)."""

    #: File name of the framework's native export in a run folder.
    native_name = "trace.json"

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
        #: The largest native export so far, in bytes: what the next one needs on disk.
        self._estimate = 0

    @property
    def runs(self) -> list[Path]:
        """Folders of the saved runs, in the order they were saved (waits for pending ones)."""
        self.wait()
        with self._state:
            return list(self._runs)

    @property
    def failures(self) -> list[tuple[Path, str]]:
        """``(path, reason)`` for each thing that went wrong, in order (waits for pending ones).

        For a profile not saved as a run, ``path`` is the native export kept (a complete file),
        or the run folder that was meant for it when nothing could be kept; for a chained
        handler that raised, the run folder of that profile.
        """
        self.wait()
        with self._state:
            return list(self._failures_log.items)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every profile this handler took has been saved or failed; False on
        timeout. Meanwhile the conversion helper converts at once, idle core or not."""
        with self._state:
            if not self._outstanding:
                return True
        with self._helper_urgent(), self._state:
            return self._state.wait_for(lambda: not self._outstanding, timeout=timeout)

    def _helper_urgent(self) -> contextlib.AbstractContextManager[object]:
        """``BackgroundConverter.urgent()`` of the shared helper when this handler uses it."""
        if not self.background:
            return contextlib.nullcontext()
        try:
            return shared_converter().urgent()
        except Exception:
            return contextlib.nullcontext()

    def _started(self, run_dir: Path) -> None:
        with self._state:
            self._outstanding.add(run_dir)

    def _fail(self, kept: Path | None, where: Path, reason: str) -> None:
        with self._state:
            self._failures_log.record(kept, where, reason)
            self._state.notify_all()

    def _finished(self, run_dir: Path, trace: Path | None, error: str | None) -> None:
        with self._state:
            self._outstanding.discard(run_dir)
            if error is None:
                self._runs.append(run_dir)
            else:
                kept = trace if trace is not None and self._kept(trace) else None
                self._failures_log.record(kept, run_dir, error)
            self._state.notify_all()

    def _export_native(self, source: Any, path: Path) -> str | None:
        """Write the framework's own export of ``source`` (a profiler or its result) to
        ``path``; None when a complete file was written, else why not. Never raises."""
        raise NotImplementedError

    def _export_elsewhere(self, source: Any, step: int | None, reason: str) -> Path | None:
        """Export into the fallback folder after ``reason`` kept the profile from its run
        folder; record the failure with what was kept; return the export or None."""
        kept: Path | None = None
        folder = fallback_dir()
        refusal = fallback_refusal(self._estimate, folder)
        if refusal is not None:
            self._fail(None, self.dir_name, f"{reason}; not kept in the fallback folder: {refusal}")
            return None
        try:
            folder = claim_run_dir(folder, self.worker_name, step)
            failed = self._export_native(source, folder / self.native_name)
            if failed is None:
                kept = folder / self.native_name
            else:
                reason = f"{reason}; the export to {folder} failed too: {failed}"
        except OSError as exc:
            reason = f"{reason}; the export to {folder} failed too: {os_error_reason(exc)}"
        self._fail(kept, self.dir_name, reason)
        return kept

    def _convert_export(
        self, trace: Path, run_dir: Path, meta: dict[str, Any], converter: Any | None
    ) -> None:
        """Queue the conversion of the native export ``trace`` into ``run_dir`` to
        ``converter`` (the background helper), or convert it here when there is none or it
        cannot take the job; the outcome goes to ``_finished``. Never raises."""
        if converter is not None:
            try:
                converter.submit(
                    trace,
                    run_dir,
                    meta,
                    keep_trace=self.keep_trace,
                    done=lambda d, err: self._finished(d, trace, err),
                )
                return
            except Exception as exc:
                logger.info("perfkit: converting in-process (%s)", exc)
        try:
            convert_file(trace, run_dir, meta, keep_trace=self.keep_trace)
        except Exception as exc:
            self._finished(run_dir, trace, conversion_reason(exc, run_dir))
        else:
            self._finished(run_dir, trace, None)

    def _kept(self, trace: Path) -> bool:
        """Whether the native export at ``trace`` is whole enough to point a user at."""
        try:
            return trace.is_file() and trace.stat().st_size > 0
        except OSError:
            return False
