"""perfkit adapter for TensorFlow and JAX (the XLA profiler).

``perfkit_xla.profile(dir)`` profiles a block with JAX's (or TensorFlow's) own profiler and
saves it as a perfkit run; ``load_xplane`` and ``load_log_dir`` read the profiles both write
(``*.xplane.pb``, ``LOG_DIR/plugins/profile/<run>/``). Reading needs neither framework: the
XSpace protobuf is decoded by ``perfkit_xla.xspace`` (protobuf's compiled parser and NumPy). jax
and tensorflow are imported only when a profile is taken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_xla.capture import ProfileSession, profile
    from perfkit_xla.model import describe_model
    from perfkit_xla.xplane import load_log_dir, load_xplane, run_from_xspace

__all__ = [
    "ProfileSession",
    "describe_model",
    "load_log_dir",
    "load_xplane",
    "profile",
    "run_from_xspace",
]

_LAZY = {
    "profile": "perfkit_xla.capture",
    "ProfileSession": "perfkit_xla.capture",
    "describe_model": "perfkit_xla.model",
    "load_xplane": "perfkit_xla.xplane",
    "load_log_dir": "perfkit_xla.xplane",
    "run_from_xspace": "perfkit_xla.xplane",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfkit_xla' has no attribute {name!r}")
