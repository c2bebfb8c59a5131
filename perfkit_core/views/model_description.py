"""The model a run trained, as its adapter recorded it in ``meta["model"]``: each layer's name as
the user wrote it and its parameters (the torch handler records them for the modules it saw;
Paddle's handler for the ``model=`` it was given). The ``layers`` view reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perfkit_core.errors import TraceError

if TYPE_CHECKING:
    from perfkit_core.events.run import Run


@dataclass
class Parameter:
    """One weight of a layer: its name in the layer, shape, dtype, element count and bytes, and
    whether training updates it (``trainable``; True where the adapter did not say)."""

    name: str
    shape: list[int]
    dtype: str
    count: int
    bytes: int
    trainable: bool = True


@dataclass
class LayerDescription:
    """A layer as the adapter saw the model: ``match`` (the span name that recorded its calls, for
    torch, or its layer key, for adapters whose spans carry only the type), its ``name`` as the
    user wrote it (the attribute path, ``hidden1``; empty for the model itself), its ``type``
    and its own ``params``."""

    match: str
    name: str
    type: str
    params: list[Parameter] = field(default_factory=list)


def model_description(run: Run) -> tuple[str, dict[str, LayerDescription]] | None:
    """The model the adapter recorded in ``run.meta["model"]``: (what a description is matched
    by, ``span`` or ``key``; descriptions by that), or None when none was recorded. A malformed
    record raises ``TraceError`` naming the run."""
    recorded = run.meta.get("model")
    if not recorded:
        return None
    source = run.origin or run.meta.get("source") or run.meta.get("run_id") or "run"
    try:
        by = str(recorded["match"])
        found: dict[str, LayerDescription] = {}
        for entry in recorded["layers"]:
            params = [
                Parameter(
                    str(p["name"]),
                    [int(d) for d in p["shape"]],
                    str(p["dtype"]),
                    int(p["count"]),
                    int(p["bytes"]),
                    _flag(p.get("trainable", True)),
                )
                for p in entry.get("params", [])
            ]
            found[str(entry["match"])] = LayerDescription(
                str(entry["match"]), str(entry.get("name", "")), str(entry.get("type", "")), params
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(str(source), f"its model description is malformed ({exc})") from exc
    if by not in ("span", "key"):
        raise TraceError(str(source), f"its model description matches layers by {by!r}")
    return by, found


def _flag(value: object) -> bool:
    """A recorded true/false value; anything else is malformed (ValueError)."""
    if not isinstance(value, bool):
        raise ValueError(f"trainable is {value!r}, not true or false")
    return value
