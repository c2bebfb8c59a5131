"""``on_trace_ready``: the handler a Paddle user passes to ``paddle.profiler.Profiler``."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from perfkit_core.capture import (
    BackgroundConverter,
    RunHandler,
    claim_run_dir,
    conversion_reason,
    cut_short_reason,
    fallback_dir,
    fallback_refusal,
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

from perfkit_paddle.pb import export_is_whole  # noqa: E402  (after the one-line check)

#: Paddle's protobuf export: it writes about four times as fast as its chrome-tracing JSON, and
#: perfkit reads it without paddle (``perfkit_paddle.pb``).
NATIVE_TRACE_NAME = "trace.paddle_trace.pb"


class TraceHandler(RunHandler):
    """Callable for ``paddle.profiler.Profiler(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per profiled span of the scheduler) claims its own folder under ``dir_name``
    and writes Paddle's native protobuf export there first. With ``background=True`` (the
    default) that export is all the training loop waits for: perfkit's conversion helper process
    (lowest CPU priority, one thread, on a core training leaves idle; see
    ``perfkit_core.capture.background``) turns it into ``events.parquet`` + ``meta.json`` and
    removes it unless ``keep_trace``. With ``background=False`` the run is also converted
    straight from the result tree (the export is not read back) and saved before the callback
    returns.

    The export is Paddle's protobuf one (``trace.paddle_trace.pb``), not its chrome-tracing
    JSON: on a 149k-node profile Paddle writes it about four times as fast
    (``bench/bench_paddle_handler.py``), and perfkit reads it without paddle. To look at a run
    in a trace viewer, ``perfkit export RUN --to chrome -o trace.json``; to have Paddle's own
    JSON as well, chain ``paddle.profiler.export_chrome_tracing(dir)`` (at its cost).

    The export is written in the callback, not on a thread: Paddle's writer holds the
    interpreter lock while it runs, so training's Python code would wait for it anyway, and
    slower (``bench/bench_training_overhead.py --framework paddle``). Because the export is on
    disk before the callback returns, a process killed or interrupted later keeps the profile
    (``perfkit_core.load`` reads a folder holding only the export); a save is atomic
    (``meta.json`` last), so a folder never shows an event table without its metadata. At most
    eight exports wait for the helper, and free space for the next export is checked first; when
    a bound is reached the callback waits for the queued work.

    Handlers given in ``chain`` (``paddle.profiler.export_chrome_tracing(dir)``, a user's
    function) are called afterwards with the same profiler, whatever happened here; one that
    raises is recorded in ``failures``. The handler never raises into the training loop: when
    anything fails it warns once, keeps Paddle's native export (in the run folder, or in
    ``<temp dir>/perfkit_unsaved`` when the run folder cannot be made or its disk is full) and
    records the failure in ``failures`` with the path of what was kept.
    """

    native_name = NATIVE_TRACE_NAME

    #: The ``paddle.nn.Layer`` trained, when given: its layers are described in each run.
    model: Any = None

    def _kept(self, trace: Path) -> bool:
        """Paddle's export counts as kept only when whole (its last field not cut short)."""
        return export_is_whole(trace)

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
            self._export_and_submit(result, run_dir, step, meta, converter)
        else:
            self._save_here(result, run_dir, step, meta)
        return run_dir

    def _metadata(self, prof: Any, result: Any) -> dict[str, Any]:
        """What the run's metadata gets beyond the export: versions, host, worker, step, the
        launcher's rank, and the result's span index and version (read now: cheap)."""
        rank, world = _rank_and_world()
        meta = run_metadata(prof, worker_name=self.worker_name)
        meta.update(rank=rank, world_size=world)
        model = getattr(self, "model", None)
        if model is not None:
            with contextlib.suppress(Exception):  # a description is never worth a lost profile
                from perfkit_paddle.model import describe_model

                meta["model"] = describe_model(model)
        extra = meta["extra"]
        for key, method in (
            ("span_index", "get_span_index"),
            ("profiler_result_version", "get_version"),
        ):
            with contextlib.suppress(Exception):
                extra[key] = getattr(result, method)()
        return meta

    def _export_native(self, result: Any, trace: Path) -> str | None:
        """Write Paddle's protobuf export of ``result`` to ``trace`` (through a temporary name);
        None when a whole file is there, else why not (a partial file is removed). Paddle's
        writer reports no error (a full disk leaves a short file), so the file is checked."""
        temp = trace.with_name(f".{trace.name}.tmp")
        try:
            result.save(str(temp), "pb")
        except OSError as exc:
            reason: str | None = (
                f"Paddle could not export the profile ({os_error_reason(exc, trace)})"
            )
        except Exception as exc:
            reason = f"Paddle could not export the profile ({type(exc).__name__}: {exc})"
        else:
            reason = None
        if reason is None and export_is_whole(temp):
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

    def _export_first(
        self,
        result: Any,
        run_dir: Path,
        step: int | None,
        converter: BackgroundConverter | None = None,
    ) -> Path | None:
        """Paddle's export into ``run_dir``; return it, or None when it failed (the failure is
        recorded, with the export kept in the fallback folder when one could be written there).
        The helper starts no deferred conversion meanwhile."""
        trace = run_dir / NATIVE_TRACE_NAME
        with converter.exporting() if converter is not None else contextlib.nullcontext():
            failed = self._export_native(result, trace)
        if failed is None:
            return trace
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # empty: it must not look like a run
        self._finished(run_dir, self._export_elsewhere_quietly(result, step), failed)
        return None

    def _export_and_submit(
        self,
        result: Any,
        run_dir: Path,
        step: int | None,
        meta: dict[str, Any],
        converter: BackgroundConverter | None,
    ) -> None:
        """The native export, then its conversion queued to the helper process (or done here
        when no helper can be reached). Never raises."""
        try:
            trace = self._export_first(result, run_dir, step, converter)
        except Exception as exc:
            self._finished(run_dir, run_dir / NATIVE_TRACE_NAME, conversion_reason(exc, run_dir))
            return
        if trace is not None:
            self._convert_export(trace, run_dir, meta, converter)

    def _export_elsewhere_quietly(self, result: Any, step: int | None) -> Path | None:
        """Export into the fallback folder; return the export, or None (nothing recorded)."""
        if fallback_refusal(self._estimate) is not None:
            return None
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

        trace = self._export_first(result, run_dir, step)
        if trace is None:
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
    model: Any = None,
) -> TraceHandler:
    """Return a handler for ``paddle.profiler.Profiler(on_trace_ready=...)``.

    Each profiled span is saved as a perfkit run in ``dir_name/<worker_name>.step<N>/``
    (``events.parquet`` + ``meta.json``); the folders are listed in ``handler.runs``.
    ``worker_name`` defaults to ``<host>_<pid>``. ``chain`` holds other handlers to call after
    this one, such as ``paddle.profiler.export_chrome_tracing(dir)``. Paddle's native
    protobuf export is always written first, in the callback; ``keep_trace=True`` keeps it
    beside the run (it is always kept when the run cannot be saved). ``background=True`` converts
    it in perfkit's helper process, so the callback returns once the export is written;
    ``False`` also converts and saves before the callback returns. ``model`` (the
    ``paddle.nn.Layer`` trained) records its layers' names and parameters in each run
    (``perfkit_paddle.describe_model``), for the ``layers`` view.
    """
    handler = TraceHandler(
        dir_name, worker_name=worker_name, chain=chain, keep_trace=keep_trace, background=background
    )
    handler.model = model
    return handler
