"""Where each step's wall time goes: the step, on the thread that runs it, cut into slices that
each belong to exactly one event, and each slice labelled by phase, op family, canonical op,
layer and user span. The slices of a step add up to the step's duration (the step stretched
over the device work it launched), so every table grouped from them adds up too.

Ownership: a slice of the step belongs to the op unit running then (``structure``); time
inside a span (a layer, a user span, the autograd engine) but outside every op belongs to that
span, as host overhead between ops (Python and framework dispatch); time covered by nothing but
the step itself is *unattributed*, except between the step's first and last backward event,
where the thread is inside the autograd engine.

Phases, one definition for every framework:

- ``data``: data loading spans (the wait for the next batch on the training thread);
- ``optimizer``: optimizer spans (``step`` and ``zero_grad``) and optimizer ops;
- ``backward``: from the step's first backward event to its last, everything between them
  included (torch's time between autograd nodes and Paddle's alike);
- ``forward``: the rest of the step before the backward window, **loss included**;
- ``other``: the rest of the step after the backward window, and the time the device still
  ran work the step launched after the step's host span ended (a step is stretched over the
  device work it launched, ``events.intervals.step_spans``).

A backward op belongs to the layer, and counts as the canonical op, of the forward op it is the
gradient of: torch and MindSpore link them (the ``forward_op`` column; a unit with such a link is
a gradient op whatever its name); otherwise they are paired in reverse order per op type within
the step, the order in which autograd runs a sequential model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.views.anatomy.closures import closure_families
from perfkit_core.views.anatomy.structure import ENGINE_PREFIX, Structure, structure
from perfkit_core.views.anatomy.windows import in_stretched_steps
from perfkit_core.views.costmodel.canonical import OpMap, Resolver, is_gradient
from perfkit_core.views.costmodel.family_rules import display_name

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

PHASES = ("data", "forward", "backward", "optimizer", "other")
#: Units whose kind fixes their family, whatever their name.
KIND_FAMILIES = {
    "dataloader": "data",
    "optimizer": "optimizer",
    "communication": "communication",
    "runtime": "runtime",
}
BETWEEN_OPS = "host time between ops"
UNATTRIBUTED = "unattributed"
COLUMNS = (
    "rank",
    "step",
    "start_ns",
    "owner",
    "ns",
    "phase",
    "direction",
    "family",
    "op",
    "native",
    "layer",
    "layer_label",
    "user",
)


def _unit_name(name: str) -> str:
    return name[len(ENGINE_PREFIX) :] if name.startswith(ENGINE_PREFIX) else name


def _gaps(st: Structure, owners: np.ndarray, kids: np.ndarray) -> tuple[np.ndarray, ...]:
    """Self-time pieces of ``owners`` (rows): the intervals of each owner not covered by its
    direct children among ``kids``. Returns (owner row, start, end) arrays."""
    import pandas as pd

    start, end, parent = st.start, st.end, st.parent
    kids = kids[np.isin(parent[kids], owners)]
    p = parent[kids]
    order = np.lexsort((start[kids], p))
    kids, p = kids[order], p[order]
    kid_end = np.minimum(end[kids], end[p])
    running = pd.Series(kid_end).groupby(p).cummax().to_numpy()
    first = np.r_[True, p[1:] != p[:-1]] if len(p) else np.zeros(0, dtype=bool)
    prev_end = np.where(first, start[p], np.r_[0, running[:-1]] if len(p) else running)
    prev_end = np.maximum(prev_end, start[p])
    piece_start, piece_end = prev_end, np.minimum(start[kids], end[p])
    keep = piece_end > piece_start
    owner_rows = [p[keep]]
    starts, ends = [piece_start[keep]], [piece_end[keep]]
    last = np.r_[p[1:] != p[:-1], True] if len(p) else np.zeros(0, dtype=bool)
    tail_owner = p[last]
    tail_start = np.maximum(running[last], start[tail_owner])
    keep = end[tail_owner] > tail_start
    owner_rows.append(tail_owner[keep])
    starts.append(tail_start[keep])
    ends.append(end[tail_owner][keep])
    lonely = np.setdiff1d(owners, p)
    owner_rows.append(lonely)
    starts.append(start[lonely])
    ends.append(end[lonely])
    return np.concatenate(owner_rows), np.concatenate(starts), np.concatenate(ends)


def _match_backward(
    run: Run, st: Structure, units: np.ndarray, is_bwd: np.ndarray, match_key: np.ndarray
) -> np.ndarray:
    """For each row, the forward unit a backward unit is the gradient of (-1 when unknown)."""
    n = len(st.parent)
    matched = np.full(n, -1, dtype=np.int64)
    if "forward_op" in run.events.columns:
        fwd = run.events["forward_op"].to_numpy()
        linked = np.flatnonzero((fwd >= 0) & (st.unit_of >= 0))
        if len(linked):
            bwd_unit = st.unit_of[linked]
            fwd_unit = st.unit_of[fwd[linked]]
            ok = fwd_unit >= 0
            matched[bwd_unit[ok][::-1]] = fwd_unit[ok][::-1]
    # Reverse-order pairing per op type within a step, for backward units not linked.
    bwd_rows = units[is_bwd[units] & (matched[units] < 0)]
    fwd_rows = units[~is_bwd[units]]
    if len(bwd_rows) == 0 or len(fwd_rows) == 0:
        return matched
    forward_lists: dict[tuple[int, str], list[int]] = {}
    for r in fwd_rows[np.argsort(st.start[fwd_rows], kind="stable")].tolist():
        forward_lists.setdefault((int(st.step_row_of[r]), str(match_key[r])), []).append(r)
    used: dict[tuple[int, str], int] = {}
    for r in bwd_rows[np.argsort(st.start[bwd_rows], kind="stable")].tolist():
        key = (int(st.step_row_of[r]), str(match_key[r]))
        candidates = forward_lists.get(key)
        if not candidates:
            continue
        i = used.get(key, 0)
        if i < len(candidates):
            matched[r] = candidates[len(candidates) - 1 - i]
            used[key] = i + 1
    return matched


def compute_thread_rows(run: Run) -> np.ndarray:
    """Rows on a host thread the run lists in ``meta["compute_threads"]``: threads that run the
    steps' compiled programs (XLA:CPU's and TensorFlow's executors) for the step's thread."""
    ev = run.events
    compute = [int(t) for t in run.meta.get("compute_threads") or []]
    if not compute:
        return np.zeros(len(ev), dtype=bool)
    return np.isin(ev["tid"].to_numpy(), compute) & (ev["stream"].to_numpy() < 0)


def _other_thread_steps(run: Run, st: Structure, steps: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """For each op unit on a host thread that runs backward work but no steps (or is one of
    ``meta["compute_threads"]``), the step row of its rank it falls in (by the ``step``
    column); -1 for every other row."""
    n = len(st.parent)
    out = np.full(n, -1, dtype=np.int64)
    ev = run.events
    candidates = st.is_unit & st.host & ~st.step_thread & (ev["step"].to_numpy() >= 0)
    if not candidates.any() or len(steps) == 0:
        return out
    import pandas as pd

    threads = pd.MultiIndex.from_arrays([ev["rank"].to_numpy(), ev["tid"].to_numpy()])
    backward_threads = threads[candidates & grad]
    # Threads that run the steps' compiled programs for the step's thread (meta
    # "compute_threads": XLA:CPU's and TensorFlow's executors) help it like a backward thread.
    candidates &= threads.isin(backward_threads) | compute_thread_rows(run)
    rank = ev["rank"].to_numpy()
    number = ev["step"].to_numpy()
    step_of = {(int(rank[r]), int(number[r])): int(r) for r in steps.tolist()}
    rows = np.flatnonzero(candidates)
    out[rows] = [step_of.get((int(rank[r]), int(number[r])), -1) for r in rows.tolist()]
    return out


def _fill(
    owner: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    helper: np.ndarray,
    helper_step: np.ndarray,
    st: Structure,
    owner_step: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Cut the gaps (``owner``: the step row, or with ``owner_step`` any row whose step row is
    ``owner_step[row]``) by the ``helper`` units of the same step: returns the covered pieces
    (helper row, start, end) and the gaps left (owner, start, end). Helper units on one
    thread do not overlap; where threads overlap, the first counts."""
    empty = np.zeros(0, dtype=np.int64)
    if len(helper) == 0 or len(owner) == 0:
        return empty, empty, empty, (owner, start, end)
    order = np.argsort(st.start[helper], kind="stable")
    helper = helper[order]
    by_step: dict[int, list[int]] = {}
    for r in helper.tolist():
        by_step.setdefault(int(helper_step[r]), []).append(r)
    pieces: list[tuple[int, int, int]] = []
    left: list[tuple[int, int, int]] = []
    for o, a, b in zip(owner.tolist(), start.tolist(), end.tolist(), strict=True):
        cursor = a
        for r in by_step.get(int(owner_step[o]) if owner_step is not None else o, []):
            hs, he = max(int(st.start[r]), cursor), min(int(st.end[r]), b)
            if he <= hs:
                if st.start[r] >= b:
                    break
                continue
            if hs > cursor:
                left.append((o, cursor, hs))
            pieces.append((r, hs, he))
            cursor = he
        if cursor < b:
            left.append((o, cursor, b))

    def arrays(items: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not items:
            return empty, empty, empty
        cols = np.asarray(items, dtype=np.int64)
        return cols[:, 0], cols[:, 1], cols[:, 2]

    covered = arrays(pieces)
    return covered[0], covered[1], covered[2], arrays(left)


def _after_previous(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's start moved to the end of the intervals before it in its ``group`` (a
    step), so that units on one thread never overlap: a trace whose clock skews lets a sibling
    start before the previous one ended, and its time must not count twice."""
    import pandas as pd

    if len(start) == 0:
        return start
    order = np.lexsort((start, group))
    g, s0, e0 = group[order], start[order], end[order]
    reached = pd.Series(e0).groupby(g, sort=False).cummax().to_numpy()
    first = np.r_[True, g[1:] != g[:-1]]
    previous = np.where(first, np.iinfo(np.int64).min, np.r_[0, reached[:-1]])
    moved = np.minimum(np.maximum(s0, previous), e0)
    out = np.empty_like(start)
    out[order] = moved
    return out


@dataclass
class UnitLabels:
    """Per row (meaningful on op units): ``gradient`` (a backward op), ``matched`` (the forward
    unit a backward unit differentiates, -1 when unknown), ``op`` (canonical op) and
    ``layer_row`` (the layer span the unit counts in, -1 outside layers)."""

    gradient: np.ndarray
    matched: np.ndarray
    op: np.ndarray
    layer_row: np.ndarray
    resolver: Resolver


def unit_labels(run: Run, *, op_map: OpMap | None = None) -> UnitLabels:
    """Canonical op, gradient flag and layer of every op unit of ``run`` (all host threads).

    A forward unit's canonical op is resolved with its enclosing layer's type; a backward unit
    takes the canonical op and layer of the forward unit it is paired with (``forward_op``
    links, else reverse order per op type within the step), else its own name's. Cached."""
    key = ("unit_labels", id(op_map))
    cached = run.cache.get(key)
    if cached is not None:
        return cached
    st = structure(run)
    n = len(st.parent)
    units = np.flatnonzero(st.is_unit)
    resolver = Resolver(run.framework, op_map)
    unit_names = [_unit_name(x) for x in st.names[units].tolist()]
    grad = np.zeros(n, dtype=bool)
    gradient_name: dict[str, bool] = {}
    grad[units] = (
        [
            gradient_name[x] if x in gradient_name else gradient_name.setdefault(x, is_gradient(x))
            for x in unit_names
        ]
        if len(units)
        else []
    )
    # Optimizer and data spans are never gradient ops (``Optimizer.zero_grad#...``).
    grad[units] &= np.isin(st.kind[units], ["operator", "backward", "other", "runtime"])
    grad[units] |= st.kind[units] == "backward"
    # A unit the trace links to the forward op it differentiates is a gradient op whatever its
    # name (MindSpore names the gradient of a MatMul ``MatMul`` too, under ``Gradients/``).
    fwd_link = run.events["forward_op"].to_numpy()
    linked = np.flatnonzero((fwd_link >= 0) & (st.unit_of >= 0))
    grad[st.unit_of[linked]] = True
    name_op = np.full(n, "", dtype=object)
    name_op[units] = [resolver.op(x) for x in unit_names]
    matched = _match_backward(run, st, units, grad, name_op)
    layer_row = np.where(grad, st.layer_of[np.maximum(matched, 0)], st.layer_of)
    layer_row = np.where(grad & (matched < 0), -1, layer_row)
    unit_op = np.full(n, "", dtype=object)
    for r, name in zip(units.tolist(), unit_names, strict=True):
        if grad[r] and matched[r] >= 0:
            continue
        lr = int(st.layer_of[r]) if not grad[r] else -1
        ltype = st.layer_key[lr].rsplit("/", 1)[-1].split("[")[0] if lr >= 0 else None
        unit_op[r] = resolver.op(name, ltype)
    for r in units[grad[units] & (matched[units] >= 0)].tolist():
        unit_op[r] = unit_op[matched[r]]
    found = UnitLabels(grad, matched, unit_op, layer_row, resolver)
    run.cache.put(key, found)
    return found


def step_slices(run: Run, *, op_map: OpMap | None = None) -> pd.DataFrame:
    """One row per slice of every step's wall time, columns ``COLUMNS``: ``step`` (number),
    ``ns`` (its length), ``phase`` (one of ``PHASES``), ``direction`` (``forward``,
    ``backward`` or empty for data and optimizer), ``family``, ``op`` (canonical op,
    ``host time between ops`` or ``unattributed``), ``native`` (the owning event's name without
    decorations, ``display_name``), ``owner`` (its row in the event table), ``layer`` (layer key, empty outside
    layers), ``layer_label`` and ``user`` (innermost user span, empty outside them). Per step the ``ns`` add up to the step's
    duration. Cached on the run per op map."""
    import pandas as pd

    key = ("step_slices", id(op_map))
    cached = run.cache.get(key)
    if cached is not None:
        return cached
    st = structure(run)
    n = len(st.parent)
    steps = np.flatnonzero(st.host & (st.kind == "step"))
    in_step = st.host & (st.step_row_of >= 0) & (st.kind != "step") & (st.end > st.start)
    units = np.flatnonzero(in_step & st.is_unit)
    containers = np.flatnonzero(in_step & (st.unit_of < 0))
    owners = np.concatenate([containers, steps])
    kids = np.flatnonzero(in_step & ((st.unit_of < 0) | st.is_unit))
    gap_owner, gap_start, gap_end = _gaps(st, owners, kids)
    unit_start = np.maximum(st.start[units], st.start[st.step_row_of[units]])
    unit_end = np.minimum(st.end[units], st.end[st.step_row_of[units]])
    unit_start = _after_previous(st.step_row_of[units], unit_start, unit_end)
    labels = unit_labels(run, op_map=op_map)
    grad, unit_op, layer_row = labels.gradient, labels.op, labels.layer_row
    resolver = labels.resolver

    # Backward work on other threads (torch runs autograd for a GPU on its own thread) fills
    # the time the step's thread spends waiting for it.
    other_step = _other_thread_steps(run, st, steps, grad)
    compute = compute_thread_rows(run)
    helper = np.flatnonzero((other_step >= 0) & ~compute)
    is_step = np.zeros(n, dtype=bool)
    is_step[steps] = True
    step_gap = is_step[gap_owner]
    fill_owner, fill_start, fill_end, rest = _fill(
        gap_owner[step_gap], gap_start[step_gap], gap_end[step_gap], helper, other_step, st
    )
    gap_owner = np.concatenate([gap_owner[~step_gap], rest[0]])
    gap_start = np.concatenate([gap_start[~step_gap], rest[1]])
    gap_end = np.concatenate([gap_end[~step_gap], rest[2]])
    # A compiled step's ops run on executor threads while the step's thread waits inside the
    # framework's call (PjitFunction, a tf.function's EagerExecute): they fill the gaps of the
    # step and of the spans it waits in.
    compute_helper = np.flatnonzero((other_step >= 0) & compute)
    if len(compute_helper):
        owner_step = np.where(is_step, np.arange(n), st.step_row_of)
        more_owner, more_start, more_end, rest = _fill(
            gap_owner, gap_start, gap_end, compute_helper, other_step, st, owner_step
        )
        fill_owner = np.concatenate([fill_owner, more_owner])
        fill_start = np.concatenate([fill_start, more_start])
        fill_end = np.concatenate([fill_end, more_end])
        gap_owner, gap_start, gap_end = rest
    owner = np.concatenate([units, fill_owner, gap_owner])
    s0 = np.concatenate([unit_start, fill_start, gap_start])
    s1 = np.concatenate([unit_end, fill_end, gap_end])
    row_step = np.where(other_step >= 0, other_step, st.step_row_of)
    step_row = np.where(is_step[owner], owner, row_step[owner])

    # Backward window of each step: its first to last backward event, on any thread.
    bw = (in_step | (other_step >= 0)) & ((st.kind == "backward") | grad)
    w0 = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    w1 = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    rows = np.flatnonzero(bw)
    np.minimum.at(w0, row_step[rows], st.start[rows])
    np.maximum.at(w1, row_step[rows], st.end[rows])
    a, b = w0[step_row], w1[step_row]
    has_window = b > a
    before = np.where(has_window, np.clip(np.minimum(s1, a) - s0, 0, None), s1 - s0)
    within = np.where(has_window, np.clip(np.minimum(s1, b) - np.maximum(s0, a), 0, None), 0)
    after = (s1 - s0) - before - within

    kind = st.kind[owner]
    is_unit_owner = st.is_unit[owner]
    op = np.where(is_unit_owner, unit_op[owner], BETWEEN_OPS).astype(object)
    op[kind == "dataloader"] = "data loading"
    is_opt = kind == "optimizer"
    op[is_opt] = [
        "zero_grad" if "zero_grad" in x else "optimizer step"
        for x in st.names[owner[is_opt]].tolist()
    ]
    is_step_owner = is_step[owner]
    decorated = is_unit_owner & np.isin(kind, ["operator", "backward", "other"])
    shown: dict[str, str] = {}
    native = np.array(
        [
            (shown[x] if x in shown else shown.setdefault(x, display_name(x))) if plain else x
            for x, plain in zip(st.names[owner].tolist(), decorated.tolist(), strict=True)
        ],
        dtype=object,
    )
    native[is_step_owner] = "(step loop)"
    families = {x: resolver.family(x) for x in set(op.tolist()) if x != BETWEEN_OPS}
    family = np.array([families.get(x, "overhead") for x in op.tolist()], dtype=object)
    for k, fixed in KIND_FAMILIES.items():
        family[is_unit_owner & (kind == k)] = fixed
    layer = np.where(is_unit_owner, layer_row[owner], st.layer_of[owner])
    user = st.user_of[owner]

    # Where each part starts: before the backward window, inside it, after it.
    part_starts = {
        "before": s0,
        "within": np.where(has_window, np.maximum(s0, a), s0),
        "after": s1 - after,
    }
    parts = []
    for part, length in (("before", before), ("within", within), ("after", after)):
        keep = length > 0
        frame = pd.DataFrame(
            {
                "_step_row": step_row[keep],
                "start_ns": part_starts[part][keep].astype(np.int64),
                "owner": owner[keep],
                "ns": length[keep].astype(np.float64),
                "_part": part,
                "_step_owner": is_step_owner[keep],
                "family": family[keep],
                "op": op[keep],
                "native": native[keep],
                "_layer": layer[keep],
                "_user": user[keep],
            }
        )
        parts.append(frame)
    out = pd.concat(parts, ignore_index=True)
    fam = out["family"].to_numpy()
    part = out["_part"].to_numpy()
    fam = closure_families(run, out, fam, BETWEEN_OPS)
    phase = np.where(part == "within", "backward", np.where(part == "before", "forward", "other"))
    phase = np.where(fam == "optimizer", "optimizer", phase)
    phase = np.where(fam == "data", "data", phase)
    direction = np.where(part == "within", "backward", "forward").astype(object)
    direction[np.isin(fam, ["data", "optimizer"])] = ""
    step_owner = out["_step_owner"].to_numpy()
    unattributed = step_owner & (part != "within")
    out["family"] = np.where(unattributed, UNATTRIBUTED, np.where(step_owner, "overhead", fam))
    out["op"] = np.where(unattributed, UNATTRIBUTED, np.where(step_owner, BETWEEN_OPS, out["op"]))
    direction[unattributed] = ""
    out["phase"] = phase
    out["direction"] = direction
    step_numbers = run.events["step"].to_numpy()
    out["step"] = step_numbers[out["_step_row"].to_numpy()]
    out["rank"] = run.events["rank"].to_numpy()[out["_step_row"].to_numpy()]
    out = in_stretched_steps(run, out)

    def by_row(rows: np.ndarray, name_of: Callable[[int], str]) -> pd.Categorical:
        """A categorical of ``name_of(row)``, computed once per distinct row."""
        uniques, inverse = np.unique(rows, return_inverse=True)
        names = [name_of(int(r)) for r in uniques.tolist()]
        labels = sorted(set(names))
        code = {label: i for i, label in enumerate(labels)}
        codes = np.asarray([code[x] for x in names], dtype=np.int64)[inverse]
        return pd.Categorical.from_codes(codes, categories=labels)

    layers = out["_layer"].to_numpy()
    out["layer"] = by_row(layers, lambda r: st.layer_key.get(r, ""))
    out["layer_label"] = by_row(layers, lambda r: st.layer_label.get(r, ""))
    out["user"] = by_row(out["_user"].to_numpy(), lambda r: str(st.names[r]) if r >= 0 else "")
    out = out[list(COLUMNS)]
    for column in ("phase", "direction", "family", "op", "native"):
        out[column] = pd.Categorical(np.asarray(out[column], dtype=object))
    run.cache.put(key, out)
    return out
