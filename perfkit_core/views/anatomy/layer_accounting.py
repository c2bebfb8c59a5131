"""Where each figure of the ``layers`` view counts: the layer of an op, a kernel or an
allocation (a backward op's is the layer of the forward op it differentiates), the display
name and recorded description of each layer key, and the layers that ran an op of a type.
Layer keys are ``perfkit_core.views.anatomy.structure``'s: the path of layer types from the outermost
layer of the step, each with its call ordinal among same-typed siblings."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.schema import str_values
from perfkit_core.views.model_description import LayerDescription, model_description

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


def per_key(keys: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """Sum of ``values`` per key."""
    out: dict[str, float] = {}
    if len(keys) == 0:
        return out
    uniq, inverse = np.unique(keys.astype(str), return_inverse=True)
    sums = np.bincount(inverse, weights=values.astype(np.float64), minlength=len(uniq))
    for k, v in zip(uniq.tolist(), sums.tolist(), strict=True):
        out[k] = v
    return out


def layer_of_rows(run: Run, rows: np.ndarray) -> np.ndarray:
    """For host rows, the layer span each counts in: its op unit's (a backward unit's is the
    layer of the forward op it differentiates), else its innermost layer; -1 outside layers."""
    from perfkit_core.views.anatomy.attribution import unit_labels
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    labels = unit_labels(run)
    unit = st.unit_of[rows]
    return np.where(unit >= 0, labels.layer_row[np.maximum(unit, 0)], st.layer_of[rows])


def allocated_by_layer(run: Run, slices: pd.DataFrame) -> dict[str, float] | None:
    """Bytes allocated (memory events with ``bytes > 0``) per layer key, over the slices taken:
    an allocation counts when it starts in one of ``slices`` (the forward and backward phases of
    the steps taken) on its rank, in the layer of the op it is made in (a backward op's: the
    forward op's layer). None when the run recorded no memory events."""
    from perfkit_core.views.anatomy.structure import structure

    ev = run.events
    memory = str_values(ev["kind"]) == "memory"
    if not memory.any():
        return None
    st = structure(run)
    nbytes = ev["bytes"].to_numpy().astype(np.float64)
    rows = np.flatnonzero(memory & (nbytes > 0))
    start = ev["start_ns"].to_numpy()[rows].astype(np.int64)
    rank = ev["rank"].to_numpy()[rows].astype(np.int64)
    s_rank = slices["rank"].to_numpy().astype(np.int64)
    s_start = slices["start_ns"].to_numpy().astype(np.int64)
    s_end = s_start + slices["ns"].to_numpy().astype(np.int64)
    inside = np.zeros(len(rows), dtype=bool)
    for r in np.unique(rank).tolist():
        mine = np.flatnonzero(s_rank == r)
        if len(mine) == 0:
            continue
        order = mine[np.argsort(s_start[mine], kind="stable")]
        ours = np.flatnonzero(rank == r)
        pos = np.searchsorted(s_start[order], start[ours], side="right") - 1
        hit = order[np.maximum(pos, 0)]
        inside[ours] = (pos >= 0) & (start[ours] < s_end[hit])
    rows = rows[inside]
    owner = st.parent[rows]
    layer = np.where(owner >= 0, layer_of_rows(run, np.maximum(owner, 0)), -1)
    keys = np.array([st.layer_key.get(int(r), "") for r in layer.tolist()], dtype=object)
    return per_key(keys, nbytes[rows])


def key_names(run: Run, keys: list[str]) -> dict[str, str]:
    """Display name of each layer key: the last part of its label (``Linear 2``)."""
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    names: dict[str, str] = {}
    for row, key in st.layer_key.items():
        if key not in names:
            names[key] = st.layer_label[row].rsplit(" / ", 1)[-1]
    return {k: names.get(k, k) for k in keys}


def descriptions_by_key(run: Run, keys: list[str]) -> dict[str, LayerDescription] | None:
    """The recorded description of each layer key (by its span name or its key), or None when
    the run recorded no model."""
    from perfkit_core.views.anatomy.structure import structure

    recorded = model_description(run)
    if recorded is None:
        return None
    by, found = recorded
    if by == "key":
        return {k: found[k] for k in keys if k in found}
    st = structure(run)
    out: dict[str, LayerDescription] = {}
    owner: dict[str, str] = {}
    for row in sorted(st.layer_key, key=lambda r: int(st.start[r])):
        key, span = st.layer_key[row], str(st.names[row])
        if key in out or span not in found:
            continue
        # A module called from two places is two layers; its weights count in the first.
        first = owner.setdefault(span, key)
        d = found[span]
        out[key] = d if first == key else LayerDescription(d.match, d.name, d.type, [])
    return out


def layers_running(run: Run, wanted: list[int], pattern: re.Pattern[str]) -> set[str]:
    """The layer keys of the layers that ran an op whose type (its event name: ``aten::addmm``,
    ``matmul``, ``MatMul``) ``pattern`` matches, in the steps ``wanted``: an op counts in the
    layer its time counts in (a backward op in the layer of the forward op it differentiates; an
    op nested in another, in the outer op's layer)."""
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    step_numbers = run.events["step"].to_numpy()
    ops = np.flatnonzero(st.host & (st.kind == "operator") & (st.step_row_of >= 0))
    ops = ops[np.isin(step_numbers[ops], wanted)]
    if len(ops) == 0:
        return set()
    uniq, inverse = np.unique(st.names[ops].astype(str), return_inverse=True)
    hit = np.array([bool(pattern.search(n)) for n in uniq.tolist()], dtype=bool)
    ops = ops[hit[np.asarray(inverse).reshape(-1)]]
    layers = np.unique(layer_of_rows(run, ops))
    return {st.layer_key[int(r)] for r in layers.tolist() if r >= 0 and int(r) in st.layer_key}


def first_described(run: Run) -> list[str]:
    """The layer keys of the recorded model's layers in a run without steps: the keys of a
    description matched by key, the key of each described span's first call otherwise (a
    run without steps numbers the calls of the whole run, so later calls of one module are
    other keys). Empty when no model was recorded."""
    from perfkit_core.views.anatomy.structure import structure

    recorded = model_description(run)
    if recorded is None:
        return []
    by, found = recorded
    if by == "key":
        return list(found)
    st = structure(run)
    first: dict[str, str] = {}
    for row in sorted(st.layer_key, key=lambda r: int(st.start[r])):
        first.setdefault(str(st.names[row]), st.layer_key[row])
    return [key for span, key in first.items() if span in found]


def ancestors(key: str) -> list[str]:
    """The keys of ``key``'s enclosing layers, outermost first, and ``key``."""
    parts = key.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
