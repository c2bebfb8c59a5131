"""A perfkit plugin adding the ``kinds`` view: how many events of each kind, and their time.

Register it under the entry-point group ``perfkit`` of your distribution (see the plugins
guide), or by hand for one session::

    import perfkit_core
    import plugin_view

    perfkit_core.get_plugin_manager().register(plugin_view, name="kinds")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

import perfkit_core


def kinds_view(run: Any, *, rank: int | None = None, top: int | None = None) -> pd.DataFrame:
    """One row per kind of event: ``events`` (how many) and ``total_ns`` (their summed
    duration in ns), largest first. ``rank`` keeps one rank of a run of several ranks."""
    events = run.events
    if rank is not None:
        events = events[events["rank"] == rank]
    out = (
        events.groupby("kind", observed=True)["dur_ns"]
        .agg(events="size", total_ns="sum")
        .reset_index()
        .rename(columns={"kind": "name"})  # the key column of a view is called `name`
    )
    out["name"] = out["name"].astype(str)
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable")
    if top is not None:
        out = out.head(top)
    return out.reset_index(drop=True)


@perfkit_core.hookimpl
def perfkit_register_views(register: Callable[..., None]) -> None:
    register("kinds", kinds_view, "events and total time per kind")
