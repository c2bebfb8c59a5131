"""How the events of an XSpace map to perfkit kinds, and the native categories kept for them.

XSpace events carry no category of their own: what an event is follows from its plane, its
line and its stats. The loader gives every event one of the native categories below (kept in
the ``category`` column) and the kind that category maps to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Native category -> perfkit kind. ``category`` holds the native category of every row.
CATEGORY_KINDS: dict[str, str] = {
    # Host plane (/host:CPU): one line per thread.
    "Step": "step",  # a TraceMe with a step_num stat (StepTraceAnnotation, Keras train steps)
    "Python": "python",  # Python tracer events, named "$file.py:line function"
    "XLA Op": "operator",  # an XLA op run on the host (XLA:CPU), with an hlo_op stat
    "TF Op": "operator",  # a TensorFlow op ("name:Type" TraceMe, or a tf_op stat)
    "TF Data": "dataloader",  # tf.data: Iterator::* stages, IteratorGetNextOp
    "JAX Dispatch": "runtime",  # PjitFunction(f) / PmapFunction(f): a jitted call dispatched
    "Device Runtime": "runtime",  # cuLaunchKernel, cudaMemcpyAsync, ... on the host
    "User": "user",  # perfkit_core.annotate spans (TraceAnnotation with perfkit="user")
    "Profiler": "profiler",  # the profiler's own markers (ThreadpoolListener::*, "end: op")
    "TraceMe": "other",  # any other host TraceMe (PjRt, executor, compiler passes, ...)
    # Device planes (/device:GPU:N, /device:TPU:N): stream lines and derived lines.
    "Kernel": "kernel",  # an event on a stream line (an XLA op's kernel)
    "Memcpy": "memcpy",
    "Memset": "memset",
    "Collective": "communication",  # all-reduce, all-gather, ... kernels
    "XLA Ops": "kernel",  # the op line of a device with no stream lines (TPU)
    "Derived": "other",  # device lines derived from the streams (XLA Modules, Steps, ...)
}

#: Device lines that repeat the streams' work (xprof derives them): kept as ``other``.
DERIVED_LINES = frozenset(
    {
        "Steps",
        "XLA Modules",
        "XLA Ops",
        "XLA TraceMe",
        "TensorFlow Name Scope",
        "TensorFlow Ops",
        "Framework Name Scope",
        "Framework Ops",
        "Source code",
        "Launch Stats",
        "SparseCore Steps",
    }
)

_PROFILER_RE = re.compile(r"^(ThreadpoolListener::|end: )")
_DISPATCH_RE = re.compile(r"^(Pjit|Pmap|Xmap|Jit)Function\(")
_RUNTIME_RE = re.compile(r"^(cu|cuda|hip|nccl)[A-Z]\w*$")
#: A TensorFlow op TraceMe: "scope/name:Type" (the type CamelCase, as TF op types are).
_TF_OP_RE = re.compile(r"^[^:\s]+:_?[A-Z][A-Za-z0-9]*$")
#: tf.data's TraceMes: the iterator's stages and the op that takes the next batch.
_TF_DATA_RE = re.compile(r"^(Iterator::|IteratorGetNext)")
_COLLECTIVE_RE = re.compile(
    r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|nccl", re.I
)
_MEMCPY_RE = re.compile(r"^(Memcpy|memcpy|MEMCPY)|Memcpy[HDP]to[HDP]|copy-(start|done)")
_MEMSET_RE = re.compile(r"^(Memset|memset)")


def host_category(name: str, stats: Mapping[str, object]) -> str:
    """The native category of a host event from its name and stats (``CATEGORY_KINDS``)."""
    if "step_num" in stats and "hlo_op" not in stats:
        return "Step"
    if name.startswith("$"):
        return "Python"
    if stats.get("perfkit") == "user":
        return "User"
    if "hlo_op" in stats:
        return "XLA Op"
    if _TF_DATA_RE.match(name):
        return "TF Data"
    if "tf_op" in stats or _TF_OP_RE.match(name):
        return "TF Op"
    if _DISPATCH_RE.match(name):
        return "JAX Dispatch"
    if _PROFILER_RE.match(name):
        return "Profiler"
    if _RUNTIME_RE.match(name):
        return "Device Runtime"
    return "TraceMe"


def device_category(line_name: str, name: str, has_streams: bool) -> str:
    """The native category of an event on a device plane's line named ``line_name``."""
    if line_name in DERIVED_LINES:
        if line_name == "XLA Ops" and not has_streams:
            return "Collective" if _COLLECTIVE_RE.search(name) else "XLA Ops"
        return "Derived"
    if _MEMCPY_RE.search(name):
        return "Memcpy"
    if _MEMSET_RE.search(name):
        return "Memset"
    if _COLLECTIVE_RE.search(name):
        return "Collective"
    return "Kernel"


_DEVICE_RE = re.compile(r"^/device:([A-Za-z_]+):(\d+)")


def device_of_plane(plane_name: str) -> tuple[str, int] | None:
    """``/device:GPU:0`` -> ("gpu", 0); ``/device:TPU:3`` -> ("tpu", 3); None for other planes."""
    m = _DEVICE_RE.match(plane_name)
    if not m:
        return None
    kind = m.group(1).lower()
    if kind in ("custom", "gpu_custom"):
        kind = "gpu"
    return kind, int(m.group(2))
