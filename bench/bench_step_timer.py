"""Benchmark: what ``perfkit_core.step_timer`` adds to a training loop's step, and what a started
Paddle Profiler adds to the steps its scheduler keeps closed.

Target: ``with timer.step()`` around each step (its phase timers installed, saving nothing)
adds at most 5% to the loop's step time, in torch and in Paddle, on ``perfkit demo``'s loop:
a 4-block MLP 64 wide with Adam, batches of 32 from the framework's DataLoader without
workers (torch loads in the training thread; Paddle loads in a thread of the training
process, which takes the GIL whenever the training thread lets it go).

Also printed, without a target: what a started ``paddle.profiler.Profiler`` whose scheduler
keeps it closed adds to the same steps (it makes each layer's forward a ``RecordEvent`` and,
with ``record_shapes``, records each op's shapes). The step timer counts those steps as
neither profiled nor unprofiled (``perfkit_paddle``'s ``perfkit_profiler_recording``), and
this is the figure why.

Method: one process per framework. Blocks of ``--block`` steps alternate between the plain
loop and the variant, ``--pairs`` times; each block's first ``SETTLE`` steps are not timed.
The variant's cost is the median, over its blocks, of the block's median step less the mean
of its two neighbours' (the machine's drift between blocks cancels), with its quartiles,
as a share of the plain loop's median step. A step-timer block installs the timer's phase
timers at its first step and removes them after its last (``timer.close()``), as a program
that times a stretch of steps does.

    nice -n 10 python bench/bench_step_timer.py [--framework torch paddle] [--pairs 60]

Exits 1 when the step timer misses the target in a framework.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_advice  # the demo's MLP, as its scenarios build it

#: The step timer's target: at most this share of the plain loop's step (%).
TARGET_PCT = 5.0
#: Steps at the start of each block that are not timed (the loop settles after a switch).
SETTLE = 5
WIDTH, BATCH, BLOCKS = bench_advice.DEMO_WIDTH, bench_advice.DEMO_BATCH, 4


def torch_loop(steps: int) -> Iterator[Callable[[], None]]:
    """``perfkit demo``'s torch loop: yields one callable per step that runs it."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = bench_advice.torch_mlp(BLOCKS, WIDTH)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    inputs = torch.from_numpy(rng.standard_normal((steps * BATCH, WIDTH)).astype("float32"))
    labels = torch.from_numpy(rng.integers(0, 10, (steps * BATCH,)))
    dataset = torch.utils.data.TensorDataset(inputs, labels)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)
    for x, y in loader:

        def step(x: Any = x, y: Any = y) -> None:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        yield step


def paddle_loop(steps: int) -> Iterator[Callable[[], None]]:
    """``perfkit demo``'s Paddle loop: yields one callable per step that runs it."""
    import numpy as np
    import paddle

    paddle.seed(0)
    paddle.set_device("cpu")
    model = bench_advice.paddle_mlp(BLOCKS, WIDTH)
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((steps * BATCH, WIDTH)).astype("float32")
    labels = rng.integers(0, 10, (steps * BATCH,)).astype("int64")
    dataset = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
    loader = paddle.io.DataLoader(dataset, batch_size=BATCH, shuffle=False, num_workers=0)
    for x, y in loader:

        def step(x: Any = x, y: Any = y) -> None:
            loss = paddle.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()

        yield step


class StepTimerBlock:
    """A variant block whose steps run inside ``with timer.step()``."""

    name = "step timer"

    def __init__(self) -> None:
        import perfkit_core

        self.timer = perfkit_core.step_timer(None, warmup=0)

    def begin(self) -> None:
        pass

    def wrap(self) -> Any:
        return self.timer.step()

    def end(self) -> None:
        self.timer.close()


class ClosedProfilerBlock:
    """A variant block run with a started ``paddle.profiler.Profiler`` that records nothing
    (its scheduler starts recording past the end of the run), ``record_shapes`` as the demo."""

    name = "Paddle Profiler started, closed"

    def __init__(self) -> None:
        self.prof: Any = None

    def begin(self) -> None:
        import paddle.profiler as profiler

        self.prof = profiler.Profiler(
            targets=[profiler.ProfilerTarget.CPU],
            scheduler=(10**9, 10**9 + 1),
            on_trace_ready=lambda prof: None,
            record_shapes=True,
        )
        self.prof.start()

    def wrap(self) -> Any:
        return contextlib.nullcontext()

    def end(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # Paddle's own "Perf Summary"
            self.prof.stop()


def measure(framework: str, variant: Any, pairs: int, block: int) -> dict[str, float]:
    """The plain loop's median step (ms) and the variant's cost per step (ms: median and
    quartiles of the block differences) over ``pairs`` pairs of blocks."""
    loop = (torch_loop if framework == "torch" else paddle_loop)(2 * pairs * block + block + 5)
    for _ in range(5):
        next(loop)()  # warm up
    medians: list[float] = []
    for index in range(2 * pairs + 1):
        varied = index % 2 == 1
        if varied:
            variant.begin()
        times = []
        for position in range(block):
            start = time.perf_counter_ns()  # the batch's loading or wait included
            step = next(loop)
            with variant.wrap() if varied else contextlib.nullcontext():
                step()
            if position >= SETTLE:
                times.append(time.perf_counter_ns() - start)
        if varied:
            variant.end()
        medians.append(statistics.median(times) / 1e6)
    diffs = [medians[i] - (medians[i - 1] + medians[i + 1]) / 2 for i in range(1, len(medians), 2)]
    plain = statistics.median(medians[0::2])
    quartiles = statistics.quantiles(diffs, n=4)
    return {
        "plain_ms": plain,
        "cost_ms": statistics.median(diffs),
        "q1_ms": quartiles[0],
        "q3_ms": quartiles[2],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", nargs="+", default=["torch", "paddle"])
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--block", type=int, default=50)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    failed = False
    print(
        f"{args.pairs} pairs of {args.block}-step blocks per variant, the first {SETTLE} of "
        "each untimed; cost = a variant block's median step less its neighbours' (ms a step)"
    )
    print(
        f"{'framework':<9} {'variant':<32} {'plain step':>10} {'cost':>8} {'quartiles':>17} "
        f"{'% of step':>9}  verdict"
    )
    for framework in args.framework:
        variants: list[Any] = [StepTimerBlock()]
        if framework == "paddle":
            variants.append(ClosedProfilerBlock())
        for variant in variants:
            with contextlib.redirect_stderr(io.StringIO()):
                got = measure(framework, variant, args.pairs, args.block)
            pct = 100.0 * got["cost_ms"] / got["plain_ms"]
            verdict = "-"
            if isinstance(variant, StepTimerBlock):
                ok = pct <= TARGET_PCT
                failed |= not ok
                verdict = f"{'PASS' if ok else 'FAIL'} (target <= {TARGET_PCT:g}%)"
            print(
                f"{framework:<9} {variant.name:<32} {got['plain_ms']:>8.3f}ms "
                f"{got['cost_ms']:>+8.3f} {got['q1_ms']:>+8.3f}..{got['q3_ms']:<+8.3f} "
                f"{pct:>+8.1f}%  {verdict}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
