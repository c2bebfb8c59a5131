"""Rules that find host-side costs in any run, CPU-only ones included: the optimizer step,
framework overhead from many tiny ops, and Python time between ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.advice.engine import Context, Finding, duration_text, share_text
from perfkit_core.events import intervals, links

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: optimizer: the optimizer step takes at least this share of step time.
OPTIMIZER_MIN_STEP_PCT = 15.0
#: optimizer: assumed speed-up of a fused or multi-tensor optimizer over the per-parameter loop.
#: Conservative: measured on the CPU demo MLP (bench/bench_optimizer.py, several runs), torch
#: Adam with foreach=True ran 1.45-1.6x and fused=True 3.3-3.7x as fast as foreach=False, Paddle
#: Adam with use_multi_tensor=True 1.7-2.4x as fast as without.
OPTIMIZER_FUSED_SPEEDUP = 1.4
#: small-ops: an outermost op shorter than this is "tiny": its time is mostly framework overhead
#: (dispatch, Python binding, allocation), not math.
SMALL_OP_NS = 20_000
#: small-ops: at least this many outermost ops per step ...
SMALL_OPS_MIN_PER_STEP = 100
#: ... and tiny ops together take at least this share of step time.
SMALL_OPS_MIN_STEP_PCT = 10.0
#: small-ops: the per-op overhead a compiled graph saves is taken as this percentile of the
#: outermost ops' durations (the floor: an op that does no math still costs that much).
SMALL_OPS_OVERHEAD_PERCENTILE = 10.0
#: python-overhead: the host runs no recorded work (no op, data loading, optimizer step, copy
#: or collective) for at least this share of step time.
PYTHON_OVERHEAD_MIN_STEP_PCT = 25.0
#: python-overhead: host event kinds that are work; time outside all of them is the
#: interpreter's (user annotations and phase spans wrap Python code, so they do not count).
HOST_WORK_KINDS = ("operator", "dataloader", "optimizer", "communication", "memcpy", "runtime")


def rule_optimizer(ctx: Context) -> Finding | None:
    """The optimizer step (torch ``Optimizer.step``, Paddle's optimization span) takes at least
    OPTIMIZER_MIN_STEP_PCT of step time.

    Saving: the optimizer time times (1 - 1/OPTIMIZER_FUSED_SPEEDUP), the speed-up a fused or
    multi-tensor implementation gives at least on the measured models.
    """
    if not ctx.step_ns:
        return None
    model = ctx.run.summary("model").set_index("name")
    optimizer = float(model.loc["optimization", "cpu_total_ns"])
    share = 100.0 * optimizer / ctx.step_ns
    if share < OPTIMIZER_MIN_STEP_PCT:
        return None
    ev = ctx.run.events
    in_optimizer = (
        links.has_ancestor(ev["parent"].to_numpy(), (ev["kind"] == "optimizer").to_numpy())
        & (ev["kind"] == "operator").to_numpy()
    )
    ops_per_step = int(in_optimizer.sum()) / max(ctx.steps, 1)
    return Finding(
        id="optimizer",
        title=f"The optimizer step takes {share:.1f}% of each step",
        severity="",
        saving_ns=optimizer * (1.0 - 1.0 / OPTIMIZER_FUSED_SPEEDUP),
        details=[
            f"The optimizer ran {duration_text(optimizer)} of {duration_text(ctx.step_ns)} of "
            f"steps ({share:.1f}%), issuing {ops_per_step:.0f} ops per step: a few per "
            "parameter tensor, the pattern a fused optimizer replaces with one op per group."
        ],
        estimate=(
            f"The optimizer time, {OPTIMIZER_FUSED_SPEEDUP:g}x faster with a fused or "
            "multi-tensor implementation (the smallest speed-up measured in bench/bench_optimizer.py)."
        ),
        evidence={
            "optimizer_ns": optimizer,
            "optimizer_pct": share,
            "optimizer_ops_per_step": ops_per_step,
            "has_device": ctx.has_device,
        },
    )


def rule_small_ops(ctx: Context) -> Finding | None:
    """In a CPU-only run, at least SMALL_OPS_MIN_PER_STEP outermost ops per step, and those
    shorter than SMALL_OP_NS take at least SMALL_OPS_MIN_STEP_PCT of step time: the step is
    framework overhead (Python, dispatch) more than math. (GPU runs: see launch-bound.)

    Saving: the tiny ops' count times the per-op floor (the SMALL_OPS_OVERHEAD_PERCENTILE
    percentile of the outermost ops' durations), at most the tiny ops' time: a compiled graph
    runs them as a few fused ops, without the per-op overhead.
    """
    if ctx.has_device or not ctx.step_ns:
        return None
    ev = ctx.run.events
    kind = ev["kind"].to_numpy()
    is_op = (kind == "operator") & (ev["stream"].to_numpy() < 0) & (ev["step"].to_numpy() >= 0)
    outer = is_op & ~links.has_ancestor(ev["parent"].to_numpy(), kind == "operator")
    dur = ev["dur_ns"].to_numpy()[outer].astype(np.float64)
    if len(dur) == 0:
        return None
    per_step = len(dur) / max(ctx.steps, 1)
    tiny = dur[dur < SMALL_OP_NS]
    tiny_ns = float(tiny.sum())
    share = 100.0 * tiny_ns / ctx.step_ns
    if per_step < SMALL_OPS_MIN_PER_STEP or share < SMALL_OPS_MIN_STEP_PCT:
        return None
    floor = float(np.percentile(dur, SMALL_OPS_OVERHEAD_PERCENTILE))
    saving = min(len(tiny) * floor, tiny_ns)
    return Finding(
        id="small-ops",
        title=f"{per_step:.0f} ops per step, {share_text(len(tiny), len(dur))} of them under {duration_text(SMALL_OP_NS)}: framework overhead, not math",
        severity="",
        saving_ns=saving,
        details=[
            f"The steps ran {per_step:.0f} ops each (outermost calls); {len(tiny)} of them "
            f"took under {duration_text(SMALL_OP_NS)}, {duration_text(tiny_ns)} together "
            f"({share:.1f}% of step time).",
            f"Even the fastest ops cost {duration_text(floor)} each (the "
            f"{SMALL_OPS_OVERHEAD_PERCENTILE:g}th percentile): per-op overhead that a compiled "
            "graph pays once per fused group instead.",
        ],
        estimate=(
            "The tiny ops' count times the per-op floor, at most their time: the overhead a "
            "compiled graph no longer pays per op."
        ),
        evidence={
            "ops_per_step": per_step,
            "small_ops": len(tiny),
            "small_ops_ns": tiny_ns,
            "per_op_floor_ns": floor,
        },
    )


def uncovered_step_time(run: Run) -> tuple[float, float]:
    """(time in the steps when no host thread ran recorded work, the part of it inside optimizer
    spans), in ns, summed over ranks: the Python between ops."""
    ev = run.events
    kind = ev["kind"].to_numpy()
    host = ev["stream"].to_numpy() < 0
    rank = ev["rank"].to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    work = host & np.isin(kind, HOST_WORK_KINDS) & (kind != "optimizer")
    uncovered = in_optimizer = 0.0
    for r in np.unique(rank):
        window, recorded = intervals.step_window(run, int(r))
        if not recorded:
            continue
        mine = rank == r
        busy = intervals.merge_intervals(start[mine & work], end[mine & work])
        total = intervals.length(window)
        covered = intervals.intersect_length(window, busy)
        uncovered += total - covered
        optimizer = intervals.clip_to(
            start[mine & (kind == "optimizer")], end[mine & (kind == "optimizer")], window
        )
        in_optimizer += intervals.length(optimizer) - intervals.intersect_length(optimizer, busy)
    return uncovered, in_optimizer


def rule_python_overhead(ctx: Context) -> Finding | None:
    """In a CPU-only run, no host thread runs recorded work (ops, data loading, copies,
    collectives) for at least PYTHON_OVERHEAD_MIN_STEP_PCT of step time: the interpreter runs
    the model's Python between ops. (GPU runs: the host waits on the device there; see
    launch-bound and low-gpu-utilization.)

    Saving: the uncovered time outside optimizer steps (the optimizer rule counts those), an
    upper bound: a compiled graph removes the Python inside the model, not the loop's own code.

    Not for runs whose steps run on a framework's executor threads (``meta["compute_threads"]``:
    a jitted JAX step, a TensorFlow graph): there the step's thread waits inside the
    framework's call while the executors run ops and scheduling work the profiler records only
    in part, so time with no recorded work is not the interpreter's.
    """
    if ctx.has_device or not ctx.step_ns or ctx.run.meta.get("compute_threads"):
        return None
    uncovered, in_optimizer = uncovered_step_time(ctx.run)
    share = 100.0 * uncovered / ctx.step_ns
    if share < PYTHON_OVERHEAD_MIN_STEP_PCT:
        return None
    saving = uncovered - in_optimizer
    return Finding(
        id="python-overhead",
        title=f"Python runs {share:.1f}% of each step between ops",
        severity="",
        saving_ns=saving,
        details=[
            f"For {duration_text(uncovered)} of {duration_text(ctx.step_ns)} of steps "
            f"({share:.1f}%) no host thread ran an op, data loading or a copy: the interpreter "
            "was running the model's Python (module calls, hooks, bookkeeping) between ops.",
            f"{duration_text(in_optimizer)} of it is inside the optimizer step (see the "
            "optimizer finding, if any); the rest is in the model and the loop.",
        ],
        estimate=(
            "Upper bound: the Python time outside the optimizer step; a compiled graph removes "
            "the part inside the model, not the training loop's own code."
        ),
        evidence={
            "python_ns": uncovered,
            "python_pct": share,
            "python_in_optimizer_ns": in_optimizer,
        },
    )
