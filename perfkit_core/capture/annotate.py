"""``annotate(name)``: one span, recorded by every framework profiler in the program."""

from __future__ import annotations

import threading
from contextlib import ContextDecorator, ExitStack
from typing import Any


class annotate(ContextDecorator):
    """Context manager and decorator opening a span named ``name`` in each framework's profiler.

    Code shared by torch and paddle models is annotated once:

        with perfkit_core.annotate("data_prep"):
            ...

        @perfkit_core.annotate("loss")
        def compute_loss(...): ...

    Each installed adapter opens its framework's own span (``torch.profiler.record_function``,
    ``paddle.profiler.RecordEvent``) when the program has imported that framework, so the span
    lands in the user-defined summary of whichever profiler is running. Nothing is imported and
    nothing is recorded when no framework is loaded.
    """

    def __init__(self, name: str) -> None:
        self.name = str(name)
        self._local = threading.local()

    def __enter__(self) -> annotate:
        from perfkit_core.plugins import get_plugin_manager

        stack = ExitStack()
        try:
            for span in get_plugin_manager().hook.perfkit_annotation(name=self.name):
                if span is not None:
                    stack.enter_context(span)
        except BaseException:
            stack.close()  # close the spans already opened, then let the error through
            raise
        stacks = self._local.__dict__.setdefault("stacks", [])
        stacks.append(stack)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._local.stacks.pop().close()
