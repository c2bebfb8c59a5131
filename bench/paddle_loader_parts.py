"""The parts of the input-pipeline model on a scenario's own step, against the replays that
stand in for them: is the saving the model gives from the replays' parts the saving one worker
delivers?

The scenario's model and optimizer (``--scenario loader``: ``bench_advice``'s paddle-loader,
the slow Dataset feeding a 512-wide MLP with multi-tensor Adam; ``demo``: paddle-demo, a
``TensorDataset`` of rows feeding a 64-wide MLP with the per-parameter Adam), fed in turn
(blocks of ``--block`` steps, rotating order, a few untimed steps after each switch) by

- ``thread``: the single-process loader (its loading thread beside the training thread: the run
  the finding reads);
- ``worker``: one worker (the remedy, on the one free core; the demo's rows as numpy arrays, as
  its remedy says);
- ``in hand``: one batch made once (the step with no loading beside it).

Each round gives the parts measured on the loop itself: each training op's extra CPU beside the
loading thread (the training thread's CPU per step fed by the thread, less in hand, over the
step's outermost ops, counted from a profile of the loop as the finding counts them) and what
receiving a batch adds (the worker's step less in hand); and the same parts from
``perfkit_paddle.replay`` (``thread_op_ns``, ``loader_receive_ns``, ``loader_batch_ns``),
timed right after. The model's saving (``thread_split`` and ``loader_saving``, perfkit's own
functions) from each set of parts is printed beside the saving delivered (the thread's step
less the worker's). The measured parts give the delivered saving exactly wherever the
training side bounds the step with a worker (a check of the model's algebra); what the
replays' parts give is the question.

    nice -n 10 python bench/paddle_loader_parts.py [--scenario loader|demo] [--rounds 4]
        [--turns 6] [--block 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from bench_advice import (
    BATCH,
    DEMO_BATCH,
    DEMO_WIDTH,
    LOADER_WIDTH,
    WIDTH,
    demo_data,
    demo_loader,
    paddle_mlp,
    paddle_slow_dataset,
    paddle_train_loop,
)
from paddle_loader_feeds import feeds_in_turn

FEEDS = ("thread", "worker", "in hand")
#: Untimed steps after a switch of feed, and before the first round.
SETTLE_STEPS = 4
WARMUP_STEPS = 8


def _loader(workers: int) -> Iterator[Any]:
    import paddle

    return iter(
        paddle.io.DataLoader(
            paddle_slow_dataset(),
            batch_size=BATCH,
            shuffle=False,
            num_workers=workers,
            persistent_workers=bool(workers),
        )
    )


def scenario(name: str) -> tuple[Any, Any, Callable[[], Iterator[Any]], Iterator[Any], Any]:
    """(model, optimizer, a new single-process loader, one worker's loader, a batch in hand) of
    the scenario ``name``."""
    import paddle

    paddle.set_device("cpu")
    paddle.seed(0)
    if name == "loader":
        model = paddle.nn.Sequential(
            paddle.nn.Linear(WIDTH, LOADER_WIDTH), paddle_mlp(6, LOADER_WIDTH)
        )
        optimizer = paddle.optimizer.Adam(
            learning_rate=1e-3, parameters=model.parameters(), use_multi_tensor=True
        )
        worker = _loader(1)
        return model, optimizer, lambda: _loader(0), worker, next(worker)
    model = paddle_mlp(4, DEMO_WIDTH)
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    inputs, labels = demo_data()
    batch = (paddle.to_tensor(inputs[:DEMO_BATCH]), paddle.to_tensor(labels[:DEMO_BATCH]))
    return (
        model,
        optimizer,
        lambda: demo_loader(inputs, labels, workers=0, tensors=True),
        demo_loader(inputs, labels, workers=1, tensors=False),
        batch,
    )


def training_ops(model: Any, optimizer: Any, batch: Any) -> float:
    """The outermost ops per step of the loop's training thread on ``batch``, as the
    input-pipeline finding counts them (``training_ops_per_step``), from a profile."""
    import paddle.profiler as profiler

    import perfkit_core
    from perfkit_core.advice.engine import make_context
    from perfkit_core.advice.rules.cpu import training_ops_per_step
    from perfkit_paddle.handler import on_trace_ready

    loop = paddle_train_loop(model, optimizer, iter(lambda: batch, None))
    with tempfile.TemporaryDirectory() as folder:
        handler = on_trace_ready(folder, worker_name="parts", background=False)
        with profiler.Profiler(
            targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 6), on_trace_ready=handler
        ) as prof:
            for _ in range(7):
                loop.step()
                prof.step()
        return training_ops_per_step(make_context(perfkit_core.load(handler.runs[0])))


def model_saving(
    thread: tuple[float, float, float], ops: float, op_ns: float, receive_ns: float, batch_ns: float
) -> float:
    """The saving (ns per step) the input-pipeline model gives one worker for a step that took
    ``thread`` (wall, training thread CPU, process CPU; ns) beside the loading thread, with
    each op costing ``op_ns`` beside it and receiving a batch ``receive_ns``."""
    from perfkit_core.advice.loader import loader_saving, thread_split

    wall, training_cpu, process_cpu = thread
    loading_cpu = process_cpu - training_cpu
    data, rest, contention = thread_split(wall, loading_cpu, training_cpu, ops, op_ns)
    return loader_saving(data, rest, 1.0, batch_ns, contention, receive_ns)


def rounds(name: str, count: int, turns: int, block: int) -> None:
    model, optimizer, single_process, worker, batch = scenario(name)
    try:
        _rounds(model, optimizer, single_process, worker, batch, count, turns, block)
    finally:
        # a persistent worker left running outlives the program's exit
        paddle_train_loop(model, optimizer, worker).close()


def _rounds(
    model: Any,
    optimizer: Any,
    single_process: Callable[[], Iterator[Any]],
    worker: Iterator[Any],
    batch: Any,
    count: int,
    turns: int,
    block: int,
) -> None:
    from perfkit_paddle.replay import loader_batch_ns, loader_receive_ns, thread_op_ns

    ops = training_ops(model, optimizer, batch)
    print(f"the step's outermost ops (profiled): {ops:.0f}", flush=True)
    errors: dict[str, list[float]] = {"measured": [], "replays": []}
    for round_ in range(count):
        loops = {
            "thread": paddle_train_loop(model, optimizer, single_process()),
            "worker": paddle_train_loop(model, optimizer, worker),
            "in hand": paddle_train_loop(model, optimizer, iter(lambda: batch, None)),
        }
        try:
            times = feeds_in_turn(loops, turns, block, warmup=WARMUP_STEPS, settle=SETTLE_STEPS)
        finally:
            loops["thread"].close()
        med = {f: tuple(statistics.median(t[i] for t in times[f]) for i in range(3)) for f in FEEDS}
        delivered = med["thread"][0] - med["worker"][0]
        parts = {
            "measured": (
                (med["thread"][1] - med["in hand"][1]) / ops,
                med["worker"][0] - med["in hand"][0],
            ),
            "replays": (thread_op_ns(), loader_receive_ns()),
        }
        batch_ns = loader_batch_ns()
        print(
            f"round {round_}: ms a step: thread {med['thread'][0] / 1e6:.2f} (training thread CPU "
            f"{med['thread'][1] / 1e6:.2f}, process CPU {med['thread'][2] / 1e6:.2f}), worker "
            f"{med['worker'][0] / 1e6:.2f}, in hand {med['in hand'][0] / 1e6:.2f}; one worker "
            f"saved {delivered / 1e6:.3f} ms",
            flush=True,
        )
        for source, (op_ns, receive_ns) in parts.items():
            saving = model_saving(med["thread"], ops, op_ns, receive_ns, batch_ns)
            error = 100.0 * (saving / delivered - 1.0) if delivered > 0 else float("nan")
            errors[source].append(error)
            print(
                f"  {source:8s}: each op {op_ns / 1e3:5.1f} us, receiving {receive_ns / 1e6:.3f} "
                f"ms -> model {saving / 1e6:.3f} ms ({error:+.0f}%)",
                flush=True,
            )
    for source, found in errors.items():
        print(f"model from the {source} parts: {', '.join(f'{e:+.0f}%' for e in found)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("loader", "demo"), default="loader")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--block", type=int, default=30)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rounds(args.scenario, args.rounds, args.turns, args.block)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    sys.stdout.flush()
    # Paddle's loading threads can hold the interpreter's exit
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
