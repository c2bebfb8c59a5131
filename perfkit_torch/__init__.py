"""perfkit adapter for PyTorch.

``perfkit_torch.on_trace_ready(dir_name)`` returns a handler for
``torch.profiler.profile(on_trace_ready=...)`` that saves each profiled cycle as a perfkit run,
with every ``nn.Module`` call recorded as a layer span while the profiler records
(``layers=False`` turns that off); ``perfkit_torch.load_kineto(path)`` reads a Kineto chrome
trace. torch is imported only when a handler runs, so importing this package is cheap.
``perfkit_torch.record_modules()`` records the same layer spans for a profiler given another
handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_torch.handler import TraceHandler, on_trace_ready
    from perfkit_torch.kineto import load_kineto
    from perfkit_torch.modules import record_modules

__all__ = ["TraceHandler", "load_kineto", "on_trace_ready", "record_modules"]


def __getattr__(name: str) -> Any:
    if name in ("on_trace_ready", "TraceHandler"):
        from perfkit_torch import handler

        return getattr(handler, name)
    if name == "load_kineto":
        from perfkit_torch.kineto import load_kineto

        return load_kineto
    if name == "record_modules":
        from perfkit_torch.modules import record_modules

        return record_modules
    raise AttributeError(f"module 'perfkit_torch' has no attribute {name!r}")
