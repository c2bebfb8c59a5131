"""The distributed view: communication against computation, and their overlap."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import (
    clip_to,
    intersect_length,
    length,
    step_window,
)
from perfkit_core.views.common import view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# distributed


def distributed_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Communication against computation: merged communication time (NCCL/gloo kernels and
    collective ops), merged computation time (other kernels; when no device events were
    recorded, every host operator outside a collective, top-level ones included), and how much
    of the two overlap, per step window and rank."""
    ev = run.events
    ranks = sorted({int(r) for r in ev["rank"].unique()}) if rank is None else [rank]
    kind = ev["kind"].to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    device = ev["stream"].to_numpy() >= 0
    rows = []
    for r in ranks:
        in_rank = ev["rank"].to_numpy() == r
        window, _ = step_window(run, r)
        total = length(window)
        if (in_rank & device).any():
            comm_mask = in_rank & device & (kind == "communication")
            comp_mask = in_rank & device & np.isin(kind, ["kernel", "memcpy", "memset"])
            side = "gpu"
        else:
            comm_mask = in_rank & ~device & (kind == "communication")
            # Every operator counts, top-level ones too (with no step span, or on a thread
            # outside it, they have no parent); the window keeps what lies outside the steps out.
            comp_mask = in_rank & ~device & (kind == "operator")
            comp_mask &= ~links.has_ancestor(ev["parent"].to_numpy(), kind == "communication")
            side = "cpu"
        comm = clip_to(start[comm_mask], end[comm_mask], window)
        comp = clip_to(start[comp_mask], end[comp_mask], window)
        overlap = intersect_length(comm, comp)
        suffix = f" (rank {r})" if len(ranks) > 1 else ""
        for name, value in (
            ("step", total),
            ("communication", length(comm)),
            ("computation", length(comp)),
            ("overlap", overlap),
        ):
            rows.append(
                {
                    "name": name + suffix,
                    "rank": r,
                    "side": side,
                    "time_ns": value,
                    "ratio_pct": 100.0 * value / total if total else math.nan,
                }
            )
    columns = ["name", "rank", "side", "time_ns", "ratio_pct"]
    if not (kind == "communication").any():
        # Nothing distributed to show: an empty table (reports leave the section out).
        return view_frame([], columns, "no communication was recorded")
    return view_frame(rows, columns)
