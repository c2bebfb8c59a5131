"""Links between events, computed in bulk with numpy: nesting, launches, steps, tree sums.

Everything here works on whole columns; no Python object is made per event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.events.schema import coded, str_values
from perfkit_core.events.trees import depth as depth
from perfkit_core.events.trees import farthest_flagged as farthest_flagged
from perfkit_core.events.trees import has_ancestor as has_ancestor
from perfkit_core.events.trees import kept_ancestor as kept_ancestor
from perfkit_core.events.trees import nearest_flagged as nearest_flagged
from perfkit_core.events.trees import subtree_sums as subtree_sums

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


def previous_at_least(values: np.ndarray, thresholds: np.ndarray, *, window: int = 8) -> np.ndarray:
    """For each position i, return the largest j < i with ``values[j] >= thresholds[i]``, or -1.

    The nearest ``window`` positions are tried first (in event trees most parents are close).
    A farther answer j is larger than each of the ``window`` values after it (they lie between
    j and i and were too small), so the rest are answered among such positions only, with a
    sparse table of running maxima and binary lifting: O(n log n) time and memory at most, all
    in numpy, and far less where most positions are leaves.
    """
    n = len(values)
    out = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return out
    # The nearest position first, on views of the whole arrays (no gathered copies): most
    # positions are answered here, and only the rest are carried on as queries.
    hit = values[:-1] >= thresholds[1:]
    out[1:][hit] = np.flatnonzero(hit)
    queries = np.flatnonzero(~hit) + 1
    del hit
    window = min(window, n - 1)
    for d in range(2, window + 1):
        queries = queries[queries >= d]
        hit = values[queries - d] >= thresholds[queries]
        out[queries[hit]] = queries[hit] - d
        queries = queries[~hit]
    if len(queries) == 0:
        return out
    values = np.asarray(values)
    ahead = np.empty(n, dtype=values.dtype)  # max of the next `window` values
    ahead[:] = np.iinfo(values.dtype).min if values.dtype.kind in "iu" else -np.inf
    for d in range(1, window + 1):
        np.maximum(ahead[:-d], values[d:], out=ahead[:-d])
    candidates = np.flatnonzero(values > ahead)
    del ahead
    levels = [values[candidates]]
    width = 1
    while width * 2 <= len(candidates):
        prev = levels[-1]
        nxt = prev.copy()
        nxt[width:] = np.maximum(prev[width:], prev[:-width])
        levels.append(nxt)
        width *= 2
    want = thresholds[queries]
    pos = np.searchsorted(candidates, queries) - 1  # the last candidate before each query
    for k in range(len(levels) - 1, -1, -1):
        valid = pos >= 0
        idx = np.where(valid, pos, 0)
        skip = valid & (levels[k][idx] < want)
        pos = np.where(skip, pos - (1 << k), pos)
    found = pos >= 0
    out[queries[found]] = candidates[pos[found]]
    return out


def in_start_order(start: np.ndarray, dur: np.ndarray) -> bool:
    """Whether rows are sorted by ``start``, longer ``dur`` first among equal starts."""
    step = np.diff(start)
    return bool(((step > 0) | ((step == 0) & (dur[1:] <= dur[:-1]))).all())


def nest(group: np.ndarray, start: np.ndarray, dur: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Return the row of the innermost enclosing event for each row, -1 for roots.

    Only rows where ``mask`` is true take part; events nest when they share ``group`` (one value
    per host thread) and one's interval holds the other's. An event is enclosed by the nearest
    earlier-starting event of its group that ends at or after its end (for zero-length events:
    strictly after its start). Rows need not be sorted; ties in start put longer events first,
    then row order.
    """
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    # A big table's copies are made only where needed and dropped as soon as they are used:
    # the nesting runs while the whole event table is held, and its temporaries set the load's
    # peak memory.
    every = bool(mask.all())
    rows = None if every else np.flatnonzero(mask)
    if n == 0 or (rows is not None and len(rows) == 0):
        return parent
    g = group if rows is None else group[rows]
    s = start if rows is None else start[rows]
    d = dur if rows is None else dur[rows]
    order: np.ndarray | None
    if not in_start_order(s, d):
        # lexsort is stable: rows of equal keys keep their (row) order.
        order = np.lexsort((-d, s, g))
    elif (g[1:] >= g[:-1]).all():
        order = None  # in order already (one thread, as finish_events sorts the table)
    else:
        # In start order, longer first: a stable sort by group alone gives the same order as
        # the four-key sort.
        order = np.argsort(g, kind="stable")
    if order is not None:
        g, s, d = g[order], s[order], d[order]
        rows = order if rows is None else rows[order]
        del order
    end = s + d
    threshold = np.where(d > 0, end, s + 1)
    del s, d
    group_start = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    del g
    found = previous_at_least(end, threshold)
    del end, threshold
    first_of_group = np.repeat(group_start, np.diff(np.r_[group_start, len(found)]))
    ok = found >= first_of_group
    del first_of_group
    if rows is None:
        parent[ok] = found[ok]
    else:
        parent[rows[ok]] = rows[found[ok]]
    return parent


def group_codes(*columns: np.ndarray) -> np.ndarray:
    """Return one int64 code per row for the combination of integer ``columns`` (for grouping)."""
    import pandas as pd

    combined = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        if len(column) and (column == column[0]).all():
            continue  # one value: it would only double every code
        codes, uniques = pd.factorize(column)
        combined = combined * (len(uniques) + 1) + codes
        combined = pd.factorize(combined)[0].astype(np.int64)
    return combined


def kind_is(events: pd.DataFrame, *kinds: str) -> np.ndarray:
    """Return, for each row, whether its ``kind`` is one of ``kinds``: compared by category code,
    without making the column's strings."""
    return coded(events["kind"]).among(*kinds)


def launcher_rows(events: pd.DataFrame) -> np.ndarray:
    """Return, for each row, the row of the host runtime call that launched it (or -1).

    Device events (``stream >= 0``) are matched to host ``runtime`` events of the same rank with
    the same ``correlation``.
    """
    n = len(events)
    out = np.full(n, -1, dtype=np.int64)
    corr = events["correlation"].to_numpy()
    rank = events["rank"].to_numpy().astype(np.int64, copy=False)
    host = events["stream"].to_numpy() < 0
    runtime = host & kind_is(events, "runtime") & (corr >= 0)
    device = ~host & (corr >= 0)
    if not runtime.any() or not device.any():
        return out
    rt_rows = np.flatnonzero(runtime)
    key_rt = (rank[rt_rows] << 40) + corr[rt_rows]
    order = np.argsort(key_rt, kind="stable")
    key_sorted = key_rt[order]
    dev_rows = np.flatnonzero(device)
    key_dev = (rank[dev_rows] << 40) + corr[dev_rows]
    pos = np.searchsorted(key_sorted, key_dev)
    pos_c = np.minimum(pos, len(key_sorted) - 1)
    hit = key_sorted[pos_c] == key_dev
    out[dev_rows[hit]] = rt_rows[order[pos_c[hit]]]
    return out


def run_launchers(run: Run) -> np.ndarray:
    """``launcher_rows(run.events)``, computed once per run (views, advice and exports share it)."""
    return run.cached("launchers", lambda: launcher_rows(run.events))


def assign_steps(events: pd.DataFrame, step_numbers: np.ndarray) -> np.ndarray:
    """Return the step number of each row: the step span (``kind == "step"``, per rank) that holds
    the event's start; a device event takes the step of the host call that launched it.

    ``step_numbers`` gives, for every row, the step number of step rows (other rows ignored).
    Rows outside every step get -1.
    """
    n = len(events)
    out = np.full(n, -1, dtype=np.int64)
    is_step = kind_is(events, "step")
    if not is_step.any():
        return out
    start = events["start_ns"].to_numpy()
    dur = events["dur_ns"].to_numpy()
    rank = events["rank"].to_numpy()
    one_rank = bool((rank == rank[0]).all())
    when = start
    launcher = launcher_rows(events)
    launched = launcher >= 0
    if launched.any():
        when = start.copy()
        when[launched] = start[launcher[launched]]
    for r in np.unique(rank[is_step]):
        srows = np.flatnonzero(is_step & (rank == r))
        srows = srows[np.argsort(start[srows], kind="stable")]
        s_start = start[srows]
        s_end = s_start + dur[srows]
        # every row when the run holds one rank (no index of all rows to make)
        in_rank = None if one_rank else np.flatnonzero(rank == r)
        w = when if in_rank is None else when[in_rank]
        idx = np.searchsorted(s_start, w, side="right") - 1
        ok = idx >= 0
        inside = np.zeros(len(w), dtype=bool)
        inside[ok] = w[ok] < s_end[idx[ok]]
        rows = np.flatnonzero(inside) if in_rank is None else in_rank[inside]
        out[rows] = step_numbers[srows[idx[inside]]]
    return out


def children_sum(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return, for each row, ``values`` summed over its direct children."""
    has = parent >= 0
    return np.bincount(parent[has], weights=values[has], minlength=len(parent))


#: Kinds of host rows that can issue device work (the owners an ``External id`` points to).
_NOT_OWNER_KINDS = ("runtime", "profiler", "memory")


def external_owner_rows(events: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """Return, for each row (or each of ``rows``), the host row that issued it by
    ``External id``, or -1.

    Kineto writes an operator's (or annotation's) id as its ``External id`` and the same id on
    the runtime calls and device events it issued. The owner is the one host row of the same
    rank, other than runtime calls, memory instants and profiler markers, that carries the id;
    an id several such rows carry links nothing.
    """
    ext = events["external_id"].to_numpy()
    # The ids asked about: every row's (no copy), or those of ``rows``.
    asked_ext = ext if rows is None else ext[np.asarray(rows, dtype=np.int64)]
    out = np.full(len(asked_ext), -1, dtype=np.int64)
    if not (asked_ext >= 0).any():
        return out
    rank = events["rank"].to_numpy().astype(np.int64, copy=False)
    host = events["stream"].to_numpy() < 0
    owner = host & (ext >= 0) & ~kind_is(events, *_NOT_OWNER_KINDS)
    if not owner.any():
        return out
    own_rows = np.flatnonzero(owner)
    key_own = (rank[own_rows] << 40) + ext[own_rows]
    uniq, first, counts = np.unique(key_own, return_index=True, return_counts=True)
    single = counts == 1
    uniq, own_rows = uniq[single], own_rows[first[single]]
    if not len(uniq):
        return out
    at = np.flatnonzero(asked_ext >= 0)
    ask = at if rows is None else np.asarray(rows, dtype=np.int64)[at]
    key = (rank[ask] << 40) + ext[ask]
    pos = np.minimum(np.searchsorted(uniq, key), len(uniq) - 1)
    hit = (uniq[pos] == key) & (own_rows[pos] != ask)
    out[at[hit]] = own_rows[pos[hit]]
    return out


def launch_parents(run: Run) -> np.ndarray:
    """The ``parent`` column with each runtime call hung from the row that issued it, cached.

    A runtime call's parent is the innermost host event of its own thread that encloses it;
    where the call carries an ``External id`` whose owner (``external_owner_rows``) was running
    when the call started, the owner is its parent instead, so a launch made on another thread
    (or outside any enclosing event) still reaches its operator. Runtime calls with nested
    events of their own keep their parent, so the tree has no cycle.
    """
    cached = run.cache.get("launch_parents")
    if cached is not None:
        return cached
    events = run.events
    parent = events["parent"].to_numpy()
    out = parent
    runtime = kind_is(events, "runtime") & (events["stream"].to_numpy() < 0)
    if runtime.any():
        owner = external_owner_rows(events)
        has_children = np.bincount(parent[parent >= 0], minlength=len(events)) > 0
        rows = np.flatnonzero(runtime & (owner >= 0) & ~has_children)
        rows = rows[owner[rows] != parent[rows]]
        if len(rows):
            start = events["start_ns"].to_numpy()
            end = start + events["dur_ns"].to_numpy()
            o = owner[rows]
            during = (start[o] <= start[rows]) & (start[rows] <= end[o])
            out = parent.copy()
            out[rows[during]] = o[during]
    run.cache.put("launch_parents", out)
    return out


def device_time_by_launcher(
    run: Run, kinds: tuple[str, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Return (self, total) device time in ns per row, cached on the run.

    ``self``: device time of the events launched by the row's direct runtime children (or by the
    row itself when it is a runtime call), plus that of device events no runtime call launched
    whose ``External id`` names the row. ``total``: the same over the row's whole subtree. A
    runtime call belongs to the row that issued it (``launch_parents``: by ``External id`` where
    recorded, else by nesting on its thread).
    ``kinds`` limits the device events counted (e.g. kernels only); None counts all of them.
    Rows of a run without device events get NaN.
    """
    key = ("device_time", kinds)
    cached = run.cache.get(key)
    if cached is not None:
        return cached
    events = run.events
    n = len(events)
    if not (events["stream"].to_numpy() >= 0).any():
        nan = np.full(n, np.nan)
        run.cache.put(key, (nan, nan))
        return nan, nan
    parent = launch_parents(run)
    launcher = run_launchers(run)
    dur = events["dur_ns"].to_numpy().astype(np.float64)
    counted = events["stream"].to_numpy() >= 0
    if kinds is not None:
        counted &= events["kind"].isin(list(kinds)).to_numpy()
    has = counted & (launcher >= 0)
    by_launcher = np.bincount(launcher[has], weights=dur[has], minlength=n)
    # Device work whose launch was not recorded reaches its operator by External id, when it
    # ran after the operator started.
    owner = np.where(counted & (launcher < 0), external_owner_rows(events), -1)
    start = events["start_ns"].to_numpy()
    direct = owner >= 0
    direct[direct] = start[owner[direct]] <= start[direct]
    by_owner = np.bincount(owner[direct], weights=dur[direct], minlength=n)
    # by_launcher is non-zero on runtime calls only; an op's own device time is that of the
    # runtime calls it made directly.
    is_runtime = kind_is(events, "runtime")
    self_dev = np.where(is_runtime, by_launcher, children_sum(parent, by_launcher)) + by_owner
    total = subtree_sums(parent, by_launcher + by_owner)
    run.cache.put(key, (self_dev, total))
    return self_dev, total


#: Host events torch's profiler leaves out of its event tree (``torch.autograd.profiler_util.
#: _filter_name``): they are never a parent's child there.
TORCH_TREE_SKIPPED_NAMES = (
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
    "aten::is_leaf",
    "aten::output_nr",
    "aten::_version",
)
#: Kinds of host rows that are no node of torch's event tree (Python tracer frames, memory
#: instants, the profiler's own markers).
TORCH_TREE_SKIPPED_KINDS = ("python", "memory", "profiler")


def repeated_only_children(events: pd.DataFrame) -> np.ndarray:
    """For each row, the row torch's profiler folds it into, or -1: an operator whose parent
    has the same name and no other child (``aten::div`` calling ``aten::div`` with another
    overload) is folded into that parent, as ``EventList._remove_dup_nodes`` does before
    ``key_averages`` counts calls (the parent keeps one call, the child's self time and the
    kernels it launched). Applied to torch rows only; the nodes of that tree are the host
    events other than Python frames, memory instants, profiler markers and the names torch
    filters out. A chain of such rows folds into its top row."""
    n = len(events)
    into = np.full(n, -1, dtype=np.int64)
    torch_rows = (str_values(events["framework"]) == "torch") & (events["stream"].to_numpy() < 0)
    if not torch_rows.any():
        return into
    names = events["name"]
    codes = names.cat.codes.to_numpy().astype(np.int64)
    skipped_name = np.isin(np.asarray(names.cat.categories, dtype=object), TORCH_TREE_SKIPPED_NAMES)
    node = torch_rows & ~kind_is(events, *TORCH_TREE_SKIPPED_KINDS)
    if len(skipped_name):
        node &= ~skipped_name[codes]
    # The parent in torch's tree: the nearest enclosing row that is a node.
    tree_parent = kept_ancestor(events["parent"].to_numpy(), ~node)
    folded = np.zeros(n, dtype=bool)
    while True:
        # Once rows are folded, their children hang from the row above them.
        up = kept_ancestor(tree_parent, folded)
        has = node & ~folded & (up >= 0)
        children = np.bincount(up[has], minlength=n)
        fold = has.copy()
        fold[has] = (codes[up[has]] == codes[has]) & (children[up[has]] == 1)
        if not fold.any():
            break
        folded |= fold
    into[folded] = kept_ancestor(tree_parent, folded)[folded]
    return into


def run_repeated_only_children(run: Run) -> np.ndarray:
    """``repeated_only_children(run.events)``, computed once per run."""
    return run.cached("repeated_only_children", lambda: repeated_only_children(run.events))
