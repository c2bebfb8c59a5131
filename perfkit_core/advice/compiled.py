"""What compiling the model (``torch.compile``, ``paddle.jit.to_static``) saves per step: the
model's forward and backward as the eager program runs them, less what the compiled graph still
runs.

- **Eager** (``eager_ns``): the step timer's ``forward`` and ``backward`` phases (measured
  without the profiler) when an adapter timed them; else the layer spans' and backward nodes'
  recorded time, less the profiler's cost per event (``basis``).
- **Compiled** (``compiled_ns``, ``compiled_step_ns``, at the costs of a ``CompileCosts``):
  - the units compiling keeps as they are (``KEPT_FAMILIES``: matmuls, convolutions,
    attention, embeddings, the loss, gradient accumulation) at their recorded time scaled by
    the unprofiled step over the profiled one (``Basis.scaled``: the average cost per event,
    which the Python between tiny ops inflates, would take all of their time out), and, when
    the eager time is the timed phases, the loop's own ops outside the model's layers (making
    the batch, the loss);
  - one fused kernel per run of the other units (norms, activations, elementwise and layout
    ops) in the forward and in the backward, ``FUSED_KERNEL_NS`` each (a run of layout ops
    only, a transpose between two matmuls, needs none);
  - the arithmetic those kernels still do, on a run whose ops ran on the CPU: the fused ops'
    FLOPs (perfkit's op cost model, from the recorded shapes) at ``FUSED_FLOP_NS`` each, and
    each element of a forward transcendental function (``TRANSCENDENTAL_OPS``: tanh, exp,
    GELU...) at ``TRANSCENDENTAL_NS`` more, its backward included. Compiled CPU code computes
    these far slower than the eager kernels do (tanh: 5.3 ns an element against 0.65 ns), so a
    chain of them over large tensors can be slower compiled;
  - the compiled graph's own call overhead, ``COMPILED_CALL_NS`` per forward and backward.
- The saving is eager less compiled, at least 0: a model whose layers are a few large matmuls
  gains nothing, one of many tiny ops between them gains most of their time. Only for the
  frameworks in ``MODELLED_FRAMEWORKS``; for the others the saving is 0 and the finding says
  why.

The four costs are what ``perfkit advise --measure`` measures
(``perfkit_torch.replay_compile.compile_costs``: small models compiled by torch 2.13's inductor
and timed), from replays on an idle 2-core AMD EPYC KVM machine (torch 2.13). The call and
kernel costs are the CPU's cost of dispatch, autograd bookkeeping and Python, so where the
step timer timed an eager forward and backward of a tiny model on the machine that trained
(``eager_pass_ns``), they are scaled by it over the same pass on that machine
(``REFERENCE_EAGER_PASS_NS``: ``run_compile_costs``). A 2-core Xeon KVM machine with AVX-512,
whose eager steps of tiny ops ran 1.8 times as fast, timed a call at 0.18 ms, a kernel at
8.5 us, a FLOP at 0.13 ns and a transcendental element at 5.3 ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.advice.basis import recorded_events_per_step, step_basis, timed_phase
from perfkit_core.advice.text import duration_text
from perfkit_core.capture.machine_costs import EAGER_PASS_KEY, META_KEY, finite_number
from perfkit_core.events import links
from perfkit_core.views.anatomy.structure import structure
from perfkit_core.views.costmodel.family_rules import family_of
from perfkit_core.views.costs import run_costs

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.advice.engine import Context
    from perfkit_core.events.run import Run

#: Op families a compiled graph runs as the eager program does (a library kernel per op, or
#: work outside the graph): only the others fuse.
KEPT_FAMILIES = frozenset(
    {
        "matmul",
        "conv",
        "attention",
        "embedding",
        "rnn",
        "loss",
        "autograd",
        "optimizer",
        "communication",
        "dataloader",
        "memcpy",
    }
)
#: The frameworks whose compiler the model describes (torch's inductor). Paddle's
#: ``paddle.jit.to_static`` made the CPU loops of ``bench/bench_advice.py`` slower (a chain of
#: 60 elementwise ops by 13 to 37% of the step, the narrow MLP by 17%): it runs the same
#: kernels without fusing them on the CPU, so no saving is promised for it.
MODELLED_FRAMEWORKS = frozenset({"torch"})
#: What the compiled model costs per step besides its kept ops and fused kernels, ns: guards,
#: the autograd function around the graph and its runtime wrappers, in the forward and the
#: backward, and the per-op bookkeeping around it that the kept ops' corrected time misses
#: (gradient accumulation, the loss). Replays on the idle machine (``REFERENCE_EAGER_PASS_NS``):
#: 0.35 to 0.36 ms in three processes (0.42 to 0.64 ms in slow spells of the machine, when its
#: eager pass took 0.33 to 0.55 ms).
COMPILED_CALL_NS = 355_000.0
#: The cost of one fused kernel that replaces a run of elementwise, norm and layout ops, its
#: arithmetic aside, ns. Replays: 9.3 to 11.0 us.
FUSED_KERNEL_NS = 10_000.0
#: What a compiled CPU kernel takes per FLOP of the ops it fused (perfkit's op cost model: one
#: per element of an elementwise op, a few for norms), ns: a chain of additions,
#: multiplications and ReLUs and its backward. Replays: 0.19 to 0.20 ns.
FUSED_FLOP_NS = 0.195
#: What each element of a forward transcendental function costs a compiled CPU kernel beyond
#: its FLOP, ns, its backward included: tanh, timed beside the same chain with ReLU. Replays:
#: 8.2 to 8.3 ns (the eager kernel: 0.65 ns on the Xeon machine, where this cost was 5.3 ns).
#: Both on one intra-op thread.
TRANSCENDENTAL_NS = 8.2
#: The forward ops whose elements cost ``TRANSCENDENTAL_NS`` (names without ``aten::`` and an
#: in-place ``_``), and the two backward ops that compute one (GELU's and SiLU's).
TRANSCENDENTAL_OPS = frozenset(
    {
        "tanh",
        "sigmoid",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "erf",
        "erfc",
        "erfinv",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "gelu",
        "silu",
        "mish",
        "softplus",
        "elu",
        "selu",
        "celu",
        "log_sigmoid_forward",
        "gelu_backward",
        "silu_backward",
    }
)


@dataclass(frozen=True)
class CompileCosts:
    """What a compiled forward and backward costs on a machine, besides its kept ops, ns: the
    graph's call overhead, a fused kernel, a FLOP of the fused ops, and a transcendental
    element (``TRANSCENDENTAL_OPS``) beyond its FLOP."""

    call_ns: float = COMPILED_CALL_NS
    kernel_ns: float = FUSED_KERNEL_NS
    flop_ns: float = FUSED_FLOP_NS
    transcendental_ns: float = TRANSCENDENTAL_NS

    def arithmetic_ns(self, fused_flops: float, transcendentals: float) -> float:
        """What the fused kernels' arithmetic costs: ``fused_flops`` FLOPs and
        ``transcendentals`` transcendental elements, ns."""
        return fused_flops * self.flop_ns + transcendentals * self.transcendental_ns


#: The model's costs (the constants above).
MODEL_COSTS = CompileCosts()

#: What an eager forward and backward of the replay's one-block model
#: (``perfkit_torch.replay_compile.eager_pass_ns``) took on the machine the constants above
#: were measured on, ns: 0.30 to 0.31 ms at its usual speed (0.33 to 0.56 ms in its slow
#: spells). A run whose step timer timed the same pass where it trained (``eager_pass_ns`` in
#: its record) gets the call and kernel costs scaled by its pass over this one
#: (``run_compile_costs``). The Xeon machine's call (0.18 ms) is what that scaling predicts
#: from its eager steps of tiny ops, 1.8 times as fast, within 10%; its kernel (8.5 us) is 50%
#: above it, a few us per kernel.
REFERENCE_EAGER_PASS_NS = 305_000.0


def run_compile_costs(run: Run) -> tuple[CompileCosts, float | None]:
    """(the compile costs the estimate of ``run`` takes, the factor its call and kernel costs
    were scaled by, or None): ``MODEL_COSTS`` with ``call_ns`` and ``kernel_ns`` times the
    eager pass the step timer timed on the machine that trained over
    ``REFERENCE_EAGER_PASS_NS`` (both are the CPU's cost of dispatching tiny ops, of
    autograd's bookkeeping and of Python; a FLOP and a transcendental element are the
    compiled code's arithmetic, which that pass does not time, and stay the model's); the
    model's costs unscaled where the step timer timed no pass."""
    record = run.meta.get(META_KEY) or {}
    timed = finite_number(record.get(EAGER_PASS_KEY))
    if timed is None or timed <= 0 or REFERENCE_EAGER_PASS_NS <= 0:
        return MODEL_COSTS, None
    scale = timed / REFERENCE_EAGER_PASS_NS
    costs = replace(
        MODEL_COSTS, call_ns=MODEL_COSTS.call_ns * scale, kernel_ns=MODEL_COSTS.kernel_ns * scale
    )
    return costs, scale


#: Ops of code torch.compile already compiled (a region, its autograd function and backward,
#: its guard check): kept as they are, so a compiled run is not promised its own compilation.
COMPILED_PREFIXES = (
    "Torch-Compiled Region",
    "CompiledFunction",
    "TorchDynamo Cache Lookup",
    "## Call CompiledFxGraph",
)
#: Fusible families a compiled graph runs for free (views, transposes: no kernel of their own).
FREE_FAMILIES = frozenset({"layout"})


def compiled_step_ns(
    kept_ns: float,
    fused_kernels: float,
    costs: CompileCosts = MODEL_COSTS,
    *,
    fused_flops: float = 0.0,
    transcendentals: float = 0.0,
) -> float:
    """What the compiled forward and backward cost per step (ns): the kept ops' time, the
    fused kernels, their ``fused_flops`` and ``transcendentals`` (elements of
    ``TRANSCENDENTAL_OPS``) at ``costs``, and the compiled graph's call."""
    return (
        kept_ns
        + fused_kernels * costs.kernel_ns
        + costs.arithmetic_ns(fused_flops, transcendentals)
        + costs.call_ns
    )


#: The compile model's error on the compiled forward and backward, as a share of it: on
#: bench_advice.py's CPU scenarios it put the compiled step of a narrow MLP 5% above what
#: compiling delivered and that of a chain of tiny ops about 10% below. A saving smaller than
#: this share of the compiled step is within that error.
COMPILE_ERROR = 0.10


def compile_verdict(eager_ns: float, compiled_ns: float) -> str:
    """A closing sentence, with a leading space, for a compile estimate that does not promise
    a clear saving: the compiled forward and backward (``compiled_ns``) cost more than the
    eager ones (``eager_ns``), or less by under ``COMPILE_ERROR`` of the compiled step (the
    step's Python overhead is then in ops a compiled graph keeps, or too little to outweigh
    its call and kernel costs); "" when the saving is larger than that."""
    lost = compiled_ns - eager_ns
    if eager_ns <= 0:
        return ""
    if lost > 0:
        return (
            f" Compiled, the forward and backward would be {duration_text(lost)} per step slower "
            f"({100 * lost / eager_ns:.0f}% of the eager time), so compiling is not expected "
            "to pay here: keep the model eager, or try it and check the steps before and after "
            "with perfkit compare."
        )
    if -lost < COMPILE_ERROR * compiled_ns:
        return (
            f" Compiled, the forward and backward would cost about what they cost eager "
            f"({compiled_ns / 1e6:.2f} against {eager_ns / 1e6:.2f} ms): a difference within "
            f"the model's error ({100 * COMPILE_ERROR:.0f}% of the compiled step), so compiling "
            "may not pay here: try it only with perfkit compare on the steps before and after."
        )
    return ""


@dataclass
class CompileEstimate:
    """One compile saving (ns per step) and the terms it came from."""

    saving_ns: float
    eager_ns: float
    kept_ns: float
    fused_kernels: float
    #: "timed": the step timer's phases; "recorded": the profiled spans, corrected;
    #: "unmodelled": a framework whose compiler the constants do not describe (no saving)
    source: str
    #: The recorded time of the ops compiling fuses, scaled like the kept ops', ns per step:
    #: what a compiled run no longer records (``perfkit compare`` tells by it that the model
    #: was compiled).
    fusible_ns: float = 0.0
    #: How the kept ops' recorded time was brought to the step without the profiler, for text.
    kept_basis: str = "their recorded time"
    #: The fused ops' FLOPs and transcendental elements per step (0 on a run whose ops ran on
    #: a device, or whose profile recorded no shapes: ``arithmetic`` says which).
    fused_flops: float = 0.0
    transcendentals: float = 0.0
    arithmetic: str = "counted"
    costs: CompileCosts = field(default=MODEL_COSTS)
    #: The factor ``costs``' call and kernel costs are the model's times (``run_compile_costs``:
    #: the eager pass timed where the run trained over the reference machine's); None when
    #: they are the model's as they are.
    costs_scale: float | None = None

    @property
    def compiled_ns(self) -> float:
        """What the compiled model is expected to cost per step, ns."""
        return compiled_step_ns(
            self.kept_ns,
            self.fused_kernels,
            self.costs,
            fused_flops=self.fused_flops,
            transcendentals=self.transcendentals,
        )

    def arithmetic_text(self) -> str:
        """The fused kernels' arithmetic term, in a clause."""
        if self.arithmetic == "device":
            return "their arithmetic on the device, where it overlaps the host (not counted)"
        if self.arithmetic == "no shapes":
            return (
                "their arithmetic not counted (the profile recorded no shapes: pass "
                "record_shapes=True)"
            )
        c = self.costs
        return (
            f"their arithmetic ({self.fused_flops / 1e3:.1f}k FLOPs at {c.flop_ns:.2f} ns and "
            f"{self.transcendentals / 1e3:.1f}k transcendental elements at "
            f"{c.transcendental_ns:.1f} ns: "
            f"{c.arithmetic_ns(self.fused_flops, self.transcendentals) / 1e6:.3f} ms)"
        )

    def text(self) -> str:
        """How the saving was estimated, in one paragraph: the outcome (``verdict_text`` where
        compiling is not expected to pay clearly, else the compiled against the eager forward
        and backward), then its terms."""
        if self.source == "unmodelled":
            return (
                "No saving is promised: perfkit models what torch.compile saves, not this "
                "framework's graph compiler. On the CPU training loops of perfkit's bench, "
                "paddle.jit.to_static made the step slower; try it and check the step with "
                "perfkit compare."
            )
        eager = (
            "the forward and backward as the step timer timed them without the profiler"
            if self.source == "timed"
            else "the layers' and backward nodes' recorded time, less the profiler's cost"
        )
        # the outcome first (whether compiling pays), then the terms it came from
        lead = self.verdict_text().strip() or (
            f"Compiled, the forward and backward would take about {self.compiled_ns / 1e6:.2f} "
            f"ms per step against {self.eager_ns / 1e6:.2f} ms eager."
        )
        return (
            f"{lead} Compiling saves the eager forward and backward "
            f"({self.eager_ns / 1e6:.2f} ms per "
            f"step: {eager}) less what the compiled model still runs "
            f"({self.compiled_ns / 1e6:.2f} ms): the matmuls, convolutions, loss and gradient "
            f"accumulation as they ran ({self.kept_ns / 1e6:.2f} ms: {self.kept_basis}), "
            f"{self.fused_kernels:.0f} "
            f"fused kernels for the runs of other ops ({self.costs.kernel_ns / 1e3:.1f} us "
            f"each), {self.arithmetic_text()}, and the compiled graph's call overhead "
            f"({self.costs.call_ns / 1e6:.2f} ms)." + self.scale_text()
        )

    def scale_text(self) -> str:
        """A sentence, with a leading space, saying how the call and kernel costs were scaled
        to the machine that trained ("" when they are the model's as they are)."""
        if self.costs_scale is None:
            return (
                " The call and kernel costs are those measured on a 2-core x86 machine: no step "
                "timer timed this machine's eager pass when the run was saved, and perfkit "
                "advise --measure times them here."
            )
        return (
            f" The call and kernel costs are the model's times {self.costs_scale:.2f}: an eager "
            f"forward and backward of a tiny model took {self.costs_scale:.2f} times as long "
            "where the run trained (timed by the step timer when it saved the run) as on the "
            "machine the model's costs were measured on."
        )

    def verdict_text(self) -> str:
        """``compile_verdict`` of this estimate ("" when compiling is expected to pay)."""
        return compile_verdict(self.eager_ns, self.compiled_ns)

    @property
    def within_error(self) -> bool:
        """Whether the estimate does not promise a clear saving (``verdict_text`` says so): a
        finding's ``within_error``."""
        return bool(self.verdict_text())


def compile_estimate(ctx: Context, units: np.ndarray) -> CompileEstimate | None:
    """The compile saving of ``ctx``'s run (cached on the run), from its op ``units`` (the
    outermost host ops in the steps, less the optimizer's and data loading's); None when the
    run recorded no forward or backward work."""
    found: CompileEstimate | None = ctx.run.cached("advice_compile", lambda: _estimate(ctx, units))
    return found


def _estimate(ctx: Context, unit: np.ndarray) -> CompileEstimate | None:
    ev = ctx.run.events
    st = structure(ctx.run)
    name, parent = st.names, st.parent
    in_steps = st.host & (ev["step"].to_numpy() >= 0)
    layer = st.is_layer
    has_layers = bool((layer & in_steps).any())
    bwd_span = in_steps & st.kinds.among("backward")
    in_bwd = unit & links.has_ancestor(parent, bwd_span)
    in_fwd = unit & ~in_bwd & (links.has_ancestor(parent, layer) if has_layers else True)
    loop = unit & ~in_bwd & ~in_fwd
    if not (in_fwd.any() or in_bwd.any()):
        return None
    rows = np.flatnonzero(unit)
    names = name[rows].tolist()
    families = {n: family_of(n) for n in set(names)}  # once per name, not per row
    kept_names = {
        n for n, f in families.items() if f in KEPT_FAMILIES or n.startswith(COMPILED_PREFIXES)
    }
    free_names = {n for n, f in families.items() if f in FREE_FAMILIES}
    kept_family = np.zeros(len(ev), dtype=bool)
    kept_family[rows] = [n in kept_names for n in names]
    free = np.zeros(len(ev), dtype=bool)
    free[rows] = [n in free_names for n in names]
    basis = step_basis(ctx)
    dur = ev["dur_ns"].to_numpy().astype(np.float64)

    def corrected(mask: np.ndarray) -> float:
        inside = mask | links.has_ancestor(parent, mask)
        return basis.corrected(ctx.per_step(dur[mask].sum()), recorded_events_per_step(ctx, inside))

    def scaled(mask: np.ndarray) -> float:
        return basis.scaled(ctx.per_step(dur[mask].sum()))

    forward, backward = timed_phase(ctx, "forward"), timed_phase(ctx, "backward")
    kept = scaled((in_fwd | in_bwd) & kept_family)
    if forward is not None and backward is not None:
        eager, source = forward + backward, "timed"
        kept += scaled(loop)
    else:
        spans = (layer & in_steps & ~links.has_ancestor(parent, layer)) | (
            bwd_span & ~links.has_ancestor(parent, bwd_span)
        )
        eager, source = corrected(spans), "recorded"
    kernels = ctx.per_step(sum(_fused_runs(ev, r, kept_family, free) for r in (in_fwd, in_bwd)))
    fusible = scaled((in_fwd | in_bwd) & ~kept_family)
    kept_basis = (
        f"their recorded time times {basis.step_ns / 1e6:.2f} / "
        f"{basis.profiled_step_ns / 1e6:.2f} ms, the step without the profiler over the "
        "profiled step"
        if basis.name == "unprofiled" and basis.profiled_step_ns > 0
        else "their recorded time, the profiler's cost still in it (no step timer)"
    )
    estimate = CompileEstimate(0.0, eager, kept, kernels, source, fusible, kept_basis)
    estimate.costs, estimate.costs_scale = run_compile_costs(ctx.run)
    fused = (in_fwd | in_bwd) & ~kept_family & ~free
    if ctx.has_device:
        estimate.arithmetic = "device"
    elif fused.any():
        counted = _fused_arithmetic(ctx, fused)
        if counted is None:
            estimate.arithmetic = "no shapes"
        else:
            estimate.fused_flops, estimate.transcendentals = counted
    if ctx.framework in MODELLED_FRAMEWORKS:
        estimate.saving_ns = max(eager - estimate.compiled_ns, 0.0)
    else:
        estimate.source = "unmodelled"
    return estimate


def _fused_arithmetic(ctx: Context, fused: np.ndarray) -> tuple[float, float] | None:
    """(FLOPs, transcendental elements) per step of the ``fused`` units and the ops inside
    them, from perfkit's op cost model (each op nest counted once); None when none of them has
    a cost (no shapes recorded)."""
    costs = run_costs(ctx.run)
    parent = ctx.run.events["parent"].to_numpy()
    inside = fused | links.has_ancestor(parent, fused)
    pick = inside[costs.rows] & np.isfinite(costs.flops)
    if not pick.any():
        return None
    rows, flops = costs.rows[pick], costs.flops[pick]
    names = structure(ctx.run).names[rows]
    bare = {n: str(n).removeprefix("aten::").rstrip("_") for n in set(names.tolist())}
    heavy = np.array([bare[n] in TRANSCENDENTAL_OPS for n in names.tolist()], dtype=bool)
    return ctx.per_step(float(flops.sum())), ctx.per_step(float(flops[heavy].sum()))


def _fused_runs(ev: pd.DataFrame, region: np.ndarray, kept: np.ndarray, free: np.ndarray) -> int:
    """How many runs of consecutive fusible units (in time order, per step) ``region`` has
    that do work (a run of ``free`` units only, views and transposes, needs no kernel): one
    fused kernel each."""
    rows = np.flatnonzero(region)
    if not len(rows):
        return 0
    steps = ev["step"].to_numpy()[rows]
    order = np.lexsort((ev["start_ns"].to_numpy()[rows], steps))
    rows, steps = rows[order], steps[order]
    fusible = ~kept[rows]
    same_step = np.r_[False, steps[1:] == steps[:-1]]
    starts = fusible & ~(np.r_[False, fusible[:-1]] & same_step)
    run_of = np.cumsum(starts) - 1
    works = np.zeros(int(starts.sum()), dtype=bool)
    works[run_of[fusible & ~free[rows]]] = True
    return int(works.sum())
