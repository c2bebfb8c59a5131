"""A perfkit plugin adding the ``slow-steps`` advice rule, with a remedy per framework.

Steady training repeats the same work every step, so a step much slower than the median is
work that comes and goes: logging, checkpointing, evaluation, garbage collection, a data
loader refilling. The rule names those steps and what made them slower.

Register it under the entry-point group ``perfkit`` of your distribution (see the plugins
guide), or by hand for one session:

    import perfkit_core
    import plugin_rule

    perfkit_core.get_plugin_manager().register(plugin_rule, name="slow_steps")
"""

from __future__ import annotations

from collections.abc import Callable

import perfkit_core
from perfkit_core.advice import Context, Finding

RULE_ID = "slow-steps"
#: A step at least this much slower than the median step is "slow" (1.5: 50% slower).
SLOW_STEP_FACTOR = 1.5

REMEDIES = {
    "torch": (
        "Find what runs only on the slow steps (the phases table shows which phase grew): move\n"
        "logging, checkpointing and evaluation off the hot loop or make them asynchronous;\n"
        "for garbage-collection pauses call gc.freeze() after setup."
    ),
    "paddle": (
        "Find what runs only on the slow steps (the phases table shows which phase grew): move\n"
        "logging, checkpointing (paddle.save) and evaluation off the hot loop; for\n"
        "garbage-collection pauses call gc.freeze() after setup."
    ),
}


def rule_slow_steps(ctx: Context) -> Finding | None:
    """Steps at least SLOW_STEP_FACTOR times the median step.

    Saving (ns per step, as every finding states it): the slow steps' time beyond the median
    step, spread over all the steps (what they would save if they ran like the others).
    """
    phases = ctx.run.summary("phases")
    if len(phases) < 3:
        return None
    median = float(phases["step_ns"].median())
    slow = phases[phases["step_ns"] >= SLOW_STEP_FACTOR * median]
    if slow.empty:
        return None
    excess = float((slow["step_ns"] - median).sum()) / len(phases)
    grown = []
    for row in slow.itertuples():
        # The phase that grew most against its median over all steps.
        growth = {
            p: getattr(row, f"{p}_ns") - float(phases[f"{p}_ns"].median())
            for p in ("data", "forward", "backward", "optimizer", "other")
        }
        phase = max(growth, key=lambda p: growth[p])
        grown.append(
            f"{row.name}: {row.step_ns / 1e6:.1f} ms against a median of {median / 1e6:.1f} ms; "
            f"{phase} grew most ({growth[phase] / 1e6:+.1f} ms)."
        )
    return Finding(
        id=RULE_ID,
        title=f"{len(slow)} of {len(phases)} steps take {SLOW_STEP_FACTOR:g}x the median step or more",
        severity="",  # left empty: perfkit rates it from the saving
        saving_ns=excess,
        details=grown,
        estimate="The slow steps' time beyond the median step, per step of the run.",
        cites={"phases": [str(n) for n in slow["name"]]},
        evidence={
            "median_step_ns": median,
            "slow_steps": slow["step"].tolist(),
            "excess_per_step_ns": excess,
        },
    )


@perfkit_core.hookimpl
def perfkit_register_advisors(register: Callable[..., None]) -> None:
    register(RULE_ID, rule_slow_steps, "steps much slower than the median step")


@perfkit_core.hookimpl
def perfkit_remedy(finding: Finding, framework: str) -> str | None:
    if finding.rule != RULE_ID:
        return None  # leave the other rules to the framework adapters
    return REMEDIES.get(framework)
