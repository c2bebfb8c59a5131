"""The advice benchmark's timing of a remedy against its baseline (``bench_advice.py``).

Two methods:

- **paired**, for a remedy that can live beside its baseline in one process (the optimizer's
  multi-tensor or fused path against the per-parameter loop, on two copies of the model; a
  DataLoader with more workers against one with fewer, each with workers of its own): the
  baseline and the remedied loop take turns, step by step where no loader workers are
  involved, else in blocks of ``steps`` steps (longer than the loaders' prefetch depth), and
  each pair's difference (baseline less remedy) is one sample. A slow spell of the machine,
  which lasts about a second on a shared VM, lands on both halves of a pair and cancels in its
  difference. The achieved saving is the median of the pairs' differences, with the 95%
  bootstrap interval of that median (``median_interval``), as a share of the baseline's median
  step in the same pairs: the unprofiled step the estimate is stated on.
- **unpaired rounds** (``bench_advice.time_variants``), for a remedy that cannot live beside
  its baseline (``torch.compile`` changes the process for every copy of the model): every loop
  takes a turn of ``steps`` steps per round, and a round's saving is its baseline turn less the
  remedied turn next to it.

Each pair alternates which half runs first (baseline-remedy, then remedy-baseline), so that a
machine speeding up or slowing down across a pair favours neither; with several remedies the
cycle visits them in a rotating order.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from scenario_types import Loop

#: The rules whose remedies can run beside their baselines in one process: a second copy of
#: the model with its own optimizer, a second DataLoader with workers of its own.
PAIRABLE_RULES = frozenset({"optimizer", "input-pipeline"})
#: The rules whose remedies put DataLoader workers in the loop: their pairs run in blocks.
LOADER_RULES = frozenset({"input-pipeline"})

#: The loop ``bench_advice.time_variants`` and ``paired_variants`` time under a step timer:
#: another "before", beside the rounds or pairs, for the ``[window ]`` diagnosis.
WINDOW = "window"
#: Before each turn of a loop with loader workers, wait this long (the loop that ran before
#: may have loader workers still making the batches they prefetch, about 20 ms of work in the
#: benchmark's scenarios, which would run beside this loop's steps: each loader is drained
#: before the other's turn), then run this many steps untimed: the turn's loop had its
#: prefetched batches made while the other loops ran, and its first steps would take them for
#: free (one worker, ``prefetch_factor=2``: two).
SETTLE_S = 0.05
LEAD_STEPS = 2
#: ... and untimed steps go on until this long into the turn. A loop whose worker slept through
#: the other loops' turns runs its first steps slower than its steady state: on a 2-core VM,
#: ``paddle-demo``'s step fed by one worker took about 2.3 ms for its first 20 to 25 steps
#: after a 50 ms pause (some 50 ms), then 2.05 ms, while the same step on a batch in hand
#: settled within 3 steps. A user's loop pays that once, not once per block.
LEAD_S = 0.1


def start_turn(loop: Loop) -> None:
    """Ready ``loop`` for a timed turn after other loops ran: ``SETTLE_S`` of pause, then
    ``LEAD_STEPS`` untimed steps and more until ``LEAD_S`` into the turn."""
    time.sleep(SETTLE_S)
    lead = time.perf_counter() + LEAD_S
    for _ in range(LEAD_STEPS):
        loop.step()
    while time.perf_counter() < lead:
        loop.step()


def timed_round(loop: Loop, steps: int) -> dict[str, Any]:
    """The record of a step timer of its own over ``steps`` steps of ``loop`` (closed after
    them, so its phase timers time no other loop)."""
    import perfkit_core

    timer = perfkit_core.step_timer(None, warmup=0)
    for _ in range(steps):
        with timer.step():
            loop.step()
    timer.close()
    return timer.record()


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """(median, low, high): the median of ``values`` and its percentile bootstrap interval, with
    the confidence, resamples and seed of ``perfkit compare``'s intervals."""
    import numpy as np

    from perfkit_core.comparison.statistics import CONFIDENCE, RESAMPLES, SEED

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(SEED)
    medians = np.median(rng.choice(data, size=(RESAMPLES, len(data))), axis=1)
    tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return float(np.median(data)), float(low), float(high)


@dataclass
class Timing:
    """What timing a scenario's loops gave: ``before_ns`` the baseline's median step (ns);
    ``savings[name]`` each sample of the remedied loop ``name``'s saving (ns per step: a pair's
    or a round's baseline less the remedy), aligned across names (sample i of every name comes
    from the same cycle or round); ``method`` says which method gave them."""

    before_ns: float
    savings: dict[str, list[float]]
    method: str
    steps: dict[str, list[float]] = field(default_factory=dict)

    def saving(self, name: str) -> tuple[float, float, float]:
        """(median, low, high) of ``name``'s saving samples (ns per step), 95% bootstrap."""
        return median_interval(self.savings[name])


def pairable(rules: set[str] | frozenset[str]) -> bool:
    """Whether every remedy of ``rules`` can run beside its baseline in one process."""
    return bool(rules) and set(rules) <= PAIRABLE_RULES


def _block(loop: Loop, steps: int, loaders: bool) -> float:
    """One turn of ``loop``: its mean step (ns) over ``steps`` timed steps, after
    ``start_turn`` where loader workers are involved."""
    if loaders:
        start_turn(loop)
    start = time.perf_counter_ns()
    for _ in range(steps):
        loop.step()
    return (time.perf_counter_ns() - start) / steps


def paired_variants(
    loops: dict[str, Loop],
    steps: int,
    rounds: int,
    loaders: bool,
    records: list[dict[str, Any]] | None = None,
    slowdowns_of: str = "",
) -> Timing:
    """Time each loop of ``loops`` but ``"before"`` (and ``WINDOW``) paired with ``"before"``.

    Without loader workers (``loaders`` false) each pair is one step of the baseline and one
    of the remedy, ``rounds * steps`` pairs per remedy; with them, each half of a pair is a
    block of ``steps`` timed steps after ``start_turn`` (so no loader's workers run beside the
    other's block or hand it batches made before it), ``rounds`` pairs per remedy. The cycle
    visits the remedies in a rotating order and each pair alternates which half runs first.
    The ``WINDOW`` loop, where given, runs a ``timed_round`` of ``steps`` steps once every
    ``steps`` steps' worth of pairs, whose record goes to ``records`` (with the slowdowns of
    ``slowdowns_of``'s ops and a worker's loading beside each other, where named)."""
    block = steps if loaders else 1
    cycles = rounds if loaders else rounds * steps
    before = loops["before"]
    window = loops.get(WINDOW)
    names = [name for name in loops if name not in ("before", WINDOW)]
    records = [] if records is None else records
    for loop in loops.values():
        for _ in range(3):
            loop.step()
    savings: dict[str, list[float]] = {name: [] for name in names}
    timed: dict[str, list[float]] = {"before": [], **{name: [] for name in names}}
    for cycle in range(cycles):
        shift = cycle % len(names)
        for name in names[shift:] + names[:shift]:
            pair = [("before", before), (name, loops[name])]
            if cycle % 2:
                pair.reverse()
            got = {half: _block(loop, block, loaders) for half, loop in pair}
            savings[name].append(got["before"] - got[name])
            timed["before"].append(got["before"])
            timed[name].append(got[name])
        if window is not None and (loaders or cycle % steps == steps - 1):
            start_turn(window)
            records.append(timed_round(window, steps))
            if slowdowns_of:
                from perfkit_core.capture.machine_costs import corun_slowdowns

                records[-1]["slowdowns"] = corun_slowdowns(slowdowns_of)
    how = (
        f"paired: {cycles} pairs of {block}-step blocks each"
        if loaders
        else f"paired: {cycles} pairs of single steps each"
    )
    return Timing(statistics.median(timed["before"]), savings, how, timed)
