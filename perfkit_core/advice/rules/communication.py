"""The communication rule: communication that is large or poorly overlapped with computation."""

from __future__ import annotations

from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.text import duration_text, per_step_text

#: communication: communication above this share of step time, or ...
COMMUNICATION_MIN_PCT = 10.0
#: ... less than this share of it overlapped with computation (when it takes at least
#: COMMUNICATION_MIN_POOR_OVERLAP_PCT of the step: tiny, unoverlapped transfers cost little).
COMMUNICATION_MIN_OVERLAP_PCT = 50.0
#: communication: poorly overlapped communication must take at least this share of step time.
COMMUNICATION_MIN_POOR_OVERLAP_PCT = 5.0


def rule_communication(ctx: Context) -> Finding | None:
    """Communication above COMMUNICATION_MIN_PCT of step time, or less than
    COMMUNICATION_MIN_OVERLAP_PCT of it overlapped with computation.

    Saving: the communication time not hidden behind computation.
    """
    if not ctx.step_ns:
        return None
    view = ctx.run.summary("distributed")
    if view.empty:
        return None
    totals = view.groupby(view["name"].str.split(" ").str[0])["per_step_ns"].sum()
    comm = float(totals.get("communication", 0.0))
    if comm <= 0:
        return None
    overlap = float(totals.get("overlap", 0.0))
    share = 100.0 * comm / ctx.step_ns
    overlapped = 100.0 * overlap / comm
    poorly_overlapped = (
        overlapped < COMMUNICATION_MIN_OVERLAP_PCT and share >= COMMUNICATION_MIN_POOR_OVERLAP_PCT
    )
    if share < COMMUNICATION_MIN_PCT and not poorly_overlapped:
        return None
    return Finding(
        id="communication",
        title=f"Communication takes {share:.1f}% of the step, {overlapped:.0f}% of it overlapped with computation",
        severity="",
        saving_ns=comm - overlap,
        acts_on="device",
        details=[
            f"Collectives ran {per_step_text(comm, ctx.step_ns)}; "
            f"{duration_text(overlap)} per step of that ran while the GPU also "
            f"computed, {duration_text(comm - overlap)} per step did not."
        ],
        estimate="The communication time not hidden behind computation.",
        evidence={
            "communication_per_step_ns": comm,
            "overlap_per_step_ns": overlap,
            "communication_pct": share,
            "overlap_pct": overlapped,
        },
    )
