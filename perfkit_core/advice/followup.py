"""Closing the loop: which findings of a run BEFORE were acted on in a run AFTER, what each
promised and what it delivered.

A finding of BEFORE was acted on when AFTER no longer has it, or has it with at most
``ACTED_ON_SHARE`` of the saving it promised (its evidence shrank). What the changes delivered
is the step time BEFORE less the step time AFTER (ns per step): the medians of the step timer's
steps without the profiler when both runs have them (``perfkit_core.step_timer``), else the
mean profiled steps. When several findings were acted on, the delivered time is split between
them in proportion to how much each one's saving shrank; one finding acted on gets it all.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: A finding still present in AFTER with at most this share of its promised saving was acted on.
ACTED_ON_SHARE = 0.5


@dataclass
class FollowUp:
    """One finding of BEFORE: ``promised_ns`` (its saving in BEFORE, ns per step),
    ``remaining_ns`` (the same finding's saving in AFTER, 0 when gone), ``acted_on``, and
    ``delivered_ns`` (the step time its change saved, ns per step; None when not acted on)."""

    id: str
    rule: str
    title: str
    promised_ns: float
    remaining_ns: float
    acted_on: bool
    delivered_ns: float | None

    def sentence(self) -> str:
        """ "promised X ms/step, delivered Y ms/step", or why nothing was delivered."""
        promised = f"promised {self.promised_ns / 1e6:.2f} ms/step"
        if not self.acted_on or self.delivered_ns is None:
            return f"{promised}; not acted on (still {self.remaining_ns / 1e6:.2f} ms/step)"
        return f"{promised}, delivered {self.delivered_ns / 1e6:.2f} ms/step"

    def to_dict(self) -> dict[str, Any]:
        """The follow-up as plain JSON-ready data (stable keys)."""
        return asdict(self)


def step_time(run: Run) -> tuple[float, str]:
    """(the run's step time in ns, its basis): the median unprofiled step of the step timer
    (``unprofiled``), else the mean profiled step (``profiled``)."""
    from perfkit_core.advice.engine import make_context

    record = run.meta.get("step_timer") or {}
    unprofiled = [
        float(v) for v in record.get("unprofiled_ns") or [] if isinstance(v, (int, float))
    ]
    if unprofiled:
        return float(np.median(unprofiled)), "unprofiled"
    return make_context(run).step_ns, "profiled"


def follow_up(
    before: Run,
    after: Run,
    *,
    findings_before: list[Any] | None = None,
    findings_after: list[Any] | None = None,
) -> tuple[list[FollowUp], dict[str, Any]]:
    """(one ``FollowUp`` per finding of ``before``, largest promise first; the step figures:
    ``before_ns``, ``after_ns``, ``delivered_ns`` (before less after, ns per step) and
    ``basis`` (``unprofiled`` when both runs have step-timer steps, else ``profiled``))."""
    found_before = before.advise() if findings_before is None else findings_before
    found_after = after.advise() if findings_after is None else findings_after
    (before_ns, basis_b), (after_ns, basis_a) = step_time(before), step_time(after)
    if basis_b != basis_a:
        from perfkit_core.advice.engine import make_context

        before_ns, after_ns = make_context(before).step_ns, make_context(after).step_ns
        basis_b = "profiled"
    delivered_total = before_ns - after_ns
    remaining = {f.id: float(f.saving_ns) for f in found_after}
    rows = []
    for finding in found_before:
        left = remaining.get(finding.id, 0.0)
        acted = finding.id not in remaining or left <= ACTED_ON_SHARE * finding.saving_ns
        rows.append(
            FollowUp(
                id=finding.id,
                rule=finding.rule,
                title=finding.title,
                promised_ns=float(finding.saving_ns),
                remaining_ns=left,
                acted_on=bool(acted),
                delivered_ns=None,
            )
        )
    acted_rows = [r for r in rows if r.acted_on]
    weights = [max(r.promised_ns - r.remaining_ns, 0.0) for r in acted_rows]
    total_weight = sum(weights)
    for row, weight in zip(acted_rows, weights, strict=True):
        share = weight / total_weight if total_weight else 1.0 / len(acted_rows)
        row.delivered_ns = delivered_total * share
    rows.sort(key=lambda r: (-r.promised_ns, r.id))
    figures = {
        "before_ns": before_ns,
        "after_ns": after_ns,
        "delivered_ns": delivered_total,
        "basis": basis_b,
    }
    return rows, figures
