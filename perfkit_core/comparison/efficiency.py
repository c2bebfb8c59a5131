"""How close each run's ops come to the hardware, side by side: achieved TFLOP/s, share of the
device's peak and share of the roofline bound per canonical op (or per layer), lined up across
runs and frameworks, with the step's model FLOPs utilisation (MFU) first.

The same convolution at 40% of its bound in one framework and 15% in the other is the answer to
"why is this one slower": these tables say it op by op. Ops are lined up as the ``ops`` and
``layers`` comparison tables line them up (canonical op and direction; layer key), their
figures from the roofline view of each run (``perfkit_core.views.roofline``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.views.anatomy.attribution import unit_labels
from perfkit_core.views.anatomy.structure import structure
from perfkit_core.views.costmodel.peaks import run_peaks
from perfkit_core.views.roofline import model_flops_per_step, op_table

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.comparison.types import Comparison

#: The first row: each run's steps, their model FLOPs over their time against the peak (MFU).
MFU_ROW = "step (model FLOPs utilisation)"
#: What ``by`` lines the ops up by.
GROUPINGS = ("ops", "layers")


def _keys(run: object, table: pd.DataFrame, by: str, comparison: Comparison) -> np.ndarray:
    """Each op call's row name: its canonical op and direction, or its layer key."""
    st = structure(run)  # type: ignore[arg-type]
    labels = unit_labels(run, op_map=comparison.op_map)  # type: ignore[arg-type]
    unit = st.unit_of[table["row"].to_numpy()]
    has = unit >= 0
    safe = np.maximum(unit, 0)
    if by == "layers":
        rows, at = np.unique(np.where(has, labels.layer_row[safe], -1), return_inverse=True)
        keys = [
            st.layer_key.get(int(r), "(no layer)") if r >= 0 else "(no layer)"
            for r in rows.tolist()
        ]
        return np.array(keys, dtype=object)[at] if len(unit) else np.array([], dtype=object)
    ops = np.where(has, labels.op[safe], table["name"].to_numpy()).astype(str)
    direction = np.where(has & labels.gradient[safe], "backward", "forward")
    pairs, at = np.unique(np.stack([ops, direction], axis=1), axis=0, return_inverse=True)
    # Optimizer and data-loading work has no direction, as in the ``ops`` table.
    plain = {"optimizer", "data"}
    keys = [
        o if labels.resolver.family(str(o)) in plain else f"{o} ({d})" for o, d in pairs.tolist()
    ]
    return (
        np.array(keys, dtype=object)[np.asarray(at).reshape(-1)]
        if len(ops)
        else np.array([], dtype=object)
    )


def efficiency_table(comparison: Comparison, by: str = "ops") -> pd.DataFrame:
    """One row per canonical op and direction (``by="ops"``) or layer (``"layers"``), after the
    MFU row: per run, ``<label> TFLOP/s`` (achieved: FLOPs over device time, or CPU time on a
    CPU run), ``<label> % of peak`` (the time the FLOPs take at the device's peak of each op's
    precision, as a share of the measured time; for the MFU row, the model FLOPs' rate as a
    share of the peak) and ``<label> % of bound`` (the time at the roofline bound as a share
    of the measured time). Rows are ordered by their largest time in any run."""
    import pandas as pd

    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {', '.join(GROUPINGS)}, not {by!r}")
    per_run = []
    for i, (label, run) in enumerate(zip(comparison.labels, comparison.runs, strict=True)):
        peaks = run_peaks(run)
        table = op_table(run, peaks)
        table["key"] = _keys(run, table, by, comparison)
        table["peak_ns"] = table["flops"] / (table["peak_tflops_per_s"] * 1e12) * 1e9
        grouped = table.groupby("key").agg(
            flops=("flops", "sum"),
            time_ns=("time_ns", "sum"),
            bound_ns=("bound_time_ns", lambda v: v.sum(min_count=1)),
            peak_ns=("peak_ns", lambda v: v.sum(min_count=1)),
        )
        steps = model_flops_per_step(run)
        total_ns = float(steps["dur_ns"].sum())
        model_flops = float(steps["model_flops"].sum())
        per_run.append((label, grouped, total_ns, model_flops, steps, comparison.divisor(i)))
    names = sorted(
        {k for _, g, *_ in per_run for k in g.index},
        key=lambda k: -max(float(g["time_ns"].get(k, 0.0)) / d for _, g, _, _, _, d in per_run),
    )
    rows: list[dict[str, object]] = [{"name": MFU_ROW}] + [{"name": n} for n in names]
    labels: dict[str, str] = {"name": "Op" if by == "ops" else "Layer"}
    for label, grouped, total_ns, model_flops, steps, _ in per_run:
        rate, share, bound = f"{label} TFLOP/s", f"{label} % of peak", f"{label} % of bound"
        labels.update(
            {
                rate: f"{label}: achieved TFLOP/s",
                share: f"{label}: % of peak (time at the peak FLOP rate / time)",
                bound: f"{label}: % of roofline bound (time at the bound / time)",
            }
        )
        mfu = steps["mfu_pct"].to_numpy()
        # A run none of whose ops has FLOPs (no input shapes recorded) has no rate, not 0.
        rows[0][rate] = model_flops / total_ns / 1e3 if total_ns > 0 and model_flops else math.nan
        rows[0][share] = (
            100.0 * model_flops / total_ns / 1e3 / float(steps["peak_tflops_per_s"].iloc[0])
            if total_ns > 0 and len(mfu) and not np.isnan(mfu).all()
            else math.nan
        )
        rows[0][bound] = math.nan
        for row in rows[1:]:
            key = row["name"]
            if key not in grouped.index:
                row[rate] = row[share] = row[bound] = math.nan
                continue
            g = grouped.loc[key]
            time_ns = float(g["time_ns"])
            row[rate] = float(g["flops"]) / time_ns / 1e3 if time_ns > 0 else math.nan
            row[share] = 100.0 * float(g["peak_ns"]) / time_ns if time_ns > 0 else math.nan
            row[bound] = 100.0 * float(g["bound_ns"]) / time_ns if time_ns > 0 else math.nan
    frame = pd.DataFrame(rows)
    if by == "layers":
        from perfkit_core.comparison.attribution import layer_labels

        shown = layer_labels(comparison)
        frame["name"] = [shown.get(str(n), str(n)) for n in frame["name"]]
    frame.attrs["labels"] = labels
    no_flops = [label for label, _, _, model_flops, _, _ in per_run if not model_flops]
    frame.attrs["note"] = (
        f"{'canonical ops and directions' if by == 'ops' else 'layers'} lined up across runs; "
        "peaks: "
        + "; ".join(
            f"{label}: {p.device}" if (p := run_peaks(run)) is not None else f"{label}: none known"
            for label, run in zip(comparison.labels, comparison.runs, strict=True)
        )
        + (
            f"; no FLOPs in {', '.join(no_flops)}: its profiler recorded no input shapes"
            if no_flops
            else ""
        )
    )
    return frame
