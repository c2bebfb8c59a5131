"""What runs inside training: span annotation, and the plumbing of ``on_trace_ready`` handlers.

- ``annotate``: ``annotate(name)``, one span recorded by every framework profiler in the program.
- ``handlers``: what every framework's handler shares (run folders, metadata, contained chained
  handlers, failures warned about once).
- ``step_timer``: ``step_timer(profiler)``, wall-clock step times with and without the profiler.
- ``background``: a helper process that converts exported traces into saved runs, off the
  training loop.
"""

from __future__ import annotations

from perfkit_core.capture.annotate import annotate
from perfkit_core.capture.background import BackgroundConverter, convert_file, shared_converter
from perfkit_core.capture.handlers import (
    Failures,
    default_worker_name,
    handler_metadata,
    new_run_dir,
)
from perfkit_core.capture.step_timer import StepTimer, step_timer

__all__ = [
    "BackgroundConverter",
    "Failures",
    "StepTimer",
    "annotate",
    "convert_file",
    "default_worker_name",
    "handler_metadata",
    "new_run_dir",
    "shared_converter",
    "step_timer",
]
