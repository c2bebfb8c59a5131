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
from perfkit_core.events.schema import str_values
from perfkit_core.views.common import view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# distributed


#: Name prefixes of collectives that run on the host (gloo moves the data itself).
HOST_BACKEND_PREFIXES = ("gloo:",)


def host_collectives(run: Run) -> np.ndarray:
    """Which rows are collectives that ran on the host: host events of kind ``communication``
    that are a gloo collective or enclose one, or that launched no device work, as a CPU-only
    rank's collectives and ``record_param_comms`` around a host backend do. A collective
    launched device work when a device runtime call (a launch, a stream wait) ran within it, or
    when the trace links a device event to it or to an event within it: by correlation (the
    runtime call that launched the event) or by ``External id`` (traces that record the
    kernels of a collective under its id and no runtime call, as the TensorBoard profiler's
    distributed samples do). Such a collective (NCCL, RCCL, HCCL) is measured by its kernels
    instead."""
    ev = run.events
    kind = str_values(ev["kind"])
    host = ev["stream"].to_numpy() < 0
    comm = host & (kind == "communication")
    if not comm.any():
        return comm
    parent = ev["parent"].to_numpy()
    names = ev["name"]
    prefixed = np.asarray(
        [str(c).startswith(HOST_BACKEND_PREFIXES) for c in names.cat.categories], dtype=bool
    )
    codes = names.cat.codes.to_numpy()
    host_backend = prefixed[codes] if len(prefixed) else np.zeros(len(ev), dtype=bool)
    holds_host_backend = links.subtree_sums(parent, (host & host_backend).astype(np.float64)) > 0
    runtime_calls = links.subtree_sums(parent, (host & (kind == "runtime")).astype(np.float64))
    # The host rows device events are linked to: their launches, and their External id owners.
    device = ~host
    linked = np.zeros(len(ev), dtype=np.float64)
    for source in (links.run_launchers(run), links.external_owner_rows(ev)):
        rows = source[device & (source >= 0)]
        np.add.at(linked, rows, 1.0)
    launched = (runtime_calls > 0) | (links.subtree_sums(links.launch_parents(run), linked) > 0)
    return comm & (holds_host_backend | ~launched)


def work_masks(run: Run, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """(communication rows, computation rows, side) of the ``rows`` of one rank.

    With device events (side ``gpu``): communication is the device communication kernels and
    the collectives that ran on the host (``host_collectives``: gloo on a GPU rank); computation
    the other kernels, copies and sets. Without (side ``cpu``): communication is the host
    collectives, computation every host operator outside a collective.
    """
    ev = run.events
    kind = str_values(ev["kind"])
    device = ev["stream"].to_numpy() >= 0
    comm_host = rows & host_collectives(run)
    if (rows & device).any():
        comm = (rows & device & (kind == "communication")) | comm_host
        comp = rows & device & np.isin(kind, ["kernel", "memcpy", "memset"])
        return comm, comp, "gpu"
    parent = ev["parent"].to_numpy()
    # Every operator counts, top-level ones too (with no step span, or on a thread outside
    # it, they have no parent); the step window keeps what lies outside the steps out.
    comp = rows & ~device & (kind == "operator")
    comp &= ~links.has_ancestor(parent, kind == "communication")
    return rows & ~device & (kind == "communication"), comp, "cpu"


def distributed_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Communication against computation: merged communication time (NCCL/gloo kernels and
    collectives that ran on the host, such as gloo's on a GPU rank), merged computation time
    (other kernels; when no device events were recorded, every host operator outside a
    collective, top-level ones included), and how much of the two overlap, within the rank's
    steps, per step (``per_step_ns``) and as a share of the step, per rank."""
    ev = run.events
    ranks = sorted({int(r) for r in ev["rank"].unique()}) if rank is None else [rank]
    kind = str_values(ev["kind"])
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    rows = []
    for r in ranks:
        in_rank = ev["rank"].to_numpy() == r
        window, has_steps = step_window(run, r)
        total = length(window)
        steps = float(max(int((in_rank & (kind == "step")).sum()), 1)) if has_steps else 1.0
        comm_mask, comp_mask, side = work_masks(run, in_rank)
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
                    "per_step_ns": value / steps,
                    "ratio_pct": 100.0 * value / total if total else math.nan,
                }
            )
    columns = ["name", "rank", "side", "per_step_ns", "ratio_pct"]
    if not (kind == "communication").any():
        # Nothing distributed to show: an empty table (reports leave the section out).
        return view_frame([], columns, "no communication was recorded")
    frame = view_frame(rows, columns)
    frame.attrs["labels"] = {"per_step_ns": "Time per step", "ratio_pct": "% of step"}
    return frame
