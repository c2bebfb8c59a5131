"""Errors and warnings a user can act on."""

from __future__ import annotations

import os


def printable(text: str) -> str:
    """Return ``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1b``).

    File names may hold any character but "/" and NUL; a message naming one must still be one
    line on a terminal, so what a terminal would act on is written the way Python's ``repr``
    writes it. Undecodable bytes of a file name (surrogate escapes) come out as ``\\udcff``.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class TraceError(Exception):
    """A trace or saved run that perfkit cannot read.

    ``str(error)`` is one line: the file and what is wrong with it. ``path`` and ``reason`` hold
    the two parts (``path`` as given; the message escapes line breaks and control characters).
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = printable(" ".join(str(reason).split()))
        super().__init__(f"{printable(self.path)}: {self.reason}")


class OutputError(TraceError):
    """A file or folder perfkit was asked to write and cannot (``-o`` under a file, a read-only
    or full file system). One line, like ``TraceError``: the path and the reason."""


class TraceWarning(UserWarning):
    """Something perfkit read and did not use (events it skipped, names it had to change).

    The message is one line naming the file; the counts are also kept in the run's metadata
    (``meta["accounting"]``), so reports can say the same.
    """


class UnknownViewError(KeyError):
    """A summary view name that no installed plugin provides."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown view"
