"""How much faster a fused or multi-tensor optimizer step is than the per-parameter loop.

The optimizer rule (perfkit_core/advice/rules/optimizer.py) estimates its saving with
OPTIMIZER_FUSED_SPEEDUP. This script measures the speed-ups that constant must not exceed, on
the demo's model (a 4-block MLP: Linear(64, 64) + LayerNorm + ReLU per block, then
Linear(64, 10); Adam, lr 1e-3), on the CPU, in one run:

- torch: ``Adam(foreach=False)`` (the per-parameter loop) against ``foreach=True`` and
  ``fused=True``;
- Paddle: ``Adam(use_multi_tensor=False)`` against ``use_multi_tensor=True``.

Each optimizer step is timed after its gradients are set (no forward or backward in the
timing, one intra-op thread), as the median of ``--repeat`` rounds of ``--steps`` steps. Prints one line per variant
with its time per step and its speed-up over the loop, then PASS when every measured speed-up is
at least OPTIMIZER_FUSED_SPEEDUP (exit 0) or FAIL (exit 1). A framework that is not installed is
skipped with a line that says so.

    python bench/bench_optimizer.py
    python bench/bench_optimizer.py --blocks 12 --steps 200
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfkit_core.advice.rules.optimizer import OPTIMIZER_FUSED_SPEEDUP

WIDTH = 64


def median_step_us(step: Callable[[], None], steps: int, repeat: int) -> float:
    """Median over ``repeat`` rounds of the mean time of one ``step()``, in microseconds."""
    for _ in range(10):
        step()  # warm-up: allocate the optimizer state
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        rounds.append((time.perf_counter() - start) / steps * 1e6)
    return statistics.median(rounds)


def torch_variants(blocks: int, steps: int, repeat: int) -> dict[str, float]:
    """Time per Adam step of the demo MLP in torch: loop, foreach, fused (us)."""
    import torch

    torch.set_num_threads(1)  # small tensors: a second thread only adds contention
    torch.manual_seed(0)
    results = {}
    for name, options in (
        ("Adam(foreach=False)", {"foreach": False}),
        ("Adam(foreach=True)", {"foreach": True}),
        ("Adam(fused=True)", {"fused": True}),
    ):
        layers: list[torch.nn.Module] = []
        for _ in range(blocks):
            layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.LayerNorm(WIDTH), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 10))
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **options)
        results[name] = median_step_us(optimizer.step, steps, repeat)
    return results


def paddle_variants(blocks: int, steps: int, repeat: int) -> dict[str, float]:
    """Time per Adam step of the demo MLP in Paddle: loop, multi-tensor (us)."""
    import paddle

    paddle.set_device("cpu")
    paddle.seed(0)
    results = {}
    for name, multi in (
        ("Adam(use_multi_tensor=False)", False),
        ("Adam(use_multi_tensor=True)", True),
    ):
        layers: list[paddle.nn.Layer] = []
        for _ in range(blocks):
            layers += [paddle.nn.Linear(WIDTH, WIDTH), paddle.nn.LayerNorm(WIDTH), paddle.nn.ReLU()]
        model = paddle.nn.Sequential(*layers, paddle.nn.Linear(WIDTH, 10))
        x = paddle.randn([16, WIDTH])
        model(x).mean().backward()  # real gradients, kept across steps (never cleared)
        optimizer = paddle.optimizer.Adam(
            learning_rate=1e-3, parameters=model.parameters(), use_multi_tensor=multi
        )
        results[name] = median_step_us(optimizer.step, steps, repeat)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=4, help="MLP blocks (the demo has 4)")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the median is kept")
    args = parser.parse_args()

    speedups = []
    for framework, measure in (("torch", torch_variants), ("paddle", paddle_variants)):
        try:
            results = measure(args.blocks, args.steps, args.repeat)
        except ImportError:
            print(f"{framework}: not installed, skipped")
            continue
        names = list(results)
        base = results[names[0]]
        print(f"{framework} ({args.blocks}-block MLP, {args.steps} steps x {args.repeat} rounds)")
        for name in names:
            ratio = base / results[name]
            print(f"  {name:<30} {results[name]:9.1f} us/step   {ratio:5.2f}x the loop")
            if name != names[0]:
                speedups.append((framework, name, ratio))
    if not speedups:
        print("no framework installed: nothing measured")
        return 1
    slowest = min(speedups, key=lambda item: item[2])
    ok = slowest[2] >= OPTIMIZER_FUSED_SPEEDUP
    print(
        f"{'PASS' if ok else 'FAIL'}: the smallest speed-up ({slowest[1]} in {slowest[0]}, "
        f"{slowest[2]:.2f}x) is {'at least' if ok else 'below'} the advice's assumed "
        f"OPTIMIZER_FUSED_SPEEDUP = {OPTIMIZER_FUSED_SPEEDUP:g}x"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
