"""The plugin manager: one factory, built-in plugins in one tuple, entry points, blocking."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import warnings
from collections.abc import Iterable
from typing import Any

import pluggy

from perfkit_core import hookspecs

#: Entry-point group third-party plugins (and perfkit's own adapters) register under.
ENTRY_POINT_GROUP = "perfkit"
#: Plugins that ship inside perfkit_core, registered before any entry point, in this order.
BUILTIN_PLUGINS: tuple[str, ...] = ("perfkit_core.views", "perfkit_core.advice")
#: Environment variable with comma-separated plugin names to block (``torch,paddle,...``).
DISABLE_ENV = "PERFKIT_DISABLE_PLUGINS"

_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_reported_failures: set[str] = set()


def disabled_plugins(value: str | None = None) -> set[str]:
    """Return the plugin names blocked by ``PERFKIT_DISABLE_PLUGINS`` (or by ``value``)."""
    raw = os.environ.get(DISABLE_ENV, "") if value is None else value
    return {name.strip() for name in raw.split(",") if name.strip()}


def _report_failure(name: str, target: str, exc: BaseException) -> None:
    key = f"{name}={target}"
    if key in _reported_failures:
        return
    _reported_failures.add(key)
    warnings.warn(
        f"perfkit: plugin {name!r} ({target}) failed to load and is skipped: "
        f"{type(exc).__name__}: {exc}",
        RuntimeWarning,
        stacklevel=3,
    )


def _entry_points() -> Iterable[Any]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def make_plugin_manager(
    *, disabled: Iterable[str] | None = None, load_entry_points: bool = True
) -> pluggy.PluginManager:
    """Return a new plugin manager with the built-in plugins and the installed entry points.

    ``disabled`` names plugins to block (default: ``PERFKIT_DISABLE_PLUGINS``); a blocked name is
    never imported. A plugin that fails to import is reported once per process with a
    ``RuntimeWarning`` and skipped. ``check_pending()`` runs last, so a misspelled hook name in
    any plugin raises ``pluggy.PluginValidationError``.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    blocked = disabled_plugins() if disabled is None else set(disabled)
    for name in blocked:
        pm.set_blocked(name)
    for module_name in BUILTIN_PLUGINS:
        short = module_name.rsplit(".", 1)[-1]
        if short in blocked or module_name in blocked:
            continue
        module = importlib.import_module(module_name)
        pm.register(module, name=module_name)
    if load_entry_points:
        for ep in _entry_points():
            if ep.name in blocked or pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must not take perfkit down
                _report_failure(ep.name, ep.value, exc)
                continue
            pm.register(plugin, name=ep.name)
    pm.check_pending()
    return pm


def get_plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, building it on first use."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = make_plugin_manager()
        return _manager


def reset_plugin_manager() -> None:
    """Forget the process-wide plugin manager (and its views), so the next use rebuilds it."""
    global _manager
    with _lock:
        _manager = None
    from perfkit_core import advice, views

    views.clear_view_cache()
    advice.clear_advisor_cache()


def framework_infos(pm: pluggy.PluginManager | None = None) -> list[dict[str, Any]]:
    """Return what every installed adapter says about its framework (see the hook)."""
    pm = pm or get_plugin_manager()
    return [info for info in pm.hook.perfkit_framework_info() if info]


def plugin_names(pm: pluggy.PluginManager | None = None) -> list[str]:
    """Return the names of the registered plugins (blocked names excluded), in load order."""
    pm = pm or get_plugin_manager()
    return [name for name, plugin in pm.list_name_plugin() if plugin is not None]
