"""``on_trace_ready``: the handler a Paddle user passes to ``paddle.profiler.Profiler``."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from perfkit_core.capture import (
    ROOM_TIMEOUT_S,
    OrderedWorker,
    RunHandler,
    claim_run_dir,
    conversion_reason,
    cut_short_reason,
    export_is_complete,
    fallback_dir,
    handler_metadata,
    make_room,
    os_error_reason,
    remove_partial,
)


def _require_framework() -> None:
    """Raise ImportError with one line saying what to install when paddle is missing."""
    try:
        found = importlib.util.find_spec("paddle") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            "perfkit-paddle needs PaddlePaddle, which is not installed: pip install paddlepaddle (CPU) or paddlepaddle-gpu (CUDA), then use this handler"
        )


_require_framework()

logger = logging.getLogger("perfkit.paddle")

NATIVE_TRACE_NAME = "trace.paddle_trace.json"


class TraceHandler(RunHandler):
    """Callable for ``paddle.profiler.Profiler(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per profiled span of the scheduler) claims its own folder under ``dir_name``
    and keeps a reference to ``prof.profiler_result``, which keeps Paddle's whole result alive
    after the callback. With ``background=True`` (the default) that is all the training loop
    waits for: a thread of this process at nice 19 then writes Paddle's native chrome-tracing
    export into the folder first (Paddle's writer releases the interpreter lock, so training's
    Python code runs meanwhile), drops the result, and hands the file to perfkit's conversion
    helper process (lowest CPU priority, one thread), which saves ``events.parquet`` +
    ``meta.json`` and removes the export unless ``keep_trace``. With ``background=False``
    everything happens inside the callback: the native export first, then the run converted
    straight from the result tree (no JSON read back) and saved.

    Because the native export is written before any conversion, a process killed or
    interrupted while a run is being saved leaves that export in the folder (``perfkit_core.load``
    reads such a folder as the trace it holds); a save is atomic (``meta.json`` last), so a
    folder never shows an event table without its metadata. The helper converts an export only on
    a core training leaves idle (see ``perfkit_core.capture.background``). At most two profiles
    wait for the thread and eight traces for the helper, and free space for the next export is
    checked first; when a bound is reached the callback waits for the queued work.

    Handlers given in ``chain`` (``paddle.profiler.export_chrome_tracing(dir)``, a user's
    function) are called afterwards with the same profiler, whatever happened here; one that
    raises is recorded in ``failures``. The handler never raises into the training loop: when
    anything fails it warns once, keeps Paddle's native export (in the run folder, or in
    ``<temp dir>/perfkit_unsaved`` when the run folder cannot be made or its disk is full) and
    records the failure in ``failures`` with the path of what was kept.
    """

    native_name = NATIVE_TRACE_NAME

    def _kept(self, trace: Path) -> bool:
        """Paddle's export counts as kept only when whole (its closing brace written)."""
        return export_is_complete(trace)

    def __call__(self, prof: Any) -> None:
        run_dir: Path | None = None
        try:
            run_dir = self._handle(prof)
        except Exception as exc:  # a bug here must not reach training either
            self._fail(None, self.dir_name, f"{type(exc).__name__}: {exc}")
        finally:
            for handler in self.chain:
                self._failures_log.call_chained(handler, prof, run_dir or self.dir_name)

    def _handle(self, prof: Any) -> Path | None:
        """Claim a folder and save the span there (now, or queued); return the folder."""
        from perfkit_core.capture import shared_converter

        result = prof.profiler_result
        step = getattr(prof, "step_num", None)
        converter = shared_converter() if self.background else None
        full = make_room(self.dir_name, self._estimate, converter)
        if full is not None:
            self._export_elsewhere(result, step, full)
            return None
        try:
            run_dir = claim_run_dir(self.dir_name, self.worker_name, step)
        except OSError as exc:
            reason = f"cannot create a run folder under {self.dir_name} ({os_error_reason(exc)})"
            self._export_elsewhere(result, step, reason)
            return None
        meta = self._metadata(prof, result)
        self._started(run_dir)
        if self.background:
            # In a list, so the job can drop the result (Paddle's memory) once it is exported.
            job = functools.partial(self._export_and_submit, [result], run_dir, step, meta)
            if _exporter().submit(job, timeout=ROOM_TIMEOUT_S):
                return run_dir
        self._save_here(result, run_dir, step, meta)
        return run_dir

    def _metadata(self, prof: Any, result: Any) -> dict[str, Any]:
        """What the run's metadata gets beyond the export: versions, host, worker, step, the
        launcher's rank, and the result's span index and version (read now: cheap)."""
        rank, world = _rank_and_world()
        meta = run_metadata(prof, worker_name=self.worker_name)
        meta.update(rank=rank, world_size=world)
        extra = meta["extra"]
        for key, method in (
            ("span_index", "get_span_index"),
            ("profiler_result_version", "get_version"),
        ):
            with contextlib.suppress(Exception):
                extra[key] = getattr(result, method)()
        return meta

    def _export_native(self, result: Any, trace: Path) -> str | None:
        """Write Paddle's chrome-tracing export of ``result`` to ``trace`` (through a temporary
        name); None when a complete file is there, else why not (a partial file is removed)."""
        temp = trace.with_name(f".{trace.name}.tmp")
        try:
            result.save(str(temp), "json")
        except OSError as exc:
            reason: str | None = (
                f"Paddle could not export the profile ({os_error_reason(exc, trace)})"
            )
        except Exception as exc:
            reason = f"Paddle could not export the profile ({type(exc).__name__}: {exc})"
        else:
            reason = None
        if reason is None and export_is_complete(temp):
            try:
                os.replace(temp, trace)
            except OSError as exc:
                reason = f"the export could not be renamed ({os_error_reason(exc, trace)})"
            else:
                with contextlib.suppress(OSError):
                    self._estimate = max(self._estimate, trace.stat().st_size)
                return None
        written = remove_partial(temp)
        if reason is None:
            reason = cut_short_reason(trace, "Paddle's export", written)
        self._estimate = max(self._estimate, written + 1)
        return reason

    def _export_and_submit(
        self, box: list[Any], run_dir: Path, step: int | None, meta: dict[str, Any]
    ) -> None:
        """On the exporter thread: the native export first, then the conversion queued to the
        helper process (or done here when no helper can be reached). Never raises."""
        from perfkit_core.capture import shared_converter

        trace = run_dir / NATIVE_TRACE_NAME
        result = box.pop()
        try:
            with _holding():
                failed = self._export_native(result, trace)
            if failed is not None:
                with contextlib.suppress(OSError):
                    run_dir.rmdir()  # empty: it must not look like a run
                kept = self._export_elsewhere_quietly(result, step)
                self._finished(run_dir, kept, failed)
                return
            del result  # the profile is on disk: give Paddle's memory back
        except Exception as exc:
            self._finished(run_dir, trace, conversion_reason(exc, run_dir))
            return
        try:
            converter = shared_converter()
        except Exception as exc:
            logger.info("perfkit: converting in-process (%s)", exc)
            converter = None
        self._convert_export(trace, run_dir, meta, converter)

    def _export_elsewhere_quietly(self, result: Any, step: int | None) -> Path | None:
        """Export into the fallback folder; return the export, or None (nothing recorded)."""
        try:
            folder = claim_run_dir(fallback_dir(), self.worker_name, step)
        except OSError:
            return None
        if self._export_native(result, folder / NATIVE_TRACE_NAME) is None:
            return folder / NATIVE_TRACE_NAME
        return None

    def _save_here(
        self, result: Any, run_dir: Path, step: int | None, meta: dict[str, Any]
    ) -> None:
        """In the callback: the native export first, then the run from the result tree."""
        from perfkit_paddle.result import run_from_result

        trace = run_dir / NATIVE_TRACE_NAME
        failed = self._export_native(result, trace)
        if failed is not None:
            with contextlib.suppress(OSError):
                run_dir.rmdir()
            self._finished(run_dir, self._export_elsewhere_quietly(result, step), failed)
            return
        try:
            meta = dict(meta)
            rank, world = meta.pop("rank"), meta.pop("world_size")
            run = run_from_result(result, extra_meta=meta, rank=rank, world_size=world)
            run.meta["source"] = str(trace) if self.keep_trace else None
            run.save(run_dir)
        except Exception as exc:
            self._finished(run_dir, trace, conversion_reason(exc, run_dir))
            return
        if not self.keep_trace:
            with contextlib.suppress(OSError):
                trace.unlink()
        self._finished(run_dir, trace, None)


_EXPORTER: OrderedWorker | None = None
_EXPORTER_LOCK = threading.Lock()


def _holding() -> contextlib.AbstractContextManager[object]:
    """While Paddle's export is written, the conversion helper starts no deferred conversion
    (see ``BackgroundConverter.exporting``); a no-op when it cannot be reached."""
    try:
        from perfkit_core.capture import shared_converter

        return shared_converter().exporting()
    except Exception:
        return contextlib.nullcontext()


def _exporter() -> OrderedWorker:
    """The process-wide thread that writes Paddle's exports off the training thread."""
    global _EXPORTER
    with _EXPORTER_LOCK:
        if _EXPORTER is None:
            _EXPORTER = OrderedWorker("perfkit-paddle-export", max_queued=2)
        return _EXPORTER


def _rank_and_world() -> tuple[int, int]:
    """Rank and world size from Paddle's launcher environment (no paddle.distributed import)."""
    try:
        rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
        world = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
    except ValueError:
        return 0, 1
    return rank, max(world, 1)


def run_metadata(prof: Any = None, *, worker_name: str | None = None) -> dict[str, Any]:
    """What the handler adds to a run's metadata: paddle version, host, worker, step."""
    version = None
    try:
        import paddle

        version = paddle.__version__
    except Exception:
        version = None
    return handler_metadata("paddle", version, prof, worker_name)


def on_trace_ready(
    dir_name: str | os.PathLike[str] = "./perfkit_runs",
    *,
    worker_name: str | None = None,
    chain: Iterable[Callable[[Any], Any]] = (),
    keep_trace: bool = False,
    background: bool = True,
) -> TraceHandler:
    """Return a handler for ``paddle.profiler.Profiler(on_trace_ready=...)``.

    Each profiled span is saved as a perfkit run in ``dir_name/<worker_name>.step<N>/``
    (``events.parquet`` + ``meta.json``); the folders are listed in ``handler.runs``.
    ``worker_name`` defaults to ``<host>_<pid>``. ``chain`` holds other handlers to call after
    this one, such as ``paddle.profiler.export_chrome_tracing(dir)``. Paddle's native
    chrome-tracing export is always written first; ``keep_trace=True`` keeps it beside the run
    (it is always kept when the run cannot be saved). ``background=True`` exports and converts
    off the training thread, so the callback returns at once; ``False`` does both before the
    callback returns.
    """
    return TraceHandler(
        dir_name, worker_name=worker_name, chain=chain, keep_trace=keep_trace, background=background
    )
