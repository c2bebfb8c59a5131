"""Summary views: tables computed from a run's event table, one module per family of views.

A view is a function ``view(run, **options) -> DataFrame`` registered through the
``perfkit_register_views`` hook; ``run.summary(name)`` looks it up in ``registry``. The built-in
views live in ``operators`` (operator, user), ``phases`` (model), ``overview`` (overview,
device), ``kernels``, ``memory`` (memcpy, memory), ``distributed`` and ``steps`` (steps,
benchmark), and are registered by ``builtin``.
"""

from __future__ import annotations

from perfkit_core.views.registry import ViewSpec, get_view, registered_views, summary

__all__ = ["ViewSpec", "get_view", "registered_views", "summary"]
