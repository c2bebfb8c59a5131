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
#: Advice needs at least this many recorded steps: one step (often the partial cycle a profiler
#: flushes when the loop ends) holds too little to tell a steady cost from a one-time one.
MIN_STEPS = 2


class UnknownRuleError(KeyError):
    """A rule id that no installed plugin registers."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown rule"


@dataclass
class Finding:
    """One piece of advice: what is wrong, the numbers behind it, the estimated saving (ns over
    the profiled steps), and what to change (``remedy``, in the run's framework)."""

    id: str
    title: str
    severity: str
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
    #: The run's devices (``Run.meta["devices"]``): name, memory, compute capability, SMs.
    devices: list[dict[str, Any]] = field(default_factory=list)

    @property
    def compute_capability(self) -> float | None:
        """The lowest CUDA compute capability among the run's devices (7.0 for V100, 8.0 for
        A100), or None when the trace does not say."""
        found = []
        for device in self.devices:
            try:
                found.append(float(str(device.get("compute_capability"))))
            except ValueError:
                continue
        return min(found) if found else None


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


def make_context(run: Run) -> Context:
    """The figures every rule reads, for ``run``."""
    window, has_steps = step_window(run)
    ev = run.events
    devices = run.meta.get("devices") or []
    return Context(
        run=run,
        step_ns=int((window[1] - window[0]).sum()),
        steps=int((ev["kind"] == "step").sum()) if has_steps else 0,
        has_device=bool((ev["stream"].to_numpy() >= 0).any()),
        framework=run.framework,
        devices=[d for d in devices if isinstance(d, dict)],
    )


def advice_note(run: Run) -> str | None:
    """Why ``run`` gets no advice at all (too few steps), or None when it can be advised on."""
    steps = make_context(run).steps
    if steps >= MIN_STEPS:
        return None
    if steps == 0:
        return (
            "no steps were recorded, so no advice: call prof.step() once per training step "
            f"and profile at least {MIN_STEPS} steps"
        )
    return (
        f"only {steps} step was recorded (a partial profiler cycle?), so no advice: profile at "
        f"least {MIN_STEPS} steps"
    )


def advise(
    run: Run, *, rules: list[str] | None = None, pm: pluggy.PluginManager | None = None
) -> list[Finding]:
    """Return the findings of every registered rule on ``run`` (or only ``rules``), the largest
    estimated saving first. Each finding gets its remedy from the run's adapter. A run of fewer
    than ``MIN_STEPS`` steps gets none (``advice_note`` says why). Raises ``UnknownRuleError``
    for a rule id no plugin registers."""
    pm = pm or get_plugin_manager()
    registered = registered_advisors(pm)
    unknown = sorted(set(rules or ()) - set(registered))
    if unknown:
        raise UnknownRuleError(
            f"unknown rule {', '.join(map(repr, unknown))}; known rules: {', '.join(sorted(registered))}"
        )
    ctx = make_context(run)
    if ctx.steps < MIN_STEPS:
        return []
    findings: list[Finding] = []
    for rule_id, (function, _description) in registered.items():
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


def duration_text(ns: float) -> str:
    """A duration for a sentence: ``73.4 ms``, ``812 us``, ``950 ns``."""
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.0f} us"
    return f"{ns:.0f} ns"


def share_text(part: float, whole: float) -> str:
    """``12.4%`` of ``whole`` (``-`` when there is no whole)."""
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


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
    "optimizer": "Use the framework's fused or multi-tensor optimizer implementation.",
    "small-ops": "Compile the model (graph capture) so that many tiny ops run as a few fused ones.",
    "python-overhead": "Compile the model (graph capture) so its Python runs once, not every step, and keep per-step bookkeeping out of the loop.",
}
