"""What compiling the model (``torch.compile``, ``paddle.jit.to_static``) saves per step: the
model's forward and backward as the eager program runs them, less what the compiled graph still
runs.

- **Eager** (``eager_ns``): the step timer's ``forward`` and ``backward`` phases (measured
  without the profiler) when an adapter timed them; else the layer spans' and backward nodes'
  recorded time, less the profiler's cost per event (``basis``).
- **Compiled** (``compiled_ns``):
  - the units compiling keeps as they are (``KEPT_FAMILIES``: matmuls, convolutions,
    attention, embeddings, the loss, gradient accumulation) at their recorded time scaled by
    the unprofiled step over the profiled one (``Basis.scaled``: the average cost per event,
    which the Python between tiny ops inflates, would take all of their time out), and, when
    the eager time is the timed phases, the loop's own ops outside the model's layers (making
    the batch, the loss);
  - one fused kernel per run of the other units (norms, activations, elementwise and layout
    ops) in the forward and in the backward, ``FUSED_KERNEL_NS`` each (a run of layout ops
    only, a transpose between two matmuls, needs none);
  - the compiled graph's own call overhead, ``COMPILED_CALL_NS`` per forward and backward.
- The saving is eager less compiled, at least 0: a model whose layers are a few large matmuls
  gains nothing, one of many tiny ops between them gains most of their time. Only for the
  frameworks in ``MODELLED_FRAMEWORKS``; for the others the saving is 0 and the finding says
  why.

The two constants were fitted on the CPU training loops of ``bench/bench_advice.py`` and two
more of the same kind (8 blocks of Linear + LayerNorm + ReLU 16 wide, 16 blocks 32 wide, a chain
of 60 elementwise ops between two Linear layers), compiled by torch 2.13's inductor on a 2-core
VM, from each loop's compiled step timed beside its eager one: a faster CPU pays less for both,
so there the estimate is low.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.advice.basis import recorded_events_per_step, step_basis, timed_phase
from perfkit_core.events import links
from perfkit_core.views.family_rules import family_of
from perfkit_core.views.structure import structure

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.advice.engine import Context

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
#: (gradient accumulation, the loss).
COMPILED_CALL_NS = 830_000.0
#: The cost of one fused kernel that replaces a run of elementwise, norm and layout ops, ns.
FUSED_KERNEL_NS = 18_000.0
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
    call_ns: float = COMPILED_CALL_NS,
    kernel_ns: float = FUSED_KERNEL_NS,
) -> float:
    """What the compiled forward and backward cost per step (ns): the kept ops' time, the fused
    kernels at ``kernel_ns`` each and the compiled graph's ``call_ns``."""
    return kept_ns + fused_kernels * kernel_ns + call_ns


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

    @property
    def compiled_ns(self) -> float:
        """What the compiled model is expected to cost per step, ns."""
        return compiled_step_ns(self.kept_ns, self.fused_kernels)

    def text(self) -> str:
        """How the saving was estimated, with its terms, in one paragraph."""
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
        return (
            f"Compiling saves the eager forward and backward ({self.eager_ns / 1e6:.2f} ms per "
            f"step: {eager}) less what the compiled model still runs "
            f"({self.compiled_ns / 1e6:.2f} ms): the matmuls, convolutions, loss and gradient "
            f"accumulation as they ran ({self.kept_ns / 1e6:.2f} ms: {self.kept_basis}), "
            f"{self.fused_kernels:.0f} "
            f"fused kernels for the runs of other ops ({FUSED_KERNEL_NS / 1e3:.0f} us each) and "
            f"the compiled graph's call overhead ({COMPILED_CALL_NS / 1e6:.2f} ms)."
        )


def compile_estimate(ctx: Context, units: np.ndarray) -> CompileEstimate | None:
    """The compile saving of ``ctx``'s run (cached on the run), from its op ``units`` (the
    outermost host ops in the steps, less the optimizer's and data loading's); None when the
    run recorded no forward or backward work."""
    cache = ctx.run._cache
    if "advice_compile" in cache:
        return cache["advice_compile"]
    found = _estimate(ctx, units)
    cache["advice_compile"] = found
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
    if ctx.framework in MODELLED_FRAMEWORKS:
        estimate.saving_ns = max(eager - estimate.compiled_ns, 0.0)
    else:
        estimate.source = "unmodelled"
    return estimate


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
