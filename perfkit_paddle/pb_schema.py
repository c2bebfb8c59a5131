"""The messages of Paddle's protobuf export (``*.paddle_trace.pb``) that perfkit reads.

A subset of ``paddle/fluid/platform/profiler/dump/nodetree.proto`` in Paddle's source, built at
run time with ``protobuf`` (no generated code, no ``.proto`` file shipped): the fields perfkit
uses, with Paddle's field numbers; fields not declared are skipped by the parser. Event types
are ``uint32`` here where Paddle declares an enum (the same bytes on the wire), so a type that
Paddle's ``.proto`` does not list still reads.
"""

from __future__ import annotations

import functools
from typing import Any

#: ``TracerEventType`` of Paddle 3.x, by number (``paddle.profiler.TracerEventType``).
EVENT_TYPES: tuple[str, ...] = (
    "Operator",
    "Dataloader",
    "ProfileStep",
    "CudaRuntime",
    "Kernel",
    "Memcpy",
    "Memset",
    "UserDefined",
    "OperatorInner",
    "Forward",
    "Backward",
    "Optimization",
    "Communication",
    "PythonOp",
    "PythonUserDefined",
    "DygraphKernelLaunch",
    "StaticKernelLaunch",
)
#: ``TracerMemEventType``, by number.
MEMORY_EVENT_TYPES: tuple[str, ...] = ("Allocate", "Free", "ReservedAllocate", "ReservedFree")

# Field kinds of FieldDescriptorProto.
_U64, _I64, _U32, _FLOAT, _STR, _MSG = 4, 3, 13, 2, 9, 11
_REQ, _OPT, _REP = 2, 1, 3

#: message -> (field, number, kind, label, message type). A subset of Paddle's nodetree.proto:
#: event types are uint32 here (an enum there), which reads the same bytes.
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "KernelInfo": [
        ("block_x", 1, _U32, _OPT, ""),
        ("block_y", 2, _U32, _OPT, ""),
        ("block_z", 3, _U32, _OPT, ""),
        ("grid_x", 4, _U32, _OPT, ""),
        ("grid_y", 5, _U32, _OPT, ""),
        ("grid_z", 6, _U32, _OPT, ""),
        ("dynamic_shared_memory", 7, _U32, _OPT, ""),
        ("static_shared_memory", 8, _U32, _OPT, ""),
        ("registers_per_thread", 9, _U32, _OPT, ""),
        ("occupancy", 17, _FLOAT, _OPT, ""),
    ],
    "BytesInfo": [("num_bytes", 1, _U64, _OPT, "")],
    "HostEvent": [
        ("name", 1, _STR, _REQ, ""),
        ("type", 2, _U32, _REQ, ""),
        ("start_ns", 3, _U64, _REQ, ""),
        ("end_ns", 4, _U64, _REQ, ""),
        ("process_id", 5, _U64, _REQ, ""),
        ("thread_id", 6, _U64, _REQ, ""),
    ],
    "MemEvent": [
        ("timestamp_ns", 1, _U64, _REQ, ""),
        ("type", 2, _U32, _REQ, ""),
        ("addr", 3, _U64, _OPT, ""),
        ("process_id", 4, _U64, _REQ, ""),
        ("thread_id", 5, _U64, _REQ, ""),
        ("increase_bytes", 6, _I64, _REQ, ""),
        ("place", 7, _STR, _REQ, ""),
        ("current_allocated", 8, _U64, _REQ, ""),
        ("current_reserved", 9, _U64, _REQ, ""),
    ],
    "Shape": [("size", 1, _U64, _REP, "")],
    "ShapeVector": [("shapes", 1, _MSG, _REP, "Shape")],
    "InputShapes": [("key", 1, _STR, _REP, ""), ("shape_vecs", 2, _MSG, _REP, "ShapeVector")],
    "DtypeVector": [("dtype", 1, _STR, _REP, "")],
    "Dtypes": [("key", 1, _STR, _REP, ""), ("dtype_vecs", 2, _MSG, _REP, "DtypeVector")],
    "OpSupplement": [
        ("input_shapes", 5, _MSG, _OPT, "InputShapes"),
        ("dtypes", 6, _MSG, _OPT, "Dtypes"),
        ("callstack", 7, _STR, _OPT, ""),
    ],
    "RuntimeEvent": [
        ("name", 1, _STR, _REQ, ""),
        ("start_ns", 2, _U64, _REQ, ""),
        ("end_ns", 3, _U64, _REQ, ""),
        ("process_id", 4, _U64, _REQ, ""),
        ("thread_id", 5, _U64, _REQ, ""),
        ("correlation_id", 6, _U32, _REQ, ""),
    ],
    "DeviceEvent": [
        ("name", 1, _STR, _REQ, ""),
        ("type", 2, _U32, _REQ, ""),
        ("start_ns", 3, _U64, _REQ, ""),
        ("end_ns", 4, _U64, _REQ, ""),
        ("device_id", 5, _U64, _REQ, ""),
        ("stream_id", 7, _U64, _REQ, ""),
        ("correlation_id", 8, _U32, _REQ, ""),
        ("kernel_info", 9, _MSG, _OPT, "KernelInfo"),
        ("memcpy_info", 10, _MSG, _OPT, "BytesInfo"),
        ("memset_info", 11, _MSG, _OPT, "BytesInfo"),
    ],
    "OpSupplementNode": [("op_supplement_event", 1, _MSG, _OPT, "OpSupplement")],
    "MemNode": [("mem_event", 1, _MSG, _REQ, "MemEvent")],
    # Paddle's writer leaves a device node empty when its type is not a kernel, memcpy or memset.
    "DeviceNode": [("device_event", 1, _MSG, _OPT, "DeviceEvent")],
    "RuntimeNode": [
        ("runtime_trace_event", 1, _MSG, _REQ, "RuntimeEvent"),
        ("device_nodes", 2, _MSG, _REP, "DeviceNode"),
    ],
    "HostNode": [
        ("id", 1, _I64, _REQ, ""),
        ("parentid", 2, _I64, _REQ, ""),
        ("host_trace_event", 3, _MSG, _REQ, "HostEvent"),
        ("runtime_nodes", 4, _MSG, _REP, "RuntimeNode"),
        ("mem_nodes", 5, _MSG, _REP, "MemNode"),
        ("op_supplement_nodes", 6, _MSG, _REP, "OpSupplementNode"),
    ],
    "ThreadTree": [("thread_id", 1, _U64, _REQ, ""), ("host_nodes", 2, _MSG, _REP, "HostNode")],
    "ExtraInfo": [("key", 1, _STR, _REQ, ""), ("value", 2, _STR, _REQ, "")],
    "DeviceProperty": [
        ("id", 1, _U32, _REQ, ""),
        ("name", 2, _STR, _REQ, ""),
        ("total_global_memory", 3, _U64, _REQ, ""),
        ("compute_major", 4, _U32, _REQ, ""),
        ("compute_minor", 5, _U32, _REQ, ""),
        ("sm_count", 13, _U32, _REQ, ""),
    ],
    "NodeTrees": [
        ("version", 1, _STR, _REQ, ""),
        ("span_indx", 2, _U32, _REQ, ""),
        ("thread_trees", 3, _MSG, _REP, "ThreadTree"),
        ("extra_info", 4, _MSG, _REP, "ExtraInfo"),
        ("device_property", 5, _MSG, _REP, "DeviceProperty"),
    ],
}
_PACKAGE = "perfkit_paddle.pb"


@functools.cache
def node_trees_class() -> Any:
    """The message class of the whole export, built once from ``_MESSAGES`` in a private pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(
        name="perfkit_paddle_nodetree.proto", package=_PACKAGE, syntax="proto2"
    )
    for message, fields in _MESSAGES.items():
        desc = proto.message_type.add(name=message)
        for name, number, kind, label, type_name in fields:
            f = desc.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                f.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.NodeTrees"))
