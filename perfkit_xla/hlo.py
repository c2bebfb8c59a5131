"""What the HLO protos of a profile's metadata plane say about each XLA op: its opcode, its
input shapes and dtypes, and the framework operation it came from.

JAX and TensorFlow store each compiled module's ``HloProto`` as the ``Hlo Proto`` stat of an
event metadata of the ``/host:metadata`` plane, named ``<module>(<program id>)``. Only the few
fields read here are decoded (numbers of the documented ``hlo.proto``)::

    HloProto              hlo_module=1 (HloModuleProto)
    HloModuleProto        name=1, computations=3 (HloComputationProto)
    HloComputationProto   instructions=2 (HloInstructionProto)
    HloInstructionProto   name=1, opcode=2, shape=3 (ShapeProto), metadata=7 (OpMetadata),
                          id=35, operand_ids=36
    ShapeProto            element_type=2 (PrimitiveType), dimensions=3, tuple_shapes=4
    OpMetadata            op_type=1, op_name=2
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from perfkit_xla.xspace import WireError, XSpace, _fields, _signed, _text, _varint

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


def _shape(buf: bytes, start: int, end: int) -> tuple[list[int], str] | None:
    """(dimensions, dtype) of an array shape; None for tuples, tokens and unknown types."""
    element = 0
    dims: list[int] = []
    for number, wire, v in _fields(buf, start, end):
        if number == 2 and wire == 0:
            element = v
        elif number == 3:
            if wire == 0:
                dims.append(_signed(v))
            elif wire == 2:  # packed
                pos = v[0]
                while pos < v[1]:
                    value, pos = _varint(buf, pos)
                    dims.append(_signed(value))
    if element == _TUPLE or element not in DTYPES:
        return None
    return dims, DTYPES[element]


def _op_name(buf: bytes, start: int, end: int) -> str:
    for number, wire, v in _fields(buf, start, end):
        if number == 2 and wire == 2:
            return _text(buf, v)
    return ""


def _packed(buf: bytes, wire: int, v: Any) -> list[int]:
    """The values of a repeated varint field: one (``wire`` 0) or packed (``wire`` 2)."""
    if wire == 0:
        return [int(v)]
    out = []
    start, end = v
    pos = start
    while pos < end:
        value, pos = _varint(buf, pos)
        out.append(value)
    return out


def module_ops(proto: bytes) -> dict[str, HloOp]:
    """Instruction name -> ``HloOp`` for every instruction of the module in ``proto`` (a
    serialized ``HloProto``); ``WireError`` when it is not one."""
    raw: list[tuple[str, str, str, list[int], int]] = []
    shapes: dict[int, tuple[list[int], str] | None] = {}
    for number, wire, module in _fields(proto, 0, len(proto)):
        if number != 1 or wire != 2:
            continue
        for n2, w2, comp in _fields(proto, *module):
            if n2 != 3 or w2 != 2:
                continue
            for n3, w3, inst in _fields(proto, *comp):
                if n3 != 2 or w3 != 2:
                    continue
                name = opcode = op_name = ""
                ident = -1
                operands: list[int] = []
                shape: tuple[list[int], str] | None = None
                for n4, w4, v in _fields(proto, *inst):
                    if n4 == 1 and w4 == 2:
                        name = _text(proto, v)
                    elif n4 == 2 and w4 == 2:
                        opcode = _text(proto, v)
                    elif n4 == 3 and w4 == 2:
                        shape = _shape(proto, *v)
                    elif n4 == 7 and w4 == 2:
                        op_name = _op_name(proto, *v)
                    elif n4 == 35 and w4 == 0:
                        ident = _signed(v)
                    elif n4 == 36:
                        operands.extend(_packed(proto, w4, v))
                shapes[ident] = shape
                raw.append((name, opcode, op_name, operands, ident))
    out: dict[str, HloOp] = {}
    for name, opcode, op_name, operands, _ident in raw:
        inputs = [shapes.get(o) for o in operands]
        known = all(s is not None for s in inputs)
        out[name] = HloOp(
            opcode=opcode,
            op_name=op_name,
            input_shapes=json.dumps([s[0] for s in inputs if s]) if known else "",
            input_dtypes=json.dumps([s[1] for s in inputs if s]) if known else "",
        )
    return out


def hlo_ops(space: XSpace) -> dict[tuple[str, int], dict[str, HloOp]]:
    """``(module name, program id)`` -> that module's instructions, for every module whose HLO
    proto the profile holds. A proto that does not decode is left out (the ops of that module
    then have no shapes), as the events themselves are still read."""
    out: dict[tuple[str, int], dict[str, HloOp]] = {}
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
            try:
                out[(module, program)] = module_ops(proto)
            except WireError:
                continue
    return out
