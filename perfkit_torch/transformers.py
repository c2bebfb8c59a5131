"""perfkit for ``transformers.Trainer``: ``PerfkitCallback(output_dir)``, passed in
``Trainer(callbacks=[...])``.

A ``transformers.TrainerCallback`` that profiles the optimizer steps in ``profile_steps`` (a
pair ``(start, stop)``, 1-based, inclusive, as ``state.global_step`` counts them, by default
``(6, 15)``: the first steps are warm-up; or a list of pairs; or ``start_step=``/``stop_step=``)
with ``torch.profiler`` and perfkit's handler (``perfkit_torch.on_trace_ready``), and saves
each window as one perfkit run in ``output_dir``, named after the Trainer's output folder
(``args.output_dir``). A step is one optimizer step, every micro-batch of gradient
accumulation included (the Trainer's ``on_step_begin``/``on_step_end``). Layer spans are
recorded in the window, and the modules the model calls are described with their parameters,
for the ``layers`` view.

Importing this module needs neither torch nor transformers; ``PerfkitCallback`` imports
transformers when it is first used, and says in one line what to install when it is missing.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    PerfkitCallback: type  # built on first use (``__getattr__``)

__all__ = ["PerfkitCallback"]

_built: dict[str, type] = {}


def _require_transformers() -> None:
    """Raise ImportError with one line saying what to install when transformers is missing."""
    try:
        found = importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            "perfkit_torch.transformers.PerfkitCallback needs transformers, which is not "
            "installed: pip install transformers accelerate"
        )


def _build() -> type:
    """The ``PerfkitCallback`` class, a subclass of ``transformers.TrainerCallback``."""
    _require_transformers()
    from transformers import TrainerCallback

    from perfkit_core.capture import HandlerRuns, window_arguments
    from perfkit_torch.trainer_window import (
        DEFAULT_PROFILE_STEPS,
        StepWindow,
        headline_text,
        run_name,
    )

    class PerfkitCallback(HandlerRuns, TrainerCallback):
        """Profiles the optimizer steps in ``profile_steps`` (``(start, stop)``, 1-based,
        inclusive, or a list of such windows; or ``start_step``/``stop_step``) of a
        ``transformers.Trainer`` and saves each window as one perfkit run in ``output_dir`` (default:
        ``perfkit`` in the Trainer's ``output_dir``), named ``worker_name`` (default: after the
        Trainer's output folder). ``layers=False`` records no layer spans; ``background=False``
        converts the profile before training goes on; other keyword arguments go to
        ``torch.profiler.profile`` (``record_shapes`` is on unless set).

        ``runs`` lists the saved run folders and ``failures`` what went wrong (both wait for
        the conversion still queued); ``headline()`` is perfkit's headline of the runs.
        Nothing raises into training: a failure is warned about once, and the native trace is
        kept when the run cannot be saved."""

        def __init__(
            self,
            output_dir: str | None = None,
            profile_steps: Any = None,
            *,
            start_step: int | None = None,
            stop_step: int | None = None,
            worker_name: str | None = None,
            layers: bool = True,
            background: bool = True,
            **profile_options: Any,
        ) -> None:
            super().__init__()
            self.window = StepWindow(
                output_dir,
                window_arguments(profile_steps, start_step, stop_step, DEFAULT_PROFILE_STEPS),
                worker_name=worker_name,
                layers=layers,
                background=background,
                profile_options=profile_options,
            )

        @property
        def handler(self) -> Any:
            """perfkit's torch handler that saves the windows."""
            return self.window.handler

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            """The runs go to ``perfkit`` in the Trainer's output folder unless a folder was
            given, named after the output folder."""
            try:
                folder = getattr(args, "output_dir", None)
                name = run_name(folder)
                rank = int(getattr(args, "process_index", 0) or 0)
                if name and getattr(args, "world_size", 1) > 1:
                    name = f"{name}-rank{rank}"
                self.window.place(f"{folder}/perfkit" if folder else None, name)
            except Exception:  # the defaults stay: never a failed training
                pass

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            """An optimizer step begins (its first micro-batch): the window starts at
            ``start_step``."""
            if not self.window.running and not self.window.finished:
                self.window.at(getattr(state, "global_step", -1))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            """An optimizer step ended: a step of the window ends (the last one stops it)."""
            if self.window.running:
                completed = getattr(state, "global_step", -1)
                final = 0 < getattr(state, "max_steps", 0) <= completed
                self.window.at(completed, final=final)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            """Training ended: a window still recording is stopped and saved."""
            self.window.stop(last=True)

        def headline(self) -> str:
            """perfkit's headline of each saved run (after the queued conversion)."""
            return "\n\n".join(headline_text(run) for run in self.window.wait())

    PerfkitCallback.__module__ = __name__
    PerfkitCallback.__qualname__ = "PerfkitCallback"  # found by name, as a module-level class
    return PerfkitCallback


def __getattr__(name: str) -> Any:
    if name == "PerfkitCallback":
        if name not in _built:
            _built[name] = _build()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
