"""The performance model of Paddle ops: which ``perfkit_core`` formula each op gets, and from
which of its recorded inputs. Paddle records an operator's inputs by name (``{"x": [[16, 32]],
"y": [[32, 8]]}``; legacy ops write ``X``, ``Input``, ``Filter``, ``Out@GRAD``), so inputs are
looked up by their names, in any case. Paddle's CPU build records no shapes at all: its ops get
no cost, and the roofline view says why.

Paddle records no attributes with the shapes (a matmul's ``transpose_x``, a convolution's
strides), so: a matmul's orientation is the one whose inner dimensions agree (a transposed
operand when only that fits); a convolution's output size is its gradient op's output
gradient's (the pair found by ``perfkit_core``), else stride 1 and 'same' padding, which the
cost then says it assumed.
"""

from __future__ import annotations

from collections.abc import Callable

from perfkit_core.views import (
    OpCall,
    OpCost,
    Shape,
    attention_cost,
    base_name,
    conv_cost,
    copy_cost,
    dtype_bytes,
    elementwise_cost,
    embedding_cost,
    is_gradient,
    matmul_cost,
    norm_cost,
    numel,
    optimizer_cost,
    pool_cost,
    reduction_cost,
    softmax_cost,
)


def _get(c: OpCall, *names: str) -> Shape | None:
    """The shape of the first recorded input named one of ``names`` (any case)."""
    lowered = {k.lower(): k for k in c.inputs.lists}
    for name in names:
        key = lowered.get(name.lower())
        if key is not None and c.inputs.lists[key]:
            return c.inputs.lists[key][0]
    return None


def _dtype(c: OpCall, *names: str) -> str:
    lowered = {n.lower(): i for i, n in enumerate(c.inputs.names)}
    for name in names:
        i = lowered.get(name.lower())
        if i is not None and c.inputs.dtype(i):
            return c.inputs.dtype(i)
    return c.inputs.first_float_dtype() or "float32"


_X = ("x", "input", "logits")
_Y = ("y", "filter", "w")
_GRAD = ("out_grad", "out@grad", "output@grad", "y_grad", "y@grad", "grad_out", "dout")


def _oriented(x: Shape, y: Shape) -> tuple[Shape, Shape] | None:
    """``x`` and ``y`` as ``matmul`` multiplies them: as recorded, else with the last two
    dimensions of one (or both) swapped, whichever makes the inner dimensions agree."""

    def t(s: Shape) -> Shape:
        return (*s[:-2], s[-1], s[-2]) if len(s) >= 2 else s

    for a, b in ((x, y), (x, t(y)), (t(x), y), (t(x), t(y))):
        if len(a) >= 1 and len(b) >= 1 and a[-1] == (b[-2] if len(b) >= 2 else b[0]):
            return a, b
    return None


def _matmul(c: OpCall, grad: bool) -> OpCost | None:
    x, y = _get(c, *_X), _get(c, *_Y)
    if x is None or y is None:
        return None
    oriented = _oriented(x, y)
    if oriented is None:
        return None
    cost = matmul_cost(*oriented, _dtype(c, *_X))
    if cost is None or not grad:
        return cost
    # dx = dout @ y^T and dy = x^T @ dout: two GEMMs the forward's size; x, y and dout read,
    # dx and dy written.
    out = cost.gemm[0] * cost.gemm[1] * cost.batch if cost.gemm else 0
    nbytes = (2 * numel(x) + 2 * numel(y) + out) * (dtype_bytes(_dtype(c, *_X)) or 4)
    return OpCost(2 * cost.flops, float(nbytes), "gemm", cost.precision, cost.gemm, cost.batch)


def _conv(c: OpCall, grad: bool) -> OpCost | None:
    x, w = _get(c, "input", "x"), _get(c, "filter", "weight")
    if (x is None or w is None) and c.paired is not None:
        x, w = x or _get(c.paired, "input", "x"), w or _get(c.paired, "filter", "weight")
    if x is None or w is None or len(x) != len(w):
        return None
    dtype = _dtype(c, "input", "x")
    out = _get(c, *_GRAD) if grad else (_get(c.paired, *_GRAD) if c.paired else None)
    groups = max(x[1] // max(w[1], 1), 1)
    if out is None or len(out) != len(x):
        assumed = "strides and paddings not recorded: assumed stride 1, 'same' padding"
        spatial = x[2:]
    else:
        assumed, spatial = "", out[2:]
    if not grad:
        return conv_cost(x, w, spatial, dtype, groups=groups, assumed=assumed)
    first = conv_cost(x, w, spatial, dtype, part="input_grad", groups=groups, assumed=assumed)
    return first.plus(conv_cost(x, w, spatial, dtype, part="weight_grad", groups=groups))


def _norm(c: OpCall, grad: bool, rms: bool = False) -> OpCost | None:
    x = _get(c, *_X)
    if x is None:
        return None
    params = sum(numel(_get(c, n)) for n in ("scale", "bias", "mean", "variance"))
    return norm_cost(x, params, _dtype(c, *_X), backward=grad, rms=rms)


def _softmax(c: OpCall, grad: bool) -> OpCost | None:
    x = _get(c, "x", "out", "logits", *_GRAD)
    return None if x is None else softmax_cost(x, _dtype(c, "x", "out", "logits"), backward=grad)


def _elementwise(c: OpCall, grad: bool) -> OpCost | None:
    shapes = [
        s for s in (c.inputs.lists.get(n, (None,))[0] for n in c.inputs.names) if s is not None
    ]
    if not shapes:
        return None
    return elementwise_cost(shapes, _dtype(c, *_X), outputs=2 if grad else 1)


def _reduction(c: OpCall, grad: bool) -> OpCost | None:
    x = _get(c, *_X)
    if x is None:
        return None
    if grad:
        return elementwise_cost([], _dtype(c, *_X), out=x, flops_per_element=1.0)
    return reduction_cost(x, 1, _dtype(c, *_X))


def _embedding(c: OpCall, grad: bool) -> OpCost | None:
    ids, w = _get(c, "x", "ids"), _get(c, "weight", "w")
    if ids is None or w is None or len(w) != 2:
        return None
    return embedding_cost(
        w[0], w[1], numel(ids), _dtype(c, "x", "ids"), _dtype(c, "weight", "w"), backward=grad
    )


def _attention(c: OpCall, grad: bool) -> OpCost | None:
    q, k, v = _get(c, "q", "query"), _get(c, "k", "key"), _get(c, "v", "value")
    if q is None or k is None or v is None or len(q) != 4:
        return None
    # Paddle's flash attention takes (batch, seq, heads, dim).
    q, k, v = ((s[0], s[2], s[1], s[3]) for s in (q, k, v))
    return attention_cost(q, k, v, _dtype(c, "q", "query"), backward=grad)


def _optimizer(algorithm: str) -> Callable[[OpCall, bool], OpCost | None]:
    def formula(c: OpCall, grad: bool) -> OpCost | None:
        params = c.inputs.lists.get("param") or c.inputs.lists.get("Param")
        if not params:
            return None
        return optimizer_cost(sum(numel(p) for p in params), algorithm, _dtype(c, "param"))

    return formula


def _pool(c: OpCall, grad: bool) -> OpCost | None:
    x = _get(c, *_X)
    if x is None:
        return None
    out = _get(c, *_GRAD) if grad else (_get(c.paired, *_GRAD) if c.paired else None)
    return pool_cost(x, out, 1, _dtype(c, *_X), backward=grad)


def _cast(c: OpCall, grad: bool) -> OpCost | None:
    x = _get(c, *_X)
    return None if x is None else copy_cost(numel(x), _dtype(c, *_X))


#: Formulas by the op's base name (``matmul`` for ``matmul dygraph``, ``matmul_grad`` and
#: ``Global_MatmulGradNode``), each called with the call and whether it is the gradient.
FORMULAS: dict[str, Callable[[OpCall, bool], OpCost | None]] = {
    **dict.fromkeys(("matmul", "matmul_v2", "mul", "fc", "linear", "bmm"), _matmul),
    **dict.fromkeys(("conv2d", "conv3d", "depthwise_conv2d", "conv1d"), _conv),
    **dict.fromkeys(
        ("batch_norm", "sync_batch_norm", "layer_norm", "group_norm", "instance_norm"), _norm
    ),
    "rms_norm": lambda c, grad: _norm(c, grad, rms=True),
    **dict.fromkeys(("softmax", "log_softmax", "cross_entropy_with_softmax"), _softmax),
    **dict.fromkeys(
        (
            "add",
            "subtract",
            "multiply",
            "divide",
            "elementwise_add",
            "elementwise_sub",
            "elementwise_mul",
            "elementwise_div",
            "relu",
            "gelu",
            "sigmoid",
            "tanh",
            "silu",
            "swish",
            "scale",
            "exp",
            "sqrt",
            "rsqrt",
            "pow",
            "maximum",
            "minimum",
            "dropout",
            "where",
            "leaky_relu",
            "square",
            "clip",
        ),
        _elementwise,
    ),
    **dict.fromkeys(
        ("sum", "mean", "reduce_sum", "reduce_mean", "mean_all", "max", "reduce_max"), _reduction
    ),
    **dict.fromkeys(("embedding", "lookup_table_v2", "c_embedding"), _embedding),
    **dict.fromkeys(
        ("flash_attn", "flash_attn_unpadded", "memory_efficient_attention"), _attention
    ),
    **dict.fromkeys(("pool2d", "pool3d", "max_pool2d_with_index"), _pool),
    **dict.fromkeys(("cast", "assign", "copy_to"), _cast),
    **{name: _optimizer(name) for name in ("adam", "adamw", "sgd", "rmsprop", "lamb")},
    "momentum": _optimizer("sgd"),
}


def op_cost(call: OpCall) -> OpCost | None:
    """The cost of one call of a Paddle op (None when the model does not know it, or its shapes
    were not recorded)."""
    if not call.inputs.lists:
        return None
    formula = FORMULAS.get(base_name(call.name).removesuffix("_"))
    if formula is None:
        return None
    try:
        return formula(call, is_gradient(call.name) or call.name.split(" ")[0].endswith("_grad"))
    except (IndexError, ValueError, ZeroDivisionError, TypeError):
        return None
