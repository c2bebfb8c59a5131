"""The performance model of torch ops: which formula (``perfkit_torch.opformulas`` for matrix
ops, ``perfkit_torch.opformulas_memory`` for the rest) each ``aten::`` op and autograd node gets.
``op_cost`` answers the ``perfkit_op_cost`` hook for torch runs; an op it does not know gets no
cost, and the roofline view's note says how much time such ops took.
"""

from __future__ import annotations

from perfkit_core.views import OpCall, OpCost
from perfkit_torch import opformulas as mx
from perfkit_torch import opformulas_memory as mem

#: Elementwise ops: one FLOP per output element.
ELEMENTWISE = (
    *("add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "maximum", "minimum"),
    *("pow", "pow_", "where", "eq", "ne", "lt", "gt", "le", "ge", "relu", "relu_", "gelu"),
    *("gelu_", "silu", "silu_", "sigmoid", "sigmoid_", "tanh", "tanh_", "exp", "exp_", "log"),
    *("log_", "sqrt", "sqrt_", "rsqrt", "rsqrt_", "neg", "neg_", "abs", "abs_", "reciprocal"),
    *("clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "threshold", "threshold_"),
    *("hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "elu", "elu_", "masked_fill"),
    *("masked_fill_", "sign", "floor", "ceil", "round", "nan_to_num", "nan_to_num_", "square"),
    *("erf", "sin", "cos", "bernoulli_", "copysign", "threshold_backward", "gelu_backward"),
    *("sigmoid_backward", "tanh_backward", "silu_backward", "hardtanh_backward"),
    *("leaky_relu_backward", "elu_backward", "native_dropout_backward"),
)
#: Elementwise ops of three FLOPs per element (a product, a scale and a sum).
ELEMENTWISE_3 = ("addcmul", "addcmul_", "addcdiv", "addcdiv_", "lerp", "lerp_")
REDUCTIONS = (
    *("sum", "mean", "amax", "amin", "max", "min", "norm", "var", "std", "logsumexp"),
    *("argmax", "argmin", "prod", "any", "all"),
)
POOLS = (
    *("max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices"),
    *("max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d"),
    *("adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_max_pool2d"),
)
POOL_BACKWARDS = (
    *("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward"),
    *("avg_pool2d_backward", "avg_pool3d_backward", "_adaptive_avg_pool2d_backward"),
    "adaptive_max_pool2d_backward",
)
BATCH_NORMS = (
    *("batch_norm", "native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm"),
    *("_batch_norm_impl_index", "_native_batch_norm_legit"),
    *("_native_batch_norm_legit_no_training", "instance_norm"),
)
FOREACH = (
    *("add", "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "sqrt", "sqrt_", "neg"),
    *("neg_", "zero_", "copy_", "maximum_", "lerp_", "addcmul_", "addcdiv_", "sign", "abs"),
)
_SDPA_FORWARD = (
    *("scaled_dot_product_attention", "_scaled_dot_product_flash_attention"),
    *("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"),
    "_scaled_dot_product_flash_attention_for_cpu",
)
_BOTH_GRADS = ("input_grad", "weight_grad")

#: Formulas by the op's schema name (``aten::`` removed).
FORMULAS: dict[str, mx.Formula] = {
    "mm": mx.mm,
    "addmm": mx.addmm,
    "_addmm_activation": mx.addmm,
    "bmm": mx.bmm,
    "baddbmm": mx.baddbmm,
    "matmul": mx.matmul,
    "linear": mx.linear,
    "mv": mx.mv,
    "_scaled_mm": mx.scaled_mm,
    "einsum": mx.einsum,
    **dict.fromkeys((*mx.CONV_ARGS, *mx.CONV_TRANSPOSE_ARGS), mx.conv_forward),
    "convolution_backward": mx.conv_backward(_BOTH_GRADS, 1, 0, 2, 10),
    "convolution_backward_overrideable": mx.conv_backward(_BOTH_GRADS, 1, 0, 2, 10),
    "cudnn_convolution_backward": mx.conv_backward(_BOTH_GRADS, 0, 1, 2, 10),
    "mkldnn_convolution_backward": mx.conv_backward(_BOTH_GRADS, 0, 1, 2, 7),
    "cudnn_convolution_backward_input": mx.conv_backward(("input_grad",), -1, 1, 2),
    "cudnn_convolution_backward_weight": mx.conv_backward(("weight_grad",), 2, 1, -1),
    "_slow_conv2d_backward": mx.conv_backward(_BOTH_GRADS, 1, 0, 2, 6),
    **dict.fromkeys(_SDPA_FORWARD, mx.sdpa(0, 1, 2, backward=False)),
    "_flash_attention_forward": mx.sdpa(0, 1, 2, backward=False, seq_first=True),
    "_efficient_attention_forward": mx.sdpa(0, 1, 2, backward=False, seq_first=True),
    **dict.fromkeys(
        (f"{name}_backward" for name in _SDPA_FORWARD[1:]), mx.sdpa(1, 2, 3, backward=True)
    ),
    "_flash_attention_backward": mx.sdpa(1, 2, 3, backward=True, seq_first=True),
    "_efficient_attention_backward": mx.sdpa(1, 2, 3, backward=True, seq_first=True),
    "mkldnn_rnn_layer": mx.rnn_layer(),
    "mkldnn_rnn_layer_backward": mx.rnn_layer(backward=True),
    "_cudnn_rnn": mx.rnn_stack(1),
    "_cudnn_rnn_backward": mx.rnn_stack(1, backward=True),
    **dict.fromkeys(("lstm", "gru", "rnn_tanh", "rnn_relu"), mx.rnn_stack(2)),
    **dict.fromkeys(BATCH_NORMS, mem.norm(0, (1, 2, 3, 4))),
    "native_batch_norm_backward": mem.norm(1, (2, 3, 4, 5, 6), backward=True),
    "cudnn_batch_norm_backward": mem.norm(0, (2, 3, 4, 5, 6), backward=True),
    "miopen_batch_norm_backward": mem.norm(0, (2, 3, 4, 5, 6), backward=True),
    "layer_norm": mem.norm(0, (2, 3)),
    "native_layer_norm": mem.norm(0, (2, 3)),
    "native_layer_norm_backward": mem.norm(1, (3, 4, 5, 6), backward=True),
    "group_norm": mem.norm(0, (1, 2)),
    "native_group_norm": mem.norm(0, (1, 2)),
    "native_group_norm_backward": mem.norm(1, (2, 3, 4), backward=True),
    "rms_norm": mem.norm(0, (2,), rms=True),
    "_fused_rms_norm": mem.norm(0, (2,), rms=True),
    "_fused_rms_norm_backward": mem.norm(1, (3,), backward=True, rms=True),
    **dict.fromkeys(("softmax", "_softmax", "log_softmax", "_log_softmax"), mem.softmax()),
    "_softmax_backward_data": mem.softmax(backward=True),
    "_log_softmax_backward_data": mem.softmax(backward=True),
    "embedding": mem.embedding,
    "embedding_dense_backward": mem.embedding_backward,
    "index_select": mem.index_select,
    **dict.fromkeys(ELEMENTWISE, mem.elementwise()),
    **dict.fromkeys(ELEMENTWISE_3, mem.elementwise(3.0)),
    "native_dropout": mem.elementwise(2.0, outputs=2),
    **dict.fromkeys(("fill_", "zero_", "normal_", "uniform_", "random_"), mem.fill),
    "copy_": mem.copy_,
    "_to_copy": mem.to_copy,
    **dict.fromkeys(("clone", "contiguous"), mem.clone),
    **dict.fromkeys(("cat", "_cat", "stack"), mem.cat),
    **dict.fromkeys(REDUCTIONS, mem.reduction(1)),
    **dict.fromkeys(POOLS, mem.pool()),
    **dict.fromkeys(POOL_BACKWARDS, mem.pool(backward=True)),
    **dict.fromkeys(("nll_loss_forward", "nll_loss2d_forward"), mem.nll_loss),
    **dict.fromkeys(("nll_loss_backward", "nll_loss2d_backward"), mem.nll_loss_backward),
    "_fused_adam_": mem.fused_optimizer("adam"),
    "_fused_adamw_": mem.fused_optimizer("adamw"),
    "_fused_adagrad_": mem.fused_optimizer("adagrad"),
    "_fused_sgd_": mem.fused_optimizer("sgd"),
    **{f"_foreach_{op}": mem.foreach() for op in FOREACH},
}


def formula_for(name: str) -> mx.Formula | None:
    """The formula of torch op ``name``: an ``aten::`` op's by its schema name, an autograd
    convolution node's (``ConvolutionBackward0``), None when the model does not know the op."""
    if name.startswith("aten::"):
        return FORMULAS.get(name[6:])
    if mx.CONV_BACKWARD_NODES.search(name) and "::" not in name:
        return mx.conv_node
    return None


def op_cost(call: OpCall) -> OpCost | None:
    """The cost of one call of a torch op (None when the model does not know it or its recorded
    inputs do not fit its schema)."""
    formula = formula_for(call.name)
    if formula is None:
        return None
    try:
        return formula(call)
    except (IndexError, ValueError, ZeroDivisionError, TypeError):
        return None
