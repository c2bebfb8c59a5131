"""Device descriptions for ``Run.meta["devices"]``, from the chrome-trace ``deviceProperties``
list that both Kineto and Paddle write."""

from __future__ import annotations

from typing import Any


def devices_from_properties(props: list[Any] | None) -> list[dict[str, Any]]:
    """One dict per device: type, index, name, total memory (bytes), compute capability and SM
    count (Kineto writes ``numSms``, Paddle ``smCount``). Entries that are not objects are skipped."""
    devices = []
    for p in props or []:
        if not isinstance(p, dict):
            continue
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
