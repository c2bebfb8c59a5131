"""Op families: the kinds of work (matmul, conv, pool, rnn, layout, ...) that let a torch run and
a paddle run of one model line up, and the ``family`` view (time per family of the run's
outermost work).

An op's family is that of its canonical op (``perfkit_core.views.canonical``: a conv's bias add
counts as conv, a gradient op as its forward op's family); canonical ops no table knows are
classified by the adapter (``perfkit_op_family``) and then by the framework-neutral rules below.
A family is one of ``FAMILIES``; forward and backward work are told apart by ``direction``,
except data loading and the optimizer, which have none.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.views.attribution import KIND_FAMILIES, unit_labels
from perfkit_core.views.family_rules import (
    FAMILIES,
    UNDIRECTED,
    direction_of,
    family_of,
    normalize,
)

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

__all__ = [
    "FAMILIES",
    "UNDIRECTED",
    "direction_of",
    "family_key",
    "family_of",
    "family_times",
    "family_view",
    "normalize",
]


def family_key(family: str, direction: str) -> str:
    """A family view row name: ``conv (backward)``; data, optimizer and unattributed alone."""
    return family if family in UNDIRECTED or not direction else f"{family} ({direction})"


def family_times(run: Run) -> dict[str, float]:
    """Time (ns, whole run) per ``family (direction)`` of the run's outermost work.

    The work counted is the run's op units (``perfkit_core.views.structure``: the outermost op
    of each nest, data-loading and optimizer spans, one autograd node, one Paddle API entry);
    a unit's family is its canonical op's (``perfkit_core.views.attribution.unit_labels``).
    Ops on a host thread that runs no step and no backward work (a data loader's prefetch
    thread) count as ``data``, unless the run lists the thread in ``meta["compute_threads"]``
    (threads that run the steps' compiled programs, such as XLA:CPU's executor threads). A unit is ``backward`` when it is a gradient op or runs inside a
    backward span. Time is GPU time (work launched within) when the run recorded device events,
    CPU time otherwise; data loading always counts host time.
    """
    from perfkit_core.views.structure import structure

    st = structure(run)
    labels = unit_labels(run)
    ev = run.events
    kind = st.kind
    units = np.flatnonzero(st.is_unit)
    in_backward = links.has_ancestor(st.parent, kind == "backward")
    backward_thread = np.zeros(len(kind), dtype=bool)
    if len(units):
        import pandas as pd

        threads = pd.MultiIndex.from_arrays([ev["rank"].to_numpy(), ev["tid"].to_numpy()])
        busy = threads[st.host & ((kind == "backward") | labels.gradient)]
        backward_thread = threads.isin(busy)
    loader_thread = st.host & ~st.step_thread & ~backward_thread & bool(st.step_thread.any())
    compute = [int(t) for t in run.meta.get("compute_threads") or []]
    if compute:
        # Threads that run the steps' compute for the step's thread (XLA:CPU's executors).
        loader_thread &= ~np.isin(ev["tid"].to_numpy(), compute)
    _, gpu_total = links.device_time_by_launcher(run)
    use_gpu = not np.isnan(gpu_total).all()
    ev_dur = ev["dur_ns"].to_numpy().astype(float)
    time = gpu_total if use_gpu else ev_dur
    resolver = labels.resolver
    out: dict[str, float] = {}
    for r in units.tolist():
        k = kind[r]
        if k == "dataloader" or loader_thread[r]:
            family, direction = "data", ""
        elif k == "optimizer":
            family, direction = "optimizer", ""
        else:
            family = KIND_FAMILIES.get(k) or resolver.family(str(labels.op[r]))
            direction = "backward" if labels.gradient[r] or in_backward[r] else "forward"
        key = family_key(family, direction)
        # Data loading is host work even in GPU runs: count its host time.
        chosen = ev_dur[r] if family == "data" else time[r]
        value = float(chosen) if not math.isnan(chosen) else 0.0
        out[key] = out.get(key, 0.0) + value
    return out


def family_view(run: Run, *, top: int | None = None) -> pd.DataFrame:
    """Time per op family of the run's outermost work, per step (``family_times`` divided by
    the number of steps): columns ``name`` (``family (direction)``), ``family``, ``direction``,
    ``time_per_step_ns`` and ``share_pct`` (of the summed family time), largest first.
    GPU time where device work was recorded, else CPU time; data loading is host time."""
    import pandas as pd

    times = family_times(run)
    steps = max(len(run.meta.get("steps") or []), 1)
    total = sum(times.values())
    frame = pd.DataFrame(
        {
            "name": list(times),
            "family": [k.split(" (")[0] for k in times],
            "direction": [k.split(" (")[1].rstrip(")") if " (" in k else "" for k in times],
            "time_per_step_ns": [v / steps for v in times.values()],
            "share_pct": [100.0 * v / total if total else math.nan for v in times.values()],
        }
    ).sort_values(["time_per_step_ns", "name"], ascending=[False, True], kind="stable")
    frame = frame.reset_index(drop=True)
    if top is not None:
        frame = frame.head(top)
    frame.attrs["note"] = (
        "outermost ops only, by the family of their canonical op (a layer's bias add counts "
        "as the layer's op); GPU time where device work was recorded, else CPU time"
    )
    return frame
