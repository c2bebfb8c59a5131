"""One small model written the same way in torch and in Paddle, whose layers exercise how layer
paths are named: nested containers, a block class used four times from a module list
(``nn.ModuleList`` / ``paddle.nn.LayerList``), two heads from another list, and one layer called
twice. ``train`` profiles it with perfkit's handler; run it in a process of its own per
framework (``python -c``), as torch and Paddle in one process slow each other down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WIDTH = 16


def _tower(nn: Any, layer_base: Any, module_list: Any) -> Any:
    class Block(layer_base):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(WIDTH, WIDTH)
            self.norm = nn.LayerNorm(WIDTH)
            self.act = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return x + self.act(self.norm(self.fc(x)))

    class Tower(layer_base):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Linear(8, WIDTH), nn.ReLU())
            self.blocks = module_list([Block() for _ in range(4)])
            self.heads = module_list([nn.Linear(WIDTH, 4), nn.Linear(WIDTH, 4)])
            self.shared = nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            x = self.stem(x)
            for block in self.blocks:
                x = block(x)
            y = self.heads[0](x) + self.heads[1](x)
            return self.shared(self.shared(y))

    return Tower()


#: Layer keys both frameworks must give the tower (``perfkit_core.views.anatomy.structure``).
EXPECTED_KEYS = {
    "tower[1]",
    "tower[1]/sequential[1]",
    "tower[1]/sequential[1]/linear[1]",
    "tower[1]/sequential[1]/relu[1]",
    *(
        f"tower[1]/block[{b}]{leaf}"
        for b in range(1, 5)
        for leaf in ("", "/linear[1]", "/layernorm[1]", "/relu[1]")
    ),
    *(f"tower[1]/linear[{k}]" for k in range(1, 5)),  # two heads, then the shared layer twice
}


def train(framework: str, directory: Path, *, layers: bool = True, steps: int = 3) -> Path:
    """Train the tower in ``framework`` (``torch`` or ``paddle``) for ``steps`` profiled steps
    after two unprofiled ones, the forward and the backward annotated; ``layers=False`` makes
    torch's handler record no layers. Returns the saved run's folder."""
    import numpy as np

    import perfkit_core

    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((4, 8)).astype("float32") for _ in range(steps + 2)]
    if framework == "torch":
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        import perfkit_torch

        torch.manual_seed(0)
        model = _tower(torch.nn, torch.nn.Module, torch.nn.ModuleList)
        handler = perfkit_torch.on_trace_ready(directory, background=False, layers=layers)
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
            on_trace_ready=handler,
        ) as prof:
            for batch in batches:
                with perfkit_core.annotate("forward"):
                    loss = model(torch.from_numpy(batch)).pow(2).mean()
                with perfkit_core.annotate("backward"):
                    loss.backward()
                prof.step()
        return handler.runs[0]
    import contextlib
    import io

    import paddle
    import paddle.profiler as profiler

    import perfkit_paddle

    paddle.seed(0)
    paddle.set_device("cpu")
    model = _tower(paddle.nn, paddle.nn.Layer, paddle.nn.LayerList)
    handler = perfkit_paddle.on_trace_ready(directory, background=False, model=model)
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 2 + steps), on_trace_ready=handler
    )
    prof.start()
    for batch in batches:
        with perfkit_core.annotate("forward"):
            loss = model(paddle.to_tensor(batch)).pow(2).mean()
        with perfkit_core.annotate("backward"):
            loss.backward()
        prof.step()
    with contextlib.redirect_stdout(io.StringIO()):
        prof.stop()
    return handler.runs[0]
