"""perfkit for Keras ``model.fit`` (TensorFlow backend): ``PerfkitCallback(log_dir,
profile_batch=(start, stop))``, a ``keras.callbacks.Callback`` that profiles the steps you name
with TensorFlow's profiler, as Keras' TensorBoard callback does, and saves each window as a
perfkit run.

Importing this module needs neither Keras nor TensorFlow; the class is made (subclassing
``keras.callbacks.Callback``) when it is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_xla.keras_callback import PerfkitCallback

__all__ = ["PerfkitCallback"]


def __getattr__(name: str) -> Any:
    if name == "PerfkitCallback":
        from perfkit_xla.keras_callback import PerfkitCallback

        return PerfkitCallback
    raise AttributeError(f"module 'perfkit_xla.keras' has no attribute {name!r}")
