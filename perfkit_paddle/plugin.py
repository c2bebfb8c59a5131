"""perfkit plugin for PaddlePaddle. Never imports paddle at import time."""

from __future__ import annotations

import contextlib
import importlib
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from perfkit_core.plugins import DEMO_TIMED_PER_PROFILED, TraceLoader, hookimpl

#: The frameworks this adapter answers for: the hooks that take ``framework`` reach its
#: implementations only for these (``perfkit_core.plugins.framework_hook``).
PERFKIT_FRAMEWORKS = ("paddle",)

_MARKERS = (b'"ExtraInfo"', b'(Python)"', b'(C++)"', b'"span_indx"', b'"span_index"')


@hookimpl
def perfkit_claim_trace(path: Path, head: bytes) -> TraceLoader | None:
    """Claim Paddle's exports: ``.paddle_trace.json`` (by name or content) and ``.paddle_trace.pb``."""
    name = path.name
    if name.endswith(".paddle_trace.pb"):
        from perfkit_paddle.pb import load_paddle_pb

        return load_paddle_pb
    text = head.lstrip()
    if name.endswith((".paddle_trace.json", ".paddle_trace.json.gz")) or (
        text[:1] == b"{" and any(marker in text for marker in _MARKERS)
    ):
        from perfkit_paddle.chrome import load_paddle_json

        return load_paddle_json
    return None


@hookimpl
def perfkit_framework_info() -> dict[str, Any]:
    """Say whether paddle is installed, and which version, without importing it."""
    from perfkit_core.plugins import installed_version

    version = installed_version("paddlepaddle", "paddlepaddle-gpu")
    return {"framework": "paddle", "installed": version is not None, "version": version}


@hookimpl
def perfkit_demo(directory: Path, steps: int) -> list[Path] | None:
    """Profile a small MLP training loop with paddle on the CPU, if paddle is installed."""
    import importlib.util

    if importlib.util.find_spec("paddle") is None:
        return None
    from perfkit_paddle.demo import train_mlp

    timed = DEMO_TIMED_PER_PROFILED * steps
    runs, _ = train_mlp(Path(directory) / "paddle", steps=steps, timed_steps=timed)
    return runs


@hookimpl
def perfkit_annotation(name: str) -> AbstractContextManager[Any] | None:
    """A ``paddle.profiler.RecordEvent`` span, when the program has imported paddle."""
    if "paddle" not in sys.modules:
        return None
    from paddle.profiler import RecordEvent

    return RecordEvent(name)


@hookimpl
def perfkit_profiler_recording(profiler: Any) -> bool | None:
    """Whether a ``paddle.profiler.Profiler`` is in a recording state (for ``step_timer``):
    True while it records, False before ``start()`` and after ``stop()``, and ``None`` (neither)
    between them while its scheduler keeps it closed or ready: a started Profiler still makes
    every layer's forward a ``RecordEvent`` (and, with ``record_shapes``, records each op's
    shapes), which made ``perfkit demo``'s Paddle steps 15% to 25% slower than without the
    profiler on a 2-core x86 machine (``bench/bench_step_timer.py``), so those steps are not
    the step without the profiler. ``None`` too for anything that is not a Paddle profiler
    (Paddle keeps no global flag that tells)."""
    if profiler is None or "paddle" not in sys.modules:
        return None
    if not type(profiler).__module__.startswith("paddle"):
        return None
    state = getattr(getattr(profiler, "current_state", None), "name", None)
    if state is None:
        return None
    if state in ("RECORD", "RECORD_AND_RETURN"):
        return True
    from paddle.profiler import utils as profiler_utils

    started = getattr(profiler_utils, "in_profiler_mode", None)
    return None if callable(started) and started() else False


@hookimpl
def perfkit_phase_timers(on_phase: Any) -> Any:
    """Time every optimizer step, every batch loaded in the training process and every batch
    the training thread takes, when the program has imported paddle:

    - each optimizer class of ``paddle.optimizer`` gets its ``step`` wrapped (as Paddle's
      profiler wraps it for its Optimization span), calling ``on_phase("optimizer", ns)``;
    - the DataLoader's dataset fetchers get their ``fetch`` wrapped, calling
      ``on_phase("loading", ns)`` per batch with the CPU time of the thread that loaded it. A
      single-process DataLoader (``num_workers=0``) fetches in a thread of the training
      process that Paddle's profiler does not record, so this is the one measure of its
      loading; batches loaded by worker processes are not counted (their fetch runs in the
      worker);
    - the DataLoader iterators get their ``__next__`` wrapped, calling ``on_phase("data",
      ns)`` per batch the training thread takes with the wall time it spent getting it:
      waiting for the loading thread or a worker to deliver it, and taking it off Paddle's
      queue (the span Paddle's profiler records as the step's Dataloader event)."""
    if "paddle" not in sys.modules:
        return None
    import functools
    import time

    from paddle import optimizer as paddle_optimizer

    active = [True]
    depth = [0]  # a subclass's step calling its parent's is one optimizer step
    wrapped: list[tuple[type, str, Any, Any]] = []

    def timed_step(step: Any) -> Any:
        @functools.wraps(step)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not active[0] or depth[0]:
                return step(*args, **kwargs)
            depth[0] += 1
            start = time.perf_counter_ns()
            try:
                return step(*args, **kwargs)
            finally:
                depth[0] -= 1
                on_phase("optimizer", time.perf_counter_ns() - start)

        return wrapper

    def timed(phase: str, clock: Any) -> Any:
        """A maker of wrappers that call ``on_phase(phase, ns)`` with ``clock``'s time (ns)
        over each call."""

        def make(call: Any) -> Any:
            @functools.wraps(call)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if not active[0]:
                    return call(*args, **kwargs)
                start = clock()
                try:
                    return call(*args, **kwargs)
                finally:
                    on_phase(phase, clock() - start)

            return wrapper

        return make

    def wrap(cls: type, name: str, make: Any) -> None:
        original = cls.__dict__.get(name)
        if original is None:
            return  # subclasses that inherit it are timed through the one they inherit
        replacement = make(original)
        setattr(cls, name, replacement)
        wrapped.append((cls, name, original, replacement))

    for name in getattr(paddle_optimizer, "__all__", ()):
        cls = getattr(paddle_optimizer, name, None)
        if name != "Optimizer" and isinstance(cls, type):
            wrap(cls, "step", timed_step)
    fetchers: Any = None  # a Paddle without this module: its loading is not timed
    with contextlib.suppress(ImportError):
        fetchers = importlib.import_module("paddle.io.dataloader.fetcher")
    for name in ("_MapDatasetFetcher", "_IterableDatasetFetcher"):
        cls = getattr(fetchers, name, None)
        if isinstance(cls, type):
            # the loading thread's CPU time: its waits for the GIL while training runs are not
            # loading work, and a worker would not have them
            wrap(cls, "fetch", timed("loading", time.thread_time_ns))
    iterators: Any = None  # a Paddle without this module: its batches' waits are not timed
    with contextlib.suppress(ImportError):
        iterators = importlib.import_module("paddle.io.dataloader.dataloader_iter")
    for name in ("_DataLoaderIterSingleProcess", "_DataLoaderIterMultiProcess"):
        cls = getattr(iterators, name, None)
        if isinstance(cls, type):
            wrap(cls, "__next__", timed("data", time.perf_counter_ns))

    def remove() -> None:
        active[0] = False  # a wrapper something else wrapped over stays, switched off
        for cls, name, original, replacement in wrapped:
            if cls.__dict__.get(name) is replacement:
                setattr(cls, name, original)

    return remove


@hookimpl
def perfkit_loader_batch_ns(framework: str) -> float | None:
    """What handing a batch from one DataLoader worker over costs on this machine now
    (``perfkit_paddle.replay.loader_batch_ns``), for a paddle run the step timer saves."""
    if "paddle" not in sys.modules:
        return None
    from perfkit_paddle.replay import loader_batch_ns

    return float(loader_batch_ns())  # the step timer takes an error for no answer


@hookimpl
def perfkit_loader_receive_ns(framework: str) -> float | None:
    """What receiving a batch from one DataLoader worker adds to a busy training step on this
    machine now (``perfkit_paddle.replay.loader_receive_ns``: Paddle's reader thread takes the
    GIL the step's ops hand over), for a paddle run the step timer saves."""
    if "paddle" not in sys.modules:
        return None
    from perfkit_paddle.replay import loader_receive_ns

    return float(loader_receive_ns())  # the step timer takes an error for no answer


@hookimpl
def perfkit_thread_op_ns(framework: str) -> float | None:
    """What each op of the training thread costs its CPU time beside a single-process
    DataLoader's loading thread on this machine now (``perfkit_paddle.replay.thread_op_ns``,
    about two seconds), for a paddle run the step timer saves."""
    if "paddle" not in sys.modules:
        return None
    from perfkit_paddle.replay import thread_op_ns

    return float(thread_op_ns())  # the step timer takes an error for no answer


@hookimpl
def perfkit_corun_slowdowns(framework: str) -> tuple[float, float] | None:
    """How much Paddle's ops and a loader worker's Python slow each other on two cores of this
    machine now (``perfkit_paddle.replay.corun_slowdowns``), for a paddle run the step timer
    saves."""
    if "paddle" not in sys.modules:
        return None
    from perfkit_paddle.replay import corun_slowdowns

    return corun_slowdowns()  # the step timer takes an error for no answer


@hookimpl
def perfkit_layer_spans_fix(framework: str) -> str | None:
    """How a Paddle run gets layer spans: Paddle's profiler records every Layer call."""
    return (
        "paddle.profiler records a span for every paddle.nn.Layer call it runs in dynamic-graph "
        "mode: build the model from paddle.nn.Layer subclasses and profile it in that mode"
    )


@hookimpl
def perfkit_remedy(finding: Any, framework: str) -> str | None:
    """The paddle code to change for a finding on a paddle run."""
    from perfkit_paddle.remedies import remedy

    return remedy(finding)


@hookimpl
def perfkit_measure_saving(finding: Any, framework: str) -> dict[str, Any] | None:
    """A Paddle finding's saving replayed on this machine (``perfkit_paddle.replay``): the
    input pipeline's with the costs of Paddle's loader (handing a batch from a worker over,
    and each training op beside a single-process loader's loading thread); the optimizer's
    with its step over the parameter shapes recorded with the model, as the loop and
    multi-tensor. None without paddle installed: a Paddle trace is read without it, but
    nothing can be replayed."""
    if finding.rule not in ("input-pipeline", "optimizer"):
        return None
    try:
        import paddle  # noqa: F401
    except ImportError:
        return None
    from perfkit_paddle.replay import measure_loader, measure_optimizer

    return measure_optimizer(finding) if finding.rule == "optimizer" else measure_loader(finding)


_PADDLE_FAMILIES = {
    "matmul": "matmul",
    "matmul_v2": "matmul",
    "linear": "matmul",
    "layer_norm": "norm",
    "batch_norm": "norm",
    "cross_entropy_with_softmax": "loss",
    "softmax_with_cross_entropy": "loss",
    "mean_all": "loss",
}


@hookimpl
def perfkit_op_family(name: str, framework: str) -> str | None:
    """Families of paddle op names (``matmul dygraph``, ``Global_MatmulGradNode``, ``adam_``)."""
    from perfkit_core.views import family_of, normalize

    base = normalize(name)
    for key, family in _PADDLE_FAMILIES.items():
        if base == key.lower():
            return family
    return family_of(name)


#: The name Paddle's DataLoader gives the thread of the training process that loads its
#: batches (``paddle.io.dataloader.dataloader_iter``: the single-process loader's, and the
#: multi-process loader's reader), followed by the loader's id.
LOADING_THREAD_PREFIX = "Dataloader_"


@hookimpl
def perfkit_loading_thread(name: str, framework: str) -> bool | None:
    """Paddle's loading threads, by the name its DataLoader gives them."""
    return name.startswith(LOADING_THREAD_PREFIX)


#: Paddle op names (without decorations and gradient suffixes) whose canonical op is not their
#: name.
_PADDLE_CANONICAL = {
    "pool2d": "pool",
    "pool3d": "pool",
    "max_pool2d_with_index": "pool",
    "cross_entropy_with_softmax": "cross_entropy",
    "softmax_with_cross_entropy": "cross_entropy",
    "mean_all": "mean",
    "lookup_table_v2": "embedding",
    "rnn": "rnn",
    "lstm": "rnn",
    "cudnn_lstm": "rnn",
    "fused_linear": "linear",
    "fc": "linear",
    "flash_attn": "attention",
    "memory_efficient_attention": "attention",
    "scaled_dot_product_attention": "attention",
    "adam_": "optimizer step",
    "adamw_": "optimizer step",
    "momentum_": "optimizer step",
    "sgd_": "optimizer step",
    "merged_adam_": "optimizer step",
    "merged_momentum_": "optimizer step",
    "lamb_": "optimizer step",
    "strided_slice": "slice",
    "split_with_num": "split",
    "concat": "concat",
    "expand_v2": "expand",
    "squeeze2": "squeeze",
    "unsqueeze2": "unsqueeze",
    "fill_constant": "fill",
    "full_like": "fill",
    "tile": "expand",
    "assign": "copy",
}


@hookimpl
def perfkit_canonical_op(name: str, framework: str) -> str | None:
    """Canonical ops of paddle op names (``pool2d`` -> ``pool``, ``Global_RnnGradNode`` ->
    ``rnn``, ``__mul__ pybind_patch_func`` -> ``multiply``); None for names whose
    decoration-free form is already canonical."""
    from perfkit_core.views import base_name

    if name in ("Optimization Step",):
        return "optimizer step"
    if name.startswith("_DataLoaderIter"):
        return "data loading"
    return _PADDLE_CANONICAL.get(base_name(name))


@hookimpl
def perfkit_op_cost(call: Any, framework: str) -> Any:
    """The FLOPs and bytes of a call of a Paddle op (``perfkit_paddle.opcosts``)."""
    from perfkit_paddle.opcosts import op_cost

    return op_cost(call)
