"""Saved jobs: a run of several ranks as a Parquet dataset partitioned by rank, plus ``meta.json``.

Layout (hive partitioning, readable by pyarrow.dataset, Dask and Spark as they are)::

    job/meta.json                          the job's metadata, written last
    job/events/rank=0/part-0.parquet       rank 0's event table (no ``rank`` column: the
    job/events/rank=1/part-0.parquet       folder name holds it), zstd-compressed

Each rank's file is written by whoever converted that rank (a Dask worker, or ``Run.save``), so
no process ever holds two ranks' tables to save a job; ``meta.json`` comes last, so a folder
with a ``meta.json`` is a complete job. A rank is read on its own, and only the columns asked
for (``read_rank(..., columns=...)``), so re-analysis reads only what a view needs. Row links
(``parent``, ``forward_op``) are row positions inside the rank's own file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import TraceError
from perfkit_core.events import schema
from perfkit_core.events.atomic import atomic_path, write_bytes
from perfkit_core.events.facts import has_device
from perfkit_core.events.run import EVENTS_DIR, table_run_id

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from perfkit_core.events.run import Run

META_FILE = "meta.json"
PART_FILE = "part-0.parquet"
#: ``meta["layout"]`` of a saved job.
LAYOUT = "ranks"


def partition_path(directory: str | os.PathLike[str], rank: int) -> Path:
    """Return the file that holds ``rank``'s events in the saved job at ``directory``."""
    return Path(directory) / EVENTS_DIR / f"rank={int(rank)}" / PART_FILE


def write_rank(
    run: Run, directory: str | os.PathLike[str], run_id: str | None = None
) -> dict[str, Any]:
    """Write the events of ``run`` (one rank) as its partition of the job at ``directory``,
    with the job's ``run_id`` in the file's Parquet metadata (``run.RUN_ID_KEY``).

    Returns the rank's metadata entry for the job's ``meta.json`` (see ``write_job_meta``).
    The file is written atomically. Raises ``ValueError`` when ``run`` holds several ranks.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perfkit_core.events.run import with_run_id

    entry = rank_entry(run)
    target = partition_path(directory, entry["rank"])
    target.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(run.events.drop(columns=["rank"]), preserve_index=False)
    if run_id is not None:
        table = with_run_id(table, run_id)
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return entry


def rank_entry(run: Run) -> dict[str, Any]:
    """The metadata entry of ``run`` (one rank) in a job's ``meta.json``. Raises
    ``ValueError`` when ``run`` holds several ranks."""
    from perfkit_core.events.ranks import PER_RANK_KEYS, run_ranks

    ranks = run_ranks(run)
    if len(ranks) != 1:
        raise ValueError(f"a rank's entry describes one rank, this run holds {len(ranks)}")
    entry = {k: run.meta.get(k) for k in PER_RANK_KEYS if k in run.meta}
    entry.update(
        rank=ranks[0],
        events=len(run.events),
        steps=list(run.meta.get("steps") or []),
        framework=run.meta.get("framework"),
        framework_version=run.meta.get("framework_version"),
        rank_recorded=run.meta.get("rank_recorded", True),
        has_device=has_device(run),
        extra=run.meta.get("extra") or {},
    )
    return entry


def job_meta(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Return the metadata of a job made of the ranks described by ``entries`` (from
    ``write_rank`` or a Dask worker's summary), as ``meta.json`` holds it."""
    by_rank = {int(e["rank"]): e for e in entries}
    ranks = sorted(by_rank)
    if not ranks:
        raise ValueError("a job holds at least one rank")
    first = by_rank[ranks[0]]
    spans = [e.get("span_ns") or [0, 0] for e in by_rank.values()]
    steps: dict[int, None] = {}
    for r in ranks:
        for s in by_rank[r].get("steps") or []:
            steps.setdefault(int(s), None)
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "layout": LAYOUT,
        "framework": first.get("framework"),
        "framework_version": first.get("framework_version"),
        "host": first.get("host"),
        "devices": first.get("devices") or [],
        "rank": ranks[0],
        "ranks": ranks,
        "world_size": max([int(e.get("world_size") or 1) for e in by_rank.values()] + [len(ranks)]),
        "steps": sorted(steps),
        "events": int(sum(int(e.get("events") or 0) for e in by_rank.values())),
        "has_device": any(bool(e.get("has_device")) for e in by_rank.values()),
        "source": [by_rank[r].get("source") for r in ranks],
        "span_ns": [min(int(s[0]) for s in spans), max(int(s[1]) for s in spans)],
        "accounting": {str(r): by_rank[r].get("accounting") for r in ranks},
        "per_rank": {
            str(r): {k: v for k, v in by_rank[r].items() if k not in ("extra", "rank")}
            for r in ranks
        },
        "extra": first.get("extra") or {},
    }


def write_job_meta(directory: str | os.PathLike[str], meta: dict[str, Any]) -> Path:
    """Write ``meta.json`` of the job at ``directory`` (last, atomically); return its path."""
    path = Path(directory) / META_FILE
    write_bytes(path, json.dumps(meta, indent=1, default=str).encode())
    return path


def save_job(run: Run, directory: str | os.PathLike[str]) -> Path:
    """Write ``run`` (several ranks) as a saved job at ``directory``, one rank at a time, under
    one run id (in ``meta.json`` and in every rank's file), holding the folder for the save
    (``atomic.claim_folder``) as ``Run.save`` does."""
    from perfkit_core.events.atomic import claim_folder
    from perfkit_core.events.ranks import rank_run, run_ranks
    from perfkit_core.events.run import new_run_id

    directory = Path(directory)
    run_id = new_run_id()
    with claim_folder(directory):
        entries = [write_rank(rank_run(run, r), directory, run_id) for r in run_ranks(run)]
        meta = job_meta(entries)
        meta["extra"] = run.meta.get("extra") or meta["extra"]
        meta["run_id"] = run_id
        write_job_meta(directory, meta)
    return directory


def is_saved_job(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder written by ``save_job`` (or by a Dask job analysis)."""
    meta = Path(path) / META_FILE
    try:
        if not meta.is_file() or not (Path(path) / EVENTS_DIR).is_dir():
            return False
        return json.loads(meta.read_text()).get("layout") == LAYOUT
    except (OSError, ValueError, AttributeError):
        return False


def read_job_meta(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Return the ``meta.json`` of the saved job at ``directory``; TraceError when unreadable."""
    from perfkit_core.events.run import read_meta

    path = Path(directory) / META_FILE
    if not os.path.lexists(path):
        raise TraceError(directory, f"not a saved perfkit job ({META_FILE} is missing)")
    meta = read_meta(path, "job metadata")
    if meta.get("layout") != LAYOUT:
        raise TraceError(path, "not the metadata of a saved perfkit job")
    schema.check_version(directory, meta)
    return meta


def read_rank(
    directory: str | os.PathLike[str],
    rank: int,
    *,
    columns: Sequence[str] | None = None,
    meta: dict[str, Any] | None = None,
) -> Run:
    """Return rank ``rank`` of the saved job at ``directory`` as a one-rank ``Run``.

    ``columns`` reads only those event columns from the file; the others are filled with their
    "not recorded" values (``meta["columns_read"]`` lists what was read), so pass every column
    the views you will run read. Raises ``TraceError`` naming the file for anything unreadable.
    """
    import pyarrow.parquet as pq

    from perfkit_core.events.build import make_run

    meta = meta if meta is not None else read_job_meta(directory)
    if int(rank) not in [int(r) for r in meta.get("ranks") or []]:
        raise TraceError(directory, f"the saved job holds no rank {rank}")
    path = partition_path(directory, rank)
    wanted = None
    if columns is not None:
        wanted = [c for c in schema.COLUMN_NAMES if c in set(columns) and c != "rank"]
    try:
        with open(path, "rb") as fh:  # one open file: its footer and data from one save
            parquet = pq.ParquetFile(fh)
            file_schema = parquet.schema_arrow
            present = set(file_schema.names)
            read = [c for c in (wanted or schema.COLUMN_NAMES) if c in present]
            table = parquet.read(columns=read)
    except FileNotFoundError:
        raise TraceError(path, "the rank's event file is missing") from None
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise TraceError(path, f"cannot read the rank's event table: {reason}") from None
    except Exception as exc:
        raise TraceError(path, f"unreadable event table: {exc}") from None
    _check_rank_unit(directory, path, meta, rank, table_run_id(file_schema), table.num_rows)
    events = table.to_pandas()
    del table
    try:
        table = schema.build_events(
            {
                **{c: _column_values(events, c) for c in events.columns},
                "rank": [int(rank)] * len(events),
            },
            n=len(events),
        )
    except ValueError as exc:
        raise TraceError(path, str(exc)) from None
    own = dict((meta.get("per_rank") or {}).get(str(rank)) or {})
    rank_meta = {
        k: v for k, v in meta.items() if k not in ("per_rank", "ranks", "layout", "events")
    }
    rank_meta.update({k: v for k, v in own.items() if k not in ("events", "steps")})
    rank_meta["rank"] = int(rank)
    if isinstance(meta.get("accounting"), dict):
        rank_meta["accounting"] = meta["accounting"].get(str(rank))
    if columns is not None:
        rank_meta["columns_read"] = read
    return make_run(table, rank_meta)


def _check_rank_unit(
    directory: str | os.PathLike[str],
    path: Path,
    meta: dict[str, Any],
    rank: int,
    run_id: str | None,
    rows: int,
) -> None:
    """Raise ``TraceError`` when rank ``rank``'s file (its ``run_id`` and ``rows``) is not the
    one the job's ``meta`` names: a rank's file of another saved job, or a save under way."""
    from perfkit_core.events.atomic import saving_owner

    expected = meta.get("run_id")
    count = ((meta.get("per_rank") or {}).get(str(rank)) or {}).get("events")
    if expected == run_id and (count is None or int(count) == rows):
        return
    owner = saving_owner(directory)
    if owner is not None:
        raise TraceError(
            directory,
            f"process {owner[0]} on {owner[1]} is saving a job into it; read it when it is done",
        )
    if expected != run_id:
        raise TraceError(
            path,
            f"rank {rank}'s events (run {run_id or 'without an id'}) are not of the job's "
            f"{META_FILE} (run {expected or 'without an id'}): the folder mixes files of two "
            "saved jobs",
        )
    raise TraceError(path, f"holds {rows} events where the job's {META_FILE} says {count}")


def _column_values(events: Any, name: str) -> Any:
    import pandas as pd

    values = events[name]
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.array
    return values.to_numpy()


def read_job(directory: str | os.PathLike[str]) -> Run:
    """Return every rank of the saved job at ``directory`` as one ``Run`` (all in memory: for
    jobs small enough for one process; ``perfkit_core.jobs`` analyses big ones rank by rank)."""
    from perfkit_core.events.loading import combine_runs

    meta = read_job_meta(directory)
    runs = [read_rank(directory, r, meta=meta) for r in meta["ranks"]]
    combined = combine_runs(runs)
    combined.meta["extra"] = meta.get("extra") or {}
    if meta.get("missing_ranks"):
        combined.meta["missing_ranks"] = meta["missing_ranks"]
    return combined


def rank_sizes(directory: str | os.PathLike[str], ranks: Sequence[int]) -> dict[int, int]:
    """Bytes on disk of each rank's event file in the saved job at ``directory``."""
    out = {}
    for r in ranks:
        try:
            out[int(r)] = partition_path(directory, r).stat().st_size
        except OSError:
            out[int(r)] = 0
    return out
