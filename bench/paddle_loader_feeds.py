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

Then, timed as ``perfkit_paddle.replay.thread_op_ns`` times it (its step of small ops, CPU time
with a loading thread beside it less on a batch in hand, per op), the per-op cost beside the
replay's numpy Dataset and beside a ``TensorDataset`` of slices.

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

from bench_advice import DEMO_BATCH, DEMO_ROWS, DEMO_WIDTH, demo_batches, paddle_mlp

FEEDS = ("tensors, thread", "numpy, worker", "numpy, thread", "in hand")
#: Untimed steps after a switch of feed.
SETTLE_STEPS = 5


def _feeds(paddle: Any, inputs: Any, labels: Any) -> dict[str, Iterator[Any]]:
    class Rows(paddle.io.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return DEMO_ROWS

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            return inputs[index], labels[index]

    def loader(dataset: Any, workers: int) -> Iterator[Any]:
        return iter(
            paddle.io.DataLoader(
                dataset,
                batch_sampler=demo_batches(),
                num_workers=workers,
                persistent_workers=bool(workers),
            )
        )

    tensors = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
    batch = (paddle.to_tensor(inputs[:DEMO_BATCH]), paddle.to_tensor(labels[:DEMO_BATCH]))

    def in_hand() -> Iterator[Any]:
        while True:
            yield batch

    return dict(
        zip(
            FEEDS,
            (loader(tensors, 0), loader(Rows(), 1), loader(Rows(), 0), in_hand()),
            strict=True,
        )
    )


def feeds(rounds: int, block: int) -> None:
    import numpy as np
    import paddle

    paddle.set_device("cpu")
    paddle.seed(0)
    model = paddle_mlp(4, DEMO_WIDTH)
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((DEMO_ROWS, DEMO_WIDTH)).astype("float32")
    labels = rng.integers(0, 10, (DEMO_ROWS,)).astype("int64")
    batches = _feeds(paddle, inputs, labels)

    def step(feed: Iterator[Any]) -> None:
        x, y = next(feed)
        loss = paddle.nn.functional.cross_entropy(model(x), y.reshape([-1]))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    try:
        _time_feeds(batches, step, rounds, block)
    finally:
        for feed in batches.values():
            getattr(feed, "_try_shutdown_all", lambda: None)()


def _time_feeds(batches: dict[str, Iterator[Any]], step: Any, rounds: int, block: int) -> None:
    for feed in batches.values():
        for _ in range(10):
            step(feed)
    clocks = (time.perf_counter_ns, time.thread_time_ns, time.process_time_ns)
    times: dict[str, list[tuple[float, ...]]] = {name: [] for name in FEEDS}
    for turn in range(rounds):
        for name in FEEDS[turn % len(FEEDS) :] + FEEDS[: turn % len(FEEDS)]:
            for _ in range(SETTLE_STEPS):
                step(batches[name])
            start = [clock() for clock in clocks]
            for _ in range(block):
                step(batches[name])
            times[name].append(
                tuple((clock() - s) / block / 1e6 for clock, s in zip(clocks, start, strict=True))
            )
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
    import numpy as np
    import paddle

    from perfkit_paddle import replay

    train, ready = replay._training_step()
    rows = 200_000
    tensors = paddle.io.TensorDataset(
        [
            paddle.to_tensor(np.random.default_rng(0).random((rows, 64), dtype="float32")),
            paddle.to_tensor(np.zeros(rows, "int64")),
        ]
    )

    def per_op(dataset: Any) -> float:
        loader = paddle.io.DataLoader(dataset, batch_size=replay.THREAD_BATCH, num_workers=0)
        iterator = iter(loader)
        for _ in range(3):
            train(next(iterator))
        costs = []
        for _ in range(replay.THREAD_ROUNDS):
            alone = replay._per_step(lambda: train(ready), replay.THREAD_STEPS, time.thread_time_ns)
            beside = replay._per_step(
                lambda: train(next(iterator)), replay.THREAD_STEPS, time.thread_time_ns
            )
            costs.append((beside - alone) / replay.THREAD_OPS)
        replay._shutdown(iterator)
        return statistics.median(costs) / 1e3

    for _ in range(repeat):
        print(
            f"each training op beside the replay's numpy Dataset {per_op(replay._slow_samples()):.2f} "
            f"us, beside a TensorDataset of slices {per_op(tensors):.2f} us",
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
