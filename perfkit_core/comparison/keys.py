"""The row of each comparison table a slice of a step counts under (by phase, op family,
canonical op, layer or user span), and the names of the tables' fixed rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.views.anatomy.attribution import UNATTRIBUTED

if TYPE_CHECKING:
    import pandas as pd

#: The total row's name.
TOTAL = "step"
NO_LAYER = "(no layer)"
NOT_ANNOTATED = "(not annotated)"


def slice_keys(slices: pd.DataFrame, view: str, *, by_phase: bool = False) -> np.ndarray:
    """The row name each slice counts under in ``view``; with ``by_phase`` the layer view's
    rows are phases only (``(no layer) <phase>``), for comparisons where a run has no layers."""

    def col(name: str) -> np.ndarray:
        column = slices[name]
        if hasattr(column, "cat"):
            cats = np.append(np.asarray(column.cat.categories, dtype=object), "").astype(str)
            return cats[column.cat.codes.to_numpy()]
        return np.asarray(column, dtype=object).astype(str)

    fam = col("family")
    direction = col("direction")
    unattributed = fam == UNATTRIBUTED

    def with_direction(base: np.ndarray) -> np.ndarray:
        # np.char.add, not +: numpy 1.x has no + for string arrays (MindSpore needs numpy<2).
        suffix = np.where(direction != "", np.char.add(np.char.add(" (", direction), ")"), "")
        return np.char.add(base.astype(str), suffix.astype(str))

    if view == "phases":
        return col("phase")
    if view == "family":
        keys = with_direction(fam)
    elif view == "ops":
        keys = with_direction(col("op"))
    elif view == "layers":
        layer = col("layer")
        by_phase_keys = np.char.add(NO_LAYER + " ", col("phase").astype(str))
        keys = by_phase_keys if by_phase else np.where(layer != "", layer, by_phase_keys)
    elif view == "user":
        user = col("user")
        keys = np.where(user != "", user, NOT_ANNOTATED)
    else:
        raise KeyError(f"unknown attribution view {view!r}")
    return np.where(unattributed, UNATTRIBUTED, keys)
