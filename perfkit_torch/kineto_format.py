"""The Kineto chrome-trace format: the typed structs msgspec decodes a trace into (only the
fields perfkit uses), the native categories and how each maps to a perfkit kind.

Kineto writes one JSON object with ``traceEvents`` (complete ``X`` events, instants, flows
``s``/``t``/``f`` and metadata ``M``), ``deviceProperties``, ``distributedInfo`` and
``baseTimeNanoseconds``. Works without torch installed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any

import msgspec

from perfkit_core.events import TraceError, decode_error_reason

_NONE = msgspec.Raw(b"")
#: Integers the event table stores as int64: a larger one fails decoding with its JSON path.
I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
#: An id Kineto writers may give as a number or as text: ROCm's writer puts ``"stream": "0x0"``
#: (hex) where CUDA's puts ``0``; ``int_id``/``parse_int`` turn either into an int.
IntOrText = I64 | str
#: What ``ts`` holds when an event has none (NaN never comes out of JSON).
NO_TS = math.nan


class _Args(msgspec.Struct, gc=False, frozen=True):
    # The fields follow the order Kineto writes the keys in (host ops, then kernels and
    # copies, then memory events): msgspec looks a key up from the field after the one it
    # found last, so a key in field order is found at once and one out of order costs a scan
    # of the fields (the benchmark trace's pieces decode ~8% faster than in the order before).
    external_id: IntOrText = msgspec.field(name="External id", default=-1)
    sequence: IntOrText = msgspec.field(name="Sequence number", default=-1)
    input_values: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_NONE)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_NONE)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NONE)
    call_stack: str = msgspec.field(name="Call stack", default="")
    # NaN when not recorded: a float default lets the column be read in one pass.
    flops: float | None = math.nan
    device: IntOrText = -1
    stream: IntOrText = -1
    correlation: IntOrText = -1
    nbytes: float | None = msgspec.field(name="bytes", default=None)
    registers: float | None = msgspec.field(name="registers per thread", default=None)
    shared_memory: float | None = msgspec.field(name="shared memory", default=None)
    grid: msgspec.Raw = _NONE
    block: msgspec.Raw = _NONE
    occupancy: float | None = msgspec.field(name="est. achieved occupancy %", default=None)
    external_id_old: IntOrText = msgspec.field(name="external id", default=-1)
    total_reserved: float | None = msgspec.field(name="Total Reserved", default=None)
    total_allocated: float | None = msgspec.field(name="Total Allocated", default=None)
    mem_bytes: float | None = msgspec.field(name="Bytes", default=None)
    mem_device_id: IntOrText = msgspec.field(name="Device Id", default=-1)
    mem_device_type: IntOrText = msgspec.field(name="Device Type", default=-1)
    # Any integer: an address is 64 bits, and may not fit int64 (``address_column`` maps it).
    mem_addr: int | str | None = msgspec.field(name="Addr", default=None)
    meta_name: str = msgspec.field(name="name", default="")


_NO_ARGS = _Args()


class Event(msgspec.Struct, gc=False, frozen=True):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: I64 | str | None = None
    tid: I64 | str | None = None
    ts: float = NO_TS
    dur: float = 0.0
    id: I64 | str | None = None
    args: _Args = _NO_ARGS


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None
    schemaVersion: int | str | None = None
    deviceProperties: list[dict[str, Any]] = []
    distributedInfo: dict[str, Any] = {}
    baseTimeNanoseconds: I64 = 0
    host_name: str | None = None
    record_shapes: int | None = None
    profile_memory: int | None = None
    with_stack: int | None = None
    with_flops: int | None = None
    with_modules: int | None = None


_DECODER = msgspec.json.Decoder(_Trace)
_LIST_DECODER = msgspec.json.Decoder(list[Event])

#: Kineto categories (lowercased) of events that run on a device, and their kind.
DEVICE_CATEGORIES: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "user",
    "cuda_sync": "other",
    # MTIA's on-device command processor: kernels, DMA copies and queue events (name rules
    # below tell them apart).
    "mtia_ccp_events": "kernel",
}
#: The ``device_type`` of device events of a category, where it is not ``gpu``.
DEVICE_TYPE_OF_CATEGORY: dict[str, str] = {"mtia_ccp_events": "mtia"}
#: MTIA command-processor events that are copies (``dma_request``) and that only order the
#: queues (``event_record``, ``event_wait``: like ``cuda_sync``, they keep no engine busy).
MTIA_COPY_PREFIXES = ("dma",)
MTIA_QUEUE_EVENTS = ("event_record", "event_wait")
#: Device kernels whose name holds one of these (any case) are communication: NCCL, ROCm's
#: RCCL (whose kernels keep NCCL's names) and HCCL (MTIA, Gaudi).
COMM_KERNEL_WORDS = ("nccl", "rccl", "hccl")
#: Kineto categories (lowercased) of host events, and their kind before name rules apply.
HOST_CATEGORIES: dict[str, str] = {
    "cpu_op": "operator",
    "operator": "operator",
    "user_annotation": "user",
    "python_function": "python",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
    "xpu_runtime": "runtime",
    "xpu_driver": "runtime",
    "privateuse1_runtime": "runtime",
    "privateuse1_driver": "runtime",
    "mtia_runtime": "runtime",
    "glow_runtime": "runtime",
    "hpu_op": "runtime",
    "collective_comm": "communication",
}
#: Flow categories: launch-to-kernel links (already carried by ``correlation``) and
#: forward-to-backward links (turned into the ``forward_op`` column).
LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async", "async_cpu_to_gpu"})
FWDBWD_FLOW_CATEGORY = "fwdbwd"
FLOW_PHASES = frozenset({"s", "t", "f"})
#: c10::DeviceType values of memory events.
MEMORY_DEVICE_TYPES = {
    0: "cpu",
    1: "gpu",
    12: "xpu",
    13: "mps",
    15: "hpu",
    19: "mtia",
    20: "privateuse1",
}

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: Names of the instants the profiler writes about itself (with an empty category).
PROFILER_MARKERS = ("Iteration Start: ", "Record Window End")
_COMM_PREFIXES = ("c10d::", "nccl:", "gloo:", "hccl:", "record_param_comms")
#: Spans of fetching a batch: torch's DataLoader (``enumerate(DataLoader)#...``, DataLoader2
#: too) and torchdata's DataPipes iterated directly (``enumerate(DataPipe)#...``).
DATALOADER_PREFIXES = ("enumerate(DataLoader)#", "enumerate(DataLoader2)#", "enumerate(DataPipe)#")
#: Module spans perfkit's hooks record (``perfkit_torch.modules``; Kineto files them as
#: ``cpu_op``), named as torch's Python tracer names module calls.
MODULE_SPAN_PREFIX = "nn.Module: "


def classify(category: str, name: str) -> str:
    """Return the perfkit kind of a Kineto event from its category and name."""
    cat = category.lower()
    if name == "[memory]":
        return "memory"
    if cat == "trace" or name.startswith(PROFILER_MARKERS):
        return "profiler"
    if cat in DEVICE_CATEGORIES:
        kind = DEVICE_CATEGORIES[cat]
        if cat == "mtia_ccp_events":
            if name.startswith(MTIA_COPY_PREFIXES):
                return "memcpy"
            if name in MTIA_QUEUE_EVENTS:
                return "other"
        if kind == "kernel" and any(w in name.lower() for w in COMM_KERNEL_WORDS):
            return "communication"
        return kind
    kind = HOST_CATEGORIES.get(cat, "other")
    if kind in ("operator", "user"):
        if STEP_RE.match(name):
            return "step"
        if name.startswith(MODULE_SPAN_PREFIX):
            return "user"
        if name.startswith(DATALOADER_PREFIXES):
            return "dataloader"
        if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
            return "optimizer"
        if name.startswith("autograd::engine::evaluate_function: "):
            return "backward"
        if name.startswith(_COMM_PREFIXES):
            return "communication"
    return kind


def decode(path: Path, data: bytes) -> _Trace:
    """Decode Kineto JSON ``data`` read from ``path``; TraceError with the reason when it is not one.

    A bare JSON list of events (the other form of the chrome trace format, which torch's legacy
    autograd profiler also writes) is read as a trace holding only those events.
    """
    if not data or data.isspace():
        raise TraceError(path, "the file is empty")
    bare_list = data.lstrip()[:1] == b"["
    try:
        trace = (
            _Trace(traceEvents=_LIST_DECODER.decode(data)) if bare_list else _DECODER.decode(data)
        )
    except msgspec.ValidationError as exc:
        raise TraceError(path, decode_error_reason(exc, data, "not a Kineto trace")) from None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise TraceError(path, decode_error_reason(exc, data, "malformed JSON")) from None
    if trace.traceEvents is None:
        raise TraceError(path, "a JSON object without 'traceEvents': not a chrome trace")
    if not trace.traceEvents:
        raise TraceError(path, "the trace holds no events")
    return trace


_HEX_RE = re.compile(r"^-?0[xX][0-9a-fA-F]+$")
_DEC_RE = re.compile(r"^-?[0-9]+$")


def parse_int(text: str) -> int | None:
    """The integer written as ``text``: decimal (``"12"``) or hex (``"0x1f"``), with an optional
    minus sign and blanks around it; None when ``text`` is neither."""
    text = text.strip()
    if _DEC_RE.match(text):
        return int(text)
    if _HEX_RE.match(text):
        return int(text, 16)
    return None


def int_id(value: int | str | None, *, device: bool = False) -> int:
    """An id as an int: ints as they are, decimal or hex text parsed; -1 for None or other text
    (with ``device``: the number a name such as ``"stream 7"`` ends with)."""
    if type(value) is int:
        return value
    if value is None:
        return -1
    text = str(value).strip()
    parsed = parse_int(text)
    if parsed is not None:
        return parsed
    if device:
        m = re.search(r"(\d+)\s*$", text)
        if m:
            return int(m.group(1))
    return -1
