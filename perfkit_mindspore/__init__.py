"""perfkit adapter for MindSpore.

``perfkit_mindspore.on_trace_ready(dir)`` is a handler for ``mindspore.profiler.profile``;
``perfkit_mindspore.ProfilerCallback(start_step, stop_step, dir)`` profiles steps of
``Model.train``; ``perfkit_mindspore.describe_model(net)`` records a network's cells and
parameters for the ``layers`` view; ``perfkit_mindspore.step(prof)`` marks a step;
``perfkit_mindspore.annotate`` records a user span. ``load_folder`` reads the folders MindSpore's profiler writes (CPU, GPU,
Ascend) and needs no MindSpore; MindSpore is imported only when a profile is taken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_mindspore.capture import ProfilerCallback, TraceHandler, on_trace_ready, step
    from perfkit_mindspore.loader import load_folder, load_trace_view
    from perfkit_mindspore.model import describe_model
    from perfkit_mindspore.record import span as annotate

__all__ = [
    "ProfilerCallback",
    "TraceHandler",
    "annotate",
    "describe_model",
    "load_folder",
    "load_trace_view",
    "on_trace_ready",
    "step",
]

_LAZY = {
    "on_trace_ready": ("perfkit_mindspore.capture", "on_trace_ready"),
    "TraceHandler": ("perfkit_mindspore.capture", "TraceHandler"),
    "ProfilerCallback": ("perfkit_mindspore.capture", "ProfilerCallback"),
    "step": ("perfkit_mindspore.capture", "step"),
    "annotate": ("perfkit_mindspore.record", "span"),
    "load_folder": ("perfkit_mindspore.loader", "load_folder"),
    "load_trace_view": ("perfkit_mindspore.loader", "load_trace_view"),
    "describe_model": ("perfkit_mindspore.model", "describe_model"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'perfkit_mindspore' has no attribute {name!r}")
