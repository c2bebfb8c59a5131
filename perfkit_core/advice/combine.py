"""How findings add up: severity from a finding's share of the step, findings that share a
remedy merged into one, and the saving of applying every finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfkit_core.advice.text import duration_text

if TYPE_CHECKING:
    from perfkit_core.advice.finding import Finding

#: A finding saving at least this share of the step is rated high ...
SEVERITY_HIGH_PCT = 10.0
#: ... at least this share medium, below it low.
SEVERITY_MEDIUM_PCT = 2.0


def severity(saving_ns: float, step_ns: float) -> str:
    """``high``, ``medium`` or ``low``: the saving's share of the mean step against
    ``SEVERITY_HIGH_PCT`` and ``SEVERITY_MEDIUM_PCT``."""
    share = 100.0 * saving_ns / step_ns if step_ns else 0.0
    if share >= SEVERITY_HIGH_PCT:
        return "high"
    if share >= SEVERITY_MEDIUM_PCT:
        return "medium"
    return "low"


def merge_shared_remedies(findings: list[Finding], step_ns: float) -> list[Finding]:
    """One finding per ``remedy_key``: findings that prescribe one remedy become the finding
    with the largest saving, its saving the sum of theirs (rules claim disjoint time), or,
    when each states the remedy's whole saving (``evidence["saving_of"]`` is the key), that
    one saving; its evidence and details gain the others' (``evidence["merged"]`` names their
    ids)."""
    groups: dict[str, list[Finding]] = {}
    out: list[Finding] = []
    for finding in findings:
        if finding.remedy_key:
            groups.setdefault(finding.remedy_key, []).append(finding)
        else:
            out.append(finding)
    for key, group in groups.items():
        if len(group) == 1:
            out.append(group[0])
            continue
        group.sort(key=lambda f: (-f.saving_ns, f.id))
        lead, rest = group[0], group[1:]
        shared = all(f.evidence.get("saving_of") == key for f in group)
        saving = lead.saving_ns if shared else sum(f.saving_ns for f in group)
        lead.evidence["merged"] = [f.id for f in rest]
        lead.evidence["saving_by_finding"] = {f.id: f.saving_ns for f in group}
        for other in rest:
            for key, value in other.evidence.items():
                lead.evidence.setdefault(key, value)
            lead.details += other.details
            for view, rows in other.cites.items():
                lead.cites.setdefault(view, [])
                lead.cites[view] += [r for r in rows if r not in lead.cites[view]]
        lead.title = f"{lead.title}; {'; '.join(_lower_first(f.title) for f in rest)}"
        if not shared:
            lead.estimate = " ".join(
                [f"{duration_text(f.saving_ns)} per step from {f.id}: {f.estimate}" for f in group]
                + ["One remedy acts on both, on separate time, so the savings add up."]
            )
        lead.saving_ns = saving
        lead.severity = severity(saving, step_ns)
        # one shared estimate keeps its verdict; a sum is within its error when each part is
        lead.within_error = lead.within_error if shared else all(f.within_error for f in group)
        out.append(lead)
    return out


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and text[1:2].islower() else text


def combined_saving(findings: list[Finding], step_ns: float) -> tuple[float, str]:
    """The saving per step (ns) of applying every finding, and how it was combined: savings of
    one kind (``acts_on``: host time, device time) add up, since rules claim disjoint time; the
    two kinds combine as shares of the step left (a device-time saving shortens a step only
    where the host does not hold it), so the whole is below the plain sum when both occur.
    Never more than the step.

    The input pipeline is simulated with the others, not added: loader workers hide the
    loading behind the rest of the step, so the other host findings' remedies shorten the part
    the loading hides behind, and once the loading is the longer part they save nothing more.
    Its saving is recomputed (``loader_saving``) with the rest of the step less the other host
    savings; what another finding saves in hand-overs of the GIL to a loading thread
    (``handover_saving_ns``) is left out, since the workers remove the thread and its
    hand-overs with it, which the input pipeline's saving already counts. The sentence names
    the findings whose saving is within their estimate's error."""
    by_kind: dict[str, float] = {}
    for finding in findings:
        by_kind[finding.acts_on] = by_kind.get(finding.acts_on, 0.0) + finding.saving_ns
    if not step_ns or not by_kind:
        return 0.0, "no finding claims time"
    loader_note = _simulate_loader(findings, by_kind)
    shares = [min(v / step_ns, 1.0) for v in by_kind.values()]
    left = 1.0
    for share in shares:
        left *= 1.0 - share
    total = step_ns * (1.0 - left)
    if len(shares) == 1:
        how = "the findings' savings added up: each claims separate time in the step"
    else:
        how = (
            "host-time and device-time savings each added up, then combined as shares of the "
            "step left: not the plain sum, since the host and the device overlap"
        )
    return total, how + loader_note + _doubt_note(findings)


def _doubt_note(findings: list[Finding]) -> str:
    """A clause for the sentence of how the savings combined naming the findings whose
    saving in it is within their estimate's error (``within_error``); "" when none is."""
    doubtful = [f.id for f in findings if f.within_error and f.saving_ns > 0]
    if not doubtful:
        return ""
    if len(doubtful) == 1:
        return f"; the {doubtful[0]} saving in it is within its estimate's error"
    return f"; the {', '.join(doubtful)} savings in it are within their estimates' error"


def _simulate_loader(findings: list[Finding], by_kind: dict[str, float]) -> str:
    """Replace, in ``by_kind``, the input-pipeline finding's saving by the one its model gives
    when the other findings of its kind have shortened the rest of the step; a clause for the
    sentence of how the savings combined ("" when there is nothing to simulate)."""
    from perfkit_core.advice.loader import (
        LOADER_BATCH_NS,
        loader_figures,
        loader_saving,
        loader_slowdowns,
    )

    loader = next((f for f in findings if f.rule == "input-pipeline"), None)
    if loader is None:
        return ""
    ev = loader.evidence
    figures = loader_figures(ev)
    if figures is None:
        return ""
    beside = [f for f in findings if f is not loader and f.acts_on == loader.acts_on]
    # a remedy's saving in hand-overs of the GIL to the loading thread goes with the thread
    with_thread = sum(_handover_saving(f) for f in beside)
    others = sum(f.saving_ns for f in beside) - with_thread
    if not others and not with_thread:
        return ""
    data, rest, workers = figures
    batch = ev.get("replay_batch_ns", ev.get("loader_batch_ns"))
    batch_ns = float(batch) if isinstance(batch, (int, float)) else LOADER_BATCH_NS
    # a measured loader finding keeps its measure; the model gives how it changes
    contention = ev.get("contention_per_step_ns")
    lost_to_thread = float(contention) if isinstance(contention, (int, float)) else 0.0
    received = ev.get("loader_receive_ns")  # a replay puts its own beside its batch cost
    receive = float(received) if isinstance(received, (int, float)) else batch_ns
    slowdowns = loader_slowdowns(ev)
    alone = loader_saving(data, rest, workers, batch_ns, lost_to_thread, receive, slowdowns)
    together = loader_saving(
        data, max(rest - others, 0.0), workers, batch_ns, lost_to_thread, receive, slowdowns
    )
    lost = alone - together
    if lost <= 1.0:  # under a nanosecond: the same saving, up to rounding
        lost = 0.0
    simulated = max(loader.saving_ns - lost, 0.0)
    by_kind[loader.acts_on] = others + simulated
    gone = (
        f"; the {duration_text(with_thread)} per step the others save in hand-overs of the "
        "GIL to the loading thread goes with that thread, so it is counted once, in the input "
        "pipeline's saving"
        if with_thread
        else ""
    )
    if not lost:
        return gone + (
            "; the input pipeline's saving holds with the others applied (the rest of the "
            "step still outlasts the loading)"
        )
    return gone + (
        f"; with the others applied, the input pipeline saves {duration_text(simulated)} "
        f"per step, not {duration_text(loader.saving_ns)}: the rest of the step the loading "
        "hides behind gets shorter"
    )


def _handover_saving(finding: Finding) -> float:
    """The part of ``finding``'s saving its remedy makes by handing the GIL to a loading
    thread less often (``evidence["handover_saving_ns"]``: the optimizer's replay), at most
    its saving; 0 when it states none."""
    value = finding.evidence.get("handover_saving_ns")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        return 0.0
    return min(float(value), finding.saving_ns)
