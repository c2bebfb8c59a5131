"""perfkit core: one event model for every framework's profiler, with summaries and reports.

``perfkit_core.load(path)`` returns a ``Run`` from a saved run, a trace file any installed
adapter reads, or a folder of per-rank traces; ``perfkit_core.compare(a, b)`` lines runs up
side by side; ``perfkit_core.annotate(name)`` marks a span for whichever framework is running.
Importing this package is cheap: pandas and the rest load on first use.

The sub-packages follow the flow of data, and import only the ones before them:
``plugins`` (hook specs, plugin manager) -> ``events`` (schema, ``Run``, building, loading) ->
``capture`` (what runs inside training) and ``views`` (summary tables) -> ``comparison`` ->
``advice`` -> ``report`` -> ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfkit_core.errors import TraceError
from perfkit_core.plugins.hookspecs import hookimpl, hookspec

__version__ = "0.2.0"

if TYPE_CHECKING:
    from perfkit_core.capture.annotate import annotate
    from perfkit_core.capture.step_timer import step_timer
    from perfkit_core.comparison.compare import compare
    from perfkit_core.events.loading import load
    from perfkit_core.events.run import Run
    from perfkit_core.events.schema import COLUMNS, KINDS, SCHEMA_VERSION
    from perfkit_core.plugins.manager import get_plugin_manager

__all__ = [
    "COLUMNS",
    "KINDS",
    "SCHEMA_VERSION",
    "Run",
    "TraceError",
    "__version__",
    "annotate",
    "compare",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "load",
    "step_timer",
]

_LAZY = {
    "annotate": "perfkit_core.capture.annotate",
    "compare": "perfkit_core.comparison.compare",
    "Run": "perfkit_core.events.run",
    "load": "perfkit_core.events.loading",
    "step_timer": "perfkit_core.capture.step_timer",
    "COLUMNS": "perfkit_core.events.schema",
    "KINDS": "perfkit_core.events.schema",
    "SCHEMA_VERSION": "perfkit_core.events.schema",
    "get_plugin_manager": "perfkit_core.plugins.manager",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfkit_core' has no attribute {name!r}")
