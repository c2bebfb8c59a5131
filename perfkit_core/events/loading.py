"""``load(path)``: a saved run, a trace file an installed adapter claims, or a folder of ranks."""

from __future__ import annotations

import codecs
import errno
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.errors import TraceError
from perfkit_core.events.inflate import gunzip
from perfkit_core.events.run import META_FILE, Run, is_saved_run

if TYPE_CHECKING:
    import pluggy

HEAD_BYTES = 64 * 1024
#: How a chrome trace written by perfkit's own export begins (see ``report.export``).
PERFKIT_EXPORT_HEAD = b'{"otherData": {"producer": "perfkit"'
#: File names a folder of per-rank traces may hold.
TRACE_SUFFIXES = (".json", ".json.gz", ".pb")


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """Return the first ``size`` bytes of ``path``, decompressed when it is gzip, without a UTF-8
    byte-order mark."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
            fh.seek(0)
            if magic != b"\x1f\x8b":
                return _without_bom(fh.read(size))
            # Only the start is needed; what follows (a cut end, trailing bytes) is for the
            # full read to report.
            inflater = zlib.decompressobj(wbits=31)
            head = b""
            while len(head) < size and not inflater.eof:
                chunk = fh.read(HEAD_BYTES)
                if not chunk:
                    break
                head += inflater.decompress(chunk, size - len(head))
                while len(head) < size and inflater.unconsumed_tail:
                    head += inflater.decompress(inflater.unconsumed_tail, size - len(head))
            if not head and not inflater.eof:
                raise TraceError(
                    path, "broken gzip data: the file ends before the compressed data does"
                )
            return _without_bom(head)
    except IsADirectoryError:
        raise TraceError(path, "is a directory") from None
    except zlib.error as exc:
        raise TraceError(path, f"broken gzip data: {exc}") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read the file: {exc.strerror or exc}") from None


def read_trace_bytes(path: Path) -> bytes:
    """Return the bytes of a trace file, decompressed when it is gzip (several concatenated
    members are joined, as ``gunzip`` does), without a UTF-8 byte-order mark; ``TraceError``
    when unreadable, or when it inflates to more than this process can hold
    (``perfkit_core.events.inflate``)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(path, f"cannot read the file: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        data = gunzip(path, data)
    return _without_bom(data)


def _without_bom(data: bytes) -> bytes:
    # Some editors and Windows tools start UTF-8 text with a byte-order mark; JSON parsers
    # reject it, and it says nothing about the trace.
    return data[len(codecs.BOM_UTF8) :] if data[:3] == codecs.BOM_UTF8 else data


def check_path(path: Path) -> None:
    """Raise ``TraceError`` saying why ``path`` cannot be reached (missing, a broken or looping
    symbolic link, a folder on the way that cannot be searched); return when it exists."""
    try:
        os.stat(path)
        return
    except FileNotFoundError:
        if os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            raise TraceError(path, f"a broken symbolic link (to {target})") from None
        raise TraceError(path, "no such file or directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "a symbolic link loop (the link points back to itself)"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            reason = "permission denied: a folder on the way to it cannot be searched"
        elif exc.errno == errno.ENOTDIR:
            reason = "no such file or directory (a part of the path is a file)"
        else:
            reason = f"cannot reach it: {exc.strerror or exc}"
        raise TraceError(path, reason) from None


def check_folder(path: Path) -> None:
    """Raise ``TraceError`` when the folder ``path`` cannot be searched (its files cannot be
    reached: no ``x`` permission) or listed (no ``r`` permission)."""
    try:
        os.stat(os.path.join(path, "."))  # reaching anything inside needs search permission
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise TraceError(
                path, "permission denied: the folder cannot be searched (its files cannot be read)"
            ) from None
        raise TraceError(
            path, f"cannot reach what the folder holds: {exc.strerror or exc}"
        ) from None
    try:
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        raise TraceError(path, f"cannot list the folder: {exc.strerror or exc}") from None


def load(path: str | os.PathLike[str], *, pm: pluggy.PluginManager | None = None) -> Run:
    """Return the ``Run`` at ``path``.

    ``path`` may be a directory written by ``Run.save``, a trace file that an installed adapter
    claims (``perfkit_claim_trace``), a folder an installed adapter claims as one run
    (``perfkit_claim_folder``: a TensorFlow or JAX log folder), or a directory of per-rank trace
    files of one job, which are loaded one by one and combined (the ``rank`` column tells them apart). Raises
    ``TraceError`` naming the file and the reason for anything it cannot read. The run's
    ``origin`` is ``path``.
    """
    run = _load(Path(path), pm)
    run.origin = Path(path)
    return run


def _load(path: Path, pm: pluggy.PluginManager | None) -> Run:
    check_path(path)
    folder = _is_dir(path)
    if folder:
        check_folder(path)
    if is_saved_run(path) or (folder and os.path.lexists(path / META_FILE)):
        return Run.read(path)  # a meta.json it cannot read (a folder, say) says why
    if folder:
        from perfkit_core.events import pending

        if pending.has_note(path):  # a run the conversion helper has queued
            run = pending.finish(path, lambda trace: _load(trace, pm))
            if run is not None:
                return run
    from perfkit_core.progress import stage

    if folder:
        from perfkit_core.plugins import get_plugin_manager

        folder_loader = (pm or get_plugin_manager()).hook.perfkit_claim_folder(path=path)
        if folder_loader is not None:
            with stage(f"loading {path.name}"):
                run = folder_loader(path)
            if not isinstance(run, Run):
                raise TraceError(path, f"the loader returned {type(run).__name__}, not a Run")
            return run
        files = folder_traces(path, pm=pm)
        runs = []
        with stage(f"loading {path.name}", total=len(files)) as bar:
            for f in files:
                runs.append(load_trace_file(f, pm=pm))
                bar.update(1)
        return combine_runs(runs)
    with stage(f"loading {path.name}"):
        return load_trace_file(path, pm=pm)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # check_path has said why it cannot be reached
        return False


def trace_files(directory: Path) -> list[Path]:
    """Return the files directly inside ``directory`` whose names a trace may have
    (``TRACE_SUFFIXES``), sorted by name; ``TraceError`` when the folder cannot be listed."""
    try:
        return sorted(
            p
            for p in directory.iterdir()
            if p.name.endswith(TRACE_SUFFIXES) and not p.name.startswith(".") and _is_file(p)
        )
    except OSError as exc:
        raise TraceError(directory, f"cannot list the folder: {exc.strerror or exc}") from None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def folder_traces(directory: Path, *, pm: pluggy.PluginManager | None = None) -> list[Path]:
    """Return the trace files of a folder of per-rank traces (``trace_files``), when an
    installed adapter reads at least one of them (the others are ranks that will fail, each
    with its own reason). Raises ``TraceError`` for a folder holding no trace: saying which
    saved runs it holds, the adapter a file needs, or what it holds instead."""
    from perfkit_core.plugins import adapter_for, get_plugin_manager, plugin_names

    files = trace_files(directory)
    pm = pm or get_plugin_manager()
    heads: dict[Path, bytes] = {}
    for f in files:
        try:
            heads[f] = read_head(f)
        except TraceError:
            continue
        if pm.hook.perfkit_claim_trace(path=f, head=heads[f]) is not None:
            return files
    installed = set(plugin_names(pm))
    for f, head in heads.items():
        wanted = adapter_for(f, head)
        if wanted is not None and (wanted.plugin not in installed or pm.is_blocked(wanted.plugin)):
            load_trace_file(f, pm=pm)  # says which adapter it needs
    raise _no_trace(directory)


def _no_trace(directory: Path) -> TraceError:
    """The error for a folder that holds no trace: the runs it holds (saved, or a native trace
    kept in a run folder), else what it holds instead."""
    from perfkit_core.events.run import EVENTS_DIR, EVENTS_FILE
    from perfkit_core.events.sniff import folder_summary

    if any(os.path.lexists(directory / name) for name in (EVENTS_FILE, EVENTS_DIR)):
        return TraceError(
            directory,
            f"holds a saved run's event table but no {META_FILE}: a save cut short, or its "
            "metadata removed",
        )
    runs = []
    try:
        for sub in sorted(p for p in directory.iterdir() if _is_dir(p)):
            if is_saved_run(sub):
                runs.append(sub.name)
            elif _claimable(sub):
                runs.append(f"{sub.name} (its native trace only)")
    except OSError as exc:
        return TraceError(directory, f"cannot list the folder: {exc.strerror or exc}")
    if runs:
        shown = ", ".join(runs[:5]) + (", ..." if len(runs) > 5 else "")
        return TraceError(
            directory, f"a folder of {len(runs)} saved runs ({shown}): give one of them"
        )
    looked = ", ".join(f"*{s}" for s in TRACE_SUFFIXES)
    return TraceError(
        directory,
        f"no profiler trace in this folder (looked for {looked} files, a saved run's "
        f"{META_FILE} and a log folder an installed adapter reads); it holds "
        f"{folder_summary(directory)}",
    )


def _claimable(folder: Path) -> bool:
    """Whether ``folder`` holds a trace file (a run folder whose native trace was kept)."""
    try:
        return bool(trace_files(folder))
    except TraceError:
        return False


def load_trace_file(path: Path, *, pm: pluggy.PluginManager | None = None) -> Run:
    """Return the ``Run`` of one trace file, read by the first adapter that claims it."""
    from perfkit_core.plugins import adapter_for, get_plugin_manager, plugin_names

    head = read_head(path)
    if not head.strip():
        raise TraceError(path, "the file is empty")
    if head.lstrip().startswith(PERFKIT_EXPORT_HEAD):
        raise TraceError(
            path,
            "a chrome trace written by `perfkit export --to chrome` for trace viewers (Perfetto, "
            "chrome://tracing); perfkit reads the saved run or native trace it was made from",
        )
    pm = pm or get_plugin_manager()
    loader = pm.hook.perfkit_claim_trace(path=path, head=head)
    if loader is None:
        installed = sorted(n for n in plugin_names(pm) if not n.startswith("perfkit_core"))
        wanted = adapter_for(path, head)
        if wanted is not None and pm.is_blocked(wanted.plugin):
            raise TraceError(
                path,
                f"looks like a {wanted.framework} trace, and its adapter ({wanted.plugin}) is "
                "disabled by PERFKIT_DISABLE_PLUGINS",
            )
        if wanted is not None and wanted.plugin not in installed:
            raise TraceError(
                path,
                f"looks like a {wanted.framework} trace, and the {wanted.distribution} adapter "
                f"is not installed: {wanted.install}",
            )
        from perfkit_core.events.sniff import MAGIC, describe_file

        looks = describe_file(path)
        if looks.removeprefix("gzip of ").startswith(tuple(name for _, name in MAGIC)):
            raise TraceError(path, f"{looks}, not a profiler trace")
        if looks.startswith(("JSON cut short", "malformed JSON")):
            raise TraceError(path, f"{looks}: too little of it to tell which profiler wrote it")
        raise TraceError(
            path,
            f"not a trace any installed adapter reads: {looks} (adapters: "
            f"{', '.join(installed) or 'none'}; run `perfkit info` to add one)",
        )
    try:
        run = loader(path)
    except MemoryError:
        raise TraceError(
            path, "not enough memory to read it here (read it on a machine with more)"
        ) from None
    if not isinstance(run, Run):
        raise TraceError(path, f"the loader returned {type(run).__name__}, not a Run")
    return run


def _ranks_collide(runs: list[Run]) -> bool:
    ranks = [rank for r in runs for rank in r.meta.get("ranks", [r.meta.get("rank", 0)])]
    return len(ranks) != len(set(ranks))


def combine_runs(runs: list[Run]) -> Run:
    """Return one ``Run`` holding every rank of ``runs`` (one distributed job).

    Ranks must be distinct and the framework the same; ``TraceError`` otherwise.
    """
    from perfkit_core.events import schema
    from perfkit_core.events.build import make_run
    from perfkit_core.events.ranks import PER_RANK_KEYS

    if len(runs) == 1:
        return runs[0]
    frameworks = {r.framework for r in runs}
    if len(frameworks) > 1:
        raise TraceError(
            runs[0].meta.get("source", "?"),
            f"traces of different frameworks in one job: {sorted(frameworks)}",
        )
    if _ranks_collide(runs) and not any(r.meta.get("rank_recorded", True) for r in runs):
        # None of the traces says which rank it is (Paddle's exports do not): number them in
        # file-name order, as the folder lists them.
        for index, run in enumerate(runs):
            run.events["rank"] = np.int32(index)
            run.meta["rank"] = index
            run.meta["ranks"] = [index]
    seen: dict[int, str] = {}
    for run in runs:
        for rank in run.meta.get("ranks", [run.meta.get("rank", 0)]):
            source = str(run.meta.get("source", "?"))
            if rank in seen:
                raise TraceError(
                    source, f"rank {rank} is also in {seen[rank]}; a job holds each rank once"
                )
            seen[rank] = source
    events = schema.concat_events([r.events for r in runs])
    first = runs[0].meta
    meta: dict[str, Any] = {
        "framework": first.get("framework"),
        "framework_version": first.get("framework_version"),
        "host": first.get("host"),
        "devices": first.get("devices", []),
        "world_size": max(int(r.meta.get("world_size", 1)) for r in runs),
        "source": [r.meta.get("source") for r in runs],
        "accounting": {str(r.meta.get("rank", 0)): r.meta.get("accounting") for r in runs},
        "per_rank": {
            str(r.meta.get("rank", 0)): {k: r.meta.get(k) for k in PER_RANK_KEYS if k in r.meta}
            for r in runs
        },
        "extra": first.get("extra", {}),
    }
    compute = sorted({int(t) for r in runs for t in r.meta.get("compute_threads") or []})
    if compute:
        meta["compute_threads"] = compute
    return make_run(events, meta)
