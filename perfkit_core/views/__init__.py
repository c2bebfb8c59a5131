"""Summary views: tables computed from a run's event table, one module per family of views.

A view is a function ``view(run, **options) -> DataFrame`` registered through the
``perfkit_register_views`` hook; ``run.summary(name)`` looks it up in ``registry``. The built-in
views live in ``operators`` (operator, user), ``phases`` (model, phases), ``families``
(family), ``overview`` (overview, device), ``kernels`` (kernel), ``memory`` (memcpy, memory),
``timelines`` (memory_timeline, device_timeline), ``distributed`` and ``steps`` (steps,
benchmark), and are registered by ``builtin``. ``families`` also holds the op-family rules adapters build on.
"""

from __future__ import annotations

from perfkit_core.views.families import (
    FAMILIES,
    direction_of,
    family_of,
    family_times,
    normalize,
)
from perfkit_core.views.registry import ViewSpec, get_view, registered_views, summary

__all__ = [
    "FAMILIES",
    "ViewSpec",
    "direction_of",
    "family_of",
    "family_times",
    "get_view",
    "normalize",
    "registered_views",
    "summary",
]
