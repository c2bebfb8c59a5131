"""Canonical ops and families of XLA op names (HLO instructions) and TensorFlow op types.

XLA names an op after its HLO opcode with a ``.N`` suffix for repeats (``dot.3``,
``convolution.1``, ``all-reduce.2``) and a fusion after the ops it fuses (``add_reduce_fusion``,
``broadcast_multiply_fusion.4``, ``fusion.12``). XLA:CPU names its YNNPACK fusions, which wrap
dots, ``ynn_fusion``. TensorFlow ops are ``scope/name:Type``; the type decides.
"""

from __future__ import annotations

import re

_SUFFIX_RE = re.compile(r"(\.\d+)+$")

#: HLO opcode (or XLA:CPU fusion name) -> canonical op.
HLO_CANONICAL: dict[str, str] = {
    "dot": "matmul",
    "dot_general": "matmul",
    "ynn_fusion": "matmul",
    "cublas-gemm": "matmul",
    "custom-call": "custom call",
    "convolution": "conv",
    "cudnn-conv": "conv",
    "reduce": "sum",
    "reduce-window": "pool",
    "select-and-scatter": "pool",
    "all-reduce": "all_reduce",
    "all-gather": "all_gather",
    "reduce-scatter": "reduce_scatter",
    "all-to-all": "all_to_all",
    "collective-permute": "send_recv",
    "transpose": "transpose",
    "reshape": "reshape",
    "bitcast": "reshape",
    "copy": "copy",
    "copy-start": "copy",
    "copy-done": "copy",
    "slice": "slice",
    "dynamic-slice": "slice",
    "dynamic-update-slice": "slice",
    "concatenate": "concat",
    "broadcast": "expand",
    "convert": "cast",
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "divide": "divide",
    "sqrt": "sqrt",
    "rsqrt": "sqrt",
    "maximum": "maximum",
    "exponential": "exp",
    "log": "log",
    "tanh": "tanh",
    "logistic": "sigmoid",
    "select": "where",
    "rng": "random",
    "rng-bit-generator": "random",
    "gather": "gather",
    "scatter": "scatter",
    "sort": "sort",
    "iota": "fill",
    "constant": "fill",
}

#: Canonical ops the core's tables do not list -> family.
XLA_FAMILIES: dict[str, str] = {
    "all_reduce": "communication",
    "all_gather": "communication",
    "reduce_scatter": "communication",
    "all_to_all": "communication",
    "send_recv": "communication",
    "custom call": "other",
    "maximum": "elementwise",
    "exp": "elementwise",
    "log": "elementwise",
    "where": "elementwise",
    "random": "elementwise",
    "gather": "layout",
    "scatter": "layout",
    "sort": "other",
    "fusion": "elementwise",
}

#: TensorFlow op type -> canonical op.
TF_CANONICAL: dict[str, str] = {
    "MatMul": "matmul",
    "BatchMatMul": "matmul",
    "BatchMatMulV2": "matmul",
    "BatchMatMulV3": "matmul",
    "_FusedMatMul": "linear",
    "Conv2D": "conv",
    "Conv3D": "conv",
    "DepthwiseConv2dNative": "conv",
    "_FusedConv2D": "conv",
    "Conv2DBackpropInput": "conv",
    "Conv2DBackpropFilter": "conv",
    "FusedBatchNormV3": "batch_norm",
    "FusedBatchNormGradV3": "batch_norm",
    "Relu": "relu",
    "ReluGrad": "relu",
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "SparseSoftmaxCrossEntropyWithLogits": "cross_entropy",
    "SoftmaxCrossEntropyWithLogits": "cross_entropy",
    "MaxPool": "pool",
    "MaxPoolGrad": "pool",
    "AvgPool": "pool",
    "AvgPoolGrad": "pool",
    "BiasAdd": "add",
    "BiasAddGrad": "sum",
    "AddV2": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "RealDiv": "divide",
    "Sum": "sum",
    "Mean": "mean",
    "Reshape": "reshape",
    "Transpose": "transpose",
    "ConcatV2": "concat",
    "Cast": "cast",
    "ResourceApplyAdam": "optimizer step",
    "ResourceApplyGradientDescent": "optimizer step",
    "ResourceApplyMomentum": "optimizer step",
    "ResourceApplyKerasMomentum": "optimizer step",
    "AssignAddVariableOp": "optimizer step",
    "IteratorGetNext": "data loading",
    "NcclAllReduce": "all_reduce",
    "CollectiveReduceV2": "all_reduce",
    "_Recv": "send_recv",
    "_Send": "send_recv",
}

#: Elementwise HLO opcodes a fusion may be named after; a fusion of these alone is elementwise.
_FUSION_PARTS_RE = re.compile(r"[a-z]+(?:-[a-z]+)*")


def hlo_base(name: str) -> str:
    """An XLA op name without its ``.N`` suffix: ``dot.3`` -> ``dot``, ``wrapped_reduce.10``
    -> ``reduce`` (XLA:CPU wraps lone ops as ``wrapped_<op>``)."""
    base = _SUFFIX_RE.sub("", name.strip())
    return base.removeprefix("wrapped_")


def tf_type(name: str) -> str | None:
    """The op type of a TensorFlow op name ``scope/name:Type``, or None."""
    if ":" in name:
        op_type = name.rsplit(":", 1)[1]
        if op_type[:1].isupper() or op_type.startswith("_"):
            return op_type
    return None


#: Keras layer and loss scopes (``dense_3``, ``layer_normalization_1``) -> the canonical op
#: every op inside computes, forward and backward (``gradient_tape/...``) alike.
KERAS_SCOPES: dict[str, str] = {
    "dense": "linear",
    "einsum_dense": "linear",
    "conv1d": "conv",
    "conv2d": "conv",
    "conv3d": "conv",
    "depthwise_conv2d": "conv",
    "separable_conv2d": "conv",
    "conv2d_transpose": "conv",
    "layer_normalization": "layer_norm",
    "batch_normalization": "batch_norm",
    "group_normalization": "group_norm",
    "embedding": "embedding",
    "lstm": "rnn",
    "gru": "rnn",
    "simple_rnn": "rnn",
    "multi_head_attention": "attention",
    "max_pooling2d": "pool",
    "average_pooling2d": "pool",
    "global_average_pooling2d": "pool",
    "dropout": "dropout",
    "relu": "relu",
    "softmax": "softmax",
    "sparse_categorical_crossentropy": "cross_entropy",
    "categorical_crossentropy": "cross_entropy",
    "binary_crossentropy": "cross_entropy",
    "mean_squared_error": "mse_loss",
}
#: Optimizer scopes: every op inside is the optimizer step.
OPTIMIZER_SCOPES = frozenset(
    {"adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "lamb", "lion"}
)
_SCOPE_SUFFIX_RE = re.compile(r"(_\d+)+$")


def scope_base(scope: str) -> str:
    """A name scope without the numeric suffixes Keras, Flax and TensorFlow add to tell scopes
    apart (``dense_1_2`` -> ``dense``, ``Dense_0`` -> ``Dense``); a name of suffixes only stays
    as it is."""
    return _SCOPE_SUFFIX_RE.sub("", scope) or scope


_MKL_RE = re.compile(r"^_(MklNative|Mkl)?(Fused)?")


def tf_canonical_op(name: str, op_type: str) -> str | None:
    """The canonical op of TensorFlow op ``name`` of type ``op_type``: its optimizer, loss or
    Keras layer scope first (every op of a ``layer_normalization`` is ``layer_norm``), else its
    type (oneDNN's ``_MklMatMul`` and ``_MklNativeFusedMatMul`` as ``MatMul``)."""
    scopes = [scope_base(part).lower() for part in name.split(":")[0].split("/")]
    if any(part in OPTIMIZER_SCOPES for part in scopes[:-1]):
        return "optimizer step"
    for part in reversed(scopes[:-1]):
        if part in KERAS_SCOPES:
            return KERAS_SCOPES[part]
    if op_type in TF_CANONICAL:
        return TF_CANONICAL[op_type]
    plain = _MKL_RE.sub("", op_type)
    return TF_CANONICAL.get(plain) or TF_CANONICAL.get(f"_Fused{plain}")


def canonical_op(name: str) -> str | None:
    """The canonical op of an XLA or TensorFlow op name; None when the name is not one."""
    op_type = tf_type(name)
    if op_type is not None:
        return tf_canonical_op(name, op_type)
    base = hlo_base(name)
    if base in HLO_CANONICAL:
        return HLO_CANONICAL[base]
    if base.endswith("fusion"):
        return _fusion_op(base)
    return None


def _fusion_op(base: str) -> str:
    """The canonical op of a fusion named after what it fuses: its most telling part (a dot or
    convolution first, then a reduction), else ``fusion`` (elementwise work)."""
    parts = base.removesuffix("fusion").replace("_", " ").split()
    for wanted, op in (
        (("dot", "gemm", "ynn"), "matmul"),
        (("convolution", "conv"), "conv"),
        (("all-reduce",), "all_reduce"),
        (("reduce-window",), "pool"),
        (("reduce",), "sum"),
    ):
        if any(p in wanted for p in parts):
            return op
    return "fusion"


def family(name: str) -> str | None:
    """The family of a canonical op the core does not know (``all_reduce`` -> communication,
    ``fusion`` -> elementwise), or of an XLA/TensorFlow op name; None when unknown."""
    if name in XLA_FAMILIES:
        return XLA_FAMILIES[name]
    op = canonical_op(name)
    if op is not None:
        return XLA_FAMILIES.get(op)
    return None
