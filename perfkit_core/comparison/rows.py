"""Each attribution row's difference with its own uncertainty: the row's time in every step of
each run, so a row can be told to differ beyond its own step-to-step noise even when the
steps as a whole do not, and the time a row's kernels took on the device (the GPU tables).

A row's difference is its candidate mean per step less its baseline mean per step (a step
without the row counts 0); its interval is the normal approximation at 95% confidence,
``delta +- 1.96 * sqrt(var_a / n_a + var_b / n_b)``; a row is *resolvable* when that interval
leaves out 0. Runs of one step have no spread, so none of their rows is resolvable.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.comparison.keys import NO_LAYER, NOT_ANNOTATED, slice_keys
from perfkit_core.views.anatomy.step_time import launched_kernels
from perfkit_core.views.costmodel.family_rules import UNDIRECTED
from perfkit_core.views.families import family_key, unit_families

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.comparison.types import Comparison

#: z of the two-sided 95% interval of a row's difference.
Z_95 = 1.959963984540054


def runs_without_layers(comparison: Comparison) -> list[int]:
    """Positions of the runs whose steps hold no layer span, when another run's steps do
    (empty when every run, or none, has layer spans)."""
    cached = comparison.cache.get("runs_without_layers")
    if cached is not None:
        return list(cached)
    has = [bool((comparison.slices(i)["layer"] != "").any()) for i in range(len(comparison.runs))]
    missing = [] if all(has) else [i for i, found in enumerate(has) if not found and any(has)]
    comparison.cache["runs_without_layers"] = missing
    return list(missing)


def layers_by_phase(comparison: Comparison, view: str) -> bool:
    """Whether ``view`` is the layer view of a comparison where a run recorded no layer spans,
    so every run's layer rows are its phases (``(no layer) forward``, ...)."""
    return view == "layers" and bool(runs_without_layers(comparison))


def per_step_values(comparison: Comparison, i: int, view: str, time: str = "host") -> pd.DataFrame:
    """Run ``i``'s time of each row of ``view`` in each of its steps: one row per (rank, step),
    one column per row name, ns per step (or per sample), 0 where a step has none of it.
    ``time="device"``: the kernel time the row launched instead of its wall time."""
    import pandas as pd

    key = ("per_step", i, view, time)
    cached = comparison.cache.get(key)
    if cached is not None:
        return cached
    run = comparison.runs[i]
    scale = comparison.sample_scale(i)
    spans = comparison.step_index(i)
    if time == "device":
        kernels = launched_kernels(run)
        frame = pd.DataFrame(
            {
                "rank": kernels["rank"].to_numpy(),
                "step": kernels["step"].to_numpy(),
                "_key": device_keys(comparison, i, view),
                "ns": kernels["ns"].to_numpy(),
            }
        )
    else:
        slices = comparison.slices(i)
        frame = pd.DataFrame(
            {
                "rank": slices["rank"].to_numpy(),
                "step": slices["step"].to_numpy(),
                "_key": slice_keys(slices, view, by_phase=layers_by_phase(comparison, view)),
                "ns": slices["ns"].to_numpy(),
            }
        )
    table = frame.pivot_table(
        index=["rank", "step"], columns="_key", values="ns", aggfunc="sum", fill_value=0.0
    )
    table = table.reindex(spans, fill_value=0.0) / scale
    comparison.cache[key] = table
    return table


def device_keys(comparison: Comparison, i: int, view: str) -> np.ndarray:
    """The row of ``view`` each kernel run ``i``'s steps launched counts under: the family,
    canonical op, layer, user span or phase of its launching op (the outermost op around its
    launch call), in the direction of the step when that op started."""
    from perfkit_core.views.anatomy.attribution import unit_labels
    from perfkit_core.views.anatomy.structure import structure

    run = comparison.runs[i]
    kernels = launched_kernels(run)
    units = kernels["unit"].to_numpy().astype(np.int64)
    phase = kernels["phase"].astype(str).to_numpy()
    direction = kernels["direction"].astype(str).to_numpy()
    if view == "phases":
        return phase
    if view == "family":
        family = unit_families(run, units, op_map=comparison.op_map)
        return np.array(
            [
                family_key(str(f), "" if f in UNDIRECTED else str(d))
                for f, d in zip(family, direction, strict=True)
            ],
            dtype=object,
        )
    st = structure(run)
    labels = unit_labels(run, op_map=comparison.op_map)
    if view == "ops":
        kind = st.kind[units]
        ops = labels.op[units].astype(object)
        ops = np.where(kind == "dataloader", "data loading", ops)
        is_opt = kind == "optimizer"
        names = st.names[units]
        ops = np.where(
            is_opt,
            np.array(["zero_grad" if "zero_grad" in str(n) else "optimizer step" for n in names]),
            ops,
        )
        return np.array(
            [
                str(o) if not d or k in ("dataloader", "optimizer") else f"{o} ({d})"
                for o, d, k in zip(ops, direction, kind, strict=True)
            ],
            dtype=object,
        )
    if view == "layers":
        if layers_by_phase(comparison, view):
            return np.array([f"{NO_LAYER} {p}" for p in phase], dtype=object)
        rows = labels.layer_row[units]
        return np.array(
            [
                st.layer_key.get(int(r), "") if r >= 0 else f"{NO_LAYER} {p}"
                for r, p in zip(rows, phase, strict=True)
            ],
            dtype=object,
        )
    if view == "user":
        users = st.user_of[units]
        return np.array(
            [str(st.names[u]) if u >= 0 else NOT_ANNOTATED for u in users], dtype=object
        )
    raise KeyError(f"unknown attribution view {view!r}")


def mean_difference(va: np.ndarray, vb: np.ndarray) -> tuple[float, float, float]:
    """(``vb``'s mean less ``va``'s, the low and high ends of its 95% interval from the two
    samples' spread, normal approximation); NaN ends with fewer than two of either, NaN
    throughout with none."""
    delta = float(vb.mean() - va.mean()) if len(va) and len(vb) else math.nan
    if len(va) < 2 or len(vb) < 2:
        return delta, math.nan, math.nan
    half = Z_95 * math.sqrt(va.var(ddof=1) / len(va) + vb.var(ddof=1) / len(vb))
    return delta, delta - half, delta + half


def row_intervals(comparison: Comparison, view: str, time: str = "host") -> pd.DataFrame:
    """Per row of ``view``: ``delta_ns`` (the last run's mean per step less the first run's),
    ``low_ns`` / ``high_ns`` (its 95% interval from each run's step-to-step spread) and
    ``resolvable`` (the interval leaves out 0), largest difference first."""
    import pandas as pd

    first, last = 0, len(comparison.runs) - 1
    a = per_step_values(comparison, first, view, time)
    b = per_step_values(comparison, last, view, time)
    names = sorted(set(a.columns) | set(b.columns))
    rows = []
    for name in names:
        va = a[name].to_numpy() if name in a.columns else np.zeros(len(a))
        vb = b[name].to_numpy() if name in b.columns else np.zeros(len(b))
        delta, low, high = mean_difference(va, vb)
        resolvable = bool(not math.isnan(low) and (low > 0 or high < 0))
        rows.append(
            {
                "name": str(name),
                "delta_ns": delta,
                "low_ns": low,
                "high_ns": high,
                "resolvable": resolvable,
            }
        )
    frame = pd.DataFrame(rows, columns=["name", "delta_ns", "low_ns", "high_ns", "resolvable"])
    order = frame["delta_ns"].abs().sort_values(ascending=False, kind="stable").index
    return frame.loc[order].reset_index(drop=True)
