"""The report of a path and the comparison of paths, as the command line makes them: one code
path for ``perfkit report``, ``perfkit compare`` and ``perfkit serve``.

``report_of(path, ...)`` reads a trace, saved run or job (a job analysed rank by rank on Dask)
and builds its ``Report``; ``comparison_of(paths, ...)`` builds a ``ComparisonReport``.
``REPORT_OPTIONS`` and the other defaults are the command line's defaults (a test checks they
agree), so a document made with the defaults is the one ``perfkit report PATH --format json``
prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_core.report.comparison_model import ComparisonReport
    from perfkit_core.report.model import Report

#: The view options ``perfkit report`` passes when none is given on its command line.
REPORT_OPTIONS: dict[str, Any] = {
    "sort_by": "cpu_total",
    "rank": None,
    "group_by_input_shape": False,
    "group_by_stack_n": 0,
    "by_thread": False,
    "op_detail": False,
    "peak_tflops": None,
    "peak_bandwidth": None,
    "group_by": "type",
    "filter": None,
    "max_depth": None,
    "order_by": None,
    "step": None,
    "params": False,
    "select": None,
}
#: ``perfkit report``'s default time unit and rows per table.
REPORT_TIME_UNIT = "ms"
REPORT_TOP = 30
#: ``perfkit compare``'s default rows per table.
COMPARE_TOP = 20


def report_source(
    path: str | os.PathLike[str],
    names: list[str],
    options: dict[str, dict[str, Any]],
    *,
    rank: int | None = None,
    advice: bool = True,
    scheduler: str | None = None,
    workers: int | None = None,
    save_to: str | os.PathLike[str] | None = None,
    notify: Callable[[str], None] | None = None,
) -> Any:
    """What a report of ``path`` is made from: a ``Run`` (one trace or saved run: events ->
    views -> advice -> report), or a ``Job`` analysed rank by rank (a folder of per-rank traces
    or a saved job, unless ``rank`` picks one of its ranks)."""
    from perfkit_core.events.loading import load
    from perfkit_core.events.ranks import require_rank
    from perfkit_core.jobs import analyse_job, is_job
    from perfkit_core.jobs.inputs import load_job_rank
    from perfkit_core.report.headline import HEADLINE_VIEWS

    if rank is None and is_job(path):
        return analyse_job(
            path,
            [*names, *(v for v in HEADLINE_VIEWS if v not in names)],
            options=options,
            advice=advice,
            scheduler=scheduler,
            workers=workers,
            save_to=save_to,
            notify=notify,
        )
    source = (
        load_job_rank(path, rank)
        if rank is not None and is_job(path)
        else require_rank(load(path), rank, path)
    )
    if save_to is not None:
        source.save(save_to)
    return source


def default_views(path: str | os.PathLike[str]) -> list[str]:
    """The views ``perfkit report`` shows of ``path`` when none are named: a job's, or a run's."""
    from perfkit_core.jobs import DEFAULT_JOB_VIEWS, is_job
    from perfkit_core.report.model import DEFAULT_VIEWS

    return list(DEFAULT_JOB_VIEWS if is_job(path) else DEFAULT_VIEWS)


def view_options_of(names: Sequence[str], requested: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The options each view of ``names`` takes from ``requested`` (unknown views raise)."""
    from perfkit_core.views import get_view
    from perfkit_core.views.registry import view_options

    for name in names:
        get_view(name)
    return {name: view_options(name, requested) for name in names}


def report_of(
    path: str | os.PathLike[str],
    views: Sequence[str] | None = None,
    *,
    requested: dict[str, Any] | None = None,
    time_unit: str = REPORT_TIME_UNIT,
    top: int | None = REPORT_TOP,
    advice: bool = True,
    batch_size: int | None = None,
    steady: bool = True,
    source: Any = None,
) -> tuple[Report, Any]:
    """(the report of ``path``, what it was made from). ``views`` default to ``perfkit
    report``'s for that path; ``requested`` updates ``REPORT_OPTIONS``; ``source`` is a run or
    job already read from ``path`` (``report_source``), read here when None."""
    from perfkit_core.report.model import build_report

    names = list(views) if views else default_views(path)
    options = view_options_of(names, {**REPORT_OPTIONS, **(requested or {})})
    if source is None:
        source = report_source(path, names, options, advice=advice)
    model = build_report(
        source,
        names,
        time_unit=time_unit,
        top=top or None,
        options=options,
        advice=advice,
        batch_size=batch_size,
        steady=steady,
    )
    return model, source


def comparison_of(
    paths: Sequence[str | os.PathLike[str]] | Sequence[Any],
    views: Sequence[str] | None = None,
    *,
    labels: list[str] | None = None,
    time_unit: str = REPORT_TIME_UNIT,
    top: int | None = COMPARE_TOP,
    steady: bool = True,
) -> ComparisonReport:
    """The comparison of ``paths`` (or runs already read), the first the baseline, as ``perfkit
    compare`` makes it with its defaults."""
    from perfkit_core.comparison import compare
    from perfkit_core.report.comparison_model import (
        DEFAULT_COMPARISON_VIEWS,
        build_comparison_report,
    )

    comparison = compare(*paths, labels=labels, steady=steady)
    names = list(views) if views else list(DEFAULT_COMPARISON_VIEWS)
    return build_comparison_report(comparison, names, time_unit=time_unit, top=top or None)
