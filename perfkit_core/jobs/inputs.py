"""What a job is made of (a folder of per-rank traces, or a saved job), and reading one rank of
it, or the whole run, in this process without a cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfkit_core.errors import TraceError
from perfkit_core.jobs.tasks import RankTask


def job_inputs(path: str | os.PathLike[str]) -> tuple[str, list[Path] | list[int]]:
    """What a job is made of: (``"saved"``, its ranks) for a saved job, (``"traces"``, the
    trace files) for a folder of per-rank traces. Raises ``TraceError`` for anything else,
    two trace files that record the same rank, or a folder that cannot be listed or searched."""
    from perfkit_core.events.dataset import is_saved_job, read_job_meta
    from perfkit_core.events.loading import check_folder, check_path, folder_traces
    from perfkit_core.events.run import is_saved_run

    path = Path(path)
    check_path(path)
    if not path.is_dir():
        raise TraceError(path, "neither a folder of per-rank traces nor a saved job")
    check_folder(path)
    if is_saved_job(path):
        return "saved", [int(r) for r in read_job_meta(path)["ranks"]]
    if not is_saved_run(path):
        from perfkit_core.plugins import get_plugin_manager

        if get_plugin_manager().hook.perfkit_claim_folder(path=path) is not None:
            raise TraceError(path, "a folder an installed adapter reads as one run, not a job")
        files = folder_traces(path)
        _check_recorded_ranks(files)
        return "traces", files
    raise TraceError(path, "neither a folder of per-rank traces nor a saved job")


def recorded_ranks(files: Sequence[Path]) -> list[int | None]:
    """The rank each trace file records in its first bytes (``perfkit_trace_rank``), None where
    it records none or cannot be read."""
    from perfkit_core.events.loading import read_head
    from perfkit_core.plugins import get_plugin_manager

    hook = get_plugin_manager().hook.perfkit_trace_rank
    ranks: list[int | None] = []
    for f in files:
        try:
            ranks.append(hook(path=f, head=read_head(f)))
        except TraceError:
            ranks.append(None)
    return ranks


def _check_recorded_ranks(files: Sequence[Path]) -> None:
    """Raise ``TraceError`` when two of ``files`` (in name order) record the same rank, naming
    the later file and the earlier one, whatever order the ranks are analysed in."""
    first: dict[int, Path] = {}
    for f, rank in zip(files, recorded_ranks(files), strict=True):
        if rank is None:
            continue
        if rank in first:
            raise TraceError(f, f"rank {rank} is also in {first[rank]}; a job holds each rank once")
        first[rank] = f


def is_job(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a job of several ranks (a folder of 2 or more traces, or a saved
    job of 2 or more ranks): what ``analyse_job`` is for."""
    try:
        _, items = job_inputs(path)
    except TraceError:
        return False
    return len(items) > 1


def load_job_rank(path: str | os.PathLike[str], rank: int) -> Any:
    """The one-rank ``Run`` of rank ``rank`` of the job at ``path``, read alone (no cluster):
    its partition of a saved job, or the trace file that records that rank (files that record
    no rank are numbered by their place in the folder). Raises ``TraceError`` when no file,
    or more than one, holds the rank."""
    from perfkit_core.events.dataset import read_rank
    from perfkit_core.events.loading import read_head
    from perfkit_core.events.ranks import ranks_text
    from perfkit_core.jobs.tasks import load_rank
    from perfkit_core.plugins import get_plugin_manager

    kind, items = job_inputs(path)
    if kind == "saved":
        return read_rank(path, rank)
    files = [Path(str(f)) for f in items]
    hook = get_plugin_manager().hook.perfkit_trace_rank
    recorded = [hook(path=f, head=read_head(f)) for f in files]
    ranks = [r if r is not None else i for i, r in enumerate(recorded)]
    matches = [i for i, r in enumerate(ranks) if r == rank]
    if not matches:
        raise TraceError(path, f"no trace holds rank {rank} (ranks: {ranks_text(ranks)})")
    if len(matches) > 1:
        names = ", ".join(files[i].name for i in matches)
        raise TraceError(path, f"rank {rank} is in more than one trace: {names}")
    return load_rank(RankTask(matches[0], str(files[matches[0]])))


def load_run(path: str | os.PathLike[str], rank: int | None) -> Any:
    """The run at ``path`` read in this process; with ``rank``, only that rank (of a job: its
    file alone, ``load_job_rank``). Raises ``OptionError`` when the run holds no rank ``rank``."""
    from perfkit_core.events.loading import load
    from perfkit_core.events.ranks import require_rank

    if rank is not None and is_job(path):
        return load_job_rank(path, rank)
    return require_rank(load(path), rank, path)
