"""The compile remedy's replay (``perfkit advise --measure``): what a compiled forward and
backward costs on this machine, in the terms of perfkit's compile estimate
(``perfkit_core.advice.compiled_step_ns``): the compiled graph's call overhead and the cost of
one fused kernel. Four small models are compiled with ``torch.compile`` and timed: 1 and 5
blocks of Linear + LayerNorm + ReLU, and the same with the Linear layers only. The Linear-only
pair gives what a block's kept ops cost compiled (the estimate counts those apart, from the
trace), the other pair what a block costs in all; the difference is the block's fused kernels."""

from __future__ import annotations

import functools
import statistics
import time
import warnings
from typing import Any

#: The replay's models: this many blocks of Linear + LayerNorm + ReLU, then a Linear head ...
REPLAY_BLOCKS = (1, 5)
#: ... this wide, on batches of this many rows.
REPLAY_WIDTH = 16
REPLAY_BATCH = 16
#: The fused kernels perfkit's estimate counts per block of these models (measured on their
#: eager runs): one for the forward's LayerNorm + ReLU, two in the backward.
KERNELS_PER_BLOCK = 3
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


@functools.lru_cache(maxsize=1)
def compile_costs() -> tuple[float, float]:
    """(call_ns, kernel_ns) on this machine, from the compiled models' forward and backward
    times (medians of ``COMPILE_ROUNDS`` rounds, the models' rounds interleaved): a block's
    kept ops cost what a Linear-only block adds; its ``KERNELS_PER_BLOCK`` fused kernels what
    a full block adds beyond that; the call overhead is what the one-block Linear-only model
    costs beyond its two Linear layers' kept ops. Compiling takes seconds; the result is kept
    for the process."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(REPLAY_BATCH, REPLAY_WIDTH)
    y = torch.randint(0, 10, (REPLAY_BATCH,))
    models = {
        (n, fused): torch.compile(_model(n, fused)) for n in REPLAY_BLOCKS for fused in (False, True)
    }

    def passes(model: Any, count: int) -> None:
        for _ in range(count):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            model.zero_grad()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model in models.values():
            passes(model, COMPILE_WARMUP)
        rounds: dict[tuple[int, bool], list[float]] = {key: [] for key in models}
        for _ in range(COMPILE_ROUNDS):
            for key, model in models.items():
                start = time.perf_counter_ns()
                passes(model, COMPILE_STEPS)
                rounds[key].append((time.perf_counter_ns() - start) / COMPILE_STEPS)
    t = {key: statistics.median(values) for key, values in rounds.items()}
    small, large = REPLAY_BLOCKS
    kept_block = max((t[large, False] - t[small, False]) / (large - small), 0.0)
    block = (t[large, True] - t[small, True]) / (large - small)
    kernel_ns = max((block - kept_block) / KERNELS_PER_BLOCK, 0.0)
    call_ns = max(t[small, False] - (small + 1) * kept_block, 0.0)
    return call_ns, kernel_ns


def measure_compile(finding: Any) -> dict[str, Any] | None:
    """The compile finding's saving with the compiled graph's costs measured on this machine
    (``compile_costs``) instead of the model's constants: the recorded eager forward and
    backward less the kept ops, the fused kernels and the call overhead. None when the finding
    lacks those figures or compiling fails here (no C++ compiler, an unsupported platform)."""
    from perfkit_core.advice import COMPILED_CALL_NS, FUSED_KERNEL_NS, compiled_step_ns

    evidence = finding.evidence
    eager = evidence.get("eager_ns")
    kept = evidence.get("compile_kept_ns")
    kernels = evidence.get("fused_kernels_per_step")
    if not all(isinstance(v, (int, float)) for v in (eager, kept, kernels)):
        return None
    try:
        call_ns, kernel_ns = compile_costs()
    except Exception:  # torch.compile raises many kinds of error where it cannot compile
        return None
    compiled = compiled_step_ns(float(kept), float(kernels), call_ns, kernel_ns)
    saving = max(float(eager) - compiled, 0.0)
    return {
        "saving_ns": saving,
        "estimate": (
            f"Measured on this machine: small models compiled with torch.compile cost "
            f"{call_ns / 1e6:.3f} ms per forward and backward plus {kernel_ns / 1e3:.1f} us per "
            f"fused kernel (the model assumes {COMPILED_CALL_NS / 1e6:.3f} ms and "
            f"{FUSED_KERNEL_NS / 1e3:.1f} us). The eager forward and backward "
            f"({float(eager) / 1e6:.3f} ms per step) would become {compiled / 1e6:.3f} ms: the "
            f"kept ops ({float(kept) / 1e6:.3f} ms), {float(kernels):.0f} fused kernels and the "
            "call overhead" + ("; no saving is expected." if saving <= 0 else ".")
        ),
        "evidence": {
            "measured": "replay",
            "replay_call_ns": call_ns,
            "replay_kernel_ns": kernel_ns,
        },
    }
