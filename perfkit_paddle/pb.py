"""Read Paddle's protobuf export (``*.paddle_trace.pb``, ``ProfilerResult.save(path, "pb")``)
without paddle.

The file is one ``NodeTreesProto`` message (``paddle/fluid/platform/profiler/dump/
nodetree.proto`` in Paddle's source): per thread, the host nodes in traversal order, each with
its index and its parent's index (-1 for the thread's placeholder root), the runtime calls it
made with the device work each launched, its memory events and the operator's shapes, dtypes
and call stack. ``read_pb`` rebuilds the same tree of nodes that ``prof.profiler_result``
holds in a live profile, so ``perfkit_paddle.result.run_from_result`` turns either into the
same run.

Paddle writes this export about four times as fast as its chrome-tracing JSON (the handler's
default, for that reason), but Paddle 3.x's own reader (``paddle.profiler.load_profiler_result``)
rejects files holding event types its ``.proto`` does not list (the dygraph and static
kernel-launch spans). Here the event types are read as plain numbers, named after Paddle's
``TracerEventType``; a number it does not list is kept as ``TracerEventType<N>`` (kind "other").
Only the fields perfkit uses are declared; the rest are skipped unread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_paddle.pb_schema import EVENT_TYPES, MEMORY_EVENT_TYPES, node_trees_class

if TYPE_CHECKING:
    from perfkit_core.events import Run


@dataclass(slots=True)
class HostNode:
    """A host node as ``prof.profiler_result.get_data()`` gives it (``HostPythonNode``); also
    used for runtime calls, which hold the device nodes they launched."""

    name: str
    type: str
    start_ns: int
    end_ns: int
    process_id: int
    thread_id: int
    correlation_id: int = 0
    # Empty tuples until something is added: most nodes hold nothing.
    children_node: list[HostNode] | tuple[()] = ()
    runtime_node: list[HostNode] | tuple[()] = ()
    device_node: list[DeviceNode] | tuple[()] = ()
    mem_node: list[MemNode] | tuple[()] = ()
    input_shapes: dict[str, list[list[int]]] | None = None
    dtypes: dict[str, list[str]] | None = None
    callstack: str = ""


@dataclass(slots=True)
class DeviceNode:
    """A device node (``DevicePythonNode``): kernel, memcpy or memset."""

    name: str
    type: str
    start_ns: int
    end_ns: int
    device_id: int
    stream_id: int
    correlation_id: int
    num_bytes: int = 0
    grid_x: int = 0
    grid_y: int = 0
    grid_z: int = 0
    block_x: int = 0
    block_y: int = 0
    block_z: int = 0
    registers_per_thread: int = 0
    shared_memory: int = 0
    occupancy: float = 0.0


@dataclass(slots=True)
class MemNode:
    """A memory event (``MemPythonNode``)."""

    type: str
    timestamp_ns: int
    process_id: int
    thread_id: int
    increase_bytes: int
    addr: int | None
    place: str
    current_allocated: int
    current_reserved: int


class PbResult:
    """What a ``.paddle_trace.pb`` holds, with the methods of Paddle's ``ProfilerResult`` that
    ``run_from_result`` calls."""

    def __init__(
        self,
        trees: dict[int, HostNode],
        extra_info: dict[str, str],
        version: str,
        span_index: int,
        devices: list[dict[str, Any]],
        dropped_device_nodes: int,
    ) -> None:
        self._trees = trees
        self._extra_info = extra_info
        self._version = version
        self._span_index = span_index
        #: The GPUs the export describes, as ``deviceProperties`` entries of the JSON export.
        self.devices = devices
        #: Device nodes Paddle's writer left empty (types other than kernel, memcpy, memset).
        self.dropped_device_nodes = dropped_device_nodes

    def get_data(self) -> dict[int, HostNode]:
        return self._trees

    def get_extra_info(self) -> dict[str, str]:
        return self._extra_info

    def get_version(self) -> str:
        return self._version

    def get_span_index(self) -> int:
        return self._span_index


class PbError(ValueError):
    """The file is not a whole Paddle profiler protobuf export; the message says what is wrong."""


def read_pb(path: str | os.PathLike[str]) -> PbResult:
    """Read the Paddle protobuf export at ``path``.

    Raises ``PbError`` (one line, without the path) when it cannot be decoded or its tree is
    inconsistent, ``OSError`` when it cannot be read, ``ImportError`` without ``protobuf``.
    """
    from google.protobuf.message import DecodeError

    data = Path(path).read_bytes()
    if not data:
        raise PbError("the file is empty")
    message = node_trees_class()()
    try:
        message.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise PbError(f"not a whole Paddle profiler protobuf export ({exc})") from None
    del data
    try:
        return _result(message)
    except UnicodeDecodeError as exc:
        raise PbError(f"text that is not UTF-8 ({exc.reason})") from None


def _name(names: tuple[str, ...], number: int, prefix: str) -> str:
    return names[number] if number < len(names) else f"{prefix}{number}"


def _result(message: Any) -> PbResult:
    trees: dict[int, HostNode] = {}
    dropped = 0
    for tree in message.thread_trees:
        nodes: list[HostNode] = []
        for position, proto in enumerate(tree.host_nodes):
            node = _host_node(proto)
            if proto.id != position:
                raise PbError(
                    f"thread {tree.thread_id}: host node {position} has id {proto.id} "
                    "(Paddle numbers them in order)"
                )
            parent = proto.parentid
            if position == 0:
                if parent != -1:
                    raise PbError(f"thread {tree.thread_id}: the first host node has a parent")
            elif not 0 <= parent < position:
                raise PbError(
                    f"thread {tree.thread_id}: host node {position} names parent {parent}, "
                    "not an earlier node"
                )
            else:
                siblings = nodes[parent].children_node
                if siblings:
                    siblings.append(node)
                else:
                    nodes[parent].children_node = [node]
            if proto.runtime_nodes:
                node.runtime_node = [_runtime_node(rt) for rt in proto.runtime_nodes]
                # Device nodes written empty were left out of the runtime nodes' lists.
                dropped += sum(len(rt.device_nodes) for rt in proto.runtime_nodes) - sum(
                    len(runtime.device_node) for runtime in node.runtime_node
                )
            if proto.mem_nodes:
                node.mem_node = [_mem_node(m.mem_event) for m in proto.mem_nodes]
            if proto.op_supplement_nodes:
                _supplement(node, proto.op_supplement_nodes[-1].op_supplement_event)
            nodes.append(node)
        if nodes:
            if tree.thread_id in trees:
                raise PbError(f"thread {tree.thread_id} has two trees")
            trees[tree.thread_id] = nodes[0]
    devices = [
        {
            "id": p.id,
            "name": _text(p.name, "a device's name"),
            "totalGlobalMem": p.total_global_memory,
            "computeMajor": p.compute_major,
            "computeMinor": p.compute_minor,
            "smCount": p.sm_count,
        }
        for p in message.device_property
    ]
    extra = {
        _text(e.key, "an extra_info key"): _text(e.value, "an extra_info value")
        for e in message.extra_info
    }
    version = _text(message.version, "the version")
    return PbResult(trees, extra, version, message.span_indx, devices, dropped)


def _text(value: Any, what: str) -> str:
    """``value``, a string field of the export: protobuf gives a field holding bytes that are
    not UTF-8 as ``bytes`` (Paddle writes UTF-8; a damaged file does not)."""
    if value.__class__ is not str:
        raise PbError(f"{what} is not UTF-8 text: {bytes(value)[:60]!r}")
    return str(value)


def _host_node(proto: Any) -> HostNode:
    e = proto.host_trace_event
    name = e.name
    return HostNode(
        name if name.__class__ is str else _text(name, "an event name"),
        _name(EVENT_TYPES, e.type, "TracerEventType"),
        e.start_ns,
        e.end_ns,
        e.process_id,
        e.thread_id,
    )


def _runtime_node(proto: Any) -> HostNode:
    e = proto.runtime_trace_event
    name = e.name
    # The export holds no type for runtime calls: Paddle's are all CudaRuntime.
    node = HostNode(
        name if name.__class__ is str else _text(name, "a runtime call's name"),
        "CudaRuntime",
        e.start_ns,
        e.end_ns,
        e.process_id,
        e.thread_id,
        correlation_id=e.correlation_id,
    )
    devices = [
        _device_node(d.device_event) for d in proto.device_nodes if d.HasField("device_event")
    ]
    if devices:
        node.device_node = devices
    return node


def _device_node(e: Any) -> DeviceNode:
    name = e.name
    node = DeviceNode(
        name if name.__class__ is str else _text(name, "a device event's name"),
        _name(EVENT_TYPES, e.type, "TracerEventType"),
        e.start_ns,
        e.end_ns,
        e.device_id,
        e.stream_id,
        e.correlation_id,
    )
    if e.HasField("kernel_info"):
        k = e.kernel_info
        node.grid_x, node.grid_y, node.grid_z = k.grid_x, k.grid_y, k.grid_z
        node.block_x, node.block_y, node.block_z = k.block_x, k.block_y, k.block_z
        node.registers_per_thread = k.registers_per_thread
        # As Paddle's ProfilerResult gives it: dynamic and static shared memory together.
        node.shared_memory = k.dynamic_shared_memory + k.static_shared_memory
        node.occupancy = k.occupancy
    elif e.HasField("memcpy_info"):
        node.num_bytes = e.memcpy_info.num_bytes
    elif e.HasField("memset_info"):
        node.num_bytes = e.memset_info.num_bytes
    return node


def _mem_node(e: Any) -> MemNode:
    return MemNode(
        _name(MEMORY_EVENT_TYPES, e.type, "TracerMemEventType"),
        e.timestamp_ns,
        e.process_id,
        e.thread_id,
        e.increase_bytes,
        e.addr if e.HasField("addr") else None,
        _text(e.place, "a memory event's place"),
        e.current_allocated,
        e.current_reserved,
    )


def _supplement(node: HostNode, e: Any) -> None:
    shapes, dtypes = e.input_shapes, e.dtypes
    if len(shapes.key) != len(shapes.shape_vecs) or len(dtypes.key) != len(dtypes.dtype_vecs):
        raise PbError(f"operator {node.name!r}: input names and their shapes or dtypes differ")
    node.input_shapes = {
        _text(key, "an input name"): [list(s.size) for s in vec.shapes]
        for key, vec in zip(shapes.key, shapes.shape_vecs, strict=True)
    }
    node.dtypes = {
        _text(key, "an input name"): [_text(t, "a dtype") for t in vec.dtype]
        for key, vec in zip(dtypes.key, dtypes.dtype_vecs, strict=True)
    }
    node.callstack = _text(e.callstack, "a call stack")


def export_is_whole(path: str | os.PathLike[str]) -> bool:
    """True when the protobuf export at ``path`` is not cut short: its top-level fields, read
    by their lengths alone (no decoding), end exactly at the end of the file, and it holds what
    Paddle writes first (the version, the span index) and at least one thread's tree. A file
    cut by a full disk or a killed writer ends inside a field; one cut exactly between two
    fields after the trees would pass, and loses only thread names and device properties."""
    seen: set[int] = set()
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            position = 0
            while position < size:
                fh.seek(position)
                head = fh.read(20)
                key, used = _varint(head, 0)
                number, wire = key >> 3, key & 7
                if wire == 2:
                    length, used = _varint(head, used)
                    position += used + length
                elif wire == 0:
                    _, used = _varint(head, used)
                    position += used
                else:
                    return False
                seen.add(number)
            return position == size and {1, 2, 3} <= seen
    except (OSError, ValueError):
        return False


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``data[at:]`` and the index after it; ValueError when it does not end."""
    value, shift = 0, 0
    while at < len(data):
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    raise ValueError("varint runs past the data")


def load_paddle_pb(path: str | os.PathLike[str]) -> Run:
    """Return the ``Run`` in a Paddle protobuf export (``*.paddle_trace.pb``); paddle is not
    needed. Raises ``TraceError`` naming the file when it cannot be read as one."""
    from perfkit_core.events import TraceError, devices_from_properties, note_skipped
    from perfkit_paddle.result import run_from_result

    path = Path(path)
    try:
        result = read_pb(path)
    except PbError as exc:
        raise TraceError(path, str(exc)) from None
    except ImportError:
        raise TraceError(
            path, "reading a .paddle_trace.pb needs protobuf: pip install protobuf"
        ) from None
    except OSError as exc:
        raise TraceError(path, f"cannot read it ({exc.strerror or exc})") from None
    try:
        run = run_from_result(result, source=str(path))
    except (ValueError, OverflowError) as exc:
        raise TraceError(path, str(exc)) from None
    run.meta["devices"] = devices_from_properties(result.devices, path)
    note_skipped(
        path,
        run.meta["accounting"],
        {
            "device events Paddle's writer left empty (not a kernel, memcpy or memset)": result.dropped_device_nodes
        },
    )
    return run
