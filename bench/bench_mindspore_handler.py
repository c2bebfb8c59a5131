"""Benchmark: perfkit's MindSpore handler against MindSpore's own ``tensorboard_trace_handler``.

Target, on the medians: the training loop waits in ``perfkit_mindspore.on_trace_ready(dir)`` no
longer than in ``mindspore.profiler.tensorboard_trace_handler(dir)`` (ratio <= 1.05, the 5% for
timer noise). Both run MindSpore's own analysis in the callback (it writes the
``*_ascend_ms`` folder MindInsight opens); perfkit's adds writing ``perfkit_spans.json`` and
queueing the conversion for its helper process (off the training loop).

What is measured: the MLP of ``perfkit_mindspore.demo`` (``--blocks`` blocks of Dense +
LayerNorm + ReLU of 64 features and a Dense head; Adam; batches of 32) in graph mode on the CPU,
profiled by ``mindspore.profiler.profile`` with ``schedule(wait=1, warmup=1, active=--steps)``:
``--steps`` + 2 training steps, each followed by ``prof.step()``. Rows, alternated round by round
(``--repeat`` rounds, the first order flipped each round):

* ``tensorboard_trace_handler``: MindSpore's own handler;
* ``perfkit on_trace_ready``: perfkit's handler; the run it saves is waited for
  (``handler.wait()``) after the clock stops, so the conversion never overlaps a measurement;
* ``perfkit on_trace_ready + step(prof)``: perfkit's handler with each step marked by
  ``perfkit_mindspore.step(prof)`` instead of ``prof.step()`` (it waits for the step's
  operators: ``mindspore.runtime.synchronize()``), for information.

Columns: the time of the ``on_trace_ready`` call (what training waits for at the end of the
window) and the time of the whole profiled loop, medians over the rounds, in ms, and their
ratios to MindSpore's handler. An untimed warm-up round (each handler once) comes first, so
graph compilation and lazy imports are not timed. Everything is written under ``bench/out/``
(gitignored) and removed afterwards.

Run (needs mindspore with numpy<2): ``python bench/bench_mindspore_handler.py [--steps N]
[--repeat K] [--blocks B]``. Exits 1 when the target fails.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "mindspore_handler"
TARGET = 1.05


class Timed:
    """Wraps an ``on_trace_ready`` callable and keeps how long each call took (s)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.calls: list[float] = []

    def __call__(self, prof: Any) -> None:
        start = time.perf_counter()
        self.handler(prof)
        self.calls.append(time.perf_counter() - start)


def loop(
    kind: str, directory: Path, train_net: Any, data: list[Any], steps: int
) -> tuple[float, float]:
    """One profiled window with handler ``kind``; returns (callback s, loop s)."""
    import mindspore
    from mindspore.profiler import ProfilerActivity

    import perfkit_mindspore

    if kind == "native":
        handler: Any = mindspore.profiler.tensorboard_trace_handler(str(directory))
    else:
        handler = perfkit_mindspore.on_trace_ready(directory, worker_name="bench")
    timed = Timed(handler)
    start = time.perf_counter()
    with mindspore.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=mindspore.profiler.schedule(wait=1, warmup=1, active=steps, repeat=1),
        on_trace_ready=timed,
    ) as prof:
        for x, y in data:
            train_net(x, y)
            if kind == "perfkit+step":
                perfkit_mindspore.step(prof)
            else:
                prof.step()
    elapsed = time.perf_counter() - start
    if kind != "native":
        handler.wait()
        if handler.failures or not handler.runs:
            sys.exit(f"perfkit's handler failed: {handler.failures}")
    (call,) = timed.calls
    return call, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=4)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from perfkit_mindspore.demo import batches, mlp

    train_net, _ = mlp(blocks=args.blocks)
    data = batches(args.steps + 2)
    kinds = ["native", "perfkit", "perfkit+step"]
    shutil.rmtree(OUT, ignore_errors=True)
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    try:
        for kind in kinds:  # warm-up: compilation, lazy imports
            loop(kind, OUT / f"warmup_{kind.replace('+', '_')}", train_net, data, args.steps)
        for round_ in range(args.repeat):
            order = kinds if round_ % 2 == 0 else kinds[::-1]
            for kind in order:
                results[kind].append(
                    loop(kind, OUT / f"{round_}_{kind.replace('+', '_')}", train_net, data, args.steps)
                )
    finally:
        shutil.rmtree(OUT, ignore_errors=True)
    import mindspore

    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(
        f"mindspore {mindspore.__version__}, {args.blocks}-block MLP, {args.steps} profiled steps, "
        f"{args.repeat} rounds; load average {' '.join(load)}"
    )
    native_call = statistics.median(c for c, _ in results["native"])
    native_loop = statistics.median(t for _, t in results["native"])
    labels = {
        "native": "tensorboard_trace_handler",
        "perfkit": "perfkit on_trace_ready",
        "perfkit+step": "perfkit on_trace_ready + step(prof)",
    }
    print(f"{'handler':38s} {'callback ms':>12s} {'ratio':>6s} {'loop ms':>9s} {'ratio':>6s}")
    for kind in kinds:
        call = statistics.median(c for c, _ in results[kind])
        total = statistics.median(t for _, t in results[kind])
        print(
            f"{labels[kind]:38s} {call * 1e3:12.1f} {call / native_call:6.2f} "
            f"{total * 1e3:9.1f} {total / native_loop:6.2f}"
        )
    ratio = statistics.median(c for c, _ in results["perfkit"]) / native_call
    ok = ratio <= TARGET
    print(
        f"target: perfkit's callback <= {TARGET}x MindSpore's: {ratio:.2f}x -> {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
