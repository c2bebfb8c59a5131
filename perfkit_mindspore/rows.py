"""The rows of a MindSpore run as they are gathered (operators, kernels, and the steps, layers
and phases perfkit adds), turned into perfkit's event table at the end in one go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_mindspore.scopes import op_type

if TYPE_CHECKING:
    from perfkit_mindspore.tables import Calls

#: Columns gathered per row, with the value a row gets when it does not say.
DEFAULTS: dict[str, Any] = {
    "kind": "other",
    "name": "",
    "full_name": "",
    "category": "",
    "start_ns": 0,
    "dur_ns": 0,
    "device_type": "cpu",
    "device_index": -1,
    "pid": -1,
    "tid": -1,
    "stream": -1,
    "step": -1,
    "correlation": -1,
    "forward_op": -1,
    "input_shapes": "",
}
_INTS = (
    "start_ns",
    "dur_ns",
    "device_index",
    "pid",
    "tid",
    "stream",
    "step",
    "correlation",
    "forward_op",
)


@dataclass
class Rows:
    """Columns of the rows gathered so far (lists, one entry per row)."""

    columns: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in DEFAULTS})

    def __len__(self) -> int:
        return len(self.columns["kind"])

    def add(self, **values: Any) -> int:
        """Add one row (columns not given take ``DEFAULTS``); return its index."""
        for name, default in DEFAULTS.items():
            self.columns[name].append(values.get(name, default))
        return len(self) - 1

    def extend(self, n: int, **values: Any) -> None:
        """Add ``n`` rows: each value is a list of ``n`` or one value for every row."""
        for name, default in DEFAULTS.items():
            value = values.get(name, default)
            if isinstance(value, list):
                if len(value) != n:
                    raise ValueError(f"{name}: {len(value)} values for {n} rows")
                self.columns[name].extend(value)
            else:
                self.columns[name].extend([value] * n)

    def arrays(self) -> dict[str, Any]:
        """The columns as arrays, for ``perfkit_core.events.finish_events``."""
        out: dict[str, Any] = {}
        for name, values in self.columns.items():
            out[name] = np.asarray(values, dtype=np.int64) if name in _INTS else values
        return out


def add_calls(
    rows: Rows, calls: Calls, *, category: str, tid: Any, pid: int | None = None, offset_ns: int = 0
) -> int:
    """Add the operator calls of a timestamp file (``tables.read_timestamps``) to ``rows``: one
    ``operator`` row each, named by its type with the full name kept, started ``offset_ns``
    later than the file says; ``tid`` a thread per call or one for all. Returns how many."""
    n = len(calls.names)
    where = {"tid": tid} if pid is None else {"tid": tid, "pid": pid}
    rows.extend(
        n,
        kind="operator",
        name=[op_type(x) for x in calls.names],
        full_name=list(calls.names),
        category=category,
        start_ns=[s + offset_ns for s in calls.start_ns] if offset_ns else list(calls.start_ns),
        dur_ns=list(calls.dur_ns),
        **where,
    )
    return n
