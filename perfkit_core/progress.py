"""Progress bars for the command line only: shown on a terminal, for work that takes over a
second; silent in library use, in pipes and in CI logs."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

_enabled = False


def enable_for_cli() -> None:
    """Turn progress bars on when standard error is a terminal (called by the CLI only)."""
    global _enabled
    _enabled = sys.stderr.isatty()


class _Quiet:
    def update(self, n: int = 1) -> None:
        return None

    def set_description(self, desc: str) -> None:
        return None


@contextlib.contextmanager
def stage(desc: str, total: int | None = None, unit: str = "step") -> Iterator[Any]:
    """A progress bar named ``desc`` (``total`` items of ``unit``, or open-ended) that appears
    only when enabled and only once the work has taken a second."""
    if not _enabled:
        yield _Quiet()
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False, delay=1.0, unit=unit)
    try:
        yield bar
    finally:
        bar.close()
