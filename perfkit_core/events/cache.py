"""What a run computes once and several views, rules and exports read: the one door to it.

A ``Run`` holds a ``RunCache`` (``run.cache``); ``run.cached(key, compute)`` is the usual way
in. Keys are strings, or tuples whose first item is a string naming the entry (``("links",
"device")``). Which entries outlive one view of a rank, and which a worker drops between views,
is said here and nowhere else (``KEPT_BETWEEN_VIEWS``, ``RunCache.drop_per_view``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")

#: Entries that hold links between rows: each a column or two, computed once per run and read
#: by most views and the advice.
LINK_KEYS = frozenset(
    {"launchers", "launch_parents", "device_time", "repeated_only_children", "step_spans"}
)

#: The analysis every view and the advice of a rank read again (``views.common.shared``'s
#: intermediates: the structure attribution builds, unit labels, the step slices and the
#: kernels each step launched; about 7 MB on a rank of 75k events): built once per rank.
SHARED_ANALYSIS_KEYS = frozenset({"structure", "unit_labels", "step_slices", "launched_kernels"})

#: What a worker summarising a rank keeps from one view to the next (``drop_per_view``):
#: dropping these made each view build them anew (the step slices five times a rank).
KEPT_BETWEEN_VIEWS = LINK_KEYS | SHARED_ANALYSIS_KEYS


def entry_name(key: Hashable) -> Any:
    """The name of the entry under ``key``: the key, or the first item of a tuple key."""
    return key[0] if isinstance(key, tuple) and key else key


class RunCache:
    """The figures computed once per run. ``once`` computes and keeps; ``get`` and ``put`` are
    for entries whose keeping depends on more than the key (an entry valid for one context);
    ``drop_per_view`` is the one eviction."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[Hashable, Any] = {}

    def once(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, computed the first time ``key`` is asked for and kept (``None`` too)."""
        if key not in self._entries:
            self._entries[key] = compute()
        found: _T = self._entries[key]
        return found

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The entry under ``key``, or ``default``."""
        return self._entries.get(key, default)

    def put(self, key: Hashable, value: _T) -> _T:
        """Keep ``value`` under ``key`` (replacing what was there); returns ``value``."""
        self._entries[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> set[Any]:
        """The names of the entries held (``entry_name`` of each key)."""
        return {entry_name(k) for k in self._entries}

    def drop_per_view(self) -> None:
        """Drop what a view or the advice cached for itself (self times, the advice's tables,
        per-view intermediates no later view reads), keeping ``KEPT_BETWEEN_VIEWS``."""
        for key in list(self._entries):
            if entry_name(key) not in KEPT_BETWEEN_VIEWS:
                del self._entries[key]

    def drop(self, key: Hashable) -> None:
        """Drop the entry under ``key``, if any."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
