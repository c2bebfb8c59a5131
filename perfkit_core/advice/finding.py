"""``Finding``: one piece of advice, the type every rule returns, the engine orders and merges
and the reports show. It lives apart from the engine so that the engine's helpers (combining
savings, merging findings that share a remedy) can name it without importing the engine."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Finding:
    """One piece of advice: what is wrong, the numbers behind it, the estimated saving (ns per
    step), and what to change (``remedy``, in the run's framework)."""

    id: str
    title: str
    severity: str
    #: Estimated saving in ns per step (of the mean step, ``Context.step_ns``).
    saving_ns: float
    #: The numbers behind the finding, raw (ns, counts, names), for JSON and other tools.
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    rule: str = ""
    #: The evidence for people: sentences with units ("step 7: data loading 73.4 ms of 176.9 ms").
    details: list[str] = field(default_factory=list)
    #: How ``saving_ns`` was estimated, in one sentence.
    estimate: str = ""
    #: The rows of views the finding is about: view name -> row names (``{"operator":
    #: ["aten::item"], "phases": ["step 7"]}``); reports link to them.
    cites: dict[str, list[str]] = field(default_factory=dict)
    #: Findings with the same non-empty key prescribe one remedy (``compile`` for
    #: ``torch.compile`` / ``paddle.jit.to_static``) and are merged into one finding.
    remedy_key: str = ""
    #: What the saving shortens: ``host`` (host time in the step) or ``device`` (device time);
    #: ``combined_saving`` adds savings of one kind and combines the two kinds.
    acts_on: str = "host"
    #: True when the estimate itself says the saving is within its model's error, so the
    #: remedy may save nothing (a compile estimate whose compiled step costs about the eager
    #: one): the headline's "Change first" passes over such a finding.
    within_error: bool = False
    #: False for a finding about a risk rather than time (``memory-pressure``), whose saving is
    #: 0 by design; a finding that saves time and promises 0 says its remedy would not pay here.
    saves_time: bool = True
    #: The heading of ``remedy`` in the reports where the rule words it itself (amp on a step
    #: the host paces: what to shorten before mixed precision can pay); empty for the reports'
    #: own: "What to change:", or for a finding that saves time but promises none, a heading
    #: saying the usual remedy is not expected to pay here.
    remedy_heading: str = ""

    @property
    def upper_bound(self) -> bool:
        """Whether ``saving_ns`` is the most the rule's model allows rather than its estimate:
        an input-pipeline finding of a step that loaded in a thread of the training process,
        whose hand-overs of the GIL at the cost per op timed for them would come to the loading
        thread's whole CPU time or more (``handovers_capped``: a loading thread that runs
        framework ops of its own, such as a Dataset of tensors sliced per sample). The model
        then counts all of that CPU time as hand-overs, which leaves the training thread the
        least time of its own and the workers the most to save; fewer, and the saving shrinks.
        On ``perfkit demo``'s Paddle loop a worker delivered about two fifths of it
        (bench/README.md, 2026-11-30). The reports say "up to"."""
        return (self.rule or self.id) == "input-pipeline" and (
            self.evidence.get("handovers_capped") is True
        )

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain JSON-ready data."""
        return asdict(self)
