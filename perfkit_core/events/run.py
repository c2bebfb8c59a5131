"""``Run``: one profiled run (one or several ranks) as an event table plus metadata.

``Run`` is plain data: the table, the metadata, saving and reading. Its convenience methods
(``summary``, ``advise``) hand over to the layers above the event table (views, advice); those
are bound late, by name, in ``ANALYSES``, so this layer never imports them and the import graph
keeps pointing one way. What a notebook shows for a run is the report layer's to say: it
registers an IPython formatter for ``Run`` (``perfkit_core.load_ipython_extension``).
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from perfkit_core.errors import TraceError
from perfkit_core.events import schema
from perfkit_core.events.atomic import atomic_paths, claim_folder
from perfkit_core.events.cache import RunCache
from perfkit_core.events.metadata import check_meta

if TYPE_CHECKING:
    import pandas as pd

EVENTS_FILE = "events.parquet"
META_FILE = "meta.json"
#: The folder of a saved job's per-rank event tables (``perfkit_core.events.dataset``).
EVENTS_DIR = "events"

#: What ``Run``'s convenience methods call, as ``module:function`` in the layers above, and
#: how a run of several ranks is saved and read (a saved job, ``perfkit_core.events.dataset``,
#: which builds one-rank runs and so cannot be imported by this module).
ANALYSES: dict[str, str] = {
    "summary": "perfkit_core.views.registry:summary",
    "advise": "perfkit_core.advice.engine:advise",
    "save_job": "perfkit_core.events.dataset:save_job",
    "read_job": "perfkit_core.events.dataset:read_job",
    "is_saved_job": "perfkit_core.events.dataset:is_saved_job",
}


def _analysis(name: str) -> Any:
    module, function = ANALYSES[name].split(":")
    return getattr(importlib.import_module(module), function)


_T = TypeVar("_T")


class Run:
    """A profiled run: ``events`` (the event table, see ``docs/reference/schema.md``) and ``meta``.

    Build one with ``perfkit_core.load(path)`` or an adapter's ``on_trace_ready`` handler.
    """

    def __init__(self, events: pd.DataFrame, meta: dict[str, Any] | None = None) -> None:
        schema.validate_events(events)
        self.events = events
        self.meta: dict[str, Any] = dict(meta or {})
        self.meta.setdefault("schema_version", schema.SCHEMA_VERSION)
        #: The file or folder ``perfkit_core.load`` read the run from (reports are titled by
        #: its name); None for a run built in memory. Not saved with the run.
        self.origin: Path | None = None
        #: What this run computes once and several readers share (``cached``).
        self.cache = RunCache()

    def __repr__(self) -> str:
        return (
            f"Run(framework={self.meta.get('framework')!r}, events={len(self.events)}, "
            f"ranks={self.meta.get('ranks', [self.meta.get('rank', 0)])}, "
            f"steps={len(self.meta.get('steps', []))})"
        )

    def cached(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, computed once per run and kept under ``key``: the figures several
        views and rules read (links between rows, the step spans, the advice's shared
        figures). A ``None`` result is kept too."""
        return self.cache.once(key, compute)

    @property
    def framework(self) -> str:
        """Name of the framework that recorded the run (``torch`` or ``paddle``)."""
        return str(self.meta.get("framework", ""))

    def summary(self, view: str, **options: Any) -> pd.DataFrame:
        """Return the summary table ``view`` (``operator``, ``user``, ...) as a DataFrame.

        The key column is ``name``; other columns are snake_case with the unit in the name
        (``cpu_total_ns``). ``options`` are passed to the view (see ``perfkit_core.views``).
        Raises ``perfkit_core.errors.UnknownViewError`` for a view no plugin provides.
        """
        result: pd.DataFrame = _analysis("summary")(self, view, **options)
        return result

    def advise(
        self, *, rules: list[str] | None = None, measure: bool = False, steady: bool = True
    ) -> list[Any]:
        """Return the advice findings for this run, the largest saving its estimate stands
        behind first (``perfkit_core.advice.engine.advice_order``).

        Each is a ``perfkit_core.advice.Finding`` with ``id``, ``title``, ``severity``,
        ``evidence``, ``saving_ns`` (ns per step) and ``remedy`` (in this run's framework).
        ``rules`` limits the rules run (ids as in ``perfkit advise --rules``); ``measure``
        replays what the adapter can of each finding on this machine (``perfkit advise
        --measure``). With ``steady`` (the default) every step figure is taken over the steady
        steps, the leading warm-up left out (``perfkit_core.events.steady``).
        """
        return list(_analysis("advise")(self, rules=rules, measure=measure, steady=steady))

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the run to ``directory`` as ``events.parquet`` and ``meta.json``; return it.

        The two files are one unit: a new run id (``meta["run_id"]``) is written in both, with
        the table's row count (``meta["events"]``), so a reader refuses a folder whose files
        came from two saves. The folder is claimed for the save (``atomic.claim_folder``): a
        second process saving into it at the same time gets an ``OutputError``, and a save
        left by a process that was killed is cleaned up by the next. Both files are written in
        full under temporary names first, then renamed, ``meta.json`` last: a save cut short
        (a killed process, a full disk) leaves the previous run as it was. A run of several
        ranks is written as a saved job instead: a Parquet dataset partitioned by rank
        (``events/rank=R/part-0.parquet``) and ``meta.json`` (see
        ``perfkit_core.events.dataset``).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        directory = Path(directory)
        if len(self.meta.get("ranks") or []) > 1:
            saved: Path = _analysis("save_job")(self, directory)
            return saved
        run_id = new_run_id()
        table = with_run_id(pa.Table.from_pandas(self.events, preserve_index=False), run_id)
        self.meta.update(run_id=run_id, events=len(self.events))
        meta = dict(
            self.meta, schema_version=self.meta.get("schema_version", schema.SCHEMA_VERSION)
        )
        meta_bytes = json.dumps(meta, indent=1, default=str).encode()
        with (
            claim_folder(directory),
            atomic_paths(directory / EVENTS_FILE, directory / META_FILE) as (events_tmp, meta_tmp),
        ):
            pq.write_table(table, events_tmp, compression="zstd")
            meta_tmp.write_bytes(meta_bytes)
        return directory

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> Run:
        """Return the run saved in ``directory`` by ``Run.save`` (a saved job: all its ranks).

        Raises ``TraceError`` when the directory holds no complete run, a newer major schema,
        or an event table of another save than its metadata (``check_unit``). Columns added by
        later minor schema versions are filled as not recorded.
        """
        import pyarrow.parquet as pq

        directory = Path(directory)
        if _analysis("is_saved_job")(directory):
            job: Run = _analysis("read_job")(directory)
            return job
        meta_path = directory / META_FILE
        events_path = directory / EVENTS_FILE
        for attempt in range(UNIT_RETRIES + 1):
            meta = read_meta(meta_path, "run metadata")
            schema.check_version(directory, meta)  # a newer schema's message before its fields'
            check_meta(meta_path, meta)
            try:
                # One open file: a save replacing the table meanwhile cannot change it under
                # the reader (by path, pyarrow opens it twice: the footer, then the data).
                with open(events_path, "rb") as fh:
                    table = pq.read_table(fh)
            except FileNotFoundError:
                raise TraceError(directory, f"{EVENTS_FILE} is missing") from None
            except OSError as exc:
                reason = os.strerror(exc.errno) if exc.errno else str(exc)
                raise TraceError(events_path, f"cannot read the event table: {reason}") from None
            except Exception as exc:
                raise TraceError(events_path, f"unreadable event table: {exc}") from None
            try:
                check_unit(directory, meta, table_run_id(table), table.num_rows)
                break
            except TraceError:
                # A save replacing this run renames the table first and the metadata last: the
                # two read a moment apart can belong to two saves. Read them again.
                if attempt == UNIT_RETRIES:
                    raise
                time.sleep(0.01 * 2**attempt)
        events = table.to_pandas()
        del table
        try:
            missing = [c for c in schema.COLUMN_NAMES if c not in events.columns]
            if missing and len(missing) < len(schema.COLUMN_NAMES):
                # Written by an older minor version: its columns, the newer ones not recorded.
                events = schema.build_events(
                    {c: _values(events, c) for c in events.columns if c in schema.COLUMNS_BY_NAME},
                    n=len(events),
                )
            return cls(events, meta)
        except ValueError as exc:
            raise TraceError(events_path, str(exc)) from None


#: ``meta.json`` key and Parquet key-value metadata key of the id one save writes in both.
RUN_ID_KEY = "run_id"
#: Times a reader reads a run again when its two files belong to two saves.
UNIT_RETRIES = 5


def new_run_id() -> str:
    """A new run id: 32 hexadecimal digits, random."""
    import uuid

    return uuid.uuid4().hex


def with_run_id(table: Any, run_id: str) -> Any:
    """The Arrow ``table`` with ``run_id`` in its key-value metadata (``RUN_ID_KEY``)."""
    metadata = dict(table.schema.metadata or {})
    metadata[RUN_ID_KEY.encode()] = run_id.encode()
    return table.replace_schema_metadata(metadata)


def table_run_id(table_or_schema: Any) -> str | None:
    """The run id an event table (an Arrow table or schema) was saved with, or None."""
    schema_ = getattr(table_or_schema, "schema", table_or_schema)
    value = (schema_.metadata or {}).get(RUN_ID_KEY.encode())
    return value.decode(errors="replace") if value is not None else None


def check_unit(directory: Path, meta: dict[str, Any], run_id: str | None, rows: int) -> None:
    """Raise ``TraceError`` when the event table read from ``directory`` (its ``run_id`` and
    ``rows``) is not the one ``meta`` names: a file copied in from another run, or a save
    under way (named, when another process is saving into the folder). Runs saved before run
    ids were written (neither file has one) are not checked."""
    from perfkit_core.events.atomic import saving_owner

    expected = meta.get(RUN_ID_KEY)
    if expected is None and run_id is None:
        return
    count = meta.get("events")
    if expected == run_id and (count is None or int(count) == rows):
        return
    owner = saving_owner(directory)
    if owner is not None:
        raise TraceError(
            directory,
            f"process {owner[0]} on {owner[1]} is saving a run into it; read it when it is done",
        )
    if expected != run_id:
        raise TraceError(
            directory,
            f"{EVENTS_FILE} (run {run_id or 'without an id'}) is not the table of {META_FILE} "
            f"(run {expected or 'without an id'}): the folder mixes files of two saved runs",
        )
    raise TraceError(directory, f"{EVENTS_FILE} holds {rows} events where {META_FILE} says {count}")


def read_meta(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` (a saved run's or job's ``meta.json``); ``TraceError`` in
    words when it is missing, a folder, unreadable, cut short, not JSON or not an object."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(path.parent, f"not a saved perfkit run ({META_FILE} is missing)") from None
    except IsADirectoryError:
        raise TraceError(path, f"is a folder, not the {what} file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read the {what}: {exc.strerror or exc}") from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            raise TraceError(
                path, f"the {what} is cut short: the file ends at byte {len(text)}, inside its JSON"
            ) from None
        raise TraceError(
            path, f"the {what} is not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:  # not UTF-8
        raise TraceError(path, f"the {what} is not UTF-8 JSON text ({exc})") from None
    if not isinstance(meta, dict):
        raise TraceError(path, f"{what} is not a JSON object")
    return meta


def _values(events: pd.DataFrame, name: str) -> Any:
    import pandas as pd

    column = events[name]
    return column.array if isinstance(column.dtype, pd.CategoricalDtype) else column.to_numpy()


def is_saved_run(path: str | os.PathLike[str]) -> bool:
    """Return True when ``path`` is a directory written by ``Run.save``."""
    path = Path(path)
    try:
        return path.is_dir() and (path / META_FILE).is_file()
    except OSError:  # a folder that cannot be searched; load() says why
        return False
