"""Summary views: tables computed from a run's event table, one module per family of views.

A view is a function ``view(run, **options) -> DataFrame`` registered through the
``perfkit_register_views`` hook; ``run.summary(name)`` looks it up in ``registry``. The built-in
views live in ``operators`` (operator, user), ``phases`` (model, phases), ``families``
(family), ``overview`` (overview, device), ``kernels`` (kernel), ``memory`` (memcpy, memory;
frees paired with their allocations by ``allocations``), ``timelines`` (memory_timeline,
device_timeline, in slices that line up with the steps), ``steps`` (steps, benchmark),
``roofline``, ``layers`` and ``code``, and are registered by ``builtin``. ``families`` also holds
the op-family rules adapters build on.

What the views build on is grouped by what it models: ``costmodel`` (the op cost model:
canonical ops, shapes, FLOPs and bytes per op category, device peaks), ``anatomy`` (a step's
layer tree and its time by phase, layer and op) and ``multirank`` (combining per-rank tables,
collectives, the distributed and rank views). The names below are the public API, wherever
they live.
"""

from __future__ import annotations

from perfkit_core.views.anatomy.attribution import PHASES, step_slices
from perfkit_core.views.anatomy.structure import SCOPE_CATEGORY
from perfkit_core.views.costmodel.canonical import (
    CANONICAL_FAMILIES,
    LAYER_OPS,
    OpMap,
    Resolver,
    base_name,
    is_gradient,
    layer_type,
)
from perfkit_core.views.costmodel.opcost import (
    MODEL_KINDS,
    OpCall,
    OpCost,
    attention_cost,
    broadcast_shape,
    conv_cost,
    conv_output_spatial,
    copy_cost,
    elementwise_cost,
    embedding_cost,
    gemm_cost,
    matmul_cost,
    norm_cost,
    optimizer_cost,
    pool_cost,
    precision_of,
    reduction_cost,
    rnn_cost,
    softmax_cost,
)
from perfkit_core.views.costmodel.shapes import Inputs, Shape, dtype_bytes, numel, parse_inputs
from perfkit_core.views.families import (
    FAMILIES,
    direction_of,
    family_of,
    family_times,
    normalize,
)
from perfkit_core.views.registry import ViewSpec, get_view, registered_views, summary

__all__ = [
    "CANONICAL_FAMILIES",
    "FAMILIES",
    "LAYER_OPS",
    "MODEL_KINDS",
    "PHASES",
    "SCOPE_CATEGORY",
    "Inputs",
    "OpCall",
    "OpCost",
    "OpMap",
    "Resolver",
    "Shape",
    "ViewSpec",
    "attention_cost",
    "base_name",
    "broadcast_shape",
    "conv_cost",
    "conv_output_spatial",
    "copy_cost",
    "direction_of",
    "dtype_bytes",
    "elementwise_cost",
    "embedding_cost",
    "family_of",
    "family_times",
    "gemm_cost",
    "get_view",
    "is_gradient",
    "layer_type",
    "matmul_cost",
    "norm_cost",
    "normalize",
    "numel",
    "optimizer_cost",
    "parse_inputs",
    "pool_cost",
    "precision_of",
    "reduction_cost",
    "registered_views",
    "rnn_cost",
    "softmax_cost",
    "step_slices",
    "summary",
]
