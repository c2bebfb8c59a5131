"""The view registry: which summary views the installed plugins provide, per plugin manager."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import UnknownViewError
from perfkit_core.plugins import get_plugin_manager, registrations

if TYPE_CHECKING:
    import pandas as pd
    import pluggy

    from perfkit_core.events.run import Run


@dataclass(frozen=True)
class ViewSpec:
    """A registered view: its name, the function computing it, and a one-line description."""

    name: str
    function: Callable[..., pd.DataFrame]
    description: str


def registered_views(pm: pluggy.PluginManager | None = None) -> dict[str, ViewSpec]:
    """Return every view the plugins of ``pm`` (default: the process-wide manager) register."""
    found = registrations(pm or get_plugin_manager(), "perfkit_register_views")
    return {
        name: ViewSpec(name, values[0], values[1] if len(values) > 1 else "")
        for name, values in found.items()
    }


def get_view(name: str, pm: pluggy.PluginManager | None = None) -> ViewSpec:
    """Return the view called ``name``; ``UnknownViewError`` lists the known ones otherwise."""
    views = registered_views(pm)
    if name not in views:
        raise UnknownViewError(f"unknown view {name!r}; known views: {', '.join(sorted(views))}")
    return views[name]


def summary(run: Run, view: str, **options: Any) -> pd.DataFrame:
    """Return the summary table ``view`` of ``run`` (what ``Run.summary`` returns)."""
    return get_view(view).function(run, **options)
