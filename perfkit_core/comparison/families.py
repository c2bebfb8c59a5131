"""Op families: canonical names that let a torch run and a paddle run of one model line up.

Each adapter maps its framework's op names to a family through ``perfkit_op_family``; the
rules below are the framework-neutral fallback that adapters build on. A family is one of
``FAMILIES``; forward and backward work are told apart by ``direction``.
"""

from __future__ import annotations

import re

FAMILIES: tuple[str, ...] = (
    "matmul",
    "conv",
    "norm",
    "activation",
    "elementwise",
    "reduction",
    "embedding",
    "attention",
    "loss",
    "optimizer",
    "memcpy",
    "communication",
    "data",
    "other",
)

#: Ordered (family, pattern) rules on a lower-cased op name with framework decorations removed;
#: the first match wins, so specific families come before general ones.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern))
    for family, pattern in (
        ("attention", r"attention|attn|sdpa|flash"),
        (
            "loss",
            r"cross_?entropy|nll_?loss|mse_?loss|l1_?loss|smooth_l1|bce|softmax_with_cross|log_?softmax|kl_?div|loss",
        ),
        ("optimizer", r"adam|sgd|momentum|lamb|rmsprop|adagrad|lars|optimizer|_foreach_"),
        ("embedding", r"embedding|lookup_table|gather_nd|index_select"),
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
        ("memcpy", r"\bcopy_?\b|\bto\b|_to_copy|memcpy|contiguous|clone|\bcast\b|\bcpu\b|\bcuda\b"),
        (
            "communication",
            r"nccl|allreduce|all_reduce|allgather|all_gather|reduce_scatter|broadcast|c10d|gloo|alltoall|all_to_all|send|recv",
        ),
        (
            "elementwise",
            r"add|sub|mul|div|pow|sqrt|rsqrt|exp|log|abs|neg|where|fill|zero|ones|full|scale|lerp|addcmul|addcdiv|maximum|minimum|equal|not_equal|greater|less|dropout|masked|elementwise",
        ),
    )
)
_BACKWARD_RE = re.compile(r"backward|grad", re.IGNORECASE)


def normalize(name: str) -> str:
    """Lower-case an op name and drop framework decorations (``aten::``, `` dygraph``, ...)."""
    text = name.lower()
    text = re.sub(r"^(aten|c10d|torch|fbgemm|prims)::", "", text)
    text = re.sub(
        r"\s+(dygraph|pybind_imperative_func|compute|kernel launch|infer_meta)$", "", text
    )
    text = re.sub(r"^(global_|local_)", "", text)
    text = re.sub(r"(backward\d*|gradnode|_grad)$", "", text)
    return text.strip("_ ")


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
