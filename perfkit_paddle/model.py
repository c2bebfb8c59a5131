"""The model a Paddle run trained, as perfkit records it (``meta["model"]``): each layer's name
as the user wrote it and its parameters, for the ``layers`` view.

Paddle's profiler records a forward event per layer call, named after the layer's class only,
so the handler cannot tell which ``Linear`` a call was. ``describe_model(model)`` (or the
handler's ``model=`` argument) names them: it gives each layer the key perfkit's layer tree
gives its calls (``perfkit_core.views.anatomy.structure``: the path of layer types from the model, each
with its ordinal among same-typed siblings) assuming the layers are called in the order they
are defined, once per step, as in a sequential model; a layer list's members are children of
the layer that holds the list (lists are never called). A layer called in another order or
twice gets another layer's name or none.
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

#: Layer containers Paddle never calls: their members are called by the layer that holds them.
UNCALLED = ("LayerList", "LayerDict", "ParameterList")


def _dtype(tensor: Any) -> str:
    text = str(tensor.dtype)
    return text.replace("paddle.", "").replace("VarType.", "").lower()


def _parameter(name: str, tensor: Any) -> dict[str, Any]:
    """One weight (``parameter_entry``); trainable: a ``trainable`` parameter (BatchNorm's
    running statistics are parameters that are not)."""
    size = int(tensor.element_size()) if hasattr(tensor, "element_size") else 4
    trainable = getattr(tensor, "trainable", not getattr(tensor, "stop_gradient", False))
    return parameter_entry(name, tensor.shape, _dtype(tensor), size, bool(trainable))


def _called_children(layer: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """The sub-layers ``layer`` calls, in definition order: its children, a list's members
    instead of the list."""
    out: list[tuple[str, Any]] = []
    for name, child in layer.named_children():
        if type(child).__name__ in UNCALLED:
            out += _called_children(child, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", child))
    return out


def describe_model(model: Any) -> dict[str, Any]:
    """``model`` (a ``paddle.nn.Layer``) as a run's ``meta["model"]``: per layer, its layer key
    (``match``), its attribute path (``hidden1``; empty for the model), its type and its own
    parameters (shared ones counted once). Returns a JSON-able dict."""
    layers: list[dict[str, Any]] = []
    counted: set[int] = set()

    def visit(layer: Any, key: str, path: str) -> None:
        params = []
        for pname, tensor in layer.named_parameters(include_sublayers=False):
            if id(tensor) in counted:
                continue
            counted.add(id(tensor))
            params.append(_parameter(pname, tensor))
        for lname, sub in layer.named_children():
            if type(sub).__name__ in UNCALLED:
                for pname, tensor in sub.named_parameters(include_sublayers=False):
                    if id(tensor) not in counted:
                        counted.add(id(tensor))
                        params.append(_parameter(f"{lname}.{pname}", tensor))
        layers.append(layer_entry(key, path, type(layer).__name__, params))
        siblings = SiblingKeys()
        for name, child in _called_children(layer):
            child_key = siblings.key(key, layer_type(type(child).__name__))
            visit(child, child_key, f"{path}.{name}" if path else name)

    visit(model, layer_key("", layer_type(type(model).__name__), 1), "")
    return model_description(layers)
