"""The loading side of the co-run replay (``perfkit_core.advice.corun``): Python work like a
Dataset's, and the loop that runs it in a second interpreter.

``corun`` starts this file as a script in a fresh interpreter (``python corun_loading.py NS``),
not as a fork of the training process: a fork copies every lock the framework's threads held,
and a fork that then runs Python can hang on one. As a script it imports only the standard
library and NumPy. It first finds how many samples of loading work run about ``NS`` ns here
(a unit), then reads one command per line on its standard input and answers one line of
numbers on its standard output:

- ``alone``: run three units of loading work and answer their ns;
- ``beside``: answer ``busy``, then run a unit at a time until ``stop`` arrives, and
  answer each unit's ns but the first and the last (which ran partly without the other side);
- ``end`` or the end of its input: stop.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable

#: The Python work that stands in for a Dataset's: per sample, small NumPy transforms of this
#: many floats (normalise, clip, reverse, tanh, sort) and a pure-Python record of a few fields,
#: the interpreter-bound work of a typical per-sample augmentation.
LOADING_SAMPLE_FLOATS = 96


def loading_work(samples: int) -> float:
    """Run ``samples`` samples of the Python work that stands in for a Dataset's; return a
    number made from them (so that none of it is optimised away)."""
    import numpy as np

    total = 0.0
    x = np.linspace(-1.0, 1.0, LOADING_SAMPLE_FLOATS)
    for index in range(samples):
        y = (x - x.mean()) / (x.std() + 1e-6)
        y = np.clip(y * 1.01 + 0.1 * (index % 3), -2.0, 2.0)[::-1]
        y = np.sort(np.tanh(y))
        label, weight, name = index % 10, float(y[0]), f"sample-{index}"
        record = {"label": label, "weight": weight, "name": name}
        total += weight + len(str(record["name"])) + label
        x = y
    return total


def unit_items(work: Callable[[int], object], unit_ns: float) -> int:
    """How many items of ``work`` (``work(n)`` runs ``n``) take about ``unit_ns`` alone here,
    at least 1. A first, untimed call pays for first calls' allocations and cold caches."""
    count = 1
    work(count)
    while True:
        took = _timed(work, count)
        if took >= unit_ns / 4 or count >= 1 << 24:
            return max(int(count * unit_ns / max(took, 1)), 1)
        count *= 4


def _timed(work: Callable[[int], object], items: int) -> int:
    """ns that ``work(items)`` takes."""
    start = time.perf_counter_ns()
    work(items)
    return time.perf_counter_ns() - start


def serve(samples: int, commands: int = 0, answers: int = 1) -> None:
    """Answer the commands read from file descriptor ``commands`` on ``answers`` (above)."""
    pending = b""

    def command(wait: bool) -> str | None:  # the next line, or None when none is there yet
        nonlocal pending
        while b"\n" not in pending:
            if not wait and not select.select([commands], [], [], 0)[0]:
                return None
            chunk = os.read(commands, 4096)
            if not chunk:
                return "end"
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        return line.decode().strip()

    def answer(*numbers: object) -> None:
        os.write(answers, (" ".join(str(n) for n in numbers) + "\n").encode())

    while True:
        said = command(wait=True)
        if said == "alone":
            answer(*(_timed(loading_work, samples) for _ in range(3)))
        elif said == "beside":
            answer("busy")
            times = []
            while command(wait=False) is None:
                times.append(_timed(loading_work, samples))
            answer(*(times[1:-1] or times[-1:]))
        else:
            return


if __name__ == "__main__":
    serve(unit_items(loading_work, float(sys.argv[1])))
