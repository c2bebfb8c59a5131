"""The optimizer finding's saving from an adapter's replay (``perfkit advise --measure``): the
optimizer step over the finding's parameter shapes, as the run ran it and with the remedy,
timed on this machine. torch's and Paddle's replays both state their saving here."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

#: The optimizer replays: steps per timed round, rounds (the median is kept), warm-up steps.
REPLAY_STEPS = 50
REPLAY_ROUNDS = 5
REPLAY_WARMUP = 5

#: Where an optimizer finding's parameter shapes came from (``parameter_shapes_from``): the
#: trace's input shapes of the optimizer's ops, or the model the adapter described.
PARAMETERS_RECORDED = "recorded shapes"
PARAMETERS_DESCRIBED = "model description"
#: ... and the same in words, for the replay's estimate.
SHAPES_SOURCES = {
    PARAMETERS_RECORDED: "recorded parameter shapes",
    PARAMETERS_DESCRIBED: "trainable parameter shapes recorded with the model",
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


def replay_optimizer(
    finding: Any,
    step_times: Callable[[str, list[list[int]]], tuple[float, float, str]],
    what_ran: Callable[[str, float, float, str], str],
) -> dict[str, Any] | None:
    """An adapter's replay of an optimizer finding: ``step_times(cls, shapes)`` gives (ns per
    step as the run ran it, ns per step with the remedy, the remedy's option) over the
    finding's parameter shapes, and ``what_ran(cls, loop_ns, remedy_ns, option)`` says what
    ran, in a clause; the saving is ``replayed_optimizer_saving``'s. None when the finding has
    no shapes or class, or the replay cannot run that class (``ValueError``, ``RuntimeError``,
    ``TypeError``)."""
    shapes = finding.evidence.get("parameter_shapes") or []
    cls = finding.evidence.get("optimizer_class")
    if not shapes or not cls:
        return None
    try:
        loop_ns, remedy_ns, option = step_times(str(cls), shapes)
    except (ValueError, RuntimeError, TypeError):
        return None
    replayed = what_ran(str(cls), loop_ns, remedy_ns, option)
    return replayed_optimizer_saving(finding, loop_ns, remedy_ns, option, replayed)


def steps_in_turn(steps: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """ns per call of each of ``steps`` (an optimizer's ``step`` as the run ran it and with the
    remedy), after ``REPLAY_WARMUP`` calls each: the median of ``REPLAY_ROUNDS`` rounds in which
    each runs ``REPLAY_STEPS`` calls in turn, so that a slow spell of the machine lands on
    both."""
    for step in steps.values():
        for _ in range(REPLAY_WARMUP):
            step()
    rounds: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(REPLAY_ROUNDS):
        for name, step in steps.items():
            start = time.perf_counter_ns()
            for _ in range(REPLAY_STEPS):
                step()
            rounds[name].append((time.perf_counter_ns() - start) / REPLAY_STEPS)
    return {name: statistics.median(values) for name, values in rounds.items()}
