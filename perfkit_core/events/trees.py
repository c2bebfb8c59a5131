"""Queries over the tree a ``parent`` column makes (depth, ancestors, subtree sums), in bulk.

Each takes O(rows x log depth) by pointer jumping: every round, a row looks up the answer known
at the row its pointer reaches and moves its pointer there, so the distance covered doubles.
Nesting 200,000 deep takes 18 rounds, not 200,000.
"""

from __future__ import annotations

import numpy as np


def _jump_rounds(n: int) -> int:
    """Rounds of pointer jumping that reach the root from any row of a forest of ``n`` rows
    (the distance covered doubles each round); a parent column with a cycle (a damaged saved
    run) stops there instead of looping."""
    return max(int(n).bit_length(), 1) + 1


def depth(parent: np.ndarray) -> np.ndarray:
    """Return each row's nesting depth (0 for roots) from a ``parent`` column.

    Pointer jumping: each round, a row adds the depth counted so far at the row its pointer
    reaches and moves its pointer there, so the distance covered doubles: O(rows x log depth).
    """
    parent = np.asarray(parent, dtype=np.int64)
    d = (parent >= 0).astype(np.int64)
    jump = parent.copy()
    for _ in range(_jump_rounds(len(parent))):
        idx = np.flatnonzero(jump >= 0)
        if len(idx) == 0:
            break
        up = jump[idx]
        d[idx] += d[up]
        jump[idx] = jump[up]
    return d


def subtree_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return, for each row, ``values`` summed over the row and all its descendants.

    By doubling: after round k each row holds the sum over its descendants less than 2**k
    levels below it, and each row's pointer is its ancestor 2**k levels up, which receives that
    sum in the next round: O(rows x log depth).
    """
    total = np.asarray(values).astype(np.float64, copy=True)
    if len(parent) == 0:
        return total
    n = len(parent)
    jump = np.asarray(parent, dtype=np.int64).copy()
    for _ in range(_jump_rounds(n)):
        idx = np.flatnonzero(jump >= 0)
        if len(idx) == 0:
            break
        up = jump[idx]
        total += np.bincount(up, weights=total[idx], minlength=n)
        jump[idx] = jump[up]
    return total


def has_ancestor(parent: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Return, for each row, whether any ancestor (parent, grandparent, ...) has ``flag`` set.

    Pointer jumping: after round k a row knows whether one of its 2**k nearest ancestors is
    flagged and points at its ancestor 2**k levels up, so a chain of any depth takes
    O(log depth) rounds and O(rows x log depth) work (rows that found a flag stop early).
    """
    parent = np.asarray(parent, dtype=np.int64)
    out = np.zeros(len(parent), dtype=bool)
    has = parent >= 0
    if not has.any():
        return out
    flag = np.asarray(flag, dtype=bool)
    out[has] = flag[parent[has]]
    jump = parent.copy()
    for _ in range(_jump_rounds(len(parent))):
        idx = np.flatnonzero((jump >= 0) & ~out)
        if len(idx) == 0:
            break
        up = jump[idx]
        out[idx] = out[up]
        jump[idx] = jump[up]
    return out


def kept_ancestor(parent: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """For each row, its nearest ancestor (along ``parent``) that ``skip`` does not mark, or -1.

    Pointer jumping: a row whose pointer reaches a skipped row takes that row's pointer, and
    every row between the two is skipped too, so each round at least doubles the skipped rows
    passed over: O(rows x log depth).
    """
    parent = np.asarray(parent, dtype=np.int64)
    up = parent.copy()
    skip = np.asarray(skip, dtype=bool)
    for _ in range(_jump_rounds(len(parent))):
        hop = up >= 0
        hop[hop] = skip[up[hop]]
        idx = np.flatnonzero(hop)
        if len(idx) == 0:
            break
        up[idx] = up[up[idx]]
    return up


def nearest_flagged(parent: np.ndarray, flag: np.ndarray, *, self_too: bool = True) -> np.ndarray:
    """For each row, the nearest ancestor (or the row itself, with ``self_too``) whose ``flag``
    is set; -1 where there is none. O(rows x log depth), as ``kept_ancestor``."""
    flag = np.asarray(flag, dtype=bool)
    out = kept_ancestor(parent, ~flag)
    if self_too:
        out[flag] = np.flatnonzero(flag)
    return out


def farthest_flagged(parent: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """For each row, the outermost ancestor-or-self whose ``flag`` is set; -1 where none is.

    Pointer jumping: after round k a row holds the outermost flagged row among itself and its
    ancestors less than 2**k levels up, and points 2**k levels up; the answer found there, when
    there is one, lies farther out: O(rows x log depth).
    """
    parent = np.asarray(parent, dtype=np.int64)
    flag = np.asarray(flag, dtype=bool)
    out = np.where(flag, np.arange(len(parent)), -1)
    jump = parent.copy()
    for _ in range(_jump_rounds(len(parent))):
        idx = np.flatnonzero(jump >= 0)
        if len(idx) == 0:
            break
        up = jump[idx]
        found = out[up]
        out[idx] = np.where(found >= 0, found, out[idx])
        jump[idx] = jump[up]
    return out
