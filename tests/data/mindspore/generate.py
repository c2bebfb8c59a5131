"""Regenerate the MindSpore profiles in this folder (needs mindspore with numpy<2; run from the
repository root):

    python tests/data/mindspore/generate.py

- ``pynative_mlp/``: an MLP (Dense 64-64, ReLU, Dense 64-10; MSE loss; Adam) trained in
  PyNative mode on the CPU, six steps under ``mindspore.profiler.profile`` with
  ``schedule(wait=1, warmup=1, active=3)`` and MindSpore's own
  ``tensorboard_trace_handler``: the folder MindSpore writes, without anything of perfkit's.
- ``graph_mlp/``: the MLP of ``perfkit_mindspore.demo`` (two blocks of Dense, LayerNorm, ReLU of
  64 features and a Dense head; softmax cross-entropy; Adam) in graph mode, three steps after
  one wait and one warm-up step, profiled with ``perfkit_mindspore.on_trace_ready`` and each
  step marked with ``perfkit_mindspore.step(prof)``.
- ``graph_cnn/``: a CNN (Conv2d, ReLU, MaxPool2d, Flatten, Dense; softmax cross-entropy;
  Momentum) trained in graph mode by ``Model.train`` over eight batches, steps 3 to 5 profiled
  by ``perfkit_mindspore.ProfilerCallback`` (which adds ``perfkit_spans.json``).

Each profile folder is copied under a fixed name (``<model>_1_20260101000000000_ascend_ms``) so
the fixture does not depend on the machine that made it; MindSpore's log folder is left out.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))


def copy_profile(source: Path, target: Path, model: str) -> None:
    """Copy the one ``*_ascend_ms`` folder under ``source`` to ``target/<fixed name>``."""
    (profile,) = source.glob("*_ascend_ms")
    if target.exists():
        shutil.rmtree(target)
    dest = target / f"{model}_1_20260101000000000_ascend_ms"
    shutil.copytree(profile, dest, ignore=shutil.ignore_patterns("logs"))
    for f in sorted(dest.rglob("*")):
        if f.is_file():
            print(f, f.stat().st_size, "bytes")


def pynative_mlp(out: Path) -> None:
    import mindspore as ms
    import numpy as np
    from mindspore import nn
    from mindspore.profiler import ProfilerActivity

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    net = nn.SequentialCell(nn.Dense(64, 64), nn.ReLU(), nn.Dense(64, 10))
    optimizer = nn.Adam(net.trainable_params(), 1e-3)
    loss_fn = nn.MSELoss()

    def forward(x: ms.Tensor, y: ms.Tensor) -> ms.Tensor:
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, optimizer.parameters)
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.standard_normal((32, 64), dtype=np.float32))
    y = ms.Tensor(rng.standard_normal((32, 10), dtype=np.float32))
    with ms.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=ms.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=ms.profiler.tensorboard_trace_handler(str(out)),
        record_shapes=True,
    ) as prof:
        for _ in range(6):
            _, grads = grad_fn(x, y)
            optimizer(grads)
            prof.step()


def graph_cnn(out: Path) -> None:
    import mindspore as ms
    import mindspore.dataset as ds
    import numpy as np
    from mindspore import nn
    from mindspore.train import Model

    import perfkit_mindspore

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)
    net = nn.SequentialCell(
        nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Dense(8 * 8 * 8, 10)
    )
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    rng = np.random.default_rng(0)
    data = [
        (
            rng.standard_normal((16, 3, 16, 16), dtype=np.float32),
            rng.integers(0, 10, (16,), dtype=np.int32),
        )
        for _ in range(8)
    ]
    dataset = ds.GeneratorDataset(data, ["x", "y"], shuffle=False)
    callback = perfkit_mindspore.ProfilerCallback(3, 5, out, background=False)
    model.train(1, dataset, callbacks=[callback], dataset_sink_mode=False)
    assert callback.runs and not callback.failures, callback.failures


def graph_mlp(out: Path) -> None:
    from perfkit_mindspore.demo import train_mlp

    runs, handler = train_mlp(out, steps=3, blocks=2, background=False)
    assert runs and not handler.failures, handler.failures


def main() -> None:
    import mindspore as ms

    makers = (("pynative_mlp", pynative_mlp), ("graph_mlp", graph_mlp), ("graph_cnn", graph_cnn))
    for name, make in makers:
        with tempfile.TemporaryDirectory() as tmp:
            make(Path(tmp))
            copy_profile(Path(tmp), HERE / name, name.split("_")[1])
    (HERE / "VERSION").write_text(f"mindspore {ms.__version__}\n")


if __name__ == "__main__":
    main()
