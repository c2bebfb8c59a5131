"""Time by Python function, as tfprof's code view and pprof show it: the Python frames a trace
recorded (torch's Python tracer, ``with_stack=True``: events of kind ``python`` named
``path/file.py(LINE): function``, ``LINE`` the line the function starts on), one row per
function with its host time own (the calls' time outside the Python frames they call: their
own Python, and the ops and C calls they make directly) and with children (the own time of the
calls and of every frame they call, a recursive call counted once: pprof's *cum*), per step. A
frame counts in the step it starts in.

``code_frames`` gives every recorded frame with its function, nearest calling frame and own
time: the ``code`` view sums them by function and ``perfkit export --to pprof`` writes them as
samples, so the two cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.errors import OptionError

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: ``path/file.py(LINE): function`` as torch's Python tracer names a frame.
FRAME_RE = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<function>.*)$")
#: A built-in's object address, which differs between calls of one built-in.
ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")
#: A name in angle brackets (``<module>``).
ANGLED_RE = re.compile(r"<([^<>]*)>")
#: ``<built-in method NAME of TYPE object at 0x...>`` / ``<built-in function NAME>``.
BUILTIN_RE = re.compile(
    r"^<built-in (?:method|function) (?P<name>[^\s>]+)(?: of (?P<owner>.+?) object)?"
)
LABELS = {
    "name": "Function",
    "function": "Function name",
    "file": "File",
    "line": "Line",
    "calls_per_step": "Calls per step",
    "host_own_ns": "Host time per step, own",
    "host_with_children_ns": "Host time per step, with children",
}
COLUMNS = tuple(LABELS)
NO_FRAMES_NOTE = "no Python frames were recorded (torch: profile with with_stack=True)"


@dataclass
class Frames:
    """The recorded Python frames of a run, in row order: ``rows`` (their rows in the event
    table), ``function`` (index into ``functions``), ``caller`` (index into these frames of the
    nearest enclosing frame, -1 at the top), ``own_ns`` (duration less the frames nested in it),
    ``dur_ns`` and ``step`` (the step number, -1 outside steps); ``functions`` as (name, file,
    line, function name)."""

    rows: np.ndarray
    function: np.ndarray
    caller: np.ndarray
    own_ns: np.ndarray
    dur_ns: np.ndarray
    step: np.ndarray
    functions: list[tuple[str, str, int, str]]


def parse_frame(name: str) -> tuple[str, str, int, str]:
    """(display name, file, line, function) of a frame's event name:
    ``torch/nn/modules/module.py(1774): _call_impl`` -> ``("_call_impl (torch/nn/modules/
    module.py:1774)", "torch/nn/modules/module.py", 1774, "_call_impl")``; a built-in keeps its
    name and its owner's type (``built-in: torch._C._EngineBase.run_backward``), file empty
    and line 0; another name stays as it is (``nn.Module: Linear_0``). A function in angle
    brackets is shown in square ones (``[module] (train.py:1)``)."""
    match = FRAME_RE.match(name)
    if match is None:
        plain = ADDRESS_RE.sub("", name)
        builtin = BUILTIN_RE.match(plain)
        if builtin is None:
            return plain, "", 0, plain
        owner = builtin["owner"]
        function = builtin["name"]
        return f"built-in: {owner + '.' if owner else ''}{function}", "", 0, function
    file, line, function = match["file"], int(match["line"]), match["function"]
    # ``<module>``, ``<lambda>``: pprof reads angle brackets as C++ template arguments and drops
    # them, so the name shown in both forms says ``[module]``.
    shown = ANGLED_RE.sub(r"[\1]", function)
    return f"{shown} ({file}:{line})", file, line, function


def code_frames(run: Run) -> Frames:
    """The run's ``Frames`` (host events of kind ``python``), computed once and cached."""
    from perfkit_core.events import links

    cached = run.cache.get("code_frames")
    if cached is not None:
        return cached
    ev = run.events
    host = ev["stream"].to_numpy() < 0
    is_frame = host & (ev["kind"].astype(str).to_numpy() == "python")
    rows = np.flatnonzero(is_frame)
    parent = ev["parent"].to_numpy().astype(np.int64, copy=False)
    up = links.nearest_flagged(parent, is_frame, self_too=False)[rows]
    index = np.full(len(ev), -1, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    caller = np.where(up >= 0, index[np.maximum(up, 0)], -1)
    dur = ev["dur_ns"].to_numpy()[rows].astype(np.float64)
    nested = np.bincount(caller[caller >= 0], weights=dur[caller >= 0], minlength=len(rows))
    own = np.maximum(dur - nested, 0.0)
    names = ev["name"].astype(str).to_numpy()[rows]
    uniq, inverse = np.unique(names.astype(str), return_inverse=True)
    parsed = [parse_frame(str(n)) for n in uniq.tolist()]
    # Frames of one function under other event names (built-ins at other addresses) merge.
    by_name: dict[str, int] = {}
    functions: list[tuple[str, str, int, str]] = []
    remap = np.empty(len(parsed), dtype=np.int64)
    for i, p in enumerate(parsed):
        if p[0] not in by_name:
            by_name[p[0]] = len(functions)
            functions.append(p)
        remap[i] = by_name[p[0]]
    function = remap[np.asarray(inverse, dtype=np.int64).reshape(-1)]
    step = ev["step"].to_numpy()[rows].astype(np.int64)
    found = Frames(rows, function, caller, own, dur, step, functions)
    run.cache.put("code_frames", found)
    return found


def with_children(frames: Frames, take: np.ndarray) -> np.ndarray:
    """Per function, the own time of the frames in ``take`` that are its calls or called from
    them (a recursive call counted once): pprof's *cum*. Returns ns."""
    total = np.zeros(len(frames.functions))
    for i in np.flatnonzero(take & (frames.own_ns > 0)).tolist():
        seen: set[int] = set()
        j = i
        while j >= 0:
            seen.add(int(frames.function[j]))
            j = int(frames.caller[j])
        for f in seen:
            total[f] += frames.own_ns[i]
    return total


def steps_taken(run: Run, step: int | None) -> list[int] | None:
    """The step numbers a per-step figure covers (``step`` alone, or all the run's steps);
    None when the run recorded no steps (the whole profile is one)."""
    kinds = run.events["kind"].astype(str).to_numpy()
    numbers = sorted({int(s) for s in run.events["step"].to_numpy()[kinds == "step"]})
    if step is not None:
        if step not in numbers:
            shown = ", ".join(map(str, numbers)) or "none"
            raise OptionError(f"step {step} is not in the run (its steps: {shown})")
        return [step]
    return numbers or None


def code_view(
    run: Run,
    *,
    order_by: str | None = None,
    filter: str | None = None,
    step: int | None = None,
) -> pd.DataFrame:
    """One row per Python function the trace recorded frames of, ordered by ``order_by``
    (a column, largest first, or ``host`` / ``calls`` for their totals; default
    ``host_with_children_ns``): ``name`` (``function
    (file:line)``), ``function``, ``file``, ``line`` (where it starts), ``calls_per_step``,
    ``host_own_ns`` and ``host_with_children_ns`` (ns per step, see the module docstring).
    ``filter`` keeps functions whose name matches the regular expression (case-insensitive);
    ``step`` takes that step alone. Empty, with a note, when no frames were recorded."""
    import pandas as pd

    order_by = {"host": "host_with_children_ns", "calls": "calls_per_step"}.get(
        order_by or "", order_by
    )
    if order_by is not None and order_by not in COLUMNS:
        raise OptionError(f"cannot order functions by {order_by!r}; columns: {', '.join(COLUMNS)}")
    frames = code_frames(run)
    wanted = steps_taken(run, step)
    take = np.isin(frames.step, wanted) if wanted is not None else np.ones(len(frames.rows), bool)
    n_steps = len(wanted) if wanted else 1
    k = len(frames.functions)
    f = frames.function
    calls = np.bincount(f[take], minlength=k).astype(np.float64)
    own = np.bincount(f[take], weights=frames.own_ns[take], minlength=k)
    total = with_children(frames, take)
    frame = pd.DataFrame(
        {
            "name": [x[0] for x in frames.functions],
            "function": [x[3] for x in frames.functions],
            "file": [x[1] for x in frames.functions],
            "line": np.array([x[2] for x in frames.functions], dtype=np.int64),
            "calls_per_step": calls / n_steps,
            "host_own_ns": own / n_steps,
            "host_with_children_ns": total / n_steps,
        },
        columns=list(COLUMNS),
    )
    frame = frame[calls > 0]
    if filter:
        try:
            pattern = re.compile(filter, re.IGNORECASE)
        except re.error as exc:
            raise OptionError(f"--filter {filter!r} is not a regular expression ({exc})") from exc
        frame = frame[[bool(pattern.search(str(x))) for x in frame["name"]]]
    key = order_by or "host_with_children_ns"
    ascending = key in ("name", "function", "file")
    frame = frame.sort_values([key, "name"], ascending=[ascending, True], kind="stable")
    frame = frame.reset_index(drop=True)
    if not len(frames.rows):
        frame.attrs["note"] = NO_FRAMES_NOTE
    frame.attrs["labels"] = dict(LABELS)
    frame.attrs["paired"] = [["host_own_ns", "host_with_children_ns"]]
    return frame
