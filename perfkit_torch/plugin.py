"""perfkit plugin for PyTorch: claims Kineto chrome traces. Never imports torch at import time."""

from __future__ import annotations

import re
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from perfkit_core.plugins import DEMO_TIMED_PER_PROFILED, TraceLoader, hookimpl

#: The frameworks this adapter answers for: the hooks that take ``framework`` reach its
#: implementations only for these (``perfkit_core.plugins.framework_hook``).
PERFKIT_FRAMEWORKS = ("torch",)

_PADDLE_MARKERS = (b'"ExtraInfo"', b"ProfileStep", b"(Python)", b"(GPU)")
#: What the XLA profiler's trace viewer JSON (``<host>.trace.json.gz`` beside a
#: ``.xplane.pb``, written by JAX and TensorFlow) holds near its start and Kineto never writes.
_XLA_TRACE_VIEWER_MARKER = b'"highres-ticks"'


def looks_like_kineto(path: Path, head: bytes) -> bool:
    """Return True when ``head`` (the file's first bytes) looks like a torch chrome trace."""
    text = head.lstrip()
    if path.name.endswith((".paddle_trace.json", ".paddle_trace.json.gz")):
        return False
    if text[:1] == b"[":
        return b'"ph"' in text
    if text[:1] != b"{":
        return False
    if any(marker in text for marker in _PADDLE_MARKERS):
        return False
    if _XLA_TRACE_VIEWER_MARKER in text[:4096]:
        return False  # the trace viewer's JSON of a TensorFlow/JAX profile (perfkit-xla)
    return any(key in text for key in (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"'))


@hookimpl
def perfkit_claim_trace(path: Path, head: bytes) -> TraceLoader | None:
    """Claim ``.json``/``.json.gz`` Kineto traces (and legacy bare-list exports, to explain them)."""
    if not looks_like_kineto(path, head):
        return None
    from perfkit_torch.kineto import load_kineto

    return load_kineto


_RANK_RE = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


@hookimpl
def perfkit_trace_rank(path: Path, head: bytes) -> int | None:
    """The rank in a Kineto trace's ``distributedInfo``, which Kineto writes before the events."""
    if not looks_like_kineto(path, head):
        return None
    match = _RANK_RE.search(head)
    return int(match.group(1)) if match else None


@hookimpl
def perfkit_framework_info() -> dict[str, Any]:
    """Say whether torch is installed, and which version, without importing it."""
    from perfkit_core.plugins import installed_version

    version = installed_version("torch")
    return {"framework": "torch", "installed": version is not None, "version": version}


@hookimpl
def perfkit_demo(directory: Path, steps: int) -> list[Path] | None:
    """Profile a small MLP training loop with torch on the CPU, if torch is installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return None
    from perfkit_torch.demo import train_mlp

    timed = DEMO_TIMED_PER_PROFILED * steps
    runs, _ = train_mlp(Path(directory) / "torch", steps=steps, timed_steps=timed)
    return runs


@hookimpl
def perfkit_annotation(name: str) -> AbstractContextManager[Any] | None:
    """A ``torch.profiler.record_function`` span, when the program has imported torch."""
    if "torch" not in sys.modules:
        return None
    from torch.profiler import record_function

    return record_function(name)


@hookimpl
def perfkit_profiler_recording(profiler: Any) -> bool | None:
    """Whether torch's profiler is recording (for ``step_timer``), when torch is imported and
    ``profiler`` is a torch profiler or None."""
    if "torch" not in sys.modules:
        return None
    if profiler is not None and not type(profiler).__module__.startswith("torch"):
        return None
    import torch

    return bool(torch._C._autograd._profiler_enabled())


@hookimpl
def perfkit_phase_timers(on_phase: Any) -> Any:
    """Time, when the program has imported torch:

    - every optimizer step (torch's global optimizer-step hooks): ``on_phase("optimizer",
      ns)`` after each ``Optimizer.step``;
    - every batch the training thread takes from a DataLoader (a wrapper on the DataLoader
      iterators' ``__next__``): ``on_phase("data", ns)``, the wall time the training thread
      spent loading it (``num_workers=0``) or waiting for a worker to deliver it, and
      ``on_phase("data_cpu", ns)``, the training thread's CPU time over the same call: without
      workers, what its Dataset computed, the rest of the wall time being its waits;
    - every backward pass (a wrapper on ``torch.autograd.backward``, which ``Tensor.backward``
      calls): ``on_phase("backward", ns)``, its wall time, and ``on_phase("forward", ns)``,
      the training thread's time before it: from the batch's arrival (the end of the last
      DataLoader ``__next__``) or, when the loop takes no batch from a DataLoader, from the end
      of the last optimizer step, to the backward call: the model's forward and the loss. The
      step timer counts it from the step's start at the earliest: the last optimizer step ran
      in the step before."""
    if "torch" not in sys.modules:
        return None
    import functools
    import time

    import torch.autograd
    from torch.optim import optimizer as torch_optimizer
    from torch.utils.data import dataloader

    started: list[int] = []
    # when the last batch arrived and the last optimizer step ended (0: not yet)
    marks = {"data": 0, "optimizer": 0}

    def pre(*_args: Any) -> None:
        started.append(time.perf_counter_ns())

    def post(*_args: Any) -> None:
        if started:
            end = time.perf_counter_ns()
            on_phase("optimizer", end - started.pop())
            marks["optimizer"] = end

    handles = [
        torch_optimizer.register_optimizer_step_pre_hook(pre),
        torch_optimizer.register_optimizer_step_post_hook(post),
    ]
    base: Any = dataloader._BaseDataLoaderIter  # its __next__ is replaced and put back
    original = base.__dict__.get("__next__")
    active = [True]

    def timed_next(self: Any) -> Any:
        if not active[0]:
            return original(self)
        start = time.perf_counter_ns()
        cpu = time.thread_time_ns()
        try:
            return original(self)
        finally:
            cpu = time.thread_time_ns() - cpu
            end = time.perf_counter_ns()
            on_phase("data", end - start)
            on_phase("data_cpu", cpu)
            marks["data"] = end

    if original is not None:
        replacement = functools.wraps(original)(timed_next)
        base.__next__ = replacement

    backward = torch.autograd.backward

    def timed_backward(*args: Any, **kwargs: Any) -> Any:
        if not active[0]:
            return backward(*args, **kwargs)
        start = time.perf_counter_ns()
        # the batch's arrival when it came after the last optimizer step: the forward ran
        # from it; without a DataLoader, from the optimizer step before
        since = marks["data"] if marks["data"] > marks["optimizer"] else marks["optimizer"]
        if since:
            on_phase("forward", start - since)
            marks["data"] = marks["optimizer"] = 0  # a second backward has no forward of its own
        try:
            return backward(*args, **kwargs)
        finally:
            on_phase("backward", time.perf_counter_ns() - start)

    backward_replacement = functools.wraps(backward)(timed_backward)
    torch.autograd.backward = backward_replacement

    def remove() -> None:
        for handle in handles:
            handle.remove()
        active[0] = False  # a wrapper something else wrapped over stays, switched off
        if original is not None and base.__dict__.get("__next__") is replacement:
            base.__next__ = original
        if torch.autograd.backward is backward_replacement:
            torch.autograd.backward = backward

    return remove


@hookimpl
def perfkit_loader_batch_ns(framework: str) -> float | None:
    """What handing a batch from one DataLoader worker over costs on this machine now
    (``perfkit_torch.replay.loader_batch_ns``), for a torch run the step timer saves."""
    if "torch" not in sys.modules:
        return None
    from perfkit_torch.replay import loader_batch_ns

    return float(loader_batch_ns())  # the step timer takes an error for no answer


@hookimpl
def perfkit_corun_slowdowns(framework: str) -> tuple[float, float] | None:
    """How much torch's ops and a loader worker's Python slow each other on two cores of this
    machine now (``perfkit_torch.replay.corun_slowdowns``), for a torch run the step timer
    saves."""
    if "torch" not in sys.modules:
        return None
    from perfkit_torch.replay import corun_slowdowns

    return corun_slowdowns()  # the step timer takes an error for no answer


@hookimpl
def perfkit_eager_pass_ns(framework: str) -> float | None:
    """An eager forward and backward of a tiny model on this machine now
    (``perfkit_torch.replay_compile.eager_pass_ns``), for a torch run the step timer saves."""
    if "torch" not in sys.modules:
        return None
    from perfkit_torch.replay_compile import eager_pass_ns

    return float(eager_pass_ns())  # the step timer takes an error for no answer


@hookimpl
def perfkit_layer_spans_fix(framework: str) -> str | None:
    """How a torch run gets layer spans: perfkit's handler records them unless told not to."""
    return (
        "profile with perfkit_torch.on_trace_ready(...), which records every nn.Module call "
        "unless given layers=False, or call perfkit_torch.record_modules() before profiling"
    )


@hookimpl
def perfkit_measure_saving(finding: Any, framework: str) -> dict[str, Any] | None:
    """The optimizer finding's saving from a replay of its recorded parameter shapes; the
    input-pipeline finding's with the cost of handing a batch to a loader worker measured; the
    compile findings' (python-overhead, small-ops) with a compiled graph's costs measured; the
    amp finding's with its recorded GEMM shapes timed in fp32 and the proposed precision on
    the GPU the run recorded, where this machine has it."""
    if finding.rule == "amp":
        from perfkit_torch.replay_amp import measure_amp

        return measure_amp(finding)
    if finding.rule in ("python-overhead", "small-ops"):
        from perfkit_torch.replay_compile import measure_compile

        return measure_compile(finding)
    if finding.rule not in ("optimizer", "input-pipeline"):
        return None
    from perfkit_torch.replay import measure_loader, measure_optimizer

    return measure_optimizer(finding) if finding.rule == "optimizer" else measure_loader(finding)


@hookimpl
def perfkit_remedy(finding: Any, framework: str) -> str | None:
    """The torch code to change for a finding on a torch run."""
    from perfkit_torch.remedies import remedy

    return remedy(finding)


_TORCH_FAMILIES = {
    "aten::linear": "matmul",
    "aten::addmm": "matmul",
    "aten::mm": "matmul",
    "aten::bmm": "matmul",
    "aten::matmul": "matmul",
    "aten::t": "elementwise",
    "aten::layer_norm": "norm",
    "aten::native_layer_norm": "norm",
    "aten::cross_entropy_loss": "loss",
    "aten::nll_loss_nd": "loss",
    "aten::zero_": "elementwise",
    "aten::to": "memcpy",
    "aten::item": "memcpy",
    "aten::_local_scalar_dense": "memcpy",
}


@hookimpl
def perfkit_op_family(name: str, framework: str) -> str | None:
    """Families of torch op names: exact names first, then the neutral rules on the rest."""
    if name in _TORCH_FAMILIES:
        return _TORCH_FAMILIES[name]
    if name.startswith("autograd::engine::evaluate_function: "):
        name = name.split(": ", 1)[1]
    from perfkit_core.views import family_of

    return family_of(name)


#: Torch op names (without ``aten::`` and gradient suffixes) whose canonical op is not their name.
_TORCH_CANONICAL = {
    "cross_entropy_loss": "cross_entropy",
    "nll_loss_nd": "nll_loss",
    "nll_loss_forward": "nll_loss",
    "nll_loss2d": "nll_loss",
    "max_pool2d": "pool",
    "max_pool2d_with_indices": "pool",
    "max_pool1d": "pool",
    "max_pool3d": "pool",
    "max_pool3d_with_indices": "pool",
    "avg_pool1d": "pool",
    "avg_pool2d": "pool",
    "avg_pool3d": "pool",
    "adaptive_avg_pool2d": "pool",
    "_adaptive_avg_pool2d": "pool",
    "adaptive_max_pool2d": "pool",
    "lstm": "rnn",
    "gru": "rnn",
    "rnn_tanh": "rnn",
    "rnn_relu": "rnn",
    "mkldnn_rnn_layer": "rnn",
    "_cudnn_rnn": "rnn",
    "_thnn_fused_lstm_cell": "rnn",
    "dropout": "dropout",
    "native_dropout": "dropout",
    "feature_dropout": "dropout",
    "embedding": "embedding",
    "embedding_dense": "embedding",
    "embedding_backward": "embedding",
    "scaled_dot_product_attention": "attention",
    "_scaled_dot_product_flash_attention": "attention",
    "_scaled_dot_product_efficient_attention": "attention",
    "_scaled_dot_product_flash_attention_for_cpu": "attention",
    "clamp_min": "relu",
    "threshold": "relu",
    "_softmax": "softmax",
    "_log_softmax": "log_softmax",
    "expand_as": "expand",
    "clone": "copy",
    "contiguous": "contiguous",
    "accumulate_grad": "accumulate_grad",
    "cudnn_convolution": "conv",
    "cudnn_convolution_transpose": "conv",
    "mkldnn_convolution": "conv",
    "slow_conv2d": "conv",
    "thnn_conv2d": "conv",
    "miopen_convolution": "conv",
    "cudnn_batch_norm": "batch_norm",
    "miopen_batch_norm": "batch_norm",
    "_batch_norm_impl_index": "batch_norm",
    "threshold_backward": "relu",
    "relu_": "relu",
}


@hookimpl
def perfkit_canonical_op(name: str, framework: str) -> str | None:
    """Canonical ops of torch op names (``aten::max_pool2d`` -> ``pool``, ``aten::lstm`` ->
    ``rnn``); None for names whose decoration-free form is already canonical."""
    from perfkit_core.views import base_name

    if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
        return "zero_grad" if "zero_grad" in name else "optimizer step"
    from perfkit_torch.kineto_format import DATALOADER_PREFIXES

    if name.startswith(DATALOADER_PREFIXES):
        return "data loading"
    return _TORCH_CANONICAL.get(base_name(name))


@hookimpl
def perfkit_op_cost(call: Any, framework: str) -> Any:
    """The FLOPs and bytes of a call of a torch op (``perfkit_torch.opcosts``)."""
    from perfkit_torch.opcosts import op_cost

    return op_cost(call)
