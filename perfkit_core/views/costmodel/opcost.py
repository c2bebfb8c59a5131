"""The performance model of one op: the floating-point operations it performs and the bytes it
moves to and from device memory, from its input shapes and dtypes (and convolution or attention
parameters where the profiler recorded them).

The formulas here are framework-neutral; which formula an op gets, and from which of its inputs,
is said by the adapter of its framework (and by any plugin) through the ``perfkit_op_cost`` hook,
which receives an ``OpCall`` and returns an ``OpCost``. The conventions, shared by every formula:

- A multiply-add is 2 FLOPs. A GEMM of (M x K) by (K x N) is ``2*M*N*K`` FLOPs; the bias add of
  ``addmm``/``linear`` is not counted, as neither torch's profiler (``with_flops``) nor
  ``torch.utils.flop_counter.FlopCounterMode`` counts it.
- A convolution is the GEMM it amounts to: ``2 * N * prod(output spatial) * C_out * C_in/groups
  * prod(kernel)`` for the forward, the same for the input gradient and for the weight
  gradient (bias ignored), as both reference counters do.
- Attention is its two batched GEMMs (scores and context), ``2*B*H*Sq*Sk*(D + Dv)`` forward,
  ``2*B*H*Sq*Sk*(3*D + 2*Dv)`` backward (the scores recomputed), causal masks ignored: the
  FLOPs FlopCounterMode counts.
- Memory-bound ops count one FLOP per output element (elementwise, including transcendental
  functions), per input element (reductions), or the documented few per element (norms:
  ``NORM_FORWARD_FLOPS``; softmax: ``SOFTMAX_FORWARD_FLOPS``; optimizers:
  ``OPTIMIZER_FLOPS``); copies and gathers none.
- Bytes are each input read once and each output written once (the ideal traffic: caches
  that re-read nothing); a parameter or statistic vector smaller than the data is counted
  too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from perfkit_core.views.costmodel.shapes import DTYPE_PRECISION, Inputs, Shape, dtype_bytes, numel

#: The kinds of op the model knows; ``MODEL_KINDS`` are those whose FLOPs count as the model's
#: (matrix math: what model FLOPs utilisation is about).
KINDS = (
    "gemm",
    "conv",
    "attention",
    "rnn",
    "norm",
    "softmax",
    "elementwise",
    "reduction",
    "pool",
    "embedding",
    "optimizer",
    "loss",
    "copy",
    "other",
)
MODEL_KINDS = ("gemm", "conv", "attention", "rnn")
#: FLOPs per element of a normalisation (forward: mean 1, variance 3, normalise 2, scale and
#: shift 2; backward: the input gradient 8, the scale and shift gradients 3).
NORM_FORWARD_FLOPS = 8
NORM_BACKWARD_FLOPS = 11
#: RMS normalisation: forward square 1, sum 1, scale 2; backward 7.
RMS_FORWARD_FLOPS = 4
RMS_BACKWARD_FLOPS = 7
#: FLOPs per element of softmax (max 1, subtract 1, exp 1, sum 1, divide 1) and its gradient
#: (multiply 1, sum 1, subtract 1, multiply 1).
SOFTMAX_FORWARD_FLOPS = 5
SOFTMAX_BACKWARD_FLOPS = 4
#: FLOPs per parameter of one optimizer step, and the parameter-sized tensors it reads and
#: writes (Adam: moments 7, update 4, weight decay 1; reads param, grad, two moments, writes
#: param and two moments. SGD with momentum: 4; reads param, grad, buffer, writes param and
#: buffer).
OPTIMIZER_FLOPS: dict[str, tuple[int, int]] = {
    "adam": (12, 7),
    "adamw": (12, 7),
    "adagrad": (6, 5),
    "rmsprop": (8, 5),
    "sgd": (4, 5),
    "lamb": (16, 7),
}


@dataclass(frozen=True)
class OpCall:
    """One recorded call of an op, what a formula reads: its ``name`` as recorded, its
    ``inputs``, the op it ran inside (``parent``, None at the top of an op nest) and the op
    it is paired with (``paired``: for a gradient op the forward op it differentiates, for a
    forward op its gradient op; the first op of the paired nest that recorded shapes; None
    when unknown), the run's ``framework``, and ``origin``: the innermost frame of the
    recorded stack (for an XLA op, the framework operation it came from: ``dot_general``,
    ``conv_general_dilated``; ``""`` when none was recorded)."""

    name: str
    inputs: Inputs
    framework: str = ""
    parent: OpCall | None = None
    paired: OpCall | None = None
    origin: str = ""


@dataclass(frozen=True)
class OpCost:
    """What one call of an op costs: ``flops`` (FLOP), ``bytes`` (B read and written in device
    memory, NaN when unknown), the ``kind`` of op (one of ``KINDS``), the ``precision`` its
    math runs in (``fp32``, ``bf16``, ...; ``""`` for integer or copy work), the GEMM it is or
    amounts to (``gemm``: (M, N, K), with ``batch`` GEMMs of that size) and what the formula
    had to assume (``assumed``, empty when it assumed nothing)."""

    flops: float
    bytes: float
    kind: str = "other"
    precision: str = ""
    gemm: tuple[int, int, int] | None = None
    batch: int = 1
    assumed: str = ""

    def plus(self, other: OpCost) -> OpCost:
        """This cost and ``other`` together (the first's kind, precision and GEMM)."""
        assumed = "; ".join(a for a in (self.assumed, other.assumed) if a)
        return replace(
            self, flops=self.flops + other.flops, bytes=self.bytes + other.bytes, assumed=assumed
        )


def precision_of(dtype: str) -> str:
    """``fp32``, ``fp16``, ``bf16``, ``fp8``, ``fp64`` for a floating-point dtype name, else ``""``."""
    return DTYPE_PRECISION.get(dtype.strip(), "")


def _size(dtype: str) -> int:
    return dtype_bytes(dtype) or 4


def gemm_cost(
    m: int,
    n: int,
    k: int,
    dtype: str,
    *,
    batch: int = 1,
    a_batched: bool = True,
    b_batched: bool = True,
    bias: int = 0,
    out_dtype: str | None = None,
) -> OpCost:
    """A (batched) GEMM of (M x K) by (K x N), ``batch`` times: ``2*batch*M*N*K`` FLOPs; bytes:
    A, B (each once, or once per batch when ``*_batched``), the output and ``bias`` elements."""
    size = _size(dtype)
    a = m * k * (batch if a_batched else 1)
    b = k * n * (batch if b_batched else 1)
    out = m * n * batch
    nbytes = (a + b + bias) * size + out * _size(out_dtype or dtype)
    return OpCost(
        2.0 * batch * m * n * k, float(nbytes), "gemm", precision_of(dtype), (m, n, k), batch
    )


def matmul_cost(a: Shape, b: Shape, dtype: str, *, bias: int = 0) -> OpCost | None:
    """``torch.matmul`` semantics for shapes ``a`` and ``b`` (1-d vectors, 2-d matrices,
    batched and broadcast): the GEMM it runs. None when the shapes do not multiply."""
    if not a or not b:
        return None
    a2 = (1, a[0]) if len(a) == 1 else a
    b2 = (b[0], 1) if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    if k != k2:
        return None
    a_batch, b_batch = a2[:-2], b2[:-2]
    if not b_batch:
        # (..., M, K) x (K, N): one GEMM of (prod(...)*M, K) x (K, N)
        return gemm_cost(prod(a_batch) * m, n, k, dtype, bias=bias)
    batch = _broadcast(a_batch, b_batch)
    if batch is None:
        return None
    return gemm_cost(
        m,
        n,
        k,
        dtype,
        batch=prod(batch),
        a_batched=prod(a_batch) > 1,
        b_batched=prod(b_batch) > 1,
        bias=bias,
    )


def _broadcast(a: Shape, b: Shape) -> Shape | None:
    out = []
    for x, y in zip(
        reversed((1,) * (len(b) - len(a)) + a), reversed((1,) * (len(a) - len(b)) + b), strict=True
    ):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def broadcast_shape(shapes: list[Shape]) -> Shape | None:
    """The shape the tensors of ``shapes`` broadcast to, None when they do not."""
    out: Shape = ()
    for shape in shapes:
        found = _broadcast(out, shape)
        if found is None:
            return None
        out = found
    return out


def conv_output_spatial(
    spatial: Shape, kernel: Shape, stride: Shape, padding: Shape, dilation: Shape
) -> Shape:
    """The output's spatial size of a convolution (integer arithmetic, as torch computes it)."""
    return tuple(
        (i + 2 * p - d * (k - 1) - 1) // s + 1
        for i, k, s, p, d in zip(spatial, kernel, stride, padding, dilation, strict=True)
    )


def conv_cost(
    x: Shape,
    w: Shape,
    out_spatial: Shape,
    dtype: str,
    *,
    part: str = "forward",
    transposed: bool = False,
    groups: int = 1,
    assumed: str = "",
) -> OpCost:
    """One convolution pass (``part``: ``forward``, ``input_grad`` or ``weight_grad``) of input
    ``x`` (N, C_in, *spatial), weight ``w`` (C_out, C_in/groups, *kernel); transposed: (C_in,
    C_out/groups, *kernel)) and output spatial size ``out_spatial``. FLOPs: ``2 * N *
    prod(output spatial) * w[0] * w[1] * prod(kernel)`` for each part (a transposed convolution
    counts its input's spatial size instead, as FlopCounterMode does). Bytes: the part's two
    operands and its result. ``gemm`` is the implicit GEMM (N*prod(spatial), C_out,
    C_in/groups*prod(kernel))."""
    size = _size(dtype)
    n = x[0]
    kernel = w[2:]
    spatial = x[2:] if transposed else out_spatial
    flops = 2.0 * n * prod(spatial) * w[0] * w[1] * prod(kernel)
    c_out = w[1] * groups if transposed else w[0]
    in_elems = prod(x)
    out_elems = n * c_out * prod(out_spatial)
    operands = in_elems + prod(w) + out_elems  # every part reads two of them and writes one
    gemm = (n * prod(spatial), c_out, (w[0] if transposed else w[1]) * prod(kernel))
    return OpCost(flops, float(operands * size), "conv", precision_of(dtype), gemm, 1, assumed)


def attention_cost(
    q: Shape, k: Shape, v: Shape, dtype: str, *, backward: bool = False
) -> OpCost | None:
    """Scaled dot-product attention of query (B, H, Sq, D), key (B, Hkv, Sk, D), value (B, Hkv,
    Sk, Dv) (3-d shapes read as one head): FLOPs as in the module docstring; bytes: q, k, v and
    the output (backward: also the output gradient read and the q, k, v gradients written),
    the scores never stored (flash and memory-efficient kernels keep them on chip)."""
    q4, k4, v4 = (s if len(s) == 4 else (s[0], 1, *s[1:]) for s in (q, k, v))
    if len(q4) != 4 or len(k4) != 4 or len(v4) != 4:
        return None
    b, h, sq, d = q4
    sk, dv = k4[2], v4[3]
    size = _size(dtype)
    out = b * h * sq * dv
    io = prod(q4) + prod(k4) + prod(v4)
    if backward:
        flops = 2.0 * b * h * sq * sk * (3 * d + 2 * dv)
        nbytes = (2 * io + 2 * out) * size
    else:
        flops = 2.0 * b * h * sq * sk * (d + dv)
        nbytes = (io + out) * size
    return OpCost(flops, float(nbytes), "attention", precision_of(dtype), (sq, sk, d), b * h)


def elementwise_cost(
    inputs: list[Shape],
    dtype: str,
    *,
    out: Shape | None = None,
    flops_per_element: float = 1.0,
    outputs: int = 1,
    kind: str = "elementwise",
) -> OpCost | None:
    """An elementwise op over tensors ``inputs`` (broadcast): ``flops_per_element`` per output
    element; bytes: every input read once, ``outputs`` outputs of the broadcast shape (or
    ``out``) written."""
    shape = out if out is not None else broadcast_shape(inputs)
    if shape is None:
        return None
    size = _size(dtype)
    elems = numel(shape)
    nbytes = (sum(numel(s) for s in inputs) + outputs * elems) * size
    return OpCost(flops_per_element * elems, float(nbytes), kind, precision_of(dtype))


def reduction_cost(x: Shape, out_elems: int, dtype: str, *, kind: str = "reduction") -> OpCost:
    """A reduction of ``x`` to ``out_elems`` elements: one FLOP per input element; bytes: the
    input read and the output written."""
    size = _size(dtype)
    return OpCost(float(numel(x)), float((numel(x) + out_elems) * size), kind, precision_of(dtype))


def norm_cost(
    x: Shape, params: int, dtype: str, *, backward: bool = False, rms: bool = False
) -> OpCost:
    """A normalisation (batch, layer, group, instance or RMS) of ``x`` with ``params``
    scale/shift/statistics elements: FLOPs per element as ``NORM_*_FLOPS`` (``RMS_*``); bytes:
    forward reads x and writes y, backward reads x and dy and writes dx (plus the parameters,
    read and, backward, their gradients written)."""
    size = _size(dtype)
    elems = numel(x)
    if rms:
        per = RMS_BACKWARD_FLOPS if backward else RMS_FORWARD_FLOPS
    else:
        per = NORM_BACKWARD_FLOPS if backward else NORM_FORWARD_FLOPS
    tensors = 3 if backward else 2
    nbytes = (tensors * elems + (2 if backward else 1) * params) * size
    return OpCost(float(per * elems), float(nbytes), "norm", precision_of(dtype))


def softmax_cost(x: Shape, dtype: str, *, backward: bool = False) -> OpCost:
    """Softmax (or log-softmax) over ``x``: ``SOFTMAX_*_FLOPS`` per element; bytes: forward
    reads x and writes y, backward reads y and dy and writes dx."""
    size = _size(dtype)
    elems = numel(x)
    per = SOFTMAX_BACKWARD_FLOPS if backward else SOFTMAX_FORWARD_FLOPS
    tensors = 3 if backward else 2
    return OpCost(float(per * elems), float(tensors * elems * size), "softmax", precision_of(dtype))


def embedding_cost(
    rows: int, dim: int, index_elems: int, index_dtype: str, dtype: str, *, backward: bool = False
) -> OpCost:
    """An embedding lookup of ``index_elems`` indices into a table of ``rows`` x ``dim``: no
    FLOPs; bytes: the indices, the rows gathered and the output written. Backward (dense):
    the indices and the output gradient read, the whole table's gradient written (zeroed and
    accumulated into, as a dense embedding gradient is)."""
    size = _size(dtype)
    index_bytes = index_elems * _size(index_dtype)
    if backward:
        nbytes = index_bytes + index_elems * dim * size + rows * dim * size
        return OpCost(float(index_elems * dim), float(nbytes), "embedding", precision_of(dtype))
    nbytes = index_bytes + 2 * index_elems * dim * size
    return OpCost(0.0, float(nbytes), "embedding", precision_of(dtype))


def copy_cost(elems: int, src_dtype: str, dst_dtype: str | None = None) -> OpCost:
    """A copy (or cast) of ``elems`` elements: no FLOPs; bytes read and written."""
    nbytes = elems * (_size(src_dtype) + _size(dst_dtype or src_dtype))
    return OpCost(0.0, float(nbytes), "copy", "")


def optimizer_cost(params: int, algorithm: str, dtype: str) -> OpCost:
    """One optimizer step over ``params`` parameters of ``algorithm`` (a key of
    ``OPTIMIZER_FLOPS``; unknown ones count as SGD): FLOPs and parameter-sized tensors read and
    written as ``OPTIMIZER_FLOPS`` says."""
    flops, tensors = OPTIMIZER_FLOPS.get(algorithm, OPTIMIZER_FLOPS["sgd"])
    assumed = "" if algorithm in OPTIMIZER_FLOPS else f"{algorithm!r} costed as SGD"
    return OpCost(
        float(flops * params),
        float(tensors * params * _size(dtype)),
        "optimizer",
        precision_of(dtype),
        assumed=assumed,
    )


def rnn_cost(
    steps: int,
    batch: int,
    input_size: int,
    hidden: int,
    gates: int,
    dtype: str,
    *,
    backward: bool = False,
) -> OpCost:
    """One recurrent layer over ``steps`` time steps: the gate GEMMs, ``2 * steps * batch *
    gates*hidden * (input_size + hidden)`` FLOPs (LSTM: 4 gates, GRU: 3, plain RNN: 1), twice
    that for the backward (input and weight gradients); bytes: the input sequence, the weights
    and the output sequence (backward: their gradients too)."""
    size = _size(dtype)
    flops = 2.0 * steps * batch * gates * hidden * (input_size + hidden)
    weights = gates * hidden * (input_size + hidden + 2)
    io = steps * batch * (input_size + hidden)
    nbytes = (io + weights) * size * (2 if backward else 1)
    gemm = (steps * batch, gates * hidden, input_size + hidden)
    return OpCost(flops * (2 if backward else 1), float(nbytes), "rnn", precision_of(dtype), gemm)


def pool_cost(
    x: Shape, out: Shape | None, kernel: int, dtype: str, *, backward: bool = False
) -> OpCost:
    """Pooling of ``x`` into ``out`` with windows of ``kernel`` elements: ``kernel`` FLOPs per
    output element (compare or add); bytes: the input and the output (backward: the output
    gradient read, the input gradient written). Without ``out`` (output size not recorded),
    one FLOP per input element and the output's bytes are not counted."""
    size = _size(dtype)
    if out is None:
        return OpCost(
            float(numel(x)),
            float(numel(x) * size * (1 if not backward else 2)),
            "pool",
            precision_of(dtype),
            assumed="output size not recorded: output bytes not counted",
        )
    return OpCost(
        float(kernel * numel(out)),
        float((numel(x) + numel(out)) * size),
        "pool",
        precision_of(dtype),
    )
