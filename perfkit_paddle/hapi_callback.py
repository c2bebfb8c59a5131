"""``PerfkitCallback``: the ``paddle.callbacks.Callback`` behind ``perfkit_paddle.hapi`` (this
module needs paddle; ``perfkit_paddle.hapi`` imports it when the class is first used)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perfkit_core.capture import HandlerRuns, folder_worker_name, window_arguments
from perfkit_paddle.handler import TraceHandler  # says in one line what to install


def _callback_base() -> type:
    import paddle

    return paddle.callbacks.Callback


def _targets() -> list[Any]:
    """The CPU, and the GPU when Paddle runs on one."""
    import paddle
    import paddle.profiler as profiler

    targets = [profiler.ProfilerTarget.CPU]
    try:
        if str(paddle.device.get_device()).startswith("gpu"):
            targets.append(profiler.ProfilerTarget.GPU)
    except Exception:
        pass
    return targets


def start_helper(background: bool) -> None:
    """Start perfkit's conversion helper when training begins, so that it is ready (its
    loaders imported on an idle core) when the first window ends; a helper that cannot start
    now is started, or done without, at the window's end."""
    if not background:
        return
    try:
        from perfkit_core.capture import shared_converter

        shared_converter().start()
    except Exception:
        pass


class PerfkitCallback(HandlerRuns, _callback_base()):  # type: ignore[misc]
    """A callback for ``paddle.Model.fit(callbacks=[...])`` that profiles the optimizer steps
    in ``profile_steps`` and saves each window as a perfkit run in ``dir_name``.

    ``profile_steps`` is a pair ``(start, stop)`` (both included, counted from 1 over the whole
    ``fit``), or a list of such pairs: one run per window; ``start_step=`` and ``stop_step=``
    name one window as the other integrations do. The default ``(3, 7)`` leaves out the first
    two steps (Paddle's warm-up). A step is one optimizer step: with
    ``fit(accumulate_grad_batches=k)`` it is ``k`` batches, and each window starts with the
    first batch of its first step. The profiler is ``paddle.profiler.Profiler`` with perfkit's
    Paddle handler (``perfkit_paddle.on_trace_ready``) as its ``on_trace_ready``: its step
    marks are the optimizer steps, numbered as here, and each run is saved in
    ``dir_name/<worker_name>.step<stop>/``. ``worker_name`` defaults to the name of
    ``dir_name``, so the runs are named after the output folder. The network the
    ``paddle.Model`` trains is recorded with each run (its layers and parameters, for the
    ``layers`` view). ``background`` and ``keep_trace`` are the handler's; other keyword
    arguments go to ``paddle.profiler.Profiler`` (``record_shapes``, ``profile_memory``,
    ``targets``, ...).

    Never raises into training: a profiler that does not start or stop, or a run that cannot
    be saved, is warned about once (later failures are logged), recorded in ``failures``, and
    training goes on; Paddle's own export is kept (see ``perfkit_paddle.on_trace_ready``).
    ``runs`` lists the saved run folders, waiting for conversions still queued.
    """

    def __init__(
        self,
        dir_name: str | os.PathLike[str] = "./perfkit_runs",
        profile_steps: Any = None,
        *,
        start_step: int | None = None,
        stop_step: int | None = None,
        worker_name: str | None = None,
        background: bool = True,
        keep_trace: bool = False,
        **profiler_options: Any,
    ) -> None:
        super().__init__()
        self.windows = window_arguments(profile_steps, start_step, stop_step, (3, 7))
        self.handler = TraceHandler(
            dir_name,
            worker_name=worker_name or folder_worker_name(Path(dir_name)),
            keep_trace=keep_trace,
            background=background,
        )
        self.profiler_options = profiler_options
        #: Whether windows are converted by perfkit's helper process (started with training).
        self.background = background
        #: Optimizer steps done in the current ``fit``.
        self.optimizer_steps = 0
        self._prof: Any = None
        self._next = 0  # the window to open next
        self._accumulate = 1
        self._epoch_batches: int | None = None

    def _fail(self, what: str, exc: BaseException) -> None:
        self.handler._fail(None, self.handler.dir_name, f"{what}: {type(exc).__name__}: {exc}")

    # -- the optimizer steps ------------------------------------------------------------------

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Count steps from the start of this ``fit``; read its gradient accumulation."""
        self.optimizer_steps = 0
        self._next = 0
        try:
            self._accumulate = max(int(getattr(self.model, "_accumulate", 1) or 1), 1)
        except (TypeError, ValueError):
            self._accumulate = 1
        start_helper(self.background)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """The epoch's number of batches, when the data loader knows it (its last batch always
        updates the weights)."""
        steps = (self.params or {}).get("steps")
        self._epoch_batches = int(steps) if isinstance(steps, int) else None

    def _updates(self, batch: int) -> bool:
        """Whether the optimizer steps at the end of the epoch's ``batch`` (from 0), as
        ``paddle.Model.fit`` decides it."""
        last = self._epoch_batches is not None and batch + 1 == self._epoch_batches
        return (batch + 1) % self._accumulate == 0 or last

    def on_train_batch_begin(self, step: int, logs: dict[str, Any] | None = None) -> None:
        """Start the profiler with the first batch of a window's first optimizer step."""
        try:
            if self._prof is not None or self._next >= len(self.windows):
                return
            if (
                step % self._accumulate == 0
                and self.optimizer_steps + 1 == self.windows[self._next][0]
            ):
                self._start()
        except Exception as exc:
            self._prof = None
            self._fail("the profiler did not start", exc)

    def on_train_batch_end(self, step: int, logs: dict[str, Any] | None = None) -> None:
        """Mark the optimizer step's end; stop the profiler (and save the run) after a window's
        last step."""
        try:
            if not self._updates(step):
                return
            self.optimizer_steps += 1
            if self._prof is None:
                return
            if self.optimizer_steps >= self.windows[self._next - 1][1]:
                self._stop()
            else:
                self._prof.step()
        except Exception as exc:
            self._prof = None
            self._fail("the profiler did not stop", exc)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        """Stop (and save) a window still open when training ends before its last step."""
        try:
            if self._prof is not None:
                self._stop()
        except Exception as exc:
            self._prof = None
            self._fail("the profiler did not stop", exc)

    # -- the profiler -------------------------------------------------------------------------

    def _start(self) -> None:
        import paddle.profiler as profiler

        self._next += 1
        self.handler.model = getattr(self.model, "network", None)
        options = dict(self.profiler_options)
        options.setdefault("targets", _targets())
        prof = profiler.Profiler(on_trace_ready=self.handler, **options)
        # Paddle numbers its step marks from step_num: make them the optimizer steps'.
        prof.step_num = self.optimizer_steps + 1
        prof.start()
        self._prof = prof

    def _stop(self) -> None:
        """Stop the profiler: Paddle ends the last step mark and calls the handler."""
        prof, self._prof = self._prof, None
        prof.stop()
