"""Device descriptions for ``Run.meta["devices"]``, from the chrome-trace ``deviceProperties``
list that both Kineto and Paddle write."""

from __future__ import annotations

import os
from typing import Any

from perfkit_core.errors import TraceError
from perfkit_core.events.checks import INT64_MAX, INT64_MIN

#: deviceProperties fields perfkit reads, and whether each is an integer (else a string) or any
#: number.
_FIELDS: dict[str, str] = {
    "id": "integer",
    "name": "string",
    "totalGlobalMem": "number",
    "computeMajor": "integer",
    "computeMinor": "integer",
    "numSms": "integer",
    "smCount": "integer",
}


def _checked(props: dict[str, Any], index: int, source: str | os.PathLike[str]) -> dict[str, Any]:
    """The fields perfkit reads, with numbers written as strings ("0", "0x1") turned into
    numbers; ``TraceError`` for any other type."""
    out: dict[str, Any] = {}
    for key, kind in _FIELDS.items():
        value = props.get(key)
        if value is None:
            continue
        if kind != "string" and isinstance(value, str):
            value = _number(value.strip(), integer=kind == "integer")
        if kind == "string":
            ok = isinstance(value, str)
        elif kind == "integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
            ok = ok and INT64_MIN <= value <= INT64_MAX
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and abs(value) <= INT64_MAX
        if not ok:
            raise TraceError(
                source,
                f"deviceProperties[{index}].{key} is {_shown(props.get(key))}, "
                f"not {'an' if kind == 'integer' else 'a'} {kind} in range",
            )
        out[key] = value
    return out


def _number(text: str, *, integer: bool) -> Any:
    try:
        return int(text, 0)
    except ValueError:
        pass
    if integer:
        return text
    try:
        return float(text)
    except ValueError:
        return text


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def devices_from_properties(
    props: list[Any] | None, source: str | os.PathLike[str] = "deviceProperties"
) -> list[dict[str, Any]]:
    """One dict per device: type, index, name, total memory (bytes), compute capability and SM
    count (Kineto writes ``numSms``, Paddle ``smCount``). Entries that are not objects are
    skipped; a field perfkit reads that holds the wrong type (an object for ``id``, a string
    for ``totalGlobalMem``) raises ``TraceError`` naming ``source``."""
    devices = []
    for index, p in enumerate(props or []):
        if not isinstance(p, dict):
            continue
        p = _checked(p, index, source)
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        devices.append(
            {
                "type": "gpu",
                "index": p.get("id"),
                "name": p.get("name"),
                "total_memory_bytes": p.get("totalGlobalMem"),
                "compute_capability": f"{major}.{minor}" if major is not None else None,
                "sm_count": p.get("numSms", p.get("smCount")),
            }
        )
    return devices
