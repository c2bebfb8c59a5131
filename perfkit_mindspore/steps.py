"""Steps of a MindSpore profile that recorded none: found from the repeating sequence of
operators.

MindSpore's CPU profiler writes no step spans. When perfkit recorded the steps itself
(``ProfilerCallback``, ``perfkit_mindspore.step(prof)``) they come from ``perfkit_spans.json``;
otherwise a training loop runs the same operators in the same order every step, so the sequence
of operators (by full name) of a profile of N steps is one step's sequence N times over. N is
known from the schedule (perfkit's handler writes the numbers of the steps it recorded); without
it N divides every operator's number of calls, and the largest such N whose split repeats
exactly is taken. A profile whose sequence does not repeat gets no steps; one whose steps repeat
inside themselves (a step that is the same half-step twice) is split too finely: mark the steps
(``perfkit_mindspore.step``) for such loops.

A step found this way runs from its first operator's start to the next step's first operator's
start (the last step: to its last operator's end), so host time between steps counts in the step
before.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def repeats(names: Sequence[str], n: int) -> bool:
    """Whether ``names`` is one sequence ``n`` times over."""
    total = len(names)
    if n < 1 or total % n:
        return False
    period = total // n
    first = names[:period]
    return all(names[i * period : (i + 1) * period] == first for i in range(1, n))


def infer_step_count(names: Sequence[str], wanted: int | None) -> int | None:
    """The number of steps ``names`` (the operators' full names in time order) holds:
    ``wanted`` when given and the sequence repeats that many times; else the largest count that
    divides every name's number of calls and splits the sequence into repeats (more than one).
    None when none does."""
    if not names:
        return None
    if wanted is not None:
        return wanted if repeats(names, wanted) else None
    calls = Counter(names)
    g = 0
    for c in calls.values():
        g = math.gcd(g, c)
    for n in range(g, 1, -1):
        if g % n == 0 and repeats(names, n):
            return n
    return None


def period_spans(starts: Sequence[int], ends: Sequence[int], n: int) -> list[tuple[int, int]]:
    """(start, end) in ns of each of ``n`` equal periods of the operators (in time order, with
    their ``starts`` and ``ends``): a period runs from its first operator's start to the next
    period's first start, the last to its latest end."""
    period = len(starts) // n
    spans = []
    for i in range(n):
        begin = starts[i * period]
        end = starts[(i + 1) * period] if i + 1 < n else max(ends[i * period :])
        spans.append((begin, end))
    return spans
