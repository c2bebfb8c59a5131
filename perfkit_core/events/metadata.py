"""The shape of ``Run.meta`` as views and reports read it, checked when a saved run is read.

A ``meta.json`` edited by hand or written by another tool may hold values of the wrong type
(``"devices": 5``, a device index that is an object); reading such a run must fail at once with
one line naming the key, not later inside a report. Only the keys perfkit reads are checked;
other keys are kept as they are.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import msgspec

from perfkit_core.errors import TraceError
from perfkit_core.events.checks import INT32_MAX, INT64_MAX, INT64_MIN, TIME_LIMIT_NS

_Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
_Rank = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
_Time = Annotated[int, msgspec.Meta(ge=-TIME_LIMIT_NS, le=TIME_LIMIT_NS)]
_Number = int | float


class _Device(msgspec.Struct):
    type: str | None = None
    index: _Int64 | None = None
    name: str | None = None
    total_memory_bytes: _Number | None = None
    compute_capability: str | None = None
    sm_count: _Int64 | None = None


class _Extra(msgspec.Struct):
    cpu_utilization: dict[str, _Number] = {}


class _RankFacts(msgspec.Struct):
    host: str | None = None
    devices: list[_Device] = []
    source: str | None = None
    span_ns: tuple[_Time, _Time] | None = None


class _Meta(msgspec.Struct):
    schema_version: str | int | float = "0"
    framework: str | None = None
    framework_version: str | None = None
    host: str | None = None
    devices: list[_Device] = []
    rank: _Rank = 0
    ranks: list[_Rank] = []
    rank_recorded: bool = True
    world_size: Annotated[int, msgspec.Meta(ge=1, le=INT32_MAX)] = 1
    steps: list[_Int64] = []
    source: str | list[str | None] | None = None
    span_ns: tuple[_Time, _Time] = (0, 0)
    accounting: dict[str, Any] | None = None
    threads: dict[str, str] = {}
    compute_threads: list[_Int64] = []
    per_rank: dict[str, _RankFacts] = {}
    extra: _Extra | None = None
    run_id: str | None = None
    events: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)] | None = None


def check_meta(path: str | os.PathLike[str], meta: Any) -> None:
    """Raise ``TraceError`` naming ``path`` and the first key whose value has the wrong type or
    is out of range (``$.devices[0].index``); return None when ``meta`` has the shape
    ``Run.meta`` documents."""
    if not isinstance(meta, dict):
        raise TraceError(path, "run metadata is not a JSON object")
    try:
        msgspec.convert(meta, _Meta)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"bad run metadata: {exc}") from None
