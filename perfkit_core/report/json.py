"""Summary tables as JSON-ready data, shared by the CLI and the exports."""

from __future__ import annotations

import math
from typing import Any


def jsonable(value: Any) -> Any:
    """A plain JSON value: numpy scalars unwrapped, NaN as None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return jsonable(value.item())
    return value


def frame_records(frame: Any) -> list[dict[str, Any]]:
    """Rows of a DataFrame as JSON-ready dicts (NaN becomes null)."""
    return [{k: jsonable(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]
