"""Rules that find host-side costs in any run, CPU-only ones included: framework overhead from
many tiny ops and Python time between ops (the optimizer step has its own module)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.advice.basis import (
    Basis,
    recorded_events_per_step,
    step_basis,
)
from perfkit_core.advice.compiled import CompileEstimate, compile_estimate
from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.text import (
    duration_text,
    per_step_text,
    share_text,
)
from perfkit_core.events import intervals, links
from perfkit_core.events.schema import str_values
from perfkit_core.views.anatomy.closures import optimizer_closures, optimizer_rows

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: small-ops: an outermost op shorter than this is "tiny": its time is mostly framework overhead
#: (dispatch, Python binding, allocation), not math.
SMALL_OP_NS = 20_000
#: small-ops: at least this many outermost ops per step ...
SMALL_OPS_MIN_PER_STEP = 100
#: ... and tiny ops together take at least this share of the step.
SMALL_OPS_MIN_STEP_PCT = 10.0
#: python-overhead: the host runs no recorded work (no op, data loading, optimizer step, copy
#: or collective) for at least this share of the step.
PYTHON_OVERHEAD_MIN_STEP_PCT = 25.0
#: python-overhead: host event kinds that are work; time outside all of them is the
#: interpreter's (user annotations and phase spans wrap Python code, so they do not count).
HOST_WORK_KINDS = ("operator", "dataloader", "optimizer", "communication", "memcpy", "runtime")
#: The remedy key of the rules whose remedy is compiling the model (``torch.compile``,
#: ``paddle.jit.to_static``, graph mode): their findings are merged into one.
COMPILE = "compile"


def loading_threads(run: Run) -> list[int]:
    """The ids of the run's host threads that load data for the training thread, by their
    names (``Run.meta["threads"]``), as the run's adapter tells them
    (``perfkit_loading_thread``: Paddle's ``Dataloader_`` threads)."""
    from perfkit_core.plugins import framework_hook

    framework = str(run.meta.get("framework") or "")
    names = run.meta.get("threads") or {}
    if not framework or not isinstance(names, dict) or not names:
        return []
    ask = framework_hook("perfkit_loading_thread", framework)
    found = []
    for tid, name in names.items():
        try:
            number = int(tid)
        except (TypeError, ValueError):
            continue
        try:
            answer = ask(name=str(name), framework=framework)
        except Exception:  # an adapter's error must not lose the advice: a training thread
            answer = None
        if answer is True:
            found.append(number)
    return sorted(found)


def _loading_thread_ids(run: Run) -> list[int]:
    """``loading_threads(run)``, asked of the adapters once per run: the rules that leave
    those threads out share it."""
    return run.cached("advice_loading_threads", lambda: loading_threads(run))


def _outermost_host_ops(run: Run) -> np.ndarray:
    """Mask over the event table: host operators in the steps inside no other operator, of
    every thread (computed once per run: ``outermost_ops`` and
    ``loading_thread_ops_per_step`` split it by thread)."""

    def compute() -> np.ndarray:
        ev = run.events
        kind = str_values(ev["kind"])
        steps = ev["step"].to_numpy() >= 0
        is_op = (kind == "operator") & (ev["stream"].to_numpy() < 0) & steps
        return is_op & ~links.has_ancestor(ev["parent"].to_numpy(), kind == "operator")

    return run.cached("advice_outermost_host_ops", compute)


def outermost_ops(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks over the event table: outermost host operators of the training thread in the
    steps (a loading thread's ops, ``loading_threads``, are left out), those of them inside an
    optimizer span, and those inside a data-loading span. One count of ops per step for every
    rule."""
    cached = ctx.run.cache.get("advice_outermost_ops")
    if cached is not None:
        return cached
    ev = ctx.run.events
    kind = str_values(ev["kind"])
    parent = ev["parent"].to_numpy()
    outer = _outermost_host_ops(ctx.run)
    loading = _loading_thread_ids(ctx.run)
    if loading:
        outer = outer & ~np.isin(ev["tid"].to_numpy(), loading)
    in_optimizer = outer & optimizer_rows(ctx.run)
    in_data = outer & links.has_ancestor(parent, kind == "dataloader")
    found = (outer, in_optimizer, in_data)
    ctx.run.cache.put("advice_outermost_ops", found)
    return found


def loading_thread_ops_per_step(ctx: Context) -> float:
    """The outermost host ops per step of the run's loading threads (``loading_threads``):
    framework ops of the loading, which ``outermost_ops`` leaves out of the training thread's."""
    loading = _loading_thread_ids(ctx.run)
    if not loading:
        return 0.0
    on_loading = np.isin(ctx.run.events["tid"].to_numpy(), loading)
    return float((_outermost_host_ops(ctx.run) & on_loading).sum()) / max(ctx.steps, 1)


def training_ops_per_step(ctx: Context) -> float:
    """The outermost host ops per step (``outermost_ops``): the ops of the training thread
    that each hand the GIL to a loading thread beside it and back, for the input-pipeline and
    the optimizer findings alike."""
    return float(outermost_ops(ctx)[0].sum()) / max(ctx.steps, 1)


def rule_small_ops(ctx: Context) -> Finding | None:
    """In a CPU-only run, at least SMALL_OPS_MIN_PER_STEP outermost ops per step, and those
    shorter than SMALL_OP_NS take at least SMALL_OPS_MIN_STEP_PCT of the step: the step is
    framework overhead (Python, dispatch) more than math. (GPU runs: see launch-bound.) The
    ops of the optimizer step and of data loading are left to their own rules.

    Saving: compiling's (``perfkit_core.advice.compiled``): the eager forward and backward
    less what the compiled graph still runs; the python-overhead finding, which prescribes the
    same remedy, states the same saving.
    """
    if ctx.has_device or not ctx.step_ns:
        return None
    outer, in_optimizer, in_data = outermost_ops(ctx)
    mine = outer & ~in_optimizer & ~in_data
    all_dur = ctx.run.events["dur_ns"].to_numpy()
    dur = all_dur[mine].astype(np.float64)
    if len(dur) == 0:
        return None
    steps = max(ctx.steps, 1)
    per_step = len(dur) / steps
    tiny = dur[dur < SMALL_OP_NS]
    tiny_ns = ctx.per_step(float(tiny.sum()))
    share = 100.0 * tiny_ns / ctx.step_ns
    if per_step < SMALL_OPS_MIN_PER_STEP or share < SMALL_OPS_MIN_STEP_PCT:
        return None
    compiled = compile_estimate(ctx, mine)
    saving = compiled.saving_ns if compiled else 0.0
    elsewhere = int(outer.sum()) / steps - per_step
    return Finding(
        id="small-ops",
        title=f"{per_step:.0f} ops per step, {share_text(len(tiny), len(dur))} of them under {duration_text(SMALL_OP_NS)}: framework overhead, not math",
        severity="",
        saving_ns=saving,
        remedy_key=COMPILE,
        details=[
            f"Outside the optimizer step and data loading, each step ran {per_step:.0f} ops "
            f"(outermost calls; {elsewhere:.0f} more in those); {len(tiny) / steps:.0f} of them "
            f"took under {duration_text(SMALL_OP_NS)}, {per_step_text(tiny_ns, ctx.step_ns)} "
            "together.",
            "Each op costs its dispatch, allocation and autograd bookkeeping whatever its math: "
            "a compiled graph runs a chain of them as one fused kernel.",
        ],
        estimate=compiled.text() if compiled else "",
        within_error=compiled is not None and compiled.within_error,
        evidence={
            **_compile_evidence(compiled),  # first: perfkit compare follows its fusible time
            "ops_per_step": per_step,
            "small_ops_per_step": len(tiny) / steps,
            "small_ops_per_step_ns": tiny_ns,
        },
    )


def _compile_evidence(compiled: CompileEstimate | None) -> dict[str, object]:
    """The compile estimate's terms, for a finding whose remedy is compiling; ``saving_of``
    says the saving is the remedy's, shared by the findings that prescribe it, and
    ``fusible_per_step_ns`` (the ops compiling fuses) is the time ``perfkit compare`` follows to
    tell whether the remedy was applied."""
    if compiled is None:
        return {}
    return {
        "fusible_per_step_ns": compiled.fusible_ns,
        "saving_of": COMPILE,
        "compile_source": compiled.source,
        "eager_ns": compiled.eager_ns,
        "compiled_ns": compiled.compiled_ns,
        "compile_kept_ns": compiled.kept_ns,
        "fused_kernels_per_step": compiled.fused_kernels,
        "fused_flops_per_step": compiled.fused_flops,
        "transcendentals_per_step": compiled.transcendentals,
        "compile_arithmetic": compiled.arithmetic,
        # the call and kernel costs the estimate took, and the factor they are the model's times
        "compile_call_ns": compiled.costs.call_ns,
        "compile_kernel_ns": compiled.costs.kernel_ns,
        "compile_costs_scale": compiled.costs_scale,
    }


def uncovered_step_time(run: Run) -> tuple[float, float]:
    """(time in the steps when no host thread that trains ran recorded work, the part of it
    inside optimizer spans), in ns over all steps, summed over ranks: the Python between ops.
    A loading thread's ops (``loading_threads``) run beside the training thread's Python, not
    in its place, so they do not cover it."""
    ev = run.events
    host = ev["stream"].to_numpy() < 0
    loading = _loading_thread_ids(run)
    if loading:
        host &= ~np.isin(ev["tid"].to_numpy(), loading)
    rank = ev["rank"].to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    work = host & links.kind_is(ev, *(k for k in HOST_WORK_KINDS if k != "optimizer"))
    is_optimizer = links.kind_is(ev, "optimizer")
    # an optimizer step that runs the model inside it is the optimizer's from its update on
    closures = optimizer_closures(run)
    opt_start = start.copy()
    opt_start[list(closures.update_start)] = list(closures.update_start.values())
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
            opt_start[mine & is_optimizer], end[mine & is_optimizer], window
        )
        in_optimizer += intervals.length(optimizer) - intervals.intersect_length(optimizer, busy)
    return uncovered, in_optimizer


def _outside_optimizer_text(recorded: float, unprofiled: float, events: float, b: Basis) -> str:
    """python-overhead's clause on the Python outside the optimizer step: as recorded and, where
    the step timer gave the profiler's cost per event, less that of its ``events`` per step."""
    rest = f"the rest, {duration_text(recorded)} per step as recorded, is in the model and the loop"
    if b.name != "unprofiled":
        return rest + " (the profiler's own cost still in it: no step timer ran)."
    cost = (
        f"the profiler's own cost there (the {events:.0f} events it recorded per step at "
        f"{b.event_cost_ns / 1e3:.1f} us each: {duration_text(events * b.event_cost_ns)})"
    )
    if unprofiled <= 0:
        return rest + f", and is no more than {cost}: without the profiler little of it is left."
    return rest + f": {duration_text(unprofiled)} per step once {cost} is taken out."


def rule_python_overhead(ctx: Context) -> Finding | None:
    """In a CPU-only run, no host thread runs recorded work (ops, data loading, copies,
    collectives) for at least PYTHON_OVERHEAD_MIN_STEP_PCT of the step: the interpreter runs
    the model's Python between ops. (GPU runs: the host waits on the device there; see
    launch-bound and low-gpu-utilization.)

    Saving: compiling's (``perfkit_core.advice.compiled``), shared with small-ops: the Python
    between the model's ops goes with the eager forward and backward.

    Not for runs whose steps run on a framework's executor threads (``meta["compute_threads"]``:
    a jitted JAX step, a TensorFlow graph): there the step's thread waits inside the
    framework's call while the executors run ops and scheduling work the profiler records only
    in part, so time with no recorded work is not the interpreter's.
    """
    if ctx.has_device or not ctx.step_ns or ctx.run.meta.get("compute_threads"):
        return None
    uncovered, in_optimizer = uncovered_step_time(ctx.run)
    uncovered, in_optimizer = ctx.per_step(uncovered), ctx.per_step(in_optimizer)
    loaders = _loading_thread_ids(ctx.run)
    share = 100.0 * uncovered / ctx.step_ns
    if share < PYTHON_OVERHEAD_MIN_STEP_PCT:
        return None
    basis = step_basis(ctx)
    events = recorded_events_per_step(ctx, ~optimizer_rows(ctx.run))
    # The profiler records at each event's edges, between the ops: its cost lands in this gap.
    python = basis.corrected(uncovered - in_optimizer, events)
    outer, in_optimizer_ops, in_data = outermost_ops(ctx)
    compiled = compile_estimate(ctx, outer & ~in_optimizer_ops & ~in_data)
    saving = compiled.saving_ns if compiled else 0.0
    return Finding(
        id="python-overhead",
        title=f"Python runs {share:.1f}% of each step between ops",
        severity="",
        saving_ns=saving,
        remedy_key=COMPILE,
        details=[
            f"For {per_step_text(uncovered, ctx.step_ns)} no host thread "
            + ("that trains " if loaders else "")
            + "ran an op, data loading or a copy"
            + (" (the loading thread's own ops ran beside that time)" if loaders else "")
            + ": the interpreter was running the model's Python (module calls, hooks, "
            "bookkeeping) between ops.",
            f"{duration_text(in_optimizer)} per step of it is inside the optimizer step, which "
            "the optimizer's own remedy addresses; "
            + _outside_optimizer_text(uncovered - in_optimizer, python, events, basis),
        ],
        # the compile estimate names its own basis (its kept ops scaled, not corrected)
        estimate=compiled.text() if compiled else basis.text(),
        within_error=compiled is not None and compiled.within_error,
        evidence={
            **_compile_evidence(compiled),  # first: perfkit compare follows its fusible time
            "basis": basis.name,
            "basis_step_ns": basis.step_ns,
            "python_per_step_ns": uncovered,
            "python_pct": share,
            "python_in_optimizer_per_step_ns": in_optimizer,
            "python_outside_optimizer_ns": python,
        },
    )
