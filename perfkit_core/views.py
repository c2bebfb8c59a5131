"""Summary views: the registry, and the built-in ``operator`` and ``user`` views.

A view is a function ``view(run, **options) -> DataFrame`` registered through the
``perfkit_register_views`` hook. This module is itself a built-in plugin.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core import structure
from perfkit_core.errors import UnknownViewError
from perfkit_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.run import Run


@dataclass(frozen=True)
class ViewSpec:
    """A registered view: its name, the function computing it, and a one-line description."""

    name: str
    function: Callable[..., pd.DataFrame]
    description: str


_views: dict[str, ViewSpec] | None = None
_views_lock = threading.Lock()


def clear_view_cache() -> None:
    """Forget the registered views; the next lookup asks the plugins again."""
    global _views
    with _views_lock:
        _views = None


def registered_views() -> dict[str, ViewSpec]:
    """Return every view the installed plugins register, by name."""
    global _views
    with _views_lock:
        if _views is None:
            from perfkit_core.plugins import get_plugin_manager

            found: dict[str, ViewSpec] = {}

            def register(
                name: str, function: Callable[..., pd.DataFrame], description: str = ""
            ) -> None:
                found[name] = ViewSpec(name, function, description)

            hook = get_plugin_manager().hook.perfkit_register_views
            # Built-ins register first, so plugins registered later may override them.
            for impl in hook.get_hookimpls():
                impl.function(register=register)
            _views = found
        return dict(_views)


def get_view(name: str) -> ViewSpec:
    """Return the view called ``name``; ``UnknownViewError`` lists the known ones otherwise."""
    views = registered_views()
    if name not in views:
        raise UnknownViewError(f"unknown view {name!r}; known views: {', '.join(sorted(views))}")
    return views[name]


# ---------------------------------------------------------------------------------------------
# Host-event tables (operator, user)

SORT_KEYS = (
    "calls",
    "cpu_total",
    "cpu_self",
    "cpu_avg",
    "cpu_max",
    "cpu_min",
    "gpu_total",
    "gpu_self",
    "gpu_avg",
    "gpu_max",
    "gpu_min",
)


def host_self_time(run: Run) -> np.ndarray:
    """Return each row's self time in ns: its duration less its host children's, never negative.

    Cached on the run.
    """
    cached = run._cache.get("self_ns")
    if cached is None:
        events = run.events
        dur = events["dur_ns"].to_numpy()
        child = structure.children_sum(events["parent"].to_numpy(), dur.astype(np.float64))
        cached = np.maximum(dur - child.astype(np.int64), 0)
        run._cache["self_ns"] = cached
    return cached


def _python_stacks(run: Run, rows: np.ndarray, n: int) -> list[str]:
    """Top ``n`` enclosing Python frames of each row (innermost first), newline-joined."""
    events = run.events
    parent = events["parent"].to_numpy()
    is_python = (events["kind"] == "python").to_numpy()
    name_codes = events["name"].cat.codes.to_numpy().astype(np.int64)
    categories = events["name"].cat.categories
    frames = np.full((len(rows), n), -1, dtype=np.int64)
    count = np.zeros(len(rows), dtype=np.int64)
    cur = parent[rows]
    active = cur >= 0
    while active.any():
        idx = np.flatnonzero(active)
        hit = idx[is_python[cur[idx]]]
        frames[hit, count[hit]] = name_codes[cur[hit]]
        count[hit] += 1
        cur[idx] = parent[cur[idx]]
        active = (cur >= 0) & (count < n)
    uniq, inverse = np.unique(frames, axis=0, return_inverse=True)
    labels = ["\n".join(str(categories[c]) for c in row if c >= 0) for row in uniq]
    return [labels[i] for i in np.asarray(inverse).reshape(-1)]


def host_event_table(
    run: Run,
    kinds: Iterable[str],
    *,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    rank: int | None = None,
    sort_by: str = "cpu_total",
    top: int | None = None,
) -> pd.DataFrame:
    """Return one row per name (and shape / stack when asked) of host events of ``kinds``.

    Columns: ``name``, [``input_shapes``], [``stack``], ``calls``, ``cpu_total_ns``,
    ``cpu_self_ns``, ``cpu_avg_ns``, ``cpu_max_ns``, ``cpu_min_ns``, ``gpu_total_ns``,
    ``gpu_self_ns``, ``gpu_avg_ns``, ``gpu_max_ns``, ``gpu_min_ns`` (ns; GPU columns are NaN when
    the run recorded no device events). CPU time is wall time on the host thread; self time
    excludes nested host events and is never negative. GPU time is the device time of the work
    the event launched (total: itself and everything nested in it; self: launched directly).
    """
    import pandas as pd

    if sort_by not in SORT_KEYS and sort_by != "name":
        raise ValueError(f"sort_by must be one of {', '.join(SORT_KEYS)} or name, not {sort_by!r}")
    events = run.events
    mask = events["kind"].isin(list(kinds)).to_numpy() & (events["stream"].to_numpy() < 0)
    if rank is not None:
        mask &= events["rank"].to_numpy() == rank
    rows = np.flatnonzero(mask)
    gpu_self, gpu_total = structure.device_time_by_launcher(run)
    frame = pd.DataFrame(
        {
            "name": events["name"].to_numpy()[rows].astype(object),
            "dur": events["dur_ns"].to_numpy()[rows],
            "self": host_self_time(run)[rows],
            "gpu_total": gpu_total[rows],
            "gpu_self": gpu_self[rows],
        }
    )
    keys = ["name"]
    if group_by_input_shape:
        frame["input_shapes"] = events["input_shapes"].to_numpy()[rows].astype(object)
        keys.append("input_shapes")
    if group_by_stack_n > 0:
        recorded = events["stack"].to_numpy()[rows].astype(object)
        if any(recorded):
            stacks = ["\n".join(s.split("\n")[:group_by_stack_n]) for s in recorded]
        else:
            stacks = _python_stacks(run, rows, group_by_stack_n)
        frame["stack"] = stacks
        keys.append("stack")
    grouped = frame.groupby(keys, sort=False, observed=True, dropna=False)
    out = grouped.agg(
        calls=("dur", "size"),
        cpu_total_ns=("dur", "sum"),
        cpu_self_ns=("self", "sum"),
        cpu_max_ns=("dur", "max"),
        cpu_min_ns=("dur", "min"),
        gpu_total_ns=("gpu_total", "sum"),
        gpu_self_ns=("gpu_self", "sum"),
        gpu_max_ns=("gpu_total", "max"),
        gpu_min_ns=("gpu_total", "min"),
    ).reset_index()
    has_gpu = not np.isnan(gpu_total).all()
    out["cpu_avg_ns"] = out["cpu_total_ns"] / out["calls"]
    out["gpu_avg_ns"] = out["gpu_total_ns"] / out["calls"]
    if not has_gpu:
        for col in ("gpu_total_ns", "gpu_self_ns", "gpu_avg_ns", "gpu_max_ns", "gpu_min_ns"):
            out[col] = np.nan
    ordered = [
        *keys,
        "calls",
        "cpu_total_ns",
        "cpu_self_ns",
        "cpu_avg_ns",
        "cpu_max_ns",
        "cpu_min_ns",
        "gpu_total_ns",
        "gpu_self_ns",
        "gpu_avg_ns",
        "gpu_max_ns",
        "gpu_min_ns",
    ]
    out = out[ordered]
    out["calls"] = out["calls"].astype(np.int64)
    for col in ("cpu_total_ns", "cpu_self_ns", "cpu_max_ns", "cpu_min_ns"):
        out[col] = out[col].astype(np.int64)
    if sort_by == "name":
        out = out.sort_values(keys, kind="stable")
    else:
        column = sort_by if sort_by == "calls" else f"{sort_by}_ns"
        out = out.sort_values([column, "name"], ascending=[False, True], kind="stable")
    if top is not None:
        out = out.head(top)
    return out.reset_index(drop=True)


def operator_view(run: Run, **options: Any) -> pd.DataFrame:
    """Operators: calls and CPU/GPU time per operator name (see ``host_event_table``)."""
    return host_event_table(run, ("operator",), **options)


def user_view(run: Run, **options: Any) -> pd.DataFrame:
    """User-defined spans (record_function, RecordEvent): calls and time per span name."""
    return host_event_table(run, ("user",), **options)


@hookimpl
def perfkit_register_views(
    register: Callable[[str, Callable[..., pd.DataFrame], str], None],
) -> None:
    """Register the built-in views."""
    register("operator", operator_view, "calls, CPU and GPU time per operator")
    register("user", user_view, "calls, CPU and GPU time per user-defined span")
