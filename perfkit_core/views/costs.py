"""What each op of a run costs: FLOPs and bytes from the performance model, the device time it
took, and whether its kernels ran on tensor cores; the rows the ``roofline`` and ``mfu`` views
count.

Every host op is asked for its cost (``perfkit_op_cost``, answered by the run's adapter or a
plugin). An op nest (``aten::linear`` calling ``aten::addmm`` calling ``aten::copy_``) is
counted once, at its outermost op that has a cost, with the device time of everything it
launched; an op whose cost had to assume something (a convolution gradient node that does not
say which gradients it computed) gives way to the ops inside it when they have costs of their
own. A gradient op is paired with the forward op it differentiates (``forward_op`` links where
torch recorded them, else in reverse order per canonical op within the step), and each side can
read the other's shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.facts import has_device
from perfkit_core.events.schema import str_values
from perfkit_core.plugins import framework_hook
from perfkit_core.views.anatomy.structure import innermost, outermost, structure
from perfkit_core.views.costmodel.callcodes import Calls, call_ids, distinct_rows
from perfkit_core.views.costmodel.opcost import OpCost
from perfkit_core.views.kernels import tensor_core_kernels

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: Precision names of tensor-core work, by the op's dtype precision.
TENSOR_PRECISION = {"fp32": "tf32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8"}


@dataclass
class RunCosts:
    """The costed ops of a run. Per counted op (row ``rows[i]`` of the event table): its cost
    (``flops`` FLOP, ``bytes`` B, ``kind``, ``precision``, ``gemm`` as (M, N, K) or -1s,
    ``assumed``), its time (``time_ns``: device time of what it launched on GPU runs, its host
    duration on runs without device events), the part of that time on tensor cores
    (``tensor_core_ns``), its longest kernel's name (``kernel``) and its step number. ``own``
    holds every host row's own cost (NaN where none), nests included. ``unmodelled_ns``: the time
    of ops the model does not know, by op name."""

    rows: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    kind: np.ndarray
    precision: np.ndarray
    gemm: np.ndarray
    batch: np.ndarray
    assumed: np.ndarray
    time_ns: np.ndarray
    tensor_core_ns: np.ndarray
    kernel: np.ndarray
    step: np.ndarray
    own_flops: np.ndarray
    own_bytes: np.ndarray
    on_device: bool
    unmodelled_ns: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def math_precision(self) -> np.ndarray:
        """Per counted op, the precision its math ran in: ``tf32``/``fp16``/``bf16``/``fp8``
        tensor cores when most of its device time was on tensor-core kernels, else its dtype's
        (``fp32``, ...)."""
        import pandas as pd

        on_tc = self.tensor_core_ns > 0.5 * np.where(self.time_ns > 0, self.time_ns, np.inf)
        codes, uniques = pd.factorize(self.precision, use_na_sentinel=False)
        names = [str(p) for p in uniques.tolist()]
        base = np.array(names, dtype=object)
        tensor = np.array([TENSOR_PRECISION.get(p, "") for p in names], dtype=object)
        shown = np.array([f"{t} tensor" if t else "" for t in tensor.tolist()], dtype=object)
        use = on_tc & (tensor[codes] != "")
        return np.where(use, shown[codes], base[codes]).astype(object)


def _pairs(run: Run) -> np.ndarray:
    """For each op-unit row, the unit it is paired with (a gradient unit's forward unit, a
    forward unit's gradient unit), -1 when none. Pairs come from, in order: the ``forward_op``
    links torch recorded; the autograd sequence numbers torch records on a forward op and on
    the gradient node it created (``sequence``); ``unit_labels``' pairing in reverse order per
    canonical op within a step."""
    from perfkit_core.views.anatomy.attribution import unit_labels

    labels = unit_labels(run)
    st = structure(run)
    ev = run.events
    n = len(st.parent)
    unit_of = st.unit_of
    grad_unit = np.zeros(n, dtype=bool)
    units = np.flatnonzero(st.is_unit)
    grad_unit[units] = labels.gradient[units]
    matched = np.full(n, -1, dtype=np.int64)
    fwd = ev["forward_op"].to_numpy()
    linked = np.flatnonzero((fwd >= 0) & (unit_of >= 0))
    if len(linked):
        b, f = unit_of[linked], unit_of[fwd[linked]]
        ok = (f >= 0) & grad_unit[b]
        matched[b[ok]] = f[ok]
    seq = ev["sequence"].to_numpy()
    has_seq = np.flatnonzero((seq >= 0) & (unit_of >= 0))
    if len(has_seq):
        rank = ev["rank"].to_numpy().astype(np.int64)
        key = (rank[has_seq] << 40) + seq[has_seq]
        unit = unit_of[has_seq]
        is_grad = grad_unit[unit]
        # Torch writes the current sequence number on every op, so several forward units can
        # carry a gradient node's number: the one of the node's canonical op wins, else the
        # last one.
        forward_of: dict[int, list[int]] = {}
        for k, u in zip(key[~is_grad].tolist(), unit[~is_grad].tolist(), strict=True):
            found = forward_of.setdefault(k, [])
            if u not in found:
                found.append(u)
        for k, u in zip(key[is_grad].tolist(), unit[is_grad].tolist(), strict=True):
            candidates = forward_of.get(k)
            if matched[u] >= 0 or not candidates:
                continue
            same = [f for f in candidates if labels.op[f] == labels.op[u]]
            matched[u] = (same or candidates)[-1]
    guessed = labels.matched
    rest = np.flatnonzero(grad_unit & (matched < 0) & (guessed >= 0))
    matched[rest] = guessed[rest]
    out = np.full(n, -1, dtype=np.int64)
    has = np.flatnonzero(matched >= 0)
    out[has] = matched[has]
    # A forward unit several gradient units point to (aten::linear: AddmmBackward and
    # TBackward) pairs with the one of its own canonical op, else the first.
    for g in has.tolist():
        f = int(matched[g])
        if out[f] < 0 or (labels.op[g] == labels.op[f] and labels.op[out[f]] != labels.op[f]):
            out[f] = g
    return out


def run_costs(run: Run) -> RunCosts:
    """The ``RunCosts`` of ``run``, computed once and cached on the run."""
    return run.cached("run_costs", lambda: _run_costs(run))


def _codes(column: Any) -> tuple[np.ndarray, list[str]]:
    """(codes, categories as text) of a string column: the codes as the categorical holds them
    (the narrowest integer type), -1 where a value is missing."""
    import pandas as pd

    values = column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")
    return values.cat.codes.to_numpy(), [str(c) for c in values.cat.categories]


def _first_with_shapes(
    rows: np.ndarray,
    parent: np.ndarray,
    ops: np.ndarray,
    has_shapes: np.ndarray,
    start: np.ndarray,
) -> np.ndarray:
    """For each row of ``rows`` (-1 passes through), the row itself when it recorded shapes,
    else its first child op that did, down to four levels (an autograd engine span holds the
    node that records them)."""
    n = len(parent)
    kids = ops[parent[ops] >= 0]
    kids = kids[np.lexsort((start[kids], parent[kids]))]
    first_child = np.full(n, -1, dtype=np.int64)
    if len(kids):
        heads = np.r_[True, parent[kids][1:] != parent[kids][:-1]]
        first_child[parent[kids][heads]] = kids[heads]
    out = rows.copy()
    for _ in range(4):
        safe = np.maximum(out, 0)
        go = (out >= 0) & ~has_shapes[safe] & (first_child[safe] >= 0)
        if not go.any():
            break
        out[go] = first_child[out[go]]
    return out


def _run_costs(run: Run) -> RunCosts:
    """Every op's own cost, asked once per distinct call: ops are coded in bulk by what a call
    holds (name, recorded inputs, stack's innermost frame, enclosing call, paired call), level
    by level of the op nests. Calls that differ only in their recorded values (an optimizer's
    step size, which changes every step) form a group: the model is asked for one call of the
    group, and when it read no values (neither of the call nor of those it runs inside or is
    paired with) its answer holds for the whole group; else every call of the group is asked."""
    ev = run.events
    n = len(ev)
    st = structure(run)
    parent = ev["parent"].to_numpy()
    ops = np.flatnonzero(st.host & (st.kind == "operator"))
    framework = run.framework
    hook = framework_hook("perfkit_op_cost", framework)
    columns = ("name", "input_shapes", "input_dtypes", "input_values", "stack")
    codes: list[np.ndarray] = []
    texts: list[list[str]] = []
    for column in columns:
        found, categories = _codes(ev[column])
        if column == "stack":
            # A call reads the innermost frame of its stack: stacks are coded by that frame.
            frames = [c.split("\n", 1)[0] for c in categories]
            categories = sorted(set(frames))
            at = {f: i for i, f in enumerate(categories)}
            recode = np.array([at[f] for f in frames] + [-1], dtype=np.int32)
            found = recode[found]
        if column == "input_shapes":
            shaped = np.array([bool(c) for c in categories] + [False], dtype=bool)
            has_shapes = shaped[found]
        codes.append(found[ops])  # as narrow as the categorical keeps them
        texts.append(categories)
    del found
    # What a call holds of its own (one code per op), and the same without its values.
    own_key = np.full(n, -1, dtype=np.int64)
    form_key = np.full(n, -1, dtype=np.int64)
    own_key[ops], own_first = distinct_rows(codes)
    form_key[ops], _ = distinct_rows([codes[0], codes[1], codes[2], codes[4]])
    own_values = np.stack([c[own_first] for c in codes], axis=1)
    del codes
    pair = _pairs(run)
    unit = st.unit_of
    partner_unit = np.where(unit >= 0, pair[np.maximum(unit, 0)], -1)
    partner_row = _first_with_shapes(partner_unit, parent, ops, has_shapes, st.start)
    del pair, partner_unit, has_shapes
    has_partner = partner_row >= 0
    partner_row = np.maximum(partner_row, 0)
    # Calls (own, enclosing call, paired), and their groups (the same without values).
    call_of, triples = call_ids(
        ops, parent, own_key, np.where(has_partner, own_key[partner_row], -1)
    )
    group_of, _ = call_ids(ops, parent, form_key, np.where(has_partner, form_key[partner_row], -1))
    del own_key, form_key, partner_row, has_partner
    call_group = np.full(len(triples), -1, dtype=np.int64)
    call_group[call_of[ops]] = group_of[ops]
    del group_of
    order = np.argsort(call_group, kind="stable")
    bounds = np.flatnonzero(np.diff(call_group[order])) + 1
    plain = Calls(triples, own_values, texts, framework)
    watcher = [False]
    watched = Calls(plain.triples, plain.own, texts, framework, watcher)
    costs: list[OpCost | None] = [None] * len(triples)
    for members in np.split(order, bounds) if len(order) else []:
        first = int(members[0])
        watcher[0] = False
        answer = hook(call=watched.call(first), framework=framework)
        if not watcher[0]:
            for c in members.tolist():
                costs[c] = answer
            continue
        for c in members.tolist():
            costs[c] = hook(call=plain.call(c), framework=framework)
    # Calls of equal cost share one entry of the table the counted ops are read from.
    del order, bounds, call_group, plain, watched
    distinct: dict[OpCost | None, int] = {}
    cost_code = np.array([distinct.setdefault(c, len(distinct)) for c in costs], dtype=np.int64)
    del costs
    # What the calls were numbered with is not needed to pick and time the counted ops; the
    # cost of each row is made in the call so that ``_collect`` can let it go.
    del triples, own_values, st
    return _collect(
        run,
        ops,
        np.where(call_of >= 0, cost_code[np.maximum(call_of, 0)] if len(cost_code) else -1, -1),
        list(distinct),
        ev["flops"].to_numpy(),
    )


def _collect(
    run: Run,
    ops: np.ndarray,
    cost_of: np.ndarray,
    costs: list[OpCost | None],
    recorded: np.ndarray,
) -> RunCosts:
    """Pick the counted ops from every op's own cost (``costs[cost_of[row]]``, -1 for rows that are not ops; an op the model
    does not know keeps the FLOPs the profiler recorded, its bytes unknown) and measure their
    time."""
    ev = run.events
    n = len(ev)
    parent = ev["parent"].to_numpy()
    known = np.array([c is not None for c in costs] + [False], dtype=bool)
    table = [c if c is not None else OpCost(math.nan, math.nan) for c in costs]
    table.append(OpCost(math.nan, math.nan))
    code = np.where(cost_of >= 0, cost_of, len(table) - 1)
    is_op = cost_of >= 0
    del cost_of
    costed = known[code]
    weak = np.array([bool(c.assumed) for c in table], dtype=bool)[code] & costed
    # Rows that are not costed read the last entry, whose FLOPs and bytes are NaN.
    own_flops = np.array([c.flops for c in table])[code]
    own_bytes = np.array([c.bytes for c in table])[code]
    fallback = ~costed & np.isfinite(recorded) & (recorded > 0) & is_op
    del is_op
    own_flops[fallback] = recorded[fallback]
    costed |= fallback
    below = np.zeros(n, dtype=bool)  # has a costed descendant
    cur = parent[costed]
    while len(cur):
        cur = cur[cur >= 0]
        cur = cur[~below[cur]]
        below[cur] = True
        cur = parent[cur]
    eligible = (
        costed & ~(weak & below) & ~_autocast_wrappers(parent, costed, own_flops, table, code)
    )
    del below, weak, fallback
    counted = eligible & ~links.has_ancestor(parent, eligible)
    del eligible
    rows = np.flatnonzero(counted)
    on_device = has_device(run)
    time_ns, tc_ns, kernel = _times(run, counted, rows, on_device)
    # A fallback op (recorded FLOPs only) reads the "unknown" entry for the rest.
    picked = np.where(known[code[rows]], code[rows], len(table) - 1)
    out = RunCosts(
        rows=rows,
        flops=own_flops[rows],
        bytes=own_bytes[rows],
        kind=np.array([c.kind for c in table], dtype=object)[picked],
        precision=np.array([c.precision for c in table], dtype=object)[picked],
        gemm=np.array([c.gemm or (-1, -1, -1) for c in table], dtype=np.int64).reshape(-1, 3)[
            picked
        ],
        batch=np.array([c.batch for c in table], dtype=np.int64)[picked],
        assumed=np.array([c.assumed for c in table], dtype=object)[picked],
        time_ns=time_ns,
        tensor_core_ns=tc_ns,
        kernel=kernel,
        step=ev["step"].to_numpy()[rows],
        own_flops=own_flops,
        own_bytes=own_bytes,
        on_device=on_device,
    )
    out.unmodelled_ns = _unmodelled(run, counted, costed, on_device)
    return out


def _autocast_wrappers(
    parent: np.ndarray,
    costed: np.ndarray,
    own_flops: np.ndarray,
    table: list[OpCost],
    code: np.ndarray,
) -> np.ndarray:
    """The costed ops whose math a costed child does in another precision with the same FLOPs:
    under autocast, ``aten::linear`` of float32 inputs casts them and calls ``aten::linear`` of
    bf16 ones. The child is counted (its kernels are the product), not the wrapper, whose time
    would hold the casts and whose precision would read float32."""
    children = np.flatnonzero(costed & (parent >= 0))
    children = children[costed[parent[children]]]
    up = parent[children]
    precision = np.array([c.precision for c in table], dtype=object)
    flops = own_flops[children]
    same = np.isfinite(flops) & (flops > 0) & np.isclose(flops, own_flops[up], rtol=1e-9)
    other = precision[code[children]] != precision[code[up]]
    wrapper = np.zeros(len(parent), dtype=bool)
    wrapper[up[same & other]] = True
    return wrapper


def _device_owner(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(device rows, the host row that issued each: its runtime launch's issuer, or its
    ``External id`` owner)."""
    ev = run.events
    device = np.flatnonzero(ev["stream"].to_numpy() >= 0)
    owner = links.run_launchers(run)[device]
    # Most device rows have a launch: only the others are looked up by External id.
    unlaunched = np.flatnonzero(owner < 0)
    if len(unlaunched):
        owner[unlaunched] = links.external_owner_rows(ev, device[unlaunched])
    return device, owner


def _times(
    run: Run, counted: np.ndarray, rows: np.ndarray, on_device: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per counted row: its time (device time of its subtree, or its host duration), the part
    on tensor-core kernels, and its longest kernel's name."""
    ev = run.events
    if not on_device:
        host = ev["dur_ns"].to_numpy()[rows].astype(np.float64)
        return host, np.zeros(len(rows)), np.full(len(rows), "", dtype=object)
    dur = ev["dur_ns"].to_numpy().astype(np.float64)
    device, owner = _device_owner(run)
    top = innermost(links.launch_parents(run), counted)
    ok = owner >= 0
    device, owner = device[ok], top[owner[ok]]
    ok = owner >= 0
    device, owner = device[ok], owner[ok]
    n = len(ev)
    total = np.bincount(owner, weights=dur[device], minlength=n)
    names = str_values(ev["name"])[device]
    tc = tensor_core_kernels(ev["name"])[device]
    tc_total = np.bincount(owner[tc], weights=dur[device][tc], minlength=n)
    longest = np.full(n, "", dtype=object)
    order = np.lexsort((dur[device], owner))
    last = np.r_[owner[order][1:] != owner[order][:-1], True] if len(order) else order.astype(bool)
    longest[owner[order][last]] = names[order][last]
    return total[rows], tc_total[rows], longest[rows]


def _unmodelled(
    run: Run, counted: np.ndarray, costed: np.ndarray, on_device: bool
) -> dict[str, float]:
    """The time no counted op holds, by the outermost host op or span it ran in: on GPU runs the
    device time launched outside counted ops, on CPU runs the host time of outermost ops that
    neither have a cost nor hold one."""
    ev = run.events
    st = structure(run)
    parent = links.launch_parents(run)
    spans = st.host & st.kinds.among("operator", "optimizer", "user", "backward", "forward")
    inside = links.has_ancestor(parent, counted) | counted
    out: dict[str, float] = {}
    if on_device:
        device, owner = _device_owner(run)
        ok = owner >= 0
        device, owner = device[ok], owner[ok]
        ok = ~inside[owner]
        device, owner = device[ok], owner[ok]
        top = outermost(parent, spans & ~st.kinds.among("user", "backward", "forward"))
        found = top[owner]
        times = ev["dur_ns"].to_numpy()[device].astype(np.float64)
        labels = np.where(found >= 0, st.names[np.maximum(found, 0)], "(outside ops)")
    else:
        ops = st.host & (st.kind == "operator")
        holds = np.zeros(len(ev), dtype=bool)
        cur = parent[counted]
        while len(cur):
            cur = cur[cur >= 0]
            cur = cur[~holds[cur]]
            holds[cur] = True
            cur = parent[cur]
        top_rows = np.flatnonzero(
            ops & ~inside & ~holds & ~links.has_ancestor(parent, ops & ~holds)
        )
        times = ev["dur_ns"].to_numpy()[top_rows].astype(np.float64)
        labels = st.names[top_rows]
    if len(times):
        import pandas as pd

        sums = pd.Series(times).groupby(np.asarray(labels, dtype=object)).sum()
        out = {str(k): float(v) for k, v in sums.items() if v > 0}
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))
