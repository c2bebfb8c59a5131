"""The compile remedy's replay (``perfkit advise --measure``): what a compiled forward and
backward costs on this machine, measured by compiling two small models with ``torch.compile``
and timing them, in the terms of perfkit's compile estimate (``perfkit_core.advice.
compiled_step_ns``): the compiled graph's call overhead and the cost of one fused kernel."""

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
#: The fused kernels perfkit's estimate counts in these models (measured on their eager
#: runs): per block, one for the forward's LayerNorm + ReLU and two in the backward; one more.
KERNELS_PER_BLOCK = 3
KERNELS_BASE = 1
#: Forward and backward passes per timed round, rounds (the median is kept), warm-up passes.
COMPILE_STEPS = 30
COMPILE_ROUNDS = 7
COMPILE_WARMUP = 5


def _model(blocks: int) -> Any:
    import torch

    layers: list[Any] = []
    for _ in range(blocks):
        layers += [
            torch.nn.Linear(REPLAY_WIDTH, REPLAY_WIDTH),
            torch.nn.LayerNorm(REPLAY_WIDTH),
            torch.nn.ReLU(),
        ]
    return torch.nn.Sequential(*layers, torch.nn.Linear(REPLAY_WIDTH, 10))


@functools.lru_cache(maxsize=1)
def compile_costs() -> tuple[float, float]:
    """(call_ns, kernel_ns) on this machine: the compiled models' forward and backward times
    (medians of ``COMPILE_ROUNDS`` rounds, the two models' rounds interleaved) fitted to
    ``call_ns + kernels * kernel_ns``, with each model's kernels counted as the estimate counts
    them. Compiling takes seconds; the result is kept for the process."""
    import torch

    torch.manual_seed(0)
    x = torch.randn(REPLAY_BATCH, REPLAY_WIDTH)
    y = torch.randint(0, 10, (REPLAY_BATCH,))
    models = {n: torch.compile(_model(n)) for n in REPLAY_BLOCKS}

    def passes(model: Any, count: int) -> None:
        for _ in range(count):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            model.zero_grad()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model in models.values():
            passes(model, COMPILE_WARMUP)
        rounds: dict[int, list[float]] = {n: [] for n in models}
        for _ in range(COMPILE_ROUNDS):
            for n, model in models.items():
                start = time.perf_counter_ns()
                passes(model, COMPILE_STEPS)
                rounds[n].append((time.perf_counter_ns() - start) / COMPILE_STEPS)
    small, large = REPLAY_BLOCKS
    t_small, t_large = statistics.median(rounds[small]), statistics.median(rounds[large])
    kernel_ns = max((t_large - t_small) / ((large - small) * KERNELS_PER_BLOCK), 0.0)
    call_ns = max(t_small - (KERNELS_PER_BLOCK * small + KERNELS_BASE) * kernel_ns, 0.0)
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
            f"Measured on this machine: two small models compiled with torch.compile cost "
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
