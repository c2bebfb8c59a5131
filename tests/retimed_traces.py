"""Real Kineto traces with some of their steps stretched or shrunk in time: warm-up steps,
slow steps later in a run, and runs that are faster throughout, made from one real run so that
the steps the rule keeps are the real run's own."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

STEP_NAME = re.compile(r"^ProfilerStep#\d+$")


def step_bounds(trace: dict) -> list[tuple[float, float]]:
    """The (start, end) of each ``ProfilerStep#N`` span of a Kineto trace, in us, by start."""
    spans = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and STEP_NAME.match(str(e.get("name", "")))
    ]
    return sorted(spans)


def retime(source: Path, target: Path, factor: Callable[[int, float, float], float]) -> Path:
    """Write ``source`` (a Kineto JSON trace) to ``target`` with step ``i`` (in time order,
    from 0) lasting ``factor(i, its duration, the median step)`` times as long: every timestamp
    inside it is stretched about its start and everything after it moves along, so the events
    of the other steps keep their durations and order."""
    trace = json.loads(source.read_text())
    bounds = step_bounds(trace)
    durations = np.array([e - s for s, e in bounds])
    median = float(np.median(durations))
    # piecewise-linear time map: at each step's start and end, where the time moves to
    knots_in = [bounds[0][0]]
    knots_out = [bounds[0][0]]
    for i, (s, e) in enumerate(bounds):
        shift = knots_out[-1] - knots_in[-1]
        if s > knots_in[-1]:
            knots_in.append(s)
            knots_out.append(s + shift)
        f = factor(i, e - s, median)
        knots_in.append(e)
        knots_out.append(knots_out[-1] + (e - s) * f)
    x, y = np.array(knots_in), np.array(knots_out)

    def moved(t: float) -> float:
        if t <= x[0]:
            return t
        if t >= x[-1]:
            return t + (y[-1] - x[-1])
        return float(np.interp(t, x, y))

    for event in trace["traceEvents"]:
        if "ts" not in event:
            continue
        ts = float(event["ts"])
        new_ts = moved(ts)
        if "dur" in event:
            event["dur"] = moved(ts + float(event["dur"])) - new_ts
        event["ts"] = new_ts
    target.write_text(json.dumps(trace))
    return target


def warmup_copy(source: Path, target: Path, *, slow: int = 2, times: float = 40.0) -> Path:
    """``source`` with its first ``slow`` steps each lasting ``times`` its median step."""
    return retime(source, target, lambda i, d, m: times * m / d if i < slow else 1.0)


def faster_copy(
    source: Path, target: Path, *, slow: int = 2, times: float = 40.0, speed: float = 2.0
) -> Path:
    """``source`` running every step ``speed`` times as fast, with its first ``slow`` steps
    each lasting ``times`` its median step (as in ``warmup_copy``)."""
    return retime(source, target, lambda i, d, m: times * m / d if i < slow else 1.0 / speed)


def slow_step_copy(source: Path, target: Path, *, at: int, times: float = 40.0) -> Path:
    """``source`` with step ``at`` (from 0) lasting ``times`` its median step: a checkpoint in
    the middle of the run."""
    return retime(source, target, lambda i, d, m: times * m / d if i == at else 1.0)
