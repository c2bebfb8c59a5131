"""The plugin manager: one factory, built-in plugins in one tuple, entry points, blocking, and
the registries that collection hooks fill (kept per plugin manager, never cleared from outside).

The built-in plugins are named here as strings and imported by the factory, as entry points are:
the plugin layer sits below the events, views and advice layers and imports none of them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import warnings
import weakref
from collections.abc import Iterable
from typing import Any

import pluggy

from perfkit_core.plugins import hookspecs

#: Entry-point group third-party plugins (and perfkit's own adapters) register under.
ENTRY_POINT_GROUP = "perfkit"
#: Plugins that ship inside perfkit_core, registered before any entry point, in this order.
BUILTIN_PLUGINS: tuple[str, ...] = ("perfkit_core.views.builtin", "perfkit_core.advice.rules")
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


def adapter_distributions() -> dict[str, str]:
    """Entry-point name -> ``distribution version`` of every installed plugin distribution."""
    out = {}
    for ep in _entry_points():
        dist = getattr(ep, "dist", None)
        out[ep.name] = f"{dist.name} {dist.version}" if dist is not None else ep.value
    return out


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
        if module_name in blocked:
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
    """Forget the process-wide plugin manager, so the next use rebuilds it (and its registries)."""
    global _manager
    with _lock:
        _manager = None


_registries: weakref.WeakKeyDictionary[pluggy.PluginManager, dict[str, tuple[Any, Any]]] = (
    weakref.WeakKeyDictionary()
)
_registries_lock = threading.Lock()


#: The attribute of an adapter's plugin (its module) naming the frameworks it answers for: the
#: hooks that take ``framework`` reach it only for those (``framework_hook``).
FRAMEWORKS_ATTR = "PERFKIT_FRAMEWORKS"


def plugin_frameworks(plugin: object) -> tuple[str, ...] | None:
    """The frameworks ``plugin`` answers for (its ``PERFKIT_FRAMEWORKS``), or None when it
    names none: a plugin that answers for every framework, or tests ``framework`` itself."""
    named = getattr(plugin, FRAMEWORKS_ATTR, None)
    if named is None:
        return None
    return (named,) if isinstance(named, str) else tuple(str(f) for f in named)


def framework_hook(name: str, framework: str, pm: pluggy.PluginManager | None = None) -> Any:
    """The caller of hook ``name`` (one that takes ``framework``) that reaches only the
    plugins answering for ``framework``: an adapter whose ``PERFKIT_FRAMEWORKS`` names it, and
    every plugin that names no framework. So an adapter's hook implementations answer for
    their own framework without testing the argument, while a third-party adapter written
    against the hook's signature alone, testing ``framework`` itself, still works. Call it as
    the hook: ``framework_hook("perfkit_remedy", "torch")(finding=f, framework="torch")``."""
    pm = pm or get_plugin_manager()
    others = [
        plugin
        for plugin in pm.get_plugins()
        if (named := plugin_frameworks(plugin)) is not None and framework not in named
    ]
    if not others:
        return getattr(pm.hook, name)
    return pm.subset_hook_caller(name, remove_plugins=others)


def registrations(pm: pluggy.PluginManager, hook_name: str) -> dict[str, tuple[Any, ...]]:
    """Return what the plugins of ``pm`` register through the collection hook ``hook_name``.

    Every implementation of the hook is called with a ``register(key, *values)`` callback, in
    registration order (built-ins first), so a plugin registered later replaces an earlier
    registration of the same key. The result is ``key -> values``. It is kept per plugin
    manager and built again when the manager's plugins change (a plugin registered or
    unregistered), so nothing has to clear it.
    """
    plugins = tuple(sorted(id(p) for p in pm.get_plugins()))
    with _registries_lock:
        per_pm = _registries.setdefault(pm, {})
        cached = per_pm.get(hook_name)
        if cached is not None and cached[0] == plugins:
            return dict(cached[1])
        found: dict[str, tuple[Any, ...]] = {}

        def register(key: str, *values: Any) -> None:
            found[key] = values

        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            impl.function(register=register)
        per_pm[hook_name] = (plugins, found)
        return dict(found)


def framework_infos(pm: pluggy.PluginManager | None = None) -> list[dict[str, Any]]:
    """Return what every installed adapter says about its framework (see the hook)."""
    pm = pm or get_plugin_manager()
    return [info for info in pm.hook.perfkit_framework_info() if info]


def plugin_names(pm: pluggy.PluginManager | None = None) -> list[str]:
    """Return the names of the registered plugins (blocked names excluded), in load order."""
    pm = pm or get_plugin_manager()
    return [name for name, plugin in pm.list_name_plugin() if plugin is not None]
