"""Train the same small MLP in PyTorch and in PaddlePaddle with the perfkit callbacks, then
compare the two runs side by side.

    python examples/compare_frameworks.py [--out DIR] [--steps N]

Each framework's own profiler records the run (torch.profiler / paddle.profiler) and perfkit's
on_trace_ready handler saves it as a perfkit run; perfkit_core.compare lines the runs up by
training phase and by op family (matmul, activation, loss, optimizer, ...), which is how the
same model reads across frameworks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import perfkit_core
from perfkit_core.report import build_comparison_report, render


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("perfkit_compare"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    # Same model in both: 4 blocks of Linear(64, 64) + LayerNorm + ReLU, Adam, batch 32.
    from perfkit_paddle.demo import train_mlp as train_paddle
    from perfkit_torch.demo import train_mlp as train_torch

    torch_runs, _ = train_torch(args.out / "torch", steps=args.steps)
    paddle_runs, _ = train_paddle(args.out / "paddle", steps=args.steps)
    comparison = perfkit_core.compare(
        perfkit_core.load(torch_runs[0]),
        perfkit_core.load(paddle_runs[0]),
        labels=["torch", "paddle"],
    )
    print(render(build_comparison_report(comparison, ("steps", "phases", "family"))))
    gate = comparison.gate(10.0)
    print(f"paddle against torch, median step time: {gate.message}")


if __name__ == "__main__":
    main()
