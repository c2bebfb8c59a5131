"""Allocations and frees paired across ops: which allocation each free releases.

A memory event allocates (``bytes > 0``) or frees (``bytes < 0``) on one device. A free is
paired with its allocation by address on the same device, where the profiler recorded one
(torch 1.10 and later, Paddle). Where it did not (older Kineto traces), a free is paired with
the latest allocation of the same size on the same device that is still held: the size and
the count of what is held at the end are exact either way, only which of several same-sized
allocations is held can differ, and ``Allocations.ambiguous_bytes`` says how much that could
move between ops. A free with no allocation in the profile released memory allocated before
it. Events whose ``bytes`` is NaN (Paddle's reserved-pool events) change only the allocator's
totals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.schema import str_values

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: What ``op`` holds for a memory event that no op encloses (only a step span, or nothing).
OUTSIDE_OPS = "(outside any op)"
#: Kinds of host events that do not count as the op of a memory event.
_NOT_OPS = ("step", "profiler")


@dataclass
class Allocations:
    """The memory events of a run (or one rank), in time order, with their pairing.

    Every array has one entry per memory event: ``start_ns`` (ns), ``device`` (``gpu:0``,
    ``cpu``), ``bytes`` (> 0 allocated, < 0 freed, NaN: totals only), ``op`` (the innermost
    enclosing host event that is not a step, ``OUTSIDE_OPS`` for none), ``step`` (-1 outside
    steps), ``allocated_total`` and ``reserved_total`` (the allocator's totals after the event,
    bytes, NaN where not recorded); ``freed`` (an allocation freed later in the profile) and
    ``paired`` (a free of an allocation made in the profile).
    """

    start_ns: np.ndarray
    device: np.ndarray
    bytes: np.ndarray
    op: np.ndarray
    step: np.ndarray
    allocated_total: np.ndarray
    reserved_total: np.ndarray
    freed: np.ndarray
    paired: np.ndarray
    #: Whether every allocation and free recorded an address (pairing is exact).
    by_address: bool
    #: Bytes held at the end that pairing by size could have put on another op (0 when paired
    #: by address, or when no size class with several ops still held memory at the end).
    ambiguous_bytes: float

    @property
    def is_alloc(self) -> np.ndarray:
        """Whether each event allocates."""
        return self.bytes > 0

    @property
    def is_free(self) -> np.ndarray:
        """Whether each event frees."""
        return self.bytes < 0

    @property
    def held(self) -> np.ndarray:
        """Whether each event is an allocation still held at the end of the profile."""
        return self.is_alloc & ~self.freed


def allocations(run: Run, rank: int | None = None) -> Allocations:
    """Return the memory events of ``run`` (of ``rank``, or all ranks) in time order, paired
    (see the module's docstring). Cached on the run."""
    return run.cached(("allocations", rank), lambda: _allocations(run, rank))


def _allocations(run: Run, rank: int | None) -> Allocations:
    ev = run.events
    sel = str_values(ev["kind"]) == "memory"
    if rank is not None:
        sel &= ev["rank"].to_numpy() == rank
    rows = np.flatnonzero(sel)
    start = ev["start_ns"].to_numpy()[rows]
    rows = rows[np.argsort(start, kind="stable")]
    start = ev["start_ns"].to_numpy()[rows]
    device = _device_labels(
        str_values(ev["device_type"])[rows],
        ev["device_index"].to_numpy()[rows],
        ev["rank"].to_numpy()[rows],
    )
    nbytes = ev["bytes"].to_numpy()[rows].astype(np.float64)
    address = ev["address"].to_numpy()[rows]
    freed, paired, size_class = pair_events(device, nbytes, address)
    ops = _ops(run, rows)
    return Allocations(
        start_ns=start,
        device=device,
        bytes=nbytes,
        op=ops,
        step=ev["step"].to_numpy()[rows],
        allocated_total=ev["allocated_bytes"].to_numpy()[rows].astype(np.float64),
        reserved_total=ev["reserved_bytes"].to_numpy()[rows].astype(np.float64),
        freed=freed,
        paired=paired,
        by_address=not (size_class >= 0).any(),
        ambiguous_bytes=_ambiguous_bytes(size_class, ops, nbytes, freed),
    )


def _device_labels(types: np.ndarray, index: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """``gpu:0``, ``cpu`` (`` (rank 3)`` added when several ranks are there) per event, made
    once per distinct device."""
    if not len(types):
        return np.empty(0, dtype=object)
    type_names, type_codes = np.unique(types.astype(str), return_inverse=True)
    keys = np.stack([type_codes.ravel(), index.astype(np.int64), ranks.astype(np.int64)])
    distinct, inverse = np.unique(keys, axis=1, return_inverse=True)
    several_ranks = len(np.unique(ranks)) > 1
    labels = np.array(
        [
            (str(type_names[t]) if i < 0 else f"{type_names[t]}:{i}")
            + (f" (rank {r})" if several_ranks else "")
            for t, i, r in distinct.T.tolist()
        ],
        dtype=object,
    )
    return labels[inverse.ravel()]


def _ops(run: Run, rows: np.ndarray) -> np.ndarray:
    """The op of each memory event in ``rows``: its innermost enclosing host event that is not
    a step or the profiler's own span; ``OUTSIDE_OPS`` for none."""
    ev = run.events
    parent = ev["parent"].to_numpy()
    kind = str_values(ev["kind"])
    names = str_values(ev["name"])
    owner = parent[rows].copy()
    # A step span (or the profiler's) encloses ops, never sits inside one: its parent is -1
    # or another span of the same kinds, so two hops reach the root.
    for _ in range(2):
        inside = owner >= 0
        skip = np.zeros(len(owner), dtype=bool)
        skip[inside] = np.isin(kind[owner[inside]], _NOT_OPS)
        owner = np.where(skip, parent[np.maximum(owner, 0)], owner)
    outside = owner < 0
    if outside.all():
        return np.full(len(rows), OUTSIDE_OPS, dtype=object)
    inside = ~outside
    outside[inside] = np.isin(kind[owner[inside]], _NOT_OPS)
    return np.where(outside, OUTSIDE_OPS, names[np.maximum(owner, 0)]).astype(object)


def pair_events(
    device: np.ndarray, nbytes: np.ndarray, address: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair the frees of memory events (in time order) with their allocations.

    Returns, per event: ``freed`` (an allocation that a later event frees), ``paired`` (a free
    whose allocation is in the events) and ``size_class`` (for events paired by size, a number
    shared by the events of one device and size; -1 for the others). Events
    with an address (>= 0) pair by (device, address): an allocation is freed by the next event
    at its address if that frees. Events without pair by (device, size), the latest held
    allocation first. Computed in bulk (sorts and cumulative sums), no loop over events.
    """
    n = len(nbytes)
    freed = np.zeros(n, dtype=bool)
    paired = np.zeros(n, dtype=bool)
    alloc = nbytes > 0
    free = nbytes < 0
    counted = alloc | free
    size_class = np.full(n, -1, dtype=np.int64)
    if not counted.any():
        return freed, paired, size_class
    import pandas as pd

    device_code = pd.factorize(device)[0].astype(np.int64)
    has_address = counted & (address >= 0)
    if has_address.any():
        _pair_by_key(np.flatnonzero(has_address), device_code, address, alloc, freed, paired)
    by_size = counted & ~has_address
    if by_size.any():
        idx = np.flatnonzero(by_size)
        size_code = pd.factorize(np.abs(nbytes[idx]))[0].astype(np.int64)
        group = device_code[idx] * (int(size_code.max()) + 1) + size_code
        size_class[idx] = group
        _pair_lifo(idx, group, alloc, freed, paired)
    return freed, paired, size_class


def _pair_by_key(
    idx: np.ndarray,
    device_code: np.ndarray,
    address: np.ndarray,
    alloc: np.ndarray,
    freed: np.ndarray,
    paired: np.ndarray,
) -> None:
    """Pair events ``idx`` (time order) by (device, address): an allocation followed, at its
    address, by a free."""
    order = idx[np.lexsort((idx, address[idx], device_code[idx]))]
    if len(order) < 2:
        return
    first, second = order[:-1], order[1:]
    match = (
        (device_code[first] == device_code[second])
        & (address[first] == address[second])
        & alloc[first]
        & ~alloc[second]
    )
    freed[first[match]] = True
    paired[second[match]] = True


def _pair_lifo(
    idx: np.ndarray,
    group: np.ndarray,
    alloc: np.ndarray,
    freed: np.ndarray,
    paired: np.ndarray,
) -> None:
    """Pair events ``idx`` (time order) within each ``group`` last in, first out, as brackets
    are matched: an allocation raises the group's count of held blocks, a free lowers it unless
    none is held (then it freed memory allocated before the profile). A free pairs with the
    latest allocation that raised the count to the level the free lowers it from."""
    order = np.lexsort((idx, group))
    ev = idx[order]
    g = group[order]
    step = np.where(alloc[ev], 1, -1).astype(np.int64)
    starts = np.r_[True, g[1:] != g[:-1]]
    gid = np.cumsum(starts) - 1
    total = np.cumsum(step)
    before_group = (total - step)[starts][gid]
    running = total - before_group  # within the group, from 0
    # The count of held blocks never goes below 0: subtract the lowest the running sum has
    # been (below 0), group by group (offsets keep each group's minimum its own).
    offset = gid * (2 * len(ev) + 2)
    lowest = np.minimum.accumulate(np.minimum(running, 0) - offset) + offset
    held_after = running - np.minimum(lowest, 0)
    held_before = np.where(starts, 0, np.r_[0, held_after[:-1]])
    is_alloc = step > 0
    matched_free = ~is_alloc & (held_before > 0)
    # An allocation's level is the count it raised to; a paired free's, the count it lowered
    # from. At one level of one group, events alternate: allocation, its free, allocation...
    level = np.where(is_alloc, held_after, held_before)
    keep = is_alloc | matched_free
    cand = np.flatnonzero(keep)
    cand = cand[np.lexsort((cand, level[cand], g[cand]))]
    if len(cand) < 2:
        return
    first, second = cand[:-1], cand[1:]
    match = (
        (g[first] == g[second])
        & (level[first] == level[second])
        & is_alloc[first]
        & ~is_alloc[second]
    )
    freed[ev[first[match]]] = True
    paired[ev[second[match]]] = True


def _ambiguous_bytes(
    size_class: np.ndarray, ops: np.ndarray, nbytes: np.ndarray, freed: np.ndarray
) -> float:
    """Bytes held at the end, of allocations paired by size, in size classes where some
    allocations were freed and some held and more than one op allocated: another pairing of
    the same events could hold another op's allocation instead."""
    alloc = (nbytes > 0) & (size_class >= 0)
    if not alloc.any():
        return 0.0
    held = alloc & ~freed
    mixed = np.intersect1d(np.unique(size_class[held]), np.unique(size_class[alloc & freed]))
    if not len(mixed):
        return 0.0
    candidates = alloc & np.isin(size_class, mixed)
    import pandas as pd

    ops_per_class = pd.Series(ops[candidates]).groupby(size_class[candidates]).nunique()
    several = ops_per_class.index[ops_per_class.to_numpy() > 1].to_numpy()
    return float(nbytes[held & np.isin(size_class, several)].sum())
