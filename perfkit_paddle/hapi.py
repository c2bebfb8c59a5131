"""perfkit for ``paddle.Model.fit``: ``PerfkitCallback(dir)``, a ``paddle.callbacks.Callback``
that profiles the optimizer steps you name with ``paddle.profiler.Profiler`` and saves each
window as a perfkit run with perfkit's Paddle handler.

Importing this module needs no paddle; the class is made (subclassing
``paddle.callbacks.Callback``) when it is first used, and then says in one line what to install
when paddle is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_paddle.hapi_callback import PerfkitCallback

__all__ = ["PerfkitCallback"]


def __getattr__(name: str) -> Any:
    if name == "PerfkitCallback":
        from perfkit_paddle.hapi_callback import PerfkitCallback

        return PerfkitCallback
    raise AttributeError(f"module 'perfkit_paddle.hapi' has no attribute {name!r}")
