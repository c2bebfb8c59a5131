"""Each run analysed once per server: the reports and comparisons ``perfkit serve`` shows.

A run is read once (``report_source``) and kept while it is among the ``MAX_SOURCES`` last used,
so a second pane of the same run never reads its trace again; each report (a set of views and
options) is kept while it is among the ``MAX_REPORTS`` last used and the reports kept hold at
most ``MAX_REPORT_MB`` of JSON. Everything is keyed by the run's identity (its files' names,
sizes and times), so a rewritten run is analysed again. The list's figures (steps, step time,
the change worth most) come from each run's default report, made in the background by
``workers`` threads, a bounded number at a time.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from perfkit_core.serve.catalog import Entry

#: Runs read and kept (each holds its event table).
MAX_SOURCES = 4
#: Reports kept, and the JSON they may hold together.
MAX_REPORTS = 64
MAX_REPORT_MB = 256


class LRU:
    """A map that keeps its ``max_items`` last used entries and at most ``max_bytes`` of their
    stated sizes; ``get_or_make`` makes a missing entry once, however many ask at a time."""

    def __init__(self, max_items: int, max_bytes: float = float("inf")) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key][0]

    def get_or_make(
        self, key: Hashable, make: Callable[[], Any], size: Callable[[Any], int] = lambda _: 0
    ) -> Any:
        found = self.get(key)
        if found is not None:
            return found
        with self._lock:
            lock = self._making.setdefault(key, threading.Lock())
        with lock:
            found = self.get(key)
            if found is not None:
                return found
            value = make()
            self.put(key, value, size(value))
        with self._lock:
            self._making.pop(key, None)
        return value

    def put(self, key: Hashable, value: Any, nbytes: int = 0) -> None:
        with self._lock:
            self._items[key] = (value, nbytes)
            self._items.move_to_end(key)
            while len(self._items) > self.max_items or (
                len(self._items) > 1 and self.bytes() > self.max_bytes
            ):
                self._items.popitem(last=False)

    def bytes(self) -> int:
        return sum(n for _, n in self._items.values())

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class Document:
    """A report or comparison as ``perfkit ... --format json`` prints it (``text``), with the
    list's figures of a report (``list_figures``)."""

    text: str
    figures: dict[str, Any] = field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.text)
        return found

    @classmethod
    def of(cls, payload: dict[str, Any], *, report: bool = False) -> Document:
        from perfkit_core.report.json import dumps

        return cls(dumps(payload), list_figures(payload) if report else {})


def _size(document: Document) -> int:
    return len(document.text)


class Analyses:
    """The reports and comparisons of the runs of a ``Catalog``, made once each."""

    def __init__(self, *, workers: int = 1) -> None:
        self.sources = LRU(MAX_SOURCES)
        self.reports = LRU(MAX_REPORTS, MAX_REPORT_MB * 1e6)
        self.comparisons = LRU(MAX_REPORTS, MAX_REPORT_MB * 1e6)
        self.timelines = LRU(MAX_SOURCES)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="perfkit-serve")
        self._queued: dict[Hashable, Future[Any]] = {}
        self._lock = threading.Lock()
        self.errors: dict[Hashable, str] = {}

    def busy(self) -> bool:
        """Whether any background analysis is queued or running."""
        with self._lock:
            return any(not f.done() for f in self._queued.values())

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def key(entry: Entry) -> Hashable:
        return (entry.id, entry.identity, entry.mtime, entry.size)

    def source(self, entry: Entry) -> Any:
        """The run or job of ``entry``, read once while it stays among the last used."""
        from perfkit_core.report.documents import (
            REPORT_OPTIONS,
            default_views,
            report_source,
            view_options_of,
        )

        def read() -> Any:
            names = default_views(entry.path)
            return report_source(entry.path, names, view_options_of(names, REPORT_OPTIONS))

        return self.sources.get_or_make(self.key(entry), read)

    def report(
        self, entry: Entry, views: tuple[str, ...] = (), requested: tuple[tuple[str, Any], ...] = ()
    ) -> Document:
        """The report of ``entry`` (``perfkit report --format json``: the default views, or
        ``views``; the command line's options updated by ``requested``)."""
        from perfkit_core.report.documents import report_of
        from perfkit_core.report.json import report_json

        def make() -> Document:
            source = self.source(entry)
            if views and getattr(source, "events", None) is None:
                source = None  # a job is analysed again for other views
            model, _ = report_of(
                entry.path, list(views) or None, requested=dict(requested), source=source
            )
            return Document.of(report_json(model), report=not views and not requested)

        key = (self.key(entry), views, requested)
        try:
            found: Document = self.reports.get_or_make(key, make, _size)
        except Exception as exc:
            self.errors[self.key(entry)] = _one_line(entry, exc)
            raise
        return found

    def prepare(self, entry: Entry, queries: list[tuple[tuple[str, ...], tuple[Any, ...]]]) -> None:
        """Make the reports ``queries`` (views, options) of ``entry`` in the background: the
        tabs a reader opens after the first, from the run already read."""
        for views, requested in queries:
            key = (self.key(entry), views, requested)
            with self._lock:
                queued = self._queued.get(key)
                if (queued is not None and not queued.done()) or self.reports.get(key) is not None:
                    continue
                self._queued[key] = self.pool.submit(self._quietly, entry, views, requested)

    def _quietly(self, entry: Entry, views: tuple[str, ...], requested: tuple[Any, ...]) -> None:
        with contextlib.suppress(Exception):  # asked again, the tab shows the error
            self.report(entry, views, requested)

    def timeline(self, entry: Entry, rank: int | None = None) -> Any:
        """The timeline of ``entry`` (``serve.timeline.Timeline``), built once from the run
        already read; of a job, the timeline of one rank (``rank``, else its first), that
        rank's trace read alone."""
        from perfkit_core.serve.timeline import Timeline

        def make() -> Timeline:
            source = self.source(entry)
            if getattr(source, "events", None) is not None:
                return Timeline(source)
            from perfkit_core.jobs.inputs import load_job_rank

            ranks = sorted(int(r) for r in source.meta.get("ranks") or [])
            chosen = ranks[0] if rank is None and ranks else rank
            if chosen not in ranks:
                raise ValueError(f"{entry.id} has no rank {rank} (its ranks: {ranks})")
            return Timeline(load_job_rank(entry.path, chosen), ranks=ranks)

        return self.timelines.get_or_make((self.key(entry), rank), make)

    def prepare_timeline(self, entry: Entry) -> None:
        """Build the timeline of ``entry`` in the background (after its first report)."""
        key = ("timeline", self.key(entry))
        with self._lock:
            queued = self._queued.get(key)
            if (queued is not None and not queued.done()) or self.timelines.get(
                (self.key(entry), None)
            ):
                return
            self._queued[key] = self.pool.submit(self._timeline_quietly, entry)

    def _timeline_quietly(self, entry: Entry) -> None:
        with contextlib.suppress(Exception):  # asked again, the tab shows the error
            self.timeline(entry)

    def comparison(self, a: Entry, b: Entry) -> Document:
        """The comparison of ``a`` (the baseline) and ``b``, from the runs already read."""
        from perfkit_core.report.documents import comparison_of
        from perfkit_core.report.json import comparison_json

        def make() -> Document:
            runs = [self.source(a), self.source(b)]
            if any(getattr(r, "events", None) is None for r in runs):
                runs = [a.path, b.path]
            labels = _labels(a, b)
            return Document.of(comparison_json(comparison_of(runs, labels=labels)))

        found: Document = self.comparisons.get_or_make((self.key(a), self.key(b)), make, _size)
        return found

    def gate(self, a: Entry, b: Entry, fail_pct: float) -> dict[str, Any]:
        """The regression gate's verdict on ``b`` against ``a`` (``perfkit compare A B
        --fail-on-regression PCT``): step time, the steady steps."""
        from perfkit_core.comparison import compare

        def make() -> dict[str, Any]:
            runs = [self.source(a), self.source(b)]
            if any(getattr(r, "events", None) is None for r in runs):
                runs = [a.path, b.path]
            found: dict[str, Any] = (
                compare(*runs, labels=_labels(a, b)).gate(fail_pct, "step_time").to_dict()
            )
            return found

        result: dict[str, Any] = self.comparisons.get_or_make(
            ("gate", self.key(a), self.key(b), fail_pct), make
        )
        return result

    def summary(self, entry: Entry) -> dict[str, Any] | None:
        """The list's figures of ``entry`` when its default report is made; else None, and its
        report is queued (at most ``workers`` made at a time)."""
        key = self.key(entry)
        if key in self.errors:
            return {"error": self.errors[key]}
        document = self.reports.get((key, (), ()))
        if document is not None:
            found: dict[str, Any] = document.figures
            return found
        self.prepare(entry, [((), ())])  # an error is kept in ``errors``; the list shows it
        return None


def _labels(a: Entry, b: Entry) -> list[str]:
    """Labels for two runs: their names, with their folders when the names are the same."""
    if a.name != b.name:
        return [a.name, b.name]
    return [a.id, b.id] if a.id != b.id else [f"{a.name} (a)", f"{b.name} (b)"]


def _one_line(entry: Entry, exc: Exception) -> str:
    from perfkit_core.errors import printable

    text = " ".join(str(exc).replace(str(entry.path), entry.id).split()) or type(exc).__name__
    if entry.name not in text:
        text = f"{entry.name}: {text}"
    return printable(text)


#: The headline items the list shows.
STEP_ITEM = "Step time (mean)"


def list_figures(document: dict[str, Any]) -> dict[str, Any]:
    """Steps, step time (ns) and the change worth most of a report JSON, for the list."""
    headline = document.get("headline") or {}
    items = {i["label"]: i["value"] for i in headline.get("items") or []}
    steps = next((v for k, v in items.items() if k.startswith("Steps")), None)
    change = None
    top = headline.get("finding")
    for finding in document.get("advice") or []:
        if finding.get("id") == top:
            summary = finding.get("summary") or {}
            change = summary.get("title") or finding.get("title")
            break
    return {
        "steps": steps,
        "step_ns": items.get(STEP_ITEM),
        "change_first": change,
        "note": headline.get("note"),
    }
