"""A finding in a few lines, with the rest one flag (``--explain``) or one click away.

The short form of a finding is what a reader takes in at a glance: its title, one line with
the saving, its share of the step and how sure perfkit is of it, at most ``SUMMARY_EVIDENCE``
evidence sentences (the first ones: each rule states the figures its saving rests on first),
and the remedy's code with the sentence that introduces it. The derivation of the estimate
(``Finding.estimate``), the other evidence sentences and the remedy's caveats (its
parenthesised notes) are the rest. The text, HTML and JSON forms all cut a finding here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfkit_core.report.format import saving_text

#: How many evidence sentences the short form keeps, at most ...
SUMMARY_EVIDENCE = 2
#: ... and the words of its title, saving line, evidence and remedy prose (whitespace-separated;
#: the remedy's code not counted) past which it
#: keeps only the first: the sentence each rule states its saving's figures in.
SUMMARY_WORDS = 90


@dataclass
class FindingSummary:
    """One finding cut in two: ``saving`` (per step, with its share of the step), ``sureness``
    (how sure perfkit is of it), ``evidence`` (the sentences the short form keeps), ``remedy``
    (the remedy without its caveats); and the rest: ``how`` (the estimate's derivation),
    ``more_evidence`` and ``caveats`` (the remedy's parenthesised notes)."""

    #: The saving per step with its share of the step; "" when the finding promises none.
    saving: str
    sureness: str
    evidence: list[str] = field(default_factory=list)
    remedy: str = ""
    how: str = ""
    more_evidence: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    def saving_line(self, rule: str) -> str:
        """``Saves 1.234 ms per step (5.6% of the step): modelled ... (rule-id).``; for a
        finding that promises no time, ``Saves no time here: ...``."""
        if not self.saving:
            return f"Saves no time here: {self.sureness} ({rule})."
        return f"Saves {self.saving}: {self.sureness} ({rule})."

    def rest_text(self) -> str:
        """What ``--explain`` adds, in a few words (``the estimate, 2 more facts``), or ""
        when nothing is left out."""
        parts = []
        if self.how:
            parts.append("the estimate")
        if self.more_evidence:
            n = len(self.more_evidence)
            parts.append(f"{n} more fact{'s' if n > 1 else ''}")
        if self.caveats:
            n = len(self.caveats)
            parts.append(f"{n} note{'s' if n > 1 else ''}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sureness(finding: Any) -> str:
    """How sure perfkit is of a finding's saving, in a few words: about a risk, not time; no
    saving (its estimate says why); within its estimate's error; measured by a replay on this
    machine; or modelled (on the step without the profiler, or on
    the profiled step, which still holds the profiler's cost)."""
    evidence = getattr(finding, "evidence", {}) or {}
    if not getattr(finding, "saves_time", True):
        return "it is about a risk, not time"
    if not float(getattr(finding, "saving_ns", 0.0)) > 0:
        # A saving of nothing is within any error: the estimate's reason is what to read.
        return "its estimate says why"
    if getattr(finding, "within_error", False):
        return "within its estimate's error: it may save nothing"
    if evidence.get("measured"):
        return "measured by a replay on this machine"
    if evidence.get("basis") == "unprofiled":
        return "modelled on the step without the profiler"
    return "modelled on the profiled step"


def split_remedy(remedy: str) -> tuple[str, list[str]]:
    """(the remedy without its caveats, the caveats): a caveat is a paragraph of the remedy's
    prose that opens with ``(`` at the start of a line and runs to the line that closes it;
    code (indented lines) and the prose that introduces it stay."""
    kept: list[str] = []
    caveats: list[str] = []
    note: list[str] | None = None
    for line in str(remedy).splitlines():
        if note is None and line.startswith("("):
            note = []
        if note is not None:
            note.append(line.strip())
            if line.rstrip().endswith(")") and _balanced(" ".join(note)):
                caveats.append(" ".join(note))
                note = None
            continue
        kept.append(line)
    if note:  # never closed: keep it as written
        kept += note
    return "\n".join(kept).rstrip(), caveats


def _balanced(text: str) -> bool:
    return text.count("(") <= text.count(")")


def summarize(finding: Any, time_unit: str = "ms") -> FindingSummary:
    """The short form of ``finding`` and the rest (``FindingSummary``)."""
    details = list(getattr(finding, "details", None) or [])
    remedy, caveats = split_remedy(getattr(finding, "remedy", "") or "")
    summary = FindingSummary(
        saving=saving_text(finding, time_unit) if float(finding.saving_ns) > 0 else "",
        sureness=sureness(finding),
        remedy=remedy,
        how=str(getattr(finding, "estimate", "") or ""),
        caveats=caveats,
    )
    kept = details[:SUMMARY_EVIDENCE]
    base = (
        _words(str(getattr(finding, "title", "")))
        + _words(summary.saving_line(str(getattr(finding, "id", ""))))
        + sum(_words(line) for line in remedy.splitlines() if not is_code(line))
    )
    while len(kept) > 1 and base + sum(_words(s) for s in kept) > SUMMARY_WORDS:
        kept.pop()
    summary.evidence = kept
    summary.more_evidence = details[len(kept) :]
    return summary


def is_code(line: str) -> bool:
    """Whether a line of a remedy is code: the remedies indent their code by four spaces."""
    return line.startswith("    ")


def _words(text: str) -> int:
    return len(text.split())


def finding_json(finding: Any, time_unit: str = "ms") -> dict[str, Any]:
    """A finding as plain JSON-ready data: its full record (``Finding.to_dict``) and its short
    form under ``summary`` (``FindingSummary.to_dict``)."""
    return {**finding.to_dict(), "summary": summarize(finding, time_unit).to_dict()}
