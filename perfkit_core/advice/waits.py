"""What the host and the device did while the other waited, shared by the device and host
rules and the amp estimate: the host's waits for the device, and the device's busy time."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import clip_to, step_window
from perfkit_core.events.schema import str_contains
from perfkit_core.views.common import DEVICE_KINDS

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.advice.engine import Context
    from perfkit_core.events.run import Run

#: Runtime calls in which the host waits for the device to finish its work.
SYNC_RE = re.compile(
    r"Synchronize|^cudaMemcpy$|^cudaMemcpy2D$|^hipMemcpy$",
    re.IGNORECASE,
)


def sync_rows(events: pd.DataFrame) -> np.ndarray:
    """Rows of the runtime calls that wait for the device (``SYNC_RE``)."""
    runtime = (events["kind"] == "runtime").to_numpy()
    return np.flatnonzero(runtime & str_contains(events["name"], SYNC_RE))


def waiting_rows(run: Run) -> np.ndarray:
    """Runtime calls in which the host waits for the device: syncs, and launches of
    device-to-host copies (they return once the copy is done). Computed once per run: the
    device rules, placement and the amp estimate all read it."""
    cached = run.cache.get("advice_waiting_rows")
    if cached is None:
        events = run.events
        launcher = links.run_launchers(run)
        dtoh = (events["kind"] == "memcpy").to_numpy() & str_contains(events["name"], "DtoH")
        copy_launches = launcher[np.flatnonzero(dtoh)]
        cached = np.union1d(sync_rows(events), copy_launches[copy_launches >= 0])
        run.cache.put("advice_waiting_rows", cached)
    rows: np.ndarray = cached
    return rows


def busy_intervals(
    ctx: Context,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(the device's work merged and clipped to the steps, the steps' window), each as (starts,
    ends) arrays in ns: kernels, copies and sets on every stream. Computed once per run:
    launch-bound, low-gpu-utilization and the amp estimate all read it."""
    cached = ctx.run.cache.get("advice_busy_intervals")
    if cached is None:
        ev = ctx.run.events
        sel = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(list(DEVICE_KINDS)).to_numpy()
        start = ev["start_ns"].to_numpy()
        end = start + ev["dur_ns"].to_numpy()
        window, _ = step_window(ctx.run)
        cached = (clip_to(start[sel], end[sel], window), window)
        ctx.run.cache.put("advice_busy_intervals", cached)
    found: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] = cached
    return found


def gpu_busy(ctx: Context) -> tuple[int, int]:
    """(merged device busy ns within the steps, over all steps; kernel count)."""
    busy, _ = busy_intervals(ctx)
    return int((busy[1] - busy[0]).sum()), int((ctx.run.events["kind"] == "kernel").sum())
