"""What a MindSpore operator's full name says: its type, the cells (layers) it ran in, and its
phase.

In graph mode MindSpore names every kernel after the scopes of the cells it came from, as
TensorFlow's name scopes do:

- ``Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0``: the forward
  pass; each ``attr-Type`` component is a cell (``0-Dense`` is the cell held in attribute ``0``,
  of type ``Dense``), the last component is the operator (type ``MatMul``, node ``op0``);
- ``Gradients/Default/.../0-Dense/Grad_MatMul/MatMul-op1``: the backward pass, the gradient of
  the ``MatMul`` of that cell;
- ``Default/optimizer-Momentum/ApplyMomentum-op0``: the optimizer;
- ``recompute_Default/...``: forward work recomputed in the backward pass.

In PyNative mode most names are bare types (``MatMul``) or ``Default/Adam-op3``.

perfkit names layers as its other adapters do: the path of cell types from the outermost cell
of the model, so ``SequentialCell / Dense`` here is ``Sequential / Linear`` in torch. Training
wrappers (``WithLossCell``, ``TrainOneStepCell``, ...) are not layers: torch and Paddle models
have none; the loss cell (attribute ``_loss_fn``) is a layer of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Roots of a full name and the phase each one means.
ROOTS: dict[str, str] = {
    "Default": "forward",
    "Gradients": "backward",
    "recompute_Default": "backward",
}
#: Cells MindSpore (or a training script) wraps a model in: never layers.
WRAPPER_CELLS = frozenset(
    {
        "WithLossCell",
        "WithGradCell",
        "WithEvalCell",
        "TrainOneStepCell",
        "TrainOneStepWithLossScaleCell",
        "PipelineCell",
        "MicroBatchInterleaved",
        "GradAccumulationCell",
        "_VirtualDatasetCell",
        "_TrainGradAccuStepCell",
        "_TrainPipelineAccuStepCell",
        "_WithLossCell",
    }
)
#: The attribute that holds the optimizer in MindSpore's training cells.
OPTIMIZER_ATTRS = frozenset({"optimizer", "_optimizer"})
#: Op types that are optimizer updates, for names with no optimizer scope (PyNative mode).
OPTIMIZER_TYPES = frozenset(
    {
        "Adam",
        "AdamWeightDecay",
        "AdamW",
        "ApplyAdam",
        "ApplyAdamWithAmsgrad",
        "ApplyMomentum",
        "ApplyGradientDescent",
        "ApplyRMSProp",
        "ApplyCenteredRMSProp",
        "ApplyAdagrad",
        "ApplyAdagradV2",
        "ApplyFtrl",
        "ApplyProximalAdagrad",
        "ApplyAdaMax",
        "ApplyAddSign",
        "ApplyPowerSign",
        "FusedSparseAdam",
        "FusedSparseLazyAdam",
        "FusedAdaFactor",
        "FusedCastAdamWeightDecay",
        "SGD",
        "LARSUpdate",
        "Lamb",
    }
)
_NODE_RE = re.compile(r"-op\d+$")


@dataclass(frozen=True)
class Scope:
    """What one full name says.

    ``type``: the operator type (``MatMul``); ``phase``: ``forward``, ``backward``,
    ``optimizer`` or ``""`` when the name does not say (a bare PyNative name); ``cells``: the
    layer path as ``(attribute, type)`` pairs, outermost first (empty outside cells);
    ``grad_of``: for a backward op under ``Grad_X``, the forward op type ``X``;
    ``optimizer``: the optimizer cell's type (``Momentum``) for optimizer ops.
    """

    type: str
    phase: str
    cells: tuple[tuple[str, str], ...]
    grad_of: str
    optimizer: str


def op_type(name: str) -> str:
    """The operator type in a full name: its last component without the ``-opN`` node suffix
    (``Default/.../MatMul-op0`` -> ``MatMul``; ``MatMul`` -> ``MatMul``)."""
    return _NODE_RE.sub("", name.rsplit("/", 1)[-1])


@lru_cache(maxsize=65536)
def parse(name: str) -> Scope:
    """The ``Scope`` of a MindSpore full name (see the module docstring)."""
    parts = name.split("/")
    kind = op_type(name)
    if len(parts) == 1:
        return Scope(kind, "optimizer" if kind in OPTIMIZER_TYPES else "", (), "", "")
    phase = ROOTS.get(parts[0], "")
    body = parts[1:-1] if phase else parts[:-1]
    if phase == "backward" and body and body[0] in ROOTS:
        body = body[1:]  # Gradients/Default/...
    cells: list[tuple[str, str]] = []
    grad_of = ""
    optimizer = ""
    for part in body:
        if part.startswith("Grad_"):
            grad_of = part[len("Grad_") :]
            continue
        attr, dash, cell = part.partition("-")
        if not dash or not cell:
            continue  # a scope that is no cell (a name scope of the user's own)
        if attr in OPTIMIZER_ATTRS:
            optimizer = cell
            break
        if cell in WRAPPER_CELLS:
            continue
        cells.append((attr, cell))
    if optimizer or (not cells and kind in OPTIMIZER_TYPES):
        return Scope(kind, "optimizer", (), "", optimizer or kind)
    return Scope(kind, phase or "forward", tuple(cells), grad_of, "")


def layer_label(cells: tuple[tuple[str, str], ...]) -> str:
    """A layer path as a reader sees it: the cell types from the outermost, ``SequentialCell /
    Dense``."""
    return " / ".join(cell for _, cell in cells)
