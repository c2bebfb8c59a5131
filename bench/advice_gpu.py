"""The GPU scenarios of the advice benchmark (``bench_advice.py``): small torch training loops
on a CUDA device, each built so that one GPU advice rule fires. Every step ends in
``torch.cuda.synchronize()``, so that a step timed on the wall clock includes its device work.

- ``torch-gpu-amp``: an fp32 MLP of 4 blocks of Linear(4096, 4096) + LayerNorm + ReLU, batch
  4096, fused Adam: matmul kernels take most of the GPU time and set the step (rule ``amp``, or
  ``tensor-cores-unused``); remedy: ``torch.autocast(device_type="cuda", dtype=torch.bfloat16)``
  around forward and loss (bf16 needs no GradScaler). At batch 256 an H200 ran the fp32 step's
  kernels in 3.0 ms of a 3.4 ms step that its host took 2.9 ms to issue: autocast cut the
  kernels to 1.3 ms and made the step slower (tests/data/torch_gpu_h200, ``amp_fp32``).
- ``torch-gpu-pageable``: a small conv net fed 512 x 3 x 64 x 64 float32 batches (24 MiB) from
  pageable host memory, copied with ``.to("cuda")`` every step (rule ``pageable-memcpy``); the
  batches cycle through a pool made once on the host, as a loader hands them over. Remedy: each
  pool batch pinned once (``.pin_memory()``) and copied with ``.to("cuda", non_blocking=True)``.
- ``torch-gpu-placement``: an MLP of 4 blocks of Linear(2048, 2048) + LayerNorm + ReLU, batch
  2048, whose step reads three device values on the host: the loss (``.item()``, for a divergence
  check and a running mean), the gradient norm after clipping (``.item()``, to count clipped
  steps) and a step counter kept on the GPU (``.item()``, to log every ``LOG_EVERY`` steps):
  three syncs per step (rule ``placement``). Remedy: the counter is a Python int and the loss
  and clip statistics are summed on the device and read once every ``LOG_EVERY`` steps.
- ``torch-gpu-launch``: ``bench_advice.ElementwiseChain`` with 200 links (600 tiny elementwise
  ops forward, more backward, on (64, 32) tensors between two small Linear layers): the host
  cannot launch the kernels as fast as the GPU runs them (rule ``launch-bound``). Remedy: CUDA
  graphs, ``torch.cuda.make_graphed_callables(model, (sample,))``: forward and backward each
  replay as one graph, with the same kernels (no fusion, unlike torch.compile).

Profile them with ``gpu_profile_activities()`` (CPU and CUDA), not the CPU-only activities of
the CPU scenarios. Nothing here touches CUDA before a scenario's ``build()`` is called.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import scenario_types as bench
from scenario_types import Loop, Scenario

#: Classes of every loop's cross-entropy loss (the head of bench_advice's MLP has 10 outputs).
CLASSES = 10
#: amp: an MLP of this many blocks of Linear(AMP_WIDTH, AMP_WIDTH), batch AMP_BATCH.
AMP_BLOCKS = 4
AMP_WIDTH = 4096
AMP_BATCH = 4096
#: pageable-memcpy: a pool of PAGEABLE_POOL batches of PAGEABLE_BATCH images of PAGEABLE_IMAGE.
PAGEABLE_BATCH = 512
PAGEABLE_IMAGE = (3, 64, 64)
PAGEABLE_POOL = 4
#: placement: an MLP of PLACEMENT_BLOCKS blocks of PLACEMENT_WIDTH, batch PLACEMENT_BATCH. At
#: batch 512 the host issued the forward pass in about as long as an H200 ran it, so whether
#: ``.item()`` on the loss waited at all, and what the remedy saved (-0.05 to +0.26 ms a step
#: over 18 sessions on one H200 in 12 minutes), went with the host's pace from minute to minute
#: (``placement_phases.py``); at 2048 the device runs the forward pass twice as long as the
#: host takes to issue it, and every read waits.
PLACEMENT_BLOCKS = 4
PLACEMENT_WIDTH = 2048
PLACEMENT_BATCH = 2048
#: placement: the remedied loop reads its statistics on the host once every LOG_EVERY steps.
LOG_EVERY = 50
#: placement: a mean loss above this stops training (never reached with these random batches).
LOSS_LIMIT = 1e4
#: placement: gradients are clipped to this total norm.
MAX_NORM = 1.0
#: launch-bound: links of the elementwise chain, and the batch (rows of its (batch, 32) input).
LAUNCH_LINKS = 200
LAUNCH_BATCH = 64


def gpu_profile_activities() -> list[Any]:
    """The torch profiler activities a GPU scenario is profiled with: CPU and CUDA."""
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def device_random_batches(
    device: str, batch: int, shape: tuple[int, ...]
) -> Iterator[tuple[Any, Any]]:
    """Endless (features, labels) batches made on ``device`` each step: ``batch`` rows of float32
    features of ``shape`` and int64 labels below CLASSES, from a seeded device generator."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    while True:
        yield (
            torch.randn(batch, *shape, device=device, generator=g),
            torch.randint(0, CLASSES, (batch,), device=device, generator=g),
        )


def host_batches(device: str, pinned: bool) -> Iterator[tuple[Any, Any]]:
    """Endless (images, labels) batches copied to ``device`` each step from a pool of
    PAGEABLE_POOL host batches (PAGEABLE_BATCH images of PAGEABLE_IMAGE, float32), made now.
    ``pinned``: the pool is pinned once and copied with ``non_blocking=True``; else it stays in
    pageable memory and each copy blocks the host until it is done."""
    import torch

    g = torch.Generator().manual_seed(0)
    pool = [
        (
            torch.randn(PAGEABLE_BATCH, *PAGEABLE_IMAGE, generator=g),
            torch.randint(0, CLASSES, (PAGEABLE_BATCH,), generator=g),
        )
        for _ in range(PAGEABLE_POOL)
    ]
    if pinned:
        pool = [(x.pin_memory(), y.pin_memory()) for x, y in pool]
    return (
        (x.to(device, non_blocking=pinned), y.to(device, non_blocking=pinned))
        for x, y in itertools.cycle(pool)
    )


def device_train_loop(
    model: Any, optimizer: Any, batches: Iterator[Any], device: str, bf16: bool = False
) -> Loop:
    """``bench_advice.torch_train_loop`` on ``device``: one step takes the next batch, runs
    forward and loss (under bf16 autocast when ``bf16``), backward, the optimizer step and
    zero_grad, then waits for the device (``torch.cuda.synchronize``)."""
    import torch

    device_type = torch.device(device).type

    def step() -> None:
        x, y = next(batches)
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.synchronize(device)

    return bench.Loop(step)


def amp_scenario(device: str) -> Scenario:
    """fp32 matmul-heavy MLP (rules ``amp`` and ``tensor-cores-unused``); remedy: bf16 autocast."""

    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.manual_seed(0)
        model = bench.torch_mlp(AMP_BLOCKS, AMP_WIDTH).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        bf16 = bool(applied & {"amp", "tensor-cores-unused"})
        batches = device_random_batches(device, AMP_BATCH, (AMP_WIDTH,))
        return device_train_loop(model, optimizer, batches, device, bf16=bf16)

    remedy = 'torch.autocast(device_type="cuda", dtype=torch.bfloat16) around forward and loss'
    return bench.Scenario(
        "torch-gpu-amp",
        "torch",
        "amp",
        build,
        {"amp": remedy, "tensor-cores-unused": remedy},
        device=device,
    )


def pageable_scenario(device: str) -> Scenario:
    """Large host batches copied from pageable memory (rule ``pageable-memcpy``); remedy:
    pinned once, copied with non_blocking=True."""

    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(PAGEABLE_IMAGE[0], 16, 3, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(16, CLASSES),
        ).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        batches = host_batches(device, pinned="pageable-memcpy" in applied)
        return device_train_loop(model, optimizer, batches, device)

    return bench.Scenario(
        "torch-gpu-pageable",
        "torch",
        "pageable-memcpy",
        build,
        {
            "pageable-memcpy": 'pageable .to("cuda") -> host batches pinned once (.pin_memory()) '
            'and .to("cuda", non_blocking=True)'
        },
        device=device,
    )


#: The phases of the placement scenario's step, in order (``placement_scenario``'s ``marks``).
PLACEMENT_PHASES = (
    "forward",
    "read loss",
    "backward",
    "clip",
    "read norm",
    "counter",
    "optimizer",
    "zero grad",
    "synchronize",
)


def placement_scenario(device: str, marks: list[list[int]] | None = None) -> Scenario:
    """A step that reads three device values on the host (rule ``placement``); remedy: a host
    step counter, statistics summed on the device and read every LOG_EVERY steps. With
    ``marks``, each step appends the host clock (``time.perf_counter_ns``) at its start and at
    the end of each of its PLACEMENT_PHASES (``placement_phases.py``)."""
    import time


    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.manual_seed(0)
        model = bench.torch_mlp(PLACEMENT_BLOCKS, PLACEMENT_WIDTH).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        batches = device_random_batches(device, PLACEMENT_BATCH, (PLACEMENT_WIDTH,))
        on_host = "placement" in applied
        counter = torch.zeros((), dtype=torch.int64, device=device)  # the step count, on the GPU
        loss_sum = torch.zeros((), device=device)
        clipped_sum = torch.zeros((), dtype=torch.int64, device=device)
        state = {"steps": 0, "clipped": 0}
        recent: list[float] = []
        history: list[tuple[float, int]] = []

        def log(mean: float, clipped: int) -> None:
            if mean > LOSS_LIMIT:
                raise FloatingPointError(f"the loss diverged: {mean:g}")
            history.append((mean, clipped))

        def tick() -> None:
            if marks is not None:
                marks[-1].append(time.perf_counter_ns())

        def step() -> None:
            if marks is not None:
                marks.append([])
            tick()
            x, y = next(batches)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            tick()
            if on_host:
                loss_sum.add_(loss.detach())
            else:
                value = loss.item()  # waits for the forward pass
                if value > LOSS_LIMIT:
                    raise FloatingPointError(f"the loss diverged: {value:g}")
                recent.append(value)
            tick()
            loss.backward()
            tick()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            tick()
            if on_host:
                clipped_sum.add_(norm > MAX_NORM)
                tick()
                state["steps"] += 1
                if state["steps"] % LOG_EVERY == 0:  # the only reads of the device
                    log(loss_sum.item() / LOG_EVERY, int(clipped_sum.item()))
                    loss_sum.zero_()
            else:
                state["clipped"] += int(norm.item() > MAX_NORM)  # waits for the backward pass
                tick()
                counter.add_(1)
                if counter.item() % LOG_EVERY == 0:
                    log(sum(recent) / len(recent), state["clipped"])
                    recent.clear()
            tick()
            optimizer.step()
            tick()
            optimizer.zero_grad()
            tick()
            torch.cuda.synchronize(device)
            tick()

        return bench.Loop(step)

    return bench.Scenario(
        "torch-gpu-placement",
        "torch",
        "placement",
        build,
        {
            "placement": "3 .item() per step (loss, gradient norm, GPU step counter) -> a Python "
            f"step counter; loss and clip count summed on the GPU, read every {LOG_EVERY} steps"
        },
        device=device,
    )


def launch_scenario(device: str) -> Scenario:
    """Hundreds of tiny kernels per step (rule ``launch-bound``); remedy: CUDA graphs through
    ``torch.cuda.make_graphed_callables``."""

    def build(applied: frozenset[str]) -> Loop:
        import torch

        torch.manual_seed(0)
        model = bench.ElementwiseChain(LAUNCH_LINKS).to(device)
        if "launch-bound" in applied:
            # The real inputs need no gradient, so neither does the sample.
            sample = torch.randn(LAUNCH_BATCH, bench.WIDTH, device=device)
            model = torch.cuda.make_graphed_callables(model, (sample,))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        batches = device_random_batches(device, LAUNCH_BATCH, (bench.WIDTH,))
        return device_train_loop(model, optimizer, batches, device)

    return bench.Scenario(
        "torch-gpu-launch",
        "torch",
        "launch-bound",
        build,
        {
            "launch-bound": "eager -> CUDA graphs: torch.cuda.make_graphed_callables(model, "
            "(sample,)), forward and backward each one graph replay"
        },
        device=device,
    )


def gpu_scenarios(device: str) -> list[Scenario]:
    """Every GPU scenario, on ``device`` (e.g. ``"cuda"``); building one touches the device,
    listing them does not."""
    return [
        amp_scenario(device),
        pageable_scenario(device),
        placement_scenario(device),
        launch_scenario(device),
    ]
