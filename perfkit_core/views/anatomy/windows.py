"""Slices of the recorded (host) steps moved into the steps as a run times them: each step
stretched over the device work it launched (``events.intervals.step_spans``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: The op, family and native name of the part of a step after its host span ended, while the
#: device still ran work the step launched (the step stretched over its device work).
DEVICE_TAIL = "device tail"
DEVICE_TAIL_NATIVE = "(device work after the host step)"


def in_stretched_steps(run: Run, out: pd.DataFrame) -> pd.DataFrame:
    """The slices of the recorded (host) steps moved into the steps as the run times them:
    each step stretched over the device work it launched (``events.intervals.step_spans``).

    A slice belongs to the stretched step whose window holds it (a slice across a window's end
    is cut in two); host time before the first step's window is outside every step and left
    out. Window time no host slice covers (the device still running work the step launched
    after its host span ended) becomes one ``DEVICE_TAIL`` slice of phase ``other``. On runs
    without device work the windows are the host steps and nothing moves."""
    import pandas as pd

    from perfkit_core.events.intervals import step_spans

    spans = step_spans(run)
    if len(out) == 0 or len(spans["step"]) == 0:
        return out
    moved = (spans["start_ns"] != spans["host_start_ns"]) | (
        spans["end_ns"] != spans["host_end_ns"]
    )
    if not moved.any():
        return out
    rank = out["rank"].to_numpy().astype(np.int64)
    t0 = out["start_ns"].to_numpy().astype(np.int64)
    t1 = t0 + out["ns"].to_numpy().astype(np.int64)
    # Windows in (rank, start) order; they do not overlap within a rank.
    w_rank = spans["rank"].astype(np.int64)
    w0, w1, w_step = spans["start_ns"], spans["end_ns"], spans["step"]
    window_of = np.full(len(out), -1, dtype=np.int64)
    cut_rows: list[int] = []
    for r in np.unique(w_rank).tolist():
        mine_w = np.flatnonzero(w_rank == r)
        mine = np.flatnonzero(rank == r)
        first = np.searchsorted(w0[mine_w], t0[mine], side="right") - 1
        last = np.searchsorted(w0[mine_w], t1[mine], side="left") - 1
        single = (first == last) & (first >= 0)
        window_of[mine[single]] = mine_w[first[single]]
        cut_rows += mine[~single & (last >= 0)].tolist()
    keep = window_of >= 0
    w = np.maximum(window_of, 0)
    lo = np.where(keep, np.maximum(t0, w0[w]), 0)
    hi = np.where(keep, np.minimum(t1, w1[w]), 0)
    keep &= hi > lo
    pieces = [
        out.iloc[np.flatnonzero(keep)].assign(
            _window=window_of[keep], start_ns=lo[keep], ns=(hi - lo)[keep].astype(np.float64)
        )
    ]
    for i in cut_rows:
        r = int(rank[i])
        mine_w = np.flatnonzero(w_rank == r)
        over = mine_w[(w0[mine_w] < t1[i]) & (w1[mine_w] > t0[i])]
        for j in over.tolist():
            a, b = max(int(t0[i]), int(w0[j])), min(int(t1[i]), int(w1[j]))
            if b > a:
                pieces.append(out.iloc[[i]].assign(_window=j, start_ns=a, ns=float(b - a)))
    moved_out = pd.concat(pieces, ignore_index=True)
    covered = np.bincount(
        moved_out["_window"].to_numpy(), weights=moved_out["ns"].to_numpy(), minlength=len(w0)
    )
    tail = (w1 - w0) - covered
    windows = np.flatnonzero(tail > 0.5)
    if len(windows):
        tail_rows = pd.DataFrame(
            {
                "_step_row": -1,
                "start_ns": w1[windows] - tail[windows].astype(np.int64),
                "owner": -1,
                "ns": tail[windows],
                "_part": "after",
                "_step_owner": False,
                "family": DEVICE_TAIL,
                "op": DEVICE_TAIL,
                "native": DEVICE_TAIL_NATIVE,
                "_layer": -1,
                "_user": -1,
                "phase": "other",
                "direction": "",
                "_window": windows,
            }
        )
        moved_out = pd.concat([moved_out, tail_rows], ignore_index=True)
    window = moved_out["_window"].to_numpy()
    moved_out["step"] = w_step[window]
    moved_out["rank"] = w_rank[window]
    return moved_out.drop(columns="_window")
