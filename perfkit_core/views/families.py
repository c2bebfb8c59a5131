"""Op families: canonical names that let a torch run and a paddle run of one model line up,
and the ``family`` view (time per family of the run's outermost work).

Each adapter maps its framework's op names to a family through ``perfkit_op_family``; the
rules below are the framework-neutral fallback that adapters build on. A family is one of
``FAMILIES``; forward and backward work are told apart by ``direction``.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events import links
from perfkit_core.plugins import get_plugin_manager

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

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


def family_times(run: Run) -> dict[str, float]:
    """Time (ns, whole run) per ``family (direction)`` of the run's outermost work.

    Outermost data-loading spans count as ``data``, outermost optimizer spans as ``optimizer``,
    outermost communication as ``communication``; every other outermost operator gets its
    family from the run's adapter (``perfkit_op_family``) and is ``backward`` when it runs
    inside a backward span or is a gradient op. Time is GPU time (work launched within) when
    the run recorded device events, CPU time otherwise; data loading always counts host time.
    """
    ev = run.events
    kind = ev["kind"].to_numpy()
    parent = ev["parent"].to_numpy()
    host = ev["stream"].to_numpy() < 0
    names = ev["name"].astype(str).to_numpy()
    spans = host & np.isin(kind, ["dataloader", "optimizer", "communication"])
    ops = host & (kind == "operator")
    counted = spans | ops
    outer = counted & ~links.has_ancestor(parent, counted)
    in_backward = links.has_ancestor(parent, kind == "backward")
    _, gpu_total = links.device_time_by_launcher(run)
    use_gpu = not np.isnan(gpu_total).all()
    ev_dur = ev["dur_ns"].to_numpy().astype(float)
    time = gpu_total if use_gpu else ev_dur
    hook = get_plugin_manager().hook.perfkit_op_family
    cache: dict[str, str] = {}
    out: dict[str, float] = {}
    for r in np.flatnonzero(outer).tolist():
        k = kind[r]
        name = names[r]
        if k == "dataloader":
            family, direction = "data", "forward"
        elif k == "optimizer":
            family, direction = "optimizer", "forward"
        elif k == "communication":
            family, direction = "communication", "forward"
        else:
            known = cache.get(name)
            if known is None:
                known = hook(name=name, framework=run.framework) or family_of(name)
                cache[name] = known
            family = known
            direction = (
                "backward" if in_backward[r] or direction_of(name) == "backward" else "forward"
            )
        key = f"{family} ({direction})"
        # Data loading is host work even in GPU runs: count its host time.
        chosen = ev_dur[r] if family == "data" else time[r]
        value = float(chosen) if not math.isnan(chosen) else 0.0
        out[key] = out.get(key, 0.0) + value
    return out


def family_view(run: Run, *, top: int | None = None) -> pd.DataFrame:
    """Time per op family of the run's outermost work, per step (``family_times`` divided by
    the number of steps): columns ``name`` (``family (direction)``), ``family``, ``direction``,
    ``time_per_step_ns`` and ``share_pct`` (of the summed family time), largest first.
    GPU time where device work was recorded, else CPU time; data loading is host time."""
    import pandas as pd

    times = family_times(run)
    steps = max(len(run.meta.get("steps") or []), 1)
    total = sum(times.values())
    frame = pd.DataFrame(
        {
            "name": list(times),
            "family": [k.split(" (")[0] for k in times],
            "direction": [k.split(" (")[1].rstrip(")") for k in times],
            "time_per_step_ns": [v / steps for v in times.values()],
            "share_pct": [100.0 * v / total if total else math.nan for v in times.values()],
        }
    ).sort_values(["time_per_step_ns", "name"], ascending=[False, True], kind="stable")
    frame = frame.reset_index(drop=True)
    if top is not None:
        frame = frame.head(top)
    frame.attrs["note"] = (
        "outermost ops only; GPU time where device work was recorded, else CPU time"
    )
    return frame
