"""The roofline view: how far each op runs from what the hardware can do, and the model FLOPs
utilisation (MFU) of each step.

For every counted op (``perfkit_core.views.costs``): its FLOPs and bytes per step, arithmetic
intensity (FLOP/B), achieved TFLOP/s and TB/s, and how long it would take at the roofline bound
of its intensity, ``max(FLOPs / peak FLOP rate, bytes / peak bandwidth)`` with the peak of the
precision its math ran in (tensor cores or not, from its kernels' names). ``roofline_pct`` is
that bound time as a share of the measured time (100% runs at the roofline), which equals the
achieved FLOP rate as a share of the attainable rate at that intensity. An op is
``compute``-bound when its FLOPs take longer at peak than its bytes, ``memory``-bound
otherwise, and ``latency``-bound when one call's bound time is under ``LATENCY_BOUND_NS``
(fixed costs, not math or traffic, then set its time).

Times are per step (the mean over the run's steps). On runs without device work, an op's time
is its host time and the peaks are this machine's (``perfkit peaks``) or the user's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import facts
from perfkit_core.events.intervals import step_spans
from perfkit_core.views.common import NO_STEPS_NOTE, category_values, private_copy, shared
from perfkit_core.views.costmodel.opcost import MODEL_KINDS
from perfkit_core.views.costmodel.peaks import Peaks, run_peaks
from perfkit_core.views.costs import RunCosts, run_costs

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: An op whose work takes less than this per call even at the roofline is latency-bound.
LATENCY_BOUND_NS = 5_000
#: What ``by`` groups the roofline view by.
GROUPINGS = ("op", "shape", "family", "layer")
#: The view's columns, in order (keys before the figures; ``input_shapes``, ``family`` and
#: ``layer`` only when grouped by them).
COLUMNS = (
    "name",
    "precision",
    "calls_per_step",
    "time_ns",
    "step_pct",
    "gflops",
    "moved_bytes",
    "intensity_flop_per_byte",
    "achieved_tflops_per_s",
    "achieved_tb_per_s",
    "peak_tflops_per_s",
    "peak_tb_per_s",
    "bound_time_ns",
    "roofline_pct",
    "bound",
    "headroom_ns",
)


def labels(on_device: bool) -> dict[str, str]:
    """Header labels of the roofline view's columns (the report uses them)."""
    time = "Device time per step" if on_device else "CPU time per step"
    return {
        "name": "Op",
        "precision": "Precision",
        "calls_per_step": "Calls per step",
        "time_ns": time,
        "step_pct": "% of step",
        "gflops": "GFLOP per step",
        "moved_bytes": "Bytes moved per step",
        "intensity_flop_per_byte": "Intensity (FLOP/B)",
        "achieved_tflops_per_s": "Achieved TFLOP/s",
        "achieved_tb_per_s": "Achieved TB/s",
        "peak_tflops_per_s": "Peak TFLOP/s",
        "peak_tb_per_s": "Peak TB/s",
        "bound_time_ns": "Time at the roofline per step",
        "roofline_pct": "% of roofline bound (time at the bound / time)",
        "bound": "Bound",
        "headroom_ns": "Time above the bound per step",
        "input_shapes": "Input shapes",
        "family": "Family",
        "layer": "Layer",
    }


def step_count(run: Run) -> tuple[int, float]:
    """(the steps a per-step figure divides by, mean step time in ns): the run's steps
    (``events.facts.step_count``), timed as ``step_spans`` stretches them, or the whole profiled
    span as one step when none were recorded."""
    steps = facts.step_count(run)
    if steps:
        spans = step_spans(run)
        return steps, float((spans["end_ns"] - spans["start_ns"]).mean())
    span = run.meta.get("span_ns") or [0, 0]
    return 1, float(span[1] - span[0])


def _in_steps(run: Run, costs: RunCosts) -> np.ndarray:
    """Which counted ops fall in a step (all of them when no steps were recorded)."""
    if not len(step_spans(run)["step"]):
        return np.ones(len(costs.rows), dtype=bool)
    return costs.step >= 0


def op_table(run: Run, peaks: Peaks | None) -> pd.DataFrame:
    """One row per counted op call in the steps, with its raw figures (ns, FLOP, B): ``row``,
    ``name``, ``precision``, ``kind``, ``time_ns``, ``flops``, ``bytes``, ``peak_tflops_per_s``,
    ``bound_time_ns`` (NaN without peaks), ``gemm_m``/``gemm_n``/``gemm_k``, ``step``,
    ``input_shapes``, ``assumed``; ops that took no time left out. Made once per peaks while
    the run's views are shared (the roofline and mfu views and the roofline advice read it);
    each caller gets its own copy."""
    table = shared(run, ("op_table", repr(peaks)), lambda: _op_table(run, peaks))
    return private_copy(table)


def _op_table(run: Run, peaks: Peaks | None) -> pd.DataFrame:
    import pandas as pd

    costs = run_costs(run)
    keep = _in_steps(run, costs) & (costs.time_ns > 0)
    ev = run.events
    rows = costs.rows[keep]
    precision = costs.math_precision()[keep]
    flops, nbytes = costs.flops[keep], costs.bytes[keep]
    if peaks is not None:
        kinds, at = np.unique(precision.astype(str), return_inverse=True)
        ceiling = np.array([peaks.ceiling(p or "fp32") for p in kinds.tolist()])[at]
        bw = peaks.bandwidth_tbps if peaks.bandwidth_tbps > 0 else math.nan
        compute_ns = flops / (ceiling * 1e12) * 1e9
        memory_ns = nbytes / (bw * 1e12) * 1e9
        bound_ns = np.fmax(compute_ns, memory_ns)
        side = np.where(compute_ns >= memory_ns, "compute", "memory")
    else:
        ceiling = np.full(len(rows), np.nan)
        bound_ns = np.full(len(rows), np.nan)
        side = np.full(len(rows), "", dtype=object)
    return pd.DataFrame(
        {
            "row": rows,
            "name": category_values(ev["name"], rows),
            "precision": precision,
            "kind": costs.kind[keep],
            "time_ns": costs.time_ns[keep],
            "flops": flops,
            "bytes": nbytes,
            "peak_tflops_per_s": ceiling,
            "bound_time_ns": bound_ns,
            "side": side,
            "gemm_m": costs.gemm[keep, 0],
            "gemm_n": costs.gemm[keep, 1],
            "gemm_k": costs.gemm[keep, 2],
            "step": costs.step[keep],
            "input_shapes": category_values(ev["input_shapes"], rows),
            "assumed": costs.assumed[keep],
            "kernel": costs.kernel[keep],
        }
    )


def _group_labels(run: Run, table: pd.DataFrame, by: str) -> tuple[list[str], dict[str, Any]]:
    """The key columns of grouping ``by`` and their values per op row."""
    if by == "op":
        return ["name", "precision"], {}
    if by == "shape":
        return ["name", "input_shapes", "precision"], {}
    from perfkit_core.views.anatomy.attribution import unit_labels
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    unit_of = st.unit_of[table["row"].to_numpy()]
    found = unit_labels(run)
    if by == "family":
        ops = np.where(unit_of >= 0, found.op[np.maximum(unit_of, 0)], "").astype(str)
        kinds, at = np.unique(ops, return_inverse=True)
        families = np.array(
            [found.resolver.family(o) if o else "other" for o in kinds.tolist()], dtype=object
        )
        return ["name"], {"name": families[at] if len(ops) else ops.astype(object)}
    layer_row = np.where(unit_of >= 0, found.layer_row[np.maximum(unit_of, 0)], -1)
    rows, at = np.unique(layer_row, return_inverse=True)
    names = np.array(
        [
            st.layer_label.get(int(r), "(no layer)") if r >= 0 else "(no layer)"
            for r in rows.tolist()
        ],
        dtype=object,
    )
    return ["name"], {"name": names[at] if len(layer_row) else np.array([], dtype=object)}


def roofline_view(
    run: Run,
    *,
    by: str = "op",
    peak_tflops: float | None = None,
    peak_bandwidth: float | None = None,
    top: int | None = None,
) -> pd.DataFrame:
    """How close each op runs to the roofline (see the module docstring), per step: one row
    per op name and precision (``by="op"``), per op, input shapes and precision
    (``"shape"``), per op family (``"family"``) or per layer span (``"layer"``), the largest
    time first. ``peak_tflops`` (TFLOP/s, for every precision) and ``peak_bandwidth`` (TB/s)
    replace the device's peaks. ``frame.attrs["labels"]`` holds the header labels, the note
    says where the peaks come from and how much time the model does not cover."""

    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {', '.join(GROUPINGS)}, not {by!r}")
    peaks = run_peaks(run, peak_tflops=peak_tflops, peak_bandwidth=peak_bandwidth)
    table = op_table(run, peaks)
    steps, step_ns = step_count(run)
    costs = run_costs(run)
    keys, replaced = _group_labels(run, table, by)
    for key, values in replaced.items():
        table[key] = values
    if by in ("family", "layer"):
        table["precision"] = ""
    table["calls"] = 1
    table["latency"] = False
    if peaks is not None:
        table["latency"] = table["bound_time_ns"] < LATENCY_BOUND_NS
    table["side"] = np.where(table["latency"], "latency", table["side"])
    grouped = table.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(
        calls=("calls", "sum"),
        time_ns=("time_ns", "sum"),
        flops=("flops", "sum"),
        bytes=("bytes", lambda v: v.sum() if v.notna().all() else np.nan),
        bound_time_ns=("bound_time_ns", lambda v: v.sum() if v.notna().all() else np.nan),
        peak_tflops_per_s=("peak_tflops_per_s", "max"),
    ).reset_index()
    bound = (
        table.groupby([*keys, "side"], sort=False, dropna=False)["time_ns"]
        .sum()
        .reset_index()
        .sort_values("time_ns", ascending=False, kind="stable")
        .drop_duplicates(keys)
    )
    out = out.merge(bound[[*keys, "side"]], on=keys, how="left").rename(columns={"side": "bound"})
    frame = _finish(out, steps, step_ns, peaks, by)
    frame.attrs["labels"] = labels(costs.on_device)
    frame.attrs["note"] = _note(run, costs, peaks, steps, table)
    if top is not None:
        frame = frame.head(top).reset_index(drop=True)
    return frame


def _finish(
    out: pd.DataFrame, steps: int, step_ns: float, peaks: Peaks | None, by: str
) -> pd.DataFrame:
    """Per-step figures and the derived columns, in ``COLUMNS`` order, the largest time first."""
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = out["time_ns"].to_numpy() / 1e9
        flops, nbytes = out["flops"].to_numpy(), out["bytes"].to_numpy()
        out["calls_per_step"] = out["calls"] / steps
        out["time_ns"] = out["time_ns"] / steps
        out["step_pct"] = 100.0 * out["time_ns"] / step_ns if step_ns > 0 else math.nan
        out["gflops"] = flops / steps / 1e9
        out["moved_bytes"] = nbytes / steps
        out["intensity_flop_per_byte"] = np.where(
            nbytes > 0, flops / np.where(nbytes > 0, nbytes, 1), math.nan
        )
        out["achieved_tflops_per_s"] = np.where(
            seconds > 0, flops / np.where(seconds > 0, seconds, 1) / 1e12, math.nan
        )
        out["achieved_tb_per_s"] = np.where(
            seconds > 0, nbytes / np.where(seconds > 0, seconds, 1) / 1e12, math.nan
        )
        out["peak_tb_per_s"] = peaks.bandwidth_tbps if peaks is not None else math.nan
        if by in ("family", "layer"):
            out["peak_tflops_per_s"] = math.nan  # a group mixes precisions
        out["bound_time_ns"] = out["bound_time_ns"] / steps
        out["roofline_pct"] = (
            100.0 * out["bound_time_ns"] / out["time_ns"].where(out["time_ns"] > 0)
        )
        out["headroom_ns"] = (out["time_ns"] - out["bound_time_ns"]).clip(lower=0)
    out["bound"] = out["bound"].fillna("")
    columns = list(COLUMNS)
    if by == "shape":
        columns.insert(1, "input_shapes")
    if by in ("family", "layer"):
        columns.remove("precision")
    out = out.sort_values(["time_ns", "name"], ascending=[False, True], kind="stable")
    return out[columns].reset_index(drop=True)


def _note(run: Run, costs: RunCosts, peaks: Peaks | None, steps: int, table: pd.DataFrame) -> str:
    """What a reader must know: the peaks' source, the time the model does not cover, what the
    formulas assumed, and why FLOPs are missing (Paddle's CPU build records no shapes)."""
    notes = []
    if peaks is None:
        if costs.on_device:
            notes.append(
                "no peaks known for this device: give --peak-tflops and --peak-bandwidth to place its ops against them"
            )
        else:
            notes.append(
                "no peaks for this CPU: run `perfkit peaks` on the machine that recorded the run "
                "(or give --peak-tflops and --peak-bandwidth)"
            )
    else:
        source = peaks.source
        if source.startswith("https://"):
            source = "its datasheet (`perfkit peaks --devices` gives the address)"
        notes.append(f"peaks of {peaks.device}: {source}")
        notes.extend(peaks.notes)
    modelled = float(table["time_ns"].sum())
    missing = sum(costs.unmodelled_ns.values())
    if modelled + missing > 0 and missing > 0:
        top = ", ".join(list(costs.unmodelled_ns)[:3])
        share = 100.0 * missing / (modelled + missing)
        notes.append(f"{share:.1f}% of op time is not modelled (largest: {top})")
    if peaks is not None and (table["bound_time_ns"] > table["time_ns"] * 1.001).any():
        notes.append(
            "an op above 100% of its bound moved less data than its recorded shapes say (an "
            "input that is a broadcast view, or data served from cache)"
        )
    assumed = table[table["assumed"] != ""]
    if len(assumed):
        reasons = sorted(set(assumed["assumed"]))
        notes.append(
            f"{len(assumed)} op calls' costs assumed what was not recorded ({'; '.join(reasons[:2])})"
        )
    if not len(table) and not run.events["input_shapes"].astype(str).str.len().gt(0).any():
        if run.framework == "paddle":
            notes.append(
                "no input shapes were recorded: Paddle's CPU build records none, its GPU build does"
            )
        else:
            notes.append("no input shapes were recorded: profile with record_shapes=True")
    if steps == 1 and not len(step_spans(run)["step"]):
        notes.append(NO_STEPS_NOTE)
    return "; ".join(notes)


# ------------------------------------------------------------------ model FLOPs utilisation


def model_flops_per_step(
    run: Run, *, peak_tflops: float | None = None, peak_bandwidth: float | None = None
) -> pd.DataFrame:
    """Each step's model FLOPs and MFU: one row per step (``step`` number, ``dur_ns`` its time as
    ``step_spans`` stretches it, ``model_flops`` the FLOPs of its matrix ops: GEMMs,
    convolutions, attention and recurrent layers, forward and backward; ``achieved_tflops_per_s``
    those FLOPs over the step's time; ``peak_tflops_per_s`` the peak of the precision that
    carried most of them; ``mfu_pct`` the achieved rate as a share of that peak). The frame's
    ``attrs["precision"]`` names that precision. Without steps, the profiled span is one step
    (number -1)."""
    import pandas as pd

    peaks = run_peaks(run, peak_tflops=peak_tflops, peak_bandwidth=peak_bandwidth)
    table = op_table(run, peaks)
    model = table[np.isin(table["kind"].to_numpy(), MODEL_KINDS)]
    spans = step_spans(run)
    if len(spans["step"]):
        numbers = spans["step"]
        durations = (spans["end_ns"] - spans["start_ns"]).astype(np.float64)
    else:
        span = run.meta.get("span_ns") or [0, 0]
        numbers, durations = np.array([-1]), np.array([float(span[1] - span[0])])
        model = model.assign(step=-1)
    per_step = model.groupby("step")["flops"].sum()
    flops = np.array([float(per_step.get(int(s), 0.0)) for s in numbers.tolist()])
    precision = ""
    peak = math.nan
    if len(model):
        by_precision = model.groupby("precision")["flops"].sum()
        precision = str(by_precision.idxmax())
        if peaks is not None:
            peak = peaks.ceiling(precision or "fp32")
    with np.errstate(divide="ignore", invalid="ignore"):
        achieved = np.where(durations > 0, flops / (durations / 1e9) / 1e12, math.nan)
    frame = pd.DataFrame(
        {
            "step": numbers,
            "dur_ns": durations,
            "model_flops": flops,
            "achieved_tflops_per_s": achieved,
            "peak_tflops_per_s": peak,
            "mfu_pct": 100.0 * achieved / peak if peak == peak else math.nan,
        }
    )
    frame.attrs["precision"] = precision
    frame.attrs["peaks"] = peaks
    return frame


def mfu_view(
    run: Run, *, peak_tflops: float | None = None, peak_bandwidth: float | None = None
) -> pd.DataFrame:
    """Model FLOPs utilisation per step (``model_flops_per_step``), one row per step (``step
    N``) and a ``mean`` row (the steps' FLOPs over their time); model FLOPs in GFLOP."""
    import pandas as pd

    steps = model_flops_per_step(run, peak_tflops=peak_tflops, peak_bandwidth=peak_bandwidth)
    rows = [
        {
            "name": f"step {int(s)}" if s >= 0 else "profiled span",
            "dur_ns": d,
            "model_gflops": f / 1e9,
            "achieved_tflops_per_s": a,
            "peak_tflops_per_s": p,
            "mfu_pct": m,
        }
        for s, d, f, a, p, m in steps.itertuples(index=False, name=None)
    ]
    if len(steps) > 1:
        total_flops, total_ns = float(steps["model_flops"].sum()), float(steps["dur_ns"].sum())
        achieved = total_flops / (total_ns / 1e9) / 1e12 if total_ns > 0 else math.nan
        peak = float(steps["peak_tflops_per_s"].iloc[0])
        rows.append(
            {
                "name": "mean",
                "dur_ns": total_ns / len(steps),
                "model_gflops": total_flops / len(steps) / 1e9,
                "achieved_tflops_per_s": achieved,
                "peak_tflops_per_s": peak,
                "mfu_pct": 100.0 * achieved / peak if peak == peak else math.nan,
            }
        )
    frame = pd.DataFrame(rows)
    precision = steps.attrs.get("precision") or "fp32"
    frame.attrs["labels"] = {
        "name": "Step",
        "dur_ns": "Step time",
        "model_gflops": "Model GFLOP",
        "achieved_tflops_per_s": "Achieved TFLOP/s",
        "peak_tflops_per_s": f"Peak TFLOP/s ({precision})",
        "mfu_pct": f"MFU (% of the {precision} peak)",
    }
    peaks = steps.attrs.get("peaks")
    frame.attrs["note"] = (
        "model FLOPs: the FLOPs of GEMMs, convolutions, attention and recurrent layers, forward "
        f"and backward; MFU against the {precision} peak of {peaks.device}"
        if peaks is not None
        else "model FLOPs: the FLOPs of GEMMs, convolutions, attention and recurrent layers; "
        "no peaks known, so no MFU (give --peak-tflops)"
    )
    return frame
