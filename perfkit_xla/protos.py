"""The protobuf messages perfkit-xla reads: subsets of the published ``xplane.proto`` (the
XSpace the TensorFlow and JAX profilers write) and ``hlo.proto`` (the compiled modules a
profile holds), built at run time with ``protobuf`` (no generated code, no ``.proto`` file
shipped), so the parsing runs in protobuf's compiled (upb) backend.

Field numbers are those of the published files; fields not declared are skipped by the parser.
Where the published file declares ``string``, ``bytes`` is declared here (the same bytes on the
wire): names are decoded as UTF-8 by the reader, with a replacement character for bytes that are
not UTF-8, so a damaged name does not make the whole profile unreadable. Two declarations differ
from the published file on purpose:

* ``XLine.events`` is ``repeated bytes``: the events are read column-wise by
  ``perfkit_xla.wire`` (NumPy over the wire format), not as one message object each.
* The maps (``XPlane.event_metadata``, ``XPlane.stat_metadata``) are declared as the repeated
  key/value entries they are on the wire, so entries are read in file order (a key written twice
  keeps its last entry, as in a map).
"""

from __future__ import annotations

import functools
from typing import Any

# Field kinds of FieldDescriptorProto.
_DOUBLE, _INT64, _UINT64, _BYTES, _MSG = 1, 3, 4, 12, 11
_OPT, _REP = 1, 3
#: Fields of XStat that hold its value (one of them, the last written).
STAT_VALUE_FIELDS = (
    "double_value",
    "uint64_value",
    "int64_value",
    "str_value",
    "bytes_value",
    "ref_value",
)

#: message -> (field, number, kind, label, message type).
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    # xplane.proto (tsl/profiler/protobuf/xplane.proto)
    "XSpace": [
        ("planes", 1, _MSG, _REP, "XPlane"),
        ("errors", 2, _BYTES, _REP, ""),
        ("warnings", 3, _BYTES, _REP, ""),
        ("hostnames", 4, _BYTES, _REP, ""),
    ],
    "XPlane": [
        ("id", 1, _INT64, _OPT, ""),
        ("name", 2, _BYTES, _OPT, ""),
        ("lines", 3, _MSG, _REP, "XLine"),
        ("event_metadata", 4, _MSG, _REP, "EventMetadataEntry"),
        ("stat_metadata", 5, _MSG, _REP, "StatMetadataEntry"),
        ("stats", 6, _MSG, _REP, "XStat"),
    ],
    "EventMetadataEntry": [
        ("key", 1, _INT64, _OPT, ""),
        ("value", 2, _MSG, _OPT, "XEventMetadata"),
    ],
    "StatMetadataEntry": [
        ("key", 1, _INT64, _OPT, ""),
        ("value", 2, _MSG, _OPT, "XStatMetadata"),
    ],
    "XLine": [
        ("id", 1, _INT64, _OPT, ""),
        ("name", 2, _BYTES, _OPT, ""),
        ("timestamp_ns", 3, _INT64, _OPT, ""),
        ("events", 4, _BYTES, _REP, ""),
        ("duration_ps", 9, _INT64, _OPT, ""),
        ("display_id", 10, _INT64, _OPT, ""),
        ("display_name", 11, _BYTES, _OPT, ""),
    ],
    "XEventMetadata": [
        ("id", 1, _INT64, _OPT, ""),
        ("name", 2, _BYTES, _OPT, ""),
        ("display_name", 4, _BYTES, _OPT, ""),
        ("stats", 5, _MSG, _REP, "XStat"),
    ],
    "XStatMetadata": [
        ("id", 1, _INT64, _OPT, ""),
        ("name", 2, _BYTES, _OPT, ""),
        ("description", 3, _BYTES, _OPT, ""),
    ],
    "XStat": [
        ("metadata_id", 1, _UINT64, _OPT, ""),
        ("double_value", 2, _DOUBLE, _OPT, ""),
        ("uint64_value", 3, _UINT64, _OPT, ""),
        ("int64_value", 4, _INT64, _OPT, ""),
        ("str_value", 5, _BYTES, _OPT, ""),
        ("bytes_value", 6, _BYTES, _OPT, ""),
        ("ref_value", 7, _UINT64, _OPT, ""),
    ],
    # hlo.proto (xla/service/hlo.proto) and xla_data.proto: what perfkit_xla.hlo reads.
    "HloProto": [("hlo_module", 1, _MSG, _OPT, "HloModuleProto")],
    "HloModuleProto": [
        ("name", 1, _BYTES, _OPT, ""),
        ("computations", 3, _MSG, _REP, "HloComputationProto"),
    ],
    "HloComputationProto": [("instructions", 2, _MSG, _REP, "HloInstructionProto")],
    "HloInstructionProto": [
        ("name", 1, _BYTES, _OPT, ""),
        ("opcode", 2, _BYTES, _OPT, ""),
        ("shape", 3, _MSG, _OPT, "ShapeProto"),
        ("metadata", 7, _MSG, _OPT, "OpMetadata"),
        ("id", 35, _INT64, _OPT, ""),
        ("operand_ids", 36, _INT64, _REP, ""),
    ],
    # element_type is an enum (PrimitiveType) there; a number here, so a type that file does
    # not list still reads.
    "ShapeProto": [
        ("element_type", 2, _UINT64, _OPT, ""),
        ("dimensions", 3, _INT64, _REP, ""),
    ],
    "OpMetadata": [("op_type", 1, _BYTES, _OPT, ""), ("op_name", 2, _BYTES, _OPT, "")],
}
_PACKAGE = "perfkit_xla.pb"


@functools.cache
def _pool() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool

    proto = descriptor_pb2.FileDescriptorProto(
        name="perfkit_xla_xplane.proto", package=_PACKAGE, syntax="proto2"
    )
    for message, fields in _MESSAGES.items():
        desc = proto.message_type.add(name=message)
        if message == "XStat":
            desc.oneof_decl.add(name="value")
        for name, number, kind, label, type_name in fields:
            f = desc.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                f.type_name = f".{_PACKAGE}.{type_name}"
            if name in STAT_VALUE_FIELDS:
                f.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


def message_class(name: str) -> Any:
    """The message class ``name`` (``"XSpace"``, ``"HloProto"``, ...), built once from
    ``_MESSAGES`` in a private descriptor pool."""
    return _message_class(name)


@functools.cache
def _message_class(name: str) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{name}"))
