"""The work one Dask worker does for one rank: load it, summarise it, send back small tables.

``summarise_rank`` runs in the worker process. It loads one rank (a trace file, or one
partition of a saved job), optionally writes it as its partition of a saved job, and returns a
``RankResult``: the rank's metadata, its figures for the ``ranks`` view, its collective calls,
its table of each requested view, and its advice findings. The rank's event table never
leaves the worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


@dataclass(frozen=True)
class RankTask:
    """One rank to summarise: ``source`` is a trace file, or a saved job's folder with
    ``saved_rank``; ``index`` is the file's place in its folder (its rank when the trace does
    not record one); ``views`` are (name, options) of the per-rank views to compute;
    ``columns`` limits what is read from a saved job (None: every column)."""

    index: int
    source: str
    saved_rank: int | None = None
    views: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    advice: bool = True
    rules: tuple[str, ...] | None = None
    columns: tuple[str, ...] | None = None
    save_to: str | None = None
    #: The run id of the saved job ``save_to`` (written in the rank's file).
    save_id: str | None = None


@dataclass
class RankResult:
    """What a worker sends back for one rank (all small: no event table)."""

    rank: int
    source: str
    entry: dict[str, Any]
    figures: dict[str, Any]
    calls: pd.DataFrame
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    step: tuple[float, int] = (0.0, 1)
    has_device: bool = False
    seconds: float = 0.0
    peak_rss_bytes: int = 0


@dataclass
class RankRefused:
    """A rank whose input could not be read (a ``TraceError``): the rank (as its file records
    it, else its place in the folder), the file, and the reason. The job goes on without it."""

    rank: int
    source: str
    reason: str
    #: The rank could not be written (``--save``): an error of the job's output, not of a rank.
    output: bool = False

    def line(self) -> str:
        """One line for a person: ``rank 2 (DIR/rank2.json): truncated JSON ...``."""
        from perfkit_core.errors import printable

        return f"rank {self.rank} ({printable(self.source)}): {self.reason}"


def view_key(name: str, options: dict[str, Any] | tuple[tuple[str, Any], ...]) -> str:
    """The key of a view computed with ``options`` (the same view with other options is
    another table)."""
    items = sorted(dict(options).items())
    return name if not items else name + "?" + "&".join(f"{k}={v!r}" for k, v in items)


def load_rank(task: RankTask) -> Run:
    """The one-rank ``Run`` a task names (its rank set from ``index`` when not recorded)."""
    from pathlib import Path

    import numpy as np

    from perfkit_core.events.dataset import read_rank
    from perfkit_core.events.loading import load_trace_file

    if task.saved_rank is not None:
        return read_rank(task.source, task.saved_rank, columns=task.columns)
    run = load_trace_file(Path(task.source))
    if not run.meta.get("rank_recorded", True):
        run.events["rank"] = np.int32(task.index)
        run.meta.update(rank=task.index, ranks=[task.index])
    return run


def release_memory() -> None:
    """Give the memory of the rank just summarised back to the system, so the next rank on this
    worker starts from the same footprint (Arrow's allocator and glibc's arenas keep freed
    memory otherwise)."""
    import gc

    from perfkit_core.events.memory import give_back_freed_memory

    gc.collect()
    give_back_freed_memory()


def drop_view_caches(run: Run) -> None:
    """Drop what a view or the advice cached on ``run`` for itself, keeping what the other
    views and the advice read again (``perfkit_core.events.cache.KEPT_BETWEEN_VIEWS``)."""
    run.cache.drop_per_view()


def analyse_rank(task: RankTask) -> RankResult | RankRefused:
    """``summarise_rank``, or a ``RankRefused`` when the rank's input cannot be read: a bad rank
    is the job's to report, not a failed task (which Dask would log, with its traceback, on
    the worker)."""
    from perfkit_core.errors import OutputError, TraceError

    try:
        return summarise_rank(task)
    except TraceError as exc:
        output = isinstance(exc, OutputError)
        return RankRefused(refused_rank_number(task), exc.path, exc.reason, output=output)


def refused_rank_number(task: RankTask) -> int:
    """The rank a task that could not be read stands for: the saved job's rank, or the rank its
    trace records in its first bytes, or its place in the folder."""
    if task.saved_rank is not None:
        return task.saved_rank
    from pathlib import Path

    from perfkit_core.errors import TraceError
    from perfkit_core.events.loading import read_head
    from perfkit_core.plugins import get_plugin_manager

    try:
        path = Path(task.source)
        recorded = get_plugin_manager().hook.perfkit_trace_rank(path=path, head=read_head(path))
    except (TraceError, OSError, ValueError):
        recorded = None
    return int(recorded) if recorded is not None else task.index


def summarise_rank(task: RankTask) -> RankResult:
    """Load, summarise and (when asked) save one rank; return what the client needs."""
    from perfkit_core.advice.engine import advise_rank, step_figures
    from perfkit_core.events.dataset import rank_entry, write_rank
    from perfkit_core.events.facts import has_device
    from perfkit_core.events.steady import steady_run
    from perfkit_core.views.multirank.collectives import collective_calls
    from perfkit_core.views.multirank.ranks import rank_figures
    from perfkit_core.views.registry import get_view, rank_view

    began = time.perf_counter()
    run = load_rank(task)
    # What the loader freed (its pieces of JSON, decoded events and sort temporaries, twice the
    # table) goes back before the views make theirs.
    release_memory()
    entry = write_rank(run, task.save_to, task.save_id) if task.save_to else rank_entry(run)
    # every step figure of the rank is taken over its steady steps (leading warm-up left out)
    run = steady_run(run)
    frames = {}
    for name, options in task.views:
        frames[view_key(name, options)] = rank_view(run, get_view(name), dict(options))
        drop_view_caches(run)
    findings = []
    if task.advice:
        release_memory()  # what the views freed goes back before the advice makes its tables
        rules = list(task.rules) if task.rules is not None else None
        findings = [f.to_dict() for f in advise_rank(run, rules=rules)]
        drop_view_caches(run)
    result = RankResult(
        rank=int(run.meta.get("rank", 0)),
        source=str(run.meta.get("source") or task.source),
        entry=entry,
        figures=rank_figures(run),
        calls=collective_calls(run),
        frames=frames,
        findings=findings,
        step=step_figures(run),
        has_device=has_device(run),
    )
    del run
    release_memory()
    result.seconds = time.perf_counter() - began
    result.peak_rss_bytes = peak_rss_bytes()
    return result


def peak_rss_bytes() -> int:
    """This process's peak resident memory in bytes: ``VmHWM`` of ``/proc/self/status`` where
    there is one (Linux), which belongs to this process's own address space, else
    ``ru_maxrss``. On Linux ``ru_maxrss`` survives ``exec``: a worker started by a bigger
    process would report that process's peak as its own."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # bytes there, KiB here
