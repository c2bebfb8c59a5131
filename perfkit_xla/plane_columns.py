"""The columns of one plane's events, computed in bulk from the decoded XSpace: names, native
categories, steps, correlations, FLOPs, bytes, and the texts (input shapes and dtypes, call
stacks) that come from an event's stats or its XLA op's HLO.

What depends on names and stats is worked out once per distinct combination (a profile has a
few hundred event names and stat values, and many events of each); numbers are converted as
arrays (``perfkit_xla.stat_values``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_xla.hlo import HloOp, ModuleOps
from perfkit_xla.kinds import CATEGORY_KINDS, device_category, device_of_plane, host_category
from perfkit_xla.stat_values import OBJECT, PlaneStats
from perfkit_xla.stat_values import to_int as _int

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_xla.xspace import XPlane, XSpace

#: Stats read into columns: stat name -> column.
STAT_COLUMNS: dict[str, str] = {
    "step_num": "step (rows of kind step)",
    "flops": "flops",
    "model_flops": "flops (when flops is absent)",
    "bytes_transferred": "bytes (memcpy, memset, communication rows)",
    "num_bytes": "bytes (memcpy, memset, communication rows)",
    "correlation_id": "correlation",
    "input_shapes": "input_shapes",
    "shape": "input_shapes (when input_shapes is absent)",
    "input_dtypes": "input_dtypes",
    "tf_op": "stack (the TensorFlow op's full name, for TF ops)",
    "hlo_module": "stack (the XLA module of an XLA op whose HLO the profile does not hold)",
}
_BYTES_CATEGORIES = frozenset({"Memcpy", "Memset", "Collective"})


#: Every stat the loader reads (into columns, or to tell what an event is).
READ_STATS = frozenset(
    {*STAT_COLUMNS, "hlo_op", "hlo_module", "program_id", "perfkit", "tf_function_call"}
)
#: Stats that give an event's shapes, dtypes or call stack (read per distinct combination).
_TEXT_STATS = ("input_shapes", "shape", "input_dtypes", "tf_op", "hlo_module", "hlo_op")
#: Every native category, in a fixed order (``PlaneColumns.category`` indexes it).
CATEGORIES = list(CATEGORY_KINDS)
CATEGORY_INDEX = {c: i for i, c in enumerate(CATEGORIES)}


class PlaneColumns:
    """The columns of one plane's events (rows ``plane.first`` to ``plane.stop`` of the
    XSpace's event table), computed in bulk: ``name`` (codes into ``names``), ``category``
    (codes into ``CATEGORIES``), the per-line columns and the stat columns."""

    def __init__(
        self,
        space: XSpace,
        plane: XPlane,
        stat_rows: np.ndarray,
        hlo: dict[tuple[str, int], ModuleOps],
        source: Path,
    ) -> None:
        events = space.events
        n = plane.stop - plane.first
        self.n = n
        device = device_of_plane(plane.name)
        self.device = device
        plane_stats = plane.named_stats(plane.stats)
        self.pid = _int(plane_stats.get("process_id"), -1) if device is None else -1
        distinct, inverse = np.unique(
            events.metadata_id[plane.first : plane.stop], return_inverse=True
        )
        metadata = [plane.event_metadata.get(int(m)) for m in distinct]
        self.names = [
            em.name if em is not None else f"<event metadata {int(m)}>"
            for m, em in zip(distinct, metadata, strict=True)
        ]
        self.name = inverse
        # Only the stats the loader reads are looked at (by id): the rest stay in the file.
        read = {k: m.name for k, m in plane.stat_metadata.items() if m.name in READ_STATS}
        ids = np.array([k for k in read if k >= 0], dtype=np.uint64)
        rows = stat_rows[
            (events.stats.event[stat_rows] >= plane.first)
            & (events.stats.event[stat_rows] < plane.stop)
        ]
        rows = rows[np.isin(events.stats.metadata_id[rows], ids)]
        stats = PlaneStats(plane, events.stats, rows, read, metadata, inverse)
        self.category = self._categories(plane, stats, inverse)
        category = self.category
        step = category == CATEGORY_INDEX["Step"]
        self.step = stats.ints(stats.get("step_num"), n, step, source, "step_num")
        self.correlation = stats.ints(
            stats.get("correlation_id"), n, np.ones(n, dtype=bool), source, "correlation_id"
        )
        self.flops = stats.floats(stats.either("flops", "model_flops"), n)
        nbytes = stats.floats(stats.either("bytes_transferred", "num_bytes"), n)
        moves = np.isin(category, [CATEGORY_INDEX[c] for c in _BYTES_CATEGORIES])
        self.nbytes = np.where(moves, nbytes, np.nan)
        self.texts, self.shapes, self.dtypes, self.stack = self._texts(stats, hlo)

    def _categories(self, plane: XPlane, stats: PlaneStats, inverse: np.ndarray) -> np.ndarray:
        """The native category of each event (index into ``CATEGORIES``)."""
        n = self.n
        if self.device is None:
            # What host_category looks at: the name, three stats' presence and perfkit="user".
            user = np.zeros(n, dtype=bool)
            perfkit = stats.get("perfkit")
            if perfkit is not None:
                objects = np.flatnonzero(perfkit.kind == OBJECT)
                marks = [stats.objects[int(i)] == "user" for i in perfkit.bits[objects]]
                user[objects[np.array(marks, dtype=bool)]] = True
            flags = (
                stats.present("step_num", n).astype(np.int64)
                | stats.present("hlo_op", n) << 1
                | stats.present("tf_op", n) << 2
                | user << 3
            )
            keys, where = np.unique(inverse * 16 + flags, return_inverse=True)
            found = []
            for k in keys.tolist():
                name, f = self.names[k >> 4], k & 15
                marked: dict[str, object] = {
                    stat: 0
                    for bit, stat in ((1, "step_num"), (2, "hlo_op"), (4, "tf_op"))
                    if f & bit
                }
                if f & 8:
                    marked["perfkit"] = "user"
                found.append(CATEGORY_INDEX[host_category(name, marked)])
            return np.array(found, dtype=np.int64)[where]
        has_streams = any(line.name.startswith("Stream") for line in plane.lines)
        out = np.empty(n, dtype=np.int64)
        for line in plane.lines:
            lo, hi = line.first - plane.first, line.first - plane.first + len(line.metadata_id)
            if hi == lo:
                continue
            line_name = line.display_name or line.name
            keys, where = np.unique(inverse[lo:hi], return_inverse=True)
            found = [
                CATEGORY_INDEX[device_category(line_name, self.names[k], has_streams)]
                for k in keys.tolist()
            ]
            out[lo:hi] = np.array(found, dtype=np.int64)[where]
        return out

    def _texts(
        self, stats: PlaneStats, hlo: dict[tuple[str, int], ModuleOps]
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The shapes, dtypes and call stack of each event, from its stats and its XLA op's HLO:
        (texts, and per event the index in texts of each of the three)."""
        n = self.n
        texts = [""]
        shapes = np.zeros(n, dtype=np.int64)
        dtypes = np.zeros(n, dtype=np.int64)
        stack = np.zeros(n, dtype=np.int64)
        columns = {name: stats.get(name) for name in (*_TEXT_STATS, "program_id")}
        some = np.zeros(n, dtype=bool)
        for name in _TEXT_STATS:
            some |= stats.present(name, n)
        rows = np.flatnonzero(some)
        if not rows.size:
            return texts, shapes, dtypes, stack
        import pandas as pd

        category = self.category[rows]
        key = (category == CATEGORY_INDEX["TF Op"]) * 2 + (category == CATEGORY_INDEX["Python"])
        for column in columns.values():
            codes = stats.codes(column, rows) + 1
            key = pd.factorize(key * (int(codes.max()) + 1) + codes)[0]
        distinct, first = np.unique(key, return_index=True)
        index: dict[str, int] = {"": 0}
        found = np.zeros((len(distinct), 3), dtype=np.int64)
        for j, row in enumerate(rows[first].tolist()):
            values = {
                name: value
                for name, column in columns.items()
                if (value := stats.value(column, row)) is not None
            }
            category_name = CATEGORIES[int(self.category[row])]
            for i, text in enumerate(_event_texts(values, category_name, hlo)):
                found[j, i] = index.setdefault(text, len(index))
        texts = list(index)
        where = np.searchsorted(distinct, key)
        shapes[rows] = found[where, 0]
        dtypes[rows] = found[where, 1]
        stack[rows] = found[where, 2]
        return texts, shapes, dtypes, stack


def _event_texts(
    stats: dict[str, Any], category: str, hlo: dict[tuple[str, int], ModuleOps]
) -> tuple[str, str, str]:
    """(input shapes, input dtypes, call stack) of an event with ``stats`` (by name) and
    ``category``: from its stats, else from its XLA op's HLO."""
    shapes = stats.get("input_shapes", stats.get("shape"))
    dtypes = stats.get("input_dtypes")
    where = stats.get("tf_op") if category == "TF Op" else stats.get("hlo_module")
    op = _hlo_op(hlo, stats) if "hlo_op" in stats else None
    if op is not None:
        shapes = shapes if shapes is not None else op.input_shapes
        dtypes = dtypes if dtypes is not None else op.input_dtypes
        if op.op_name:
            where = "\n".join(reversed(op.op_name.split("/")))
    return (
        str(shapes) if shapes is not None else "",
        str(dtypes) if dtypes is not None else "",
        str(where) if where is not None and category != "Python" else "",
    )


def _hlo_op(hlo: dict[tuple[str, int], ModuleOps], stats: dict[str, Any]) -> HloOp | None:
    """What the module's HLO proto says about the XLA op of an event (by its ``hlo_module``,
    ``program_id`` and ``hlo_op`` stats), or None."""
    ops = hlo.get((str(stats.get("hlo_module", "")), _int(stats.get("program_id"))))
    return ops.get(str(stats["hlo_op"])) if ops is not None else None


def categorical(codes: np.ndarray, values: list[str]) -> pd.Categorical:
    """The categorical of ``values[codes]``, its categories the values used, sorted (as
    ``pd.Categorical(list_of_strings)`` makes them); ``values`` may repeat."""
    import pandas as pd

    used = np.bincount(codes, minlength=len(values)) > 0
    categories = sorted({v for v, u in zip(values, used.tolist(), strict=True) if u})
    position = {c: i for i, c in enumerate(categories)}
    remap = np.array([position.get(v, -1) for v in values], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes], categories=categories)


def stacked(parts: list[tuple[np.ndarray, list[str]]]) -> pd.Categorical:
    """One categorical of the parts' (codes, values), in order."""
    codes: list[np.ndarray] = []
    values: list[str] = []
    for part_codes, part_values in parts:
        codes.append(part_codes + len(values))
        values.extend(part_values)
    return categorical(np.concatenate(codes), values)
