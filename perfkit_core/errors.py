"""Errors and warnings a user can act on."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str]]:
        # Raised on a Dask worker, it travels to the client pickled: keep both parts.
        return (type(self), (self.path, self.reason))


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


class OptionError(ValueError):
    """An option that does not fit the input it is applied to (a rank the run does not hold, a
    device metric for a run without device events). ``str(error)`` is one line."""


@contextlib.contextmanager
def writing(output: Path) -> Iterator[None]:
    """Turn an ``OSError`` raised while writing ``output`` into a one-line ``OutputError``
    naming ``output`` (and the part of the path at fault, when it is another)."""
    try:
        yield
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else None
        reason = exc.strerror or str(exc)
        if where and exc.errno in (errno.EEXIST, errno.ENOTDIR):
            blocker = next((p for p in [Path(where), *Path(where).parents] if p.is_file()), None)
            if blocker is not None:
                reason, where = f"{printable(str(blocker))} is a file, not a folder", None
        elif where and Path(where).name.startswith(".") and where.endswith(".tmp"):
            where = None  # the temporary file written beside the output
        if where and Path(where) != output and str(where) not in reason:
            reason = f"{reason} ({printable(where)})"
        raise OutputError(output, f"cannot write it: {reason}") from None


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """perfkit's own warnings as one line on stderr; others as Python shows them."""
    if issubclass(category, TraceWarning):
        (file or sys.stderr).write(f"perfkit: warning: {printable(str(message))}\n")
    else:
        (file or sys.stderr).write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )
