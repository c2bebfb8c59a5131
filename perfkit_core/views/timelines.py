"""Timelines: the profile cut into equal time slices, with what each device did in each slice
(memory allocated, busy share), for the report's line charts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.intervals import clip_to, length
from perfkit_core.events.schema import str_values
from perfkit_core.views.common import DEVICE_KINDS, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Time slices of a timeline.
TIMELINE_SLICES = 24


def _slice_names(edges: np.ndarray) -> list[str]:
    return [f"{e / 1e6:.1f} ms" for e in edges[:-1]]


def memory_timeline_view(
    run: Run, *, slices: int = TIMELINE_SLICES, rank: int | None = None
) -> pd.DataFrame:
    """Memory allocated over time: the profile cut into ``slices`` equal time slices, one row per
    slice (``name`` is its start, ``offset_ns`` from the first event, ``slice`` its number from
    0), one column per device with the peak allocated bytes seen in that slice (``<device>_peak_allocated_bytes``).
    Slices where nothing was allocated or freed are left out."""
    import pandas as pd

    ev = run.events
    sel = (ev["kind"].to_numpy() == "memory") & ev["allocated_bytes"].notna().to_numpy()
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    if not sel.any():
        return view_frame([], ["name", "offset_ns"], "no memory events were recorded")
    mem = ev[sel]
    origin = int(ev["start_ns"].min())
    span = max(int(mem["start_ns"].max()) - origin, 1)
    edges = np.linspace(0, span, slices + 1)
    columns: dict[str, list[float]] = {}
    for (dtype, index), group in mem.groupby(
        [mem["device_type"].astype(str), mem["device_index"]], sort=True, observed=True
    ):
        offset = group["start_ns"].to_numpy() - origin
        bucket = np.minimum(np.searchsorted(edges, offset, side="right") - 1, slices - 1)
        peak = pd.Series(group["allocated_bytes"].to_numpy()).groupby(bucket).max()
        device = dtype if index < 0 else f"{dtype}:{index}"
        columns[f"{device}_peak_allocated_bytes"] = [
            float(peak[b]) if b in peak.index else np.nan for b in range(slices)
        ]
    frame = pd.DataFrame(
        {
            "name": _slice_names(edges),
            "offset_ns": edges[:-1].astype(np.int64),
            "slice": np.arange(slices, dtype=np.int64),
            **columns,
        }
    )
    frame = frame.dropna(how="all", subset=list(columns)).reset_index(drop=True)
    frame.attrs["note"] = f"peak allocated bytes in each of {slices} equal slices of the profile"
    return frame


def device_timeline_view(
    run: Run, *, slices: int = TIMELINE_SLICES, rank: int | None = None
) -> pd.DataFrame:
    """Device utilisation over time: the profile cut into ``slices`` equal time slices, one row
    per slice (``name`` is its start, ``offset_ns`` from the first event), one column per device
    with the share of the slice it was busy (``<device>_busy_pct``: kernels, copies and sets,
    overlaps merged). Empty when no device events were recorded."""
    import pandas as pd

    ev = run.events
    device = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(list(DEVICE_KINDS)).to_numpy()
    if rank is not None:
        device &= ev["rank"].to_numpy() == rank
    if not device.any():
        return view_frame([], ["name", "offset_ns"], "no device events were recorded")
    work = (ev["kind"] != "profiler").to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    origin, finish = int(start[work].min()), int(end[work].max())
    # Integer edges: epoch nanoseconds do not fit a float64 exactly.
    edges = origin + (np.arange(slices + 1, dtype=np.int64) * (finish - origin)) // slices
    columns: dict[str, list[float]] = {}
    dev_type = str_values(ev["device_type"])
    dev_index = ev["device_index"].to_numpy()
    for t, i in sorted(
        {(str(a), int(b)) for a, b in zip(dev_type[device], dev_index[device], strict=True)}
    ):
        rows = device & (dev_type == t) & (dev_index == i)
        shares = []
        for k in range(slices):
            window = (edges[k : k + 1], edges[k + 1 : k + 2])
            width = int(edges[k + 1] - edges[k])
            busy = length(clip_to(start[rows], end[rows], window))
            shares.append(100.0 * busy / width if width else float("nan"))
        columns[f"{t}:{i}_busy_pct"] = shares
    frame = pd.DataFrame(
        {"name": _slice_names(edges - origin), "offset_ns": edges[:-1] - origin, **columns}
    )
    frame.attrs["note"] = (
        f"busy share of each device in each of {slices} equal slices of the profile"
    )
    return frame
