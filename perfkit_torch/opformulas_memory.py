"""Formulas of memory-bound torch ops (elementwise, reductions, normalisations, softmax,
copies, gathers, pooling, losses, optimizer steps) for the performance model; the matrix ops'
are in ``perfkit_torch.opformulas``."""

from __future__ import annotations

from dataclasses import replace
from math import prod

from perfkit_core.views import (
    OpCall,
    OpCost,
    Shape,
    copy_cost,
    elementwise_cost,
    embedding_cost,
    norm_cost,
    numel,
    optimizer_cost,
    pool_cost,
    reduction_cost,
    softmax_cost,
)
from perfkit_torch.opformulas import SCALAR_TYPES, Formula, dtype_of

# ------------------------------------------------------------------ memory-bound ops


def _tensors(c: OpCall) -> list[Shape]:
    return [s for s in (c.inputs.tensor(i) for i in range(len(c.inputs.shapes))) if s is not None]


def elementwise(per: float = 1.0, outputs: int = 1) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        tensors = _tensors(c)
        if not tensors:
            return None
        return elementwise_cost(tensors, dtype_of(c.inputs), flops_per_element=per, outputs=outputs)

    return formula


def fill(c: OpCall) -> OpCost | None:
    x = c.inputs.tensor(0)
    if x is None:
        return None
    return elementwise_cost([], dtype_of(c.inputs), out=x, flops_per_element=0.0, kind="copy")


def copy_(c: OpCall) -> OpCost | None:
    dst, src = c.inputs.tensor(0), c.inputs.tensor(1)
    if dst is None or src is None:
        return None
    return copy_cost(numel(dst), c.inputs.dtype(1) or "float", c.inputs.dtype(0) or "float")


def to_copy(c: OpCall) -> OpCost | None:
    x = c.inputs.tensor(0)
    if x is None:
        return None
    target = SCALAR_TYPES.get(c.inputs.value(1).strip(), "") or c.inputs.dtype(0)
    return copy_cost(numel(x), c.inputs.dtype(0) or "float", target or None)


def clone(c: OpCall) -> OpCost | None:
    x = c.inputs.tensor(0)
    return None if x is None else copy_cost(numel(x), c.inputs.dtype(0) or "float")


def cat(c: OpCall) -> OpCost | None:
    parts = c.inputs.tensor_list(0)
    if parts is None:
        return None
    return copy_cost(sum(numel(p) for p in parts), dtype_of(c.inputs))


def index_select(c: OpCall) -> OpCost | None:
    """A gather of whole rows along ``dim`` (the lookup inside ``aten::embedding``)."""
    x, index = c.inputs.tensor(0), c.inputs.tensor(2)
    dim = c.inputs.ints(1)
    if x is None or index is None or not x or not x[0]:
        return None
    axis = dim[0] % len(x) if dim else 0
    row = numel(x) // max(x[axis], 1)
    return embedding_cost(x[axis], row, numel(index), c.inputs.dtype(2), dtype_of(c.inputs))


def reduction(dims_at: int = 1) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        x = c.inputs.tensor(0)
        if x is None:
            return None
        dims = c.inputs.ints(dims_at) if dims_at >= 0 else None
        if dims is not None and dims and x:
            kept = [d for i, d in enumerate(x) if i not in {a % len(x) for a in dims}]
            out = prod(kept)
        else:
            out = 1
        return reduction_cost(x, out, dtype_of(c.inputs))

    return formula


def norm(
    x_at: int, params: tuple[int, ...], *, backward: bool = False, rms: bool = False
) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        x = c.inputs.tensor(x_at)
        if x is None:
            return None
        extra = sum(numel(c.inputs.tensor(i)) for i in params)
        return norm_cost(x, extra, dtype_of(c.inputs, x_at), backward=backward, rms=rms)

    return formula


def softmax(*, backward: bool = False) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        x = c.inputs.tensor(0)
        return None if x is None else softmax_cost(x, dtype_of(c.inputs), backward=backward)

    return formula


def embedding(c: OpCall) -> OpCost | None:
    w, index = c.inputs.tensor(0), c.inputs.tensor(1)
    if w is None or index is None or len(w) != 2:
        return None
    return embedding_cost(w[0], w[1], numel(index), c.inputs.dtype(1), dtype_of(c.inputs))


def embedding_backward(c: OpCall) -> OpCost | None:
    grad, index = c.inputs.tensor(0), c.inputs.tensor(1)
    rows = c.inputs.ints(2)
    if grad is None or index is None or not grad:
        return None
    table = rows[0] if rows else numel(index)
    return embedding_cost(
        table, grad[-1], numel(index), c.inputs.dtype(1), dtype_of(c.inputs), backward=True
    )


def pool(*, backward: bool = False) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        first = c.inputs.tensor(0)
        if first is None:
            return None
        if backward:  # (grad_output, input, ...)
            x = c.inputs.tensor(1)
            return None if x is None else pool_cost(x, first, 1, dtype_of(c.inputs), backward=True)
        kernel = c.inputs.ints(1)
        window = prod(kernel) if kernel else 1
        return pool_cost(first, _grad_shape_any(c.paired, len(first)), window, dtype_of(c.inputs))

    return formula


def _grad_shape_any(call: OpCall | None, rank: int) -> Shape | None:
    if call is None:
        return None
    shape = call.inputs.tensor(0)
    return shape if shape is not None and len(shape) == rank else None


def nll_loss(c: OpCall) -> OpCost | None:
    """The negative log-likelihood: one element of ``x`` gathered (and added) per target."""
    x, target = c.inputs.tensor(0), c.inputs.tensor(1)
    if x is None or target is None:
        return None
    dtype = dtype_of(c.inputs)
    cost = embedding_cost(numel(x), 1, numel(target), c.inputs.dtype(1), dtype)
    return OpCost(float(numel(target)), cost.bytes, "loss", cost.precision)


def nll_loss_backward(c: OpCall) -> OpCost | None:
    x, target = c.inputs.tensor(1), c.inputs.tensor(2)
    if x is None or target is None:
        return None
    return elementwise_cost(
        [target], dtype_of(c.inputs, 1), out=x, flops_per_element=0.0, kind="loss"
    )


# ------------------------------------------------------------------ optimizers


_LIST_DTYPE = "the dtype of a tensor list is not recorded: fp32 assumed"


def fused_optimizer(algorithm: str) -> Formula:
    """A fused optimizer step (``_fused_adam_``): the parameter list's elements."""

    def formula(c: OpCall) -> OpCost | None:
        params = c.inputs.tensor_list(0)
        if params is None:
            return None
        cost = optimizer_cost(sum(numel(p) for p in params), algorithm, "float")
        return replace(cost, assumed="; ".join(a for a in (cost.assumed, _LIST_DTYPE) if a))

    return formula


def foreach(per: float = 1.0) -> Formula:
    """A multi-tensor elementwise op (``_foreach_add_``): ``per`` FLOPs per element of its
    first list; each tensor list read, the result written."""

    def formula(c: OpCall) -> OpCost | None:
        lists = [c.inputs.tensor_list(i) for i in range(len(c.inputs.shapes))]
        found = [x for x in lists if x]
        if not found:
            return None
        elems = sum(numel(s) for s in found[0])
        nbytes = float((len(found) + 1) * elems * 4)
        return OpCost(per * elems, nbytes, "optimizer", "fp32", assumed=_LIST_DTYPE)

    return formula
