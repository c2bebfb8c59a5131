"""Columns collected from a Paddle profile, whichever way it was read (the result tree, the
protobuf export, the chrome-tracing JSON), turned into perfkit's event table."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfkit_paddle.kinds import classify, step_number


class Columns:
    """Lists filled by a reader, one entry per event."""

    def __init__(self) -> None:
        self.type: list[str] = []
        self.name: list[str] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.pid: list[int] = []
        self.tid: list[int] = []
        self.stream: list[int] = []
        self.device_index: list[int] = []
        self.device_type: list[str] = []
        self.correlation: list[int] = []
        self.external_id: list[int] = []
        self.shapes: list[str] = []
        self.dtypes: list[str] = []
        self.stack: list[str] = []
        self.nbytes: list[float] = []
        self.allocated: list[float] = []
        self.reserved: list[float] = []
        #: Memory events only: the row of each event that recorded an address, and the address
        #: as Paddle wrote it (an int, or decimal text in the JSON export).
        self.address_rows: list[int] = []
        self.address: list[int | str] = []
        self.grid: list[str] = []
        self.block: list[str] = []
        self.registers: list[float] = []
        self.shared_memory: list[float] = []
        self.occupancy: list[float] = []

    def __len__(self) -> int:
        return len(self.name)


def compact_json(value: Any) -> str:
    """Recorded shapes or dtypes as compact JSON text (``{"X":[[16,32]]}``); "" when empty.

    Both Paddle paths (the result tree and the JSON export) produce the same text, so grouping
    by input shape agrees whichever way a run was read.
    """
    if not value:
        return ""
    import json

    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)


def columns_to_events(cols: Columns | Any, *, rank: int = 0) -> dict[str, Any]:
    """Turn collected columns into event-table columns (kinds, categoricals, arrays)."""
    import pandas as pd

    n = len(cols.name)
    type_codes, type_uniques = pd.factorize(np.asarray(cols.type, dtype=object))
    name_codes, name_uniques = pd.factorize(np.asarray(cols.name, dtype=object))
    n_names = max(len(name_uniques), 1)
    pair_uniques, pair_inverse = np.unique(
        type_codes.astype(np.int64) * n_names + name_codes, return_inverse=True
    )
    pair_kinds = [
        classify(str(type_uniques[p // n_names]), str(name_uniques[p % n_names]))
        for p in pair_uniques.tolist()
    ]
    kinds = pd.Categorical.from_codes(*_dedupe(pair_inverse, pair_kinds))
    steps = np.full(n, -1, dtype=np.int64)
    is_step = np.asarray(kinds == "step")
    if is_step.any():
        numbers = {i: step_number(str(nm)) for i, nm in enumerate(name_uniques)}
        steps[is_step] = [numbers[c] for c in name_codes[is_step].tolist()]
    start = np.asarray(cols.start, dtype=np.int64)
    end = np.asarray(cols.end, dtype=np.int64)
    _check_times(start, end, cols.name)
    return {
        "rank": np.full(n, rank, dtype=np.int32),
        "kind": kinds,
        "name": pd.Categorical.from_codes(name_codes, categories=[str(x) for x in name_uniques]),
        "category": pd.Categorical.from_codes(
            type_codes, categories=[str(x) for x in type_uniques]
        ),
        "framework": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=["paddle"]),
        "start_ns": start,
        "dur_ns": np.maximum(end - start, 0),
        "device_type": pd.Categorical(cols.device_type),
        "device_index": np.asarray(cols.device_index, dtype=np.int32),
        "pid": np.asarray(cols.pid, dtype=np.int64),
        "tid": np.asarray(cols.tid, dtype=np.int64),
        "stream": np.asarray(cols.stream, dtype=np.int64),
        "step": steps,
        "correlation": np.asarray(cols.correlation, dtype=np.int64),
        "external_id": np.asarray(cols.external_id, dtype=np.int64)
        if len(getattr(cols, "external_id", ())) == n
        else np.full(n, -1, dtype=np.int64),
        "input_shapes": pd.Categorical(cols.shapes),
        "input_dtypes": pd.Categorical(cols.dtypes),
        "stack": pd.Categorical(cols.stack),
        "bytes": np.asarray(cols.nbytes, dtype=np.float64),
        "allocated_bytes": np.asarray(cols.allocated, dtype=np.float64),
        "reserved_bytes": np.asarray(cols.reserved, dtype=np.float64),
        "address": _addresses(cols, n),
        "grid": pd.Categorical(cols.grid),
        "block": pd.Categorical(cols.block),
        "registers": np.asarray(cols.registers, dtype=np.float64),
        "shared_memory": np.asarray(cols.shared_memory, dtype=np.float64),
        "occupancy_pct": np.asarray(cols.occupancy, dtype=np.float64),
    }


def _addresses(cols: Columns | Any, n: int) -> np.ndarray:
    """The ``address`` column: -1 except at the memory events that recorded one."""
    from perfkit_core.events import address_column

    out = np.full(n, -1, dtype=np.int64)
    rows = getattr(cols, "address_rows", None)
    if rows:
        out[np.asarray(rows, dtype=np.int64)] = address_column(cols.address)
    return out


def _check_times(start: np.ndarray, end: np.ndarray, names: list[str]) -> None:
    """Raise ``ValueError`` naming the first event whose start or end is outside
    0..``TIME_LIMIT_NS`` (2**62 ns, 146 years): times are kept as int64, and sums and
    differences of larger ones would wrap."""
    from perfkit_core.events import TIME_LIMIT_NS

    inside = (start >= 0) & (start <= TIME_LIMIT_NS) & (end >= 0) & (end <= TIME_LIMIT_NS)
    if not inside.all():
        i = int(np.argmin(inside))
        raise ValueError(
            f"event {i} ({str(names[i])[:80]!r}) runs from {start[i]} to {end[i]} ns, outside "
            f"0..{TIME_LIMIT_NS} ns"
        )


def _dedupe(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    uniq: dict[str, int] = {}
    remap = np.array([uniq.setdefault(label, len(uniq)) for label in labels], dtype=np.int64)
    return (remap[codes] if len(codes) else codes.astype(np.int64)), list(uniq)


def extra_info_meta(extra_info: dict[str, str]) -> dict[str, Any]:
    """Split Paddle's ``get_extra_info()`` into thread names and CPU utilization (fractions).

    Raises ``ValueError`` for an entry that is not text (a damaged export's bytes)."""
    threads: dict[str, str] = {}
    utilization: dict[str, float] = {}
    for key, value in (extra_info or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"extra info {key!r}: {value!r} is not text (UTF-8)")
        if key.isdigit():
            threads[key] = value
        elif "Utilization" in key:
            try:
                utilization[key.lower().replace(" ", "_")] = float(value)
            except ValueError:
                continue
    return {"threads": threads, "cpu_utilization": utilization}
