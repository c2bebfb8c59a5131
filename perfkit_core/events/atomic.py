"""Atomic file writes: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from perfkit_core.errors import OutputError


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


#: The file a process holds in a folder while it saves a run there: ``<pid> <host>``.
CLAIM_FILE = ".perfkit-saving"


def _claim_owner(claim: Path) -> tuple[int, str] | None:
    """(pid, host) written in a claim file; None when it cannot be read (being written)."""
    try:
        pid, host = claim.read_text().split(maxsplit=1)
        return int(pid), host.strip()
    except (OSError, ValueError):
        return None


def process_alive(pid: int, host: str) -> bool:
    """Whether the process ``pid`` on ``host`` may still run (another host's: assume so)."""
    import socket

    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, and belongs to someone else
        return True
    return True


@contextlib.contextmanager
def claim_folder(directory: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold ``directory`` (created if missing) for one writer while the block runs; yield it.

    The claim is a file (``CLAIM_FILE``) created exclusively, so of two processes saving into
    one folder at once the second gets an ``OutputError`` saying so, instead of silently
    replacing the first's run. A claim left by a process that is gone (killed while saving) is taken over, and the
    hidden temporary files it left are removed (``remove_leftovers``).
    """
    import socket

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    claim = directory / CLAIM_FILE
    for _attempt in range(3):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = _claim_owner(claim)
            if owner is None or process_alive(*owner):
                who = f"process {owner[0]} on {owner[1]}" if owner else "another process"
                raise OutputError(
                    directory, f"{who} is saving a run into it; save into another folder"
                ) from None
            remove_leftovers(directory)  # the claim and files of a writer that stopped
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid()} {socket.gethostname()}")
        break
    else:  # pragma: no cover - three claims made and lost in a row
        raise OutputError(directory, "other processes keep saving runs into it")
    try:
        yield directory
    finally:
        with contextlib.suppress(OSError):
            if _claim_owner(claim) == (os.getpid(), socket.gethostname()):
                claim.unlink()


def saving_owner(directory: str | os.PathLike[str]) -> tuple[int, str] | None:
    """(pid, host) of the live process saving a run into ``directory``, None when none is."""
    owner = _claim_owner(Path(directory) / CLAIM_FILE)
    return owner if owner is not None and process_alive(*owner) else None


def remove_leftovers(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove what a writer that stopped mid-save left in ``directory`` (its claim file and the
    hidden temporary files of ``atomic_path``, in the folder and in a saved job's rank folders);
    return what was removed. Call it only for a folder no live process writes to."""
    directory = Path(directory)
    removed = []
    candidates = [directory / CLAIM_FILE]
    for folder in (directory, *sorted(directory.glob("events/rank=*"))):
        with contextlib.suppress(OSError):
            candidates += [
                p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")
            ]
    for path in candidates:
        try:
            path.unlink()
            removed.append(path)
        except OSError:
            continue
    return removed
