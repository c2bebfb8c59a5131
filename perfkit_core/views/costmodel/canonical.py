"""Canonical ops: one name for the same work in every framework, so a torch run and a paddle run
of one model line up op by op.

A canonical op is a lower-case name (``linear``, ``conv``, ``batch_norm``, ``pool``, ``rnn``,
``reshape``, ...) for an op *and its gradient*: ``aten::addmm`` and ``AddmmBackward0`` are both
``linear``; paddle's ``matmul`` + ``add`` inside a ``Linear`` layer are ``linear`` too. The name
of an op is resolved in this order, the first answer winning:

1. the user's op map (``OpMap``, from ``perfkit compare --op-map FILE``): exact native names,
   then normalized ones, then the enclosing layer's type;
2. the enclosing layer (innermost ``nn.Module`` / ``paddle.nn.Layer`` span around a forward op):
   ``LAYER_OPS`` maps known layer types (``Conv2d``/``Conv2D``, ``Linear``, ``LSTM``, ...) to the
   op they compute, so a bias add inside a conv layer counts as that conv on both sides;
3. the run's adapter (``perfkit_canonical_op``), which knows its framework's op names;
4. the framework-neutral fallback: the normalized name, with ``ALIASES`` applied.

Each canonical op has a family (``CANONICAL_FAMILIES``; others are classified by the family
rules of ``perfkit_core.views.families``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from perfkit_core.plugins import framework_hook
from perfkit_core.views.costmodel.family_rules import base_name, family_of, is_gradient, snake

__all__ = [
    "ALIASES",
    "CANONICAL_FAMILIES",
    "LAYER_ALIASES",
    "LAYER_OPS",
    "OpMap",
    "Resolver",
    "base_name",
    "describe",
    "is_gradient",
    "layer_type",
    "snake",
]

#: Canonical op -> family, for the canonical ops adapters produce.
CANONICAL_FAMILIES: dict[str, str] = {
    "linear": "matmul",
    "matmul": "matmul",
    "conv": "conv",
    "batch_norm": "norm",
    "layer_norm": "norm",
    "group_norm": "norm",
    "instance_norm": "norm",
    "rms_norm": "norm",
    "relu": "activation",
    "gelu": "activation",
    "silu": "activation",
    "sigmoid": "activation",
    "tanh": "activation",
    "softmax": "activation",
    "log_softmax": "activation",
    "pool": "pool",
    "rnn": "rnn",
    "embedding": "embedding",
    "dropout": "dropout",
    "attention": "attention",
    "cross_entropy": "loss",
    "nll_loss": "loss",
    "mse_loss": "loss",
    "optimizer step": "optimizer",
    "zero_grad": "optimizer",
    "accumulate_grad": "autograd",
    "grad seed": "autograd",
    "reshape": "layout",
    "transpose": "layout",
    "slice": "layout",
    "stack": "layout",
    "concat": "layout",
    "split": "layout",
    "squeeze": "layout",
    "unsqueeze": "layout",
    "expand": "layout",
    "contiguous": "layout",
    "cast": "memcpy",
    "copy": "memcpy",
    "item": "memcpy",
    "add": "elementwise",
    "subtract": "elementwise",
    "multiply": "elementwise",
    "divide": "elementwise",
    "scale": "elementwise",
    "sqrt": "elementwise",
    "fill": "elementwise",
    "not_equal": "elementwise",
    "mean": "reduction",
    "sum": "reduction",
    "data loading": "data",
}

#: Normalized layer type -> the canonical op every forward op inside such a layer counts as.
LAYER_OPS: dict[str, str] = {
    **{f"conv{d}d": "conv" for d in (1, 2, 3)},
    **{f"conv{d}dtranspose": "conv" for d in (1, 2, 3)},
    **{f"convtranspose{d}d": "conv" for d in (1, 2, 3)},
    "linear": "linear",
    **{f"batchnorm{d}": "batch_norm" for d in ("", "1d", "2d", "3d")},
    "syncbatchnorm": "batch_norm",
    "layernorm": "layer_norm",
    "groupnorm": "group_norm",
    "rmsnorm": "rms_norm",
    "embedding": "embedding",
    "lstm": "rnn",
    "gru": "rnn",
    "rnn": "rnn",
    "simplernn": "rnn",
    "lstmcell": "rnn",
    "grucell": "rnn",
    **{f"{kind}pool{d}d": "pool" for kind in ("max", "avg") for d in (1, 2, 3)},
    **{f"adaptive{kind}pool{d}d": "pool" for kind in ("max", "avg") for d in (1, 2, 3)},
    "dropout": "dropout",
    "dropout2d": "dropout",
    "relu": "relu",
    "gelu": "gelu",
    "silu": "silu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "softmax": "softmax",
    "flatten": "reshape",
    "crossentropyloss": "cross_entropy",
    "nllloss": "nll_loss",
    "mseloss": "mse_loss",
    "multiheadattention": "attention",
}

#: Normalized native name -> canonical op, for names that are not already canonical.
ALIASES: dict[str, str] = {
    "addmm": "linear",
    "mm": "matmul",
    "bmm": "matmul",
    "matmul_v2": "matmul",
    "baddbmm": "matmul",
    "convolution": "conv",
    "_convolution": "conv",
    "conv2d": "conv",
    "conv1d": "conv",
    "conv3d": "conv",
    "depthwise_conv2d": "conv",
    "native_batch_norm": "batch_norm",
    "native_layer_norm": "layer_norm",
    "view": "reshape",
    "_unsafe_view": "reshape",
    "unsafe_view": "reshape",
    "flatten": "reshape",
    "reshape2": "reshape",
    "permute": "transpose",
    "t": "transpose",
    "transpose2": "transpose",
    "select": "slice",
    "narrow": "slice",
    "cat": "concat",
    "chunk": "split",
    "unbind": "split",
    "mul": "multiply",
    "mul_": "multiply",
    "sub": "subtract",
    "div": "divide",
    "add_": "add",
    "elementwise_add": "add",
    "elementwise_mul": "multiply",
    "zero_": "fill",
    "zeros": "fill",
    "fill_": "fill",
    "full": "fill",
    "ones_like": "fill",
    "zeros_like": "fill",
    "_to_copy": "copy",
    "copy_": "copy",
    "to": "cast",
    "_local_scalar_dense": "item",
    "ne": "not_equal",
    "eq": "equal",
    "radd": "add",
    "rsub": "subtract",
    "rmul": "multiply",
    "truediv": "divide",
    "rtruediv": "divide",
    "getitem": "slice",
}


#: Layer class names that differ between frameworks for the same layer, lower-cased: each is
#: read as the other framework's name, so the two runs' layers share a key.
LAYER_ALIASES: dict[str, str] = {
    **{f"conv{d}dtranspose": f"convtranspose{d}d" for d in (1, 2, 3)},  # paddle -> torch
    "simplernn": "rnn",  # paddle's SimpleRNN is torch's RNN
    "simplernncell": "rnncell",
    "distributeddataparallel": "dataparallel",  # torch's DDP wrapper is paddle's DataParallel
    "sequentialcell": "sequential",  # MindSpore's nn.SequentialCell
    "dense": "linear",  # MindSpore's nn.Dense; Keras' and Flax's Dense by their default names
    "layer_normalization": "layernorm",  # Keras' default layer names (perfkit_xla.model)
    "batch_normalization": "batchnorm",
    "re_lu": "relu",
    "softmaxcrossentropywithlogits": "crossentropyloss",  # MindSpore's loss cell
}


def layer_type(name: str) -> str:
    """The normalized type of a layer span: its class name, lower-cased, with ``LAYER_ALIASES``
    applied: ``nn.Module: Conv2d_0`` -> ``conv2d``, ``Conv2D`` -> ``conv2d``,
    ``Conv2DTranspose`` -> ``convtranspose2d``."""
    text = name
    if text.startswith("nn.Module: "):
        text = text[len("nn.Module: ") :]
        text = re.sub(r"_\d+$", "", text)
    text = text.lower()
    return LAYER_ALIASES.get(text, text)


@dataclass
class OpMap:
    """A user's additions to the canonical-op mapping (``perfkit compare --op-map FILE``).

    ``ops[framework][native name] -> canonical op`` (framework ``*`` for every framework; a
    name matches exactly or after ``base_name``); ``layers[layer type] -> canonical op`` (every
    forward op inside such a layer); ``families[canonical op] -> family``.
    """

    ops: dict[str, dict[str, str]] = field(default_factory=dict)
    layers: dict[str, str] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def op(self, name: str, framework: str) -> str | None:
        """The canonical op this map gives ``name``, or None."""
        for table in (self.ops.get(framework, {}), self.ops.get("*", {})):
            if name in table:
                return table[name]
        base = base_name(name)
        for table in (self.ops.get(framework, {}), self.ops.get("*", {})):
            if base in table:
                return table[base]
        return None


class Resolver:
    """Resolves native op names (with their enclosing layer) to canonical ops and families for
    one framework, with the user's ``OpMap``; answers are cached per (name, layer)."""

    def __init__(self, framework: str, op_map: OpMap | None = None) -> None:
        self.framework = framework
        self.op_map = op_map or OpMap()
        self._ops: dict[tuple[str, str | None], str] = {}
        self._families: dict[str, str] = {}
        self._canonical_hook = framework_hook("perfkit_canonical_op", framework)
        self._family_hook = framework_hook("perfkit_op_family", framework)

    def op(self, name: str, layer: str | None = None) -> str:
        """The canonical op of native op ``name`` run inside a layer of type ``layer``."""
        key = (name, layer)
        found = self._ops.get(key)
        if found is None:
            found = self._resolve(name, layer)
            self._ops[key] = found
        return found

    def _resolve(self, name: str, layer: str | None) -> str:
        mapped = self.op_map.op(name, self.framework)
        if mapped:
            return mapped
        if layer is not None:
            mapped = self.op_map.layers.get(layer) or LAYER_OPS.get(layer)
            if mapped:
                return mapped
        mapped = self._canonical_hook(name=name, framework=self.framework)
        if mapped:
            return str(mapped)
        base = base_name(name)
        return ALIASES.get(base, base)

    def family(self, op: str) -> str:
        """The family of canonical op ``op``: the op map's, ``CANONICAL_FAMILIES``, the
        adapter's (``perfkit_op_family``), else the neutral rules (``other`` when none match)."""
        found = self._families.get(op)
        if found is None:
            found = self.op_map.families.get(op) or CANONICAL_FAMILIES.get(op) or ""
            if not found:
                found = self._family_hook(name=op, framework=self.framework) or ""
            if not found:
                found = family_of(op)
            self._families[op] = found
        return found


def describe(op_map: OpMap | None) -> dict[str, Any]:
    """How many entries an op map holds, for notes: ``{"ops": n, "layers": n, "families": n}``."""
    if op_map is None:
        return {"ops": 0, "layers": 0, "families": 0}
    return {
        "ops": sum(len(t) for t in op_map.ops.values()),
        "layers": len(op_map.layers),
        "families": len(op_map.families),
    }
