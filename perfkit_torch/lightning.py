"""perfkit for ``lightning.Trainer``: ``PerfkitProfiler(dirpath)``, passed as
``Trainer(profiler=...)``.

It is Lightning's profiler interface (``lightning.pytorch.profilers.Profiler``), so
``trainer.profiler`` behaves as Lightning's profilers do (``profile(action)``, ``describe()``,
``summary()``), over windows of optimizer steps: it profiles ``profile_steps`` (a pair
``(start, stop)``, 1-based, inclusive, by default ``(6, 15)``: the first steps are warm-up; or
a list of pairs; or ``start_step=``/``stop_step=``, as MindSpore's callback names them) with
``torch.profiler`` and perfkit's handler (``perfkit_torch.on_trace_ready``), and saves each
window as one perfkit run in
``dirpath`` (by default the trainer's log folder), named after the trainer's log folder
(``lightning_logs-version_0.step<N>``). A step is one optimizer step, every micro-batch of
gradient accumulation included. Layer spans are recorded in the window, and the modules the
trainer's ``LightningModule`` calls are described with their parameters, for the ``layers``
view. At the end of ``fit`` the summary Lightning prints is perfkit's headline of the run.

Importing this module needs neither torch nor Lightning; ``PerfkitProfiler`` imports Lightning
when it is first used, and says in one line what to install when it is missing. For
``pytorch_lightning.Trainer`` (Lightning under its older package name), use
``perfkit_torch.pytorch_lightning.PerfkitProfiler``, the same profiler on that package's
interface.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    PerfkitProfiler: type  # built on first use (``__getattr__``)

__all__ = ["PerfkitProfiler"]

_built: dict[str, type] = {}

#: Lightning's action of one training batch: each one's end is a possible optimizer step end.
BATCH_ACTION = "run_training_batch"


#: Lightning's packages: the module its profiler interface is in, and the distribution that
#: installs it. ``lightning`` is Lightning 2's; ``pytorch_lightning`` the same code under its
#: older name, whose ``Trainer`` accepts only profilers built on its own interface.
PACKAGES = {
    "lightning": ("lightning.pytorch.profilers", "lightning"),
    "pytorch_lightning": ("pytorch_lightning.profilers", "pytorch-lightning"),
}


def _require_lightning(package: str, module: str) -> None:
    """Raise ImportError with one line saying what to install when ``package`` is missing."""
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            f"{module}.PerfkitProfiler needs "
            f"{'Lightning' if package == 'lightning' else package}, which is not installed: "
            f"pip install {PACKAGES[package][1]}"
        )


def _build(package: str = "lightning", module: str = __name__) -> type:
    """The ``PerfkitProfiler`` class of ``module``, a subclass of the ``Profiler`` of
    ``package`` (a key of ``PACKAGES``)."""
    _require_lightning(package, module)
    profiler_base: Any = importlib.import_module(PACKAGES[package][0]).Profiler

    from perfkit_core.capture import HandlerRuns, window_arguments
    from perfkit_torch.trainer_window import (
        DEFAULT_PROFILE_STEPS,
        StepWindow,
        headline_text,
        run_name,
    )

    class PerfkitProfiler(HandlerRuns, profiler_base):
        """Lightning's profiler interface over perfkit's torch handler: profiles the optimizer
        steps in ``profile_steps`` (``(start, stop)``, 1-based, inclusive, or a list of such
        windows; or ``start_step``/``stop_step``) and saves each window as one perfkit run in
        ``dirpath`` (default: the trainer's log folder), named ``worker_name``
        (default: after the trainer's log folder). ``layers=False`` records no layer spans;
        ``background=False`` converts the profile before ``fit`` goes on; other keyword
        arguments go to ``torch.profiler.profile`` (``record_shapes`` is on unless set).

        ``runs`` lists the saved run folders and ``failures`` what went wrong (both wait for
        the conversion still queued); ``summary()`` is the run's headline. Nothing raises into
        training: a failure is warned about once, and the native trace is kept when the run
        cannot be saved."""

        def __init__(
            self,
            dirpath: str | None = None,
            profile_steps: Any = None,
            *,
            start_step: int | None = None,
            stop_step: int | None = None,
            worker_name: str | None = None,
            layers: bool = True,
            background: bool = True,
            **profile_options: Any,
        ) -> None:
            super().__init__(dirpath=dirpath)
            self.window = StepWindow(
                dirpath,
                window_arguments(profile_steps, start_step, stop_step, DEFAULT_PROFILE_STEPS),
                worker_name=worker_name,
                layers=layers,
                background=background,
                profile_options=profile_options,
            )
            self._summary: str | None = None

        @property
        def handler(self) -> Any:
            """perfkit's torch handler that saves the windows."""
            return self.window.handler

        def setup(
            self, stage: str, local_rank: int | None = None, log_dir: str | None = None
        ) -> None:
            """Lightning's call before a stage: the runs go to the trainer's log folder unless
            ``dirpath`` was given, named after it."""
            super().setup(stage, local_rank=local_rank, log_dir=log_dir)
            try:
                name = run_name(log_dir)
                trainer = getattr(getattr(self, "_lightning_module", None), "trainer", None)
                rank = getattr(trainer, "global_rank", local_rank)  # ranks of every node
                world = int(getattr(trainer, "world_size", 1 if local_rank is None else 2) or 1)
                if name and rank is not None and world > 1:
                    name = f"{name}-rank{rank}"
                self.window.place(log_dir, name)
            except Exception:  # the defaults stay: never a failed fit
                pass

        def _trainer(self) -> Any:
            """The trainer fitting now, or None."""
            module = getattr(self, "_lightning_module", None)
            trainer = getattr(module, "_trainer", None) if module is not None else None
            if trainer is None or not getattr(trainer, "training", False):
                return None
            return trainer

        @staticmethod
        def _last_batch(trainer: Any) -> bool:
            """Whether the batch just trained is the last of ``fit`` (``max_steps`` reached, or
            the last batch of the last epoch)."""
            steps = int(getattr(trainer, "max_steps", -1))
            if steps >= 0 and trainer.global_step >= steps:
                return True
            epochs = getattr(trainer, "max_epochs", None)
            loop = trainer.fit_loop.epoch_loop
            return bool(
                epochs is not None
                and epochs >= 0
                and trainer.current_epoch + 1 >= epochs
                and loop.batch_progress.is_last_batch
            )

        def start(self, action_name: str) -> None:
            """Lightning's action begins; the window starts at the first step's first batch."""
            if action_name != BATCH_ACTION or self.window.running or self.window.finished:
                return
            try:
                trainer = self._trainer()
                completed = None if trainer is None else int(trainer.global_step)
            except Exception:
                return
            if completed is not None:
                self.window.at(completed)

        def stop(self, action_name: str) -> None:
            """Lightning's action ends; a training batch that completed an optimizer step
            ends a step of the window."""
            if action_name != BATCH_ACTION or not self.window.running:
                return
            try:
                trainer = self._trainer()
                if trainer is None:
                    return
                completed = int(trainer.global_step)
                final = self._last_batch(trainer)
            except Exception:
                return
            self.window.at(completed, final=final)

        def summary(self) -> str:
            """perfkit's headline of the run (after the queued conversion), or what went
            wrong; empty before the window."""
            if self._summary is not None:
                return self._summary
            self.window.stop()  # fit ended inside a window: keep what was recorded
            if not self.window.started:
                return ""
            try:
                runs = self.window.wait()
                failures = self.window.handler.failures
                parts = [headline_text(run) for run in runs]
                parts += [
                    f"perfkit could not save a run: {reason} ({path})" for path, reason in failures
                ]
                text = "\n\n".join(parts)
            except Exception as exc:
                text = f"perfkit could not read its run back: {type(exc).__name__}: {exc}"
            self._summary = text
            return text

        def teardown(self, stage: str | None) -> None:
            """Lightning's call after a stage: a window still recording is stopped and saved."""
            window = getattr(self, "window", None)  # None: the constructor refused its arguments
            if window is not None:
                window.stop()
            super().teardown(stage)

    PerfkitProfiler.__module__ = module
    PerfkitProfiler.__qualname__ = "PerfkitProfiler"  # found by name, as a module-level class
    return PerfkitProfiler


def __getattr__(name: str) -> Any:
    if name == "PerfkitProfiler":
        if name not in _built:
            _built[name] = _build()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
