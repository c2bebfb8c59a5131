"""A small training loop in MindSpore, the same MLP as ``perfkit_torch.demo`` (``perfkit demo``,
the test fixtures in ``tests/data/mindspore``).

``blocks`` blocks of Dense + LayerNorm + ReLU of ``width`` features and a Dense head to 10
classes, in an ``nn.SequentialCell``; cross-entropy, Adam (lr 1e-3), batches of random data. The
step is MindSpore's own training cell (``nn.TrainOneStepCell`` over ``nn.WithLossCell``) in
graph mode, so the operators carry their cells' scopes and line up with torch's layers.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

#: Steps the demo trains before the profiler starts: graph mode compiles the training cell in
#: the first, and the next few still ran 5 to 30 times as long as the later ones on a 2-core
#: CPU machine.
WARMUP_STEPS = 10


def mlp(*, blocks: int = 4, width: int = 64, mode: str = "graph") -> tuple[Any, Any]:
    """Return ``(train_net, net)``: the MLP and its training cell (loss, gradients, Adam), in
    ``mode`` (``graph`` or ``pynative``), on the CPU."""
    import mindspore
    from mindspore import nn

    mindspore.set_context(mode=mindspore.GRAPH_MODE if mode == "graph" else mindspore.PYNATIVE_MODE)
    mindspore.set_device("CPU")
    layers: list[Any] = []
    for _ in range(blocks):
        layers += [nn.Dense(width, width), nn.LayerNorm((width,)), nn.ReLU()]
    net = nn.SequentialCell(*layers, nn.Dense(width, 10))
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    train_net = nn.TrainOneStepCell(nn.WithLossCell(net, loss), optimizer)
    train_net.set_train()
    return train_net, net


def batches(n: int, *, width: int = 64, batch_size: int = 32, seed: int = 0) -> list[Any]:
    """``n`` batches (inputs, labels) of random data, as MindSpore tensors."""
    import mindspore
    import numpy as np

    rng = np.random.default_rng(seed)
    return [
        (
            mindspore.Tensor(rng.standard_normal((batch_size, width), dtype=np.float32)),
            mindspore.Tensor(rng.integers(0, 10, (batch_size,), dtype=np.int32)),
        )
        for _ in range(n)
    ]


def train_mlp(
    directory: Path,
    *,
    steps: int = 20,
    blocks: int = 4,
    width: int = 64,
    batch_size: int = 32,
    background: bool = True,
    mark_steps: bool = True,
    mode: str = "graph",
    timed_steps: int = 0,
    warmup: int = WARMUP_STEPS,
) -> tuple[list[Path], Any]:
    """Train the MLP for ``warmup`` steps without the profiler (graph mode compiles the
    training cell in the first), then ``steps`` profiled steps on the CPU (after one wait and
    one warm-up step of the profiler's schedule) under ``mindspore.profiler.profile`` with
    perfkit's handler, saving one perfkit run (and MindSpore's own profile folder) under
    ``directory``. ``mark_steps`` marks each step with ``perfkit_mindspore.step`` (else
    ``prof.step()``, and perfkit finds the steps from the operators). Returns (run folders,
    handler).

    With ``timed_steps``, that many more steps run before the profiled ones, without the
    profiler, and ``perfkit_core.step_timer`` times every step and saves their times into the
    run, as ``perfkit_torch.demo.train_mlp`` does: a comparison with torch then states its ratio
    without either profiler's cost."""
    import mindspore
    from mindspore.profiler import ProfilerActivity

    import perfkit_core
    import perfkit_mindspore

    train_net, _ = mlp(blocks=blocks, width=width, mode=mode)
    data = batches(steps + 2 + timed_steps, width=width, batch_size=batch_size)
    for x, y in data[:warmup]:
        train_net(x, y)
    handler = perfkit_mindspore.on_trace_ready(
        directory, worker_name="mindspore_mlp", background=background
    )
    with mindspore.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=mindspore.profiler.schedule(
            wait=1 + timed_steps, warmup=1, active=steps, repeat=1
        ),
        on_trace_ready=handler,
        record_shapes=True,
    ) as prof:
        timer = perfkit_core.step_timer(prof) if timed_steps else None
        for x, y in data:
            with (
                timer.step() if timer else contextlib.nullcontext(),
                perfkit_mindspore.annotate("train_step"),
            ):
                train_net(x, y)
            if mark_steps:
                perfkit_mindspore.step(prof)
            else:
                prof.step()
    if timer:
        handler.wait()
        timer.save(handler.runs)
    return handler.runs, handler
