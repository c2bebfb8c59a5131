"""What the Timeline tab shows of one event (its columns and its launch links) and its search.

**Launch links.** A device event was launched by a host runtime call (the same ``correlation``:
``events.links.launcher_rows``), which was issued by the operators that enclose it (or that own
it by ``external_id``: ``events.links.launch_parents``). So a clicked host event lists the
device work launched from within it, each with the runtime call that launched it (the flow the
timeline draws), and a clicked device event lists the runtime call and the operators above it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events.links import launch_parents, run_launchers
from perfkit_core.events.schema import COLUMNS, codes_in

if TYPE_CHECKING:
    from perfkit_core.serve.timeline import Timeline

#: Columns shown under an event, when recorded (the rest are its place and time).
DETAIL_COLUMNS = (
    "category",
    "full_name",
    "input_shapes",
    "input_dtypes",
    "input_values",
    "stack",
    "flops",
    "bytes",
    "grid",
    "block",
    "registers",
    "shared_memory",
    "occupancy_pct",
    "correlation",
    "external_id",
    "sequence",
    "process_group",
    "allocated_bytes",
    "step",
)
#: At most this many linked events are listed (the count and device time cover them all).
MAX_LINKED = 200
#: At most this many search matches are sent, in time order.
MAX_MATCHES = 500
_MISSING = {c.name: c.missing for c in COLUMNS}


def item(tl: Timeline, row: int) -> dict[str, Any]:
    """Where event ``row`` is drawn: lane, row (and row with its thread folded, -1 when
    folding hides it), start (ns from the timeline's origin), duration, name and kind."""
    return {
        "id": int(row),
        "name": tl.names.categories[tl.names.codes[row]] if tl.names.codes[row] >= 0 else "",
        "kind": tl.kinds.categories[tl.kinds.codes[row]],
        "lane": int(tl.lane_of[row]),
        "row": int(tl.depth[row]),
        "folded_row": int(tl.folded_depth[row]) if tl.python[row] or not tl.host[row] else -1,
        "start_ns": int(tl.start[row] - tl.origin),
        "dur_ns": int(tl.end[row] - tl.start[row]),
    }


def _value(value: Any, name: str) -> Any:
    if isinstance(value, (np.integer, int)):
        value = int(value)
        return None if value == _MISSING.get(name) else value
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(value) else float(value)
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    return text or None


def _launched_from(tl: Timeline, row: int) -> np.ndarray:
    """Device rows launched by ``row`` or by the host events inside it, in start order."""
    launchers = run_launchers(tl.run)
    parents = launch_parents(tl.run)
    device = np.flatnonzero(launchers >= 0)
    if not len(device):
        return device
    lo, hi = tl.start[row], tl.end[row]
    by = launchers[device]
    # a launch from inside ``row`` starts while it runs (hung from it by external id or not)
    near = (tl.start[by] >= lo) & (tl.start[by] <= hi)
    device, cur = device[near], by[near]
    hit = cur == row
    active = np.flatnonzero(~hit & (cur >= 0))
    while len(active):
        cur[active] = parents[cur[active]]
        reached = cur[active] == row
        hit[active[reached]] = True
        active = active[~reached & (cur[active] >= 0)]
    found = device[hit]
    return found[np.argsort(tl.start[found], kind="stable")]


def _launched_by(tl: Timeline, row: int) -> list[int]:
    """The runtime call that launched device event ``row`` and the host events above it."""
    launcher = int(run_launchers(tl.run)[row])
    parents = launch_parents(tl.run)
    chain: list[int] = []
    while launcher >= 0 and len(chain) < 16:
        if tl.lane_of[launcher] >= 0:
            chain.append(launcher)
        launcher = int(parents[launcher])
    return chain


def event_detail(tl: Timeline, row: int) -> dict[str, Any]:
    """Event ``row``: where it is drawn, its recorded columns, and its launch links."""
    if not 0 <= row < len(tl.lane_of) or tl.lane_of[row] < 0:
        raise KeyError(row)
    ev = tl.run.events
    out = item(tl, row)
    out["columns"] = {
        name: v
        for name in DETAIL_COLUMNS
        if name in ev.columns and (v := _value(ev[name].iat[row], name)) is not None
    }
    launchers = run_launchers(tl.run)
    if tl.host[row]:
        launched = _launched_from(tl, row)
        out["launched"] = {
            "count": len(launched),
            "device_ns": int((tl.end[launched] - tl.start[launched]).sum()),
            "events": [
                {**item(tl, int(d)), "launcher": item(tl, int(launchers[d]))}
                for d in launched[:MAX_LINKED].tolist()
            ],
        }
    else:
        out["launched_by"] = [item(tl, r) for r in _launched_by(tl, row)]
    return out


def search(tl: Timeline, query: str) -> dict[str, Any]:
    """Events whose name holds ``query`` (any case): how many, by name, and the first
    ``MAX_MATCHES`` in time order."""
    needle = query.strip().lower()
    if not needle:
        return {"query": query, "total": 0, "names": [], "matches": []}
    wanted = [i for i, name in enumerate(tl.names.categories) if needle in name.lower()]
    rows = np.flatnonzero(codes_in(tl.names.codes, wanted) & (tl.lane_of >= 0))
    rows = rows[np.argsort(tl.start[rows], kind="stable")]
    codes, counts = np.unique(tl.names.codes[rows], return_counts=True)
    by_name = sorted(
        (
            (tl.names.categories[c], int(n))
            for c, n in zip(codes.tolist(), counts.tolist(), strict=True)
        ),
        key=lambda x: (-x[1], x[0]),
    )
    return {
        "query": query,
        "total": len(rows),
        "names": [list(x) for x in by_name[:20]],
        "matches": [item(tl, r) for r in rows[:MAX_MATCHES].tolist()],
    }
