"""Where each step's time goes, by training phase: one definition for the report's headline,
the ``model`` and ``phases`` views, the ``steps`` view, the advice and the comparison.

A step is the recorded step span stretched over the device work it launched
(``events.intervals.step_spans``, the TensorBoard profiler's step; on a run without device work,
the recorded span). Its wall time is cut into slices (``views.attribution.step_slices``), each
in exactly one phase, so the phases of a step add up to the step:

- ``data``: waiting for the next batch (data-loading spans on the training thread);
- ``forward``: the step before its first backward event, the loss included;
- ``backward``: from the first to the last backward event, time between autograd nodes included;
- ``optimizer``: optimizer spans (``step`` and ``zero_grad``) and optimizer ops;
- ``other``: the rest of the step after the backward window, and the time the device still ran
  work the step launched after the host step ended.

The GPU time of a phase is the device time of the kernels launched while the step was in that
phase: the kernel's launching op (its outermost op) starts inside a slice of that phase.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.intervals import step_spans, step_window
from perfkit_core.views.anatomy.attribution import PHASES, step_slices

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Device event kinds whose time counts as a phase's GPU time.
GPU_KINDS = ("kernel", "communication")
#: Columns of ``phase_times`` holding each phase's time per step (ns), in ``PHASES`` order.
PHASE_COLUMNS = tuple(f"{p}_ns" for p in PHASES)
NO_STEPS_NOTE = (
    "no steps were recorded: the whole profiled span counts as one step and is not split into "
    "phases (call prof.step() once per training step)"
)


def step_durations(run: Run, rank: int | None = None) -> np.ndarray:
    """Each step's duration in ns, in (rank, start) order: the step stretched over the device
    work it launched. A run without steps: one entry, the profiled span (``step_window``)."""
    spans = step_spans(run, rank)
    if len(spans["step"]):
        return (spans["end_ns"] - spans["start_ns"]).astype(np.float64)
    window, _ = step_window(run, rank)
    return np.array([float((window[1] - window[0]).sum())])


def _slices(run: Run, rank: int | None) -> pd.DataFrame:
    slices = step_slices(run)
    if rank is not None and len(slices):
        slices = slices[slices["rank"].to_numpy() == rank]
    return slices


def launched_kernels(run: Run) -> pd.DataFrame:
    """The kernels (device rows of ``GPU_KINDS``) launched inside a step, one row each:
    ``row`` (the kernel's row), ``unit`` (its launching op: the outermost op around the launch
    call), ``rank``, ``step``, ``phase`` and ``direction`` (of the slice of ``step_slices``
    holding the launching op's start), ``slice_owner`` (that slice's owner) and ``ns`` (the
    kernel's duration). Cached on the run."""
    import pandas as pd

    cached = run.cache.get("launched_kernels")
    if cached is not None:
        return cached
    from perfkit_core.views.anatomy.structure import structure

    ev = run.events
    slices = step_slices(run)
    device = (ev["stream"].to_numpy() >= 0) & links.kind_is(ev, *GPU_KINDS)
    # What issued each kernel: its launch call, else (no launch recorded) the host event its
    # External id names, when that event started first (as ``links.device_time_by_launcher``).
    source = links.run_launchers(run).copy()
    owner = links.external_owner_rows(ev)
    start = ev["start_ns"].to_numpy()
    unlaunched = np.flatnonzero(device & (source < 0) & (owner >= 0))
    ok = start[owner[unlaunched]] <= start[unlaunched]
    source[unlaunched[ok]] = owner[unlaunched[ok]]
    kernels = np.flatnonzero(device & (source >= 0))
    columns = ["row", "unit", "rank", "step", "phase", "direction", "slice_owner", "ns"]
    if len(slices) == 0 or len(kernels) == 0:
        found = pd.DataFrame({c: [] for c in columns})
        run.cache.put("launched_kernels", found)
        return found
    st = structure(run)
    # A launch call made on another thread hangs from the op that issued it (by External id).
    issuer = links.launch_parents(run)
    lrow = source[kernels]
    moved = (issuer[lrow] >= 0) & (issuer[lrow] != st.parent[lrow])
    lrow = np.where(moved, issuer[lrow], lrow)
    unit = np.where(st.unit_of[lrow] >= 0, st.unit_of[lrow], lrow)
    t = st.start[unit]
    k_rank = ev["rank"].to_numpy()[kernels].astype(np.int64)
    s_rank = slices["rank"].to_numpy().astype(np.int64)
    s_start = slices["start_ns"].to_numpy().astype(np.int64)
    s_end = s_start + slices["ns"].to_numpy().astype(np.int64)
    hit = np.full(len(kernels), -1, dtype=np.int64)
    for r in np.unique(k_rank).tolist():
        mine = np.flatnonzero(s_rank == r)
        if len(mine) == 0:
            continue
        order = mine[np.argsort(s_start[mine], kind="stable")]
        ks = np.flatnonzero(k_rank == r)
        pos = np.searchsorted(s_start[order], t[ks], side="right") - 1
        ok = pos >= 0
        where = order[np.maximum(pos, 0)]
        ok &= t[ks] < s_end[where]
        hit[ks[ok]] = where[ok]
    inside = hit >= 0
    rows = hit[inside]
    found = pd.DataFrame(
        {
            "row": kernels[inside],
            "unit": unit[inside],
            "rank": s_rank[rows],
            "step": slices["step"].to_numpy()[rows].astype(np.int64),
            "phase": np.asarray(slices["phase"].astype(str).to_numpy())[rows],
            "direction": np.asarray(slices["direction"].astype(str).to_numpy())[rows],
            "slice_owner": slices["owner"].to_numpy()[rows].astype(np.int64),
            "ns": ev["dur_ns"].to_numpy()[kernels[inside]].astype(np.float64),
        }
    )
    run.cache.put("launched_kernels", found)
    return found


def phase_times(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Per step: ``rank``, ``step``, ``step_ns`` (its duration), one ``<phase>_ns`` column per
    phase (``PHASE_COLUMNS``; they add up to ``step_ns``) and, on runs with device work,
    ``gpu_<phase>_ns`` (kernel time launched in the phase) and ``gpu_step_ns`` (their sum).
    Rows in (rank, start) order; empty without steps."""
    import pandas as pd

    spans = step_spans(run, rank)
    frame = pd.DataFrame(
        {
            "rank": spans["rank"].astype(np.int64),
            "step": spans["step"].astype(np.int64),
            "step_ns": (spans["end_ns"] - spans["start_ns"]).astype(np.float64),
        }
    )
    if frame.empty:
        return frame.assign(**{c: np.empty(0) for c in PHASE_COLUMNS})
    index = pd.MultiIndex.from_frame(frame[["rank", "step"]])
    slices = _slices(run, rank)
    sums = (
        slices.groupby(["rank", "step", "phase"], observed=True)["ns"].sum()
        if len(slices)
        else pd.Series(dtype=float)
    )
    for phase, column in zip(PHASES, PHASE_COLUMNS, strict=True):
        part = sums.xs(phase, level="phase") if phase in sums.index.get_level_values(-1) else None
        frame[column] = (
            part.reindex(index).fillna(0.0).to_numpy() if part is not None else np.zeros(len(frame))
        )
    if _has_gpu(run, rank):
        kernels = launched_kernels(run)
        if rank is not None:
            kernels = kernels[kernels["rank"].to_numpy() == rank]
        gsums = kernels.groupby(["rank", "step", "phase"])["ns"].sum()
        total = np.zeros(len(frame))
        for phase in PHASES:
            if phase in gsums.index.get_level_values(-1):
                values = gsums.xs(phase, level="phase").reindex(index).fillna(0.0).to_numpy()
            else:
                values = np.zeros(len(frame))
            frame[f"gpu_{phase}_ns"] = values
            total += values
        frame["gpu_step_ns"] = total
    return frame


def _has_gpu(run: Run, rank: int | None) -> bool:
    ev = run.events
    device = ev["stream"].to_numpy() >= 0
    if rank is not None:
        device &= ev["rank"].to_numpy() == rank
    return bool(device.any())


#: Header labels of the model view's columns (each percentage names its denominator).
MODEL_LABELS = {
    "steps": "Steps",
    "per_step_ns": "Time per step",
    "step_pct": "% of step",
    "min_per_step_ns": "Min per step",
    "max_per_step_ns": "Max per step",
    "gpu_per_step_ns": "GPU time per step",
    "gpu_share_pct": "% of the steps' GPU time",
}


def model_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Step time by training phase, per step: rows ``step`` then the phases (``PHASES``: data,
    forward, backward, optimizer, other), which add up to the step.

    Columns: ``steps`` (steps in which the phase took time; for ``step`` the step count),
    ``per_step_ns`` (mean time per step over all steps), ``step_pct`` (of the mean step),
    ``min_per_step_ns`` / ``max_per_step_ns`` (the smallest and largest time one step spent in
    it) and, on runs with device work, ``gpu_per_step_ns`` (kernel time launched in the phase,
    per step) and ``gpu_share_pct`` (of the steps' kernel time). Without steps: only the
    ``step`` row (the profiled span) and a note."""
    import pandas as pd

    times = phase_times(run, rank=rank)
    has_gpu = "gpu_step_ns" in times.columns
    columns = ["name", "steps", "per_step_ns", "step_pct", "min_per_step_ns", "max_per_step_ns"]
    if has_gpu:
        columns += ["gpu_per_step_ns", "gpu_share_pct"]
    if times.empty:
        span = float(step_durations(run, rank)[0])
        frame = pd.DataFrame(
            [
                {
                    "name": "step",
                    "steps": 1,
                    "per_step_ns": span,
                    "step_pct": 100.0 if span else math.nan,
                    "min_per_step_ns": span,
                    "max_per_step_ns": span,
                }
            ],
            columns=columns,
        )
        frame.attrs["note"] = NO_STEPS_NOTE
        frame.attrs["labels"] = dict(MODEL_LABELS)
        return frame
    n = len(times)
    mean_step = float(times["step_ns"].mean())
    gpu_step = float(times["gpu_step_ns"].mean()) if has_gpu else math.nan
    rows: list[dict[str, Any]] = []
    for name, column in (("step", "step_ns"), *zip(PHASES, PHASE_COLUMNS, strict=True)):
        values = times[column].to_numpy(dtype=np.float64)
        row: dict[str, Any] = {
            "name": name,
            "steps": n if name == "step" else int((values > 0).sum()),
            "per_step_ns": float(values.mean()),
            "step_pct": 100.0 * float(values.mean()) / mean_step if mean_step else math.nan,
            "min_per_step_ns": float(values.min()),
            "max_per_step_ns": float(values.max()),
        }
        if has_gpu:
            gcol = "gpu_step_ns" if name == "step" else f"gpu_{name}_ns"
            gpu = float(times[gcol].mean())
            row["gpu_per_step_ns"] = gpu
            row["gpu_share_pct"] = 100.0 * gpu / gpu_step if gpu_step else math.nan
        rows.append(row)
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["labels"] = dict(MODEL_LABELS)
    return frame


#: Header labels of the phases view's columns.
PHASES_LABELS = {"step_ns": "Step", **{c: c[: -len("_ns")].capitalize() for c in PHASE_COLUMNS}}


def phases_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Per step, the time of each phase (the model view's rows, step by step): columns
    ``name`` (``step N``), ``step``, ``step_ns`` (the step's duration) and ``data_ns``,
    ``forward_ns``, ``backward_ns``, ``optimizer_ns``, ``other_ns``, which add up to it."""
    import pandas as pd

    times = phase_times(run, rank=rank)
    columns = ["name", "step", "step_ns", *PHASE_COLUMNS]
    if times.empty:
        frame = pd.DataFrame(columns=columns)
        frame.attrs["note"] = "no steps were recorded"
        return frame
    frame = times[["step", "step_ns", *PHASE_COLUMNS]].copy()
    frame.insert(0, "name", [f"step {int(s)}" for s in frame["step"]])
    frame = frame.reset_index(drop=True)
    frame.attrs["labels"] = dict(PHASES_LABELS)
    return frame
