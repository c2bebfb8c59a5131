"""A small training loop in MindSpore, the same MLP as ``perfkit_torch.demo`` (``perfkit demo``,
the test fixtures in ``tests/data/mindspore``).

``blocks`` blocks of Dense + LayerNorm + ReLU of ``width`` features and a Dense head to 10
classes, in an ``nn.SequentialCell``; cross-entropy, Adam (lr 1e-3), batches of random data. The
step is MindSpore's own training cell (``nn.TrainOneStepCell`` over ``nn.WithLossCell``) in
graph mode, so the operators carry their cells' scopes and line up with torch's layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
) -> tuple[list[Path], Any]:
    """Train the MLP for ``steps`` profiled steps on the CPU (after one wait and one warm-up
    step) under ``mindspore.profiler.profile`` with perfkit's handler, saving one perfkit run
    (and MindSpore's own profile folder) under ``directory``. ``mark_steps`` marks each step with
    ``perfkit_mindspore.step`` (else ``prof.step()``, and perfkit finds the steps from the
    operators). Returns (run folders, handler)."""
    import mindspore
    from mindspore.profiler import ProfilerActivity

    import perfkit_mindspore

    train_net, _ = mlp(blocks=blocks, width=width, mode=mode)
    data = batches(steps + 2, width=width, batch_size=batch_size)
    handler = perfkit_mindspore.on_trace_ready(
        directory, worker_name="mindspore_mlp", background=background
    )
    with mindspore.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=mindspore.profiler.schedule(wait=1, warmup=1, active=steps, repeat=1),
        on_trace_ready=handler,
        record_shapes=True,
    ) as prof:
        for x, y in data:
            with perfkit_mindspore.annotate("train_step"):
                train_net(x, y)
            if mark_steps:
                perfkit_mindspore.step(prof)
            else:
                prof.step()
    return handler.runs, handler
