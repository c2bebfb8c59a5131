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


def folder_worker_name(dir_name: Path) -> str:
    """The name runs saved in ``dir_name`` take: the folder's own name (``runs/<name>.step<N>``),
    so a trainer's output folder names its runs."""
    name = dir_name.resolve().name
    return name or "perfkit"
