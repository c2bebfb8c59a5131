"""The family rules: which family a canonical or native op name belongs to, framework-neutral.

``FAMILIES`` lists them; ``family_of`` applies ordered patterns to a normalized name (the first
match wins, so specific families come before general ones); adapters refine it through
``perfkit_op_family``. Used by ``perfkit_core.views.costmodel.canonical`` and the ``family`` view.
"""

from __future__ import annotations

import re

FAMILIES: tuple[str, ...] = (
    "matmul",
    "conv",
    "norm",
    "activation",
    "pool",
    "rnn",
    "attention",
    "embedding",
    "dropout",
    "layout",
    "elementwise",
    "reduction",
    "loss",
    "optimizer",
    "autograd",
    "memcpy",
    "communication",
    "runtime",
    "data",
    "overhead",
    "unattributed",
    "other",
)
#: Families that have no forward/backward direction.
UNDIRECTED = frozenset({"data", "optimizer", "unattributed"})

#: Ordered (family, pattern) rules on a lower-cased op name with framework decorations removed;
#: the first match wins, so specific families come before general ones.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern))
    for family, pattern in (
        ("attention", r"attention|attn|sdpa|flash"),
        ("autograd", r"accumulate_?grad|gradnodeaccumulation|grad seed"),
        (
            "loss",
            r"cross_?entropy|nll_?loss|mse_?loss|l1_?loss|smooth_l1|bce|softmax_with_cross|log_?softmax|kl_?div|loss",
        ),
        # Before the optimizer: embedding lookups with a fused optimizer update (FBGEMM's
        # split_embedding_codegen_lookup_rowwise_adagrad_function and its backward node) are
        # embedding work run in the forward and backward passes, not the optimizer step.
        ("embedding", r"embedding|lookup_table|split_lookup|gather_nd|index_select"),
        ("optimizer", r"adam|sgd|momentum|lamb|rmsprop|adagrad|lars|optimizer|_foreach_"),
        ("rnn", r"\blstm|\bgru\b|\brnn|rnn_tanh|rnn_relu|lstm_cell|gru_cell"),
        ("pool", r"pool"),
        ("dropout", r"dropout|bernoulli"),
        ("conv", r"conv|cudnn_convolution|depthwise"),
        ("matmul", r"matmul|\bmm\b|addmm|bmm|linear|gemm|einsum|\bdot\b|baddbmm|fc\b"),
        (
            "norm",
            r"norm\b|_norm|batch_norm|layer_norm|group_norm|instance_norm|rms_?norm|layernorm|batchnorm",
        ),
        (
            "activation",
            r"relu|gelu|silu|swish|sigmoid|tanh|softmax|hardswish|mish|elu\b|leaky|threshold|clamp_min|prelu",
        ),
        (
            "reduction",
            r"\bsum\b|mean|\bmax\b|\bmin\b|reduce|argmax|argmin|\bnorm\b|cumsum|logsumexp|amax|amin|\ball\b|\bany\b",
        ),
        (
            "layout",
            r"^(view|reshape\d?|_unsafe_view|unsafe_view|flatten|transpose\d?|permute|t|select|"
            r"slice|strided_slice|narrow|stack|cat|concat|split|split_with_num|chunk|unbind|"
            r"squeeze\d?|unsqueeze\d?|expand|expand_as|expand_v2|as_strided|contiguous|tile|"
            r"unfold|movedim|swapaxes|index|gather|roll|flip|pad|repeat|split_with_sizes|"
            r"detach|lift_fresh|resolve_conj|resolve_neg|alias|view_as|narrow_copy)$",
        ),
        (
            "memcpy",
            r"\bcopy_?\b|\bto\b|_to_copy|memcpy|clone|\bcast\b|\bcpu\b|\bcuda\b|\bitem\b|local_scalar",
        ),
        (
            "communication",
            r"nccl|allreduce|all_reduce|allgather|all_gather|reduce_scatter|broadcast|c10d|gloo|alltoall|all_to_all|all2all|send|recv|comms",
        ),
        (
            "runtime",
            r"^(cuda|hip|cu|mlu|xpu)_?[a-z_]*(launch|sync|synchronize|event|stream|device|malloc|free|graph|memcpy|memset|peek|get)",
        ),
        (
            "elementwise",
            r"add|sub|mul|div|pow|sqrt|rsqrt|exp|log|abs|neg|where|fill|zero|ones|full|empty|scale|lerp|addcmul|addcdiv|maximum|minimum|equal|not_equal|greater|less|masked|elementwise|arange|randperm|rand|uniform|normal|sign|round|floor|ceil|bitwise|logical|isnan|isinf|clip|clamp|\bgt\b|\blt\b|\bge\b|\ble\b|\beq\b|\bne\b|nan_to_num|bucketize|sigmoid",
        ),
    )
)
_BACKWARD_RE = re.compile(r"backward|grad", re.IGNORECASE)


_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_GRAD_SUFFIX_RE = re.compile(r"(GradNodeFinal|GradNode|Backward\d*)$")
_DECORATION_RE = re.compile(
    r"\s+(dygraph|pybind_imperative_func|pybind_patch_func|compute|kernel launch|infer_meta)$"
)


def snake(name: str) -> str:
    """``CrossEntropyWithSoftmax`` -> ``cross_entropy_with_softmax``;
    ``MaxPool2DWithIndices`` -> ``max_pool2d_with_indices``."""
    return _CAMEL_RE.sub("_", name).lower()


def base_name(name: str) -> str:
    """A native op name without framework decorations, gradient suffixes or namespace, in
    snake case: ``aten::addmm`` -> ``addmm``, ``AddmmBackward0`` -> ``addmm``,
    ``Global_Conv2dGradNodeFinal`` -> ``conv2d``, ``matmul dygraph`` -> ``matmul``,
    ``autograd::engine::evaluate_function: ReluBackward0`` -> ``relu``."""
    text = name.strip()
    if text.startswith("autograd::engine::evaluate_function: "):
        text = text.split(": ", 1)[1]
    text = _DECORATION_RE.sub("", text)
    dunder = re.match(r"^__(\w+?)__", text)
    if dunder:  # Python operators: __mul__, "__add__ or __radd_"
        return dunder.group(1)
    text = re.sub(r"^(aten|c10d|torch|fbgemm|prims|torch::autograd)::", "", text)
    text = re.sub(r"^(Global_|Local_)", "", text)
    if text in ("GradNodeAccumulation", "AccumulateGrad", "autograd::AccumulateGrad"):
        return "accumulate_grad"
    grad = _GRAD_SUFFIX_RE.search(text)
    if grad:
        text = snake(text[: grad.start()])
    elif re.search(r"[a-z][A-Z]", text):
        text = snake(text)
    text = text.lower()
    text = re.sub(r"(_grad|_backward)$", "", text)
    return text.strip("_ ")


def is_gradient(name: str) -> bool:
    """True for gradient ops: ``*Backward0``, ``*GradNode*``, ``*_grad``, autograd engine work,
    TensorFlow ops under a ``gradient_tape/`` name scope."""
    return bool(
        re.search(
            r"Backward\d*$|GradNode|_grad$|_backward$|^autograd::|(^|/)gradient_tape/", name.strip()
        )
        or name.startswith("torch::autograd::")
    )


def display_name(name: str) -> str:
    """A native op name as a reader knows it, decorations and namespaces dropped but case and
    gradient suffixes kept: ``autograd::engine::evaluate_function: AddmmBackward0`` ->
    ``AddmmBackward0``, ``Global_Conv2dGradNodeFinal`` -> ``Conv2dGradNodeFinal``,
    ``conv2d pybind_imperative_func`` -> ``conv2d``, ``aten::addmm`` -> ``addmm``."""
    text = name.strip()
    if text.startswith("autograd::engine::evaluate_function: "):
        text = text.split(": ", 1)[1]
    text = _DECORATION_RE.sub("", text)
    text = re.sub(r"^(aten|c10d|fbgemm|prims|torch::autograd)::", "", text)
    return re.sub(r"^(Global_|Local_)", "", text)


def normalize(name: str) -> str:
    """An op name without framework decorations, gradient suffixes or namespace, lower case
    (``base_name``): ``aten::addmm`` and ``Global_MatmulGradNode`` alike."""
    return base_name(name)


def family_of(name: str) -> str:
    """The family of an op name by the framework-neutral rules (``other`` when none matches)."""
    text = normalize(name)
    for family, pattern in _RULES:
        if pattern.search(text):
            return family
    return "other"


def direction_of(name: str) -> str:
    """``backward`` for gradient ops (``*Backward0``, ``*_grad``, ``*GradNode``), else ``forward``."""
    return "backward" if _BACKWARD_RE.search(name) else "forward"
