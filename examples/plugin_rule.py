"""A perfkit plugin adding the ``optimizer-share`` advice rule, with a remedy per framework.

Register it under the entry-point group ``perfkit`` of your distribution (see the plugins
guide), or by hand for one session::

    import perfkit_core
    import plugin_rule

    perfkit_core.get_plugin_manager().register(plugin_rule, name="optimizer_share")
"""

from __future__ import annotations

from collections.abc import Callable

import perfkit_core
from perfkit_core.advice import Context, Finding

RULE_ID = "optimizer-share"
#: The optimizer step takes at least this share of step time.
OPTIMIZER_MIN_PCT = 8.0
#: Assumed speed-up of a fused (multi-tensor) optimizer step over a per-parameter loop.
FUSED_SPEEDUP = 2.0

REMEDIES = {
    "torch": "Use a fused optimizer: torch.optim.AdamW(model.parameters(), fused=True)",
    "paddle": "Update all parameters at once: paddle.optimizer.Adam(..., use_multi_tensor=True)",
}


def rule_optimizer_share(ctx: Context) -> Finding | None:
    """The optimizer step takes at least OPTIMIZER_MIN_PCT of step time.

    Saving: the optimizer time times (1 - 1/FUSED_SPEEDUP).
    """
    phases = ctx.run.summary("model").set_index("name")
    optimizer_ns = float(phases.loc["optimization", "cpu_total_ns"])
    share = 100.0 * optimizer_ns / ctx.step_ns if ctx.step_ns else 0.0
    if share < OPTIMIZER_MIN_PCT:
        return None
    return Finding(
        id=RULE_ID,
        title=f"The optimizer step takes {share:.1f}% of each step",
        severity="",  # left empty: perfkit rates it from the saving
        saving_ns=optimizer_ns * (1.0 - 1.0 / FUSED_SPEEDUP),
        evidence={"optimizer_ns": optimizer_ns, "optimizer_pct": share},
    )


@perfkit_core.hookimpl
def perfkit_register_advisors(register: Callable[..., None]) -> None:
    register(RULE_ID, rule_optimizer_share, "the optimizer step takes a large share of each step")


@perfkit_core.hookimpl
def perfkit_remedy(finding: Finding, framework: str) -> str | None:
    if finding.rule != RULE_ID:
        return None  # leave the other rules to the framework adapters
    return REMEDIES.get(framework)
