"""The windows of steps a trainer callback profiles: ``(start, stop)`` pairs, numbered from 1."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def step_windows(spec: Any) -> list[tuple[int, int]]:
    """``spec`` as a sorted list of ``(start, stop)`` step windows, both ends included, steps
    numbered from 1: a pair ``(start, stop)``, a list of pairs, or ``"start,stop"`` (Keras'
    ``profile_batch`` form). ValueError when a window is empty, starts below 1 or overlaps
    another."""
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(",")]
        spec = (int(parts[0]), int(parts[-1]))
    if isinstance(spec, int):
        spec = (spec, spec)
    pairs: Sequence[Any] = spec
    if len(pairs) == 2 and all(isinstance(v, int) for v in pairs):
        pairs = [pairs]
    windows = sorted((int(a), int(b)) for a, b in pairs)
    for start, stop in windows:
        if not 1 <= start <= stop:
            raise ValueError(
                f"profile steps {start} to {stop}: need 1 <= start <= stop (steps count from 1)"
            )
    for (_, stop), (start, _) in itertools.pairwise(windows):
        if start <= stop:
            raise ValueError(
                f"profile windows overlap: one ends at step {stop}, the next starts at {start}"
            )
    if not windows:
        raise ValueError("no profile window given")
    return windows


def window_arguments(
    profile_steps: Any,
    start_step: int | None,
    stop_step: int | None,
    default: tuple[int, int],
) -> list[tuple[int, int]]:
    """The windows a trainer integration was given, whichever way its caller names them: its
    ``profile_steps`` (what ``step_windows`` reads: one pair or several), or one window from
    ``start_step`` to ``stop_step`` (MindSpore's and the torch integrations' names; without a
    stop, as many steps as the default window holds; without a start, the default's start, or
    the stop where that is earlier), else ``default``. ValueError when both ways are given or a window
    is not one."""
    if profile_steps is not None and (start_step is not None or stop_step is not None):
        raise ValueError(
            "give the steps to profile one way: profile_steps=(start, stop), or start_step= "
            "and stop_step=, not both"
        )
    if profile_steps is None and start_step is None and stop_step is None:
        profile_steps = default
    if profile_steps is None:
        for value in (start_step, stop_step):
            if value is not None and (isinstance(value, bool) or int(value) != value):
                raise ValueError(f"profile step {value!r}: steps are whole numbers")
        if start_step is None:
            stop = int(stop_step)  # type: ignore[arg-type]
            start = min(default[0], stop)
        else:
            start = int(start_step)
            stop = start + default[1] - default[0] if stop_step is None else int(stop_step)
        profile_steps = (start, stop)
    return step_windows(profile_steps)


def folder_worker_name(dir_name: Path) -> str:
    """The name runs saved in ``dir_name`` take: the folder's own name (``runs/<name>.step<N>``),
    so a trainer's output folder names its runs."""
    name = dir_name.resolve().name
    return name or "perfkit"
