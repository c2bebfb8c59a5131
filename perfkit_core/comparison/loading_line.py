"""The verdict's line on loading no row shows: Paddle's single-process DataLoader loads in a
thread of the training process its profiler does not record, so that loading's cost is spread
over the rows (it takes the CPU and the GIL from the training thread), and a run that moves it
to worker processes shows a data row that grew while its step shrank."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from perfkit_core.comparison.overhead import RunOverhead


def hidden_loading_line(
    labels: list[str],
    loading_ns: list[float | None],
    overheads: list[RunOverhead],
    scale: float,
    time_unit: str,
) -> str:
    """The line for the runs whose step timer timed a loading thread (``loading_ns``: the
    thread's CPU time per step without the profiler, None where none was timed), each with its
    share of the run's median step without the profiler; "" when no run timed one. Times in
    ``time_unit``, ``scale`` ns each."""
    runs = list(zip(labels, loading_ns, overheads, strict=True))
    timed = [(label, ns, o) for label, ns, o in runs if ns is not None]
    if not timed:
        return ""
    parts = []
    for label, ns, o in timed:
        median = float(np.median(o.unprofiled_ns)) if len(o.unprofiled_ns) else 0.0
        share = (
            f" ({100.0 * ns / median:.1f}% of its median step without the profiler)"
            if median > 0
            else ""
        )
        parts.append(
            f"{label} loaded its batches in a thread of the training process that its "
            f"profiler does not record: {ns / scale:.3f} {time_unit} per step of that "
            f"thread's CPU time without the profiler{share}"
        )
    others = [label for label, ns, o in runs if ns is None and len(o.unprofiled_ns)]
    line = (
        "loading no row shows: "
        + "; ".join(parts)
        + ". That thread takes the CPU and the GIL from training, so its cost is spread over "
        "the other rows, not shown as data"
    )
    if others:
        line += (
            f"; {', '.join(others)} loaded no batches in such a thread, so its data row "
            "holds all its loading (in the training thread, or its waits for workers)"
        )
    return line
