"""Cross-rank rules: stragglers, load imbalance and exposed communication per rank.

They read the ``ranks`` view of a job (one row per rank, figures per step; see
``perfkit_core.views.multirank.ranks`` for the straggler rule) and run once per job of several ranks.
Savings are in ns over the profiled steps of one rank, like every other rule's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.advice.engine import Finding, JobContext, cross_rank

if TYPE_CHECKING:
    import pandas as pd

#: load-imbalance: ranks wait in collectives for each other at least this share of the step
#: (mean over ranks), with no single straggler to blame.
LOAD_IMBALANCE_MIN_PCT = 5.0
#: exposed-communication: communication not overlapped with computation, waiting for other
#: ranks left out, takes at least this share of the median rank's step.
EXPOSED_COMMUNICATION_MIN_PCT = 5.0


def _ranks(ctx: JobContext) -> pd.DataFrame | None:
    frame = ctx.job.summary("ranks")
    if frame is None or frame.empty or len(frame) < 2:
        return None
    return frame


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def _cause_text(phase: str, row: Any, medians: Any, excess: dict[str, float]) -> str:
    """What makes a straggler slow, in words with its numbers."""
    if phase == "data loading":
        return f"its data loading takes {_ms(excess['data loading'])} longer per step"
    if phase == "slower device":
        return (
            f"its device is slower: the same {row['kernels']:.0f} kernels per step take "
            f"{_ms(excess['device'])} longer"
        )
    if phase == "uneven work":
        return (
            f"it gets more work: {row['kernels']:.0f} kernels per step against "
            f"{medians['kernels']:.0f} on the median rank, {_ms(excess['device'])} more device time"
        )
    if phase == "communication":
        return f"its transfers take {_ms(excess['communication'])} longer per step"
    return f"host-side work outside data loading takes {_ms(max(excess['host'], 0.0))} longer"


@cross_rank()
def rule_straggler(ctx: JobContext) -> list[Finding] | None:
    """A straggler rank (flagged by the ``ranks`` view: its work per step above the median by
    more than 3 scaled MADs and 2% of the step), naming the phase that makes it slow.

    Saving (per step): the straggler's extra work over the median rank's, at most what the
    other ranks measurably wait (median over them) when waits were measured.
    """
    from perfkit_core.views.multirank.ranks import slow_phase

    ranks = _ranks(ctx)
    if ranks is None or not ranks["straggler"].any():
        return None
    medians = ranks.median(numeric_only=True)
    findings = []
    for _, row in ranks[ranks["straggler"]].iterrows():
        phase, excess = slow_phase(row, medians)
        extra = float(row["work_ns"] - medians["work_ns"])
        others = ranks[ranks["rank"] != row["rank"]]["wait_ns"]
        waited = float(others.median()) if others.notna().any() else math.nan
        per_step = min(extra, waited) if not math.isnan(waited) else extra
        step = float(row["step_median_ns"])
        share = 100.0 * extra / step if step else math.nan
        findings.append(
            Finding(
                id=f"straggler:{int(row['rank'])}",
                title=(
                    f"Rank {int(row['rank'])} is a straggler ({phase}): "
                    f"{_cause_text(phase, row, medians, excess)}; it works {_ms(extra)} "
                    f"({share:.1f}% of a step) more per step than the median rank"
                ),
                severity="",
                saving_ns=max(per_step, 0.0),
                acts_on="device",
                evidence={
                    "rank": int(row["rank"]),
                    "cause": phase,
                    "work_per_step_ns": float(row["work_ns"]),
                    "median_work_per_step_ns": float(medians["work_ns"]),
                    **{
                        f"excess_{k.replace(' ', '_')}_per_step_ns": float(v)
                        for k, v in excess.items()
                    },
                    "others_wait_per_step_ns": waited,
                    "kernels_per_step": float(row["kernels"]),
                    "median_kernels_per_step": float(medians["kernels"]),
                },
            )
        )
    return findings


@cross_rank()
def rule_load_imbalance(ctx: JobContext) -> Finding | None:
    """Ranks wait for each other in collectives at least LOAD_IMBALANCE_MIN_PCT of the step
    (mean over ranks) and no single straggler explains it: the work is spread unevenly.

    Saving (per step): the mean wait per rank.
    """
    ranks = _ranks(ctx)
    if ranks is None or ranks["straggler"].any() or ranks["wait_ns"].isna().all():
        return None
    wait = float(ranks["wait_ns"].mean())
    step = float(ranks["step_median_ns"].median())
    share = 100.0 * wait / step if step else 0.0
    if share < LOAD_IMBALANCE_MIN_PCT:
        return None
    busiest = ranks.loc[ranks["work_ns"].idxmax()]
    median_work = float(ranks["work_ns"].median())
    more = 100.0 * (float(busiest["work_ns"]) - median_work) / median_work if median_work else 0.0
    return Finding(
        id="load-imbalance",
        title=(
            f"Ranks wait {share:.1f}% of each step for each other in collectives (mean over "
            f"{len(ranks)} ranks); the busiest, rank {int(busiest['rank'])}, works {more:.1f}% "
            "more than the median rank"
        ),
        severity="",
        saving_ns=wait,
        acts_on="device",
        evidence={
            "wait_per_step_ns": wait,
            "wait_pct": share,
            "work_by_rank": [
                {"rank": int(r), "work_per_step_ns": float(w)}
                for r, w in sorted(
                    zip(ranks["rank"], ranks["work_ns"], strict=True), key=lambda rw: -rw[1]
                )
            ],
        },
    )


@cross_rank(supersedes=("communication",))
def rule_exposed_communication(ctx: JobContext) -> Finding | None:
    """Communication not overlapped with computation, less the time spent waiting for other
    ranks (that is imbalance, not transfer), takes at least EXPOSED_COMMUNICATION_MIN_PCT of
    the median rank's step. Replaces the per-rank ``communication`` rule in a job.

    Saving (per step): the mean over ranks of that exposed transfer time.
    """
    ranks = _ranks(ctx)
    if ranks is None:
        return None
    exposed = (ranks["exposed_communication_ns"] - ranks["wait_ns"].fillna(0.0)).clip(lower=0.0)
    steps = ranks["step_mean_ns"] if "step_mean_ns" in ranks else ranks["step_median_ns"]
    shares = 100.0 * exposed / steps.where(steps > 0, np.nan)
    median_share = float(shares.median())
    if math.isnan(median_share) or median_share < EXPOSED_COMMUNICATION_MIN_PCT:
        return None
    worst = int(shares.idxmax())
    measured = ranks["wait_ns"].notna().any()
    return Finding(
        id="exposed-communication",
        title=(
            f"Communication not hidden behind computation takes {median_share:.1f}% of each "
            f"step (median over {len(ranks)} ranks; highest on rank "
            f"{int(ranks.loc[worst, 'rank'])}: {float(shares[worst]):.1f}%)"
            + (", waiting for other ranks left out" if measured else "")
        ),
        severity="",
        saving_ns=float(exposed.mean()),
        acts_on="device",
        evidence={
            "exposed_by_rank": [
                {"rank": int(r), "exposed_per_step_ns": float(v), "share_of_step_pct": float(p)}
                for r, v, p in sorted(
                    zip(ranks["rank"], exposed, shares, strict=True), key=lambda t: -t[2]
                )
            ],
            "waits_measured": bool(measured),
        },
    )
