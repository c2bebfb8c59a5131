"""Layer spans of a TensorFlow run, from its ops' name scopes.

TensorFlow's profiler records no event per Keras layer call, but every op of a ``tf.function``
is named after the name scopes it was built in, and Keras opens one per model and per layer:

- ``StatefulPartitionedCall/sequential_1/dense_1/BiasAdd:_MklNativeFusedMatMul``: an op of
  layer ``dense_1`` of model ``sequential_1`` (the function-call wrappers in front are not
  scopes of the model);
- ``StatefulPartitionedCall/gradient_tape/sequential_1/dense_1/MatMul:MatMul``: its gradient;
- ``StatefulPartitionedCall/adam/...``, ``compile_loss/...``: the optimizer and the loss, no
  layer.

perfkit takes the first scope as the model and the second as its layer (deeper scopes, such as
``moments`` inside a ``layer_normalization``, are the layer's own ops): per host thread, each
run of consecutive ops of one model is a ``forward`` span named after the model, and each run
of consecutive ops of one layer inside it a ``forward`` span named after the layer, both with
their numeric suffixes removed (``sequential``, ``dense``: a layer's type, as the layer keys of
``perfkit_core.views.anatomy.structure`` need). TensorFlow's executor runs a step's ops in pieces
(``ExecutorState::Process`` spans) and on several threads, so one layer call can be several
spans: they share the scope path as ``full_name`` and category ``layer scope``, which makes them
one call. Variable reads (``ReadVariableOp``), which the executor runs as soon as it can, start
no span. Each gradient op is linked (``forward_op``) to the latest op before it of the layer it
differentiates.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from perfkit_core.views import SCOPE_CATEGORY
from perfkit_xla.ops import OPTIMIZER_SCOPES, scope_base

__all__ = ["SCOPE_CATEGORY", "parse", "scope_spans"]

#: Leading components that are function-call wrappers, not scopes of the model.
_WRAPPER_RE = re.compile(r"^(Stateful)?PartitionedCall(_\d+)?$|^__inference_")
#: First scopes that are not a model: the loss and metrics Keras computes beside it.
NOT_MODELS = frozenset({"compile_loss", "compile_metrics", "loss", "metrics"})
#: Op types that read or hold variables: scheduled early, they start no span.
READS = frozenset({"ReadVariableOp", "VarHandleOp", "_ReadVariablesOp"})


def parse(name: str) -> tuple[str, str, str, bool]:
    """(model scope, layer scope, op type, is a gradient op) of a TF op name; empty scopes
    when the op is outside a model (or is the optimizer's or the loss's)."""
    path, _, op_type = name.rpartition(":")
    parts = path.split("/")[:-1]  # the last part is the op's own name
    while parts and _WRAPPER_RE.match(parts[0]):
        parts = parts[1:]
    gradient = bool(parts) and parts[0] == "gradient_tape"
    if gradient:
        parts = parts[1:]
    if not parts or parts[0] in NOT_MODELS:
        return "", "", op_type, gradient
    if any(scope_base(p).lower() in OPTIMIZER_SCOPES for p in parts):
        return "", "", op_type, gradient
    return parts[0], parts[1] if len(parts) > 1 else "", op_type, gradient


def _segments(start: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> Any:
    """For ops starting at ``start`` (one thread), the number of other spans' boundaries
    (``b_start``, ``b_end``) at or before each op's start: a span must not cross one."""
    bounds = np.sort(np.concatenate([b_start, b_end]))
    return np.searchsorted(bounds, start, side="right")


def _runs(
    ops: list[tuple[int, tuple[str, str, str, bool], int]],
    start: np.ndarray,
    end: np.ndarray,
    thread: int,
    *,
    level: int,
) -> list[tuple[str, str, int, int, int]]:
    """The spans of one thread's ops (row, parsed name, segment; in time order) at ``level``
    (1: models, 2: layers): each run of consecutive ops of one scope within one segment."""
    out: list[tuple[str, str, int, int, int]] = []
    current: tuple[str, ...] = ()
    first = last_end = seg = -1
    for row, (model, layer, op_type, gradient), segment in ops:
        key: tuple[str, ...] = ()
        if model and not gradient and (level == 1 or layer):
            key = (model,) if level == 1 else (model, layer)
        if key and key == current and segment == seg:
            last_end = max(last_end, int(end[row]))
            continue
        if op_type in READS and key == current:
            continue  # a read of the current scope in another piece: no new span
        if current:
            out.append((scope_base(current[-1]), "/".join(current), first, last_end, thread))
        current, seg = (), -1
        if key and op_type not in READS:
            current, seg = key, segment
            first, last_end = int(start[row]), int(end[row])
    if current:
        out.append((scope_base(current[-1]), "/".join(current), first, last_end, thread))
    return out


def scope_spans(
    names: list[str],
    op_rows: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    tid: np.ndarray,
    other_rows: np.ndarray,
) -> tuple[list[tuple[str, str, int, int, int]], dict[int, int]]:
    """The layer spans of TF ops ``op_rows`` (``names`` their names, in that order; ``start``,
    ``dur``, ``tid`` per row of the table), cut wherever another host span of the thread
    (``other_rows``: rows that are not TF ops and not inside one) starts or ends: (name,
    full name, start, end, tid) per span, models first; and row -> forward row links for
    gradient ops."""
    distinct: dict[str, tuple[str, str, str, bool]] = {}  # ops repeat their names every step
    parsed = [distinct[n] if n in distinct else distinct.setdefault(n, parse(n)) for n in names]
    spans: list[tuple[str, str, int, int, int]] = []
    layers: list[tuple[str, str, int, int, int]] = []
    end = start + dur
    order = np.lexsort((start[op_rows], tid[op_rows]))
    rows = op_rows[order]
    info = [parsed[i] for i in order.tolist()]
    o_tid = tid[other_rows]
    for thread in np.unique(tid[rows]).tolist():
        mine = np.flatnonzero(tid[rows] == thread)
        theirs = other_rows[o_tid == thread]
        segment = _segments(start[rows[mine]], start[theirs], end[theirs])
        ops = [
            (int(rows[i]), info[i], int(seg))
            for i, seg in zip(mine.tolist(), segment.tolist(), strict=True)
        ]
        spans += _runs(ops, start, end, thread, level=1)
        layers += _runs(ops, start, end, thread, level=2)
    links: dict[int, int] = {}
    latest: dict[tuple[str, str], int] = {}
    for i in np.argsort(start[op_rows], kind="stable").tolist():
        r = int(op_rows[i])
        model, layer, op_type, gradient = parsed[i]
        if not model:
            continue
        if not gradient and op_type not in READS:
            latest[(model, layer)] = r
        elif gradient and (model, layer) in latest:
            links[r] = latest[(model, layer)]
    return spans + layers, links
