"""Train the same model in PyTorch and in PaddlePaddle with the perfkit callbacks, then compare
the two runs: which is faster, by how much, and which op families, layers and ops explain it.

    python examples/compare_frameworks.py [--model cnn|transformer|lstm] [--out DIR] [--steps N]

Each framework trains in its own process (torch and paddle in one process slow each other's CPU
threads) with its own profiler (torch.profiler / paddle.profiler) and perfkit's on_trace_ready
handler; perfkit_core.step_timer times the steps with and without the profiler. Both record
the layers on their own (perfkit's torch handler records torch's module calls), so the
comparison lines them up row by row.
The comparison is printed and written as text and HTML under --out.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import perfkit_core
from perfkit_core.report import build_comparison_report, render

_TRAIN = """
import sys
from pathlib import Path
from perfkit_{fw}.demo_models import train
runs, _ = train(Path(sys.argv[1]), sys.argv[2], steps=int(sys.argv[3]))
print(runs[0])
"""


def train(framework: str, model: str, out: Path, steps: int) -> Path:
    """Train ``model`` in ``framework`` in a fresh process; return the saved run's folder."""
    done = subprocess.run(
        [sys.executable, "-c", _TRAIN.format(fw=framework), str(out), model, str(steps)],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["cnn", "transformer", "lstm"], default="cnn")
    parser.add_argument("--out", type=Path, default=Path("perfkit_compare"))
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    torch_run = train("torch", args.model, args.out / "torch", args.steps)
    paddle_run = train("paddle", args.model, args.out / "paddle", args.steps)
    comparison = perfkit_core.compare(torch_run, paddle_run, labels=["torch", "paddle"])
    model = build_comparison_report(comparison, gate=comparison.gate(10.0))
    text = render(model, "text")
    print(text)
    (args.out / "comparison.txt").write_text(text)
    (args.out / "comparison.html").write_text(render(model, "html"))
    print(f"written to {args.out / 'comparison.txt'} and {args.out / 'comparison.html'}")


if __name__ == "__main__":
    main()
