"""perfkit adapter for PaddlePaddle.

``perfkit_paddle.on_trace_ready(dir_name)`` returns a handler for
``paddle.profiler.Profiler(on_trace_ready=...)`` that saves each profiled span as a perfkit run:
Paddle's protobuf export of ``prof.profiler_result`` is written in the callback, then converted
by perfkit's helper process off the training loop (``background=False``: converted from the
result tree inside the callback). ``load_paddle_json`` and ``load_paddle_pb`` read Paddle's
exports without paddle; paddle is imported only when a handler runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_paddle.chrome import load_paddle_json
    from perfkit_paddle.handler import TraceHandler, on_trace_ready
    from perfkit_paddle.model import describe_model
    from perfkit_paddle.pb import load_paddle_pb
    from perfkit_paddle.result import run_from_result

__all__ = [
    "TraceHandler",
    "describe_model",
    "load_paddle_json",
    "load_paddle_pb",
    "on_trace_ready",
    "run_from_result",
]

_LAZY = {
    "on_trace_ready": "perfkit_paddle.handler",
    "TraceHandler": "perfkit_paddle.handler",
    "describe_model": "perfkit_paddle.model",
    "load_paddle_json": "perfkit_paddle.chrome",
    "load_paddle_pb": "perfkit_paddle.pb",
    "run_from_result": "perfkit_paddle.result",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfkit_paddle' has no attribute {name!r}")
