"""The view registry: which summary views the installed plugins provide, per plugin manager."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfkit_core.errors import UnknownViewError
from perfkit_core.events.cache import RunCache
from perfkit_core.plugins import get_plugin_manager, registrations
from perfkit_core.views.common import SHARED_KEY, private_copy
from perfkit_core.views.contract import with_old_names
from perfkit_core.views.multirank.across import make_combiner, per_rank_options

if TYPE_CHECKING:
    import pandas as pd
    import pluggy

    from perfkit_core.events.run import Run


@dataclass(frozen=True)
class ViewSpec:
    """A registered view: its name, the function computing it, a one-line description, and
    how it combines the ranks of a job (``across``, see ``perfkit_core.views.multirank.across``; views
    registered without one show one block of rows per rank)."""

    name: str
    function: Callable[..., pd.DataFrame]
    description: str
    across: Any = "concat"


def registered_views(pm: pluggy.PluginManager | None = None) -> dict[str, ViewSpec]:
    """Return every view the plugins of ``pm`` (default: the process-wide manager) register."""
    found = registrations(pm or get_plugin_manager(), "perfkit_register_views")
    return {
        name: ViewSpec(
            name,
            values[0],
            values[1] if len(values) > 1 else "",
            values[2] if len(values) > 2 and values[2] is not None else "concat",
        )
        for name, values in found.items()
    }


def get_view(name: str, pm: pluggy.PluginManager | None = None) -> ViewSpec:
    """Return the view called ``name``; ``UnknownViewError`` lists the known ones otherwise."""
    views = registered_views(pm)
    if name not in views:
        raise UnknownViewError(f"unknown view {name!r}; known views: {', '.join(sorted(views))}")
    return views[name]


#: ``Run.cache`` key of the views computed while they are shared (``shared_views``).
SHARED_VIEWS_KEY = SHARED_KEY


@contextmanager
def shared_views(run: Any) -> Iterator[None]:
    """While inside, each view of ``run`` is computed once per set of options: a report and its
    advice and headline, which read the same views (``model``, ``steps``, ``operator``,
    ``mfu``...), share them; each ask gets its own copy of the frame. The frames are let go
    on leaving (a view can depend on more than the run: the peaks measured on this machine).
    Nests; a run without a cache (an analysed job) is left alone."""
    cache = getattr(run, "cache", None)
    if not isinstance(cache, RunCache) or SHARED_VIEWS_KEY in cache:
        yield
        return
    cache.put(SHARED_VIEWS_KEY, {})
    try:
        yield
    finally:
        cache.drop(SHARED_VIEWS_KEY)


def summary(run: Run, view: str, **options: Any) -> pd.DataFrame:
    """Return the summary table ``view`` of ``run`` (what ``Run.summary`` returns).

    For a run of several ranks, ``rank=R`` computes the view on rank R's table alone; without
    it, the view is computed on each rank's table and the tables are combined by the view's
    ``across`` rule, which the table's note states (``perfkit_core.views.multirank.across``). Inside
    ``shared_views(run)`` a view asked again with the same options is not computed again. A
    column renamed in this release still reads under its old name, with a warning
    (``perfkit_core.views.contract``).
    """
    import pandas as pd

    spec = get_view(view)
    cache = getattr(run, "cache", None)
    shared = cache.get(SHARED_VIEWS_KEY) if isinstance(cache, RunCache) else None

    def source(other: str) -> pd.DataFrame:
        return summary(run, other, **({"rank": options["rank"]} if "rank" in options else {}))

    if shared is None:
        return with_old_names(_summary(run, spec, options), view, source)
    try:
        key = (view, spec.function, _options_key(spec.function, options))
        hash(key)
    except TypeError:  # an option that cannot be a key (a list): computed each time
        return with_old_names(_summary(run, spec, options), view, source)
    frame = shared.get(key)
    if frame is None:
        frame = shared[key] = _summary(run, spec, options)
    return with_old_names(private_copy(frame) if isinstance(frame, pd.DataFrame) else frame, view)


def _options_key(function: Callable[..., Any], options: dict[str, Any]) -> tuple[Any, ...]:
    """``options`` with the defaults of the keyword arguments ``function`` takes, sorted: the
    same key for a view asked with an option at its default and without it."""
    import inspect

    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        params = []
    full = {
        p.name: p.default
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
    }
    full.update(options)
    return tuple(sorted(full.items()))


def _summary(run: Run, spec: ViewSpec, options: dict[str, Any]) -> pd.DataFrame:
    """The view ``spec`` of ``run`` with ``options``, computed (see ``summary``)."""
    from perfkit_core.events.ranks import is_multi_rank, rank_run, run_ranks

    if not is_multi_rank(run):
        return spec.function(run, **options)
    rank = options.get("rank")
    if rank is not None:
        own = {k: v for k, v in options.items() if k != "rank" or spec.across == "native"}
        target = run if spec.across == "native" else rank_run(run, int(rank))
        return spec.function(target, **own)
    if spec.across == "native":
        return spec.function(run, **options)
    combiner = make_combiner(spec.across, options)
    for r in run_ranks(run):
        combiner.add(r, rank_view(rank_run(run, r), spec, options))
    return combiner.result()


def rank_view(one_rank: Run, spec: ViewSpec, options: dict[str, Any]) -> pd.DataFrame:
    """The view ``spec`` of a one-rank run with the options each rank of a job runs with (those
    that apply after combining, ``top`` and ``rank``, left out)."""
    return spec.function(one_rank, **per_rank_options(options))


def view_options(view: str, requested: dict[str, Any]) -> dict[str, Any]:
    """Of the options ``requested`` (the command line's), those ``view`` accepts (by its
    signature), leaving out unset ones (False, or the default)."""
    import inspect

    from perfkit_core.views.operators import host_event_table

    params = inspect.signature(get_view(view).function).parameters
    accepted = set(params)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        # operator and user pass their options on to host_event_table
        accepted |= set(inspect.signature(host_event_table).parameters)
    defaults = {
        "sort_by": "cpu_total",
        "rank": None,
        "group_by_stack_n": 0,
        "group_by": "type",
        "filter": None,
    }
    return {
        key: value
        for key, value in requested.items()
        if key in accepted and value is not False and defaults.get(key, object()) != value
    }
