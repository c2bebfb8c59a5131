"""Three small models written the same way in torch and in paddle (``perfkit_paddle.demo_models``),
trained on the CPU under ``torch.profiler`` with perfkit's handler: a CNN, a transformer encoder
and an LSTM language model. Same shapes, batch, optimizer, data (drawn with numpy from one
seed) and data pipeline (a DataLoader over those tensors), the same annotated spans, and the
same layers (perfkit's handler records torch's, Paddle records its own) in both frameworks, so
that ``perfkit compare`` of the two runs reads as one model in two frameworks, row by row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The models both frameworks implement, with the sizes both use.
MODELS: dict[str, dict[str, int]] = {
    "cnn": {"batch": 16, "channels": 3, "size": 32, "classes": 10},
    "transformer": {"batch": 8, "seq": 32, "vocab": 1000, "dim": 64, "heads": 4, "ffn": 128},
    "lstm": {"batch": 8, "seq": 32, "vocab": 1000, "dim": 64, "hidden": 128},
}


def _cnn(torch: Any, nn: Any, size: dict[str, int]) -> Any:
    flat = 32 * (size["size"] // 4) ** 2
    return nn.Sequential(
        nn.Conv2d(size["channels"], 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, size["classes"]),
    )


def _transformer(torch: Any, nn: Any, size: dict[str, int]) -> Any:
    dim, heads, ffn = size["dim"], size["heads"], size["ffn"]

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
            self.dropout = nn.Dropout(0.1)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            qkv = self.qkv(x).reshape(b, t, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dim // heads))
            weights = self.dropout(torch.softmax(scores, dim=-1))
            context = torch.matmul(weights, v).transpose(1, 2).reshape(b, t, dim)
            return self.out(context)

    class EncoderLayer(nn.Module):
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

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(size["vocab"], dim)
            self.layers = nn.Sequential(EncoderLayer(), EncoderLayer())
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, size["vocab"])

        def forward(self, tokens: Any) -> Any:
            return self.head(self.norm(self.layers(self.embedding(tokens))))

    return Encoder()


def _lstm(torch: Any, nn: Any, size: dict[str, int]) -> Any:
    class LanguageModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(size["vocab"], size["dim"])
            self.lstm = nn.LSTM(size["dim"], size["hidden"], batch_first=True)
            self.head = nn.Linear(size["hidden"], size["vocab"])

        def forward(self, tokens: Any) -> Any:
            out, _ = self.lstm(self.embedding(tokens))
            return self.head(out)

    return LanguageModel()


def build(model: str) -> tuple[Any, Any, Callable[[int], tuple[Any, Any]]]:
    """Return (module, optimizer, make_data(n) -> (inputs, targets)) of ``model``."""
    import numpy as np
    import torch
    from torch import nn

    size = MODELS[model]
    rng = np.random.default_rng(0)
    if model == "cnn":
        module = _cnn(torch, nn, size)
        optimizer: Any = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)

        def make_data(n: int) -> tuple[Any, Any]:
            shape = (n, size["channels"], size["size"], size["size"])
            inputs = rng.standard_normal(shape).astype("float32")
            targets = rng.integers(0, size["classes"], (n,)).astype("int64")
            return torch.from_numpy(inputs), torch.from_numpy(targets)

    else:
        module = _transformer(torch, nn, size) if model == "transformer" else _lstm(torch, nn, size)
        optimizer = (
            torch.optim.AdamW(module.parameters(), lr=1e-3)
            if model == "transformer"
            else torch.optim.Adam(module.parameters(), lr=1e-3)
        )

        def make_data(n: int) -> tuple[Any, Any]:
            tokens = rng.integers(0, size["vocab"], (n, size["seq"])).astype("int64")
            targets = rng.integers(0, size["vocab"], (n, size["seq"])).astype("int64")
            return torch.from_numpy(tokens), torch.from_numpy(targets)

    return module, optimizer, make_data


def train(
    directory: Path,
    model: str = "cnn",
    *,
    steps: int = 10,
    seed: int = 0,
    with_stack: bool = False,
    chain: Sequence[Callable[[Any], Any]] = (),
) -> tuple[list[Path], Any]:
    """Train ``model`` (``cnn``, ``transformer`` or ``lstm``) on the CPU: two warm-up steps,
    ``steps`` unprofiled steps, then ``steps`` steps under ``torch.profiler`` with perfkit's
    handler (one run saved under ``directory``; the handler records the layers). Every step is
    timed with ``perfkit_core.step_timer``, whose times are saved into the run. Returns (run
    folders, the timer).
    """
    import torch
    from torch.profiler import ProfilerActivity, schedule

    import perfkit_core
    from perfkit_torch.handler import on_trace_ready

    torch.manual_seed(seed)
    # One CPU thread, as Paddle's CPU kernels use by default: the comparison is then of the
    # frameworks, not of their thread pools (and a busy machine does not stall torch's).
    torch.set_num_threads(1)
    module, optimizer, make_data = build(model)
    batch = MODELS[model]["batch"]
    inputs, targets = make_data((2 * steps + 2) * batch)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(inputs, targets), batch_size=batch
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    handler = on_trace_ready(directory, worker_name=f"torch_{model}", chain=chain)
    prof = torch.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=steps + 1, warmup=1, active=steps, repeat=1),
        on_trace_ready=handler,
        record_shapes=True,  # input shapes give each op its FLOPs (the efficiency tables)
        with_stack=with_stack,
    )
    timer = perfkit_core.step_timer(prof)
    with prof:
        for x, y in loader:
            with timer.step():
                with perfkit_core.annotate("forward"):
                    out = module(x)
                with perfkit_core.annotate("loss"):
                    loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
                with perfkit_core.annotate("backward"):
                    loss.backward()
                with perfkit_core.annotate("optimizer"):
                    optimizer.step()
                    optimizer.zero_grad()
            prof.step()
    handler.wait()
    timer.save(handler.runs)
    return list(handler.runs), timer
