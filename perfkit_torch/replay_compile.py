"""The compile remedy's replay (``perfkit advise --measure``): what a compiled forward and
backward costs on this machine, in the terms of perfkit's compile estimate
(``perfkit_core.advice.CompileCosts``): the compiled graph's call overhead, one fused kernel,
a FLOP of the ops it fused and a transcendental element. Eight small models are compiled with
``torch.compile`` and timed:

- 1 and 5 blocks of Linear + LayerNorm + ReLU, and the same with the Linear layers only. The
  Linear-only pair gives what a block's kept ops cost compiled (the estimate counts those
  apart, from the trace), the other pair what a block costs in all; the difference is the
  block's fused kernels (and their few FLOPs).
- A chain of elementwise links (multiply, add, then ReLU or tanh) over a narrow and a wide
  batch: the ReLU chain's growth with the width is the cost of its FLOPs, the tanh chain's
  growth beyond it the cost of tanh's elements."""

from __future__ import annotations

import functools
import statistics
import time
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_core.advice import CompileCosts

#: The replay's models: this many blocks of Linear + LayerNorm + ReLU, then a Linear head ...
REPLAY_BLOCKS = (1, 5)
#: ... this wide, on batches of this many rows.
REPLAY_WIDTH = 16
REPLAY_BATCH = 16
#: The fused kernels perfkit's estimate counts per block of these models (measured on their
#: eager runs): one for the forward's LayerNorm + ReLU, two in the backward.
KERNELS_PER_BLOCK = 3
#: The chains' links, rows, and their narrow and wide widths.
CHAIN_LINKS = 20
CHAIN_ROWS = 16
CHAIN_WIDTHS = (16, 512)
#: The FLOPs perfkit's op cost model counts per element of a chain link, forward and backward:
#: the multiply, the add and the activation, the activation's gradient and the multiply's.
LINK_FLOPS = 5
#: Forward and backward passes per timed round, rounds (the median is kept), warm-up passes.
COMPILE_STEPS = 30
COMPILE_ROUNDS = 7
COMPILE_WARMUP = 5


def _model(blocks: int, fused: bool) -> Any:
    """``blocks`` blocks and a head; with ``fused``, each block's LayerNorm and ReLU after its
    Linear (the LayerNorm's weight and bias add two gradient accumulations a block, which the
    estimate counts with the kept ops: the kernel's cost is a little high by them)."""
    import torch

    layers: list[Any] = []
    for _ in range(blocks):
        layers.append(torch.nn.Linear(REPLAY_WIDTH, REPLAY_WIDTH))
        if fused:
            layers += [torch.nn.LayerNorm(REPLAY_WIDTH), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(REPLAY_WIDTH, 10))


def _chain(width: int, activation: str) -> Any:
    """``CHAIN_LINKS`` links of ``activation(x * 1.01 + c)`` after a scale parameter (the
    gradient the backward computes), over batches ``width`` wide."""
    import torch

    class Chain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(width))
            self.activation = getattr(torch, activation)

        def forward(self, x: Any) -> Any:
            x = x * self.scale
            for i in range(CHAIN_LINKS):
                x = self.activation(x * 1.01 + 0.01 * i)
            return x

    return Chain()


#: The eager pass the step timer times where a torch run trained (``eager_pass_ns``): passes
#: per round, rounds (the median is kept), warm-up passes.
EAGER_STEPS = 30
EAGER_ROUNDS = 5
EAGER_WARMUP = 5


def eager_pass_ns() -> float:
    """ns of one eager forward and backward of the replay's one-block model (Linear,
    LayerNorm and ReLU ``REPLAY_WIDTH`` wide, then a Linear head, on ``REPLAY_BATCH`` rows,
    cross-entropy loss) on one intra-op thread: the median of ``EAGER_ROUNDS`` rounds of
    ``EAGER_STEPS`` passes. Its ops are tiny, so it times what this machine's CPU takes per op
    in dispatch, autograd bookkeeping and Python, the work a compiled graph's call and fused
    kernels also cost. About 50 ms. It leaves the caller's random state, threads and grad mode
    as they were."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            model = _model(1, True)
            x = torch.linspace(-1.0, 1.0, REPLAY_BATCH * REPLAY_WIDTH).reshape(
                REPLAY_BATCH, REPLAY_WIDTH
            )
            y = torch.arange(REPLAY_BATCH) % 10

            def one() -> None:
                torch.nn.functional.cross_entropy(model(x), y).backward()
                model.zero_grad()

            for _ in range(EAGER_WARMUP):
                one()
            rounds = []
            for _ in range(EAGER_ROUNDS):
                start = time.perf_counter_ns()
                for _ in range(EAGER_STEPS):
                    one()
                rounds.append((time.perf_counter_ns() - start) / EAGER_STEPS)
    finally:
        torch.set_num_threads(saved)
    return statistics.median(rounds)


def _block_flops() -> float:
    """The FLOPs perfkit's op cost model counts for a replay block's fused ops, forward and
    backward: the LayerNorm's and the ReLU's (one an element each way)."""
    from perfkit_core.views import norm_cost

    shape = (REPLAY_BATCH, REPLAY_WIDTH)
    norm = sum(norm_cost(shape, REPLAY_WIDTH, "float", backward=b).flops for b in (False, True))
    return float(norm + 2 * REPLAY_BATCH * REPLAY_WIDTH)


#: The names of ``CompileCosts``' terms, as the estimate says them.
TERMS = {
    "call_ns": "call overhead",
    "kernel_ns": "fused kernel",
    "flop_ns": "FLOP",
    "transcendental_ns": "transcendental element",
}


def resolved_costs(measured: dict[str, float]) -> tuple[CompileCosts, tuple[str, ...]]:
    """The compiled graph's costs from the replay's differences (``measured``, by
    ``CompileCosts`` field): a term that came out at 0 or less was not resolved by the replay
    (its timings' noise exceeded it: a block of fused ops timed as no dearer than its Linear
    layer alone) and takes the model's constant instead; also the names (``TERMS``) of those
    terms."""
    from perfkit_core.advice import MODEL_COSTS, CompileCosts

    costs = {}
    unresolved = []
    for field, name in TERMS.items():
        value = measured[field]
        if value > 0:
            costs[field] = value
        else:
            costs[field] = getattr(MODEL_COSTS, field)
            unresolved.append(name)
    return CompileCosts(**costs), tuple(unresolved)


@functools.lru_cache(maxsize=1)
def compile_costs() -> tuple[CompileCosts, tuple[str, ...]]:
    """The compiled graph's costs on this machine, from the compiled models' forward and
    backward times (medians of ``COMPILE_ROUNDS`` rounds, the models' rounds interleaved):

    - a FLOP: what the ReLU chain adds per FLOP from the narrow width to the wide one;
    - a transcendental element: what the tanh chain adds beyond the ReLU chain, per element;
    - a block's kept ops cost what a Linear-only block adds; its ``KERNELS_PER_BLOCK`` fused
      kernels what a full block adds beyond that and beyond its FLOPs;
    - the call overhead is what the one-block Linear-only model costs beyond its two Linear
      layers' kept ops;

    a term the replay did not resolve takes the model's constant (``resolved_costs``), and
    the second item names those terms.

    It compiles and runs them on one intra-op thread, as the optimizer's replay does (a
    compiled CPU kernel is built for the threads torch has when it compiles). Compiling takes
    seconds; the result is kept for the process."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _compile_costs()
    finally:
        torch.set_num_threads(saved)


def _compile_costs() -> tuple[CompileCosts, tuple[str, ...]]:
    """``compile_costs`` on the threads torch has."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(REPLAY_BATCH, REPLAY_WIDTH)
    y = torch.randint(0, 10, (REPLAY_BATCH,))
    chain_x = {w: torch.randn(CHAIN_ROWS, w) for w in CHAIN_WIDTHS}
    models: dict[tuple[Any, ...], Any] = {
        (n, fused): torch.compile(_model(n, fused))
        for n in REPLAY_BLOCKS
        for fused in (False, True)
    }
    for width in CHAIN_WIDTHS:
        for activation in ("relu", "tanh"):
            models[activation, width] = torch.compile(_chain(width, activation))

    def passes(key: tuple[Any, ...], model: Any, count: int) -> None:
        for _ in range(count):
            if key[0] in ("relu", "tanh"):
                model(chain_x[key[1]]).sum().backward()
            else:
                torch.nn.functional.cross_entropy(model(x), y).backward()
            model.zero_grad()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, model in models.items():
            passes(key, model, COMPILE_WARMUP)
        rounds: dict[tuple[Any, ...], list[float]] = {key: [] for key in models}
        for _ in range(COMPILE_ROUNDS):
            for key, model in models.items():
                start = time.perf_counter_ns()
                passes(key, model, COMPILE_STEPS)
                rounds[key].append((time.perf_counter_ns() - start) / COMPILE_STEPS)
    t = {key: statistics.median(values) for key, values in rounds.items()}
    narrow, wide = CHAIN_WIDTHS
    elements = CHAIN_ROWS * (wide - narrow) * CHAIN_LINKS
    relu = (t["relu", wide] - t["relu", narrow]) / elements
    tanh = (t["tanh", wide] - t["tanh", narrow]) / elements
    flop_ns = max(relu / LINK_FLOPS, 0.0)
    transcendental_ns = tanh - relu
    small, large = REPLAY_BLOCKS
    kept_block = max((t[large, False] - t[small, False]) / (large - small), 0.0)
    block = (t[large, True] - t[small, True]) / (large - small)
    kernel_ns = (block - kept_block - _block_flops() * flop_ns) / KERNELS_PER_BLOCK
    call_ns = t[small, False] - (small + 1) * kept_block
    return resolved_costs(
        {
            "call_ns": call_ns,
            "kernel_ns": kernel_ns,
            "flop_ns": flop_ns,
            "transcendental_ns": transcendental_ns,
        }
    )


def measure_compile(finding: Any) -> dict[str, Any] | None:
    """The compile finding's saving with the compiled graph's costs measured on this machine
    (``compile_costs``) instead of the model's constants: the recorded eager forward and
    backward less the kept ops, the fused kernels, their arithmetic and the call overhead. None
    when the finding lacks those figures or compiling fails here (no C++ compiler, an
    unsupported platform)."""
    from perfkit_core.advice import MODEL_COSTS, compile_verdict, compiled_step_ns

    evidence = finding.evidence
    figures = [
        evidence.get(k)
        for k in (
            "eager_ns",
            "compile_kept_ns",
            "fused_kernels_per_step",
            "fused_flops_per_step",
            "transcendentals_per_step",
        )
    ]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in figures):
        return None
    eager, kept, kernels, flops, heavy = (float(v) for v in figures)
    try:
        costs, unresolved = compile_costs()
    except Exception:  # torch.compile raises many kinds of error where it cannot compile
        return None
    compiled = compiled_step_ns(kept, kernels, costs, fused_flops=flops, transcendentals=heavy)
    arithmetic = costs.arithmetic_ns(flops, heavy)
    saving = max(eager - compiled, 0.0)
    # the costs the finding's own estimate took: the model's, scaled to the training machine
    model = replace(
        MODEL_COSTS,
        call_ns=float(evidence.get("compile_call_ns") or MODEL_COSTS.call_ns),
        kernel_ns=float(evidence.get("compile_kernel_ns") or MODEL_COSTS.kernel_ns),
    )
    verdict = compile_verdict(eager, compiled)
    fallback = (
        f" The replay could not resolve the {' and '.join(unresolved)} cost here (its timings' "
        "noise exceeded it): the model's is taken for it."
        if unresolved
        else ""
    )
    return {
        "saving_ns": saving,
        "within_error": bool(verdict),
        "estimate": (
            f"Measured on this machine: small models compiled with torch.compile cost "
            f"{costs.call_ns / 1e6:.3f} ms per forward and backward plus "
            f"{costs.kernel_ns / 1e3:.1f} us per fused kernel, {costs.flop_ns:.2f} ns per FLOP "
            f"and {costs.transcendental_ns:.1f} ns per transcendental element (the estimate "
            f"without --measure took {model.call_ns / 1e6:.3f} ms, {model.kernel_ns / 1e3:.1f} us, "
            f"{model.flop_ns:.2f} ns and {model.transcendental_ns:.1f} ns). The eager forward "
            f"and backward ({eager / 1e6:.3f} ms per step) would become "
            f"{compiled / 1e6:.3f} ms: the kept ops ({kept / 1e6:.3f} ms), {kernels:.0f} fused "
            f"kernels, their arithmetic ({arithmetic / 1e6:.3f} ms) and the call overhead."
            + fallback
            + verdict
        ),
        "evidence": {
            "measured": "replay",
            "replay_call_ns": costs.call_ns,
            "replay_kernel_ns": costs.kernel_ns,
            "replay_flop_ns": costs.flop_ns,
            "replay_transcendental_ns": costs.transcendental_ns,
            "replay_unresolved": list(unresolved),
        },
    }
