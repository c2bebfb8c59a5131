"""What taking a ready batch from a torch DataLoader worker costs the training process, while
the worker is idle and while it is making the next batch, under torch's two sharing strategies.

The input-pipeline model (``perfkit_core.advice.loader``) charges the training process a fixed
cost per batch received, the hand-over ``--measure`` times with a worker that has nothing else
to do. Under torch's default ``file_descriptor`` strategy the training process receives each
tensor's file descriptor from a thread of the worker, over a connection that thread must serve
holding the GIL, several times per batch; while the worker's Dataset runs Python, that thread
waits for it. So a batch the worker has already made can wait for most of the next one. Under
``file_system`` the training process opens the shared memory by name and asks the worker for
nothing.

For each strategy, one worker (``prefetch_factor=2``) loads ``bench_advice``'s slow Dataset;
each round waits until the worker has made both batches it prefetches, takes one (the worker
idle: it then starts the next), and at once takes the other, already made, while the worker
works. Rounds interleave the strategies and a batch of the Dataset made in the training
process; medians.

    nice -n 10 python bench/bench_handover.py --rounds 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STRATEGIES = ("file_descriptor", "file_system")


def loader(strategy: str) -> Any:
    """An iterator over ``bench_advice``'s slow Dataset with one worker started under
    ``strategy`` (a worker keeps the strategy it was started with)."""
    import torch
    from bench_advice import BATCH, TorchSlowDataset

    from perfkit_torch.replay import iter_sharing

    iterator = iter_sharing(
        torch.utils.data.DataLoader(
            TorchSlowDataset(),
            batch_size=BATCH,
            num_workers=1,
            persistent_workers=True,
            prefetch_factor=2,
        ),
        strategy,
    )
    for _ in range(3):
        next(iterator)
    return iterator


def one_round(iterator: Any, batch_s: float) -> tuple[float, float]:
    """(ns to take a made batch from an idle worker, ns to take a made batch from a worker
    making the next one)."""
    time.sleep(3 * batch_s + 0.02)  # both prefetched batches made: the worker idle
    start = time.perf_counter_ns()
    next(iterator)  # the worker gets the next index and starts on it
    idle = time.perf_counter_ns() - start
    start = time.perf_counter_ns()
    next(iterator)  # made before; the worker is busy now
    return idle, time.perf_counter_ns() - start


def main() -> int:
    import torch
    from bench_advice import BATCH, TorchSlowDataset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds; medians")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = TorchSlowDataset()

    def batch_ns() -> float:  # one batch of the Dataset in the training process
        start = time.perf_counter_ns()
        for index in range(BATCH):
            dataset[index]
        return time.perf_counter_ns() - start

    batch_ns()  # first calls
    loaders = {strategy: loader(strategy) for strategy in STRATEGIES}
    taken: dict[str, list[tuple[float, float]]] = {strategy: [] for strategy in STRATEGIES}
    batches: list[float] = []
    try:
        for _ in range(args.rounds):
            batches.append(batch_ns())
            for strategy, iterator in loaders.items():
                taken[strategy].append(one_round(iterator, batches[-1] / 1e9))
    finally:
        for iterator in loaders.values():
            iterator._shutdown_workers()
    print(
        f"the Dataset makes a batch in {statistics.median(batches) / 1e6:.2f} ms in the "
        "training process"
    )
    print(f"{'strategy':<16} {'worker idle':>12} {'worker busy':>12}   (ms to take a made batch)")
    for strategy, rounds in taken.items():
        idle = statistics.median(r[0] for r in rounds) / 1e6
        busy = statistics.median(r[1] for r in rounds) / 1e6
        print(f"{strategy:<16} {idle:12.2f} {busy:12.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
