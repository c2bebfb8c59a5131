"""``analyse_job``: a whole distributed job analysed rank by rank on Dask, and the ``Job`` it
returns.

The client plans one task per rank (a trace file, or a rank of a saved job), hands each worker
one rank at a time, and folds each rank's small tables into one accumulator per view as they
arrive (``perfkit_core.views.multirank.across``), so its memory does not grow with the number of ranks
beyond a few numbers per rank and per collective call. A job of one rank runs in this process,
without a cluster.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import TraceError
from perfkit_core.jobs.inputs import is_job as is_job
from perfkit_core.jobs.inputs import job_inputs
from perfkit_core.jobs.inputs import load_job_rank as load_job_rank
from perfkit_core.jobs.inputs import load_run as load_run
from perfkit_core.jobs.tasks import (
    RankRefused,
    RankResult,
    RankTask,
    analyse_rank,
    view_key,
)

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.advice.engine import Finding
    from perfkit_core.jobs.cluster import ClusterInfo

#: Views a job's report shows by default: the cross-rank views, then the per-rank views that
#: combine into one table. Per-rank blocks (device, distributed, steps, memory timeline) are
#: summed up by the ``ranks`` view; ask for them with ``--views``.
DEFAULT_JOB_VIEWS: tuple[str, ...] = (
    "ranks",
    "collectives",
    "model",
    "phases",
    "family",
    "overview",
    "operator",
    "kernel",
    "memcpy",
    "user",
    "memory",
    "benchmark",
)


class Job:
    """A job of several ranks analysed rank by rank: its metadata, the ranks' figures and
    collective calls, the combined table of each view it was analysed with, and each rank's
    advice. ``summary`` and ``advise`` answer as ``Run``'s do."""

    def __init__(
        self,
        meta: dict[str, Any],
        figures: list[dict[str, Any]],
        calls: pd.DataFrame,
        tables: dict[str, pd.DataFrame],
        findings: dict[int, list[Finding]],
        steps: dict[int, tuple[float, int]],
        cluster: ClusterInfo | None = None,
        results: list[dict[str, Any]] | None = None,
    ) -> None:
        from perfkit_core.views.multirank.collectives import align_calls

        self.meta = meta
        self.figures = figures
        self.calls = align_calls(calls)
        self.tables = tables
        self.findings = findings
        self.steps = steps
        self.cluster = cluster
        #: Per rank: where it came from, the worker's time on it (s) and its peak RSS (bytes).
        self.results = results or []

    def __repr__(self) -> str:
        return f"Job(framework={self.framework!r}, ranks={len(self.meta.get('ranks', []))})"

    @property
    def framework(self) -> str:
        """Name of the framework that recorded the job."""
        return str(self.meta.get("framework", ""))

    @property
    def has_device(self) -> bool:
        """Whether any rank recorded device events."""
        return bool(self.meta.get("has_device"))

    @property
    def missing_ranks(self) -> list[dict[str, Any]]:
        """The ranks whose input could not be read, left out of every figure: each one's
        ``rank``, ``source`` (the file) and ``reason``."""
        return list(self.meta.get("missing_ranks") or [])

    def missing_note(self) -> str | None:
        """The note every table of the job adds about the ranks left out ("rank 2 is missing
        (could not be read) and left out"); None when none is."""
        from perfkit_core.events.ranks import ranks_text

        missing = [int(m["rank"]) for m in self.missing_ranks]
        if not missing:
            return None
        which = f"rank {missing[0]} is" if len(missing) == 1 else f"ranks {ranks_text(missing)} are"
        return f"{which} missing (could not be read) and left out"

    def summary(self, view: str, **options: Any) -> pd.DataFrame:
        """The table ``view`` of the job, combined across ranks as the view's note says.

        ``ranks`` and ``collectives`` are computed here from every rank's figures; other views
        must be among those the job was analysed with (same options). ``rank=R`` keeps rank R's
        rows of ``ranks`` and ``collectives``. Raises ``KeyError`` for a view not analysed.
        A job with ranks that could not be read says so in each table's note.
        """
        frame = self._summary(view, dict(options))
        missing = self.missing_note()
        if missing:
            frame.attrs["note"] = "; ".join(n for n in (frame.attrs.get("note"), missing) if n)
        return frame

    def _summary(self, view: str, options: dict[str, Any]) -> pd.DataFrame:
        from perfkit_core.views.multirank.collectives import collectives_frame
        from perfkit_core.views.multirank.ranks import ranks_frame, waits_by_rank

        rank = options.pop("rank", None)
        if view == "ranks":
            frame = ranks_frame(self.figures, waits_by_rank(self.calls))
            if rank is not None:
                note = frame.attrs.get("note")
                frame = frame[frame["rank"] == rank].reset_index(drop=True)
                frame.attrs["note"] = note
            return frame
        if view == "collectives":
            calls = self.calls if rank is None else self.calls[self.calls["rank"] == rank]
            by = "rank" if rank is not None else options.get("by", "collective")
            return collectives_frame(calls, by=by)
        if rank is not None:
            raise KeyError(f"a job's {view!r} view combines every rank; analyse rank {rank} alone")
        key = view_key(view, options)
        if key not in self.tables:
            raise KeyError(f"the job was analysed without the view {key!r}")
        frame = self.tables[key]
        copy = frame.copy()
        copy.attrs = dict(frame.attrs)
        return copy

    def advise(self, *, rules: list[str] | None = None) -> list[Finding]:
        """The job's findings: each rank's merged across ranks, and the cross-rank rules'."""
        from perfkit_core.advice.engine import advise_job

        return advise_job(self, self.findings, self.steps, rules=rules)


def _view_columns(views: Sequence[str], advice: bool) -> tuple[str, ...] | None:
    """Event columns a saved job's ranks must be read with: only the ones the ``ranks`` and
    ``collectives`` views read when those are all that is asked; else every column."""
    from perfkit_core.views.multirank.collectives import CALL_EVENT_COLUMNS
    from perfkit_core.views.multirank.ranks import FIGURE_EVENT_COLUMNS

    if advice or any(v not in ("ranks", "collectives") for v in views):
        return None
    return tuple(sorted({*CALL_EVENT_COLUMNS, *FIGURE_EVENT_COLUMNS}))


def plan_tasks(
    path: str | os.PathLike[str],
    views: Sequence[str],
    options: dict[str, dict[str, Any]],
    *,
    advice: bool = True,
    rules: Sequence[str] | None = None,
    save_to: str | os.PathLike[str] | None = None,
) -> list[RankTask]:
    """One ``RankTask`` per rank of the job at ``path``, computing the per-rank tables of
    ``views`` (the views that read every rank at once are computed on the client)."""
    from perfkit_core.views.registry import get_view

    per_rank = []
    for name in views:
        spec = get_view(name)
        if spec.across == "native":
            if name not in ("ranks", "collectives"):
                raise ValueError(
                    f"the view {name!r} reads every rank at once and cannot run rank by rank; "
                    "load the job in one process (perfkit_core.load) for it"
                )
            continue
        own = {k: v for k, v in (options.get(name) or {}).items() if k != "rank"}
        per_rank.append((name, tuple(sorted(own.items()))))
    kind, items = job_inputs(path)
    common: dict[str, Any] = {
        "views": tuple(per_rank),
        "advice": advice,
        "rules": tuple(rules) if rules is not None else None,
        "save_to": str(save_to) if save_to else None,
    }
    if kind == "saved":
        columns = None if save_to else _view_columns(views, advice)
        return [
            RankTask(i, str(path), saved_rank=int(str(r)), columns=columns, **common)
            for i, r in enumerate(items)
        ]
    return [RankTask(i, str(f), **common) for i, f in enumerate(items)]


def analyse_job(
    path: str | os.PathLike[str],
    views: Iterable[str] = DEFAULT_JOB_VIEWS,
    *,
    options: dict[str, dict[str, Any]] | None = None,
    advice: bool = True,
    rules: Sequence[str] | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    save_to: str | os.PathLike[str] | None = None,
    notify: Callable[[str], None] | None = None,
) -> Job:
    """Analyse the job at ``path`` (a folder of per-rank traces, or a saved job) rank by rank
    and return the ``Job``.

    Each rank is loaded, summarised (``views`` with ``options[view]``; advice when ``advice``)
    and, with ``save_to``, written as its partition of a saved job, on a Dask worker: on the
    scheduler at ``scheduler`` (or ``DASK_SCHEDULER_ADDRESS``), else on a local cluster of
    ``workers`` processes that is started and closed here. A job of one rank runs in this
    process. ``notify`` receives a line about the cluster, and one line per rank whose input
    cannot be read (``error: rank 2 (FILE): reason``): the job goes on without those ranks,
    which ``Job.missing_ranks`` lists and every table's note names. Raises ``TraceError`` when
    no rank can be read, for two files holding the same rank, and ``OutputError`` when
    ``save_to`` cannot be written (another process saving into it, say).
    """
    import contextlib

    from perfkit_core.events.atomic import claim_folder
    from perfkit_core.events.run import new_run_id

    views = list(views)
    save_id = new_run_id() if save_to else None
    with claim_folder(save_to) if save_to else contextlib.nullcontext():
        tasks = plan_tasks(path, views, options or {}, advice=advice, rules=rules, save_to=save_to)
        tasks = [dataclasses.replace(t, save_id=save_id) for t in tasks]
        job = _run_tasks(Path(path), tasks, views, options or {}, scheduler, workers, notify)
        if save_to:
            from perfkit_core.events.dataset import write_job_meta

            job.meta["run_id"] = save_id
            write_job_meta(save_to, job.meta)
    return job


def _run_tasks(
    folder: Path,
    tasks: list[RankTask],
    views: list[str],
    options: dict[str, dict[str, Any]],
    scheduler: str | None,
    workers: int | None,
    notify: Callable[[str], None] | None,
) -> Job:
    """The ``Job`` of ``tasks`` (one per rank of the job at ``folder``), each run on a Dask
    worker (in this process when there is one task)."""
    from perfkit_core.jobs.cluster import job_client, rank_memory_estimate
    from perfkit_core.progress import stage

    fold = _Fold(views, options, notify)
    with stage(f"analysing {folder.name}", total=len(tasks), unit="rank") as bar:
        if len(tasks) == 1:
            fold.add(analyse_rank(tasks[0]))
            bar.update(1)
            cluster = None
        else:
            sizes = [_size(Path(t.source)) for t in tasks if t.saved_rank is None]
            per_rank = rank_memory_estimate(
                max(sizes, default=0), any(t.source.endswith(".gz") for t in tasks)
            )
            with job_client(
                scheduler=scheduler,
                workers=workers,
                ranks=len(tasks),
                per_rank_bytes=per_rank,
                notify=notify,
            ) as (client, cluster):
                for result in run_on_workers(client, tasks):
                    fold.add(result)
                    bar.update(1)
    job = fold.job(cluster, folder)
    if tasks and tasks[0].saved_rank is not None:
        # Ranks missing when the job was saved are still missing.
        from perfkit_core.events.dataset import read_job_meta

        earlier = read_job_meta(folder).get("missing_ranks") or []
        if earlier:
            job.meta["missing_ranks"] = [*earlier, *job.missing_ranks]
    return job


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # the rank's task says why it cannot be read
        return 0


def run_on_workers(client: Any, tasks: Sequence[RankTask]) -> Iterable[RankResult | RankRefused]:
    """Run ``analyse_rank`` on every task, one task per worker at a time; yield the results
    (or the refusals of ranks that cannot be read) as they arrive. A failed task's error is
    raised here, after the others are cancelled."""
    from collections import deque

    from distributed import as_completed

    pending = deque(tasks)
    running: dict[Any, str] = {}
    arrived = as_completed(loop=client.loop)

    def submit(worker: str) -> None:
        task = pending.popleft()
        future = client.submit(
            analyse_rank,
            task,
            key=f"perfkit-rank-{task.index}-{os.getpid()}-{id(task)}",
            workers=[worker],
            allow_other_workers=True,
            pure=False,
        )
        running[future] = worker
        arrived.add(future)

    try:
        if not _workers(client):
            client.wait_for_workers(1)
        for worker in _workers(client):
            if pending:
                submit(worker)
        for future in arrived:
            worker = running.pop(future)
            result = future.result()
            future.release()
            yield result
            # The worker that finished takes the next rank; workers that joined meanwhile too.
            for free in [worker, *(w for w in _workers(client) if w not in running.values())]:
                if pending and free not in running.values():
                    submit(free)
    finally:
        for future in running:
            future.cancel()


def _workers(client: Any) -> list[str]:
    return sorted(client.scheduler_info(n_workers=-1).get("workers", {}))


class _Fold:
    """What the client keeps while ranks arrive: one combiner per view and a few numbers per
    rank."""

    def __init__(
        self,
        views: Sequence[str],
        options: dict[str, dict[str, Any]],
        notify: Callable[[str], None] | None = None,
    ) -> None:
        from perfkit_core.views.multirank.across import make_combiner
        from perfkit_core.views.registry import get_view

        self.combiners = {}
        for name in views:
            spec = get_view(name)
            if spec.across == "native":
                continue
            own = {k: v for k, v in (options.get(name) or {}).items() if k != "rank"}
            self.combiners[view_key(name, own)] = make_combiner(spec.across, own)
        self.entries: dict[int, dict[str, Any]] = {}
        self.figures: list[dict[str, Any]] = []
        self.calls: list[pd.DataFrame] = []
        self.findings: dict[int, list[Finding]] = {}
        self.steps: dict[int, tuple[float, int]] = {}
        self.results: list[dict[str, Any]] = []
        self.refused: list[RankRefused] = []
        self.notify = notify

    def add(self, result: RankResult | RankRefused) -> None:
        from perfkit_core.advice.engine import Finding
        from perfkit_core.errors import OutputError

        if isinstance(result, RankRefused):
            if result.output:
                raise OutputError(result.source, result.reason)
            self.refused.append(result)
            if self.notify is not None:
                self.notify(f"error: {result.line()}")
            return
        if result.rank in self.entries:
            # Named in file-name order, whichever of the two arrived first.
            first, second = sorted([str(self.entries[result.rank].get("source")), result.source])
            raise TraceError(
                second, f"rank {result.rank} is also in {first}; a job holds each rank once"
            )
        frameworks = {e.get("framework") for e in self.entries.values()}
        if frameworks and result.entry.get("framework") not in frameworks:
            raise TraceError(
                result.source,
                f"a {result.entry.get('framework')} trace in a job of {sorted(map(str, frameworks))} "
                "traces",
            )
        self.entries[result.rank] = result.entry
        for key, frame in result.frames.items():
            self.combiners[key].add(result.rank, frame)
        self.figures.append(result.figures)
        if len(result.calls):
            self.calls.append(result.calls)
        self.findings[result.rank] = [Finding(**f) for f in result.findings]
        self.steps[result.rank] = result.step
        self.results.append(
            {
                "rank": result.rank,
                "source": result.source,
                "seconds": result.seconds,
                "peak_rss_bytes": result.peak_rss_bytes,
            }
        )

    def job(self, cluster: ClusterInfo | None, path: Path) -> Job:
        import pandas as pd

        from perfkit_core.events.dataset import job_meta
        from perfkit_core.views.multirank.collectives import CALL_COLUMNS

        refused = sorted(self.refused, key=lambda r: (r.rank, r.source))
        if not self.entries:
            first = refused[0]
            more = f"; and {len(refused) - 1} more" if len(refused) > 1 else ""
            raise TraceError(
                path,
                f"none of its {len(refused)} ranks could be read ({first.line()}{more})",
            )
        meta = job_meta(self.entries.values())
        if refused:
            meta["missing_ranks"] = [
                {"rank": r.rank, "source": r.source, "reason": r.reason} for r in refused
            ]
            meta["world_size"] = max(int(meta["world_size"]), len(meta["ranks"]) + len(refused))
        if cluster is not None:
            meta["engine"] = {"kind": cluster.kind, "workers": cluster.workers}
        calls = (
            pd.concat(self.calls, ignore_index=True)
            if self.calls
            else pd.DataFrame({c: [] for c in CALL_COLUMNS})
        )
        tables = {key: combiner.result() for key, combiner in self.combiners.items()}
        return Job(
            meta,
            self.figures,
            calls,
            tables,
            self.findings,
            self.steps,
            cluster,
            sorted(self.results, key=lambda r: r["rank"]),
        )
