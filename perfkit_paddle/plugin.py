"""perfkit plugin for PaddlePaddle. Never imports paddle at import time."""

from __future__ import annotations

from typing import Any

from perfkit_core.hookspecs import hookimpl


@hookimpl
def perfkit_framework_info() -> dict[str, Any]:
    """Say whether paddle is installed, and which version, without importing it."""
    import importlib.metadata

    version: str | None = None
    for dist in ("paddlepaddle", "paddlepaddle-gpu"):
        try:
            version = importlib.metadata.version(dist)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"framework": "paddle", "installed": version is not None, "version": version}
