"""The advice engine: findings, the context rules read, the rule registry, and ``advise``.

``run.advise()`` runs every registered rule (``perfkit_register_advisors``) and returns
``Finding`` objects, most valuable first. In a run of several ranks, every rule runs on each
rank's table alone (so each figure is that rank's share of its own step time), the findings
of one rule are merged across ranks (``merge_rank_findings``: the saving is the mean per rank,
the title the worst rank's, naming it), and the cross-rank rules (``cross_rank``) run once
over the ranks side by side. The built-in rules live in ``perfkit_core.advice.rules``
and read only ``run.events``, ``run.meta`` and the views; what to change in code comes from the
adapter of the run's framework through ``perfkit_remedy``, so a torch run gets torch code and a
paddle run paddle code.

Every rule states its thresholds (module constants) and how it estimates ``saving_ns``: the time
per step that the change would save at best (ns per step, against the mean step
``Context.step_ns``). A saving is never larger than the measured time it is based on, and two
findings never claim the same time: rules leave to each other what another rule claims (the
optimizer's ops are the optimizer rule's, not the tiny-ops rule's), and findings that prescribe
one remedy (``Finding.remedy_key``) are merged into one finding with one saving.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from perfkit_core.advice.combine import (
    merge_shared_remedies,
    severity,
)
from perfkit_core.advice.finding import Finding
from perfkit_core.events.facts import has_device
from perfkit_core.events.intervals import step_window
from perfkit_core.events.steady import steady_run
from perfkit_core.plugins import framework_hook, get_plugin_manager, registrations
from perfkit_core.views.registry import shared_views

if TYPE_CHECKING:
    import pluggy

    from perfkit_core.events.run import Run

_T = TypeVar("_T")
#: Advice needs at least this many recorded steps: one step (often the partial cycle a profiler
#: flushes when the loop ends) holds too little to tell a steady cost from a one-time one.
MIN_STEPS = 2


class UnknownRuleError(KeyError):
    """A rule id that no installed plugin registers."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown rule"


@dataclass
class Context:
    """Figures most rules need, computed once per ``advise()``: ``step_ns`` is the mean step
    (ns per step: each step stretched over the device work it launched), ``total_ns`` the
    steps' time together, ``steps`` their count."""

    run: Run
    step_ns: float
    steps: int
    has_device: bool
    framework: str
    #: The run's devices (``Run.meta["devices"]``): name, memory, compute capability, SMs.
    devices: list[dict[str, Any]] = field(default_factory=list)
    #: The steps' time together, in ns (``step_ns * steps``).
    total_ns: float = 0.0

    def per_step(self, total_ns: float) -> float:
        """``total_ns`` (a time over all the steps) per step."""
        return float(total_ns) / max(self.steps, 1)

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

    def once(self, key: str, compute: Callable[[Context], _T]) -> _T:
        """``compute(self)``, computed once per ``advise`` and held on the run under ``key``,
        for results several rules read (the claims of one rule that others leave alone). The
        context is held weakly: a later ``advise`` gets a new context and computes afresh (its
        findings are new objects, whatever an earlier advise did to its own), and the run does
        not keep its context alive."""
        cached = self.run.cache.get(key)
        if cached is None or cached[0]() is not self:
            cached = (weakref.ref(self), compute(self))
            self.run.cache.put(key, cached)
        found: _T = cached[1]
        return found


@dataclass
class JobContext:
    """What the cross-rank rules read: ``job`` (a run of several ranks, or a job analysed on
    Dask: anything with ``summary(view)``, ``meta`` and ``framework``), its ``ranks``, the
    median rank's mean step ``step_ns`` (ns per step) and step count."""

    job: Any
    ranks: list[int]
    step_ns: float
    steps: int
    has_device: bool
    framework: str


#: A rule: called with a ``Context`` (per rank), or a ``JobContext`` when marked ``cross_rank``.
Advisor = Callable[[Any], "list[Finding] | Finding | None"]
#: Attribute ``cross_rank`` sets on a rule.
SCOPE_ATTR = "perfkit_scope"


def cross_rank(
    supersedes: tuple[str, ...] = (),
) -> Callable[[Callable[[JobContext], Any]], Callable[[JobContext], Any]]:
    """Mark a rule as cross-rank: it runs once per job of several ranks with a ``JobContext``,
    never per rank. ``supersedes`` names per-rank rules whose merged findings it replaces in
    a job (their question is better answered across ranks)."""

    def mark(function: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
        setattr(function, SCOPE_ATTR, "job")
        function.supersedes = tuple(supersedes)  # type: ignore[attr-defined]
        return function

    return mark


def is_cross_rank(function: Callable[..., Any]) -> bool:
    """True for a rule marked with ``cross_rank``."""
    return getattr(function, SCOPE_ATTR, "rank") == "job"


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


def make_context(run: Run) -> Context:
    """The figures every rule reads, for ``run``."""
    window, has_steps = step_window(run)
    ev = run.events
    devices = run.meta.get("devices") or []
    total = float((window[1] - window[0]).sum())
    steps = int((ev["kind"] == "step").sum()) if has_steps else 0
    return Context(
        run=run,
        step_ns=total / max(steps, 1),
        steps=steps,
        has_device=has_device(run),
        framework=run.framework,
        devices=[d for d in devices if isinstance(d, dict)],
        total_ns=total,
    )


def advice_note(run: Any, *, steady: bool = True) -> str | None:
    """Why ``run`` (a run, or a job analysed rank by rank) gets no advice at all (too few
    steps, its warm-up left out with ``steady``), or None when it can be advised on. A job
    counts its median rank's steps."""
    import statistics

    if getattr(run, "events", None) is not None:
        steps = make_context(steady_run(run) if steady else run).steps
    else:
        counts = [n for _ns, n in getattr(run, "steps", {}).values()]
        steps = int(statistics.median(counts)) if counts else 0
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
    run: Run,
    *,
    rules: list[str] | None = None,
    pm: pluggy.PluginManager | None = None,
    measure: bool = False,
    steady: bool = True,
) -> list[Finding]:
    """Return the findings of every registered rule on ``run`` (or only ``rules``) in
    ``advice_order``: the largest saving its estimate stands behind first. Each finding gets
    its remedy from the run's adapter. With ``measure``, the run's adapter replays what it can
    of each finding with and without its remedy on this machine (``perfkit_measure_saving``)
    and the measured saving replaces the modelled one (``evidence["measured"]`` says so). A
    run of fewer
    than ``MIN_STEPS`` steps gets none (``advice_note`` says why). A run of several ranks is
    advised rank by rank and across ranks (see the module docstring). With ``steady`` (the
    default) every step figure is taken over the steady steps (``events.steady``: leading
    warm-up left out). Raises
    ``UnknownRuleError`` for a rule id no plugin registers."""
    from perfkit_core.events.ranks import is_multi_rank, rank_run, run_ranks

    pm = pm or get_plugin_manager()
    if steady:  # every step figure is taken over the steady steps: leading warm-up left out
        run = steady_run(run)
    if not is_multi_rank(run):
        return advise_rank(run, rules=rules, pm=pm, measure=measure)
    check_rules(rules, pm)
    per_rank = {
        r: advise_rank(rank_run(run, r), rules=rules, pm=pm, measure=measure)
        for r in run_ranks(run)
    }
    steps = {r: step_figures(rank_run(run, r)) for r in run_ranks(run)}
    return advise_job(run, per_rank, steps, rules=rules, pm=pm)


def check_rules(rules: list[str] | None, pm: pluggy.PluginManager) -> None:
    """Raise ``UnknownRuleError`` when ``rules`` names a rule no plugin of ``pm`` registers."""
    registered = registered_advisors(pm)
    unknown = sorted(set(rules or ()) - set(registered))
    if unknown:
        raise UnknownRuleError(
            f"unknown rule {', '.join(map(repr, unknown))}; known rules: {', '.join(sorted(registered))}"
        )


def step_figures(run: Run) -> tuple[float, int]:
    """(mean step in ns per step, step count) of a one-rank run, as ``Context`` holds them."""
    ctx = make_context(run)
    return ctx.step_ns, ctx.steps


def advise_rank(
    run: Run,
    *,
    rules: list[str] | None = None,
    pm: pluggy.PluginManager | None = None,
    measure: bool = False,
) -> list[Finding]:
    """The findings of the per-rank rules on a run of one rank (what a Dask worker runs);
    ``measure``: see ``advise``."""
    pm = pm or get_plugin_manager()
    check_rules(rules, pm)
    registered = registered_advisors(pm)
    ctx = make_context(run)
    if ctx.steps < MIN_STEPS:
        return []
    findings: list[Finding] = []
    # Rules read the same views (the model view, the steps): each is computed once.
    with shared_views(run):
        for rule_id, (function, _description) in registered.items():
            if (rules is not None and rule_id not in rules) or is_cross_rank(function):
                continue
            result = function(ctx)
            if result is None:
                continue
            for finding in result if isinstance(result, list) else [result]:
                finding.rule = finding.rule or rule_id
                finding.saving_ns = float(max(finding.saving_ns, 0.0))
                basis = float(finding.evidence.get("basis_step_ns") or ctx.step_ns)
                finding.severity = finding.severity or severity(finding.saving_ns, basis)
                finding.evidence.setdefault("step_time_ns", ctx.step_ns)
                finding.evidence.setdefault("steps", ctx.steps)
                findings.append(finding)
    hook = framework_hook("perfkit_remedy", ctx.framework, pm)
    for finding in findings:
        if not finding.remedy:
            finding.remedy = hook(finding=finding, framework=ctx.framework) or GENERIC_REMEDIES.get(
                finding.rule, ""
            )
    if measure:
        for finding in findings:
            measure_saving(finding, ctx, pm)
    findings = merge_shared_remedies(findings, ctx.step_ns)
    findings.sort(key=advice_order)
    return findings


def advice_order(finding: Finding) -> tuple[bool, float, str]:
    """The order advice comes in: the findings that promise a saving (more than 0) their
    estimate stands behind (not ``within_error``) first, largest saving first; then the
    others, largest saving first. The first is what the headline's "Change first" names."""
    sure = finding.saving_ns > 0 and not finding.within_error
    return (not sure, -finding.saving_ns, finding.id)


def measure_saving(finding: Finding, ctx: Context, pm: pluggy.PluginManager) -> None:
    """Replace ``finding``'s modelled saving by the one the run's adapter measures by a replay
    (``perfkit_measure_saving``), when it can; the modelled one stays in
    ``evidence["modelled_saving_ns"]``."""
    measure = framework_hook("perfkit_measure_saving", ctx.framework, pm)
    result = measure(finding=finding, framework=ctx.framework)
    if not isinstance(result, dict) or "saving_ns" not in result:
        return
    saving = float(result["saving_ns"])
    if not saving >= 0.0:  # NaN or negative: keep the model
        return
    finding.evidence["modelled_saving_ns"] = finding.saving_ns
    finding.evidence.update(result.get("evidence") or {})
    finding.evidence.setdefault("measured", "replay")
    finding.saving_ns = saving
    basis = float(finding.evidence.get("basis_step_ns") or ctx.step_ns)
    finding.severity = severity(saving, basis)
    finding.estimate = str(result.get("estimate") or finding.estimate)
    # the replay's own verdict replaces the model's
    finding.within_error = result.get("within_error") is True


def advise_job(
    job: Any,
    per_rank: dict[int, list[Finding]],
    steps: dict[int, tuple[float, int]],
    *,
    rules: list[str] | None = None,
    pm: pluggy.PluginManager | None = None,
) -> list[Finding]:
    """The findings of a job: each rank's findings (``advise_rank``) merged across ranks, then
    the cross-rank rules run over ``job``. ``steps`` holds each rank's (step time in ns, step
    count); shares of step time are of the median rank's."""
    import statistics

    pm = pm or get_plugin_manager()
    ranks = sorted(per_rank)
    step_ns = int(statistics.median([steps[r][0] for r in ranks])) if ranks else 0
    ctx = JobContext(
        job=job,
        ranks=ranks,
        step_ns=step_ns,
        steps=int(statistics.median([steps[r][1] for r in ranks])) if ranks else 1,
        has_device=has_device(job),
        framework=str(job.meta.get("framework") or ""),
    )
    superseded: set[str] = set()
    cross: list[Finding] = []
    for rule_id, (function, _description) in registered_advisors(pm).items():
        if not is_cross_rank(function) or (rules is not None and rule_id not in rules):
            continue
        if ctx.steps < MIN_STEPS:
            break
        superseded.update(getattr(function, "supersedes", ()))
        result = function(ctx)
        if result is None:
            continue
        for finding in result if isinstance(result, list) else [result]:
            finding.rule = finding.rule or rule_id
            finding.saving_ns = float(max(finding.saving_ns, 0.0))
            finding.severity = finding.severity or severity(finding.saving_ns, step_ns)
            finding.evidence.setdefault("step_time_ns", step_ns)
            finding.evidence.setdefault("steps", ctx.steps)
            if not finding.remedy:
                finding.remedy = framework_hook("perfkit_remedy", ctx.framework, pm)(
                    finding=finding, framework=ctx.framework
                ) or GENERIC_REMEDIES.get(finding.rule, "")
            cross.append(finding)
    kept = {r: [f for f in found if f.rule not in superseded] for r, found in per_rank.items()}
    findings = merge_rank_findings(kept, step_ns) + cross
    findings.sort(key=advice_order)
    return findings


def merge_rank_findings(per_rank: dict[int, list[Finding]], step_ns: float) -> list[Finding]:
    """One finding per finding id across ranks: the worst rank's title and evidence (naming
    the rank and how many ranks show it), the saving the mean per rank (a rank without the
    finding saves 0), its severity against the median rank's step time ``step_ns``."""
    from perfkit_core.events.ranks import ranks_text

    n = max(len(per_rank), 1)
    by_id: dict[str, dict[int, Finding]] = {}
    for rank, found in per_rank.items():
        for finding in found:
            by_id.setdefault(finding.id, {})[rank] = finding
    merged = []
    for finding_id, on_ranks in by_id.items():
        worst_rank, worst = max(on_ranks.items(), key=lambda kv: (kv[1].saving_ns, -kv[0]))
        saving = sum(f.saving_ns for f in on_ranks.values()) / n
        shown = "all" if len(on_ranks) == n else f"{len(on_ranks)} of"
        evidence = dict(worst.evidence)
        evidence["rank_step_time_ns"] = evidence.pop("step_time_ns", None)
        evidence.update(
            rank=worst_rank,
            ranks_with_finding=ranks_text(sorted(on_ranks)),
            saving_by_rank=[
                {"rank": r, "saving_ns": f.saving_ns}
                for r, f in sorted(on_ranks.items(), key=lambda kv: (-kv[1].saving_ns, kv[0]))
            ],
            step_time_ns=step_ns,
            saving="mean per rank (a rank without the finding saves 0)",
        )
        merged.append(
            Finding(
                id=finding_id,
                title=f"{worst.title} (worst on rank {worst_rank}; {shown} {n} ranks)",
                severity=severity(saving, step_ns),
                saving_ns=saving,
                evidence=evidence,
                remedy=worst.remedy,
                rule=worst.rule,
                details=[f"rank {worst_rank}: {line}" for line in worst.details],
                estimate=(f"{worst.estimate} On each rank; the mean over {n} ranks.").strip(),
                cites=dict(worst.cites),
                remedy_key=worst.remedy_key,
                acts_on=worst.acts_on,
            )
        )
    return merged


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
    "tensor-cores-unused": "Let fp32 matrix ops run on tensor cores (TF32), or run them in bf16/fp16 with mixed precision.",
    "gemm-alignment": "Pad the layers' feature, channel and vocabulary sizes to multiples of 8.",
    "small-gemms": "Batch the small matrix products into fewer, larger ones (bmm, grouped GEMM, a larger batch) or capture the step in a graph.",
    "unfused-elementwise": "Compile the model (graph capture) so that chains of elementwise ops become one fused kernel.",
    "small-ops": "Compile the model (graph capture) so that many tiny ops run as a few fused ones.",
    "python-overhead": "Compile the model (graph capture) so its Python runs once, not every step, and keep per-step bookkeeping out of the loop.",
    "straggler": "Find what the slow rank does differently in the phase named: its data loader (workers, storage), its device (clocks, thermal limits, a faulty GPU), or the share of work it gets.",
    "load-imbalance": "Even out the work per rank (partition data and model shards evenly) so no rank waits in collectives for the others.",
    "exposed-communication": "Overlap communication with computation (bucketed gradients, async collectives) or communicate less.",
}
