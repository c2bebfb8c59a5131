"""Canonical ops and families of MindSpore operator types.

MindSpore names an operator after its primitive (``MatMul``, ``BiasAdd``, ``Conv2D``); a
gradient is a primitive of its own (``BiasAddGrad``, ``ReluGrad``, ``Conv2DBackpropFilter``) or
the forward primitive again under ``Gradients/`` (the gradient of a ``MatMul`` is two
``MatMul``). A gradient takes its forward op's canonical op, so both line up with torch's
``addmm`` and ``AddmmBackward0``.
"""

from __future__ import annotations

import re

from perfkit_mindspore.scopes import OPTIMIZER_TYPES

#: MindSpore operator type -> canonical op (``perfkit_core.views.costmodel.canonical``).
CANONICAL: dict[str, str] = {
    "MatMul": "matmul",
    "MatMulExt": "matmul",
    "BatchMatMul": "matmul",
    "BatchMatMulExt": "matmul",
    "Dense": "linear",
    "BiasAdd": "add",
    "BiasAddGrad": "add",
    "Conv2D": "conv",
    "Conv3D": "conv",
    "Conv2DTranspose": "conv",
    "Conv2DBackpropInput": "conv",
    "Conv2DBackpropFilter": "conv",
    "Conv3DBackpropInput": "conv",
    "Conv3DBackpropFilter": "conv",
    "DepthwiseConv2dNative": "conv",
    "ReLU": "relu",
    "ReluGrad": "relu",
    "ReLU6": "relu",
    "ReLU6Grad": "relu",
    "GeLU": "gelu",
    "GeLUGrad": "gelu",
    "FastGeLU": "gelu",
    "FastGeLUGrad": "gelu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
    "SigmoidGrad": "sigmoid",
    "Tanh": "tanh",
    "TanhGrad": "tanh",
    "Softmax": "softmax",
    "SoftmaxGrad": "softmax",
    "LogSoftmax": "log_softmax",
    "LogSoftmaxGrad": "log_softmax",
    "MaxPool": "pool",
    "MaxPoolGrad": "pool",
    "MaxPoolWithArgmax": "pool",
    "MaxPoolGradWithArgmax": "pool",
    "AvgPool": "pool",
    "AvgPoolGrad": "pool",
    "AdaptiveAvgPool2D": "pool",
    "AdaptiveAvgPool2DGrad": "pool",
    "BatchNorm": "batch_norm",
    "BatchNormGrad": "batch_norm",
    "LayerNorm": "layer_norm",
    "LayerNormGrad": "layer_norm",
    "LayerNormGradGrad": "layer_norm",
    "GroupNorm": "group_norm",
    "RmsNorm": "rms_norm",
    "RmsNormGrad": "rms_norm",
    "SparseSoftmaxCrossEntropyWithLogits": "cross_entropy",
    "SoftmaxCrossEntropyWithLogits": "cross_entropy",
    "CrossEntropy": "cross_entropy",
    "NLLLoss": "nll_loss",
    "NLLLossGrad": "nll_loss",
    "MSELoss": "mse_loss",
    "Dropout": "dropout",
    "DropoutGrad": "dropout",
    "DropoutGenMask": "dropout",
    "DropoutDoMask": "dropout",
    "Gather": "embedding",
    "EmbeddingLookup": "embedding",
    "Reshape": "reshape",
    "Flatten": "reshape",
    "FlattenGrad": "reshape",
    "ExpandDims": "unsqueeze",
    "Squeeze": "squeeze",
    "Transpose": "transpose",
    "Concat": "concat",
    "Split": "split",
    "StridedSlice": "slice",
    "StridedSliceGrad": "slice",
    "Slice": "slice",
    "Tile": "expand",
    "BroadcastTo": "expand",
    "Cast": "cast",
    "Add": "add",
    "AddExt": "add",
    "AddN": "add",
    "Sub": "subtract",
    "SubExt": "subtract",
    "Mul": "multiply",
    "Square": "multiply",
    "RealDiv": "divide",
    "Div": "divide",
    "Sqrt": "sqrt",
    "Rsqrt": "sqrt",
    "Pow": "pow",
    "ReduceMean": "mean",
    "MeanExt": "mean",
    "ReduceSum": "sum",
    "SumExt": "sum",
    "Ones": "fill",
    "Zeros": "fill",
    "OnesLike": "fill",
    "ZerosLike": "fill",
    "Fill": "fill",
    "FillV2": "fill",
    "Assign": "copy",
    "AssignAdd": "add",
    "GetNext": "data loading",
    "InitDataSetQueue": "data loading",
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "AlltoAll": "all_to_all",
    "Send": "send_recv",
    "Receive": "send_recv",
}
#: Canonical ops above whose family the core's table does not give.
FAMILIES: dict[str, str] = {
    "pow": "elementwise",
    "all_reduce": "communication",
    "all_gather": "communication",
    "reduce_scatter": "communication",
    "broadcast": "communication",
    "all_to_all": "communication",
    "send_recv": "communication",
}
_GRAD_RE = re.compile(r"(Grad|GradGrad|Backprop\w*)$")


def canonical_op(name: str) -> str | None:
    """The canonical op of a MindSpore operator type (or full name), None when unknown.

    A gradient primitive not listed (``XGrad``) takes the canonical op of ``X``; an optimizer
    update (``ApplyMomentum``, ``Adam``) is ``optimizer step``."""
    kind = name.rsplit("/", 1)[-1]
    kind = re.sub(r"-op\d+$", "", kind)
    if kind in CANONICAL:
        return CANONICAL[kind]
    if kind in OPTIMIZER_TYPES:
        return "optimizer step"
    base = _GRAD_RE.sub("", kind)
    if base != kind and base in CANONICAL:
        return CANONICAL[base]
    return None


def family(name: str) -> str | None:
    """The family of a canonical op the core does not know (``all_reduce`` -> communication),
    or of a MindSpore operator type; None when unknown."""
    if name in FAMILIES:
        return FAMILIES[name]
    op = canonical_op(name)
    if op is not None:
        return FAMILIES.get(op)
    return None
