"""perfkit core: one event model for every framework's profiler, with summaries and reports.

``perfkit_core.load(path)`` returns a ``Run`` from a saved run, a trace file any installed
adapter reads, or a folder of per-rank traces; ``perfkit_core.compare(a, b)`` lines runs up
side by side; ``perfkit_core.annotate(name)`` marks a span for whichever framework is running;
``perfkit_core.readable(frame)`` writes a view's times in ms for reading;
``perfkit_core.headline_text(run)`` is the headline a report opens with. In Jupyter, a run or
a comparison shows its report (``load_ipython_extension``).
Importing this package is cheap: pandas and the rest load on first use.

The sub-packages follow the flow of data, and import only the ones before them:
``plugins`` (hook specs, plugin manager) -> ``events`` (schema, ``Run``, building, loading) ->
``capture`` (what runs inside training) and ``views`` (summary tables) -> ``comparison`` ->
``advice`` -> ``report`` -> ``cli``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import TraceError
from perfkit_core.lazy import lazy_attribute
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
    from perfkit_core.report.headline_text import headline_text
    from perfkit_core.report.readable import readable

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
    "headline_text",
    "hookimpl",
    "hookspec",
    "load",
    "load_ipython_extension",
    "readable",
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
    "readable": "perfkit_core.report.readable",
    "headline_text": "perfkit_core.report.headline_text",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _LAZY, name)


#: What a notebook shows as its report (``perfkit_core.report.notebook``): module, class.
NOTEBOOK_TYPES = (
    ("perfkit_core.events.run", "Run"),
    ("perfkit_core.comparison.types", "Comparison"),
)


def load_ipython_extension(ipython: Any) -> None:
    """Show runs and comparisons as their reports in the IPython shell ``ipython`` (Jupyter):
    an HTML formatter for each of ``NOTEBOOK_TYPES``, registered by class name, so nothing is
    imported until one is shown. Importing ``perfkit_core`` inside IPython does this; in a shell
    started after that, ``%load_ext perfkit_core`` does it."""
    formatter = ipython.display_formatter.formatters["text/html"]
    for module, name in NOTEBOOK_TYPES:
        formatter.for_type_by_name(module, name, _notebook_html)


def _notebook_html(value: Any) -> str:
    from perfkit_core.report.notebook import notebook_html

    return notebook_html(value)


def _register_in_ipython() -> None:
    """``load_ipython_extension`` on the running IPython shell, if there is one."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython else None
    if shell is not None and hasattr(shell, "display_formatter"):
        load_ipython_extension(shell)


_register_in_ipython()
