"""Two facts every layer asks of a run, each defined once: whether it recorded device work
(``has_device``) and how many steps it recorded (``step_count``; ``steps_per_rank`` for the
mean rank of several)."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfkit_core.events.links import kind_is


def has_device(run: Any) -> bool:
    """Whether ``run`` recorded device events (rows with a stream): of a ``Run``, from its
    event table (computed once); of a job analysed rank by rank, whether any rank did (its
    ``has_device``)."""
    events = getattr(run, "events", None)
    if events is None:
        return bool(getattr(run, "has_device", False))
    cached = getattr(run, "cached", None)
    if cached is None:  # an event table alone
        return bool((events["stream"].to_numpy() >= 0).any())
    return bool(cached("has_device", lambda: bool((events["stream"].to_numpy() >= 0).any())))


def step_count(run: Any, rank: int | None = None) -> int:
    """The number of step spans ``run`` recorded (of ``rank`` when given, else of every rank):
    0 for a run without steps. A figure per step of such a run divides by 1, the whole
    profiled span being its one step; that is the caller's ``max(step_count(run), 1)``."""
    events = run.events
    steps = kind_is(events, "step") & (events["stream"].to_numpy() < 0)
    if rank is not None:
        steps &= events["rank"].to_numpy() == rank
    return int(steps.sum())


def steps_per_rank(run: Any) -> int:
    """The steps of ``run``'s mean rank: its step spans over the ranks that recorded steps,
    rounded; 0 without steps. Of a job analysed rank by rank (no event table), from its
    ``steps`` view, which holds every rank's steps."""
    events = getattr(run, "events", None)
    if events is None:
        try:
            steps = run.summary("steps")
        except KeyError:
            return 0
        if steps.empty:
            return 0
        return round(len(steps) / max(steps["rank"].nunique(), 1))
    mask = kind_is(events, "step") & (events["stream"].to_numpy() < 0)
    if not mask.any():
        return 0
    ranks = len(np.unique(events["rank"].to_numpy()[mask]))
    return round(int(mask.sum()) / ranks)
