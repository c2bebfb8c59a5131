"""The inputs of an op as the profiler recorded them: shapes, dtypes and scalar values, parsed
from the event table's text columns (``input_shapes``, ``input_dtypes``, ``input_values``).

Two layouts are read. Torch and XLA record one entry per input, in order: a tensor's shape
(``[64, 128]``), ``[]`` for a scalar or list argument (its dtype says which: ``Scalar``,
``ScalarList``, ``Int``, ``GenericList``, ...), a list of shapes for a tensor list. Paddle
records a mapping of input names to lists of shapes (``{"X": [[16, 32]], "Y": [[32, 8]]}``).
Both become one ``Inputs``: positional shapes, dtypes and values, and for Paddle the names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from math import prod
from typing import Any

#: Bytes per element of the dtypes the profilers name (torch's C++ names, Paddle's and XLA's).
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "float32": 4,
    "fp32": 4,
    "double": 8,
    "float64": 8,
    "c10::Half": 2,
    "Half": 2,
    "half": 2,
    "float16": 2,
    "c10::BFloat16": 2,
    "BFloat16": 2,
    "bfloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "long int": 8,
    "long": 8,
    "int64": 8,
    "int": 4,
    "int32": 4,
    "short int": 2,
    "short": 2,
    "int16": 2,
    "signed char": 1,
    "unsigned char": 1,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "complex64": 8,
    "c10::complex<double>": 16,
    "complex128": 16,
}

#: The precision (``fp32``, ``bf16``, ...) of the floating-point dtypes; other dtypes have none.
DTYPE_PRECISION: dict[str, str] = {
    "float": "fp32",
    "float32": "fp32",
    "fp32": "fp32",
    "double": "fp64",
    "float64": "fp64",
    "c10::Half": "fp16",
    "Half": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "c10::BFloat16": "bf16",
    "BFloat16": "bf16",
    "bfloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "c10::complex<float>": "fp32",
    "complex64": "fp32",
}

Shape = tuple[int, ...]


def dtype_bytes(dtype: str) -> int | None:
    """Bytes per element of ``dtype`` (a torch, Paddle or XLA dtype name), None when unknown."""
    return DTYPE_BYTES.get(dtype.strip())


@dataclass(frozen=True)
class Inputs:
    """An op's recorded inputs. ``shapes[i]`` is the shape of input ``i`` when it is a tensor
    (``()`` for a 0-d tensor), a tuple of shapes for a tensor list, None for anything else;
    ``dtypes[i]`` its dtype name as recorded; ``values[i]`` its value as recorded (torch's
    ``Concrete Inputs``: ``"[1, 1]"``, ``"1"``, ``"False"``), ``""`` when not recorded;
    ``names`` the input names of a Paddle op (empty for torch and XLA)."""

    shapes: tuple[Any, ...] = ()
    dtypes: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    #: Paddle: every tensor of each named input (``{"X": ((16, 32),)}``).
    lists: dict[str, tuple[Shape, ...]] = field(default_factory=dict, hash=False, compare=False)

    def tensor(self, i: int) -> Shape | None:
        """The shape of input ``i`` when it is a tensor, else None."""
        if i < 0 or i >= len(self.shapes):
            return None
        shape = self.shapes[i]
        if shape is None or (shape and isinstance(shape[0], tuple)):
            return None
        return shape

    def tensor_list(self, i: int) -> tuple[Shape, ...] | None:
        """The shapes of input ``i`` when it is a tensor list, else None."""
        if i < 0 or i >= len(self.shapes):
            return None
        shape = self.shapes[i]
        if shape is None or not shape or not isinstance(shape[0], tuple):
            return None
        return shape

    def named(self, name: str) -> Shape | None:
        """The shape of the first tensor of the Paddle input ``name``, else None."""
        found = self.lists.get(name)
        return found[0] if found else None

    def dtype(self, i: int) -> str:
        """The dtype name of input ``i`` (``""`` when not recorded)."""
        return self.dtypes[i] if 0 <= i < len(self.dtypes) else ""

    def value(self, i: int) -> str:
        """The recorded value of input ``i`` (``""`` when not recorded)."""
        return self.values[i] if 0 <= i < len(self.values) else ""

    def ints(self, i: int) -> tuple[int, ...] | None:
        """The value of input ``i`` read as a list of integers (``"[2, 2]"`` -> ``(2, 2)``, ``"1"``
        -> ``(1,)``), None when it was not recorded or is not one."""
        return parse_ints(self.value(i))

    def flag(self, i: int) -> bool | None:
        """The value of input ``i`` read as a boolean, None when not recorded."""
        text = self.value(i).strip()
        if text in ("True", "true", "1"):
            return True
        if text in ("False", "false", "0"):
            return False
        return None

    def flags(self, i: int) -> tuple[bool, ...] | None:
        """The value of input ``i`` read as a list of booleans (``"[True, False, True]"``)."""
        text = self.value(i).strip()
        if not (text.startswith("[") and text.endswith("]")):
            return None
        items = [t.strip() for t in text[1:-1].split(",") if t.strip()]
        if not items or any(t not in ("True", "False") for t in items):
            return None
        return tuple(t == "True" for t in items)

    def first_float_dtype(self) -> str:
        """The dtype of the first floating-point tensor input (``""`` when none)."""
        for i, dtype in enumerate(self.dtypes):
            if DTYPE_PRECISION.get(dtype) and self.shapes[i] is not None:
                return dtype
        return ""


_INTS_RE = re.compile(r"^\[?\s*-?\d+(\s*,\s*-?\d+)*\s*,?\s*\]?$")


def parse_ints(text: str) -> tuple[int, ...] | None:
    """``"[2, 2]"`` -> ``(2, 2)``; ``"3"`` -> ``(3,)``; ``"[]"`` -> ``()``; None for anything
    else (an empty text, ``"False"``, a float)."""
    text = text.strip()
    if text == "[]":
        return ()
    if not text or not _INTS_RE.match(text):
        return None
    return tuple(int(t) for t in text.strip("[]").split(",") if t.strip())


def numel(shape: Shape | None) -> int:
    """Elements of a tensor of ``shape`` (1 for a 0-d tensor, 0 for None)."""
    return prod(shape) if shape is not None else 0


def _shape(value: Any) -> Any:
    """A recorded shape as a tuple (nested for a tensor list); None for what is not one."""
    if not isinstance(value, list):
        return None
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    if all(isinstance(v, list) for v in value):
        inner = [_shape(v) for v in value]
        if all(isinstance(s, tuple) and (not s or not isinstance(s[0], tuple)) for s in inner):
            return tuple(inner)
    return None


_NOT_TENSORS = frozenset(
    {"Scalar", "ScalarList", "Int", "Bool", "Double", "GenericList", "TensorList", "Device", ""}
)


@lru_cache(maxsize=65536)
def parse_inputs(shapes_text: str, dtypes_text: str = "", values_text: str = "") -> Inputs:
    """The ``Inputs`` of one op from its recorded texts (cached: a run has few distinct ones).
    Text that is not JSON of the expected layout gives empty inputs, never an error."""
    try:
        shapes = json.loads(shapes_text) if shapes_text else None
        dtypes = json.loads(dtypes_text) if dtypes_text else None
        values = json.loads(values_text) if values_text else None
    except ValueError:
        return Inputs()
    if isinstance(shapes, dict):
        return _paddle_inputs(shapes, dtypes if isinstance(dtypes, dict) else {})
    if not isinstance(shapes, list):
        return Inputs()
    types = [str(t) for t in dtypes] if isinstance(dtypes, list) else [""] * len(shapes)
    types += [""] * (len(shapes) - len(types))
    parsed = []
    for i, raw in enumerate(shapes):
        shape = _shape(raw)
        # torch writes [] for scalars and lists as well as for 0-d tensors: the dtype tells.
        if shape == () and types[i] in _NOT_TENSORS:
            shape = None
        if types[i] == "TensorList" and shape == ():
            shape = None
        parsed.append(shape)
    vals = [str(v) for v in values] if isinstance(values, list) else []
    vals += [""] * (len(shapes) - len(vals))
    return Inputs(tuple(parsed), tuple(types[: len(shapes)]), tuple(vals[: len(shapes)]))


def _paddle_inputs(shapes: dict[str, Any], dtypes: dict[str, Any]) -> Inputs:
    names, firsts, types = [], [], []
    lists: dict[str, tuple[Shape, ...]] = {}
    for name, raw in shapes.items():
        tensors = (
            tuple(s for s in (_shape(v) for v in raw) if isinstance(s, tuple))
            if isinstance(raw, list)
            else ()
        )
        tensors = tuple(t for t in tensors if not t or not isinstance(t[0], tuple))
        lists[str(name)] = tensors
        names.append(str(name))
        firsts.append(tensors[0] if tensors else None)
        recorded = dtypes.get(name)
        types.append(str(recorded[0]) if isinstance(recorded, list) and recorded else "")
    return Inputs(tuple(firsts), tuple(types), ("",) * len(names), tuple(names), lists)
