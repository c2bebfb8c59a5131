"""``PerfkitCallback``: the ``keras.callbacks.Callback`` behind ``perfkit_xla.keras`` (this
module needs Keras and TensorFlow; ``perfkit_xla.keras`` imports it when the class is first
used).

TensorFlow's profiler writes its log folder (``<run folder>/xla_log/``) as it does for Keras'
TensorBoard callback; when a window ends, that folder is handed to perfkit's conversion helper
(the one the torch and Paddle handlers use: lowest CPU priority, on a core training leaves
idle), which saves the run beside it, so training waits only for TensorFlow's own export.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from perfkit_core.capture import (
    HandlerRuns,
    RunHandler,
    claim_run_dir,
    fallback_dir,
    folder_worker_name,
    handler_metadata,
    os_error_reason,
    window_arguments,
)
from perfkit_xla.capture import NATIVE_LOG_NAME


def _require_framework() -> None:
    """Raise ImportError with one line saying what to install when Keras or TensorFlow is
    missing."""
    missing = []
    for name in ("keras", "tensorflow"):
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    if missing:
        raise ImportError(
            f"perfkit_xla.keras needs Keras with TensorFlow, and {' and '.join(missing)} "
            "is not installed: pip install tensorflow (or tensorflow-cpu), then use this callback"
        )


_require_framework()


def _callback_base() -> type:
    import keras

    return keras.callbacks.Callback


class _LogHandler(RunHandler):
    """The runs and failures of one callback; its native export is TensorFlow's log folder."""

    native_name = NATIVE_LOG_NAME

    def _kept(self, trace: Path) -> bool:
        return trace.is_dir()


def _tensorflow_version() -> str | None:
    module = sys.modules.get("tensorflow")
    return getattr(module, "__version__", None) if module is not None else None


class PerfkitCallback(HandlerRuns, _callback_base()):  # type: ignore[misc]
    """A callback for Keras ``model.fit(callbacks=[...])`` (TensorFlow backend) that profiles
    the steps in ``profile_batch`` with TensorFlow's profiler and saves each window as a
    perfkit run in ``log_dir``.

    ``profile_batch`` is what Keras' TensorBoard callback takes: a pair ``(start, stop)`` or
    ``"start,stop"`` (both included, counted from 1 over the whole ``fit``), or here also a
    list of pairs, one run per window; ``profile_steps=`` is the same argument under the name
    the Paddle integration gives it, and ``start_step=`` and ``stop_step=`` name one window as
    the torch integrations do. The default ``(3, 7)`` leaves out the first two steps (tracing
    and compiling ``train_step``). A step is one optimizer step: with an optimizer
    made with ``gradient_accumulation_steps=k`` it is ``k`` batches, and each window starts
    with the first batch of its first step and ends with the last batch of its last. Each run
    is saved in ``log_dir/<worker_name>.step<stop>/``; ``worker_name`` defaults to the name of
    ``log_dir``, so the runs are named after the output folder. The Keras model is recorded
    with each run (its layers and trainable parameters, for the ``layers`` view).

    When a window ends, TensorFlow writes its profile (``xla_log/`` in the run folder, which
    TensorBoard opens) and perfkit's conversion helper saves the run off the training loop
    (``background=False``: in the callback); ``keep_trace=True`` keeps TensorFlow's folder
    beside the run, and it is always kept when the run cannot be saved (in
    ``<temp dir>/perfkit_unsaved`` when ``log_dir`` cannot hold a run folder). Never raises into
    training: a profiler that does not start or stop, or a run that cannot be saved, is warned
    about once (later failures are logged), recorded in ``failures``, and training goes on.
    ``runs`` lists the saved run folders, waiting for conversions still queued.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] = "./perfkit_runs",
        profile_batch: Any = None,
        *,
        profile_steps: Any = None,
        start_step: int | None = None,
        stop_step: int | None = None,
        worker_name: str | None = None,
        background: bool = True,
        keep_trace: bool = False,
    ) -> None:
        super().__init__()
        if profile_batch is not None and profile_steps is not None:
            raise ValueError("give profile_batch or profile_steps (the same windows), not both")
        spec = profile_batch if profile_batch is not None else profile_steps
        self.windows = window_arguments(spec, start_step, stop_step, (3, 7))
        self.handler = _LogHandler(
            log_dir,
            worker_name=worker_name or folder_worker_name(Path(log_dir)),
            keep_trace=keep_trace,
            background=background,
        )
        #: Optimizer steps done in the current ``fit``.
        self.optimizer_steps = 0
        self._batches = 0  # batches begun in the current fit
        self._accumulate = 1
        self._base = 0  # the optimizer's iterations when this fit began
        self._next = 0  # the window to open next
        self._open: tuple[Path, Path] | None = None  # the window's run folder and log folder
        self._mark: Any = None  # the open step mark
        self._elsewhere: str | None = None  # why the open window records in the fallback folder

    def _fail(self, kept: Path | None, what: str, exc: BaseException) -> None:
        reason = (
            os_error_reason(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        )
        self.handler._fail(kept, self.handler.dir_name, f"{what}: {reason}")

    # -- the optimizer steps ------------------------------------------------------------------

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Count steps from the start of this ``fit``; read the optimizer's gradient
        accumulation; warm TensorFlow's profiler up, as Keras' TensorBoard callback does."""
        self.optimizer_steps = 0
        self._batches = 0
        self._next = 0
        try:
            optimizer = self.model.optimizer
            self._accumulate = max(
                int(getattr(optimizer, "gradient_accumulation_steps", None) or 1), 1
            )
            self._base = int(optimizer.iterations.numpy())
        except Exception:
            self._accumulate, self._base = 1, 0
        if self.handler.background:
            try:  # ready when the first window ends (its loaders imported on an idle core)
                from perfkit_core.capture import shared_converter

                shared_converter().start()
            except Exception:
                pass  # started, or done without, at the window's end
        try:
            import tensorflow as tf

            tf.profiler.experimental.start("")
            tf.profiler.experimental.stop(save=False)
        except Exception:
            pass  # a profiler already running: the window says so when it starts

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Start the profiler with the first batch of a window's first optimizer step, and a
        step mark with the first batch of each optimizer step in a window."""
        first = (self._base + self._batches) % self._accumulate == 0
        self._batches += 1
        if not first:
            return
        opens = self._next < len(self.windows) and self.windows[self._next][0] == (
            self.optimizer_steps + 1
        )
        if self._open is None and opens:
            self._start()
        if self._open is not None:
            self._mark_begin(self.optimizer_steps + 1)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Count the optimizer step and end its mark; stop the profiler (and save the run)
        after a window's last step."""
        if (self._base + self._batches) % self._accumulate != 0:
            return
        self.optimizer_steps += 1
        self._mark_end()
        if self._open is not None and self.optimizer_steps >= self.windows[self._next - 1][1]:
            self._stop()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        """Stop (and save) a window still open when training ends before its last step."""
        self._mark_end()
        if self._open is not None:
            self._stop()

    # -- the step marks -----------------------------------------------------------------------

    def _mark_begin(self, number: int) -> None:
        """Open TensorFlow's step mark of optimizer step ``number`` (a ``Trace`` with
        ``step_num``, as the TensorBoard callback marks its batches)."""
        try:
            import tensorflow as tf

            mark = tf.profiler.experimental.Trace("train", step_num=number, _r=1)
            mark.__enter__()
            self._mark = mark
        except Exception as exc:
            self._mark = None
            self._fail(None, "the step could not be marked", exc)

    def _mark_end(self) -> None:
        mark, self._mark = self._mark, None
        if mark is not None:
            try:
                mark.__exit__(None, None, None)
            except Exception as exc:
                self._fail(None, "the step could not be marked", exc)

    # -- the profiler -------------------------------------------------------------------------

    def _start(self) -> None:
        """Claim the window's run folder (in perfkit's fallback folder when ``log_dir`` cannot
        hold one) and start TensorFlow's profiler into it."""
        stop = self.windows[self._next][1]
        self._next += 1
        self._elsewhere = None
        try:
            import keras

            if keras.backend.backend() != "tensorflow":
                raise RuntimeError(
                    f"Keras runs on {keras.backend.backend()!r}; perfkit_xla.keras profiles "
                    "its TensorFlow backend (for JAX, use perfkit_xla.profile around the steps)"
                )
            import tensorflow as tf

            worker = self.handler.worker_name
            try:
                run_dir = claim_run_dir(self.handler.dir_name, worker, stop)
            except OSError as exc:
                self._elsewhere = (
                    f"cannot create a run folder under {self.handler.dir_name} "
                    f"({os_error_reason(exc)})"
                )
                run_dir = claim_run_dir(fallback_dir(), worker, stop)
            log_dir = run_dir / NATIVE_LOG_NAME
            log_dir.mkdir()
            try:
                tf.profiler.experimental.start(str(log_dir))
            except Exception:
                shutil.rmtree(run_dir, ignore_errors=True)  # empty: it must not look like a run
                raise
        except Exception as exc:
            self._fail(None, self._elsewhere or "the profiler did not start", exc)
            return
        self._open = (run_dir, log_dir)

    def _stop(self) -> None:
        """Stop TensorFlow's profiler (it writes the profile), then queue the run's
        conversion. Never raises."""
        assert self._open is not None
        (run_dir, log_dir), self._open = self._open, None
        try:
            import tensorflow as tf

            tf.profiler.experimental.stop()
        except Exception as exc:
            self._fail(log_dir if log_dir.is_dir() else None, "the profiler did not stop", exc)
            return
        if self._elsewhere is not None:  # TensorFlow's profile is kept in the fallback folder
            self.handler._fail(log_dir, self.handler.dir_name, self._elsewhere)
            return
        try:
            meta = handler_metadata(
                "tensorflow", _tensorflow_version(), None, self.handler.worker_name
            )
            meta["model"] = self._describe()
            if meta["model"] is None:
                del meta["model"]
            converter = None
            if self.handler.background:
                from perfkit_core.capture import shared_converter

                converter = shared_converter()
            self.handler._started(run_dir)
            self.handler._convert_export(log_dir, run_dir, meta, converter)
        except Exception as exc:
            self.handler._finished(run_dir, log_dir, f"{type(exc).__name__}: {exc}")

    def _describe(self) -> dict[str, Any] | None:
        """The Keras model's layers and trainable parameters, or None when it cannot be
        described (the run is saved without them)."""
        try:
            from perfkit_xla.model import describe_model

            return describe_model(self.model)
        except Exception:
            return None
