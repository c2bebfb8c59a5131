"""Optimizer steps that run the model inside them: the closure a trainer passes to
``optimizer.step(closure)``.

Lightning's automatic optimization (and any ``torch.optim.LBFGS`` loop) calls
``optimizer.step(closure)``, and the closure runs the forward pass, the loss and the backward
pass. The profiler then records them inside the optimizer's span (``Optimizer.step#SGD.step``)
and the parameter update after them. Such a span is a *closure*: an optimizer span with a layer
span, a forward or backward span or an autograd node inside it. Its own work, the optimizer's,
is what it runs from the end of the model's work inside it (that of other threads during the
span included: torch runs the backward of a GPU model on a thread of its own) to its end: its
*update*.

So every figure that counts the optimizer's time or ops counts, of a closure, its update alone:
the ``model`` view's optimizer phase (``attribution.step_slices``) and the advice's optimizer
ops. The model's work inside the closure is forward and backward work as anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.schema import coded

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

LAYER_PREFIX = "nn.Module: "
ENGINE_PREFIX = "autograd::engine::evaluate_function: "


@dataclass(frozen=True)
class Closures:
    """``closure`` (per row: an optimizer span that runs the model inside it), ``update_start``
    (per closure row: where its update starts, ns) and ``optimizer_rows`` (per row: the
    optimizer's own work, inside an optimizer span that is no closure or inside a closure's
    update)."""

    closure: np.ndarray
    update_start: dict[int, int]
    optimizer_rows: np.ndarray


def optimizer_closures(run: Run) -> Closures:
    """The run's ``Closures``, computed once and cached on the run."""
    return run.cached("optimizer_closures", lambda: _closures(run))


def optimizer_rows(run: Run) -> np.ndarray:
    """Per row, whether it is the optimizer's own work (``Closures.optimizer_rows``)."""
    return optimizer_closures(run).optimizer_rows


def _closures(run: Run) -> Closures:
    ev = run.events
    n = len(ev)
    host = ev["stream"].to_numpy() < 0
    kinds = coded(ev["kind"])
    is_opt = host & kinds.among("optimizer")
    closure = np.zeros(n, dtype=bool)
    if not is_opt.any():
        return Closures(closure, {}, is_opt)
    parent = ev["parent"].to_numpy().astype(np.int64, copy=False)
    names = coded(ev["name"])
    marked = np.array(
        [c.startswith((LAYER_PREFIX, ENGINE_PREFIX)) for c in names.categories] + [False]
    )
    layer = marked[names.codes] & kinds.among("user", "python")
    model_work = host & (kinds.among("forward", "backward") | layer)
    holder = links.nearest_flagged(parent, is_opt, self_too=False)
    rows = np.flatnonzero(model_work & (holder >= 0))
    nearest = links.nearest_flagged(parent, is_opt)
    if not len(rows):
        return Closures(closure, {}, nearest >= 0)
    start = ev["start_ns"].to_numpy().astype(np.int64, copy=False)
    end = start + ev["dur_ns"].to_numpy().astype(np.int64, copy=False)
    closure[holder[rows]] = True
    ends = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(ends, holder[rows], end[rows])
    # the model's work on other threads of the rank while the closure ran (a GPU model's
    # backward runs on a thread of its own, the closure's thread waiting for it)
    rank = ev["rank"].to_numpy()
    tid = ev["tid"].to_numpy()
    elsewhere = np.flatnonzero(model_work)
    elsewhere = elsewhere[np.argsort(start[elsewhere], kind="stable")]
    starts = start[elsewhere]
    update_start: dict[int, int] = {}
    for c in np.flatnonzero(closure).tolist():
        lo, hi = np.searchsorted(starts, [start[c], end[c]])
        near = elsewhere[lo:hi]
        near = near[(rank[near] == rank[c]) & (tid[near] != tid[c])]
        late = max(int(ends[c]), int(end[near].max())) if len(near) else int(ends[c])
        update_start[c] = min(late, int(end[c]))
    safe = np.maximum(nearest, 0)
    in_closure = (nearest >= 0) & closure[safe]
    after = np.zeros(n, dtype=bool)
    rows_in = np.flatnonzero(in_closure & (nearest != np.arange(n)))
    if len(rows_in):
        first = np.array([update_start[int(c)] for c in nearest[rows_in].tolist()], dtype=np.int64)
        after[rows_in] = start[rows_in] >= first
    return Closures(closure, update_start, ((nearest >= 0) & ~in_closure) | after)


def closure_families(run: Run, slices: pd.DataFrame, fam: np.ndarray, between: str) -> np.ndarray:
    """``fam`` (the family of each of the step ``slices``) with the slices of closures put
    right: their update is the optimizer's (op ``optimizer step``), the time between the
    model's ops inside them host time between ops (family ``overhead``, op ``between``)."""
    found = optimizer_closures(run)
    if not found.update_start:
        return fam
    owner = slices["owner"].to_numpy()
    first = np.full(len(found.closure), np.iinfo(np.int64).max, dtype=np.int64)
    first[list(found.update_start)] = list(found.update_start.values())
    of_closure = found.closure[owner]
    update = (of_closure & (slices["start_ns"].to_numpy() >= first[owner])) | (
        found.optimizer_rows[owner] & (fam != "data")
    )
    inside = of_closure & ~update
    slices.loc[inside, "op"] = between
    slices.loc[update & of_closure, "op"] = "optimizer step"
    fam = np.where(inside, "overhead", fam).astype(object)
    return np.where(update, "optimizer", fam).astype(object)
