"""Steps and user spans recorded by perfkit on the host clock, for MindSpore runs.

MindSpore's CPU profiler records neither step spans nor user ranges (its ``mstx`` ranges reach
no file on the CPU), so perfkit records them itself: ``annotate(name)`` spans, the steps that
``ProfilerCallback`` sees and the step marks of ``perfkit_mindspore.step(prof)``, all with
``time.time_ns()`` (Unix-epoch ns, the clock of MindSpore's CPU timestamps). They wait here,
bounded, until a handler writes them beside the profile they belong to. Importing this module
imports no MindSpore.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import ContextDecorator
from typing import Any

#: At most this many spans and steps wait for a handler (older ones are dropped first).
LIMIT = 100_000

_lock = threading.Lock()
_spans: deque[tuple[str, int, int, int]] = deque(maxlen=LIMIT)
_steps: deque[tuple[int, int | None, int]] = deque(maxlen=LIMIT)
_state: dict[str, Any] = {"last_mark": None, "thread": -1, "recording": 0, "known": False}


class span(ContextDecorator):
    """A span named ``name``, recorded on the host clock when the block ends (a context manager
    and a decorator); ``perfkit_mindspore.annotate``."""

    def __init__(self, name: str) -> None:
        self.name = str(name)
        self._local = threading.local()

    def __enter__(self) -> span:
        self._local.__dict__.setdefault("starts", []).append(time.time_ns())
        return self

    def __exit__(self, *exc: Any) -> None:
        end = time.time_ns()
        start = self._local.starts.pop()
        with _lock:
            _spans.append((self.name, start, end, threading.get_native_id()))


def add_step(number: int, start: int | None, end: int) -> None:
    """Record step ``number`` from ``start`` (None: from where the profile's work begins) to
    ``end``, in ns, taken on the calling thread (the training thread)."""
    with _lock:
        _steps.append((int(number), start, end))
        _state["thread"] = threading.get_native_id()


def mark_step(number: int | None, before: Any) -> Any:
    """End step ``number`` now, call ``before()`` (the profiler's own ``step()``), and start the
    next step when it returns; return what it returned."""
    now = time.time_ns()
    if number is not None:
        add_step(number, _state["last_mark"], now)
    try:
        return before()
    finally:
        _state["last_mark"] = time.time_ns()


def take() -> tuple[list[tuple[int, int | None, int]], list[tuple[str, int, int, int]], int]:
    """The steps and spans recorded since the last call (they are removed), and the training
    thread's id (-1 when no step was recorded)."""
    with _lock:
        steps, spans = list(_steps), list(_spans)
        _steps.clear()
        _spans.clear()
        return steps, spans, int(_state["thread"])


def start_recording() -> None:
    """A profiler window opened (for ``recording()``)."""
    with _lock:
        _state["recording"] += 1
        _state["known"] = True


def stop_recording() -> None:
    """A profiler window closed."""
    with _lock:
        _state["recording"] = max(_state["recording"] - 1, 0)


def recording() -> bool | None:
    """Whether a ``ProfilerCallback`` has its profiler window open; None when no callback ever
    opened one (a ``profile()`` loop's schedule is MindSpore's to know)."""
    return bool(_state["recording"]) if _state["known"] else None
