"""What the advice benchmark's scenarios are made of, shared by its CPU scenarios
(``bench_advice.py``) and its GPU ones (``advice_gpu.py``): a training ``Loop``, a ``Scenario``
that builds one with or without its remedies, and the models both build their loops from. Both
import this module and neither imports the other at load (``bench_advice`` imports
``advice_gpu`` only when asked for the GPU scenarios)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The features of the scenarios' MLPs and of the elementwise chain.
WIDTH = 32


@dataclass
class Loop:
    """One training loop ready to run: ``step()`` runs one training step (next batch,
    forward, backward, optimizer), ``close()`` frees its workers."""

    step: Callable[[], None]
    close: Callable[[], None] = lambda: None
    #: The model it trains, for a Paddle handler's ``model=`` (the parameter shapes that
    #: ``--measure`` replays the optimizer over; Paddle records none of its own).
    model: Any = None


@dataclass
class Scenario:
    """A loop built so that ``rule`` fires; ``build(applied)`` returns the loop with the
    remedies of the rules in ``applied`` (rule ids) applied; ``remedies`` says, per rule id
    the scenario can remedy, what the remedied loop changes."""

    name: str
    framework: str
    rule: str
    build: Callable[[frozenset[str]], Loop]
    remedies: dict[str, str] = field(default_factory=dict)
    #: Where the loop trains: ``cpu``, or ``cuda`` for the GPU scenarios (``advice_gpu``).
    device: str = "cpu"
    #: Called with the findings of the profiled run before the remedied loops are built, for
    #: a remedy that applies what its finding prescribes (a worker count) and says so in
    #: ``remedies``.
    prescribe: Callable[[list[Any]], None] | None = None


def torch_mlp(blocks: int, width: int = WIDTH) -> Any:
    import torch

    layers: list[Any] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


class ElementwiseChain:
    """A module whose forward is a chain of ``links`` tiny elementwise ops between two
    Linear layers: many ops, little math, what a compiled graph fuses."""

    def __new__(cls, links: int) -> Any:
        import torch

        class Chain(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.first = torch.nn.Linear(WIDTH, WIDTH)
                self.last = torch.nn.Linear(WIDTH, 10)

            def forward(self, x: Any) -> Any:
                x = self.first(x)
                for i in range(links):
                    x = torch.tanh(x * 1.01 + 0.01 * i)
                return self.last(x)

        return Chain()
