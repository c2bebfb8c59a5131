"""Op families: the kinds of work (matmul, conv, pool, rnn, layout, ...) that let a torch run and
a paddle run of one model line up, and the ``family`` view (time per family of the run's
outermost work).

An op's family is that of its canonical op (``perfkit_core.views.costmodel.canonical``: a conv's bias add
counts as conv, a gradient op as its forward op's family); canonical ops no table knows are
classified by the adapter (``perfkit_op_family``) and then by the framework-neutral rules below.
A family is one of ``FAMILIES``; forward and backward work are told apart by ``direction``,
except data loading and the optimizer, which have none.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.facts import has_device
from perfkit_core.views.costmodel.family_rules import (
    FAMILIES,
    UNDIRECTED,
    direction_of,
    family_of,
    normalize,
)

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run
    from perfkit_core.views.costmodel.canonical import OpMap

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


#: Header labels of the family view's columns.
FAMILY_LABELS = {
    "per_step_ns": "Host time per step",
    "step_pct": "% of step",
    "gpu_per_step_ns": "GPU time per step",
    "gpu_share_pct": "% of the steps' GPU time",
}


def family_times(run: Run) -> dict[str, float]:
    """Wall time (ns, over all steps) of each ``family (direction)`` in the steps: the slices
    of ``views.attribution.step_slices`` grouped by family, so the families of a step add up to
    the step. Host time between ops is ``overhead``; the device finishing work after the host
    step ended is ``device tail``; step time no event covers is ``unattributed``."""
    from perfkit_core.views.anatomy.attribution import step_slices

    slices = step_slices(run)
    if len(slices) == 0:
        return {}
    keys = _slice_keys(slices)
    sums = slices.assign(_key=keys).groupby("_key")["ns"].sum()
    return {str(k): float(v) for k, v in sums.items()}


def _slice_keys(slices: pd.DataFrame) -> np.ndarray:
    """``family (direction)`` of each slice."""
    family = slices["family"].astype(str).to_numpy()
    direction = slices["direction"].astype(str).to_numpy()
    pairs = {
        (f, d): family_key(f, d)
        for f, d in set(zip(family.tolist(), direction.tolist(), strict=True))
    }
    return np.array(
        [pairs[(f, d)] for f, d in zip(family.tolist(), direction.tolist(), strict=True)],
        dtype=object,
    )


def family_gpu_times(run: Run) -> dict[str, float]:
    """Kernel time (ns, over all steps) launched by each ``family (direction)``: a kernel counts
    in the family of its launching op (the outermost op around its launch call), in the
    direction of the step at that op's start. Empty without device work."""
    from perfkit_core.views.anatomy.step_time import launched_kernels

    kernels = launched_kernels(run)
    if kernels.empty:
        return {}
    units = kernels["unit"].to_numpy().astype(np.int64)
    family = unit_families(run, units)
    direction = kernels["direction"].to_numpy()
    direction = np.where(np.isin(family, list(UNDIRECTED)), "", direction)
    keys = [family_key(str(f), str(d)) for f, d in zip(family, direction, strict=True)]
    sums = kernels.assign(_key=keys).groupby("_key")["ns"].sum()
    return {str(k): float(v) for k, v in sums.items()}


def _other_threads_ns(run: Run) -> float:
    """Host work (ns, outermost events, over the profile) on threads that run no step and no
    backward or compiled work for it, such as a data loader's prefetch thread."""
    from perfkit_core.views.anatomy.attribution import compute_thread_rows, unit_labels
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    if not st.step_thread.any():
        return 0.0
    import pandas as pd

    ev = run.events
    labels = unit_labels(run)
    threads = pd.MultiIndex.from_arrays([ev["rank"].to_numpy(), ev["tid"].to_numpy()])
    helpers = threads[st.host & ((st.kind == "backward") | labels.gradient)]
    other = st.host & ~st.step_thread & ~threads.isin(helpers) & ~compute_thread_rows(run)
    roots = other & st.is_unit
    return float((st.end[roots] - st.start[roots]).sum())


def family_view(run: Run, *, top: int | None = None) -> pd.DataFrame:
    """Time per op family per step: columns ``name`` (``family (direction)``), ``family``,
    ``direction``, ``per_step_ns`` (the family's wall time in the steps, per step: the
    families of a step add up to it, as the phases do) and ``step_pct`` (of the mean step);
    on runs with device work also ``gpu_per_step_ns`` (kernel time the family launched, per
    step) and ``gpu_share_pct`` (of the steps' kernel time). Rows largest first: by GPU time
    on runs with device work, else by time."""
    import pandas as pd

    from perfkit_core.views.anatomy.step_time import step_durations

    durations = step_durations(run)
    steps = max(len(run.meta.get("steps") or []), 1) if len(durations) == 0 else len(durations)
    if not (run.events["kind"] == "step").any():
        steps = 1
    times = family_times(run)
    gpu = family_gpu_times(run)
    has_gpu = has_device(run)
    names = sorted(set(times) | set(gpu))
    mean_step = float(np.mean(durations)) if len(durations) else math.nan
    gpu_total = sum(gpu.values())
    frame = pd.DataFrame(
        {
            "name": names,
            "family": [k.split(" (")[0] for k in names],
            "direction": [k.split(" (")[1].rstrip(")") if " (" in k else "" for k in names],
            "per_step_ns": [times.get(k, 0.0) / steps for k in names],
            "step_pct": [
                100.0 * times.get(k, 0.0) / steps / mean_step if mean_step else math.nan
                for k in names
            ],
        }
    )
    order = "per_step_ns"
    if has_gpu:
        frame["gpu_per_step_ns"] = [gpu.get(k, 0.0) / steps for k in names]
        frame["gpu_share_pct"] = [
            100.0 * gpu.get(k, 0.0) / gpu_total if gpu_total else math.nan for k in names
        ]
        order = "gpu_per_step_ns"
    frame = frame.sort_values(
        [order, "per_step_ns", "name"], ascending=[False, False, True], kind="stable"
    )
    frame = frame.reset_index(drop=True)
    if top is not None:
        frame = frame.head(top)
    notes = [
        "the step's wall time by the family of the op running (outermost ops; a layer's bias "
        "add counts as the layer's op), adding up to the step"
    ]
    if has_gpu:
        notes.append("GPU time: the kernels each family launched; rows by GPU time")
    elsewhere = _other_threads_ns(run) / steps
    if elsewhere > 0:
        notes.append(
            f"other host threads (such as a data loader's prefetch thread) ran "
            f"{elsewhere / 1e6:.3f} ms of work per step outside the step's thread, not counted here"
        )
    frame.attrs["note"] = "; ".join(notes)
    frame.attrs["labels"] = dict(FAMILY_LABELS)
    return frame


def unit_families(run: Run, rows: np.ndarray, *, op_map: OpMap | None = None) -> np.ndarray:
    """The op family of each op unit in ``rows`` (as ``step_slices`` labels the slices the
    unit owns): fixed by its kind for data loading, optimizer, communication and runtime
    units (``KIND_FAMILIES``), else its canonical op's family."""
    from perfkit_core.views.anatomy.attribution import KIND_FAMILIES, unit_labels
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    labels = unit_labels(run, op_map=op_map)
    kind = st.kind[rows]
    ops = labels.op[rows]
    families = {x: labels.resolver.family(str(x)) for x in set(ops.tolist())}
    out = np.array([families[x] for x in ops.tolist()], dtype=object)
    for k, fixed in KIND_FAMILIES.items():
        out[kind == k] = fixed
    return out
