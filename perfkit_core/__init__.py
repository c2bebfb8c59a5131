"""perfkit core: one event model for every framework's profiler, with summaries and reports.

``perfkit_core.load(path)`` returns a ``Run`` from a saved run, a trace file any installed
adapter reads, or a folder of per-rank traces. Importing this package is cheap: pandas and the
rest load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfkit_core.errors import TraceError
from perfkit_core.hookspecs import hookimpl, hookspec
from perfkit_core.schema import COLUMNS, KINDS, SCHEMA_VERSION

__version__ = "0.1.0"

if TYPE_CHECKING:
    from perfkit_core.annotation import annotate
    from perfkit_core.loading import load
    from perfkit_core.plugins import get_plugin_manager
    from perfkit_core.run import Run

__all__ = [
    "COLUMNS",
    "KINDS",
    "SCHEMA_VERSION",
    "Run",
    "TraceError",
    "__version__",
    "annotate",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "load",
]

_LAZY = {
    "annotate": ("perfkit_core.annotation", "annotate"),
    "Run": ("perfkit_core.run", "Run"),
    "load": ("perfkit_core.loading", "load"),
    "get_plugin_manager": ("perfkit_core.plugins", "get_plugin_manager"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'perfkit_core' has no attribute {name!r}")
