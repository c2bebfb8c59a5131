"""Errors a user can act on."""

from __future__ import annotations

import os


class TraceError(Exception):
    """A trace or saved run that perfkit cannot read.

    ``str(error)`` is one line: the file and what is wrong with it. ``path`` and ``reason`` hold
    the two parts.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = " ".join(str(reason).split())
        super().__init__(f"{self.path}: {self.reason}")

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str]]:
        # Raised on a Dask worker, it travels to the client pickled: keep both parts.
        return (type(self), (self.path, self.reason))


class UnknownViewError(KeyError):
    """A summary view name that no installed plugin provides."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown view"


class OptionError(ValueError):
    """An option that does not fit the input it is applied to (a rank the run does not hold, a
    device metric for a run without device events). ``str(error)`` is one line."""
