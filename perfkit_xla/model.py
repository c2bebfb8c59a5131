"""The model a TensorFlow (Keras) or JAX run trained, as perfkit records it (``meta["model"]``):
each layer's name as the user wrote it and its trainable parameters, for the ``layers`` view.

XLA's profilers record no layer call as an event of its own, and the adapter never sees the
model, so the model is described when it is given: ``perfkit_xla.profile(dir, model=model)``
or ``describe_model(model)``. Two kinds of model are understood:

- a **Keras model** (``keras.Model``, ``tf.keras.Model``; anything with ``layers`` whose items
  hold ``trainable_weights``): the model and one layer per layer it holds, as TensorFlow's op
  scopes record them (two levels, ``perfkit_xla.scopes``), each layer with every trainable
  weight it holds, its sub-layers' included (shared ones counted once, where first met);
- a **parameter tree** (Flax's ``variables["params"]``, Haiku's params, any nested mapping of
  arrays): one layer per mapping that holds arrays or mappings, its arrays its parameters.

Layer keys follow perfkit's layer keys (``perfkit_core.views.anatomy.structure``): the path of layer
types, each with its ordinal among same-typed siblings. TensorFlow's op scopes carry the
layers' names, not their classes, so a layer's type here is its name without the numeric
suffixes Keras and Flax add to tell layers apart (``dense_3`` and ``Dense_0`` are ``dense``,
which perfkit aliases to torch's ``linear``; a layer named ``hidden1`` is of type ``hidden1``).
Importing this module imports neither TensorFlow nor JAX.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfkit_core.events import (
    SiblingKeys,
    layer_entry,
    layer_key,
    model_description,
    parameter_entry,
)
from perfkit_core.views import dtype_bytes, layer_type
from perfkit_xla.ops import scope_base


def name_type(name: str) -> str:
    """The normalized layer type of a Keras or Flax layer name: the name without its numeric
    suffixes, aliased as perfkit aliases class names (``dense_1_2`` -> ``linear``,
    ``LayerNorm_0`` -> ``layernorm``)."""
    return layer_type(scope_base(name))


def _parameter(name: str, value: Any) -> dict[str, Any]:
    """One weight (a Keras variable or an array; ``parameter_entry``): name in its layer,
    shape, dtype, count, bytes."""
    raw = getattr(value, "dtype", "float32")
    dtype = str(getattr(raw, "name", raw))
    size = dtype_bytes(dtype) or int(getattr(raw, "itemsize", 0) or 4)
    return parameter_entry(name, getattr(value, "shape", ()), dtype, size)


def _sublayers(layer: Any) -> list[Any]:
    """The layers ``layer`` holds directly, in the order they were defined."""
    found = getattr(layer, "layers", None)
    if found is None and hasattr(layer, "_flatten_layers"):
        found = layer._flatten_layers(include_self=False, recursive=False)
    return list(found or [])


def _weight_name(variable: Any, layer_name: str) -> str:
    """A Keras variable's name in its layer: its path below the layer (``kernel``, or
    ``dense/kernel`` for a sub-layer's; Keras 2's ``dense/kernel:0`` without its suffix)."""
    path = str(getattr(variable, "path", "") or getattr(variable, "name", "") or "weight")
    parts = path.split(":", 1)[0].split("/")
    if layer_name in parts:
        below = parts[len(parts) - parts[::-1].index(layer_name) :]
        if below:
            return "/".join(below)
    return parts[-1]


def _describe_keras(model: Any) -> list[dict[str, Any]]:
    """The model and its layers, as TensorFlow's op scopes record them (``perfkit_xla.scopes``:
    the model's scope and its layers' under it): each layer with every trainable weight it
    holds, its sub-layers' included; the model with the weights no layer holds."""
    model_name = str(getattr(model, "name", "model"))
    root = layer_key("", name_type(model_name), 1)
    layers: list[dict[str, Any]] = []
    counted: set[int] = set()
    entries: list[dict[str, Any]] = []
    siblings = SiblingKeys()
    for sub in _sublayers(model):
        name = str(getattr(sub, "name", type(sub).__name__))
        key = siblings.key(root, name_type(name))
        params = []
        for weight in getattr(sub, "trainable_weights", []):
            if id(weight) not in counted:
                counted.add(id(weight))
                params.append(_parameter(_weight_name(weight, name), weight))
        entries.append(layer_entry(key, name, type(sub).__name__, params))
    own = [
        _parameter(_weight_name(w, model_name), w)
        for w in getattr(model, "trainable_weights", [])
        if id(w) not in counted
    ]
    layers.append(layer_entry(root, "", type(model).__name__, own))
    return layers + entries


def _describe_tree(tree: Mapping[str, Any], root: str) -> list[dict[str, Any]]:
    layers: list[dict[str, Any]] = []

    def visit(node: Mapping[str, Any], key: str, path: str, type_name: str) -> None:
        params = [
            _parameter(str(name), value)
            for name, value in node.items()
            if not isinstance(value, Mapping) and hasattr(value, "shape")
        ]
        layers.append(layer_entry(key, path, type_name, params))
        siblings = SiblingKeys()
        for name, value in node.items():
            if isinstance(value, Mapping):
                child_path = f"{path}.{name}" if path else str(name)
                child_key = siblings.key(key, name_type(str(name)))
                visit(value, child_key, child_path, scope_base(name))

    visit(tree, layer_key("", name_type(root), 1), "", root)
    return layers


def describe_model(model: Any, *, name: str = "model") -> dict[str, Any]:
    """``model`` (a Keras model, or a parameter tree such as Flax's ``variables["params"]``) as
    a run's ``meta["model"]``: per layer, its layer key (``match``), its path of names
    (``hidden1``; empty for the model), its type and its own trainable parameters. ``name`` is
    the model's name for a parameter tree (a Keras model has its own). A JSON-able dict,
    ``perfkit_paddle.describe_model``'s shape; TypeError for anything else."""
    if hasattr(model, "trainable_weights"):
        return model_description(_describe_keras(model))
    if isinstance(model, Mapping):
        tree = model.get("params", model) if isinstance(model.get("params"), Mapping) else model
        return model_description(_describe_tree(tree, name))
    raise TypeError(
        f"perfkit_xla.describe_model takes a Keras model or a mapping of parameters, "
        f"not {type(model).__name__}"
    )
