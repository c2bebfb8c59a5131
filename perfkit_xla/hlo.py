"""What the HLO protos of a profile's metadata plane say about each XLA op: its opcode, its
input shapes and dtypes, and the framework operation it came from.

JAX and TensorFlow store each compiled module's ``HloProto`` as the ``Hlo Proto`` stat of an
event metadata of the ``/host:metadata`` plane, named ``<module>(<program id>)``. Only the few
fields read here are declared (``perfkit_xla.protos``; numbers of the published ``hlo.proto``)
and protobuf's compiled parser decodes them::

    HloProto              hlo_module=1 (HloModuleProto)
    HloModuleProto        name=1, computations=3 (HloComputationProto)
    HloComputationProto   instructions=2 (HloInstructionProto)
    HloInstructionProto   name=1, opcode=2, shape=3 (ShapeProto), metadata=7 (OpMetadata),
                          id=35, operand_ids=36
    ShapeProto            element_type=2 (PrimitiveType), dimensions=3
    OpMetadata            op_type=1, op_name=2
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfkit_xla.xspace import XSpace

#: PrimitiveType numbers of xla_data.proto -> dtype names.
DTYPES: dict[int, str] = {
    1: "bool",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "uint8",
    7: "uint16",
    8: "uint32",
    9: "uint64",
    10: "float16",
    11: "float32",
    12: "float64",
    15: "complex64",
    16: "bfloat16",
    18: "complex128",
    19: "float8_e5m2",
    20: "float8_e4m3fn",
    21: "int4",
    22: "uint4",
}
_TUPLE = 13


@dataclass(frozen=True)
class HloOp:
    """One instruction of a compiled module, as the profile's HLO proto records it."""

    opcode: str
    #: The framework operation it came from (``jit(step)/transpose(jvp())/dot_general``).
    op_name: str
    #: JSON text of the input shapes (``[[32, 64], [64, 64]]``); "" when unknown.
    input_shapes: str
    #: JSON text of the input dtypes (``["float32", "float32"]``); "" when unknown.
    input_dtypes: str


def _shape(shape: Any) -> tuple[list[int], str] | None:
    """(dimensions, dtype) of an array shape (a ``ShapeProto``); None for tuples, tokens and
    unknown types."""
    element = shape.element_type
    if element == _TUPLE or element not in DTYPES:
        return None
    return list(shape.dimensions), DTYPES[element]


class ModuleOps(Mapping[str, HloOp]):
    """Instruction name -> ``HloOp`` for every instruction of one compiled module. The module's
    proto is parsed when an instruction is first asked for, and an instruction's ``HloOp`` made
    then (a profile's events name a few instructions of a few modules); a proto that does not
    parse reads as a module without instructions (its ops then have no shapes)."""

    def __init__(self, proto: bytes) -> None:
        """``proto``: a serialized ``HloProto``."""
        self._proto: bytes | None = proto
        # The last instruction of a name (or an id) is the one that counts, as in a dict.
        self._by_name: dict[str, Any] = {}
        self._by_id: dict[int, Any] = {}
        self._made: dict[str, HloOp] = {}

    def _parse(self) -> None:
        if self._proto is None:
            return
        from google.protobuf.message import DecodeError

        from perfkit_xla.protos import message_class

        message = message_class("HloProto")()
        try:
            message.ParseFromString(self._proto)
        except DecodeError:
            message = message_class("HloProto")()
        self._proto = None
        for computation in message.hlo_module.computations:
            for inst in computation.instructions:
                self._by_id[inst.id if inst.HasField("id") else -1] = inst
                self._by_name[_text(inst.name)] = inst

    def __getitem__(self, name: str) -> HloOp:
        op = self._made.get(name)
        if op is None:
            self._parse()
            op = self._made[name] = self._op(self._by_name[name])
        return op

    def __iter__(self) -> Iterator[str]:
        self._parse()
        return iter(self._by_name)

    def __len__(self) -> int:
        self._parse()
        return len(self._by_name)

    def _shape_of(self, ident: int) -> tuple[list[int], str] | None:
        inst = self._by_id.get(ident)
        if inst is None or not inst.HasField("shape"):
            return None
        return _shape(inst.shape)

    def _op(self, inst: Any) -> HloOp:
        inputs = [self._shape_of(o) for o in inst.operand_ids]
        known = all(s is not None for s in inputs)
        return HloOp(
            opcode=_text(inst.opcode),
            op_name=_text(inst.metadata.op_name),
            input_shapes=json.dumps([s[0] for s in inputs if s]) if known else "",
            input_dtypes=json.dumps([s[1] for s in inputs if s]) if known else "",
        )


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def hlo_ops(space: XSpace) -> dict[tuple[str, int], ModuleOps]:
    """``(module name, program id)`` -> that module's instructions, for every module whose HLO
    proto the profile holds (each parsed when first asked; see ``ModuleOps``)."""
    out: dict[tuple[str, int], ModuleOps] = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        for meta in plane.event_metadata.values():
            stats = plane.named_stats(meta.stats)
            proto = stats.get("Hlo Proto")
            if not isinstance(proto, bytes):
                continue
            module, _, rest = meta.name.rpartition("(")
            try:
                program = int(rest.rstrip(")"))
            except ValueError:
                program_id = stats.get("program_id", -1)
                program = program_id if isinstance(program_id, int) else -1
                module = meta.name
            out[(module, program)] = ModuleOps(proto)
    return out
