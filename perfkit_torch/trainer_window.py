"""A window of optimizer steps profiled for a trainer's integration: what
``perfkit_torch.lightning.PerfkitProfiler`` and ``perfkit_torch.transformers.PerfkitCallback``
share.

The trainer tells the window how many optimizer steps it has completed (``at(completed)``) at
each step boundary it knows of; the window starts ``torch.profiler.profile`` one step before
step ``start_step`` (1-based), to warm it up as torch's schedules do, marks each later boundary
with ``prof.step()``, and the end of step ``stop_step`` hands the profile to perfkit's handler
(``perfkit_torch.on_trace_ready``): one saved run per window, in ``dir_name``. Given several
windows (``perfkit_core.capture.step_windows``), it profiles each in turn, one run each. A step is one
optimizer step, gradient accumulation included (every micro-batch of it, and the data loading
before each). Nothing here raises into training: a failure is warned about once (through the
handler's failures) and training goes on, unprofiled.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

from perfkit_core.capture import step_windows
from perfkit_torch.handler import TraceHandler

#: Characters a run's name keeps (others become ``_``): a run folder is ``<name>.step<N>``.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def run_name(folder: str | os.PathLike[str] | None, default: str | None = None) -> str | None:
    """A run's name from a trainer's run folder: its last two parts joined by ``-``
    (``lightning_logs/version_0`` gives ``lightning_logs-version_0``); ``default`` without one."""
    if not folder:
        return default
    parts = [p for p in Path(folder).parts[-2:] if p not in ("", ".", "..", "/")]
    name = _UNSAFE.sub("_", "-".join(parts)).strip("._-")
    return name or default


def window_schedule(first: int, warmup: int, active: int) -> Any:
    """A ``torch.profiler`` schedule for steps numbered from ``first``: ``warmup`` steps of
    warm-up, then ``active`` recorded steps, the last one handing the profile over; nothing
    after."""
    from torch.profiler import ProfilerAction

    def action(step: int) -> Any:
        k = step - first
        if k < 0 or k >= warmup + active:
            return ProfilerAction.NONE
        if k < warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if k == warmup + active - 1 else ProfilerAction.RECORD

    return action


#: The optimizer steps the torch integrations profile unless told: the first five (compiling,
#: cuDNN's algorithm search, the allocator's first sizes) are left out, then ten are recorded.
DEFAULT_PROFILE_STEPS = (6, 15)


class StepWindow:
    """Profiles each window of optimizer steps in ``windows`` (``(start_step, stop_step)``
    pairs, 1-based, inclusive, in order, as ``perfkit_core.capture.step_windows`` gives them)
    into one perfkit run in ``dir_name`` (see the module docstring). ``handler`` is perfkit's
    torch handler (``runs``, ``failures``, ``wait()``); ``profile_options`` go to
    ``torch.profiler.profile`` (``record_shapes``, ``profile_memory``, ``activities``...)."""

    def __init__(
        self,
        dir_name: str | os.PathLike[str] | None,
        windows: list[tuple[int, int]],
        *,
        worker_name: str | None = None,
        layers: bool = True,
        background: bool = True,
        profile_options: dict[str, Any] | None = None,
    ) -> None:
        self.windows = step_windows(windows)
        #: The window profiled now or next.
        self._index = 0
        self.handler = TraceHandler(
            dir_name or "./perfkit_runs",
            worker_name=worker_name,
            layers=layers,
            background=background,
        )
        self.named = worker_name is not None
        self.dir_given = dir_name is not None
        spans = self.handler._module_spans
        if spans is not None:
            spans.arm(False)  # layer spans only from the window's first step on
        self.profile_options = dict(profile_options or {})
        self._prof: Any = None
        self._last = 0
        #: Whether every window was profiled (or given up).
        self.finished = False
        #: How many windows the profiler started for.
        self.started = 0

    @property
    def start_step(self) -> int:
        """The first step of the window profiled now or next."""
        return self.windows[min(self._index, len(self.windows) - 1)][0]

    @property
    def stop_step(self) -> int:
        """The last step of the window profiled now or next."""
        return self.windows[min(self._index, len(self.windows) - 1)][1]

    @property
    def running(self) -> bool:
        """Whether the profiler records now."""
        return self._prof is not None

    def place(self, dir_name: str | os.PathLike[str] | None, name: str | None) -> None:
        """Where the trainer keeps its run, before the window starts: the runs go to
        ``dir_name`` unless a folder was given, named ``name`` unless a name was given."""
        if self._prof is not None:
            return
        if dir_name and not self.dir_given:
            self.handler.dir_name = Path(dir_name)
        if name and not self.named:
            self.handler.worker_name = name

    def at(self, completed: int, *, final: bool = False) -> None:
        """The trainer has completed ``completed`` optimizer steps (``final``: its last one):
        start, mark a step or stop. Never raises."""
        try:
            completed = int(completed)
            if self._prof is None:
                # windows the trainer went past unprofiled (it resumed after them) are skipped
                while not self.finished and completed >= self.stop_step:
                    self._next_window()
                # the profiler starts a step early, to warm up (torch's schedule: ``warmup``)
                if not self.finished and self.start_step - 2 <= completed < self.stop_step:
                    self._start(max(completed, 0))
                return
            while self._last < completed and self._prof is not None:
                self._last += 1
                if final and self._last == completed and self._last < self.stop_step:
                    # the run's folder is numbered by the steps completed, as at the window's end
                    self._prof.step_num = completed
                    # ends the step recorded now: no step begins after the last
                    self.stop(last=True)
                    return
                self._prof.step()  # the last recorded step's end hands the profile over
                if self._last >= self.stop_step:
                    self.stop()
        except Exception as exc:
            self._abandon(f"the profiler failed at optimizer step {completed}: {exc}")

    def _start(self, completed: int) -> None:
        from torch.profiler import profile

        # Steps are numbered as torch numbers a loop's: ProfilerStep#N is the step N completed
        # optimizer steps precede, and the run folder's N the optimizer steps completed at the
        # window's end (``stop_step``).
        warmup = max(self.start_step - 1 - completed, 0)
        active = self.stop_step - max(completed + 1, self.start_step) + 1
        options = {"record_shapes": True, **self.profile_options}
        prof = profile(
            schedule=window_schedule(completed, warmup, active),
            on_trace_ready=self.handler,
            **options,
        )
        prof.step_num = completed
        spans = self.handler._module_spans
        if spans is not None:
            spans.arm(True)
        self._last = completed
        self._prof = prof
        self.started += 1
        prof.start()

    def _next_window(self) -> None:
        """On to the next window; finished after the last."""
        self._index += 1
        self.finished = self._index >= len(self.windows)

    def stop(self, *, last: bool = False) -> None:
        """Stop a profiler still recording (the window ends, or training ended in it): its
        profile is handed to the handler, and the next window waits for its steps. ``last``:
        training ended, no window follows. Never raises."""
        prof, self._prof = self._prof, None
        if last:
            self.finished = True
        if prof is None:
            return
        if not self.finished:
            self._next_window()
        try:
            prof.stop()
        except Exception as exc:
            self._abandon(f"the profiler did not stop: {exc}")

    def _abandon(self, reason: str) -> None:
        """Give up the window after a failure: warned about once, training goes on."""
        prof, self._prof = self._prof, None
        self.finished = True
        spans = self.handler._module_spans
        if spans is not None:
            spans.arm(False)
        if prof is not None:
            with contextlib.suppress(Exception):
                prof.stop()
        self.handler._fail(None, self.handler.dir_name, reason)

    def wait(self) -> list[Path]:
        """The saved runs, once the queued conversions are done."""
        return self.handler.runs


def headline_text(run_dir: Path) -> str:
    """perfkit's headline of the saved run in ``run_dir`` (step time, throughput, where the step
    goes, the change to make first), as ``perfkit report`` prints it, with the command that
    reports the rest."""
    import perfkit_core

    lines = [f"perfkit run {run_dir}", perfkit_core.headline_text(perfkit_core.load(run_dir))]
    lines.append(f"(the whole report: perfkit report {run_dir})")
    return "\n".join(line for line in lines if line)
