"""How Paddle's TracerEventType values map to perfkit kinds."""

from __future__ import annotations

import re

#: TracerEventType name -> perfkit kind. A type not listed (a newer Paddle's) becomes "other",
#: with its name kept in the ``category`` column.
TYPE_KINDS: dict[str, str] = {
    "Operator": "operator",
    "Dataloader": "dataloader",
    "ProfileStep": "step",
    "CudaRuntime": "runtime",
    "MluRuntime": "runtime",
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
    # C++ RecordEvents Paddle itself opens (the "<api> pybind_imperative_func" entry of every
    # Python API call, "backward", ...); Paddle's own summary leaves them out of its
    # user-defined table, and so does perfkit.
    "UserDefined": "other",
    "OperatorInner": "operator_inner",
    "Forward": "forward",
    "Backward": "backward",
    "Optimization": "optimizer",
    "Communication": "communication",
    "PythonOp": "python",
    "PythonUserDefined": "user",
    "DygraphKernelLaunch": "operator_inner",
    "StaticKernelLaunch": "operator_inner",
}
#: TracerMemEventType names of memory events.
MEMORY_TYPES = frozenset({"Allocate", "Free", "ReservedAllocate", "ReservedFree"})
#: The memory event types that allocate or free memory; the reserved-pool ones
#: (``ReservedAllocate``/``ReservedFree``) change only the allocator's totals.
ALLOCATION_TYPES = frozenset({"Allocate", "Free"})
DEVICE_TYPES = frozenset({"Kernel", "Memcpy", "Memset"})

STEP_RE = re.compile(r"^ProfileStep#(\d+)$")
_PLACE_RE = re.compile(r"Place\((\w+?)(?::(\d+))?\)")


def classify(type_name: str, name: str) -> str:
    """Return the perfkit kind of a Paddle event from its TracerEventType name and its name."""
    if type_name in MEMORY_TYPES:
        return "memory"
    kind = TYPE_KINDS.get(type_name, "other")
    if kind == "kernel" and "nccl" in name.lower():
        return "communication"
    return kind


def step_number(name: str) -> int:
    """The N of ``ProfileStep#N``, or -1."""
    m = STEP_RE.match(name)
    return int(m.group(1)) if m else -1


def parse_place(place: str) -> tuple[str, int]:
    """``Place(gpu:0)`` -> ("gpu", 0); ``Place(cpu)`` -> ("cpu", -1); pinned host memory is cpu."""
    m = _PLACE_RE.search(place)
    if not m:
        return "cpu", -1
    kind, index = m.group(1).lower(), m.group(2)
    if kind in ("cpu", "gpu_pinned", "pinned", "cuda_pinned", "xpu_pinned"):
        return "cpu", -1
    if kind in ("gpu", "cuda"):
        kind = "gpu"
    return kind, int(index) if index is not None else 0
