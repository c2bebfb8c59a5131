"""What a verdict says of the steps its averages leave out (each run's leading warm-up,
``events.steady``) and of the slow steps they keep."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from perfkit_core.events.steady import RULE_TEXT, SteadySteps, slow_text, warmup_text

if TYPE_CHECKING:
    from perfkit_core.comparison.statistics import RatioEstimate


def left_out_counts(
    labels: list[str],
    steady: list[SteadySteps],
    unprofiled_warmup: list[int],
    unprofiled: RatioEstimate | None,
) -> list[tuple[str, int]]:
    """(label, leading steps left out) of each run whose steps the verdict's headline is taken
    over (the step timer's without the profiler when ``unprofiled`` is known, else the
    profiled ones) lost warm-up steps."""
    if unprofiled is not None:
        counts = list(unprofiled_warmup) or [0] * len(labels)
    else:
        counts = [len(s.warmup) for s in steady] or [0] * len(labels)
    return [(label, n) for label, n in zip(labels, counts, strict=True) if n]


def left_out_clause(
    labels: list[str],
    steady: list[SteadySteps],
    unprofiled_warmup: list[int],
    unprofiled: RatioEstimate | None,
) -> str:
    """``; mindspore's first 2 left out as warm-up`` for the verdict's sentence, or ""."""
    parts = [
        f"{label}'s first {n}"
        for label, n in left_out_counts(labels, steady, unprofiled_warmup, unprofiled)
    ]
    return f"; {' and '.join(parts)} left out as warm-up" if parts else ""


def steady_lines(
    labels: list[str],
    steady: list[SteadySteps],
    unprofiled_warmup: list[int],
    with_warmup: RatioEstimate | None,
    scale: float,
    time_unit: str,
) -> list[str]:
    """The verdict's lines on the warm-up every average leaves out (profiled steps, and the
    step timer's steps without the profiler), with the ratio ``with_warmup`` the warm-up would
    have given, and on the slow later steps every average keeps; none when there are
    neither. Times in ``time_unit``, ``scale`` ns each."""
    out = []
    left = [
        f"{label} {warmup_text(s, scale, time_unit)}"
        for label, s in zip(labels, steady, strict=False)
        if s.warmup
    ]
    unprofiled = [
        f"{label}'s first {n} step(s) timed without the profiler"
        for label, n in zip(labels, unprofiled_warmup, strict=False)
        if n
    ]
    if left or unprofiled:
        line = "warm-up left out of every average: " + "; ".join(left + unprofiled)
        if with_warmup is not None and not math.isnan(with_warmup.ratio):
            line += (
                f"; with them the ratio would be {with_warmup.ratio:.2f} "
                f"({100 * with_warmup.confidence:.0f}% CI {with_warmup.low:.2f}-"
                f"{with_warmup.high:.2f})"
            )
        out.append(f"{line} ({RULE_TEXT})")
    slow = [
        f"{label} {slow_text(s, scale, time_unit)}"
        for label, s in zip(labels, steady, strict=False)
        if s.slow
    ]
    if slow:
        out.append(
            "slow steps kept in every average (a slow step after the first is the run's real "
            "cost: a checkpoint, a stalled collective, a pause): " + "; ".join(slow)
        )
    return out
