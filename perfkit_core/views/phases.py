"""Paddle's Model Summary, as ``prof.summary()`` prints it: the ``model_spans`` view.

Each phase row sums the outermost spans of one kind (Paddle's ``Dataloader``, ``Forward``,
``Backward``, ``Optimization``; torch's data-loading and optimizer spans and autograd nodes), so
its ``calls`` count spans (one per autograd node in torch) and ``others`` is the step time no
span covers. This is the peer's definition, kept for parity with Paddle; the report's ``model``
view (``perfkit_core.views.anatomy.step_time``) splits every step into phases that add up to it, the
one definition the headline, the advice and the comparison use.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import (
    step_window,
    union_length,
)
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


# ---------------------------------------------------------------------------------------------
# Model view: where each step's time goes, by training phase

#: Rows of the model view and the event kind behind each phase row.
MODEL_PHASES: tuple[tuple[str, str], ...] = (
    ("dataloader", "dataloader"),
    ("forward", "forward"),
    ("backward", "backward"),
    ("optimization", "optimizer"),
)
GPU_KINDS = ("kernel", "communication")
_BACKWARD_OP_RE = re.compile(r"Backward\d*$")


def _kernel_time_per_step(events: pd.DataFrame, step_rows: np.ndarray) -> np.ndarray:
    """Kernel time (ns) of the device work assigned to each step span in ``step_rows``."""
    kernels = (events["stream"].to_numpy() >= 0) & kind_is(events, *GPU_KINDS)
    step_of = events["step"].to_numpy()
    rank = events["rank"].to_numpy()
    dur = events["dur_ns"].to_numpy()
    out = np.zeros(len(step_rows))
    for i, s in enumerate(step_rows.tolist()):
        out[i] = dur[kernels & (step_of == step_of[s]) & (rank == rank[s])].sum()
    return out


def _derived_forward(
    events: pd.DataFrame,
    kind: np.ndarray,
    outermost_phase: np.ndarray,
    step_rows: np.ndarray,
    kernel_ns: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Forward time per step for frameworks that mark no forward spans (torch).

    Rule: the forward pass of a step is the step's top-level work (events directly inside the
    step span, other than data loading and optimizer spans) before the step's first backward
    event; its CPU time is the union of those events clipped at that first backward event (the
    whole step when it has none). Its GPU time is the kernel time launched from the step's
    thread in that window outside any phase span.
    """
    start = events["start_ns"].to_numpy()
    end = start + events["dur_ns"].to_numpy()
    parent = events["parent"].to_numpy()
    step_of = events["step"].to_numpy()
    rank = events["rank"].to_numpy()
    tid = events["tid"].to_numpy()
    in_phase = outermost_phase | links.has_ancestor(parent, outermost_phase)
    launcher = links.launcher_rows(events)
    is_kernel = kind_is(events, *GPU_KINDS) & (launcher >= 0)
    backward = outermost_phase & (kind == "backward")
    not_forward = np.isin(kind, ["dataloader", "optimizer", "backward", "memory"])
    cpu, gpu = [], []
    for s in step_rows.tolist():
        same = (step_of == step_of[s]) & (rank == rank[s])
        b = np.flatnonzero(backward & same)
        limit = int(start[b].min()) if len(b) else int(end[s])
        top = np.flatnonzero((parent == s) & ~not_forward & (start < limit))
        if len(top) == 0:
            continue
        cpu.append(union_length(start[top], np.minimum(end[top], limit)))
        k = np.flatnonzero(is_kernel & same)
        lk = launcher[k]
        mine = (start[lk] >= start[s]) & (start[lk] < limit) & (tid[lk] == tid[s]) & ~in_phase[lk]
        gpu.append(float(kernel_ns[k[mine]].sum()))
    return np.asarray(cpu, dtype=np.int64), np.asarray(gpu, dtype=np.float64)


def _phase_events(
    run: Run, rank: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The classification of ``model_spans_view``.

    Returns (host mask, kinds with old-style ``*Backward`` ops counted as backward, outermost
    phase events, step rows, whether forward must be derived). When steps were recorded, only
    phase events inside a step count: time outside every step is not shared out.
    """
    events = run.events
    host = events["stream"].to_numpy() < 0
    if rank is not None:
        host &= events["rank"].to_numpy() == rank
    kind = str_values(events["kind"]).copy()
    derived = not (host & (kind == "forward")).any()
    if derived and not (host & (kind == "backward")).any() and host.any():
        # Older torch traces record no autograd spans: their backward ops are named *Backward*.
        names = str_values(events["name"])
        backward_op = (
            host & (kind == "operator") & np.array([bool(_BACKWARD_OP_RE.search(n)) for n in names])
        )
        kind[backward_op] = "backward"
    is_phase = np.isin(kind, [k for _, k in MODEL_PHASES])
    outermost = is_phase & ~links.has_ancestor(events["parent"].to_numpy(), is_phase) & host
    step_rows = np.flatnonzero((kind == "step") & host)
    if len(step_rows):
        outermost &= events["step"].to_numpy() >= 0
    return host, kind, outermost, step_rows, derived


def model_spans_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Paddle's Model Summary: step time split into phase spans: rows ``step``, ``dataloader``, ``forward``, ``backward``,
    ``optimization``, ``others``.

    A phase row sums the outermost events of that phase's kind (an event inside another phase
    event is not counted again), as Paddle's Model Summary does. ``others`` is the step time no
    phase covers. CPU ratios are shares of the merged step time; GPU time is the kernel time
    launched within the events, and GPU ratios are shares of the steps' kernel time. GPU columns
    are NaN when no device events were recorded. When the run has no steps, the whole profiled
    span counts as one step and ``frame.attrs["note"]`` says so.
    """
    import pandas as pd

    events = run.events
    host, kind, outermost, step_rows, derived = _phase_events(run, rank)
    parent = events["parent"].to_numpy()
    start = events["start_ns"].to_numpy()
    dur = events["dur_ns"].to_numpy()
    _, gpu_total = links.device_time_by_launcher(run, GPU_KINDS)
    has_gpu = not np.isnan(gpu_total).all()
    note = None
    if len(step_rows):
        step_durs = dur[step_rows]
        # A step's GPU time is that of the kernels launched in it, from any thread.
        step_gpu = (
            _kernel_time_per_step(events, step_rows) if has_gpu else np.full(len(step_rows), np.nan)
        )
        step_total = union_length(start[step_rows], start[step_rows] + dur[step_rows])
    else:
        note = "no steps were recorded: the whole profiled span counts as one step"
        window, _ = step_window(run, rank)
        lo, hi = (int(window[0][0]), int(window[1][0])) if len(window[0]) else (0, 0)
        step_durs = np.array([hi - lo])
        roots = host & (parent < 0)
        step_gpu = np.array([np.nansum(gpu_total[roots]) if has_gpu else np.nan])
        step_total = hi - lo
    step_gpu_total = float(np.nansum(step_gpu)) if has_gpu else np.nan

    def row(name: str, cpu: np.ndarray, gpu: np.ndarray) -> dict[str, Any]:
        calls = len(cpu)
        total = int(cpu.sum())
        gpu_sum = float(np.nansum(gpu)) if has_gpu else np.nan
        return {
            "name": name,
            "calls": calls,
            "cpu_total_ns": total,
            "cpu_avg_ns": total / calls if calls else np.nan,
            "cpu_max_ns": float(cpu.max()) if calls else np.nan,
            "cpu_min_ns": float(cpu.min()) if calls else np.nan,
            "cpu_ratio_pct": 100.0 * total / step_total if step_total else np.nan,
            "gpu_total_ns": gpu_sum,
            "gpu_avg_ns": gpu_sum / calls if calls and has_gpu else np.nan,
            "gpu_max_ns": float(np.nanmax(gpu)) if calls and has_gpu else np.nan,
            "gpu_min_ns": float(np.nanmin(gpu)) if calls and has_gpu else np.nan,
            "gpu_ratio_pct": 100.0 * gpu_sum / step_gpu_total
            if has_gpu and step_gpu_total
            else np.nan,
        }

    rows = [row("step", step_durs, step_gpu)]
    phase_cpu = 0
    phase_gpu = 0.0
    for label, phase_kind in MODEL_PHASES:
        sel = np.flatnonzero(outermost & (kind == phase_kind))
        if phase_kind == "forward" and derived and len(step_rows):
            cpu_fwd, gpu_fwd = _derived_forward(
                events, kind, outermost, step_rows, dur.astype(np.float64)
            )
            r = row(label, cpu_fwd, gpu_fwd)
            note = "forward derived: the step's top-level work before its first backward event"
        else:
            r = row(label, dur[sel], gpu_total[sel])
        phase_cpu += r["cpu_total_ns"]
        phase_gpu += 0.0 if np.isnan(r["gpu_total_ns"]) else r["gpu_total_ns"]
        rows.append(r)
    others_cpu = step_total - phase_cpu
    others_gpu = step_gpu_total - phase_gpu if has_gpu else np.nan
    rows.append(
        {
            "name": "others",
            "calls": 0,
            "cpu_total_ns": int(others_cpu),
            "cpu_avg_ns": np.nan,
            "cpu_max_ns": np.nan,
            "cpu_min_ns": np.nan,
            "cpu_ratio_pct": 100.0 * others_cpu / step_total if step_total else np.nan,
            "gpu_total_ns": others_gpu,
            "gpu_avg_ns": np.nan,
            "gpu_max_ns": np.nan,
            "gpu_min_ns": np.nan,
            "gpu_ratio_pct": 100.0 * others_gpu / step_gpu_total
            if has_gpu and step_gpu_total
            else np.nan,
        }
    )
    frame = pd.DataFrame(rows)
    frame.loc[0, "cpu_total_ns"] = int(step_total)
    frame.loc[0, "cpu_ratio_pct"] = 100.0 if step_total else np.nan
    if note:
        frame.attrs["note"] = note
    frame.attrs["labels"] = {
        "cpu_ratio_pct": "CPU time (% of step)",
        "gpu_ratio_pct": "GPU time (% of the steps' kernel time)",
    }
    return frame
