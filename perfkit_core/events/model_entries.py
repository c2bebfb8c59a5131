"""The entries of a run's ``meta["model"]``, written the same way by every adapter.

A model description lists the model's layers, each with its layer key (``match``), attribute
path, type and own parameters (``perfkit_core.views.layers.model_description`` reads it). The
layer key is the path of layer types from the outermost layer, each with its ordinal among
same-typed siblings, 1-based (``sequential[1]/linear[2]``): the key ``views.structure`` gives
the recorded layer spans, so the two line up. An adapter walks its framework's model and calls
``parameter_entry`` for each weight, ``SiblingKeys`` for each layer's children and
``layer_entry`` for each layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: How a description's layers are matched to the recorded layer spans: by layer key.
MATCH_BY_KEY = "key"


def layer_key(parent: str, kind: str, ordinal: int) -> str:
    """The key of the ``ordinal``-th (1-based) child of type ``kind`` under the layer keyed
    ``parent`` (empty for an outermost layer)."""
    step = f"{kind}[{ordinal}]"
    return f"{parent}/{step}" if parent else step


class SiblingKeys:
    """Numbers the children of one layer in the order they are called: ``key(parent, kind)``
    is ``layer_key`` with the next ordinal of ``kind``."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def key(self, parent: str, kind: str) -> str:
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return layer_key(parent, kind, self._counts[kind])


def parameter_entry(
    name: str, shape: Iterable[Any], dtype: str, itemsize: int, trainable: bool | None = None
) -> dict[str, Any]:
    """One weight as a run records it: ``name`` in its layer, ``shape``, ``dtype``, element
    ``count``, ``bytes`` (``count * itemsize``) and, where the framework says, whether training
    updates it (``trainable``)."""
    dims = [int(d) for d in shape]
    count = 1
    for d in dims:
        count *= d
    entry: dict[str, Any] = {
        "name": name,
        "shape": dims,
        "dtype": dtype,
        "count": count,
        "bytes": count * int(itemsize),
    }
    if trainable is not None:
        entry["trainable"] = bool(trainable)
    return entry


def layer_entry(
    key: str, path: str, type_name: str, params: list[dict[str, Any]]
) -> dict[str, Any]:
    """One layer of a description: its layer ``key``, attribute ``path`` (empty for the model),
    class name and own parameters (``parameter_entry``s)."""
    return {"match": key, "name": path, "type": type_name, "params": params}


def model_description(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's ``meta["model"]`` of ``layers`` (``layer_entry``s), matched by layer key."""
    return {"match": MATCH_BY_KEY, "layers": layers}
