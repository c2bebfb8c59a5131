"""The model a MindSpore run trained, as perfkit records it (``meta["model"]``): each cell's name
as the user wrote it and its trainable parameters, for the ``layers`` view.

MindSpore's operators carry the scopes of the cells they ran in (``perfkit_mindspore.scopes``),
from which the loader makes one layer span per cell call, named after the cell's type. perfkit's
layer tree keys each call by the path of cell types from the outermost cell, each with its
ordinal among same-typed siblings (``perfkit_core.views.anatomy.structure``). ``describe_model(cell)``
gives each cell of the model the key its calls get, assuming the cells are called in the order
they are defined, once per step, as in a sequential model: training wrappers
(``TrainOneStepCell``, ``WithLossCell``, ...) are not layers and the optimizer is not part of
the model, so the cells inside them are the outermost layers. Every other cell is a layer,
a ``CellList`` too: its members' operators carry its scope (``blocks-CellList/0-Dense``). A cell
called in another order or twice gets another cell's name or none.

``ProfilerCallback`` describes the network ``Model.train`` trains without being asked;
``on_trace_ready(dir, model=net)`` describes the cell it is given. Importing this module imports
no MindSpore.
"""

from __future__ import annotations

from typing import Any

from perfkit_core.events import (
    SiblingKeys,
    layer_entry,
    layer_key,
    model_description,
    parameter_entry,
)
from perfkit_core.views import layer_type
from perfkit_mindspore.scopes import OPTIMIZER_ATTRS, WRAPPER_CELLS

#: Attributes of training cells that hold no part of the model (the optimizer, the gradients'
#: reducer of data parallelism).
TRAINING_ATTRS = OPTIMIZER_ATTRS | {"grad_reducer"}


def _parameter(name: str, param: Any) -> dict[str, Any]:
    """One weight (``parameter_entry``): name in its cell, shape, dtype, count, bytes."""
    size = int(getattr(param, "itemsize", 0) or 4)
    return parameter_entry(name, param.shape, str(param.dtype).lower(), size)


def _own_parameters(cell: Any) -> list[tuple[str, Any]]:
    """The trainable parameters ``cell`` holds itself (not its sub-cells'), by local name."""
    return [
        (name, param)
        for name, param in cell.parameters_and_names(expand=False)
        if getattr(param, "requires_grad", True)
    ]


def _children(cell: Any) -> list[tuple[str, Any]]:
    """The sub-cells of ``cell`` by attribute, in definition order; a training cell's optimizer
    and gradient reducer left out."""
    return [(name, sub) for name, sub in cell.name_cells().items() if name not in TRAINING_ATTRS]


def _called_children(cell: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """The sub-cells of ``cell`` that are layers, in definition order: the cells inside a
    training wrapper instead of the wrapper."""
    out: list[tuple[str, Any]] = []
    for name, child in _children(cell):
        if type(child).__name__ in WRAPPER_CELLS:
            out += _called_children(child, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", child))
    return out


def describe_model(cell: Any) -> dict[str, Any]:
    """``cell`` (a ``mindspore.nn.Cell``: the network, or the training cell that wraps it) as a
    run's ``meta["model"]``: per cell, its layer key (``match``), its attribute path (``hidden1``;
    empty for the network), its type and its own trainable parameters (shared ones counted
    once). Returns a JSON-able dict (``perfkit_paddle.describe_model``'s shape)."""
    layers: list[dict[str, Any]] = []
    counted: set[int] = set()

    def visit(node: Any, key: str, path: str) -> None:
        params = []
        for pname, param in _own_parameters(node):
            if id(param) not in counted:
                counted.add(id(param))
                params.append(_parameter(pname, param))
        layers.append(layer_entry(key, path, type(node).__name__, params))
        siblings = SiblingKeys()
        for name, child in _called_children(node):
            child_key = siblings.key(key, layer_type(type(child).__name__))
            visit(child, child_key, f"{path}.{name}" if path else name)

    if type(cell).__name__ in WRAPPER_CELLS:
        # The training cell: the network and the loss inside it are the outermost layers, named
        # from the network (``hidden1``, not ``network._backbone.hidden1``).
        outermost = SiblingKeys()
        for _, child in _called_children(cell):
            visit(child, outermost.key("", layer_type(type(child).__name__)), "")
    else:
        visit(cell, layer_key("", layer_type(type(cell).__name__), 1), "")
    return model_description(layers)
