"""How advice writes figures in sentences: durations, shares, and times per step."""

from __future__ import annotations


def per_step_text(ns: float, step_ns: float, *, of: str = "the step") -> str:
    """``1.2 ms per step (12.3% of the step)``: a time per step and its share of the step
    (``of`` names that step)."""
    share = f" ({share_text(ns, step_ns)} of {of})" if step_ns else ""
    return f"{duration_text(ns)} per step{share}"


def unprofiled_per_step_text(ns: float, step_ns: float) -> str:
    """``1.2 ms per step (12.3% of the 9.8 ms step without the profiler)``: a time per step
    timed without the profiler, and its share of the step timed the same way."""
    return per_step_text(ns, step_ns, of=f"the {duration_text(step_ns)} step without the profiler")


def duration_text(ns: float) -> str:
    """A duration for a sentence: ``73.4 ms``, ``812 us``, ``950 ns``."""
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.0f} us"
    return f"{ns:.0f} ns"


def share_text(part: float, whole: float) -> str:
    """``12.4%`` of ``whole`` (``-`` when there is no whole)."""
    return f"{100.0 * part / whole:.1f}%" if whole else "-"
