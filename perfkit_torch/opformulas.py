"""Formulas of torch's matrix ops (matrix products, convolutions, attention, recurrent layers)
for the performance model (``perfkit_torch.opcosts`` says which op gets which; the memory-bound
ops' are in ``perfkit_torch.opformulas_memory``): each reads an op's recorded inputs (Kineto's ``Input Dims``, ``Input type`` and
``Concrete Inputs``, in the order of the op's schema) and returns a ``perfkit_core`` cost.

Where a convolution's stride and padding were not recorded (traces older than torch 2.1 have
no ``Concrete Inputs``), the output size comes from the gradient op paired with it (its
``grad_output`` has the output's shape); a gradient op whose inputs were not all recorded takes
the shapes of the op it runs inside, or of the forward op it differentiates. What is still
unknown is assumed, and the cost says so (``OpCost.assumed``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from math import prod

from perfkit_core.views import (
    Inputs,
    OpCall,
    OpCost,
    Shape,
    attention_cost,
    conv_cost,
    conv_output_spatial,
    gemm_cost,
    matmul_cost,
    numel,
    rnn_cost,
)

Formula = Callable[[OpCall], "OpCost | None"]

#: torch's ScalarType numbers (``Concrete Inputs`` of ``dtype`` arguments) -> dtype names.
SCALAR_TYPES = {
    "0": "unsigned char",
    "1": "signed char",
    "2": "short int",
    "3": "int",
    "4": "long int",
    "5": "c10::Half",
    "6": "float",
    "7": "double",
    "11": "bool",
    "15": "c10::BFloat16",
    "23": "c10::Float8_e5m2",
    "24": "c10::Float8_e4m3fn",
}


def dtype_of(inputs: Inputs, i: int = 0) -> str:
    """The dtype of input ``i``, else of the first floating-point tensor input, else ``float``."""
    found = inputs.dtype(i)
    if found in ("", "TensorList", "Scalar", "ScalarList", "GenericList"):
        found = inputs.first_float_dtype()
    return found or "float"


def aten(name: str) -> str:
    """``aten::_convolution`` -> ``_convolution``: the op's schema name (other names as they are)."""
    return name[6:] if name.startswith("aten::") else name


# ------------------------------------------------------------------ matrix products


def mm(c: OpCall) -> OpCost | None:
    a, b = c.inputs.tensor(0), c.inputs.tensor(1)
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    return gemm_cost(a[0], b[1], a[1], dtype_of(c.inputs))


def addmm(c: OpCall) -> OpCost | None:
    bias, a, b = c.inputs.tensor(0), c.inputs.tensor(1), c.inputs.tensor(2)
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    return gemm_cost(a[0], b[1], a[1], dtype_of(c.inputs, 1), bias=numel(bias))


def bmm(c: OpCall) -> OpCost | None:
    a, b = c.inputs.tensor(0), c.inputs.tensor(1)
    if a is None or b is None or len(a) != 3 or len(b) != 3 or a[2] != b[1] or a[0] != b[0]:
        return None
    return gemm_cost(a[1], b[2], a[2], dtype_of(c.inputs), batch=a[0])


def baddbmm(c: OpCall) -> OpCost | None:
    bias, a, b = c.inputs.tensor(0), c.inputs.tensor(1), c.inputs.tensor(2)
    if a is None or b is None or len(a) != 3 or len(b) != 3 or a[2] != b[1]:
        return None
    return gemm_cost(a[1], b[2], a[2], dtype_of(c.inputs, 1), batch=a[0], bias=numel(bias))


def matmul(c: OpCall) -> OpCost | None:
    a, b = c.inputs.tensor(0), c.inputs.tensor(1)
    if a is None or b is None:
        return None
    return matmul_cost(a, b, dtype_of(c.inputs))


def linear(c: OpCall) -> OpCost | None:
    x, w, bias = c.inputs.tensor(0), c.inputs.tensor(1), c.inputs.tensor(2)
    if x is None or w is None or len(w) != 2:
        return None
    return matmul_cost(x, (w[1], w[0]), dtype_of(c.inputs), bias=numel(bias))


def mv(c: OpCall) -> OpCost | None:
    a, v = c.inputs.tensor(0), c.inputs.tensor(1)
    if a is None or v is None or len(a) != 2:
        return None
    return gemm_cost(a[0], 1, a[1], dtype_of(c.inputs))


def scaled_mm(c: OpCall) -> OpCost | None:
    found = mm(c)
    if found is None:
        return None
    return OpCost(found.flops, found.bytes, "gemm", "fp8", found.gemm, 1)


_EINSUM_RE = re.compile(r"^\s*([a-zA-Z]+)\s*,\s*([a-zA-Z]+)\s*->\s*([a-zA-Z]*)\s*$")


def einsum(c: OpCall) -> OpCost | None:
    """A two-operand einsum whose equation was recorded: 2 FLOPs per point of the joint index
    space (a contraction is a GEMM over it)."""
    match = _EINSUM_RE.match(c.inputs.value(0).strip('"'))
    operands = c.inputs.tensor_list(1)
    if match is None or operands is None or len(operands) != 2:
        return None
    sizes: dict[str, int] = {}
    for letters, shape in zip(match.groups()[:2], operands, strict=True):
        if len(letters) != len(shape):
            return None
        for letter, dim in zip(letters, shape, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), dim)
    out = prod(sizes[x] for x in match.group(3))
    contracted = [x for x in sizes if x not in match.group(3)]
    k = prod(sizes[x] for x in contracted)
    dtype = dtype_of(c.inputs, 1)
    cost = gemm_cost(out, 1, k, dtype)
    nbytes = (numel(operands[0]) + numel(operands[1]) + out) * (cost.bytes / max(out + k + out, 1))
    return OpCost(2.0 * out * k, nbytes, "gemm", cost.precision, None, 1)


# ------------------------------------------------------------------ convolutions

#: Forward convolutions: name -> (position of stride, padding, dilation, transposed (None: not
#: transposed), groups), from the op's schema.
CONV_ARGS: dict[str, tuple[int, int, int, int | None, int]] = {
    "conv1d": (3, 4, 5, None, 6),
    "conv2d": (3, 4, 5, None, 6),
    "conv3d": (3, 4, 5, None, 6),
    "convolution": (3, 4, 5, 6, 8),
    "_convolution": (3, 4, 5, 6, 8),
    "convolution_overrideable": (3, 4, 5, 6, 8),
    "cudnn_convolution": (3, 2, 4, None, 5),
    "mkldnn_convolution": (4, 3, 5, None, 6),
    "miopen_convolution": (4, 3, 5, None, 6),
    "cudnn_convolution_relu": (3, 4, 5, None, 6),
    "cudnn_convolution_add_relu": (5, 6, 7, None, 8),
    "_slow_conv2d_forward": (4, 5, -1, None, -1),
    "thnn_conv2d": (4, 5, -1, None, -1),
    "_conv_depthwise2d": (4, 5, 6, None, -1),
    "slow_conv_dilated2d": (4, 5, 6, None, -1),
}
#: Transposed convolutions: name -> (stride, padding, output_padding, groups, dilation).
CONV_TRANSPOSE_ARGS: dict[str, tuple[int, int, int, int, int]] = {
    "conv_transpose1d": (3, 4, 5, 6, 7),
    "conv_transpose2d": (3, 4, 5, 6, 7),
    "conv_transpose3d": (3, 4, 5, 6, 7),
    "cudnn_convolution_transpose": (4, 2, 3, 6, 5),
}
CONV_BACKWARD_NODES = re.compile(r"Conv.*Backward|Convolution.*Backward|ConvDepthwise.*Backward")


def _ints(inputs: Inputs, i: int, dims: int, default: int) -> tuple[int, ...] | None:
    if i < 0:
        return (default,) * dims
    found = inputs.ints(i)
    if found is None:
        return None
    if len(found) == 1 and dims > 1:
        found = found * dims
    return found if len(found) == dims else None


def _grad_shape(call: OpCall | None, c_out: int, rank: int) -> Shape | None:
    """The output gradient a convolution's gradient op recorded (its first tensor input, shaped
    like the forward's output), when ``call`` is one."""
    if call is None or (
        not CONV_BACKWARD_NODES.search(call.name) and "convolution_backward" not in call.name
    ):
        return None
    for i in range(len(call.inputs.shapes)):
        shape = call.inputs.tensor(i)
        if shape is not None and len(shape) == rank and shape[1] == c_out:
            return shape
    return None


def conv_forward(c: OpCall) -> OpCost | None:
    name = aten(c.name)
    x, w = c.inputs.tensor(0), c.inputs.tensor(1)
    if x is None or w is None or len(x) != len(w) or len(x) < 3:
        return None
    dims = len(x) - 2
    dtype = dtype_of(c.inputs)
    if name in CONV_TRANSPOSE_ARGS:
        s, p, op, g, d = CONV_TRANSPOSE_ARGS[name]
        stride, padding = _ints(c.inputs, s, dims, 1), _ints(c.inputs, p, dims, 0)
        out_pad, dil = _ints(c.inputs, op, dims, 0), _ints(c.inputs, d, dims, 1)
        groups = (c.inputs.ints(g) or (1,))[0]
        assumed = ""
        if None in (stride, padding, out_pad, dil):
            stride, padding, out_pad, dil = (1,) * dims, (0,) * dims, (0,) * dims, (1,) * dims
            assumed = "stride, padding and dilation not recorded: assumed 1, 0 and 1"
        out = tuple(
            (i - 1) * s_ - 2 * p_ + d_ * (k - 1) + o + 1
            for i, k, s_, p_, d_, o in zip(x[2:], w[2:], stride, padding, dil, out_pad, strict=True)  # type: ignore[arg-type]
        )
        return conv_cost(x, w, out, dtype, transposed=True, groups=groups, assumed=assumed)
    s, p, d, t, _g = CONV_ARGS[name]
    if t is not None and c.inputs.flag(t):
        return None  # a transposed convolution through aten::convolution: its own entry point
    stride, padding, dil = (
        _ints(c.inputs, s, dims, 1),
        _ints(c.inputs, p, dims, 0),
        _ints(c.inputs, d, dims, 1),
    )
    if c.inputs.value(p).strip('"') == "same":
        padding = tuple((k - 1) // 2 for k in w[2:])
    if stride is not None and padding is not None and dil is not None:
        return conv_cost(x, w, conv_output_spatial(x[2:], w[2:], stride, padding, dil), dtype)
    grad = _grad_shape(c.paired, w[0], len(x))
    if grad is not None:
        return conv_cost(x, w, grad[2:], dtype)
    same = tuple(x[2:])
    return conv_cost(
        x,
        w,
        same,
        dtype,
        assumed="stride and padding not recorded: assumed stride 1, 'same' padding",
    )


def _conv_shapes(
    c: OpCall, x_at: int, grad_at: int, w_at: int
) -> tuple[Shape, Shape, Shape] | None:
    """(input, weight, output gradient) of a convolution gradient op, from its own inputs, the
    op it runs inside, or the forward op it differentiates."""
    x, grad, w = c.inputs.tensor(x_at), c.inputs.tensor(grad_at), c.inputs.tensor(w_at)
    for other in (c.parent, c.paired, c.parent.paired if c.parent else None):
        if (x is not None and w is not None) or other is None:
            continue
        name = aten(other.name)
        if name in CONV_ARGS or name in CONV_TRANSPOSE_ARGS:
            x, w = x or other.inputs.tensor(0), w or other.inputs.tensor(1)
        elif name == "convolution_backward":
            x, w = x or other.inputs.tensor(1), w or other.inputs.tensor(2)
        elif name in ("cudnn_convolution_backward", "mkldnn_convolution_backward"):
            x, w = x or other.inputs.tensor(0), w or other.inputs.tensor(2)
    if x is None or w is None or grad is None or len(x) != len(w) or len(grad) != len(x):
        return None
    return x, w, grad


def conv_backward(
    parts: tuple[str, ...], x_at: int, grad_at: int, w_at: int, mask_at: int = -1
) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        found = _conv_shapes(c, x_at, grad_at, w_at)
        if found is None:
            return None
        x, w, grad = found
        dtype = dtype_of(c.inputs, grad_at)
        mask = c.inputs.flags(mask_at) if mask_at >= 0 else None
        chosen = list(parts)
        assumed = ""
        if mask is not None and len(mask) >= 2:
            chosen = [
                p for p, on in zip(("input_grad", "weight_grad"), mask[:2], strict=True) if on
            ]
        elif mask_at >= 0 or len(parts) > 1:
            assumed = "which gradients were computed not recorded: assumed input and weight"
        transposed = bool(c.inputs.flag(7)) if aten(c.name) == "convolution_backward" else False
        total: OpCost | None = None
        for part in chosen:
            cost = conv_cost(
                x, w, grad[2:], dtype, part=part, transposed=transposed, assumed=assumed
            )
            total = cost if total is None else total.plus(cost)
            assumed = ""
        return total or OpCost(0.0, 0.0, "conv", "")

    return formula


def conv_node(c: OpCall) -> OpCost | None:
    """An autograd convolution node (``ConvolutionBackward0``) with no costed op inside it: its
    forward op's input and weight, its own output gradient."""
    return conv_backward(("input_grad", "weight_grad"), -1, 0, -1)(c)


# ------------------------------------------------------------------ attention


def sdpa(q_at: int, k_at: int, v_at: int, *, backward: bool, seq_first: bool = False) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        q, k, v = c.inputs.tensor(q_at), c.inputs.tensor(k_at), c.inputs.tensor(v_at)
        if q is None or k is None or v is None:
            return None
        if seq_first and len(q) == 4:  # (B, S, H, D) -> (B, H, S, D)
            q, k, v = ((s[0], s[2], s[1], s[3]) for s in (q, k, v))
        return attention_cost(q, k, v, dtype_of(c.inputs, q_at), backward=backward)

    return formula


# ------------------------------------------------------------------ recurrent layers


def rnn_layer(*, backward: bool = False) -> Formula:
    def formula(c: OpCall) -> OpCost | None:
        x, w_ih, w_hh = c.inputs.tensor(0), c.inputs.tensor(1), c.inputs.tensor(2)
        if x is None or w_ih is None or w_hh is None or len(x) != 3:
            return None
        hidden = w_hh[1]
        return rnn_cost(
            x[0],
            x[1],
            w_ih[1],
            hidden,
            w_ih[0] // max(hidden, 1),
            dtype_of(c.inputs),
            backward=backward,
        )

    return formula


def rnn_stack(weights_at: int, *, backward: bool = False) -> Formula:
    """``aten::lstm``/``_cudnn_rnn``: every (w_ih, w_hh) pair of the weight list over the
    input's time steps and batch."""

    def formula(c: OpCall) -> OpCost | None:
        x, weights = c.inputs.tensor(0), c.inputs.tensor_list(weights_at)
        if x is None or weights is None or len(x) != 3:
            return None
        mats = [w for w in weights if len(w) == 2]
        total: OpCost | None = None
        for w_ih, w_hh in zip(mats[0::2], mats[1::2], strict=False):
            hidden = w_hh[1]
            cost = rnn_cost(
                x[0],
                x[1],
                w_ih[1],
                hidden,
                w_ih[0] // max(hidden, 1),
                dtype_of(c.inputs),
                backward=backward,
            )
            total = cost if total is None else total.plus(cost)
        return total

    return formula
