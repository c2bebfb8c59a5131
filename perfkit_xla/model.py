"""The model a TensorFlow (Keras) or JAX run trained, as perfkit records it (``meta["model"]``):
each layer's name as the user wrote it and its trainable parameters, for the ``layers`` view.

XLA's profilers record no layer call as an event of its own, and the adapter never sees the
model, so the model is described when it is given: ``perfkit_xla.profile(dir, model=model)``
or ``describe_model(model)``. Two kinds of model are understood:

- a **Keras model** (``keras.Model``, ``tf.keras.Model``; anything with ``layers`` whose items
  hold ``trainable_weights``): one layer per Keras layer, nested as models nest, each with the
  trainable weights it holds itself (shared ones counted once, where first met);
- a **parameter tree** (Flax's ``variables["params"]``, Haiku's params, any nested mapping of
  arrays): one layer per mapping that holds arrays or mappings, its arrays its parameters.

Layer keys follow perfkit's layer keys (``perfkit_core.views.structure``): the path of layer
types, each with its ordinal among same-typed siblings. TensorFlow's op scopes carry the
layers' names, not their classes, so a layer's type here is its name without the numeric
suffixes Keras and Flax add to tell layers apart (``dense_3`` and ``Dense_0`` are ``dense``,
which perfkit aliases to torch's ``linear``; a layer named ``hidden1`` is of type ``hidden1``).
Importing this module imports neither TensorFlow nor JAX.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from perfkit_core.views import layer_type

_SUFFIX_RE = re.compile(r"(_\d+)+$")


def name_type(name: str) -> str:
    """The normalized layer type of a Keras or Flax layer name: the name without its numeric
    suffixes, aliased as perfkit aliases class names (``dense_1_2`` -> ``linear``,
    ``LayerNorm_0`` -> ``layernorm``)."""
    return layer_type(_SUFFIX_RE.sub("", name) or name)


def _count(shape: list[int]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def _parameter(name: str, value: Any) -> dict[str, Any]:
    """One weight (a Keras variable or an array): name in its layer, shape, dtype, count, bytes."""
    import numpy as np

    shape = [int(d) for d in getattr(value, "shape", ())]
    raw = getattr(value, "dtype", "float32")
    dtype = str(getattr(raw, "name", raw))
    try:
        size = int(np.dtype(dtype).itemsize)
    except TypeError:
        size = int(getattr(raw, "itemsize", 0) or 4)  # bfloat16 and other ml_dtypes
    count = _count(shape)
    return {"name": name, "shape": shape, "dtype": dtype, "count": count, "bytes": count * size}


def _sublayers(layer: Any) -> list[Any]:
    """The layers ``layer`` holds directly, in the order they were defined."""
    found = getattr(layer, "layers", None)
    if found is None and hasattr(layer, "_flatten_layers"):
        found = layer._flatten_layers(include_self=False, recursive=False)
    return list(found or [])


def _weight_name(variable: Any, layer_path: str) -> str:
    """A Keras variable's name in its layer: ``kernel`` (Keras 3's ``name``; Keras 2's
    ``dense/kernel:0`` loses its scope and suffix)."""
    name = str(getattr(variable, "name", "") or getattr(variable, "path", "") or "weight")
    name = name.split(":", 1)[0]
    if layer_path and name.startswith(layer_path + "/"):
        name = name[len(layer_path) + 1 :]
    return name.rsplit("/", 1)[-1]


def _describe_keras(model: Any) -> list[dict[str, Any]]:
    layers: list[dict[str, Any]] = []
    counted: set[int] = set()

    def visit(layer: Any, key: str, path: str) -> None:
        subs = _sublayers(layer)
        inner = {id(w) for sub in subs for w in getattr(sub, "trainable_weights", [])}
        params = []
        for weight in getattr(layer, "trainable_weights", []):
            if id(weight) in inner or id(weight) in counted:
                continue
            counted.add(id(weight))
            params.append(_parameter(_weight_name(weight, str(getattr(layer, "name", ""))), weight))
        layers.append({"match": key, "name": path, "type": type(layer).__name__, "params": params})
        ordinals: dict[str, int] = {}
        for sub in subs:
            name = str(getattr(sub, "name", type(sub).__name__))
            kind = name_type(name)
            ordinals[kind] = ordinals.get(kind, 0) + 1
            visit(sub, f"{key}/{kind}[{ordinals[kind]}]", f"{path}.{name}" if path else name)

    visit(model, f"{name_type(str(getattr(model, 'name', 'model')))}[1]", "")
    return layers


def _describe_tree(tree: Mapping[str, Any], root: str) -> list[dict[str, Any]]:
    layers: list[dict[str, Any]] = []

    def visit(node: Mapping[str, Any], key: str, path: str, type_name: str) -> None:
        params = [
            _parameter(str(name), value)
            for name, value in node.items()
            if not isinstance(value, Mapping) and hasattr(value, "shape")
        ]
        layers.append({"match": key, "name": path, "type": type_name, "params": params})
        ordinals: dict[str, int] = {}
        for name, value in node.items():
            if isinstance(value, Mapping):
                kind = name_type(str(name))
                ordinals[kind] = ordinals.get(kind, 0) + 1
                child_path = f"{path}.{name}" if path else str(name)
                visit(
                    value, f"{key}/{kind}[{ordinals[kind]}]", child_path, _SUFFIX_RE.sub("", name)
                )

    visit(tree, f"{name_type(root)}[1]", "", root)
    return layers


def describe_model(model: Any, *, name: str = "model") -> dict[str, Any]:
    """``model`` (a Keras model, or a parameter tree such as Flax's ``variables["params"]``) as
    a run's ``meta["model"]``: per layer, its layer key (``match``), its path of names
    (``hidden1``; empty for the model), its type and its own trainable parameters. ``name`` is
    the model's name for a parameter tree (a Keras model has its own). A JSON-able dict,
    ``perfkit_paddle.describe_model``'s shape; TypeError for anything else."""
    if hasattr(model, "trainable_weights"):
        return {"match": "key", "layers": _describe_keras(model)}
    if isinstance(model, Mapping):
        tree = model.get("params", model) if isinstance(model.get("params"), Mapping) else model
        return {"match": "key", "layers": _describe_tree(tree, name)}
    raise TypeError(
        f"perfkit_xla.describe_model takes a Keras model or a mapping of parameters, "
        f"not {type(model).__name__}"
    )
