"""Where ``perfkit demo``'s Paddle step goes with each way of feeding it, and what each training op
costs beside two kinds of loading thread: the parts the input-pipeline model
(``perfkit_core.advice.loader.thread_split``) estimates, measured in one process.

Feeds, each the demo scenario's model and per-parameter Adam (``bench_advice.paddle_demo_scenario``)
over the same rows, taking turns in blocks of ``--block`` steps, in a rotating order, after a few
untimed steps:

- ``tensors, thread``: a ``TensorDataset`` through the single-process loader (the baseline: a
  slice per sample and tensor, Paddle ops in the loading thread);
- ``numpy, worker``: the rows as numpy arrays through one worker process (the remedy);
- ``numpy, thread``: the same rows through the single-process loader;
- ``in hand``: one batch made once (the rest of the step, with no loading beside it).

For each: wall time, the training thread's CPU time and the process's CPU time, per step
(medians of the blocks), and the baseline less each feed, paired by round.

Then ``perfkit_paddle.replay.thread_op_ns`` (its replayed training step, CPU time with a loading
thread beside it less on a batch in hand, per op) with its own numpy Dataset, and with a
``TensorDataset`` of the demo's rows (slices: Paddle ops in the loading thread).

    nice -n 10 python bench/paddle_loader_feeds.py [--rounds 12] [--block 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

from bench_advice import (
    DEMO_BATCH,
    DEMO_WIDTH,
    demo_data,
    demo_loader,
    paddle_mlp,
    paddle_train_loop,
)
from scenario_types import Loop

FEEDS = ("tensors, thread", "numpy, worker", "numpy, thread", "in hand")
#: Untimed steps after a switch of feed.
SETTLE_STEPS = 5


def feeds(rounds: int, block: int) -> None:
    import paddle

    paddle.set_device("cpu")
    paddle.seed(0)
    model = paddle_mlp(4, DEMO_WIDTH)
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    inputs, labels = demo_data()
    batch = (paddle.to_tensor(inputs[:DEMO_BATCH]), paddle.to_tensor(labels[:DEMO_BATCH]))

    def in_hand() -> Iterator[Any]:
        while True:
            yield batch

    made = (
        demo_loader(inputs, labels, workers=0, tensors=True),
        demo_loader(inputs, labels, workers=1, tensors=False),
        demo_loader(inputs, labels, workers=0, tensors=False),
        in_hand(),
    )
    # one model and optimizer, each feed a loop of its own over them
    loops = {
        name: paddle_train_loop(model, optimizer, batches)
        for name, batches in zip(FEEDS, made, strict=True)
    }
    try:
        _time_feeds(loops, rounds, block)
    finally:
        for loop in loops.values():
            loop.close()


def feeds_in_turn(
    loops: dict[str, Loop], rounds: int, block: int, *, warmup: int = 10, settle: int = SETTLE_STEPS
) -> dict[str, list[tuple[float, float, float]]]:
    """Each of ``loops`` (one per feed) timed in turn, in a rotating order, ``rounds`` times:
    for each loop, per turn, (wall, this thread's CPU, the process's CPU) in ns per step over
    ``block`` steps, after ``warmup`` untimed steps each at the start and ``settle`` before
    each turn."""
    for loop in loops.values():
        for _ in range(warmup):
            loop.step()
    clocks = (time.perf_counter_ns, time.thread_time_ns, time.process_time_ns)
    names = list(loops)
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    for turn in range(rounds):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            for _ in range(settle):
                loops[name].step()
            start = [clock() for clock in clocks]
            for _ in range(block):
                loops[name].step()
            wall, thread, process = (
                (clock() - s) / block for clock, s in zip(clocks, start, strict=True)
            )
            times[name].append((wall, thread, process))
    return times


def _time_feeds(loops: dict[str, Loop], rounds: int, block: int) -> None:
    times = {
        name: [tuple(v / 1e6 for v in turn) for turn in turns]  # ms
        for name, turns in feeds_in_turn(loops, rounds, block).items()
    }
    print(f"{'feed':18s} {'wall ms':>8s} {'thread CPU ms':>14s} {'process CPU ms':>15s}")
    for name in FEEDS:
        medians = [statistics.median(t[i] for t in times[name]) for i in range(3)]
        print(f"{name:18s} {medians[0]:8.3f} {medians[1]:14.3f} {medians[2]:15.3f}")
    base = [t[0] for t in times[FEEDS[0]]]
    for name in FEEDS[1:]:
        less = sorted(b - t[0] for b, t in zip(base, times[name], strict=True))
        print(
            f"{FEEDS[0]} less {name}: median {statistics.median(less):.3f} ms a step "
            f"(rounds {less[0]:.3f} to {less[-1]:.3f})"
        )


def op_costs(repeat: int) -> None:
    import paddle

    from perfkit_paddle.replay import thread_op_ns

    inputs, labels = demo_data()
    slices = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
    for _ in range(repeat):
        print(
            f"each training op beside the replay's numpy Dataset {thread_op_ns() / 1e3:.2f} us, "
            f"beside a TensorDataset of slices {thread_op_ns(slices) / 1e3:.2f} us",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--block", type=int, default=30)
    parser.add_argument("--op-repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    feeds(args.rounds, args.block)
    op_costs(args.op_repeat)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    sys.stdout.flush()
    # Paddle's loading threads can hold the interpreter's exit
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
