"""``record_modules(model)``: each module's forward recorded as a span, so that perfkit can
attribute ops to layers in a torch run the way Paddle's profiler records its layers.

torch's profiler records ``nn.Module: Type_k`` spans only with ``with_stack=True``, whose Python
tracer slows every step many times over. These hooks record the same spans, named the same way,
with ``torch.profiler.record_function``, and only while a profiler is recording: about two
microseconds per module call when it is, nothing measurable when it is not.
"""

from __future__ import annotations

from typing import Any


class ModuleSpans:
    """The hooks ``record_modules`` installed; ``remove()`` (or leaving the ``with`` block)
    takes them off."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.names: dict[int, str] = {}

    def remove(self) -> None:
        """Remove every hook."""
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def __enter__(self) -> ModuleSpans:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def record_modules(*modules: Any) -> ModuleSpans:
    """Record the forward of every module in ``modules`` (and of all their submodules) as a
    span named ``nn.Module: Type_k``, ``k`` counting modules of one type in ``modules()``
    order, as torch's own Python tracer names them. Returns the installed hooks."""
    import torch
    from torch.autograd.profiler import record_function

    spans = ModuleSpans()
    counts: dict[str, int] = {}
    enabled = torch._C._autograd._profiler_enabled
    seen: set[int] = set()
    for root in modules:
        for module in root.modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            type_name = type(module).__name__
            k = counts.get(type_name, 0)
            counts[type_name] = k + 1
            name = f"nn.Module: {type_name}_{k}"
            spans.names[id(module)] = name
            open_spans: list[Any] = []

            def pre(
                module: Any, args: Any, _name: str = name, _open: list[Any] = open_spans
            ) -> None:
                if enabled():
                    span = record_function(_name)
                    span.__enter__()
                    _open.append(span)
                else:
                    _open.append(None)

            def post(module: Any, args: Any, output: Any, _open: list[Any] = open_spans) -> None:
                span = _open.pop() if _open else None
                if span is not None:
                    span.__exit__(None, None, None)

            spans.handles.append(module.register_forward_pre_hook(pre))
            spans.handles.append(module.register_forward_hook(post, always_call=True))
    return spans
