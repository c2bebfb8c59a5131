"""tfprof's example model, the MNIST MLP (784-128-32-10 with layers named ``hidden1``,
``hidden2`` and ``softmax_linear``), in torch, Paddle, MindSpore and Keras, trained for a few profiled
steps with each adapter's default handler (MindSpore: ``Model.train`` with perfkit's
``ProfilerCallback``, in graph mode; Keras: ``train_on_batch`` inside ``perfkit_xla.profile`` with
``model=``). Run ``train`` in a process of its own per framework
(``python -c``), as torch and Paddle in one process slow each other down."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: Parameters per layer (weight and bias) and in all, as tfprof reports them.
EXPECTED_PARAMS = {"hidden1": 100_480, "hidden2": 4_128, "softmax_linear": 330}
TOTAL_PARAMS = 104_938
HIDDEN1_WEIGHT = 100_352


def _model(nn: Any, base: Any, relu: Any) -> Any:
    class MLP(base):
        def __init__(self) -> None:
            super().__init__()
            self.hidden1 = nn.Linear(784, 128)
            self.hidden2 = nn.Linear(128, 32)
            self.softmax_linear = nn.Linear(32, 10)

        def forward(self, x: Any) -> Any:
            return self.softmax_linear(relu(self.hidden2(relu(self.hidden1(x)))))

    return MLP()


def train_in_subprocess(framework: str, directory: Path, *options: str) -> Path:
    """``train`` in a Python process of its own (``options``: ``stack``, ``nosteps``); the
    saved run's folder. Fails the calling test with the process's stderr when it fails."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [
            sys.executable,
            str(root / "tests" / "mlp_models.py"),
            framework,
            str(directory),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=root,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


def train(
    framework: str,
    directory: Path,
    *,
    steps: int = 3,
    with_stack: bool = False,
    mark_steps: bool = True,
) -> Path:
    """Train the MLP in ``framework`` (``torch``, ``paddle`` or ``mindspore``) for ``steps``
    profiled steps with the adapter's default handler writing under ``directory`` (torch: with
    Python frames when ``with_stack``; without a schedule and ``prof.step()``, so the run
    records no steps, unless ``mark_steps``); return the saved run's folder."""
    if framework == "torch":
        import torch
        from torch.profiler import profile, schedule

        import perfkit_torch

        torch.manual_seed(0)
        model = _model(torch.nn, torch.nn.Module, torch.relu)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        handler = perfkit_torch.on_trace_ready(directory, background=False)
        x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
        with profile(
            schedule=schedule(wait=0, warmup=1, active=steps) if mark_steps else None,
            on_trace_ready=handler,
            record_shapes=True,
            with_stack=with_stack,
        ) as prof:
            for _ in range(steps + 1):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if mark_steps:
                    prof.step()
        return Path(handler.runs[0])
    if framework == "mindspore":
        return _train_mindspore(directory, steps)
    if framework == "keras":
        return _train_keras(directory, steps)
    import paddle
    import paddle.profiler as profiler

    import perfkit_paddle

    paddle.seed(0)
    model = _model(paddle.nn, paddle.nn.Layer, paddle.nn.functional.relu)
    opt = paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())
    handler = perfkit_paddle.on_trace_ready(directory, model=model, background=False)
    x = paddle.randn([64, 784])
    y = paddle.randint(0, 10, [64])
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU],
        scheduler=(1, 1 + steps),
        record_shapes=True,
        on_trace_ready=handler,
    )
    prof.start()
    for _ in range(steps + 1):
        loss = paddle.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        prof.step()
    prof.stop()
    return Path(handler.runs[0])


def _train_keras(directory: Path, steps: int) -> Path:
    """The MLP in Keras (TensorFlow), trained one batch per step (``train_on_batch``, each step
    marked by ``tf.profiler.experimental.Trace``) inside ``perfkit_xla.profile(directory,
    model=model)``; the saved run's folder."""
    import numpy as np
    import tensorflow as tf

    import perfkit_xla

    tf.random.set_seed(0)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((784,)),
            tf.keras.layers.Dense(128, activation="relu", name="hidden1"),
            tf.keras.layers.Dense(32, activation="relu", name="hidden2"),
            tf.keras.layers.Dense(10, name="softmax_linear"),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.01),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64 * steps, 784)).astype("float32")
    y = rng.integers(0, 10, 64 * steps)
    model.train_on_batch(x[:64], y[:64])  # traced before profiling
    with perfkit_xla.profile(directory, framework="tensorflow", model=model) as session:
        for step in range(steps):
            # TensorFlow's profiler guide marks each step of a custom loop this way.
            with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                batch = slice(64 * step, 64 * (step + 1))
                model.train_on_batch(x[batch], y[batch])
    assert not session.failures, session.failures
    return Path(session.runs[0])


def _train_mindspore(directory: Path, steps: int) -> Path:
    """The MLP in MindSpore's graph mode, trained by ``Model.train`` with perfkit's
    ``ProfilerCallback`` profiling steps 2 to ``steps + 1``; the saved run's folder."""
    import mindspore
    import mindspore.dataset as ds
    import numpy as np
    from mindspore import nn, ops
    from mindspore.train import Model

    import perfkit_mindspore

    mindspore.set_context(mode=mindspore.GRAPH_MODE)
    mindspore.set_device("CPU")
    mindspore.set_seed(0)

    class MLP(nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.hidden1 = nn.Dense(784, 128)
            self.hidden2 = nn.Dense(128, 32)
            self.softmax_linear = nn.Dense(32, 10)

        def construct(self, x: Any) -> Any:
            return self.softmax_linear(ops.relu(self.hidden2(ops.relu(self.hidden1(x)))))

    net = MLP()
    model = Model(
        net,
        nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
        nn.SGD(net.trainable_params(), learning_rate=0.01),
    )
    rng = np.random.default_rng(0)
    data = [
        (
            rng.standard_normal((64, 784), dtype=np.float32),
            rng.integers(0, 10, (64,), dtype=np.int32),
        )
        for _ in range(steps + 1)
    ]
    callback = perfkit_mindspore.ProfilerCallback(2, steps + 1, directory, background=False)
    model.train(
        1,
        ds.GeneratorDataset(data, ["x", "y"], shuffle=False),
        callbacks=[callback],
        dataset_sink_mode=False,
    )
    assert not callback.failures, callback.failures
    return Path(callback.runs[0])


if __name__ == "__main__":
    options = sys.argv[3:]
    print(
        train(
            sys.argv[1],
            Path(sys.argv[2]),
            with_stack="stack" in options,
            mark_steps="nosteps" not in options,
        )
    )
