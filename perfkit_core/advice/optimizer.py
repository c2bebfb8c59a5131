"""The optimizer finding's saving from an adapter's replay (``perfkit advise --measure``): the
optimizer step over the finding's parameter shapes, as the run ran it and with the remedy,
timed on this machine. torch's and Paddle's replays both state their saving here."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from perfkit_core.advice.loader import (
    LOADING_OP_SHARE,
    handover_exceeds_loading,
    handover_ns,
)

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


#: The ops per step a multi-tensor optimizer runs where the per-parameter loop ran one or more
#: per parameter: one merged op per group of parameters of one dtype (Paddle 3.3.1's
#: ``merged_adam_``, ``merged_momentum_``; a float32 model has one group). On
#: ``bench/bench_advice.py``'s ``paddle-mixed`` the step's outermost ops went from 274 to 209
#: with ``use_multi_tensor=True``: the 66 ``adam_`` calls became one.
REMEDY_OPS_PER_STEP = 1


def thread_figures(evidence: dict[str, Any]) -> tuple[float, float, float, float] | None:
    """(the loading thread's CPU time per step, the training thread's, the training thread's ops
    per step, the optimizer's ops per step) of an optimizer finding whose step ran beside a
    loading thread of the training process (the optimizer rule's evidence); None when it did
    not, or a figure is missing or not a positive number."""
    keys = (
        "loading_thread_cpu_per_step_ns",
        "training_cpu_per_step_ns",
        "training_ops_per_step",
        "optimizer_ops_per_step",
    )
    values = [evidence.get(k) for k in keys]
    if not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        for v in values
    ):
        return None
    loading, training, ops, optimizer_ops = (float(v) for v in values)  # type: ignore[arg-type]
    return loading, training, ops, optimizer_ops


def handover_saving(
    figures: tuple[float, float, float, float], op_ns: float
) -> tuple[float, float]:
    """(the step time, ns, that an optimizer's remedy saves beside a loading thread by handing
    the GIL over less often; the ops it removes per step), from the finding's
    ``thread_figures``: its ops less ``REMEDY_OPS_PER_STEP`` no longer hand the GIL to the
    thread and back, each costing the training thread ``op_ns`` of CPU and the loading thread
    its share, as the input-pipeline finding's split of the same step counts them
    (``handover_ns``, capped at either thread's CPU time: the removed ops' share of it)."""
    loading, training, ops, optimizer_ops = figures
    removed = min(max(optimizer_ops - REMEDY_OPS_PER_STEP, 0.0), ops)
    return sum(handover_ns(loading, training, ops, op_ns)) * removed / ops, removed


def replayed_optimizer_saving(
    finding: Any,
    loop_ns: float,
    remedy_ns: float,
    option: str,
    replayed: str,
    op_ns: float | None = None,
) -> dict[str, Any]:
    """``perfkit_measure_saving``'s answer for an optimizer finding whose step a replay timed at
    ``loop_ns`` as the run ran it and ``remedy_ns`` with the remedy (``option``), ns per step;
    ``replayed`` says what ran, in a clause. Where the step timer timed the training loop's
    own optimizer step without the profiler, the saving is that time made as much faster as the
    replay was (the replay gives the ratio, the real loop the time); else the replay's
    difference per step.

    Beside a loading thread (``thread_figures``) whose cost per op of the training thread a
    replay timed (``op_ns``), the optimizer's timed time also holds the thread's turns with the
    GIL, so it is not scaled: the saving is the replay's difference per step (the optimizer's
    own work) plus ``handover_saving`` at ``op_ns``, which goes with the thread when loader
    workers take its loading over (``evidence["handover_saving_ns"]``: the combined saving
    counts it once). Where those hand-overs at ``op_ns`` would cost at least the loading
    thread's whole CPU time (``handover_exceeds_loading``: a thread that runs framework ops of
    its own), the two cannot be told apart, and the saving is the timed time made faster, as
    without a thread."""
    evidence = finding.evidence
    figures = thread_figures(evidence)
    capped = (
        op_ns is not None
        and figures is not None
        and handover_exceeds_loading(figures[0], figures[2], op_ns)
    )
    if op_ns is not None and figures is not None and not capped:
        handover, removed = handover_saving(figures, op_ns)
        own = max(loop_ns - remedy_ns, 0.0)
        return {
            "saving_ns": own + handover,
            "estimate": (
                f"{replayed}, the difference per step: {own / 1e6:.3f} ms of the optimizer's "
                f"own work. A loading thread ran beside the training thread, so the optimizer "
                f"step timed in training holds that thread's turns with the GIL too and is not "
                f"scaled by the replay. Each of the {removed:.0f} ops per step the remedy "
                f"removes handed the GIL to that thread and back, at {op_ns / 1e3:.1f} us of "
                f"CPU to the training thread (measured on this machine: its CPU per op of a "
                "replayed training step beside a single-process DataLoader's loading thread) and "
                f"{LOADING_OP_SHARE:g} times that to the loading thread: "
                f"{handover / 1e6:.3f} ms per step more, which goes with the thread "
                f"once loader workers take its loading over."
            ),
            "evidence": {
                "measured": "replay",
                "replay_loop_ns": loop_ns,
                "replay_remedy_ns": remedy_ns,
                "replay_option": option,
                "replay_thread_op_ns": op_ns,
                "handover_ops_removed": removed,
                "handover_saving_ns": handover,
            },
        }
    if capped and figures is not None and op_ns is not None:
        replayed += (
            f". A loading thread ran beside the training thread, but at {op_ns / 1e3:.1f} us "
            f"an op (measured on this machine) its hand-overs of the GIL would cost at least "
            f"its whole CPU time ({figures[0] / 1e6:.3f} ms per step), so they cannot be told "
            "from its loading"
        )
    timed = evidence.get("optimizer_unprofiled_per_step_ns")
    if evidence.get("optimizer_unprofiled_from") == "timed" and loop_ns > 0:
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
            # beside a loading thread too cheap to tell from its hand-overs
            **({"replay_thread_op_ns": op_ns, "handovers_capped": True} if capped else {}),
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
    thread_op_ns: Callable[[], float] | None = None,
) -> dict[str, Any] | None:
    """An adapter's replay of an optimizer finding: ``step_times(cls, shapes)`` gives (ns per
    step as the run ran it, ns per step with the remedy, the remedy's option) over the
    finding's parameter shapes, and ``what_ran(cls, loop_ns, remedy_ns, option)`` says what
    ran, in a clause; ``thread_op_ns()``, where the adapter's loader can run a loading thread
    beside training, what each op of the training thread costs beside it (called only for a
    finding whose step ran beside one). The saving is ``replayed_optimizer_saving``'s. None
    when the finding has no shapes or class, or a replay cannot run (``ValueError``,
    ``RuntimeError``, ``TypeError``, ``OSError``)."""
    shapes = finding.evidence.get("parameter_shapes") or []
    cls = finding.evidence.get("optimizer_class")
    if not shapes or not cls:
        return None
    try:
        loop_ns, remedy_ns, option = step_times(str(cls), shapes)
        beside = thread_figures(finding.evidence) is not None
        op_ns = thread_op_ns() if thread_op_ns is not None and beside else None
    except (ValueError, RuntimeError, TypeError, OSError):
        return None
    replayed = what_ran(str(cls), loop_ns, remedy_ns, option)
    return replayed_optimizer_saving(finding, loop_ns, remedy_ns, option, replayed, op_ns)


def steps_in_turn(
    steps: dict[str, Callable[[], Any]],
    *,
    calls: int = REPLAY_STEPS,
    rounds: int = REPLAY_ROUNDS,
    warmup: int = REPLAY_WARMUP,
    sync: Callable[[], Any] | None = None,
) -> dict[str, float]:
    """ns per call of each of ``steps`` (a replay's step as the run ran it and with the remedy),
    after ``warmup`` calls each: the median of ``rounds`` rounds in which each runs ``calls``
    calls in turn, so that a slow spell of the machine lands on both. ``sync`` (a device's
    synchronize) is called before and after each timed run of calls, so that work a step
    queued on a device is timed with it."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    timed: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            if sync is not None:
                sync()
            start = time.perf_counter_ns()
            for _ in range(calls):
                step()
            if sync is not None:
                sync()
            timed[name].append((time.perf_counter_ns() - start) / calls)
    return {name: statistics.median(values) for name, values in timed.items()}
