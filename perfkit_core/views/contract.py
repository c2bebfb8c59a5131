"""The views' schema as a contract: its version, and the columns renamed since the last minor
release, still readable under their old names for one more.

Every view's columns, their units (from the column's name: ``_ns``, ``_bytes``, ``_pct``) and
their meaning are written by hand in ``docs/gen/view_text.py``; the reference pages are
generated from it and ``tests/test_view_contract.py`` fails when a view returns a column it
does not describe, or no longer returns one it does. ``VIEWS_SCHEMA_VERSION`` changes with
them: its minor part when columns are added, its major part when a column is removed, renamed
or changes meaning. CHANGELOG.md says what changed in each release.

A column renamed in 0.2 whose quantity kept its meaning stays readable under its old name until
0.3: ``run.summary("steps")["dataloader_ns"]`` returns ``data_ns`` with a ``DeprecationWarning``
that names it (``RENAMED``); so do the columns 0.1's ``model`` view had, which the
``model_spans`` view holds now (``MOVED``). A name that now means another quantity (the steps
view's ``dur_ns``) cannot be both: CHANGELOG.md says so first.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: The version of the views' columns (their names, units and meanings) this perfkit writes:
#: in the JSON report's ``schema_version`` beside the event table's.
VIEWS_SCHEMA_VERSION = "2.0"

#: view -> {old column: new column}: columns of 0.1 renamed in 0.2 whose quantity kept its
#: meaning (the data phase is the training thread's wait for data; the phases took the model
#: view's row names). Reading the old name works until 0.3, with a warning.
RENAMED: dict[str, dict[str, str]] = {
    "steps": {"dataloader_ns": "data_ns"},
    "phases": {
        "dataloader_ns": "data_ns",
        "optimization_ns": "optimizer_ns",
        "others_ns": "other_ns",
    },
}

#: view -> (the view that holds its 0.1 columns now, those columns, 0.1 row name -> the row
#: of this view it lines up with): 0.1's ``model`` view, Paddle's span-summing Model Summary,
#: is the ``model_spans`` view since 0.2. Reading one of its columns from the ``model`` view
#: works until 0.3, with a warning, and gives ``model_spans``' values on the ``model`` view's
#: rows.
MOVED: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "model": (
        "model_spans",
        (
            "calls",
            "cpu_total_ns",
            "cpu_avg_ns",
            "cpu_max_ns",
            "cpu_min_ns",
            "cpu_ratio_pct",
            "gpu_total_ns",
            "gpu_avg_ns",
            "gpu_max_ns",
            "gpu_min_ns",
            "gpu_ratio_pct",
        ),
        {"dataloader": "data", "optimization": "optimizer", "others": "other"},
    ),
}


def with_old_names(
    frame: pd.DataFrame, view: str, source: Callable[[str], pd.DataFrame] | None = None
) -> pd.DataFrame:
    """``frame`` (the table of ``view``) readable under the old names of its columns
    (``RENAMED``) and, with ``source`` (a view's table by name, of the same run), under the
    names of the columns another view holds now (``MOVED``): a frame that answers to them with
    a ``DeprecationWarning`` naming the new place, or ``frame`` itself when it has none."""
    renamed = {old: new for old, new in RENAMED.get(view, {}).items() if new in frame.columns}
    moved = MOVED.get(view) if source is not None and "name" in frame.columns else None
    if not renamed and moved is None:
        return frame
    return DeprecatedNames.wrap(frame, view, renamed, moved, source)


def _frame_class() -> type:
    import pandas as pd

    class _AnyFrame(type):
        """Every ``DataFrame`` is an instance of the class: a check such as pandas'
        ``assert_frame_equal(plain, summary)`` (``isinstance(left, type(right))``) treats the
        table with old names as the plain table it is."""

        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, pd.DataFrame)

    class _DeprecatedNames(pd.DataFrame, metaclass=_AnyFrame):
        """A view's table that still answers to the old names of its renamed or moved columns,
        with a ``DeprecationWarning`` naming the new place; every operation on it returns a
        plain ``DataFrame``."""

        @property
        def _constructor(self) -> type:
            return pd.DataFrame

        def _old(self, key: Any) -> tuple[str, str] | None:
            """(``renamed`` or ``moved``, the old name) when ``key`` is an old name this frame
            answers to, else None."""
            if not isinstance(key, str) or key in self.columns:
                return None
            if key in (self.__dict__.get("_renamed") or {}):
                return "renamed", key
            moved = self.__dict__.get("_moved")
            if moved is not None and key in moved[1]:
                return "moved", key
            return None

        def _read_old(self, kind: str, key: str) -> Any:
            view = self.__dict__.get("_view")
            if kind == "renamed":
                new = self.__dict__["_renamed"][key]
                warnings.warn(
                    f"the {view} view's column {key!r} is now {new!r}; the old name is read "
                    "until perfkit 0.3",
                    DeprecationWarning,
                    stacklevel=3,
                )
                return super().__getitem__(new)
            other, _columns, rows = self.__dict__["_moved"]
            warnings.warn(
                f"the {view} view's column {key!r} is now the {other} view's "
                f"(run.summary({other!r})[{key!r}]); the old spelling is read until perfkit 0.3",
                DeprecationWarning,
                stacklevel=3,
            )
            held = self.__dict__["_source"](other)
            by_row = dict(
                zip((rows.get(str(n), str(n)) for n in held["name"]), held[key], strict=True)
            )
            values = [by_row.get(str(n), float("nan")) for n in super().__getitem__("name")]
            return pd.Series(values, index=self.index, name=key)

        def __getitem__(self, key: Any) -> Any:
            old = self._old(key)
            if old is not None:
                return self._read_old(*old)
            return super().__getitem__(key)

        def __getattr__(self, name: str) -> Any:
            old = None if name.startswith("_") else self._old(name)
            if old is not None:
                return self._read_old(*old)
            return super().__getattr__(name)

    return _DeprecatedNames


class DeprecatedNames:
    """Builds the frames ``with_old_names`` returns (pandas is imported only when one is)."""

    _cls: type | None = None

    @classmethod
    def wrap(
        cls,
        frame: pd.DataFrame,
        view: str,
        renamed: dict[str, str],
        moved: tuple[str, tuple[str, ...], dict[str, str]] | None,
        source: Callable[[str], pd.DataFrame] | None,
    ) -> pd.DataFrame:
        if cls._cls is None:
            cls._cls = _frame_class()
        wrapped: pd.DataFrame = cls._cls(frame)
        wrapped.attrs = dict(frame.attrs)
        wrapped.__dict__.update(_view=view, _renamed=renamed, _moved=moved, _source=source)
        return wrapped
