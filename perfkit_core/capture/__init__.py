"""What runs inside training: span annotation, and the plumbing of ``on_trace_ready`` handlers.

- ``annotate``: ``annotate(name)``, one span recorded by every framework profiler in the program.
- ``handlers``: what every framework's handler shares (run folders claimed atomically, metadata,
  room on disk before an export, contained chained handlers, failures warned about once).
- ``step_timer``: ``step_timer(profiler)``, wall-clock step times with and without the profiler.
- ``run_handler``: ``RunHandler``, the base of every framework's ``on_trace_ready`` handler.
- ``background``: a helper process at the lowest CPU priority that converts exported traces
  into saved runs, off the training loop, with a bounded queue.
- ``helper``: that helper process itself: it converts a trace only on a core training leaves idle
  until the program waits for it or too much is queued.
- ``windows``: the windows of steps a trainer's callback profiles, and the name its runs take.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# What this package offers is imported on first use (``__getattr__``): the conversion helper
# imports ``capture.helper`` beside training and needs none of the rest (numpy, the events).
# ``annotate`` and ``step_timer`` are imported now: each is also the name of its module, which
# would otherwise stand in for the function once anything imported the module.
from perfkit_core.capture.annotate import annotate
from perfkit_core.capture.step_timer import StepTimer, step_timer
from perfkit_core.lazy import lazy_attribute

if TYPE_CHECKING:
    from perfkit_core.capture.background import BackgroundConverter, shared_converter
    from perfkit_core.capture.handler_runs import HandlerRuns
    from perfkit_core.capture.handlers import (
        FALLBACK_MAX_BYTES,
        ROOM_TIMEOUT_S,
        Failures,
        claim_run_dir,
        conversion_reason,
        cut_short_reason,
        default_worker_name,
        export_is_complete,
        fallback_dir,
        fallback_refusal,
        free_bytes,
        handler_metadata,
        make_room,
        os_error_reason,
        partial_files,
        remove_partial,
    )
    from perfkit_core.capture.helper import convert_file
    from perfkit_core.capture.run_handler import RunHandler
    from perfkit_core.capture.windows import folder_worker_name, step_windows, window_arguments

__all__ = [
    "FALLBACK_MAX_BYTES",
    "ROOM_TIMEOUT_S",
    "BackgroundConverter",
    "Failures",
    "HandlerRuns",
    "RunHandler",
    "StepTimer",
    "annotate",
    "claim_run_dir",
    "conversion_reason",
    "convert_file",
    "cut_short_reason",
    "default_worker_name",
    "export_is_complete",
    "fallback_dir",
    "fallback_refusal",
    "folder_worker_name",
    "free_bytes",
    "handler_metadata",
    "make_room",
    "os_error_reason",
    "partial_files",
    "remove_partial",
    "shared_converter",
    "step_timer",
    "step_windows",
    "window_arguments",
]

_LAZY = {
    "BackgroundConverter": "perfkit_core.capture.background",
    "shared_converter": "perfkit_core.capture.background",
    "HandlerRuns": "perfkit_core.capture.handler_runs",
    "FALLBACK_MAX_BYTES": "perfkit_core.capture.handlers",
    "ROOM_TIMEOUT_S": "perfkit_core.capture.handlers",
    "Failures": "perfkit_core.capture.handlers",
    "claim_run_dir": "perfkit_core.capture.handlers",
    "conversion_reason": "perfkit_core.capture.handlers",
    "cut_short_reason": "perfkit_core.capture.handlers",
    "default_worker_name": "perfkit_core.capture.handlers",
    "export_is_complete": "perfkit_core.capture.handlers",
    "fallback_dir": "perfkit_core.capture.handlers",
    "fallback_refusal": "perfkit_core.capture.handlers",
    "free_bytes": "perfkit_core.capture.handlers",
    "handler_metadata": "perfkit_core.capture.handlers",
    "make_room": "perfkit_core.capture.handlers",
    "os_error_reason": "perfkit_core.capture.handlers",
    "partial_files": "perfkit_core.capture.handlers",
    "remove_partial": "perfkit_core.capture.handlers",
    "convert_file": "perfkit_core.capture.helper",
    "RunHandler": "perfkit_core.capture.run_handler",
    "folder_worker_name": "perfkit_core.capture.windows",
    "step_windows": "perfkit_core.capture.windows",
    "window_arguments": "perfkit_core.capture.windows",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _LAZY, name)
