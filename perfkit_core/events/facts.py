"""Two facts every layer asks of a run, each defined once: whether it recorded device work
(``has_device``) and how many steps it recorded (``step_count``)."""

from __future__ import annotations

from typing import Any

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
