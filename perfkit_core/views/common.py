"""What the views share: the device-side kinds, the no-steps note and the frame builder.

Conventions of every view: the key column is ``name``; times are ns (``*_ns``), shares are
percent (``*_pct``); a figure that was not measured (no device events, no memory events) is
NaN, never a zero that looks measured; ``frame.attrs["note"]`` says what a reader must know.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.cache import RunCache

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: Kinds of device events that keep a device busy.
DEVICE_KINDS = ("kernel", "communication", "memcpy", "memset")
#: Kinds of device events that are kernels (compute and communication).
KERNEL_KINDS = ("kernel", "communication")

#: Kinds that are not work a thread or device did: step spans (they hold the work), memory
#: instants, and the profiler's own spans and markers.
NOT_WORK_KINDS = ("step", "memory", "profiler")

NO_STEPS_NOTE = "no steps were recorded: the whole profiled span counts as one step"

#: ``Run.cache`` key of what views share while a report (or the advice) is being made
#: (``perfkit_core.views.registry.shared_views``).
SHARED_KEY = "shared_views"

T = TypeVar("T")


def shared(run: Any, key: Any, compute: Callable[[], T]) -> T:
    """``compute()``, once per ``key`` while ``run``'s views are shared
    (``registry.shared_views``): an intermediate result several views read that is too big to
    keep on the run for good (a frame of every op call); computed each time outside."""
    cache = getattr(run, "cache", None)
    store = cache.get(SHARED_KEY) if isinstance(cache, RunCache) else None
    if store is None:
        return compute()
    if key not in store:
        store[key] = compute()
    found: T = store[key]
    return found


def category_subset(column: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """The values of the string column ``column`` at ``rows`` as a categorical (categories as
    text, ``""`` for a missing value): the rows' codes and one string per category, where
    ``category_values`` makes a string column of every row (pandas keeps it as Arrow text: a
    copy of every row's characters)."""
    import pandas as pd

    if not isinstance(column.dtype, pd.CategoricalDtype):
        return pd.Categorical(category_values(column, rows))
    labels = [*(str(c) for c in column.cat.categories), ""]
    return categorical_of(column.cat.codes.to_numpy()[rows], labels)


def categorical_of(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """A categorical of ``codes`` into ``labels`` (-1 reads the last label); equal labels
    become one category (the first)."""
    import pandas as pd

    uniq: dict[str, int] = {}
    remap = np.array([uniq.setdefault(label, len(uniq)) for label in labels], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes], categories=list(uniq))


def category_values(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The values of the string column ``column`` at ``rows``, as an object array of ``str``
    (``""`` for a missing value): a categorical column is read by its codes, its categories
    converted once (``column.to_numpy()`` converts every row of an Arrow-backed one)."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = np.asarray(column.cat.categories.astype(str), dtype=object)
        return np.append(categories, "")[column.cat.codes.to_numpy()[rows]]
    return np.asarray(column.to_numpy()[rows].astype(str), dtype=object)


def names_of_kind(run: Run, kind: str) -> set[str]:
    """The names of ``run``'s events of ``kind`` (the kind compared by category code, only
    those rows' names made into strings)."""
    rows = np.flatnonzero(links.kind_is(run.events, kind))
    return set(category_values(run.events["name"], rows).tolist())


def no_step_note(has_steps: bool) -> str | None:
    """The note a view carries when the run recorded no steps (None when it did)."""
    return None if has_steps else NO_STEPS_NOTE


def view_frame(
    rows: list[dict[str, Any]], columns: list[str], note: str | None = None
) -> pd.DataFrame:
    """Return a DataFrame of ``rows`` with ``columns`` in order, and ``note`` in its attrs."""
    import pandas as pd

    out = pd.DataFrame(rows, columns=columns)
    if note:
        out.attrs["note"] = note
    return out


def private_copy(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` its receiver may change without changing ``frame``: a shallow copy
    where pandas copies on write (pandas 3, or 2 with ``mode.copy_on_write`` on), which shares
    the columns until one is written; a deep copy otherwise. ``attrs`` are copied."""
    import pandas as pd

    major = int(pd.__version__.split(".", 1)[0])
    on_write = major >= 3 or pd.get_option("mode.copy_on_write") is True
    return frame.copy(deep=not on_write)
