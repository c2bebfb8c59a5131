"""The structure of a run's host work that attribution builds on: which events are op *units*
(the outermost op of a nest, with everything inside it), which are layer spans and user spans,
each row's enclosing step, and layer keys that line up across frameworks.

- A unit is an outermost op-like event: an operator, a communication or runtime call, a data
  loading span, an optimizer span (not one that runs the model inside it: ``closures``), one
  autograd node (torch's ``autograd::engine::
  evaluate_function: X``) or one Python API entry of Paddle (``X pybind_imperative_func``,
  whose self time is the API's own overhead). Ops nested in a unit are part of it, so
  ``aten::conv2d > convolution > _convolution > mkldnn_convolution`` is one unit.
- A layer span is a torch ``nn.Module: Type_k`` span (kind ``user``: perfkit's torch handler
  records one per module call, ``perfkit_torch.modules``; kind ``python``: torch's Python
  tracer, with ``with_stack``, counted only in runs without the former, which it would double)
  or a Paddle layer forward event (kind ``forward``, named after the class: ``Conv2D``). Its
  key is the path of layer types (``canonical.layer_type``: the class name lower-cased, with
  the names that differ between frameworks aliased) from the outermost layer of its step, each
  with its call ordinal among same-typed siblings in the step (``sequential/conv2d[2]``), which
  is the same for one model written in either framework: module lists are never called, so
  their layers are the children of the layer that calls them.
- A user span is a ``record_function`` / ``RecordEvent`` / ``perfkit_core.annotate`` span.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.model_entries import layer_key
from perfkit_core.events.schema import CodedColumn, coded
from perfkit_core.views.anatomy.closures import optimizer_closures
from perfkit_core.views.costmodel.canonical import layer_type

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

UNIT_KINDS = ("operator", "communication", "runtime", "dataloader", "optimizer")
WRAPPER_SUFFIXES = (" pybind_imperative_func", " pybind_patch_func")
ENGINE_PREFIX = "autograd::engine::evaluate_function: "
LAYER_PREFIX = "nn.Module: "
#: ``category`` of layer spans an adapter derives from its ops' name scopes (TensorFlow's):
#: one call may be several spans (cut where the executor's own spans start or end, or on
#: several threads), which share the call's scope path as ``full_name``.
SCOPE_CATEGORY = "layer scope"


def innermost(parent: np.ndarray, flag: np.ndarray, *, self_too: bool = True) -> np.ndarray:
    """For each row, the nearest ancestor (or the row itself, with ``self_too``) whose ``flag``
    is set; -1 where there is none."""
    return links.nearest_flagged(parent, flag, self_too=self_too)


def outermost(parent: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """For each row, the outermost ancestor-or-self whose ``flag`` is set; -1 where none is."""
    return links.farthest_flagged(parent, flag)


@dataclass
class Structure:
    """Per-row arrays of one run (host rows only are classified; others are False / -1)."""

    host: np.ndarray
    names: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    parent: np.ndarray
    is_unit: np.ndarray
    unit_of: np.ndarray
    is_layer: np.ndarray
    layer_of: np.ndarray
    is_user: np.ndarray
    user_of: np.ndarray
    step_row_of: np.ndarray
    layer_key: dict[int, str]
    layer_label: dict[int, str]
    #: Layer spans an adapter derived from op scopes, each with its call's scope path: the
    #: spans of one path in a step are one call
    layer_call: dict[int, str]
    step_thread: np.ndarray
    #: ``kind`` as codes: ``kinds.among("operator", ...)`` masks rows without comparing strings
    kinds: CodedColumn


def _categories(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, categories as an object array) of a string column, categorical or not."""
    import pandas as pd

    values = column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")
    cats = np.asarray([str(c) for c in values.cat.categories], dtype=object)
    return values.cat.codes.to_numpy(), cats


def _flag(codes: np.ndarray, cats: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
    """``test(name)`` per row, evaluated once per category."""
    per_cat = np.array([bool(test(c)) for c in cats.tolist()] + [False], dtype=bool)
    return per_cat[codes]  # code -1 (missing) reads the trailing False


def structure(run: Run) -> Structure:
    """The run's ``Structure``, computed once and cached on the run."""
    cached = run.cache.get("structure")
    if cached is not None:
        return cached
    ev = run.events
    n = len(ev)
    host = ev["stream"].to_numpy() < 0
    kinds = coded(ev["kind"])
    # Kinds are few: an object array shares their strings (a fixed-width one took 44 bytes a row).
    kind = np.append(np.asarray(kinds.categories, dtype=object), "")[kinds.codes]
    name_codes, name_cats = _categories(ev["name"])
    names = np.append(name_cats, "").astype(object)[name_codes]
    start = ev["start_ns"].to_numpy().astype(np.int64, copy=False)
    end = start + ev["dur_ns"].to_numpy().astype(np.int64, copy=False)
    parent = ev["parent"].to_numpy().astype(np.int64, copy=False)
    layer_name = _flag(name_codes, name_cats, lambda s: s.startswith(LAYER_PREFIX))
    wrapper = kinds.among("other") & _flag(
        name_codes, name_cats, lambda s: s.endswith(WRAPPER_SUFFIXES)
    )
    engine = kinds.among("backward") & _flag(
        name_codes, name_cats, lambda s: s.startswith(ENGINE_PREFIX)
    )
    # an optimizer step that runs the model inside it is no unit: its ops are (``closures``)
    op_like = (
        host
        & (kinds.among(*UNIT_KINDS) | wrapper | engine)
        & ~layer_name
        & ~optimizer_closures(run).closure
    )
    unit_of = np.where(host, outermost(parent, op_like), -1)
    is_unit = op_like & (unit_of == np.arange(n))
    layer_span = host & layer_name & kinds.among("user")
    # torch's Python tracer (``with_stack=True``) records each module call too, around
    # perfkit's span of the same call: its frames are layers only in runs without those spans.
    traced = host & layer_name & kinds.among("python") & ~layer_span.any()
    is_layer = (host & kinds.among("forward")) | layer_span | traced
    is_user = host & kinds.among("user") & ~is_layer
    is_step = host & kinds.among("step")
    # Rows as int32 (a table holds fewer than 2**31 rows): the structure stays cached for the
    # whole report, and half-width row arrays keep its peak memory down.
    unit_of = unit_of.astype(np.int32)
    step_row_of = np.where(host, innermost(parent, is_step), -1).astype(np.int32)
    layer_of = np.where(host, innermost(parent, is_layer), -1).astype(np.int32)
    user_of = np.where(host, innermost(parent, is_user), -1).astype(np.int32)
    layer_call = _scope_calls(ev, is_layer)
    keys, labels = _layer_keys(is_layer, parent, names, start, step_row_of, layer_call)
    import pandas as pd

    threads = pd.MultiIndex.from_arrays([ev["rank"].to_numpy(), ev["tid"].to_numpy()])
    step_thread = host & threads.isin(threads[is_step])
    found = Structure(
        host=host,
        names=names,
        kind=kind,
        start=start,
        end=end,
        parent=parent,
        is_unit=is_unit,
        unit_of=unit_of,
        is_layer=is_layer,
        layer_of=layer_of,
        is_user=is_user,
        user_of=user_of,
        step_row_of=step_row_of,
        layer_key=keys,
        layer_label=labels,
        layer_call=layer_call,
        step_thread=step_thread,
        kinds=kinds,
    )
    run.cache.put("structure", found)
    return found


def _layer_type(name: str) -> tuple[str, str]:
    """(normalized type, display type) of a layer span's name: ``canonical.layer_type`` and the
    class name as recorded (``nn.Module: Conv2d_0`` -> ``("conv2d", "Conv2d")``)."""
    text = name[len(LAYER_PREFIX) :] if name.startswith(LAYER_PREFIX) else name
    if name.startswith(LAYER_PREFIX) and "_" in text and text.rsplit("_", 1)[1].isdigit():
        text = text.rsplit("_", 1)[0]
    return layer_type(name), text


def _scope_calls(ev: pd.DataFrame, is_layer: np.ndarray) -> dict[int, str]:
    """The scope path (``full_name``) of each layer span of category ``SCOPE_CATEGORY``."""
    rows = np.flatnonzero(is_layer & coded(ev["category"]).among(SCOPE_CATEGORY))
    if len(rows) == 0:
        return {}
    full = ev["full_name"].to_numpy()
    return {int(r): str(full[r]) for r in rows.tolist()}


def _layer_keys(
    is_layer: np.ndarray,
    parent: np.ndarray,
    names: np.ndarray,
    start: np.ndarray,
    step_row_of: np.ndarray,
    layer_call: dict[int, str],
) -> tuple[dict[int, str], dict[int, str]]:
    """Key and display label of every layer span: the path of layer types from the outermost
    layer of its step, each with its call ordinal among same-typed siblings (1-based, shown
    only when a type repeats). The spans of one call (``layer_call``) share their ordinal."""
    rows = np.flatnonzero(is_layer)
    if len(rows) == 0:
        return {}, {}
    enclosing = innermost(parent, is_layer, self_too=False)
    rows = rows[np.argsort(start[rows], kind="stable")].tolist()
    keys: dict[int, str] = {}
    slots: dict[int, tuple[int, str, str]] = {}
    counts: dict[tuple[int, str, str], int] = {}
    ordinal_of_call: dict[tuple[tuple[int, str, str], str], int] = {}
    for r in rows:
        up = int(enclosing[r])
        parent_key = keys.get(up, "") if up >= 0 else ""
        kind, _ = _layer_type(str(names[r]))
        slot = (int(step_row_of[r]), parent_key, kind)
        call = layer_call.get(r)
        if call is not None and (slot, call) in ordinal_of_call:
            ordinal = ordinal_of_call[(slot, call)]
        else:
            counts[slot] = counts.get(slot, 0) + 1
            ordinal = counts[slot]
            if call is not None:
                ordinal_of_call[(slot, call)] = ordinal
        slots[r] = slot
        keys[r] = layer_key(parent_key, kind, ordinal)
    labels: dict[int, str] = {}
    for r in rows:
        up = int(enclosing[r])
        _, shown = _layer_type(str(names[r]))
        if counts[slots[r]] > 1:
            shown = f"{shown} {keys[r].rsplit('[', 1)[1].rstrip(']')}"
        labels[r] = f"{labels[up]} / {shown}" if up in labels else shown
    return keys, labels
