"""``perfkit_spans.json``: the steps and user spans perfkit recorded beside a MindSpore profile.

MindSpore's CPU profiler writes no step spans and no user ranges, so perfkit records them on its
own side, on the host clock (``time.time_ns()``: Unix-epoch nanoseconds, the clock of MindSpore's
CPU timestamps), and writes them into the profile's folder, where ``perfkit report`` finds them
again. The file::

    {"version": 1,
     "steps": [[number, start_ns or null, end_ns], ...],
     "step_numbers": [number, ...],
     "spans": [[name, start_ns, end_ns, thread], ...],
     "thread": training thread id,
     "steps_from": "callback" | "step marker" | "schedule"}

``steps`` are step spans recorded around each step (``ProfilerCallback``, or
``perfkit_mindspore.step(prof)``, whose first step may have no start: it starts with the
profile's first operator); without them ``step_numbers`` names the steps the schedule
recorded, whose bounds the loader finds from the repeating sequence of operators.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit_core import TraceError
from perfkit_core.events import TIME_LIMIT_NS, check_int_range, write_bytes

VERSION = 1


@dataclass
class Spans:
    """What perfkit recorded beside one profile (see the module docstring)."""

    steps: list[tuple[int, int | None, int]] = field(default_factory=list)
    step_numbers: list[int] = field(default_factory=list)
    spans: list[tuple[str, int, int, int]] = field(default_factory=list)
    thread: int = -1
    steps_from: str = ""

    def to_json(self) -> dict[str, Any]:
        """The file's content."""
        return {
            "version": VERSION,
            "steps": [list(s) for s in self.steps],
            "step_numbers": list(self.step_numbers),
            "spans": [list(s) for s in self.spans],
            "thread": self.thread,
            "steps_from": self.steps_from,
        }


def write_spans(path: Path, spans: Spans) -> None:
    """Write ``spans`` to ``path`` atomically (a temporary file, then a rename)."""
    write_bytes(path, json.dumps(spans.to_json()).encode())


def _time(path: Path, value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > TIME_LIMIT_NS:
        raise TraceError(path, f"{what} {value!r} is not a time in ns")
    return value


def _int(path: Path, value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(path, f"{what} {value!r} is not a whole number")
    return check_int_range(path, value, what)


def read_spans(path: Path) -> Spans:
    """The ``Spans`` in ``path``; ``TraceError`` naming it when it is not such a file."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise TraceError(path, f"cannot be read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(path, f"is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise TraceError(path, f"is not a perfkit spans file of version {VERSION}")
    out = Spans(
        thread=_int(path, data.get("thread", -1), "thread"),
        steps_from=str(data.get("steps_from", "")),
    )
    try:
        for number, start, end in data.get("steps", []):
            begin = None if start is None else _time(path, start, "step start")
            out.steps.append((_int(path, number, "step"), begin, _time(path, end, "step end")))
        out.step_numbers = [_int(path, n, "step") for n in data.get("step_numbers", [])]
        for name, start, end, thread in data.get("spans", []):
            out.spans.append(
                (
                    str(name),
                    _time(path, start, "span start"),
                    _time(path, end, "span end"),
                    _int(path, thread, "thread"),
                )
            )
    except (TypeError, ValueError):
        raise TraceError(path, "holds a step or span that is not [number, start, end]") from None
    return out
