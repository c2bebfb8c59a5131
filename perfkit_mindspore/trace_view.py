"""MindSpore's timeline, ``ASCEND_PROFILER_OUTPUT/trace_view.json``: a chrome trace (a JSON
array of events) whose ``ts`` and ``dur`` are strings in microseconds with three decimals.

Each process of the trace is one layer of MindSpore's timeline, named by its ``process_name``
metadata event; what a layer holds decides the kind of its events:

- ``CPU OP`` (CPU runs): one event per operator call, named by its full name (or its type, in
  PyNative mode), ``args.type`` ``HostCpuOps``;
- ``MindSpore`` (Ascend): the framework's host events: operator launches, ``ProfilerStep#N``;
- ``CANN``: the runtime's calls on the host; ``Ascend Hardware``: the tasks each device stream
  ran; ``HCCL``: communication on the device;
- ``Scope Layer``, ``Overlap Analysis`` and the hardware counters: derived by MindSpore's
  analysis from the events above (kept as ``profiler`` rows, not counted as work);
- ``python`` / ``python3``: mstx ranges (user spans).

Flow events (``s``/``f``) of category ``async_npu`` tie a framework operator to the tasks it
launched on the device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from perfkit_core import TraceError
from perfkit_core.events import (
    TIME_LIMIT_NS,
    check_int_range,
    decode_error_reason,
    read_trace_bytes,
)

#: Process (layer) name -> (perfkit kind, on the device). Unknown layers are ``other``.
LAYER_KINDS: dict[str, tuple[str, bool]] = {
    "CPU OP": ("operator", False),
    "MindSpore": ("operator", False),
    "CANN": ("runtime", False),
    "Ascend Hardware": ("kernel", True),
    "HCCL": ("communication", True),
    "Scope Layer": ("profiler", False),
    "Overlap Analysis": ("profiler", False),
    "python": ("user", False),
    "python3": ("user", False),
}
#: Flow category tying a framework operator to the device tasks it launched.
LAUNCH_FLOW = "async_npu"
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: A MindSpore operator name: a type (``MatMul``) or a scoped full name ending in one.
OP_NAME_RE = re.compile(r"^(?:[^\s/]+/)*[A-Z][A-Za-z0-9_]*(?:-op\d+)?$")


class TraceEvent(msgspec.Struct):
    """One event of the array, as far as perfkit reads it."""

    ph: str = ""
    name: str = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    cat: Any = None
    id: Any = None
    args: dict[str, Any] | None = None


@dataclass
class Timeline:
    """The events of a trace_view.json as columns, in file order (complete events only)."""

    kind: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    layer: list[str] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    dur_ns: list[int] = field(default_factory=list)
    pid: list[int] = field(default_factory=list)
    tid: list[int] = field(default_factory=list)
    device: list[bool] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    #: (start row, end row) of each launch flow whose two ends are complete events.
    launches: list[tuple[int, int]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    metadata: int = 0


_US_RE = re.compile(r"^(-?)(\d+)(?:\.(\d*))?$")


def us_text_to_ns(value: Any) -> int | None:
    """A ``ts``/``dur`` in microseconds (a string such as ``"1795457656151433.779"``, or a number)
    as whole nanoseconds, exactly for a string; None when it is not a number."""
    if isinstance(value, str):
        m = _US_RE.match(value.strip())
        if m is None:
            try:
                value = float(value)
            except ValueError:
                return None
        else:
            sign, whole, frac = m.groups()
            frac = (frac or "") + "000"
            ns = int(whole) * 1000 + int(frac[:3]) + (1 if frac[3:4] >= "5" else 0)
            return -ns if sign else ns
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return round(value * 1000)


def _int_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _hashable(value: Any) -> Any:
    """``value`` as a key: a pid or tid that is a list or an object (a malformed trace) becomes
    its text."""
    return value if isinstance(value, (int, float, str, type(None))) else repr(value)


def read_trace_view(path: Path) -> Timeline:
    """The complete events of MindSpore's ``trace_view.json`` at ``path`` as a ``Timeline``.

    Raises ``TraceError`` naming the file for a file that is not such a trace (truncated,
    malformed, not an array of events), or an event whose time is not a number or is out of
    range. Counter, instant and other events perfkit does not show are counted as skipped.
    """
    data = read_trace_bytes(path)
    try:
        events = msgspec.json.decode(data, type=list[TraceEvent])
    except (
        msgspec.ValidationError,
        msgspec.DecodeError,
        UnicodeDecodeError,
        RecursionError,
    ) as exc:
        raise TraceError(
            path, decode_error_reason(exc, data, "not MindSpore's trace_view.json")
        ) from None
    layers: dict[Any, str] = {}
    for e in events:
        e.pid, e.tid = _hashable(e.pid), _hashable(e.tid)
        if e.ph == "M" and e.name == "process_name" and isinstance(e.args, dict):
            layers[e.pid] = str(e.args.get("name", ""))
    out = Timeline()
    flow_ends: dict[tuple[Any, str], dict[str, tuple[Any, Any, int]]] = {}
    where: dict[tuple[Any, Any, int], int] = {}
    for i, e in enumerate(events):
        if e.ph == "M":
            out.metadata += 1
            continue
        if e.ph in ("s", "f"):
            if e.cat == LAUNCH_FLOW and e.id is not None:
                ts = us_text_to_ns(e.ts)
                if ts is not None:
                    flow_ends.setdefault((_hashable(e.id), e.name), {})[e.ph] = (e.pid, e.tid, ts)
            continue
        if e.ph != "X":
            reason = {"C": "counter events", "i": "instant events", "I": "instant events"}.get(
                e.ph, f"events of phase {e.ph!r}"
            )
            out.skipped[reason] = out.skipped.get(reason, 0) + 1
            continue
        start = us_text_to_ns(e.ts)
        dur = us_text_to_ns(e.dur if e.dur is not None else 0)
        if start is None or dur is None:
            bad = "ts" if start is None else "dur"
            raise TraceError(
                path, f"event {i} ({e.name!r}): {bad} {getattr(e, bad)!r} is not a number"
            )
        if abs(start) > TIME_LIMIT_NS or abs(dur) > TIME_LIMIT_NS:
            raise TraceError(path, f"event {i} ({e.name!r}): ts or dur is out of range")
        layer = layers.get(e.pid, "")
        kind, on_device = LAYER_KINDS.get(layer, ("other", False))
        step = -1
        if layer == "MindSpore":
            m = STEP_RE.match(e.name)
            if m:
                kind, step = "step", int(m.group(1))
            elif not OP_NAME_RE.match(e.name):
                kind = "other"
        pid = _int_id(e.pid)
        tid = _int_id(e.tid)
        for what, value in (("pid", pid), ("tid", tid)):
            if value is not None:
                check_int_range(path, value, f"event {i} ({e.name!r}): {what}")
        args = e.args if isinstance(e.args, dict) else {}
        where[(e.pid, e.tid, start)] = len(out.name)
        out.kind.append(kind)
        out.name.append(e.name)
        out.category.append(str(args.get("type") or e.cat or layer or ""))
        out.layer.append(layer)
        out.start_ns.append(start)
        out.dur_ns.append(max(dur, 0))
        out.pid.append(pid if pid is not None else -1)
        out.tid.append(tid if tid is not None else -1)
        out.device.append(on_device)
        out.step.append(step)
    for ends in flow_ends.values():
        s, f = ends.get("s"), ends.get("f")
        if s is None or f is None:
            continue
        a, b = where.get(s), where.get(f)
        if a is not None and b is not None:
            out.launches.append((a, b))
    return out
