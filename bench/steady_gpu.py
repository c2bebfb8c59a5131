"""Diagnostic: warm-up on a live CUDA run, and what the steady-step rule makes of it.

A CUDA program's first steps create the context, load kernels and (with
``torch.backends.cudnn.benchmark``) time every convolution algorithm: they take many times a
steady step. Three runs of a small convolutional network, each in a fresh process, recorded
with perfkit's torch handler:

* ``cold``: recorded from the process's first step, warm-up included;
* ``warm``: the same loop, recorded after ``--warmup`` unrecorded steps;
* ``bf16``: the warm loop under ``torch.autocast(dtype=torch.bfloat16)``, a real change.

Printed: each run's step times, the steps the rule (``perfkit_core.events.steady``) leaves out,
then ``perfkit compare cold warm`` (same loop: the verdict should be "same"), the same with
``--all-steps`` (every step counted: the warm-up decides it), and ``perfkit compare warm bf16``.

Run: ``python bench/steady_gpu.py [--steps N] [--warmup N] [--keep DIR] [--device cpu] [--batch N]`` on a machine with a
CUDA GPU and a CUDA build of torch.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def train(kind: str, out: Path, steps: int, warmup: int, where: str, batch: int) -> None:
    """One run, in this process: ``kind`` is cold, warm or bf16."""
    import torch
    from torch import nn

    import perfkit_torch

    torch.backends.cudnn.benchmark = True
    device = torch.device(where)
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    width = 3
    for channels in (64, 128, 128, 256):
        layers += [nn.Conv2d(width, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU()]
        layers.append(nn.MaxPool2d(2))
        width = channels
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(256 * 4 * 4, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    autocast = kind == "bf16"

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    if kind != "cold":
        for _ in range(warmup):
            step()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    handler = perfkit_torch.on_trace_ready(out, worker_name=kind, background=False)
    with torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=0, warmup=0, active=steps, repeat=1),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(steps):
            step()
            prof.step()
    print(f"{kind}: {handler.runs[0]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="recorded steps per run")
    parser.add_argument("--warmup", type=int, default=10, help="unrecorded steps before warm")
    parser.add_argument("--keep", type=Path, help="write the runs here (default: a temp folder)")
    parser.add_argument("--device", default="cuda", help="torch device (cpu for a dry run)")
    parser.add_argument("--batch", type=int, default=256, help="images per step")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = args.keep or Path(tempfile.mkdtemp(prefix="perfkit-steady-"))
    if args.child:
        train(args.child, out, args.steps, args.warmup, args.device, args.batch)
        return 0

    from perfkit_core import load
    from perfkit_core.events.intervals import step_spans
    from perfkit_core.events.steady import steady_steps

    runs: dict[str, Path] = {}
    for kind in ("cold", "warm", "bf16"):
        cmd = [sys.executable, __file__, "--child", kind, "--keep", str(out)]
        cmd += ["--steps", str(args.steps), "--warmup", str(args.warmup), "--device", args.device]
        cmd += ["--batch", str(args.batch)]
        subprocess.run(cmd, check=True)
        runs[kind] = out / f"{kind}.step{args.steps}"
    for kind, path in runs.items():
        run = load(path)
        judged = steady_steps(run)
        spans = step_spans(run)
        ms = (spans["end_ns"] - spans["start_ns"]) / 1e6
        print(f"\n## {kind}: {path.name}")
        print("steps, ms:", " ".join(f"{v:.2f}" for v in ms))
        times = ", ".join(f"{s.times_median:.0f}x" for s in judged.warmup)
        print(
            f"left out: {[s.step for s in judged.warmup]}"
            + (f" ({times} the median of the steps after)" if times else "")
            + f"; slow kept: {[s.step for s in judged.slow]}; mean step "
            f"{judged.mean_all_ns / 1e6:.3f} ms all, {judged.mean_kept_ns / 1e6:.3f} ms kept"
        )
    pairs = (("cold", "warm", []), ("cold", "warm", ["--all-steps"]), ("warm", "bf16", []))
    for a, b, extra in pairs:
        print(f"\n## perfkit compare {a} {b} {' '.join(extra)}".rstrip())
        subprocess.run(
            [sys.executable, "-m", "perfkit_core", "compare", str(runs[a]), str(runs[b]), *extra],
            check=False,
        )
    print(f"\nruns kept in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
