"""``step_timer()``: wall-clock step times taken around the user's steps, with and without the
profiler recording, so a comparison can state its ratio as the unprofiled program would see it.

A profiler slows the steps it records, and not by the same amount in every framework (torch
records about twice as many host events per step as Paddle for the same model). The timer
times every step with ``time.perf_counter_ns``, asks the adapters whether the profiler it was
given was recording during that step (``perfkit_profiler_recording``), and ``save`` merges the
times into the saved run's ``meta.json`` under ``step_timer``, where ``perfkit compare`` finds
them.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: Key of the timer's record in a saved run's metadata.
META_KEY = "step_timer"


class StepTimer:
    """Times steps: ``with timer.step(): ...`` around each training step.

    ``profiled_ns`` and ``unprofiled_ns`` hold the wall time (ns) of each step after the first
    ``warmup`` steps, split by whether the profiler was recording at the step's start;
    ``unknown_ns`` the steps no adapter could tell about (no profiler given, or one of a
    framework no installed adapter knows).
    """

    def __init__(self, profiler: Any = None, *, warmup: int = 2) -> None:
        if warmup < 0:
            raise ValueError(f"warmup must be 0 or more steps, not {warmup}")
        self.profiler = profiler
        self.warmup = int(warmup)
        self.seen = 0
        self.profiled_ns: list[int] = []
        self.unprofiled_ns: list[int] = []
        self.unknown_ns: list[int] = []

    def recording(self) -> bool | None:
        """Whether the profiler is recording now: True, False, or None when no adapter can tell."""
        from perfkit_core.plugins import get_plugin_manager

        answers = get_plugin_manager().hook.perfkit_profiler_recording(profiler=self.profiler)
        known = [a for a in answers if a is not None]
        return any(known) if known else None

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Time one step (the ``with`` block); the first ``warmup`` steps are not kept."""
        state = self.recording()
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            elapsed = time.perf_counter_ns() - start
            self.seen += 1
            if self.seen > self.warmup:
                {True: self.profiled_ns, False: self.unprofiled_ns, None: self.unknown_ns}[
                    state
                ].append(elapsed)

    def seconds(self) -> list[float]:
        """Every kept step's wall time, in seconds, in the order they ran per kind (profiled,
        then unprofiled, then unknown)."""
        return [ns / 1e9 for ns in (*self.profiled_ns, *self.unprofiled_ns, *self.unknown_ns)]

    def record(self) -> dict[str, Any]:
        """What ``save`` stores: the three lists of step times (ns), the warm-up count, and the
        machine the steps ran on: ``cpu_count`` (``os.cpu_count()``) and ``load_average`` (the
        1-minute load average when saved, the training process included; None where the
        system has none)."""
        try:
            load: float | None = os.getloadavg()[0]
        except OSError:
            load = None
        return {
            "profiled_ns": list(self.profiled_ns),
            "unprofiled_ns": list(self.unprofiled_ns),
            "unknown_ns": list(self.unknown_ns),
            "warmup": self.warmup,
            "cpu_count": os.cpu_count(),
            "load_average": load,
        }

    def save(self, runs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
        """Merge the step times into each saved run folder's ``meta.json`` (atomically); return
        the folders written. Wait for a background handler (``handler.wait()``) before saving."""
        from perfkit_core.errors import TraceError
        from perfkit_core.events import atomic_path

        folders = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
        written = []
        for folder in folders:
            meta_path = Path(folder) / "meta.json"
            try:
                meta = json.loads(meta_path.read_text())
            except (OSError, ValueError) as exc:
                raise TraceError(meta_path, f"cannot add step times to the run: {exc}") from None
            meta[META_KEY] = self.record()
            with atomic_path(meta_path) as tmp:
                tmp.write_text(json.dumps(meta, indent=1, default=str))
            written.append(Path(folder))
        return written


def step_timer(profiler: Any = None, *, warmup: int = 2) -> StepTimer:
    """Return a ``StepTimer`` for ``profiler`` (a ``torch.profiler.profile`` or
    ``paddle.profiler.Profiler``; None: whichever the adapters can see), keeping the steps after
    the first ``warmup``::

        timer = perfkit_core.step_timer(prof)
        for batch in loader:
            with timer.step():
                train_step(batch)
            prof.step()
        ...  # a few more steps after prof.stop(): the unprofiled times
        timer.save(handler.runs)
    """
    return StepTimer(profiler, warmup=warmup)
