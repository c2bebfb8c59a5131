"""Atomic file writes: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it to ``target``.

    On an exception the temporary file is removed and ``target`` is left as it was.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600 files; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_paths(*targets: str | os.PathLike[str]) -> Iterator[list[Path]]:
    """Yield one temporary path beside each of ``targets``; when the block succeeds, rename them
    to their targets in the order given (so the last target appears last). On an exception every
    temporary file is removed and the targets are left as they were."""
    temps: list[Path] = []
    try:
        for name in targets:
            target = Path(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, made = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            os.close(fd)
            temps.append(Path(made))
        yield list(temps)
        umask = os.umask(0)
        os.umask(umask)
        for temp in temps:
            os.chmod(temp, 0o666 & ~umask)
        for temp, name in zip(temps, targets, strict=True):
            os.replace(temp, name)
    except BaseException:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()
        raise


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_with(target: str | os.PathLike[str], writer: Callable[[IO[bytes]], None]) -> None:
    """Call ``writer`` with a binary file object and move what it wrote to ``target`` atomically."""
    with atomic_path(target) as tmp, open(tmp, "wb") as fh:
        writer(fh)
