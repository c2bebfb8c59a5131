"""The performance model of XLA ops (JAX and TensorFlow): FLOPs and bytes from the input shapes
and dtypes the profile's HLO protos give each op, and the framework operation it came from (the
op's ``origin``: ``dot_general``, ``add``, ``reduce_sum``, ...).

Where the profile carries XLA's own FLOP count (the ``flops`` stat, GPU profiles), perfkit takes
it for ops this model does not know. The HLO protos give no output shapes or dot dimension
numbers, so: a dot's contracted dimension is the one its two operands share (either operand
may come transposed); a fusion of elementwise ops (``multiply_add_fusion``) writes one tensor
of its largest input's shape and performs one FLOP per element for each arithmetic op its name
lists; a reduction writes a tensor too small to count. Convolutions are not modelled (their
layouts are not recorded).
"""

from __future__ import annotations

import re
from math import prod

from perfkit_core.views import (
    OpCall,
    OpCost,
    Shape,
    elementwise_cost,
    gemm_cost,
    numel,
    reduction_cost,
)

#: Words of XLA op and fusion names that are one FLOP per element.
ARITHMETIC = frozenset(
    {
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "exponential", "log",
        "sqrt", "rsqrt", "negate", "power", "tanh", "logistic", "select", "compare", "abs",
        "clamp", "remainder", "sign", "floor", "ceil", "erf", "sine", "cosine",
    }
)  # fmt: skip
_WORD = re.compile(r"[a-z]+")


def _tensors(call: OpCall) -> list[Shape]:
    return [
        s for s in (call.inputs.tensor(i) for i in range(len(call.inputs.shapes))) if s is not None
    ]


def _dtype(call: OpCall) -> str:
    return call.inputs.first_float_dtype() or "float32"


def _dot(call: OpCall) -> OpCost | None:
    """A dot of two operands: the contracted dimension is a size they share (the last of the
    first operand, else any), batch dimensions their equal leading ones."""
    tensors = _tensors(call)
    if len(tensors) < 2:
        return None
    a, b = tensors[0], tensors[1]
    if len(a) < 1 or len(b) < 1:
        return None
    batch: Shape = ()
    while len(a) > 2 and len(b) > 2 and a[0] == b[0]:
        batch, a, b = (*batch, a[0]), a[1:], b[1:]
    candidates = [(i, j) for i in range(len(a)) for j in range(len(b)) if a[i] == b[j]]
    if not candidates:
        return None
    i, _ = max(candidates, key=lambda ij: (ij[0] == len(a) - 1, -ij[1]))
    k = a[i]
    m, n = prod(a) // k, prod(b) // k
    return gemm_cost(m, n, k, _dtype(call), batch=prod(batch) if batch else 1)


def _fusion(call: OpCall, words: list[str]) -> OpCost | None:
    tensors = _tensors(call)
    if not tensors:
        return None
    largest = max(tensors, key=numel)
    dtype = _dtype(call)
    if "reduce" in words:
        return reduction_cost(largest, 1, dtype)
    per = sum(1 for w in words if w in ARITHMETIC) or 1
    cost = elementwise_cost(tensors, dtype, out=largest, flops_per_element=float(per))
    return cost


def op_cost(call: OpCall) -> OpCost | None:
    """The cost of one call of an XLA op, or None when the model does not know it."""
    base = call.name.split(".")[0].lower()
    words = _WORD.findall(base)
    try:
        if base == "dot" or call.origin in ("dot_general", "dot", "matmul", "einsum"):
            return _dot(call)
        if base.startswith(("convolution", "conv")) or call.origin.startswith("conv"):
            return None
        if "fusion" in words or base.startswith("wrapped") or set(words) & ARITHMETIC:
            return _fusion(call, words)
    except (IndexError, ValueError, ZeroDivisionError):
        return None
    return None
