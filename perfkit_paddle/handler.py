"""``on_trace_ready``: the handler a Paddle user passes to ``paddle.profiler.Profiler``."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from perfkit_core.capture import Failures, claim_run_dir, default_worker_name, handler_metadata


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


class TraceHandler:
    """Callable for ``paddle.profiler.Profiler(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per profiled span of the scheduler) converts ``prof.profiler_result``
    directly, walking Paddle's event tree with no JSON round trip, saves the run in its own
    folder under ``dir_name`` and appends that folder to ``runs``. Handlers given in ``chain``
    (``paddle.profiler.export_chrome_tracing(dir)``, a user's function) are called afterwards
    with the same profiler, whatever happened here.

    The handler never raises into the training loop: when anything fails it warns once, writes
    Paddle's native chrome-tracing export into the run's folder (so nothing recorded is lost)
    and records the failure in ``failures``.
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
        self.worker_name = worker_name or default_worker_name()
        self.chain = list(chain)
        self.keep_trace = keep_trace
        self.runs: list[Path] = []
        self._failures_log = Failures()

    @property
    def failures(self) -> list[tuple[Path, str]]:
        """(native trace kept, reason) for each span that was not saved."""
        return list(self._failures_log.items)

    def wait(self, timeout: float | None = None) -> bool:
        """Conversions finish inside the call; kept for the same interface as the torch handler."""
        return True

    def __call__(self, prof: Any) -> None:
        try:
            self._handle(prof)
        finally:
            for handler in self.chain:
                self._failures_log.call_chained(handler, prof, self.dir_name)

    def _handle(self, prof: Any) -> None:
        run_dir = self.dir_name
        try:
            from perfkit_paddle.result import run_from_result

            run_dir = claim_run_dir(
                self.dir_name, self.worker_name, getattr(prof, "step_num", None)
            )
            rank, world = _rank_and_world()
            run = run_from_result(
                prof.profiler_result,
                extra_meta=run_metadata(prof, worker_name=self.worker_name),
                rank=rank,
                world_size=world,
            )
            if self.keep_trace:
                trace = run_dir / NATIVE_TRACE_NAME
                prof.export(str(trace), format="json")
                run.meta["source"] = str(trace)
            run.save(run_dir)
        except Exception as exc:
            self._fail(run_dir, prof, exc)
            return
        self.runs.append(run_dir)

    def _fail(self, run_dir: Path, prof: Any, exc: BaseException) -> None:
        kept: Path | None = run_dir / NATIVE_TRACE_NAME
        try:
            assert kept is not None
            if not kept.is_file():
                kept.parent.mkdir(parents=True, exist_ok=True)
                prof.export(str(kept), format="json")
        except Exception:
            kept = None
        self._failures_log.record(kept, run_dir, f"{type(exc).__name__}: {exc}")


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
) -> TraceHandler:
    """Return a handler for ``paddle.profiler.Profiler(on_trace_ready=...)``.

    Each profiled span is saved as a perfkit run in ``dir_name/<worker_name>.step<N>/``
    (``events.parquet`` + ``meta.json``); the folders are listed in ``handler.runs``.
    ``worker_name`` defaults to ``<host>_<pid>``. ``chain`` holds other handlers to call after
    this one, such as ``paddle.profiler.export_chrome_tracing(dir)``. ``keep_trace=True`` also
    writes Paddle's chrome-tracing export beside the run (it is always written when conversion
    fails).
    """
    return TraceHandler(dir_name, worker_name=worker_name, chain=chain, keep_trace=keep_trace)
