"""Profiling MindSpore training into perfkit runs: ``on_trace_ready(dir)`` for
``mindspore.profiler.profile(...)``, ``ProfilerCallback(start_step, stop_step, dir)`` for
``Model.train``, and ``step(prof)``, the step marker.

MindSpore's own analysis runs as ``tensorboard_trace_handler`` runs it, and its output folder
(``<dir>/<host>_<pid>_<time>_ascend_ms/``) is kept, so MindInsight (or MindStudio Insight) can
still open it. perfkit writes the steps and user spans it recorded into that folder
(``perfkit_spans.json``) and hands the folder to its conversion helper, which saves the run in
``<dir>/<worker>.step<N>/`` off the training loop. Nothing here raises into training: a failure
is warned about once and recorded in ``failures``, and MindSpore's folder stays on disk.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def _require_framework() -> None:
    """Raise ImportError with one line saying what to install when mindspore is missing."""
    try:
        found = importlib.util.find_spec("mindspore") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            "perfkit-mindspore needs MindSpore to profile, which is not installed: "
            'pip install mindspore "numpy<2" (or your GPU/Ascend build), then profile '
            "(reading profiles needs no MindSpore)"
        )


_require_framework()

from perfkit_core.capture import (  # noqa: E402  (after the one-line check)
    RunHandler,
    claim_run_dir,
    handler_metadata,
    os_error_reason,
    shared_converter,
)
from perfkit_mindspore import record  # noqa: E402
from perfkit_mindspore.layout import ASCEND_MS_RE, SPANS_FILE  # noqa: E402
from perfkit_mindspore.spans import Spans, write_spans  # noqa: E402


def _version() -> str | None:
    module = sys.modules.get("mindspore")
    return getattr(module, "__version__", None) if module is not None else None


def _schedule() -> Any:
    """The schedule of the profiler now running (MindSpore keeps it in its profiler context),
    or None."""
    try:
        from mindspore.profiler.common.profiler_context import ProfilerContext

        params = getattr(ProfilerContext(), "_profiler_params_mgr", None)
        return getattr(params, "schedule", None)
    except Exception:
        return None


def _active_steps(schedule: Any, cycle: int) -> list[int]:
    """The step numbers the ``cycle``-th (from 0) active window of ``schedule`` recorded; empty
    when the schedule does not say."""
    try:
        wait, warmup, active = int(schedule.wait), int(schedule.warmup), int(schedule.active)
        skip = int(getattr(schedule, "skip_first", 0))
    except (AttributeError, TypeError, ValueError):
        return []
    first = skip + cycle * (wait + warmup + active) + wait + warmup
    return list(range(first, first + active))


class TraceHandler(RunHandler):
    """Callable for ``mindspore.profiler.profile(on_trace_ready=...)`` that saves perfkit runs.

    Each call (one per active window of the schedule) runs MindSpore's own analysis as its
    ``tensorboard_trace_handler(dir_name)`` does, writes perfkit's steps and spans into the
    profile's folder and queues its conversion; ``runs`` lists the saved run folders (waiting for
    pending ones), ``failures`` what went wrong, ``profiles`` MindSpore's folders. ``model``
    (the ``mindspore.nn.Cell`` trained, or its training cell), when set, has its cells' names and
    trainable parameters recorded in each run (``perfkit_mindspore.describe_model``), for the
    ``layers`` view.
    """

    native_name = ""
    #: The cell trained, when known: its cells are described in each run.
    model: Any = None

    def _kept(self, trace: Path) -> bool:
        """MindSpore's profile folder is kept whenever it is there."""
        return trace.is_dir()

    def __init__(
        self,
        dir_name: str | os.PathLike[str] = "./perfkit_runs",
        *,
        worker_name: str | None = None,
        chain: Iterable[Callable[[Any], Any]] = (),
        background: bool = True,
        steps_from: str = "perfkit_mindspore.step",
    ) -> None:
        super().__init__(
            dir_name, worker_name=worker_name, chain=chain, keep_trace=True, background=background
        )
        import mindspore.profiler

        self.dir_name.mkdir(parents=True, exist_ok=True)
        self.steps_from = steps_from
        self.profiles: list[Path] = []
        self._cycles = 0
        self._started_ns = time.time_ns()
        self._native = mindspore.profiler.tensorboard_trace_handler(
            str(self.dir_name), worker_name=worker_name
        )
        if self._native is None:  # MindSpore logs why and returns nothing
            raise ValueError(
                f"MindSpore's profiler refuses the folder {self.dir_name} or the worker name "
                f"{worker_name!r} (its paths may hold letters, digits, '_', '-', '.' and '/')"
            )

    def __call__(self, prof: Any) -> None:
        run_dir: Path | None = None
        try:
            run_dir = self._handle(prof)
        except Exception as exc:  # a bug here must not reach training either
            self._fail(self._folder(), self.dir_name, f"{type(exc).__name__}: {exc}")
        finally:
            for handler in self.chain:
                self._failures_log.call_chained(handler, prof, run_dir or self.dir_name)

    def _folder(self) -> Path | None:
        """MindSpore's folder of the profile just taken: from its profiler context, else the
        newest ``*_ascend_ms`` folder of this process under ``dir_name``."""
        try:
            from mindspore.profiler.common.profiler_context import ProfilerContext

            folder = Path(ProfilerContext().ascend_ms_dir)
            if folder.is_dir():
                return folder
        except Exception:
            pass
        pid = str(os.getpid())
        found = [
            p
            for p in self.dir_name.glob("*_ascend_ms")
            if (m := ASCEND_MS_RE.match(p.name)) and m["pid"] == pid
        ]
        return max(found, key=lambda p: p.stat().st_mtime) if found else None

    def _handle(self, prof: Any) -> Path | None:
        cycle, self._cycles = self._cycles, self._cycles + 1
        try:
            self._native(prof)  # MindSpore's own analysis, as tensorboard_trace_handler runs it
        except Exception as exc:
            self._fail(self._folder(), self.dir_name, f"MindSpore's analysis failed: {exc}")
            return None
        folder = self._folder()
        if folder is None:
            self._fail(None, self.dir_name, "MindSpore wrote no profile folder")
            return None
        self.profiles.append(folder)
        steps, spans, thread = record.take()
        recorded = Spans(
            steps=[s for s in steps if s[2] >= self._started_ns],
            step_numbers=[] if steps else _active_steps(_schedule(), cycle),
            spans=spans,
            thread=thread,
            steps_from=self.steps_from,
        )
        write_spans(folder / SPANS_FILE, recorded)
        numbers = [s[0] for s in recorded.steps] or recorded.step_numbers
        last = numbers[-1] if numbers else None
        try:
            run_dir = claim_run_dir(self.dir_name, self.worker_name, last)
        except OSError as exc:
            self._fail(
                folder, self.dir_name, f"cannot create a run folder ({os_error_reason(exc)})"
            )
            return None
        meta = handler_metadata("mindspore", _version(), prof, self.worker_name)
        meta["extra"]["mindspore_profile"] = str(folder)
        if self.model is not None:
            try:  # a description is never worth a lost profile
                from perfkit_mindspore.model import describe_model

                meta["model"] = describe_model(self.model)
            except Exception:
                pass
        self._started(run_dir)
        converter = None
        if self.background:
            try:
                converter = shared_converter()
            except Exception:
                converter = None
        self._convert_export(folder, run_dir, meta, converter)
        return run_dir


def on_trace_ready(
    dir_name: str | os.PathLike[str] = "./perfkit_runs",
    *,
    worker_name: str | None = None,
    chain: Iterable[Callable[[Any], Any]] = (),
    background: bool = True,
    model: Any = None,
) -> TraceHandler:
    """A handler for ``mindspore.profiler.profile(on_trace_ready=...)`` that saves each active
    window of the schedule as a perfkit run in ``dir_name/<worker>.step<N>/`` and keeps
    MindSpore's own output folder in ``dir_name`` (see ``TraceHandler``).

    Steps: mark each one with ``perfkit_mindspore.step(prof)`` in place of ``prof.step()`` for
    exact step spans; without marks the steps of the window are found from the repeating
    sequence of operators (``perfkit_mindspore.steps``) and numbered from the schedule.
    ``background=False`` converts in the callback instead of perfkit's helper process. ``model``
    (the ``mindspore.nn.Cell`` trained, or its ``TrainOneStepCell``) records its cells' names and
    trainable parameters in each run (``perfkit_mindspore.describe_model``), for the ``layers``
    view."""
    handler = TraceHandler(dir_name, worker_name=worker_name, chain=chain, background=background)
    handler.model = model
    return handler


def _synchronize() -> None:
    """Wait for the operators MindSpore has queued (compiled kernels run asynchronously): the
    executor's queue, as MindSpore's profiler does when it stops, and the device's streams on a
    GPU or an Ascend device."""
    try:
        from mindspore.common.api import _pynative_executor

        _pynative_executor.sync()
    except Exception:
        pass
    try:
        import mindspore

        if mindspore.get_context("device_target") != "CPU":
            mindspore.runtime.synchronize()
    except Exception:
        pass


def step(prof: Any, *, sync: bool = True) -> Any:
    """``prof.step()``, marking the step's end for perfkit: one line in place of ``prof.step()``
    in a loop under ``mindspore.profiler.profile``. MindSpore's CPU profiler records no steps;
    with these marks a run's steps are the spans between them (host clock, ns).

    With ``sync`` (the default) the mark first waits for the step's operators to finish
    (the executor's queue, and the device's streams): MindSpore runs compiled kernels
    asynchronously, and a step span must hold its operators, as ``Model.train`` steps do. Never raises what perfkit's
    part would raise; what ``prof.step()`` raises goes through."""
    number = getattr(prof, "step_num", None)
    try:
        number = int(number) if number is not None else None
    except (TypeError, ValueError):
        number = None
    if sync:
        _synchronize()
    return record.mark_step(number, prof.step)


def _activities() -> list[Any]:
    """The profiler activities of the device MindSpore runs on: CPU, plus GPU or NPU."""
    import mindspore
    from mindspore.profiler import ProfilerActivity

    try:
        target = str(mindspore.get_context("device_target"))
    except Exception:
        target = "CPU"
    extra = {"GPU": "GPU", "Ascend": "NPU"}.get(target)
    found = [ProfilerActivity.CPU]
    if extra and hasattr(ProfilerActivity, extra):
        found.append(getattr(ProfilerActivity, extra))
    return found


def _callback_base() -> type:
    from mindspore.train import Callback

    return Callback


class ProfilerCallback(_callback_base()):  # type: ignore[misc]
    """A ``mindspore.train.Callback`` that profiles steps ``start_step`` to ``stop_step`` (as
    ``Model.train`` numbers them, from 1) and saves them as a perfkit run in ``dir_name``: the
    StopAtStep callback of MindSpore's profiling guide, ready made.

    It starts ``mindspore.profiler.profile`` when step ``start_step`` begins and stops it when
    ``stop_step`` ends; MindSpore's analysis writes its folder in ``dir_name`` and perfkit saves
    the run beside it, with a step span per step it saw (``handler.runs``). Extra keyword
    arguments go to ``mindspore.profiler.profile`` (``profile_memory``, ``with_stack``, ...).
    The network ``Model.train`` trains (its training cell) is described in the run, its cells'
    names and trainable parameters, for the ``layers`` view.
    Never raises into training: a profiler that does not start is warned about once and
    training goes on unprofiled. With ``dataset_sink_mode=True`` a callback step is a sink of
    several batches, and so is each step span.
    """

    def __init__(
        self,
        start_step: int,
        stop_step: int,
        dir_name: str | os.PathLike[str] = "./perfkit_runs",
        *,
        worker_name: str | None = None,
        background: bool = True,
        **profile_options: Any,
    ) -> None:
        super().__init__()
        if not 1 <= int(start_step) <= int(stop_step):
            raise ValueError(
                f"profile steps {start_step} to {stop_step}: need 1 <= start_step <= stop_step"
            )
        self.start_step = int(start_step)
        self.stop_step = int(stop_step)
        self.handler = TraceHandler(
            dir_name, worker_name=worker_name, background=background, steps_from="ProfilerCallback"
        )
        self.profile_options = profile_options
        self._prof: Any = None
        self._begin: int | None = None

    @property
    def runs(self) -> list[Path]:
        """The saved run folders (waits for pending conversions)."""
        return self.handler.runs

    @property
    def failures(self) -> list[tuple[Path, str]]:
        """What went wrong (waits for pending conversions)."""
        return self.handler.failures

    def _step_number(self, run_context: Any) -> int:
        return int(run_context.original_args().cur_step_num)

    def on_train_step_begin(self, run_context: Any) -> None:
        """Start the profiler at ``start_step``; note when each profiled step begins."""
        try:
            number = self._step_number(run_context)
            if number == self.start_step and self._prof is None:
                import mindspore

                args = run_context.original_args()
                self.handler.model = getattr(args, "train_network", None) or getattr(
                    args, "network", None
                )

                self._prof = mindspore.profiler.profile(
                    activities=_activities(),
                    on_trace_ready=self.handler,
                    start_profile=False,
                    **self.profile_options,
                )
                self._prof.start()
                record.start_recording()
            self._begin = time.time_ns() if self._prof is not None else None
        except Exception as exc:
            self._prof = None
            self.handler._fail(None, self.handler.dir_name, f"the profiler did not start: {exc}")

    def on_train_step_end(self, run_context: Any) -> None:
        """Record the step's span; stop the profiler (and save the run) after ``stop_step``."""
        try:
            number = self._step_number(run_context)
            if self._prof is None or self._begin is None:
                return
            record.add_step(number, self._begin, time.time_ns())
            if number >= self.stop_step:
                prof, self._prof = self._prof, None
                record.stop_recording()
                prof.stop()
        except Exception as exc:
            self.handler._fail(None, self.handler.dir_name, f"the profiler did not stop: {exc}")

    def on_train_end(self, run_context: Any) -> None:
        """Stop a profiler still running when training ends before ``stop_step``."""
        try:
            if self._prof is not None:
                prof, self._prof = self._prof, None
                record.stop_recording()
                prof.stop()
        except Exception as exc:
            self.handler._fail(None, self.handler.dir_name, f"the profiler did not stop: {exc}")
