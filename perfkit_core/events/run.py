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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import TraceError
from perfkit_core.events import schema
from perfkit_core.events.atomic import atomic_paths
from perfkit_core.events.metadata import check_meta

if TYPE_CHECKING:
    import pandas as pd

EVENTS_FILE = "events.parquet"
META_FILE = "meta.json"

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
        self._cache: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return (
            f"Run(framework={self.meta.get('framework')!r}, events={len(self.events)}, "
            f"ranks={self.meta.get('ranks', [self.meta.get('rank', 0)])}, "
            f"steps={len(self.meta.get('steps', []))})"
        )

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

    def advise(self, *, rules: list[str] | None = None) -> list[Any]:
        """Return the advice findings for this run, the largest estimated saving first.

        Each is a ``perfkit_core.advice.Finding`` with ``id``, ``title``, ``severity``,
        ``evidence``, ``saving_ns`` (ns over the profiled steps) and ``remedy`` (in this run's
        framework). ``rules`` limits the rules run (ids as in ``perfkit advise --rules``).
        """
        return list(_analysis("advise")(self, rules=rules))

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the run to ``directory`` as ``events.parquet`` and ``meta.json``; return it.

        Both files are written in full under temporary names first, then renamed, ``meta.json``
        last: a directory with a ``meta.json`` always holds a complete run, and a save cut short
        (a killed process, a full disk) leaves at most hidden temporary files. A run of several
        ranks is written as a saved job instead: a Parquet dataset partitioned by rank
        (``events/rank=R/part-0.parquet``) and ``meta.json`` (see ``perfkit_core.events.dataset``).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        directory = Path(directory)
        if len(self.meta.get("ranks") or []) > 1:
            saved: Path = _analysis("save_job")(self, directory)
            return saved
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(self.events, preserve_index=False)
        meta = dict(
            self.meta, schema_version=self.meta.get("schema_version", schema.SCHEMA_VERSION)
        )
        meta_bytes = json.dumps(meta, indent=1, default=str).encode()
        with atomic_paths(directory / EVENTS_FILE, directory / META_FILE) as (events_tmp, meta_tmp):
            pq.write_table(table, events_tmp, compression="zstd")
            meta_tmp.write_bytes(meta_bytes)
        return directory

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> Run:
        """Return the run saved in ``directory`` by ``Run.save`` (a saved job: all its ranks).

        Raises ``TraceError`` when the directory holds no complete run or a newer major schema.
        Columns added by later minor schema versions are filled as not recorded.
        """
        import pyarrow.parquet as pq

        directory = Path(directory)
        if _analysis("is_saved_job")(directory):
            job: Run = _analysis("read_job")(directory)
            return job
        meta_path = directory / META_FILE
        events_path = directory / EVENTS_FILE
        try:
            meta = json.loads(meta_path.read_text())
        except FileNotFoundError:
            raise TraceError(
                directory, f"not a saved perfkit run ({META_FILE} is missing)"
            ) from None
        except (OSError, ValueError) as exc:
            raise TraceError(meta_path, f"unreadable run metadata: {exc}") from None
        if not isinstance(meta, dict):
            raise TraceError(meta_path, "run metadata is not a JSON object")
        schema.check_version(directory, meta)  # a newer schema's message before its fields'
        check_meta(meta_path, meta)
        try:
            events = pq.read_table(events_path).to_pandas()
        except FileNotFoundError:
            raise TraceError(directory, f"{EVENTS_FILE} is missing") from None
        except Exception as exc:
            raise TraceError(events_path, f"unreadable event table: {exc}") from None
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
