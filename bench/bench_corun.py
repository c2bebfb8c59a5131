"""Does the co-run replay see what a real loader worker and a real training step do to each other?

The input-pipeline advice scales the remedied step by how much a loader worker on a free core
and the training step slow each other (``perfkit_core.advice.corun.corun_slowdowns``: a unit of
the framework's ops and a unit of Dataset-like Python work, each alone and each beside the other
in a second process). This script puts, trial after trial, the replay's two figures beside the
same two figures of ``bench_advice.py``'s loader scenario: its 512-wide MLP's training step (fused
Adam, one intra-op thread) and its slow Dataset's batch of 16 samples, each alone and each beside
the other in a second process, with the same protocol. A machine whose vCPUs move between
sharing one physical core and not shows both states; within a trial the two pairs should agree.

    nice -n 10 python bench/bench_corun.py --trials 12
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_advice


def _helper(conn: Any, work: Callable[[int], Any], items: int) -> None:
    """The second process: on each message run ``work(items)`` and send its ns; None ends."""
    while conn.recv() is not None:
        start = time.perf_counter_ns()
        work(items)
        conn.send(time.perf_counter_ns() - start)


def real_slowdowns(train: Callable[[int], Any], load: Callable[[int], Any], rounds: int) -> tuple:
    """(the training step's, the Dataset's) slowdown beside each other: per round each alone,
    then both at once (the Dataset in a second process), the median of the ratios."""
    here, there = multiprocessing.Pipe()
    # two batches (about 20 ms on a 2-core VM): as long as the three steps run beside them
    process = multiprocessing.Process(target=_helper, args=(there, load, 2), daemon=True)
    process.start()
    training, loading = [], []
    try:
        for _ in range(rounds):
            here.send(True)
            load_alone = here.recv()
            train(1)  # the first step after a pause is slower: warm it untimed, as beside
            start = time.perf_counter_ns()
            train(2)
            train_alone = time.perf_counter_ns() - start
            here.send(True)
            train(1)
            start = time.perf_counter_ns()
            train(2)
            train_beside = time.perf_counter_ns() - start
            load_beside = here.recv()
            training.append(train_beside / train_alone)
            loading.append(load_beside / load_alone)
        here.send(None)
    finally:
        process.join(10)
    return statistics.median(training), statistics.median(loading)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import torch

    from perfkit_torch.replay import corun_slowdowns

    torch.set_num_threads(1)
    torch.manual_seed(0)
    width = bench_advice.LOADER_WIDTH
    model = torch.nn.Sequential(
        torch.nn.Linear(bench_advice.WIDTH, width), bench_advice.torch_mlp(6, width)
    )
    optimizer = torch.optim.Adam(model.parameters(), fused=True)
    x = torch.randn(bench_advice.BATCH, bench_advice.WIDTH)
    y = torch.randint(0, 10, (bench_advice.BATCH,))

    def train(steps: int) -> None:
        for _ in range(steps):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()

    def load(batches: int) -> None:
        for _ in range(batches):
            for index in range(bench_advice.BATCH):
                bench_advice.slow_sample(index)

    train(3)
    print("trial  time   replay: ops  Python |  scenario: training step  Dataset batch")
    start = time.monotonic()
    for trial in range(args.trials):
        ops, python = corun_slowdowns()
        step, batch = real_slowdowns(train, load, args.rounds)
        print(
            f"{trial + 1:5d} {time.monotonic() - start:5.0f}s  {ops:11.2f} {python:7.2f} | "
            f"{step:24.2f} {batch:14.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
