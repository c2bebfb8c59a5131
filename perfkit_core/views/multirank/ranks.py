"""The ranks view: one row per rank of a job, the stragglers flagged and what makes them slow.

``rank_figures`` measures one rank (on its own table, where the data is: a Dask worker in a
job); ``ranks_frame`` puts the ranks side by side with the waits that ``align_calls`` measured
across them, and flags the stragglers.

In synchronous training every rank's step takes as long as the slowest rank's: the others wait
for it in the next collective. So a straggler is found by its *work*, the step time less the
time it waited in collectives for other ranks, not by its step time. The rule (documented in
``docs/views.md``): a rank is a straggler when its work per step exceeds the median
rank's by more than ``STRAGGLER_MAD_K`` times the scaled median absolute deviation of the
ranks' work (1.4826 x MAD, which estimates the standard deviation for normal noise) and by at
least ``STRAGGLER_MIN_PCT`` of the median step time. The median and MAD ignore a few outliers,
so one slow rank cannot hide itself by raising the bar, as it would with a mean and standard
deviation. It needs 3 ranks or more.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events.intervals import clip_to, intersect_length, length, step_window
from perfkit_core.events.schema import str_values
from perfkit_core.views.common import DEVICE_KINDS
from perfkit_core.views.multirank.distributed import work_masks

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Straggler: work per step above median + STRAGGLER_MAD_K x 1.4826 x MAD of the ranks' work ...
STRAGGLER_MAD_K = 3.0
#: ... and above the median by at least this share of the median step time.
STRAGGLER_MIN_PCT = 2.0
#: Scale that turns a median absolute deviation into an estimate of the standard deviation.
MAD_SCALE = 1.4826
#: A straggler's extra device time is "a slower device" when its kernel count per step is
#: within this share of the median rank's, else "uneven work".
SAME_WORK_PCT = 1.0
#: Event columns ``rank_figures`` reads (a saved job reads only these for this view).
FIGURE_EVENT_COLUMNS = (
    "rank",
    "kind",
    "name",
    "start_ns",
    "dur_ns",
    "stream",
    "step",
    "parent",
    "allocated_bytes",
    "device_type",
)

COLUMNS = [
    "name",
    "rank",
    "steps",
    "step_median_ns",
    "step_spread_ns",
    "work_ns",
    "compute_ns",
    "communication_ns",
    "exposed_communication_ns",
    "wait_ns",
    "data_ns",
    "gpu_busy_pct",
    "kernels",
    "peak_memory_bytes",
    "straggler",
    "slow_phase",
]


def rank_figures(run: Run) -> dict[str, Any]:
    """Figures of one rank (``run`` holds one rank), per step: the rank's total within its
    steps divided by its step count. Keys: ``rank``, ``steps``, ``step_mean_ns``,
    ``step_median_ns``, ``step_spread_ns`` (longest less shortest step), ``compute_ns``
    (merged device time of kernels, copies and sets; host operators when no device events
    were recorded), ``communication_ns`` (merged; host collectives such as gloo's count on a
    GPU rank too, see ``distributed.work_masks``), ``exposed_communication_ns`` (not
    overlapped with compute), ``data_ns`` (the model view's data phase), ``gpu_busy_pct`` (merged device time over the
    step time; NaN without device events), ``kernels`` (device kernels per step),
    ``peak_memory_bytes`` (highest allocated device memory; NaN when not recorded)."""
    ev = run.events
    rank = int(run.meta.get("rank", 0))
    kind = str_values(ev["kind"])
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    device = ev["stream"].to_numpy() >= 0
    window, has_steps = step_window(run)
    total = length(window)
    from perfkit_core.views.anatomy.step_time import phase_times, step_durations

    durations = step_durations(run)
    steps = max(len(durations), 1)
    has_device = bool(device.any())
    comm_mask, comp_mask, _side = work_masks(run, np.ones(len(ev), dtype=bool))
    comm = clip_to(start[comm_mask], end[comm_mask], window)
    comp = clip_to(start[comp_mask], end[comp_mask], window)
    comm_ns = length(comm)
    exposed = comm_ns - intersect_length(comm, comp)
    times = phase_times(run)
    busy_mask = device & np.isin(kind, list(DEVICE_KINDS))
    busy = length(clip_to(start[busy_mask], end[busy_mask], window))
    memory = (kind == "memory") & (str_values(ev["device_type"]) != "cpu")
    allocated = ev["allocated_bytes"].to_numpy()[memory]
    return {
        "rank": rank,
        "steps": len(durations) if has_steps else 1,
        "step_mean_ns": total / steps,
        "step_median_ns": float(np.median(durations)) if len(durations) else math.nan,
        "step_spread_ns": float(durations.max() - durations.min()) if len(durations) else 0.0,
        "compute_ns": length(comp) / steps,
        "communication_ns": comm_ns / steps,
        "exposed_communication_ns": exposed / steps,
        "data_ns": float(times["data_ns"].mean()) if len(times) else 0.0,
        "gpu_busy_pct": 100.0 * busy / total if has_device and total else math.nan,
        "kernels": float(((kind == "kernel") & device).sum()) / steps if has_device else math.nan,
        "peak_memory_bytes": float(np.nanmax(allocated))
        if len(allocated) and not np.isnan(allocated).all()
        else math.nan,
    }


def _mad_outliers(values: np.ndarray, floor: float) -> tuple[np.ndarray, float]:
    """(which values lie above median + k x scaled MAD and median + floor, the threshold)."""
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median))) * MAD_SCALE
    threshold = median + max(STRAGGLER_MAD_K * mad, floor)
    return values > threshold, threshold


def slow_phase(row: pd.Series, medians: pd.Series) -> tuple[str, dict[str, float]]:
    """What makes a straggler slow, from its figures against the median rank's: the phase with
    the largest excess per step. Returns (``data loading``, ``slower device``, ``uneven work``,
    ``communication`` or ``host``, the excess of each phase in ns per step). Extra device time
    with the median rank's kernel count (within ``SAME_WORK_PCT``) is a slower device, with
    more kernels uneven work; extra time no phase explains is host-side work."""
    transfer = row["communication_ns"] - _nan0(row["wait_ns"])
    median_transfer = medians["communication_ns"] - _nan0(medians["wait_ns"])
    excess = {
        "data loading": _nan0(row["data_ns"] - medians["data_ns"]),
        "device": _nan0(row["compute_ns"] - medians["compute_ns"]),
        "communication": _nan0(transfer - median_transfer),
    }
    extra_work = _nan0(row["work_ns"] - medians["work_ns"])
    phase, value = max(excess.items(), key=lambda kv: kv[1])
    if value <= 0.5 * extra_work:
        phase = "host"
    if phase == "device":
        kernels, median_kernels = row["kernels"], medians["kernels"]
        same = (
            not math.isnan(kernels)
            and median_kernels > 0
            and abs(kernels - median_kernels) <= SAME_WORK_PCT / 100.0 * median_kernels
        )
        phase = "slower device" if same else "uneven work"
    excess["host"] = extra_work - sum(max(v, 0.0) for v in excess.values())
    return phase, excess


def _nan0(value: float) -> float:
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else value


#: Header labels of the ranks view's columns: every time is per step.
RANKS_LABELS = {
    "step_median_ns": "Median step",
    "step_spread_ns": "Step spread (max - min)",
    "work_ns": "Work per step",
    "compute_ns": "Compute per step",
    "communication_ns": "Communication per step",
    "exposed_communication_ns": "Exposed communication per step",
    "wait_ns": "Waiting per step",
    "data_ns": "Data per step",
    "kernels": "Kernels per step",
}


def ranks_frame(figures: list[dict[str, Any]], waits: dict[int, float]) -> pd.DataFrame:
    """The ranks view from each rank's ``rank_figures`` and the collective wait each rank
    accrued over its steps (``waits``, ns; NaN or absent when not measured)."""
    import pandas as pd

    if not figures:
        frame = pd.DataFrame(columns=COLUMNS)
        frame.attrs["note"] = "no ranks"
        return frame
    f = pd.DataFrame(figures).sort_values("rank").reset_index(drop=True)
    steps = f["steps"].clip(lower=1).astype(np.float64)
    waited = np.array([waits.get(int(r), math.nan) for r in f["rank"]], dtype=np.float64)
    f["wait_ns"] = waited / steps.to_numpy()
    f["work_ns"] = f["step_mean_ns"] - f["wait_ns"].fillna(0.0)
    f["name"] = [f"rank {int(r)}" for r in f["rank"]]
    f["straggler"] = False
    f["slow_phase"] = ""
    notes = [
        "times per step (the rank's total over its steps / steps); work: step time less the "
        "time waiting in collectives for other ranks",
    ]
    if len(f) >= 3:
        median_step = float(f["step_median_ns"].median())
        flags, threshold = _mad_outliers(
            f["work_ns"].to_numpy(), STRAGGLER_MIN_PCT / 100.0 * median_step
        )
        f["straggler"] = flags
        medians = f.median(numeric_only=True)
        for i in np.flatnonzero(flags).tolist():
            f.loc[i, "slow_phase"] = slow_phase(f.loc[i], medians)[0]
        notes.append(
            f"straggler: work above {threshold / 1e6:.3f} ms per step (median + "
            f"{STRAGGLER_MAD_K:g} x 1.4826 x MAD of the ranks' work, and at least "
            f"{STRAGGLER_MIN_PCT:g}% of the median step above the median)"
        )
    else:
        notes.append("stragglers are flagged from 3 ranks up")
    if f["wait_ns"].isna().all():
        notes.append("no collective was lined up across ranks: waits not measured")
    frame = pd.DataFrame(f[COLUMNS])
    frame.attrs["note"] = "; ".join(notes)
    frame.attrs["labels"] = RANKS_LABELS
    return frame


def ranks_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Per rank: step time (median and spread), work (step time less waiting for other
    ranks), compute, communication, exposed communication, collective wait and data loading
    per step, GPU busy share of the steps, kernels per step, peak device memory; stragglers
    flagged (``straggler``) with the phase that makes them slow (``slow_phase``). ``rank``
    keeps that rank's row (measured against every rank)."""
    import pandas as pd

    from perfkit_core.events.ranks import rank_run, run_ranks
    from perfkit_core.views.multirank.collectives import align_calls, collective_calls

    singles = [rank_run(run, r) for r in run_ranks(run)]
    calls = align_calls(pd.concat([collective_calls(one) for one in singles], ignore_index=True))
    frame = ranks_frame([rank_figures(one) for one in singles], waits_by_rank(calls))
    if rank is None:
        return frame
    note = frame.attrs.get("note")
    frame = frame[frame["rank"] == rank].reset_index(drop=True)
    frame.attrs["note"] = note
    return frame


def waits_by_rank(aligned: pd.DataFrame) -> dict[int, float]:
    """Total collective wait (ns) of each rank in lined-up calls (NaN where none measured)."""
    if aligned.empty:
        return {}
    sums = aligned.groupby("rank")["wait_ns"].sum(min_count=1)
    return {int(r): float(v) for r, v in sums.items()}
