"""The optimizer finding's saving from an adapter's replay (``perfkit advise --measure``): the
optimizer step over the finding's parameter shapes, as the run ran it and with the remedy,
timed on this machine. torch's and Paddle's replays both state their saving here."""

from __future__ import annotations

from typing import Any

#: Where ``parameter_shapes_from`` says the replayed shapes came from, in words.
SHAPES_SOURCES = {
    "recorded shapes": "recorded parameter shapes",
    "model description": "trainable parameter shapes recorded with the model",
}


def replayed_optimizer_saving(
    finding: Any, loop_ns: float, remedy_ns: float, option: str, replayed: str
) -> dict[str, Any]:
    """``perfkit_measure_saving``'s answer for an optimizer finding whose step a replay timed at
    ``loop_ns`` as the run ran it and ``remedy_ns`` with the remedy (``option``), ns per step;
    ``replayed`` says what ran, in a clause. Where the step timer timed the training loop's
    own optimizer step without the profiler, the saving is that time made as much faster as the
    replay was (the replay gives the ratio, the real loop the time); else the replay's
    difference per step."""
    timed = finding.evidence.get("optimizer_unprofiled_per_step_ns")
    if finding.evidence.get("optimizer_unprofiled_from") == "timed" and loop_ns > 0:
        saving = max(float(timed) * (1.0 - remedy_ns / loop_ns), 0.0)
        how = (
            f"{replayed}: {loop_ns / max(remedy_ns, 1.0):.2f}x faster. The optimizer step timed "
            f"in training without the profiler ({float(timed) / 1e6:.3f} ms) made that much "
            "faster."
        )
    else:
        saving = max(loop_ns - remedy_ns, 0.0)
        how = f"{replayed}, the difference per step."
    return {
        "saving_ns": saving,
        "estimate": how,
        "evidence": {
            "measured": "replay",
            "replay_loop_ns": loop_ns,
            "replay_remedy_ns": remedy_ns,
            "replay_option": option,
        },
    }


def shapes_text(finding: Any) -> str:
    """What the finding's parameter shapes are, in words: "the 18 recorded parameter shapes"."""
    shapes = finding.evidence.get("parameter_shapes") or []
    source = SHAPES_SOURCES.get(
        str(finding.evidence.get("parameter_shapes_from") or ""), "recorded parameter shapes"
    )
    return f"the {len(shapes)} {source}"
