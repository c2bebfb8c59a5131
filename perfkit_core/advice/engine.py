"""The advice engine: findings, the context rules read, the rule registry, and ``advise``.

``run.advise()`` runs every registered rule (``perfkit_register_advisors``) and returns
``Finding`` objects, most valuable first. The built-in rules live in ``perfkit_core.advice.rules``
and read only ``run.events``, ``run.meta`` and the views; what to change in code comes from the
adapter of the run's framework through ``perfkit_remedy``, so a torch run gets torch code and a
paddle run paddle code.

Every rule states its thresholds (module constants) and how it estimates ``saving_ns``: the time
over the profiled steps that the change would save at best. A saving is never larger than the
measured time it is based on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from perfkit_core.events.intervals import step_window
from perfkit_core.plugins import get_plugin_manager, registrations

if TYPE_CHECKING:
    import pluggy

    from perfkit_core.events.run import Run

#: A finding saving at least this share of step time is rated high ...
SEVERITY_HIGH_PCT = 10.0
#: ... at least this share medium, below it low.
SEVERITY_MEDIUM_PCT = 2.0


@dataclass
class Finding:
    """One piece of advice: what is wrong, the numbers behind it, the estimated saving (ns over
    the profiled steps), and what to change (``remedy``, in the run's framework)."""

    id: str
    title: str
    severity: str
    saving_ns: float
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain JSON-ready data."""
        return asdict(self)


@dataclass
class Context:
    """Figures most rules need, computed once per ``advise()``."""

    run: Run
    step_ns: int
    steps: int
    has_device: bool
    framework: str


Advisor = Callable[[Context], "list[Finding] | Finding | None"]


def registered_advisors(
    pm: pluggy.PluginManager | None = None,
) -> dict[str, tuple[Advisor, str]]:
    """Every rule the plugins of ``pm`` (default: the process-wide manager) register:
    id -> (function, description)."""
    found = registrations(pm or get_plugin_manager(), "perfkit_register_advisors")
    return {
        rule_id: (values[0], values[1] if len(values) > 1 else "")
        for rule_id, values in found.items()
    }


def _severity(saving_ns: float, step_ns: int) -> str:
    share = 100.0 * saving_ns / step_ns if step_ns else 0.0
    if share >= SEVERITY_HIGH_PCT:
        return "high"
    if share >= SEVERITY_MEDIUM_PCT:
        return "medium"
    return "low"


def advise(
    run: Run, *, rules: list[str] | None = None, pm: pluggy.PluginManager | None = None
) -> list[Finding]:
    """Return the findings of every registered rule on ``run`` (or only ``rules``), the largest
    estimated saving first. Each finding gets its remedy from the run's adapter."""
    pm = pm or get_plugin_manager()
    window, has_steps = step_window(run)
    ev = run.events
    ctx = Context(
        run=run,
        step_ns=int((window[1] - window[0]).sum()),
        steps=int((ev["kind"] == "step").sum()) if has_steps else 1,
        has_device=bool((ev["stream"].to_numpy() >= 0).any()),
        framework=run.framework,
    )
    findings: list[Finding] = []
    for rule_id, (function, _description) in registered_advisors(pm).items():
        if rules is not None and rule_id not in rules:
            continue
        result = function(ctx)
        if result is None:
            continue
        for finding in result if isinstance(result, list) else [result]:
            finding.rule = finding.rule or rule_id
            finding.saving_ns = float(max(finding.saving_ns, 0.0))
            finding.severity = finding.severity or _severity(finding.saving_ns, ctx.step_ns)
            finding.evidence.setdefault("step_time_ns", ctx.step_ns)
            finding.evidence.setdefault("steps", ctx.steps)
            findings.append(finding)
    hook = pm.hook.perfkit_remedy
    for finding in findings:
        if not finding.remedy:
            finding.remedy = hook(finding=finding, framework=ctx.framework) or GENERIC_REMEDIES.get(
                finding.rule, ""
            )
    findings.sort(key=lambda f: (-f.saving_ns, f.id))
    return findings


GENERIC_REMEDIES = {
    "input-pipeline": "Load data in background workers and overlap it with compute (more loader workers, pinned memory, prefetching).",
    "cpu-bound-op": "Look at the op's host-side implementation, or replace it with a device-side equivalent.",
    "placement": "Keep these values on the host, or stop reading device values in the step (log less often).",
    "launch-bound": "Launch fewer, larger kernels: capture the step in a graph, compile it, fuse ops, or use larger batches.",
    "low-gpu-utilization": "Feed the GPU more work per step: larger batches, fewer host stalls, overlap data loading.",
    "communication": "Overlap communication with computation (bucketed gradients, async collectives) or communicate less.",
    "amp": "Run matmuls and convolutions in reduced precision on tensor cores (automatic mixed precision).",
    "memory-pressure": "Lower peak memory: smaller batches, activation checkpointing, or freeing cached blocks.",
    "pageable-memcpy": "Copy from pinned host memory, asynchronously.",
}
