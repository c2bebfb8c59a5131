"""perfkit for ``pytorch_lightning.Trainer``: ``PerfkitProfiler(dirpath)``, passed as
``Trainer(profiler=...)``.

``pytorch_lightning`` (the ``pytorch-lightning`` distribution) is Lightning under its older
package name, and its ``Trainer`` accepts only a profiler built on its own ``Profiler`` class.
This ``PerfkitProfiler`` is ``perfkit_torch.lightning.PerfkitProfiler`` (the same arguments,
windows, runs and summary) built on that class.

Importing this module needs neither torch nor ``pytorch_lightning``; ``PerfkitProfiler``
imports it when first used, and says in one line what to install when it is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfkit_torch import lightning

if TYPE_CHECKING:
    PerfkitProfiler: type  # built on first use (``__getattr__``)

__all__ = ["PerfkitProfiler"]


def __getattr__(name: str) -> Any:
    if name == "PerfkitProfiler":
        built = lightning._built
        if __name__ not in built:
            built[__name__] = lightning._build("pytorch_lightning", __name__)
        return built[__name__]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
