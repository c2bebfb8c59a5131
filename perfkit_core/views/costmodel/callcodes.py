"""Numbering the distinct op calls of a run in bulk, for the cost model
(``perfkit_core.views.costs``): a call is what an op holds of its own (name, recorded inputs,
stack's innermost frame), the call it ran inside and the call it is paired with; calls are
numbered level by level of the op nests with packed int64 keys, and made into ``OpCall``
objects only when the model is asked."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.views.costmodel.opcost import OpCall
from perfkit_core.views.costmodel.shapes import Inputs, parse_inputs


def distinct_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the integer ``columns`` (equal lengths), in lexicographic order:
    (per row, the index of its distinct row; per distinct row, the index of a row holding it).
    The columns are packed into one int64 key per row where their ranges allow (a
    one-dimensional sort), else sorted column by column."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lows = [int(c.min()) for c in columns]
    spans = [int(c.max()) - low + 1 for c, low in zip(columns, lows, strict=True)]
    if math.prod(spans) < 2**62:
        key = np.zeros(n, dtype=np.int64)
        for column, low, span in zip(columns, lows, spans, strict=True):
            key *= span
            key += column.astype(np.int64) - low
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return np.asarray(inverse, dtype=np.int64).reshape(-1), first
    order = np.lexsort(columns[::-1])
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for column in columns:
        ranked = column[order]
        new[1:] |= ranked[1:] != ranked[:-1]
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return inverse, order[new]


#: Ops nested deeper than this in a nest of ops are costed as tops of their own nests (their
#: ``OpCall.parent`` is None): the formulas read one enclosing op, real nests are a few ops
#: deep, and a chain of enclosing calls as deep as a pathological trace's would overflow the
#: recursion of the calls' hash.
MAX_CALL_NESTING = 64


def call_ids(
    ops: np.ndarray, parent: np.ndarray, own_key: np.ndarray, partner_key: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct calls: a call is (own code, the call it ran inside, paired own code),
    made level by level of the op nests (an op's enclosing call is numbered before it). Returns
    (each row's call id, -1 for rows that are not ops; per call id its (own, enclosing,
    paired) triple). Ids are given in the order of first appearance, level by level, the
    triples of a level in lexicographic order, so an enclosing call's id is below its
    calls'."""
    n = len(parent)
    call_of = np.full(n, -1, dtype=np.int64)
    if not len(ops):
        return call_of, np.zeros((0, 3), dtype=np.int64)
    # A level is an op's place in its nest of ops; ops nested deeper than MAX_CALL_NESTING are
    # coded as tops of their own nests, so an OpCall's chain of enclosing calls (which its hash
    # and equality follow) stays short on traces nested 200,000 deep.
    is_op = np.zeros(n, dtype=bool)
    is_op[ops] = True
    op_parent = np.where((parent >= 0) & is_op[np.maximum(parent, 0)], parent, -1)
    op_depth = np.minimum(links.depth(op_parent)[ops], MAX_CALL_NESTING)
    by_level = np.argsort(op_depth, kind="stable")
    bounds = np.flatnonzero(np.diff(op_depth[by_level])) + 1
    # Every triple packs into one int64 key: own and paired codes are below the number of
    # distinct own codes, enclosing call ids below the number of ops.
    own_span = int(max(own_key[ops].max(), partner_key[ops].max())) + 2
    call_span = len(ops) + 1
    packable = own_span * own_span * call_span < 2**62
    known_keys = np.zeros(0, dtype=np.int64)
    known_ids = np.zeros(0, dtype=np.int64)
    index: dict[tuple[int, int, int], int] = {}
    triples: list[np.ndarray] = []
    count = 0
    for level in np.split(by_level, bounds):
        rows = ops[level]
        deepest = bool(op_depth[level[0]] >= MAX_CALL_NESTING)
        up = np.where((parent[rows] >= 0) & (not deepest), call_of[np.maximum(parent[rows], 0)], -1)
        keys = [own_key[rows], up, partner_key[rows]]
        inverse, first = distinct_rows(keys)
        distinct = np.stack([k[first] for k in keys], axis=1)
        ids = np.empty(len(distinct), dtype=np.int64)
        if packable:
            packed = ((distinct[:, 0] + 1) * call_span + distinct[:, 1] + 1) * own_span + (
                distinct[:, 2] + 1
            )
            at = np.searchsorted(known_keys, packed)
            hit = at < len(known_keys)
            hit[hit] = known_keys[at[hit]] == packed[hit]
            ids[hit] = known_ids[at[hit]]
            fresh = np.flatnonzero(~hit)
            ids[fresh] = count + np.arange(len(fresh))
            count += len(fresh)
            triples.append(distinct[fresh])
            merged = np.concatenate([known_keys, packed[fresh]])
            order = np.argsort(merged, kind="stable")
            known_keys = merged[order]
            known_ids = np.concatenate([known_ids, ids[fresh]])[order]
        else:
            for i, key in enumerate(distinct.tolist()):
                triple = (int(key[0]), int(key[1]), int(key[2]))
                if triple not in index:
                    index[triple] = len(index)
                    triples.append(distinct[i : i + 1])
                ids[i] = index[triple]
        call_of[rows] = ids[inverse]
    return call_of, np.concatenate(triples) if triples else np.zeros((0, 3), dtype=np.int64)


class Watched(Inputs):
    """An op's ``Inputs`` that note (on ``watcher``, a one-item list) when the values recorded
    for them are read: through ``values``, any method that reads it, or by comparing or hashing
    the inputs."""

    def __getattribute__(self, name: str) -> Any:
        if name in ("values", "__dict__"):
            object.__getattribute__(self, "_watcher")[0] = True
        return object.__getattribute__(self, name)

    def _plain(self) -> Inputs:
        return Inputs(self.shapes, self.dtypes, self.values, self.names, self.lists)

    def __eq__(self, other: object) -> bool:
        plain = other._plain() if isinstance(other, Watched) else other
        return self._plain() == plain

    def __hash__(self) -> int:
        return hash(self._plain())


class Calls:
    """The ``OpCall`` of each distinct call of a run, made when asked: call ``c`` is the
    triple ``triples[c]`` (own code, enclosing call, paired own code), own code ``o`` the
    texts ``own[o]`` (name, shapes, dtypes, values, origin: indices into ``texts``). With a
    ``watcher``, the calls' inputs (and those of the calls they run inside and are paired
    with) are ``Watched`` by it."""

    def __init__(
        self,
        triples: np.ndarray,
        own: np.ndarray,
        texts: list[list[str]],
        framework: str,
        watcher: list[bool] | None = None,
    ) -> None:
        self.triples, self.own, self.texts = triples, own, texts
        self.framework, self.watcher = framework, watcher
        self.bare: dict[int, OpCall] = {}
        self.calls: dict[int, OpCall] = {}

    def _text(self, column: int, code: int) -> str:
        return self.texts[column][code] if code >= 0 else ""

    def own_call(self, o: int) -> OpCall:
        """The call of own code ``o`` alone (no enclosing or paired call)."""
        found = self.bare.get(o)
        if found is None:
            name, shapes, dtypes, values, origin = self.own[o].tolist()
            inputs = parse_inputs(
                self._text(1, shapes), self._text(2, dtypes), self._text(3, values)
            )
            if self.watcher is not None:
                inputs = Watched(
                    inputs.shapes, inputs.dtypes, inputs.values, inputs.names, inputs.lists
                )
                object.__setattr__(inputs, "_watcher", self.watcher)
            found = OpCall(
                self._text(0, name), inputs, self.framework, origin=self._text(4, origin)
            )
            self.bare[o] = found
        return found

    def call(self, c: int) -> OpCall:
        """The call with id ``c``."""
        found = self.calls.get(c)
        if found is None:
            own, enclosing, partner = self.triples[c].tolist()
            base = self.own_call(own)
            if enclosing < 0 and partner < 0:
                found = base
            else:
                found = OpCall(
                    base.name,
                    base.inputs,
                    self.framework,
                    self.call(enclosing) if enclosing >= 0 else None,
                    self.own_call(partner) if partner >= 0 else None,
                    base.origin,
                )
            self.calls[c] = found
        return found
