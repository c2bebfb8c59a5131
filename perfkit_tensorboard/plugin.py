"""The TensorBoard plugin: ``perfkit serve``'s app (``perfkit_core.serve.create_app``) over
TensorBoard's ``--logdir``, mounted at ``/data/plugin/perfkit/app/``, with an ES module that
shows it in the tab. The tab is listed only while the log folder holds perfkit runs or profiler
traces (``is_active``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tensorboard.plugins import base_plugin

#: The plugin's name: its routes are under ``/data/plugin/perfkit``.
PLUGIN_NAME = "perfkit"
#: Where the app is mounted, under the plugin's routes.
APP_ROUTE = "/app"
#: ``is_active``'s answer is kept this long (TensorBoard asks on every page load).
ACTIVE_TTL_S = 10.0

STATIC = Path(__file__).parent / "static"


def holds_runs(logdir: Path) -> bool:
    """Whether ``logdir`` holds a perfkit run (a folder with ``meta.json``) or a file a profiler
    trace may be (``*.json``, ``*.json.gz``, ``*.pb``): stops at the first found."""
    from perfkit_core.serve.catalog import META_FILE, TRACE_SUFFIXES

    for _, _, files in os.walk(logdir, followlinks=False):
        for name in files:
            if name == META_FILE or (name.endswith(TRACE_SUFFIXES) and not name.startswith(".")):
                return True
    return False


def mounted(app: Callable[..., Iterable[bytes]], prefix: str) -> Callable[..., Iterable[bytes]]:
    """``app`` as a WSGI app mounted at ``prefix``: the part of the path up to and including
    ``prefix`` moves to ``SCRIPT_NAME``, so its pages link under it."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        at = path.find(prefix)
        if at >= 0:
            environ = dict(environ)
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + path[: at + len(prefix)]
            environ["PATH_INFO"] = path[at + len(prefix) :] or "/"
        return app(environ, start_response)

    return wsgi


class PerfkitPlugin(base_plugin.TBPlugin):
    """perfkit's tab in TensorBoard."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: Any) -> None:
        self._logdir = Path(context.logdir or ".")
        self._app: Any = None
        self._lock = threading.Lock()
        self._active: tuple[float, bool] = (0.0, False)

    def _serve(self) -> Any:
        with self._lock:
            if self._app is None:
                from perfkit_core.serve import create_app

                self._app = mounted(
                    create_app(self._logdir), f"/data/plugin/{PLUGIN_NAME}{APP_ROUTE}"
                )
            return self._app

    def get_plugin_apps(self) -> dict[str, Any]:
        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            return self._serve()(environ, start_response)

        def index_js(
            environ: dict[str, Any], start_response: Callable[..., Any]
        ) -> Iterable[bytes]:
            body = (STATIC / "index.js").read_bytes()
            start_response(
                "200 OK",
                [
                    ("Content-Type", "text/javascript"),
                    ("Content-Length", str(len(body))),
                    ("X-Content-Type-Options", "nosniff"),
                ],
            )
            return [body]

        # TensorBoard matches a path without its trailing slash, so the app's list is reached
        # at app/runs (the app's "/" too), never at app/ itself
        return {"/index.js": index_js, APP_ROUTE + "/*": app}

    def is_active(self) -> bool:
        when, active = self._active
        if time.monotonic() - when > ACTIVE_TTL_S:
            active = self._logdir.is_dir() and holds_runs(self._logdir)
            self._active = (time.monotonic(), active)
        return active

    def frontend_metadata(self) -> Any:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="perfkit")
