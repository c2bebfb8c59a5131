"""perfkit inside TensorBoard: ``PerfkitPlugin``, a dynamic plugin (entry point
``tensorboard_plugins``) whose tab is ``perfkit serve``'s app over TensorBoard's log folder."""

from __future__ import annotations

__all__ = ["PerfkitPlugin"]


def __getattr__(name: str) -> object:
    if name == "PerfkitPlugin":  # TensorBoard imports the plugin module itself
        from perfkit_tensorboard.plugin import PerfkitPlugin

        return PerfkitPlugin
    raise AttributeError(name)
