"""The training list: every run under a log folder, found by what is cheap to read.

A listing walks the folder (symbolic links are not followed) and reads only file names, file
stats and saved runs' ``meta.json``: saved runs and saved jobs (folders with ``meta.json``),
folders an installed adapter reads as one run (MindSpore's and XLA's log folders), folders of
per-rank traces (jobs), and trace files (``*.json``, ``*.json.gz``, ``*.pb``). Which adapter reads
a trace file is asked of the adapters from its first bytes. A run still being written shows as
``in progress``: a folder with an event table and no ``meta.json`` yet, a temporary file of an
atomic write, a trace file changed within the last ``SETTLE_S`` seconds, or a handler's run
folder whose conversion helper finishes it after its program exited. A handler's run folder
whose conversion is queued while its program runs is a ready run, read from its native trace
with the metadata the handler gave it (``perfkit_core.events.pending``).

A run's id is its path under the log folder (``/``-separated); ``resolve`` turns an id back into
a path and refuses anything that leaves the folder (``..``, absolute paths, links that point
out of it).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit_core.events import pending
from perfkit_core.events.loading import TRACE_SUFFIXES
from perfkit_core.events.pending import PENDING_FILE
from perfkit_core.events.run import EVENTS_DIR, EVENTS_FILE, META_FILE

__all__ = ["META_FILE", "TRACE_SUFFIXES", "Catalog", "Entry", "NotInLogdir", "resolve"]

#: A trace file changed this recently is still being written.
SETTLE_S = 2.0
#: How many files of a folder are read for a folder's identity.
IDENTITY_FILES = 64


@dataclass
class Entry:
    """One run in the list: ``id`` (its path under the log folder), ``kind`` (``run``, ``job``,
    ``trace`` or ``folder``), ``status`` (``ready``, ``in progress`` or ``error``), and what is
    known without analysing it."""

    id: str
    path: Path
    kind: str
    status: str = "ready"
    error: str | None = None
    framework: str | None = None
    host: str | None = None
    mtime: float = 0.0
    size: int = 0
    steps: int | None = None
    identity: tuple[Any, ...] = field(default_factory=tuple)

    @property
    def folder(self) -> str:
        """The folder the run sits in, under the log folder (empty at the top)."""
        return self.id.rpartition("/")[0]

    @property
    def name(self) -> str:
        return self.id.rpartition("/")[2]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "folder": self.folder,
            "kind": self.kind,
            "status": self.status,
            "error": self.error,
            "framework": self.framework,
            "host": self.host,
            "date": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.mtime)),
            "mtime": self.mtime,
            "size_bytes": self.size,
            "steps": self.steps,
        }


class NotInLogdir(LookupError):
    """An id that names nothing inside the log folder."""


def resolve(root: Path, run_id: str) -> Path:
    """The path of ``run_id`` under ``root``; ``NotInLogdir`` for an absolute path, a ``..``
    part, or a path whose real location (links followed) is outside ``root``."""
    if not run_id or run_id.startswith(("/", "\\")) or ":" in run_id.split("/", 1)[0]:
        raise NotInLogdir(run_id)
    parts = run_id.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise NotInLogdir(run_id)
    real_root = root.resolve()
    path = real_root.joinpath(*parts)
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise NotInLogdir(run_id) from None
    if real != real_root and real_root not in real.parents:
        raise NotInLogdir(run_id)
    return path


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def _folder_identity(path: Path) -> tuple[tuple[Any, ...], float, int]:
    """(the names, sizes and times of a folder's files, its latest time, its total size)."""
    items = []
    latest = 0.0
    total = 0
    try:
        names = sorted(os.listdir(path))[:IDENTITY_FILES]
    except OSError:
        return (), 0.0, 0
    for name in names:
        st = _stat(path / name)
        if st is None:
            continue
        items.append((name, st.st_size, st.st_mtime_ns))
        latest = max(latest, st.st_mtime)
        total += st.st_size
    return tuple(items), latest, total


def _saved(root: Path, path: Path) -> Entry:
    identity, latest, total = _folder_identity(path)
    entry = Entry(_id(root, path), path, "run", mtime=latest, size=total, identity=identity)
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError) as exc:
        entry.status, entry.error = "error", f"{META_FILE}: {exc}"
        return entry
    if not isinstance(meta, dict):
        entry.status, entry.error = "error", f"{META_FILE} is not a JSON object"
        return entry
    if meta.get("layout"):
        entry.kind = "job"
    entry.framework = str(meta.get("framework") or "") or None
    entry.host = str(meta.get("host") or meta.get("worker") or "") or None
    steps = meta.get("steps")
    if isinstance(steps, list):
        ranks = meta.get("ranks")
        entry.steps = (
            round(len(steps) / max(len(ranks), 1)) if isinstance(ranks, list) else len(steps)
        )
    return entry


def _queued(root: Path, path: Path) -> Entry:
    """A folder whose native trace the conversion helper has yet to save as a run (it holds
    the note ``PENDING_FILE``): in progress while the helper finishes it after its program
    exited; otherwise ready, and read from the trace with the note's metadata (the same run
    the helper will save)."""
    identity, latest, total = _folder_identity(path)
    entry = Entry(_id(root, path), path, "run", mtime=latest, size=total, identity=identity)
    note = pending.read_note(path) or {}
    meta = note.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    entry.framework = str(meta.get("framework") or "") or None
    entry.host = str(meta.get("host") or "") or None
    if pending.finishing(note):
        entry.status = "in progress"
    elif not Path(str(note.get("trace") or "")).is_file():
        entry.status, entry.error = "error", f"{PENDING_FILE}: its native trace is gone"
    return entry


def _id(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


class Catalog:
    """The runs under ``root``; ``scan()`` lists them anew (cheaply) each time it is called and
    remembers each trace file's size, so a file still growing shows as in progress."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._seen: dict[str, tuple[int, int]] = {}
        # what reading a file's first bytes told, by the file's identity: each trace's
        # framework, and whether a folder's traces are one job (read again only when changed)
        self._frameworks: dict[tuple[str, tuple[int, int]], str | None] = {}
        self._jobs: dict[tuple[str, tuple[Any, ...]], bool] = {}

    def scan(self) -> list[Entry]:
        from perfkit_core.plugins import get_plugin_manager

        pm = get_plugin_manager()
        root = self.root
        found: list[Entry] = []
        now = time.time()
        seen: dict[str, tuple[int, int]] = {}
        frameworks: dict[tuple[str, tuple[int, int]], str | None] = {}
        jobs: dict[tuple[str, tuple[Any, ...]], bool] = {}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            dirnames.sort()
            names = set(filenames)
            if here != root and META_FILE in names:
                found.append(_saved(root, here))
                dirnames[:] = []
                continue
            if here != root and PENDING_FILE in names:
                found.append(_queued(root, here))
                dirnames[:] = []
                continue
            if here != root and ({EVENTS_FILE, EVENTS_DIR} & (names | set(dirnames))):
                identity, latest, total = _folder_identity(here)
                found.append(
                    Entry(_id(root, here), here, "run", "in progress", mtime=latest, size=total)
                )
                dirnames[:] = []
                continue
            if here != root and _claims_folder(pm, here):
                identity, latest, total = _folder_identity(here)
                entry = Entry(_id(root, here), here, "folder", mtime=latest, size=total)
                entry.identity = identity
                found.append(entry)
                dirnames[:] = []
                continue
            traces = []
            for name in sorted(filenames):
                path = here / name
                if name.startswith(".") and name.endswith(".tmp"):
                    target = name[1:].rsplit(".", 2)[0]
                    if target.endswith(TRACE_SUFFIXES) or target == META_FILE:
                        found.append(
                            Entry(_id(root, here / target), here / target, "trace", "in progress")
                        )
                    continue
                if name.startswith(".") or not name.endswith(TRACE_SUFFIXES):
                    continue
                st = _stat(path)
                if st is None or not os.path.isfile(path) or not _inside(root, path):
                    continue
                entry = Entry(_id(root, path), path, "trace", mtime=st.st_mtime, size=st.st_size)
                entry.identity = (st.st_size, st.st_mtime_ns)
                seen[entry.id] = (st.st_size, st.st_mtime_ns)
                before = self._seen.get(entry.id)
                if now - st.st_mtime < SETTLE_S or (
                    before is not None and before != entry.identity
                ):
                    entry.status = "in progress"
                elif st.st_size == 0:
                    entry.status, entry.error = "error", f"{name}: the file is empty"
                else:
                    known = (entry.id, (st.st_size, st.st_mtime_ns))
                    if known not in self._frameworks:
                        self._frameworks[known] = _framework_of(pm, path)
                    entry.framework = self._frameworks[known]
                    frameworks[known] = entry.framework
                traces.append(entry)
            ready = [e for e in traces if e.status == "ready"]
            together = (_id(root, here), tuple((e.id, e.identity) for e in ready))
            if here != root and len(ready) > 1 and together not in self._jobs:
                self._jobs[together] = _is_job(here, [e.path for e in ready])
            if here != root and len(ready) > 1:
                jobs[together] = self._jobs[together]
            if here != root and len(ready) > 1 and self._jobs[together]:
                identity, latest, total = _folder_identity(here)
                job = Entry(_id(root, here), here, "job", mtime=latest, size=total)
                job.identity = identity
                job.framework = ready[0].framework
                found.append(job)
                dirnames[:] = []
                continue
            found.extend(traces)
        self._seen = seen
        self._frameworks, self._jobs = frameworks, jobs  # forget what is gone
        return [e for e in found if e.id]


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (a link followed) is inside ``root``."""
    if not path.is_symlink():
        return True
    try:
        real, real_root = path.resolve(strict=True), root.resolve()
    except (OSError, RuntimeError):
        return False
    return real_root in real.parents


def _claims_folder(pm: Any, path: Path) -> bool:
    try:
        return pm.hook.perfkit_claim_folder(path=path) is not None
    except Exception:  # an adapter that cannot tell: not a folder run
        return False


def _framework_of(pm: Any, path: Path) -> str | None:
    """The framework of the trace at ``path``, from its first bytes (the adapter that would
    read it); None when no installed adapter knows it."""
    from perfkit_core.errors import TraceError
    from perfkit_core.events.loading import read_head
    from perfkit_core.plugins import adapter_for

    try:
        head = read_head(path)
    except (TraceError, OSError):
        return None
    wanted = adapter_for(path, head)
    # named as a saved run's metadata names it: the adapter's (``perfkit_torch`` -> ``torch``)
    return wanted.plugin.removeprefix("perfkit_") if wanted is not None else None


def _is_job(path: Path, traces: list[Path]) -> bool:
    """Whether the folder ``path`` is one job: its traces each record a rank of their own (a
    folder of traces that record no rank, such as several runs of one program, lists its
    files one by one)."""
    from perfkit_core.jobs import is_job
    from perfkit_core.jobs.inputs import recorded_ranks

    try:
        ranks = recorded_ranks(traces)
        if None in ranks or len(set(ranks)) != len(ranks):
            return False
        return is_job(path)
    except Exception:  # a folder that cannot be read as a job lists its files one by one
        return False
