"""Plugins: every hook perfkit calls (``hookspecs``) and the plugin manager (``manager``).

This layer imports nothing else from perfkit: events, views, advice and the adapters build on
it. Plugins mark their hook functions with ``hookimpl``.
"""

from __future__ import annotations

from perfkit_core.plugins.hookspecs import (
    DEMO_TIMED_PER_PROFILED,
    PROJECT_NAME,
    TraceLoader,
    hookimpl,
    hookspec,
)
from perfkit_core.plugins.known import (
    KNOWN_ADAPTERS,
    KnownAdapter,
    adapter_for,
    installed_version,
)
from perfkit_core.plugins.manager import (
    BUILTIN_PLUGINS,
    DISABLE_ENV,
    ENTRY_POINT_GROUP,
    FRAMEWORKS_ATTR,
    disabled_plugins,
    framework_hook,
    framework_infos,
    get_plugin_manager,
    make_plugin_manager,
    plugin_names,
    registrations,
    reset_plugin_manager,
)

__all__ = [
    "BUILTIN_PLUGINS",
    "DEMO_TIMED_PER_PROFILED",
    "DISABLE_ENV",
    "ENTRY_POINT_GROUP",
    "FRAMEWORKS_ATTR",
    "KNOWN_ADAPTERS",
    "PROJECT_NAME",
    "KnownAdapter",
    "TraceLoader",
    "adapter_for",
    "disabled_plugins",
    "framework_hook",
    "framework_infos",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "installed_version",
    "make_plugin_manager",
    "plugin_names",
    "registrations",
    "reset_plugin_manager",
]
