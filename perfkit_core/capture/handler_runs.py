"""What every trainer integration tells its user about the runs it saved: ``runs``,
``failures`` and ``wait()``, read from its ``handler`` (perfkit's handler of its framework)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class HandlerRuns:
    """``runs``, ``failures`` and ``wait()`` of an integration whose ``handler`` saves its
    windows (a ``perfkit_core.capture.RunHandler``)."""

    handler: Any

    @property
    def runs(self) -> list[Path]:
        """The saved run folders, one per window (waits for conversions still queued)."""
        return list(self.handler.runs)

    @property
    def failures(self) -> list[tuple[Path, str]]:
        """``(path kept or meant, reason)`` for what went wrong (waits for conversions still
        queued)."""
        return list(self.handler.failures)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the windows still being saved; False on timeout."""
        return bool(self.handler.wait(timeout))
