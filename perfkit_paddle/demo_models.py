"""Three small models written the same way in paddle and in torch (``perfkit_torch.demo_models``),
trained on the CPU under ``paddle.profiler`` with perfkit's handler: a CNN, a transformer encoder
and an LSTM language model. Same shapes, batch, optimizer, data (drawn with numpy from one
seed) and data pipeline (a DataLoader over those tensors), the same annotated spans, and the
same layers (Paddle records its own, perfkit's torch handler records torch's) in both
frameworks, so that ``perfkit compare`` of the two runs reads as one model in two frameworks,
row by row.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perfkit_paddle.demo import batches_then_profile

#: The models both frameworks implement, with the sizes both use.
MODELS: dict[str, dict[str, int]] = {
    "cnn": {"batch": 16, "channels": 3, "size": 32, "classes": 10},
    "transformer": {"batch": 8, "seq": 32, "vocab": 1000, "dim": 64, "heads": 4, "ffn": 128},
    "lstm": {"batch": 8, "seq": 32, "vocab": 1000, "dim": 64, "hidden": 128},
}


def _cnn(paddle: Any, nn: Any, size: dict[str, int]) -> Any:
    flat = 32 * (size["size"] // 4) ** 2
    return nn.Sequential(
        nn.Conv2D(size["channels"], 16, 3, padding=1),
        nn.BatchNorm2D(16),
        nn.ReLU(),
        nn.MaxPool2D(2),
        nn.Conv2D(16, 32, 3, padding=1),
        nn.BatchNorm2D(32),
        nn.ReLU(),
        nn.MaxPool2D(2),
        nn.Flatten(),
        nn.Linear(flat, size["classes"]),
    )


def _transformer(paddle: Any, nn: Any, size: dict[str, int]) -> Any:
    dim, heads, ffn = size["dim"], size["heads"], size["ffn"]

    class SelfAttention(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            qkv = self.qkv(x).reshape([b, t, 3, heads, dim // heads]).transpose([2, 0, 3, 1, 4])
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = paddle.matmul(q, k.transpose([0, 1, 3, 2])) * (1.0 / math.sqrt(dim // heads))
            weights = self.dropout(paddle.nn.functional.softmax(scores, axis=-1))
            context = paddle.matmul(weights, v).transpose([0, 2, 1, 3]).reshape([b, t, dim])
            return self.out(context)

    class EncoderLayer(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attention = SelfAttention()
            self.norm2 = nn.LayerNorm(dim)
            self.ffn = nn.Sequential(
                nn.Linear(dim, ffn), nn.GELU(), nn.Dropout(0.1), nn.Linear(ffn, dim)
            )

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.norm1(x))
            return x + self.ffn(self.norm2(x))

    class Encoder(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(size["vocab"], dim)
            self.layers = nn.Sequential(EncoderLayer(), EncoderLayer())
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, size["vocab"])

        def forward(self, tokens: Any) -> Any:
            return self.head(self.norm(self.layers(self.embedding(tokens))))

    return Encoder()


def _lstm(paddle: Any, nn: Any, size: dict[str, int]) -> Any:
    class LanguageModel(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(size["vocab"], size["dim"])
            self.lstm = nn.LSTM(size["dim"], size["hidden"])
            self.head = nn.Linear(size["hidden"], size["vocab"])

        def forward(self, tokens: Any) -> Any:
            out, _ = self.lstm(self.embedding(tokens))
            return self.head(out)

    return LanguageModel()


def build(model: str) -> tuple[Any, Any, Callable[[int], tuple[Any, Any]]]:
    """Return (layer, optimizer, make_data(n) -> (inputs, targets)) of ``model``."""
    import numpy as np
    import paddle
    from paddle import nn

    size = MODELS[model]
    rng = np.random.default_rng(0)
    if model == "cnn":
        layer = _cnn(paddle, nn, size)
        optimizer: Any = paddle.optimizer.Momentum(
            learning_rate=0.01, momentum=0.9, parameters=layer.parameters()
        )

        def make_data(n: int) -> tuple[Any, Any]:
            shape = (n, size["channels"], size["size"], size["size"])
            inputs = rng.standard_normal(shape).astype("float32")
            return inputs, rng.integers(0, size["classes"], (n,)).astype("int64")

    else:
        layer = (
            _transformer(paddle, nn, size) if model == "transformer" else _lstm(paddle, nn, size)
        )
        optimizer = (
            paddle.optimizer.AdamW(learning_rate=1e-3, parameters=layer.parameters())
            if model == "transformer"
            else paddle.optimizer.Adam(learning_rate=1e-3, parameters=layer.parameters())
        )

        def make_data(n: int) -> tuple[Any, Any]:
            tokens = rng.integers(0, size["vocab"], (n, size["seq"])).astype("int64")
            return tokens, rng.integers(0, size["vocab"], (n, size["seq"])).astype("int64")

    return layer, optimizer, make_data


def train(
    directory: Path,
    model: str = "cnn",
    *,
    steps: int = 10,
    seed: int = 0,
    chain: Sequence[Callable[[Any], Any]] = (),
) -> tuple[list[Path], Any]:
    """Train ``model`` (``cnn``, ``transformer`` or ``lstm``) on the CPU: two warm-up steps,
    ``steps`` unprofiled steps, then, with ``paddle.profiler`` started (after them: a started
    Profiler slows the steps its scheduler keeps closed too), two closed steps and ``steps``
    recorded ones, with perfkit's handler (one run saved under ``directory``). Every step is
    timed with ``perfkit_core.step_timer``, whose times are saved into the run. Returns (run
    folders, the timer).
    """
    import paddle
    import paddle.profiler as profiler

    import perfkit_core
    from perfkit_paddle.handler import on_trace_ready

    paddle.seed(seed)
    paddle.set_device("cpu")
    layer, optimizer, make_data = build(model)
    batch = MODELS[model]["batch"]
    inputs, targets = make_data((2 * steps + 4) * batch)
    dataset = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(targets)])
    loader = paddle.io.DataLoader(dataset, batch_size=batch, shuffle=False, num_workers=0)
    loss_fn = paddle.nn.CrossEntropyLoss()
    handler = on_trace_ready(directory, worker_name=f"paddle_{model}", chain=chain)
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU],
        scheduler=(2, 2 + steps),
        on_trace_ready=handler,
        record_shapes=True,  # input shapes give each op its FLOPs (the efficiency tables)
    )
    timer = perfkit_core.step_timer(prof)
    before = 2 + steps  # the timer's warm-up and the unprofiled steps
    for x, y in batches_then_profile(loader, prof, before, batch):
        with timer.step():
            with perfkit_core.annotate("forward"):
                out = layer(x)
            with perfkit_core.annotate("loss"):
                loss = loss_fn(out.reshape([-1, out.shape[-1]]), y.reshape([-1]))
            with perfkit_core.annotate("backward"):
                loss.backward()
            with perfkit_core.annotate("optimizer"):
                optimizer.step()
                optimizer.clear_grad()
    # Paddle prints its own "Perf Summary" when the profiler stops; perfkit's report replaces it.
    with contextlib.redirect_stdout(io.StringIO()):
        prof.stop()
    timer.save(handler.runs)
    return list(handler.runs), timer
