"""Does the saving perfkit promises match the saving its remedy delivers?

Small CPU training loops, each built so that one advice rule fires:

- ``torch-adam``, ``torch-adamw``, ``torch-sgd``: a deep narrow MLP (``--blocks`` blocks of
  Linear(32, 32) + LayerNorm + ReLU, batch 16) with the per-parameter loop optimizer
  (``foreach=False``); remedy: ``fused=True``.
- ``torch-loader``: a 6-block MLP 512 wide fed by a Dataset that does CPU work per sample
  (about 11 ms per batch), loaded in the training process; remedy: ``num_workers`` = the cores training leaves free (``os.cpu_count()``
  minus torch's intra-op threads, at least 1), ``persistent_workers=True``, and the
  ``file_system`` sharing strategy for the workers.
- ``torch-compile`` and ``torch-small-ops`` (only with ``--compile``: inductor compiles for tens
  of seconds on a small CPU): a narrow MLP whose Python dominates the step, and a chain of 60
  tiny elementwise ops between two Linear layers; remedy: ``torch.compile(model)``.
- ``paddle-adam``, ``paddle-momentum``: the deep narrow MLP in Paddle with
  ``use_multi_tensor=False``; remedy: ``use_multi_tensor=True``.
- ``paddle-loader``: the slow Dataset through ``paddle.io.DataLoader``; remedy: ``num_workers``.
- ``torch-workers``, ``paddle-workers``: the slow Dataset feeding a 2-block MLP through one
  DataLoader worker already, so that loading bounds the step; remedy: the workers the finding
  prescribes (a second for the core the worker and training leave, a third where the worker
  waited for part of each batch; it may count none free and promise nothing).
- ``torch-waiting``, ``paddle-waiting``: a Dataset that sleeps through most of each batch
  (about 8 ms, as reads from a slow disk do) feeding the 2-block MLP through one worker;
  remedy: the workers the finding prescribes, a worker per core left free and more besides
  (they wait beside the first rather than compute).
- ``torch-waiting-inline``: the waiting Dataset loaded by the training thread itself
  (``num_workers=0``); remedy: the workers the finding prescribes, more than the free cores
  (the step timer timed the thread's CPU time over its batches, so the waits show).
- ``torch-mixed``, ``paddle-mixed``: the slow Dataset feeding the deep narrow MLP with the
  per-parameter Adam; remedies: ``num_workers`` and the optimizer's, each alone (the order of
  the findings) and both at once (the combined saving the headline promises).

With ``--device cuda`` it runs the GPU scenarios of ``advice_gpu.py`` instead (AMP, pageable
and pinned copies, host syncs in the step, launch-bound tiny kernels).

For each scenario the loop is profiled with perfkit's handler (``--profile-steps`` recorded
steps), advised twice (``advise(run)`` and ``advise(run, measure=True)``), then every finding
whose remedy the scenario knows how to apply is applied and the loop is timed WITHOUT the
profiler (``paired.py``): where every applied remedy can run beside its baseline in one process
(the optimizer's, on a second copy of the model; ``num_workers``, with a second loader and
workers of its own) baseline and remedy are **paired**: they alternate step by step
(``--rounds`` x ``--steps`` pairs), or, with loader workers, in blocks of ``--steps`` steps
after each loader's prefetch is drained (``--rounds`` pairs), and the achieved saving is the
median of the pairs' differences, with its 95% bootstrap interval, over the baseline's median
step in the same pairs; otherwise (``torch.compile``), or with ``--unpaired``, the original and
each remedied variant run in **unpaired** interleaved rounds (``--rounds`` rounds of
``--steps`` steps; medians). Each scenario prints which method timed it. It prints, per finding, the estimated saving (ms per step, and % of
the step it was estimated against) beside the achieved one (ms per step, and % of the unprofiled
step), then a PASS/FAIL line per finding: the estimate is within +-20% of the achieved saving,
or within 1 point of the step when the achieved saving is under 5% of it, and whether the
estimate lies inside the achieved saving's 95% bootstrap interval (of the median round-by-round
saving; printed on the remedy's line): outside it, the miss is more than the rounds' noise.
Then, per scenario,
whether the order of findings by estimate equals their order by achieved saving. Two findings
whose achieved savings the rounds cannot tell apart (the 95% bootstrap interval of the median
round-by-round difference of their remedied loops holds 0) tie: either order matches, and the
line says so with the interval. Each applied finding is then followed as ``perfkit compare
BEFORE AFTER`` reads it (``[compare]``): the scenario profiled again without and then with the
remedy, one session after the other as a user records them around a change, the promise of
BEFORE against the step time delivered and the settings read from both runs. Exit status 1
when a line FAILs.

A machine whose speed moves between the profile and the rounds moves the achieved share
against the estimate's. Each scenario's step line says how far it moved, and a ``[window ]``
line per finding gives the model's estimate fed the rounds' own minutes: another copy of the
loop without the remedy runs in the rounds under a step timer (one per round, closed after
it), and the run is advised again with that timer's steps, phases and idle cores in place of
its own. That line is a diagnosis of the model apart from the drift, not a check; for an
input-pipeline finding a ``[wreplay]`` line does the same for ``--measure``'s replays, fed
the rounds' own loading, rest of the step and free cores. Each loop's turn in a round
starts after a pause and untimed steps (two, and more until 0.1 s into the turn), so that no
loop's workers make batches beside another loop's turn or hand their own turn batches made
before it, and a worker that slept through the other turns is back at its pace. With
``--repeat N`` every scenario runs in N sessions, and each check is judged on the medians: the
median estimate against the median achieved saving (each a share of its own session's step),
an order where most sessions matched; a summary lists each session's verdicts beside it,
and marks UNSETTLED an estimate's check whose achieved saving moved between the sessions by
more than the check allows around their median: the machine did not repeat what it is judged
on, so its verdict says as much about the minutes it ran in as about the estimate.

    nice -n 10 python bench/bench_advice.py
    nice -n 10 python bench/bench_advice.py --only torch-adam torch-loader --rounds 9
    nice -n 10 python bench/bench_advice.py --compile --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paired import (
    LOADER_RULES,
    WINDOW,
    Timing,
    median_interval,
    pairable,
    paired_variants,
    start_turn,
    timed_round,
)
from scenario_types import WIDTH, ElementwiseChain, Loop, Scenario, torch_mlp

from perfkit_core.advice.loader import (
    LOADER_BATCH_NS,
    RECEIVE_TIMED,
    TRAINING_MACHINE,
)
from perfkit_torch.replay import iter_sharing

#: Within this relative error of the achieved saving, an estimate PASSes ...
TOLERANCE = 0.20
#: ... or, when the achieved saving is under SMALL_PCT of the step, within POINTS of the step.
SMALL_PCT = 5.0
POINTS = 1.0

BATCH = 16
#: The demo scenario's MLP width, batch, and rows (read in order, over and over).
DEMO_WIDTH = 64
DEMO_BATCH = 32
DEMO_ROWS = 200_000
#: The slow Dataset's work per sample: this many rounds of a small numpy transform (about
#: 0.7 ms per sample, 11 ms per batch on a 2-core VM): an augmentation a worker can pay for.
#: One DataLoader worker on such a machine costs each side about 2 ms per batch to hand the
#: batch over, so a Dataset that makes a batch in 1 ms is faster in the training process.
SAMPLE_WORK = 60
#: The loader scenarios' model: Linear(32, LOADER_WIDTH), then 6 blocks that wide (about 8 ms
#: of training per step), so that a worker has the rest of the step to load behind.
LOADER_WIDTH = 512


# ------------------------------------------------------------------ loops


def free_cores(threads: int) -> int:
    """The cores training with ``threads`` intra-op threads leaves to loader workers (>= 1)."""
    return max((os.cpu_count() or 1) - threads, 1)


def slow_sample(index: int) -> tuple[Any, int]:
    """A sample that costs CPU to make: (features as float32 numpy, label)."""
    import numpy as np

    rng = np.random.default_rng(index)
    x = rng.standard_normal(WIDTH * 4)
    for _ in range(SAMPLE_WORK):
        x = np.tanh(x * 1.01 + 0.1)
        x = np.sort(x)
    return x[:WIDTH].astype("float32"), int(index % 10)


#: The waiting Dataset's wait per sample (s): reading a file from a slow disk or a network
#: share, where the worker's process sleeps rather than computes (8 ms a batch of ``BATCH``).
SAMPLE_WAIT_S = 0.0005


def waiting_sample(index: int) -> tuple[Any, int]:
    """A sample that waits for its bytes (``SAMPLE_WAIT_S``, asleep) and costs little CPU:
    (features as float32 numpy, label)."""
    import numpy as np

    time.sleep(SAMPLE_WAIT_S)
    return np.random.default_rng(index).standard_normal(WIDTH).astype("float32"), index % 10


class TorchWaitingDataset:
    """A map-style torch Dataset whose samples wait for their bytes (``SAMPLE_WAIT_S``, as a
    read from a slow disk does) and cost little CPU."""

    def __len__(self) -> int:
        return 10**7

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import torch

        x, y = waiting_sample(index)
        return torch.from_numpy(x), y


class TorchSlowDataset:
    """A map-style torch Dataset whose samples cost CPU (``slow_sample``)."""

    def __len__(self) -> int:
        return 10**7

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import torch

        x, y = slow_sample(index)
        return torch.from_numpy(x), y


def torch_random_batches(width: int = WIDTH) -> Iterator[tuple[Any, Any]]:
    import torch

    g = torch.Generator().manual_seed(0)
    while True:
        yield torch.randn(BATCH, width, generator=g), torch.randint(0, 10, (BATCH,), generator=g)


def torch_train_loop(model: Any, optimizer: Any, batches: Iterator[Any], close: Any = None) -> Loop:
    import torch

    def step() -> None:
        x, y = next(batches)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return Loop(step, close or (lambda: None))


def torch_optimizer_scenario(name: str, make: Callable[..., Any], blocks: int) -> Scenario:
    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = torch_mlp(blocks)
        options = {"fused": True} if "optimizer" in applied else {"foreach": False}
        return torch_train_loop(model, make(model.parameters(), **options), torch_random_batches())

    return Scenario(
        f"torch-{name}", "torch", "optimizer", build, {"optimizer": "foreach=False -> fused=True"}
    )


def torch_slow_loop(
    model: Any,
    optimizer: Any,
    applied: frozenset[str],
    workers: int | None = None,
    dataset: Any = None,
) -> Loop:
    """The training loop of ``model`` fed by the slow Dataset: loaded in the training process,
    or, with the input-pipeline remedy applied, by workers on the cores training leaves free,
    started under the sharing strategy the remedy sets (``iter_sharing``); ``workers``: that
    many workers whatever is applied."""
    import torch

    if workers is None:
        workers = free_cores(1) if "input-pipeline" in applied else 0
    options: dict[str, Any] = (
        {"num_workers": workers, "persistent_workers": True, "prefetch_factor": 2}
        if workers
        else {}
    )
    loader = torch.utils.data.DataLoader(
        TorchSlowDataset() if dataset is None else dataset, batch_size=BATCH, shuffle=False, **options
    )
    # the workers the remedy starts, under its sharing strategy
    iterator = iter_sharing(loader) if workers else iter(loader)
    return torch_train_loop(model, optimizer, iterator, lambda: _shutdown(iterator))


def torch_loader_scenario() -> Scenario:
    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = torch_mlp(6, LOADER_WIDTH)
        model = torch.nn.Sequential(torch.nn.Linear(WIDTH, LOADER_WIDTH), model)
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        return torch_slow_loop(model, optimizer, applied)

    return Scenario(
        "torch-loader",
        "torch",
        "input-pipeline",
        build,
        {
            "input-pipeline": f"num_workers=0 -> {free_cores(1)} (the cores training leaves "
            "free), file_system sharing"
        },
    )


def prescribed_workers(
    sharing: str, had: int = 1
) -> tuple[dict[str, int], dict[str, str], Callable[[list[Any]], None]]:
    """For a scenario whose loader has ``had`` workers and whose remedy gives it as many as its
    input-pipeline finding prescribes (``remedy_workers`` of its evidence, the count its
    remedy code writes): (the count the remedied loop reads, the scenario's ``remedies``, its
    ``prescribe``, which sets both from the findings). ``sharing``: what else the remedy
    sets, a clause or ""."""
    count = {"workers": 1}
    remedies = {"input-pipeline": f"num_workers={had} -> as prescribed{sharing}"}

    def prescribe(findings: list[Any]) -> None:
        from perfkit_core.advice import remedy_workers

        finding = next((f for f in findings if f.rule == "input-pipeline"), None)
        found = remedy_workers(finding.evidence) if finding is not None else None
        workers = found[0] if found is not None and isinstance(found[0], int) else 1
        count["workers"] = workers
        remedies["input-pipeline"] = f"num_workers={had} -> {workers} (as prescribed){sharing}"

    return count, remedies, prescribe


def torch_prescribed_workers_scenario(name: str, dataset: Any = None, had: int = 1) -> Scenario:
    """A small MLP (about 1 ms a step) fed through ``had`` DataLoader workers (one; none: the
    training thread loads) by ``dataset`` (a factory; default the slow Dataset): loading
    bounds the step, and the remedy gives the loader as many workers as the finding
    prescribes."""
    count, remedies, prescribe = prescribed_workers(", file_system sharing", had)

    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = torch_mlp(2)
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        workers = count["workers"] if "input-pipeline" in applied else had
        data = None if dataset is None else dataset()
        return torch_slow_loop(model, optimizer, applied, workers, data)

    return Scenario(name, "torch", "input-pipeline", build, remedies, prescribe=prescribe)


def torch_workers_scenario() -> Scenario:
    """The slow Dataset (about 11 ms a batch) through one worker; the remedy gives the loader
    the workers the finding prescribes (one for the core the worker and training leave, and
    one more where the worker waited for part of each batch)."""
    return torch_prescribed_workers_scenario("torch-workers")


def torch_waiting_scenario() -> Scenario:
    """The waiting Dataset (about 8 ms a batch, nearly all of it asleep, as reads from a slow
    disk are) through one worker: the worker's pace bounds the step with cores to spare. The
    remedy gives the loader the workers the finding prescribes: a worker per core left free
    and more besides, since the added workers wait beside the first."""
    return torch_prescribed_workers_scenario("torch-waiting", TorchWaitingDataset)


def torch_waiting_inline_scenario() -> Scenario:
    """The waiting Dataset loaded by the training thread itself (``num_workers=0``). The step
    timer times the thread's CPU time while it takes its batches, so the finding sees the
    waits and prescribes workers beyond the free cores; the remedy gives the loader that
    many."""
    return torch_prescribed_workers_scenario("torch-waiting-inline", TorchWaitingDataset, had=0)


def torch_mixed_scenario(blocks: int) -> Scenario:
    """The slow Dataset feeding the deep narrow MLP with the per-parameter Adam: two findings,
    two remedies, and their interaction (a worker hides the loading behind the rest of the
    step, which ``fused=True`` shortens)."""

    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = torch_mlp(blocks)
        options = {"fused": True} if "optimizer" in applied else {"foreach": False}
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **options)
        return torch_slow_loop(model, optimizer, applied)

    return Scenario(
        "torch-mixed",
        "torch",
        "input-pipeline",
        build,
        {
            "input-pipeline": f"num_workers=0 -> {free_cores(1)}, file_system sharing",
            "optimizer": "foreach=False -> fused=True",
        },
    )


def _shutdown(iterator: Any) -> None:
    with contextlib.suppress(Exception):
        iterator._shutdown_workers()


def torch_small_ops_scenario() -> Scenario:
    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = ElementwiseChain(60)
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        if "python-overhead" in applied or "small-ops" in applied:
            model = torch.compile(model)
        return torch_train_loop(model, optimizer, torch_random_batches())

    remedy = "torch.compile(model)"
    return Scenario(
        "torch-small-ops",
        "torch",
        "small-ops",
        build,
        {"python-overhead": remedy, "small-ops": remedy},
    )


def torch_compile_scenario() -> Scenario:
    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = torch_mlp(8, 16)
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        if "python-overhead" in applied or "small-ops" in applied:
            model = torch.compile(model)
        return torch_train_loop(model, optimizer, torch_random_batches(16))

    remedy = "torch.compile(model)"
    return Scenario(
        "torch-compile",
        "torch",
        "python-overhead",
        build,
        {"python-overhead": remedy, "small-ops": remedy},
    )


def paddle_mlp(blocks: int, width: int = WIDTH) -> Any:
    import paddle

    layers: list[Any] = []
    for _ in range(blocks):
        layers += [paddle.nn.Linear(width, width), paddle.nn.LayerNorm(width), paddle.nn.ReLU()]
    return paddle.nn.Sequential(*layers, paddle.nn.Linear(width, 10))


def paddle_random_batches(width: int = WIDTH) -> Iterator[tuple[Any, Any]]:
    import numpy as np
    import paddle

    rng = np.random.default_rng(0)
    while True:
        yield (
            paddle.to_tensor(rng.standard_normal((BATCH, width)).astype("float32")),
            paddle.to_tensor(rng.integers(0, 10, (BATCH,)).astype("int64")),
        )


def paddle_train_loop(model: Any, optimizer: Any, batches: Iterator[Any]) -> Loop:
    """The Paddle training step over ``batches``; ``close`` stops a DataLoader iterator's
    workers or loading thread (Paddle's ``_try_shutdown_all``)."""
    import paddle

    def step() -> None:
        x, y = next(batches)
        loss = paddle.nn.functional.cross_entropy(model(x), y.reshape([-1]))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    def close() -> None:
        with contextlib.suppress(Exception):
            getattr(batches, "_try_shutdown_all", lambda: None)()

    return Loop(step, close, model)


def paddle_optimizer_scenario(name: str, cls: str, blocks: int) -> Scenario:
    def build(applied: frozenset[str]) -> Loop:
        import paddle

        paddle.set_device("cpu")
        paddle.seed(0)
        model = paddle_mlp(blocks)
        make = getattr(paddle.optimizer, cls)
        extra = {"momentum": 0.9} if cls == "Momentum" else {}
        optimizer = make(
            learning_rate=1e-3,
            parameters=model.parameters(),
            use_multi_tensor="optimizer" in applied,
            **extra,
        )
        return paddle_train_loop(model, optimizer, paddle_random_batches())

    return Scenario(
        f"paddle-{name}",
        "paddle",
        "optimizer",
        build,
        {"optimizer": "use_multi_tensor=False -> True"},
    )


def paddle_slow_dataset() -> Any:
    """A paddle Dataset whose samples cost CPU (``slow_sample``)."""
    import numpy as np
    import paddle

    class SlowDataset(paddle.io.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 10**7

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            x, y = slow_sample(index)
            return x, np.array([y], dtype="int64")

    return SlowDataset()


def paddle_waiting_dataset() -> Any:
    """A paddle Dataset whose samples wait for their bytes (``SAMPLE_WAIT_S``, asleep, as a
    read from a slow disk does) and cost little CPU."""
    import numpy as np
    import paddle

    class WaitingDataset(paddle.io.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return 10**7

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            x, y = waiting_sample(index)
            return x, np.array([y], dtype="int64")

    return WaitingDataset()


def paddle_slow_loop(
    model: Any,
    optimizer: Any,
    applied: frozenset[str],
    workers: int | None = None,
    dataset: Any = None,
) -> Loop:
    """The training loop of ``model`` fed by the slow Dataset through ``paddle.io.DataLoader``:
    in the training process, or, with the input-pipeline remedy applied, by workers on the
    cores training leaves free; ``workers``: that many workers whatever is applied."""
    import paddle

    if workers is None:
        workers = free_cores(1) if "input-pipeline" in applied else 0
    loader = paddle.io.DataLoader(
        paddle_slow_dataset() if dataset is None else dataset,
        batch_size=BATCH,
        shuffle=False,
        num_workers=workers,
        persistent_workers=bool(workers),
    )
    return paddle_train_loop(model, optimizer, iter(loader))


def paddle_loader_scenario() -> Scenario:
    def build(applied: frozenset[str]) -> Loop:
        import paddle

        paddle.set_device("cpu")
        paddle.seed(0)
        model = paddle.nn.Sequential(
            paddle.nn.Linear(WIDTH, LOADER_WIDTH), paddle_mlp(6, LOADER_WIDTH)
        )
        optimizer = paddle.optimizer.Adam(
            learning_rate=1e-3, parameters=model.parameters(), use_multi_tensor=True
        )
        return paddle_slow_loop(model, optimizer, applied)

    return Scenario(
        "paddle-loader",
        "paddle",
        "input-pipeline",
        build,
        {"input-pipeline": f"num_workers=0 -> {free_cores(1)}"},
    )


def paddle_one_worker_scenario(name: str, dataset: Any = None) -> Scenario:
    """``torch_prescribed_workers_scenario`` in Paddle, with one worker: a small MLP fed
    through one DataLoader worker by ``dataset`` (a factory; default the slow Dataset); the
    remedy gives the loader as many workers as the finding prescribes."""
    count, remedies, prescribe = prescribed_workers("")

    def build(applied: frozenset[str]) -> Loop:
        import paddle

        paddle.set_device("cpu")
        paddle.seed(0)
        model = paddle_mlp(2)
        optimizer = paddle.optimizer.Adam(
            learning_rate=1e-3, parameters=model.parameters(), use_multi_tensor=True
        )
        workers = count["workers"] if "input-pipeline" in applied else 1
        data = None if dataset is None else dataset()
        return paddle_slow_loop(model, optimizer, applied, workers, data)

    return Scenario(name, "paddle", "input-pipeline", build, remedies, prescribe=prescribe)


def paddle_workers_scenario() -> Scenario:
    """``torch_workers_scenario`` in Paddle: the slow Dataset through one worker; the remedy
    gives the loader the workers the finding prescribes."""
    return paddle_one_worker_scenario("paddle-workers")


def paddle_waiting_scenario() -> Scenario:
    """``torch_waiting_scenario`` in Paddle: the waiting Dataset through one worker; the remedy
    gives the loader the workers the finding prescribes."""
    return paddle_one_worker_scenario("paddle-waiting", paddle_waiting_dataset)


def demo_data() -> tuple[Any, Any]:
    """The demo's rows: (inputs, labels), numpy arrays drawn from seed 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((DEMO_ROWS, DEMO_WIDTH)).astype("float32")
    labels = rng.integers(0, 10, (DEMO_ROWS,)).astype("int64")
    return inputs, labels


def demo_loader(inputs: Any, labels: Any, *, workers: int, tensors: bool) -> Iterator[Any]:
    """Batches of ``DEMO_BATCH`` of the demo's rows from ``paddle.io.DataLoader`` with
    ``workers`` workers, from a ``TensorDataset`` of the rows as tensors (``tensors``: Paddle
    ops per sample) or a Dataset of the numpy rows (Paddle's workers crash on Tensor samples).
    The rows are read in order, over and over: the paired turns on a fast machine take more
    steps than one pass holds, and a new pass would restart the workers."""
    import paddle

    class Rows(paddle.io.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return DEMO_ROWS

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            return inputs[index], labels[index]

    class Rounds(paddle.io.Sampler):  # type: ignore[misc]
        def __iter__(self) -> Iterator[int]:
            while True:
                yield from range(DEMO_ROWS)

        def __len__(self) -> int:
            return 2**62

    dataset = (
        paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
        if tensors
        else Rows()
    )
    loader = paddle.io.DataLoader(
        dataset,
        batch_sampler=paddle.io.BatchSampler(sampler=Rounds(), batch_size=DEMO_BATCH),
        num_workers=workers,
        persistent_workers=bool(workers),
    )
    return iter(loader)


def paddle_demo_scenario() -> Scenario:
    """``perfkit demo``'s Paddle loop (``perfkit_paddle.demo``): a 4-block MLP 64 wide with
    the per-parameter Adam, fed batches of 32 by ``paddle.io.DataLoader`` from a
    ``paddle.io.TensorDataset`` of tensors, which its single-process loader reads in a thread
    of the training process: cheap loading, but Paddle ops of its own (a slice per sample and
    tensor) beside training's. The input-pipeline remedy gives it a worker; Paddle's workers
    crash on Tensor samples, so, as the remedy says, the remedied Dataset returns the same
    rows as numpy arrays."""

    def build(applied: frozenset[str]) -> Loop:
        import paddle

        paddle.set_device("cpu")
        paddle.seed(0)
        model = paddle_mlp(4, DEMO_WIDTH)
        optimizer = paddle.optimizer.Adam(
            learning_rate=1e-3,
            parameters=model.parameters(),
            use_multi_tensor="optimizer" in applied,
        )
        inputs, labels = demo_data()
        workers = free_cores(1) if "input-pipeline" in applied else 0
        batches = demo_loader(inputs, labels, workers=workers, tensors=not workers)
        return paddle_train_loop(model, optimizer, batches)

    return Scenario(
        "paddle-demo",
        "paddle",
        "input-pipeline",
        build,
        {
            "input-pipeline": f"num_workers=0 -> {free_cores(1)}, samples as numpy arrays",
            "optimizer": "use_multi_tensor=False -> True",
        },
    )


def paddle_mixed_scenario(blocks: int) -> Scenario:
    """The slow Dataset through Paddle's single-process DataLoader feeding the deep narrow MLP
    with the per-parameter Adam: two findings, two remedies."""

    def build(applied: frozenset[str]) -> Loop:
        import paddle

        paddle.set_device("cpu")
        paddle.seed(0)
        model = paddle_mlp(blocks)
        optimizer = paddle.optimizer.Adam(
            learning_rate=1e-3,
            parameters=model.parameters(),
            use_multi_tensor="optimizer" in applied,
        )
        return paddle_slow_loop(model, optimizer, applied)

    return Scenario(
        "paddle-mixed",
        "paddle",
        "input-pipeline",
        build,
        {
            "input-pipeline": f"num_workers=0 -> {free_cores(1)}",
            "optimizer": "use_multi_tensor=False -> True",
        },
    )


def scenarios(blocks: int, with_compile: bool) -> list[Scenario]:
    """Every scenario, torch first."""

    def adam(params: Any, **options: Any) -> Any:
        import torch

        return torch.optim.Adam(params, lr=1e-3, **options)

    def adamw(params: Any, **options: Any) -> Any:
        import torch

        return torch.optim.AdamW(params, lr=1e-3, **options)

    def sgd(params: Any, **options: Any) -> Any:
        import torch

        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **options)

    found = [
        torch_optimizer_scenario("adam", adam, blocks),
        torch_optimizer_scenario("adamw", adamw, blocks),
        torch_optimizer_scenario("sgd", sgd, blocks),
        torch_loader_scenario(),
        torch_workers_scenario(),
        torch_waiting_scenario(),
        torch_waiting_inline_scenario(),
        torch_mixed_scenario(blocks),
    ]
    if with_compile:
        found += [torch_compile_scenario(), torch_small_ops_scenario()]
    found += [
        paddle_optimizer_scenario("adam", "Adam", blocks),
        paddle_optimizer_scenario("momentum", "Momentum", blocks),
        paddle_loader_scenario(),
        paddle_workers_scenario(),
        paddle_waiting_scenario(),
        paddle_mixed_scenario(blocks),
        paddle_demo_scenario(),
    ]
    return found


# ------------------------------------------------------------------ profiling and timing


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the frameworks' own prints and warnings while profiling."""
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        yield


def profile(
    scenario: Scenario,
    directory: Path,
    steps: int,
    timer_steps: int = 30,
    applied: frozenset[str] = frozenset(),
) -> Any:
    """Profile the scenario's loop (with the remedies of the rules in ``applied``) with
    perfkit's handler; return the loaded run. A step timer records the ``steps`` profiled steps
    and ``timer_steps`` unprofiled ones after them into the run."""
    import perfkit_core

    loop = scenario.build(applied)
    timer = perfkit_core.step_timer(None, warmup=0)
    with quiet():
        for _ in range(3):
            loop.step()  # warm up outside the profile
        if scenario.framework == "torch":
            from torch.profiler import ProfilerActivity, schedule
            from torch.profiler import profile as torch_profile

            from perfkit_torch.handler import on_trace_ready

            handler = on_trace_ready(directory, worker_name=scenario.name, background=False)
            activities = [ProfilerActivity.CPU]
            if scenario.device != "cpu":
                from advice_gpu import gpu_profile_activities

                activities = gpu_profile_activities()
            with torch_profile(
                activities=activities,
                schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
                on_trace_ready=handler,
                record_shapes=True,
            ) as prof:
                timer.profiler = prof
                for _ in range(steps + 2):
                    with timer.step():
                        loop.step()
                    prof.step()
        else:
            import paddle.profiler as profiler

            from perfkit_paddle.handler import on_trace_ready as paddle_handler

            handler = paddle_handler(
                directory, worker_name=scenario.name, background=False, model=loop.model
            )
            prof = profiler.Profiler(
                targets=[profiler.ProfilerTarget.CPU],
                scheduler=(2, 2 + steps),
                on_trace_ready=handler,
                record_shapes=True,
            )
            timer.profiler = prof
            prof.start()
            for _ in range(steps + 2):
                with timer.step():
                    loop.step()
                prof.step(num_samples=BATCH)
            prof.stop()
        for _ in range(timer_steps):
            with timer.step():
                loop.step()
        timer.close()  # right after the steps: their last stretch counts toward the idle cores
    loop.close()
    if not handler.runs:
        raise RuntimeError(f"{scenario.name}: the handler saved no run ({handler.failures})")
    timer.save(handler.runs)
    return perfkit_core.load(handler.runs[0])


def time_variants(
    loops: dict[str, Loop],
    steps: int,
    rounds: int,
    records: list[dict[str, Any]] | None = None,
    slowdowns_of: str = "",
) -> Timing:
    """The unpaired rounds: the baseline's median step (ns, over ``rounds`` rounds of the mean
    of ``steps`` steps) and each other loop's saving per round (ns per step: the before-round
    less the NAME-round next to it). The loops take turns round by round, so a slow spell of the machine
    (they last about a second on a shared VM) lands on neighbouring rounds of both and cancels
    in their difference; each turn starts after ``SETTLE_S`` and untimed steps (``LEAD_STEPS``,
    and more until ``LEAD_S`` into the turn), so that no loop's workers work beside another
    loop's turn or hand its own turn batches made before it, and a worker that slept through
    the other turns is back at its pace. The ``WINDOW`` loop is no variant: each of its rounds
    runs under a step timer of its own, closed after the round (so its phase timers time no
    other loop), whose record goes to ``records``; with ``slowdowns_of`` (a framework), each
    record also has how much that framework's ops and a worker's loading slowed each other
    right after the round (``perfkit_corun_slowdowns``)."""
    for loop in loops.values():
        for _ in range(3):
            loop.step()
    samples: dict[str, list[float]] = {name: [] for name in loops}
    records = [] if records is None else records
    for _ in range(rounds):
        for name, loop in loops.items():
            start_turn(loop)
            if name == WINDOW:
                records.append(timed_round(loop, steps))
                if slowdowns_of:
                    from perfkit_core.capture.machine_costs import corun_slowdowns

                    records[-1]["slowdowns"] = corun_slowdowns(slowdowns_of)
                continue
            start = time.perf_counter_ns()
            for _ in range(steps):
                loop.step()
            samples[name].append((time.perf_counter_ns() - start) / steps)
    samples.pop(WINDOW, None)
    savings = {
        name: [b - v for b, v in zip(samples["before"], values, strict=True)]
        for name, values in samples.items()
        if name != "before"
    }
    return Timing(
        statistics.median(samples["before"]),
        savings,
        f"unpaired: {rounds} rounds of {steps} steps, each loop's turn after the others'",
        samples,
    )


def order_check(
    ranked: list[str], achieved: dict[str, float], savings: dict[str, list[float]]
) -> tuple[bool, str]:
    """(whether the order of ``ranked`` (by estimate) is the order by achieved saving, what to
    print): every pair the estimate orders the other way round must tie, the median of the
    difference of their ``savings`` samples (ns per step, aligned: sample i of both from the
    same round or cycle of pairs) within the noise (its 95% bootstrap interval holds 0)."""
    from itertools import combinations

    ties = []
    for first, second in combinations(ranked, 2):  # the estimate puts first ahead
        if achieved[first] >= achieved[second]:
            continue
        # per round or cycle, first's saving less second's
        diff = [a - b for a, b in zip(savings[first], savings[second], strict=True)]
        median, low, high = median_interval(diff)
        if low > 0 or high < 0:
            return False, "DIFFERENT"
        ties.append(
            f"{first} and {second} tie: {first} saved {median / 1e6:+.2f} ms/step more, "
            f"sample by sample (95% CI {low / 1e6:+.2f} to {high / 1e6:+.2f})"
        )
    if not ties:
        return True, "same"
    return True, f"same within the noise ({'; '.join(ties)})"


# ------------------------------------------------------------------ verdicts


def verdict(estimated_pct: float, achieved_pct: float) -> tuple[bool, str]:
    """(pass, which criterion) for an estimated and an achieved saving, each in % of the
    unprofiled step of its own session (the estimate's: the step timer's steps when the run was
    profiled; the achieved one's: the timed rounds), so that the machine's speed drifting
    between the two sessions does not count as an error: within TOLERANCE of the achieved
    saving, or within POINTS points of the step when the achieved saving is under SMALL_PCT."""
    if achieved_pct < SMALL_PCT:
        error = abs(estimated_pct - achieved_pct)
        return error <= POINTS, f"off by {error:.1f} points of the step (<= {POINTS:g})"
    error = (estimated_pct - achieved_pct) / achieved_pct
    return abs(error) <= TOLERANCE, f"off by {100 * error:+.0f}% (within +-{100 * TOLERANCE:.0f}%)"


def advise_both(run: Any) -> dict[str, list[Any]]:
    """The findings of ``run`` per mode: ``model`` (no replay) and ``measure`` (replays)."""
    import perfkit_core.advice.engine as engine

    found = {"model": engine.advise(run)}
    found["measure"] = engine.advise(run, measure=True)
    return found


@dataclass
class Check:
    """One PASS/FAIL line of a scenario: ``name`` says which (the scenario, the finding or the
    order, the mode); an estimate's check keeps the estimated and the achieved saving, each in %
    of its own session's unprofiled step, so that repeated sessions can be summarised."""

    name: str
    passed: bool
    estimated_pct: float | None = None
    achieved_pct: float | None = None
    #: How the achieved saving was timed (``paired`` or ``unpaired``) and its 95% interval
    #: (% of the same step as ``achieved_pct``).
    method: str = ""
    interval: tuple[float, float] | None = None


def run_scenario(scenario: Scenario, args: argparse.Namespace, out: Path) -> list[Check]:
    """Profile, advise, remedy and time one scenario; print its table; return its checks."""
    print(f"\n== {scenario.name} (built for the {scenario.rule} rule)")
    run = profile(scenario, out / scenario.name, args.profile_steps, args.timer_steps)
    with quiet():
        modes = advise_both(run)
    findings = modes["model"]
    if not findings:
        print(f"  FAIL: no finding (the {scenario.rule} rule did not fire)")
        return [Check(f"{scenario.name}: the {scenario.rule} rule fired", False)]
    if scenario.prescribe is not None:
        scenario.prescribe(findings)
    applied = [f for f in findings if f.rule in scenario.remedies]
    loops = {"before": scenario.build(frozenset())}
    for finding in applied:
        loops[finding.id] = scenario.build(frozenset([finding.rule]))
    if len(applied) > 1:  # every remedy at once: the headline's combined saving
        loops["all"] = scenario.build(frozenset(f.rule for f in applied))
    loops[WINDOW] = scenario.build(frozenset())
    records: list[dict[str, Any]] = []
    with quiet():
        loading = any(f.rule == "input-pipeline" for f in applied)
        slowdowns_of = scenario.framework if loading else ""
        if pairable({f.rule for f in applied}) and not args.unpaired:
            loaders = bool({f.rule for f in applied} & LOADER_RULES)
            timing = paired_variants(loops, args.steps, args.rounds, loaders, records, slowdowns_of)
        else:
            timing = time_variants(loops, args.steps, args.rounds, records, slowdowns_of)
    for loop in loops.values():
        loop.close()
    window = window_findings(run, merge_records(records))
    before = timing.before_ns
    print(f"  timing {timing.method}")
    print(
        f"  step without the profiler {before / 1e6:.2f} ms; "
        f"profiled {findings[0].evidence.get('step_time_ns', float('nan')) / 1e6:.2f} ms"
        + drift_text(run, before)
    )
    results: list[Check] = []
    achieved: dict[str, float] = {}
    for finding in findings:
        if finding.id not in loops:
            print(
                f"  {finding.id:<18} estimated {finding.saving_ns / 1e6:6.2f} ms/step: "
                "remedy not applied by this scenario"
            )
            continue
        achieved[finding.id], low, high = timing.saving(finding.id)
        interval = (100 * low / before, 100 * high / before)
        print(
            f"  {finding.id:<18} remedy {scenario.remedies[finding.rule]}; achieved "
            f"({timing.method.split(':')[0]}) 95% CI {low / 1e6:.2f} to {high / 1e6:.2f} ms/step"
        )
        for mode, found in modes.items():
            match = next((f for f in found if f.id == finding.id), None)
            if match is None:
                print(f"    [{mode:<7}] no such finding")
                results.append(Check(f"{scenario.name} {finding.id} [{mode}]", False))
                continue
            est = match.saving_ns
            est_step = float(
                match.evidence.get("basis_step_ns") or match.evidence.get("step_time_ns") or before
            )
            basis = match.evidence.get("basis", "profiled")
            est_pct, achieved_pct = 100 * est / est_step, 100 * achieved[finding.id] / before
            ok, how = verdict(est_pct, achieved_pct)
            results.append(
                Check(
                    f"{scenario.name} {finding.id} [{mode}]",
                    ok,
                    est_pct,
                    achieved_pct,
                    timing.method.split(":")[0],
                    interval,
                )
            )
            # the estimate on the unprofiled step, against the rounds' own interval
            inside = low <= est / est_step * before <= high
            how += "; inside the achieved 95% CI" if inside else "; outside the achieved 95% CI"
            if mode == "model" and match.evidence.get("loader_receive_from") == RECEIVE_TIMED:
                print(
                    f"    [timed  ] receiving a batch added "
                    f"{match.evidence['loader_receive_ns'] / 1e6:.2f} ms to a busy step when the "
                    f"step timer saved the run; a worker's hand-over "
                    f"{match.evidence['loader_batch_ns'] / 1e6:.2f} ms"
                )
            if mode == "model" and match.evidence.get("thread_op_from") == TRAINING_MACHINE:
                print(
                    f"    [timed  ] each training op cost "
                    f"{match.evidence['thread_op_ns'] / 1e3:.1f} us beside the loading thread "
                    "when the step timer saved the run"
                )
            if "replay_batch_ns" in match.evidence:  # the loader replay's hand-over cost
                model_batch = match.evidence.get("loader_batch_ns", LOADER_BATCH_NS)
                received = match.evidence.get("loader_receive_ns")
                print(
                    f"    [replay ] a worker handed a batch over every "
                    f"{match.evidence['replay_batch_ns'] / 1e6:.2f} ms here (the model: "
                    f"{model_batch / 1e6:.2f} ms)"
                    + (
                        f"; receiving one added {received / 1e6:.2f} ms to a busy step"
                        if received is not None and received != match.evidence["replay_batch_ns"]
                        else ""
                    )
                )
            if "slowdown_from" in match.evidence:  # a worker and the step, beside each other
                e = match.evidence
                print(
                    f"    [{mode:<7}] beside a worker the rest of the step takes "
                    f"{e['training_slowdown']:.2f}x and the loading {e['loading_slowdown']:.2f}x "
                    f"as long as alone ({e['slowdown_from']})"
                )
            if "replay_thread_op_ns" in match.evidence:  # beside a loading thread, per op
                run_op = match.evidence.get("thread_op_ns")  # the split's; none but the loader's
                print(
                    f"    [replay ] each training op cost "
                    f"{match.evidence['replay_thread_op_ns'] / 1e3:.1f} us beside a loading "
                    "thread here"
                    + (f" (the run's: {run_op / 1e3:.1f} us)" if run_op is not None else "")
                )
            if "eager_ns" in match.evidence:  # the compile estimate's terms
                e = match.evidence
                call, kernel = e.get("replay_call_ns"), e.get("replay_kernel_ns")
                print(
                    f"    [{mode:<7}] eager forward+backward {e['eager_ns'] / 1e6:.2f} ms "
                    f"({e['compile_source']}), compiled {e['compiled_ns'] / 1e6:.2f} ms (model): "
                    f"kept ops {e['compile_kept_ns'] / 1e6:.2f} ms, "
                    f"{e['fused_kernels_per_step']:.0f} fused kernels, "
                    f"{e.get('fused_flops_per_step', 0) / 1e3:.0f}k FLOPs and "
                    f"{e.get('transcendentals_per_step', 0) / 1e3:.0f}k transcendental elements "
                    "fused"
                    + (
                        f"; replay: call {call / 1e6:.2f} ms, kernel {kernel / 1e3:.1f} us, "
                        f"{e['replay_flop_ns']:.2f} ns a FLOP, "
                        f"{e['replay_transcendental_ns']:.1f} ns a transcendental element"
                        if call is not None
                        else ""
                    )
                )
            print(
                f"    [{mode:<7}] estimated {est / 1e6:6.2f} ms/step ({100 * est / est_step:5.1f}% "
                f"of the {basis} step)  achieved {achieved[finding.id] / 1e6:6.2f} ms/step "
                f"({100 * achieved[finding.id] / before:5.1f}% of the unprofiled step)  "
                f"{'PASS' if ok else 'FAIL'}: {how}"
                + ("; the finding says it is within its error" if match.within_error else "")
            )
        print(window_line(window.get(finding.id), achieved[finding.id], before))
        if finding.rule == "input-pipeline":
            print(
                window_replay_line(scenario, window.get(finding.id), achieved[finding.id], before)
            )
    if "all" in loops:
        results += combined_lines(scenario.name, modes, achieved, timing, before)
    for finding in findings:
        if finding.id in achieved:
            print(f"  {follow_up_line(scenario, finding, args, out, before)}")
    fired = {f.rule for f in findings} | {m for f in findings for m in f.evidence.get("merged", ())}
    if scenario.rule not in fired:
        print(f"  FAIL: the {scenario.rule} rule did not fire")
        results.append(Check(f"{scenario.name}: the {scenario.rule} rule fired", False))
    for mode, found in modes.items():
        ranked = [f.id for f in found if f.id in achieved]
        by_achieved = sorted(ranked, key=lambda i: -achieved[i])
        same, said = order_check(ranked, achieved, timing.savings)
        if len(ranked) > 1:
            results.append(Check(f"{scenario.name} order [{mode}]", same))
        print(
            f"  [{mode:<7}] order by estimate {' > '.join(ranked) or '-'}; by achieved "
            f"{' > '.join(by_achieved) or '-'}: {said}"
        )
    return results


def merge_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One step timer record of ``timed_round``'s rounds: their steps and each phase's times
    one after the other (0 in a round a phase did not run in), and the idle cores, the
    process's and its children's cores and the idle cores' resolution weighted by each round's
    time, the most children that ran in a round; the median
    of the rounds' slowdowns beside a worker, where timed."""
    steps: list[int] = []
    slowdowns: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.get("slowdowns", {}).items():
            slowdowns.setdefault(key, []).append(value)
    phases: dict[str, list[int]] = {}
    # the cores per round, weighted by each round's time (a round's tick error over its time,
    # weighted so, adds up to the merged rounds' error over theirs)
    cores = ("idle_cores", "process_cores", "children_cores", "idle_resolution_cores")
    weighted = dict.fromkeys(cores, 0.0)
    walls = dict.fromkeys(cores, 0.0)
    # not profiled: unprofiled where an adapter says no profiler records, else unknown
    keys = ("unprofiled_ns", "unknown_ns")
    for record in records:
        times = [ns for key in keys for ns in record[key]]
        for phase in record["phases"].keys() - phases.keys():
            phases[phase] = [0] * len(steps)
        for phase, kept in phases.items():
            entry = record["phases"].get(phase)
            kept += [ns for key in keys for ns in entry[key]] if entry else [0] * len(times)
        steps += times
        for key in cores:
            if record.get(key) is not None:
                weighted[key] += record[key] * sum(times)
                walls[key] += sum(times)
    return {
        "steps": steps,
        "phases": phases,
        **{key: weighted[key] / walls[key] if walls[key] else None for key in cores},
        "usable_cores": records[-1].get("usable_cores") if records else None,
        "children_ran": max((r.get("children_ran") or 0 for r in records), default=None),
        "slowdowns": {key: statistics.median(values) for key, values in slowdowns.items()},
    }


def window_findings(run: Any, window: dict[str, Any]) -> dict[str, Any]:
    """The model's findings (by id) on ``run`` with its step timer's unprofiled steps, idle
    cores and slowdowns beside a worker replaced by ``window``'s (``merge_records``: the ``WINDOW`` loop, timed beside
    the rounds): the estimate fed the same minutes as the achieved savings, where the run's
    own estimate was fed the minutes after its profile."""
    import copy

    import perfkit_core.advice.engine as engine
    from perfkit_core.events.run import Run

    meta = copy.deepcopy(run.meta)
    timer = meta.get("step_timer") or {}
    timer["unprofiled_ns"] = window["steps"]
    for key in (
        "idle_cores",
        "process_cores",
        "children_cores",
        "children_ran",
        "usable_cores",
        "idle_resolution_cores",
    ):
        timer[key] = window[key]
    timer.update(window.get("slowdowns", {}))  # timed right after each round
    phases = timer.setdefault("phases", {})
    for phase in phases.keys() | window["phases"].keys():  # a phase the rounds lack: untimed
        entry = phases.setdefault(phase, {"profiled_ns": []})
        entry["unprofiled_ns"] = window["phases"].get(phase, [])
    meta["step_timer"] = timer
    with quiet():
        return {f.id: f for f in engine.advise(Run(run.events, meta))}


def window_replay_line(
    scenario: Scenario, finding: Any, achieved_ns: float, before_ns: float
) -> str:
    """The ``[wreplay]`` line: ``--measure``'s replays fed the rounds' own minutes (the
    ``window_findings`` finding's loading, rest of the step and free cores) against the
    achieved saving: the estimate's error with ``--measure`` apart from the machine's drift
    between the profile and the rounds, a diagnosis not counted as a check."""
    from perfkit_core.plugins import framework_hook

    if finding is None:
        return "    [wreplay] no such finding with the rounds' step times"
    with quiet():
        measured = framework_hook("perfkit_measure_saving", scenario.framework)(
            finding=finding, framework=scenario.framework
        )
    if not measured:
        return "    [wreplay] no replay of this finding here"
    step = float(finding.evidence.get("basis_step_ns") or before_ns)
    saving = float(measured["saving_ns"])
    ok, how = verdict(100 * saving / step, 100 * achieved_ns / before_ns)
    return (
        f"    [wreplay] estimated {saving / 1e6:6.2f} ms/step ({100 * saving / step:5.1f}% of its "
        f"{step / 1e6:.2f} ms step), --measure fed the rounds' own loading and rest of the step: "
        f"{how}, {'inside' if ok else 'outside'} the target (a diagnosis, not a check)"
    )


def window_line(finding: Any, achieved_ns: float, before_ns: float) -> str:
    """The ``[window ]`` line: the model's estimate of ``finding`` fed the rounds' own minutes
    (``window_findings``) against the achieved saving, with the verdict's measure of the miss:
    the model's error apart from the machine's drift, a diagnosis not counted as a check."""
    if finding is None:
        return "    [window ] no such finding with the rounds' step times"
    step = float(finding.evidence.get("basis_step_ns") or before_ns)
    ok, how = verdict(100 * finding.saving_ns / step, 100 * achieved_ns / before_ns)
    return (
        f"    [window ] estimated {finding.saving_ns / 1e6:6.2f} ms/step "
        f"({100 * finding.saving_ns / step:5.1f}% of its {step / 1e6:.2f} ms step), the step "
        f"timer's figures from the rounds' own minutes"
        + (
            f" (beside a worker {finding.evidence['training_slowdown']:.2f}x and "
            f"{finding.evidence['loading_slowdown']:.2f}x, timed after each round)"
            if "training_slowdown" in finding.evidence
            else ""
        )
        + f": {how}, {'inside' if ok else 'outside'} the target (a diagnosis, not a check)"
    )


def drift_text(run: Any, rounds_ns: float) -> str:
    """How far the machine's speed moved between the step timer's unprofiled steps, whose
    times the estimates are stated on, and the timed rounds, whose times the achieved savings
    are: the same loop's median step in each ("" without a step timer). The verdicts compare
    shares of each one's own step, which absorbs a uniform change; a slower spell slows a
    Dataset's Python more than the model's ops, so a drift of more than a few percent moves
    the achieved share too."""
    import numpy as np

    from perfkit_core.comparison.overhead import step_timer_times

    _, unprofiled = step_timer_times(run)
    if not len(unprofiled) or not rounds_ns:
        return ""
    timer = float(np.median(unprofiled))
    return (
        f"; the step timer's {timer / 1e6:.2f} ms after the profile (the machine "
        f"{100 * (rounds_ns / timer - 1):+.0f}% in the rounds)"
    )


def combined_lines(
    name: str,
    modes: dict[str, list[Any]],
    achieved: dict[str, float],
    timing: Timing,
    before: float,
) -> list[Check]:
    """Per mode, the combined saving of the applied findings (``combined_saving``: what the
    headline promises for applying every finding) against the saving of the loop with every
    remedy applied, in scenario ``name``; print a line each, return the checks."""
    from perfkit_core.advice.combine import combined_saving

    all_ns, low, high = timing.saving("all")
    checks = []
    for mode, found in modes.items():
        chosen = [f for f in found if f.id in achieved]
        step = float(chosen[0].evidence.get("basis_step_ns") or before)
        total, _ = combined_saving(chosen, step)
        plain = sum(f.saving_ns for f in chosen)
        ok, how = verdict(100 * total / step, 100 * all_ns / before)
        checks.append(
            Check(
                f"{name} all applied [{mode}]",
                ok,
                100 * total / step,
                100 * all_ns / before,
                timing.method.split(":")[0],
                (100 * low / before, 100 * high / before),
            )
        )
        print(
            f"    [{mode:<7}] all applied: estimated {total / 1e6:6.2f} ms/step "
            f"({100 * total / step:5.1f}%; the plain sum {plain / 1e6:.2f} ms)  achieved "
            f"{all_ns / 1e6:6.2f} ms/step ({100 * all_ns / before:5.1f}% of the unprofiled "
            f"step)  {'PASS' if ok else 'FAIL'}: {how}"
        )
    return checks


#: The follow-up's sessions time at least this long of steps without the profiler (s): the
#: step timer reads the machine's pace once per 50 ms of them, and ``perfkit compare`` needs
#: five readings a run to say whether the machine's pace moved between the two.
FOLLOW_UP_TIMER_S = 0.5


def follow_up_line(
    scenario: Scenario, finding: Any, args: argparse.Namespace, out: Path, step_ns: float
) -> str:
    """What ``perfkit compare BEFORE AFTER`` says of ``finding`` (advice on the scenario's
    first profile) when BEFORE and AFTER are the scenario profiled again, one session
    after the other, without and with that finding's remedy, as a user records them around a
    change: promised against delivered (ms per step). The first profile, taken ahead of the
    timed rounds a minute earlier, would carry the machine's drift since then into the delivered
    step time. Each session times ``--timer-steps`` steps without the profiler, or as many as
    ``FOLLOW_UP_TIMER_S`` takes at ``step_ns`` a step if more."""
    from perfkit_core.advice.followup import follow_up

    sessions = []
    timer_steps = max(args.timer_steps, math.ceil(FOLLOW_UP_TIMER_S * 1e9 / max(step_ns, 1.0)))
    for name, remedies in (("before", frozenset()), (finding.id, frozenset([finding.rule]))):
        directory = out / f"{scenario.name}-{finding.id}-{name}"
        sessions.append(profile(scenario, directory, args.profile_steps, timer_steps, remedies))
    with quiet():
        rows, figures = follow_up(*sessions)
    row = next((r for r in rows if r.id == finding.id), None)
    said = row.sentence() if row is not None else "not found in BEFORE this time"
    return (
        f"[compare] {finding.id}: {said} (perfkit compare BEFORE AFTER; step "
        f"{figures['before_ns'] / 1e6:.2f} -> {figures['after_ns'] / 1e6:.2f} ms, "
        f"{figures['basis']})"
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="scenario names to run (default: all)")
    parser.add_argument("--blocks", type=int, default=16, help="blocks of the deep narrow MLP")
    parser.add_argument("--profile-steps", type=int, default=8, help="steps recorded")
    parser.add_argument(
        "--timer-steps", type=int, default=30, help="unprofiled steps the step timer times"
    )
    parser.add_argument("--steps", type=int, default=10, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=41, help="interleaved rounds; medians")
    parser.add_argument("--compile", action="store_true", help="add the torch.compile scenario")
    parser.add_argument(
        "--unpaired",
        action="store_true",
        help="time every remedy in unpaired rounds, even one that can run beside its baseline",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="sessions per scenario; with more than one, the checks are judged on the medians",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu: the CPU scenarios; cuda: the GPU scenarios of advice_gpu.py (needs a CUDA GPU)",
    )
    parser.add_argument("--keep", type=Path, help="copy every profiled run into this folder")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be 1 or more, not {args.repeat}")
    print(f"load average before: {load_average()}; cores {os.cpu_count()}")
    sessions: list[list[Check]] = []
    if args.device == "cuda":
        from advice_gpu import gpu_scenarios

        chosen = gpu_scenarios("cuda")
    else:
        chosen = scenarios(args.blocks, args.compile)
    with tempfile.TemporaryDirectory() as tmp:
        for session in range(args.repeat):
            if args.repeat > 1:
                print(f"\n######## session {session + 1} of {args.repeat}")
            checks: list[Check] = []
            for scenario in chosen:
                if args.only and scenario.name not in args.only:
                    continue
                try:
                    __import__(scenario.framework)
                except ImportError:
                    print(f"\n== {scenario.name}: {scenario.framework} not installed, skipped")
                    continue
                checks += run_scenario(scenario, args, Path(tmp) / f"session{session}")
            sessions.append(checks)
        if args.keep is not None:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
    print(f"\nload average after: {load_average()}")
    verdicts = summary(sessions)
    failed = verdicts.count(False)
    print(
        f"{'PASS' if not failed else 'FAIL'}: {len(verdicts) - failed} of {len(verdicts)} checks pass"
        + (f" (the medians of {len(sessions)} sessions)" if len(sessions) > 1 else "")
    )
    return 1 if failed else 0


def summary(sessions: list[list[Check]]) -> list[bool]:
    """Print, per check of repeated sessions, each session's verdict and the check judged on
    the medians: an estimate's, the median estimated against the median achieved saving (each
    in % of its own session's unprofiled step), by ``verdict``; an order's or a rule's, passed
    when most sessions passed it. A machine whose speed moves between a scenario's profile and
    its timed rounds moves one session's shares; the medians of several sessions stand
    apart from one slow spell. Return the verdicts on the medians."""
    by_name: dict[str, list[Check]] = {}
    for checks in sessions:
        for check in checks:
            by_name.setdefault(check.name, []).append(check)
    print(f"\n== the checks judged on the medians of {len(sessions)} sessions")
    verdicts = []
    unsettled = 0
    for name, checks in by_name.items():
        runs = " ".join("P" if c.passed else "F" for c in checks)
        estimated = [c.estimated_pct for c in checks if c.estimated_pct is not None]
        achieved = [c.achieved_pct for c in checks if c.achieved_pct is not None]
        if estimated and len(estimated) == len(achieved) == len(checks):
            ok, how = verdict(statistics.median(estimated), statistics.median(achieved))
            intervals = ", ".join(
                f"{c.interval[0]:.1f} to {c.interval[1]:.1f}" for c in checks if c.interval
            )
            moved = repeatability(achieved)
            said = (
                f"estimated {statistics.median(estimated):5.1f}%, achieved "
                f"{statistics.median(achieved):5.1f}% of the unprofiled step "
                f"({checks[0].method}; per session 95% CI {intervals}): {how}{moved}"
            )
            unsettled += bool(moved)
        else:
            ok = 2 * sum(c.passed for c in checks) > len(checks)
            said = f"passed in {sum(c.passed for c in checks)} of {len(checks)} sessions"
        verdicts.append(ok)
        print(f"  {'PASS' if ok else 'FAIL'} {name:<42} [{runs}]  {said}")
    if unsettled:
        print(
            f"  {unsettled} of the estimates' checks: the achieved saving moved between "
            "sessions by more than a check allows (UNSETTLED): this machine did not repeat it"
        )
    return verdicts


def repeatability(achieved: list[float]) -> str:
    """Empty when the achieved savings of repeated sessions (% of each session's step) lie within
    the band a check allows around their median (``verdict``: TOLERANCE of it, or POINTS
    points under SMALL_PCT), so that the machine repeated the saving a check is judged on;
    else a clause saying how far apart they lay. A single session says nothing of it."""
    if len(achieved) < 2:
        return ""
    median = statistics.median(achieved)
    low, high = min(achieved), max(achieved)
    if median < SMALL_PCT:
        if max(median - low, high - median) <= POINTS:
            return ""
        return f"; UNSETTLED: the sessions achieved {low:.1f} to {high:.1f}% (> {POINTS:g} point)"
    if max(median - low, high - median) <= TOLERANCE * median:
        return ""
    spread = 100 * max(median - low, high - median) / median
    return (
        f"; UNSETTLED: the sessions achieved {low:.1f} to {high:.1f}%, {spread:.0f}% from "
        f"their median (> {100 * TOLERANCE:.0f}%)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
