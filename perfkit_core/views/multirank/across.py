"""Views of a run of several ranks: each view is computed rank by rank, then combined.

Every figure is computed on one rank's table, as for a single-rank run; a *combiner* then folds
the per-rank tables into one, and says how in the table's note. The same combiners serve a run
loaded in one process (``Run.summary``) and a job analysed on Dask workers
(``perfkit_core.jobs``), where each worker sends its rank's table and the client folds them as
they arrive, holding one accumulator per view, never every rank's table.

How ranks are combined (``ACROSS`` names each built-in view's rule):

- ``mean``: one row per key (op name, kernel name, phase, ...). Sums (calls, totals, bytes) are
  the mean per rank, a rank without the row counting 0; maxima and minima are over all ranks;
  averages, shares and rates are recomputed from the combined figures, so a share of the step
  is a share of the mean rank's step and never exceeds 100%.
- ``concat``: the rows of every rank, with a ``rank`` column and ``(rank R)`` after each name
  (views whose rows are already per device or per step).
- ``native``: the view itself reads every rank (``ranks``, ``collectives``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: View options that apply to the combined table, not to each rank's.
COMBINED_OPTIONS = ("top", "rank")


class Combiner:
    """Folds per-rank tables of one view into the table of the job (see module docstring)."""

    #: What the combined table's note says about how ranks were combined.
    how = ""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = dict(options)
        self.ranks: list[int] = []
        self.notes: list[str] = []
        self.labels: dict[str, str] = {}

    def add(self, rank: int, frame: pd.DataFrame) -> None:
        """Fold in ``frame``, the view of rank ``rank`` (each rank once)."""
        self.ranks.append(int(rank))
        note = frame.attrs.get("note")
        if note and note not in self.notes:
            self.notes.append(str(note))
        self.labels.update(frame.attrs.get("labels") or {})
        self._add(int(rank), frame)

    def _add(self, rank: int, frame: pd.DataFrame) -> None:
        raise NotImplementedError

    def result(self) -> pd.DataFrame:
        """The combined table, its note saying how the ranks were combined."""
        frame = self._result()
        how = self.how.format(n=len(self.ranks)) if len(frame) else ""
        notes = [how, *self.notes] if how else list(self.notes)
        top = self.options.get("top")
        if top is not None and len(frame) > int(top):
            frame = frame.head(int(top)).reset_index(drop=True)
        if notes:
            frame.attrs["note"] = "; ".join(notes)
        if self.labels:
            frame.attrs["labels"] = dict(self.labels)
        return frame

    def _result(self) -> pd.DataFrame:
        raise NotImplementedError


@dataclass
class MeanRule:
    """How a ``mean`` view's columns combine: the key columns, sums (mean per rank), maxima,
    minima and columns taken from the first rank; ``finish`` recomputes derived columns and
    sorts the combined frame."""

    keys: Sequence[str]
    sums: Sequence[str] = ()
    maxes: Sequence[str] = ()
    mins: Sequence[str] = ()
    firsts: Sequence[str] = ()
    finish: Callable[[pd.DataFrame, dict[str, Any]], pd.DataFrame] | None = None
    #: Turns each rank's frame before folding (e.g. adds weights for a weighted mean).
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    #: Divide sums by the ranks that had the row, not by every rank.
    per_present: bool = False
    how: str = (
        "mean per rank over {n} ranks (a rank without the row counts 0); maxima and minima "
        "over all ranks"
    )
    optional_keys: Sequence[str] = field(default_factory=tuple)


class MeanCombiner(Combiner):
    """Sums become the mean per rank, maxima and minima are over ranks (see ``MeanRule``)."""

    def __init__(self, rule: MeanRule, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.rule = rule
        self.how = rule.how
        self.columns: list[str] | None = None
        self.acc: pd.DataFrame | None = None

    def _keys(self, frame: pd.DataFrame) -> list[str]:
        return [k for k in [*self.rule.keys, *self.rule.optional_keys] if k in frame.columns]

    def _add(self, rank: int, frame: pd.DataFrame) -> None:
        import pandas as pd

        if self.columns is None and len(frame.columns):
            self.columns = list(frame.columns)
        if frame.empty:
            return
        keys = self._keys(frame)
        part = frame.copy() if self.rule.prepare is None else self.rule.prepare(frame.copy())
        part["_present"] = 1
        for key in keys:
            part[key] = part[key].astype(object).where(part[key].notna(), "")
        stacked = part if self.acc is None else pd.concat([self.acc, part], ignore_index=True)
        grouped = stacked.groupby(keys, sort=False, dropna=False)
        pieces = []
        for columns, how in (
            ((*self.rule.sums, "_present"), "sum"),
            (self.rule.maxes, "max"),
            (self.rule.mins, "min"),
            (self.rule.firsts, "first"),
        ):
            present = [c for c in columns if c in stacked.columns]
            if not present:
                continue
            if how == "sum":
                pieces.append(grouped[present].sum(min_count=1))
            else:
                pieces.append(getattr(grouped[present], how)())
        if pieces:
            self.acc = pd.concat(pieces, axis=1).reset_index()
        else:
            self.acc = grouped.size().reset_index()[keys]

    def _result(self) -> pd.DataFrame:
        import pandas as pd

        if self.acc is None:
            return pd.DataFrame(columns=self.columns or [])
        out = self.acc.copy()
        n = out["_present"] if self.rule.per_present else max(len(self.ranks), 1)
        for c in self.rule.sums:
            if c in out.columns:
                out[c] = out[c].astype(np.float64) / n
        if self.rule.finish is not None:
            out = self.rule.finish(out, self.options)
        columns = [c for c in (self.columns or list(out.columns)) if c in out.columns]
        return out[columns].reset_index(drop=True)


class ConcatCombiner(Combiner):
    """The rows of every rank in rank order, with a ``rank`` column and ``(rank R)`` names."""

    how = "one block of rows per rank ({n} ranks)"

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.parts: dict[int, pd.DataFrame] = {}

    def _add(self, rank: int, frame: pd.DataFrame) -> None:
        part = frame.copy()
        if "rank" in part.columns:
            part["rank"] = rank
        else:
            part.insert(1 if "name" in part.columns else 0, "rank", rank)
        if "name" in part.columns:
            suffix = f" (rank {rank})"
            part["name"] = [
                n if str(n).endswith(suffix) else f"{n}{suffix}" for n in part["name"].astype(str)
            ]
        self.parts[rank] = part

    def _result(self) -> pd.DataFrame:
        import pandas as pd

        frames = [self.parts[r] for r in sorted(self.parts) if len(self.parts[r])]
        if not frames:
            empty = next(iter(self.parts.values()), pd.DataFrame())
            return empty.iloc[0:0].copy()
        return pd.concat(frames, ignore_index=True)


#: Rule of a view: a ``MeanRule``, ``"concat"``, ``"native"``, or a callable taking the view's
#: options and returning a ``Combiner``.
AcrossRule = Any


def make_combiner(rule: AcrossRule, options: dict[str, Any]) -> Combiner:
    """Return a fresh combiner for a view whose across-ranks rule is ``rule``."""
    if isinstance(rule, MeanRule):
        return MeanCombiner(rule, options)
    if rule in (None, "concat"):
        return ConcatCombiner(options)
    if callable(rule):
        combiner = rule(options)
        if not isinstance(combiner, Combiner):
            raise TypeError(f"{rule!r} did not return a Combiner")
        return combiner
    raise ValueError(f"not an across-ranks rule: {rule!r}")


def per_rank_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options a view runs with on each rank: ``top`` and ``rank`` apply after combining."""
    return {k: v for k, v in options.items() if k not in COMBINED_OPTIONS}
