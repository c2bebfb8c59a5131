"""Benchmark: every summary view of a ~500k-event run against loading that run.

Target (issue "unified summaries"): computing all views of a 500k-event run together takes at
most half the time of loading the run (views/load <= 0.50).

Method: the ~220 MB chrome trace of the 200-step torch MLP run (``_workload.py``, cached in
``bench/out/`` by ``bench_load.py``, made here if absent) is loaded with
``perfkit_core.load(path)`` and timed; then every registered view is computed once on that
run, in report order, each timed on its own, and the sum is compared with the load time. The
run's caches (self time, launch links, device time) are part of the views' cost: they are empty
before the first view. ``--repeat`` runs the whole sequence on fresh loads and reports medians.

Run: ``python bench/bench_views.py [--trace PATH] [--repeat K]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

from _workload import DEFAULT_STEPS, OUT_DIR

TARGET_RATIO = 0.5
ORDER = (
    "model",
    "overview",
    "device",
    "operator",
    "user",
    "kernel",
    "memcpy",
    "memory",
    "distributed",
    "steps",
    "benchmark",
)


def _trace(path: str | None) -> Path:
    if path:
        return Path(path)
    cached = OUT_DIR / f"torch_mlp_steps{DEFAULT_STEPS}.json"
    if not cached.is_file():
        import subprocess

        subprocess.run(
            [sys.executable, str(Path(__file__).with_name("bench_load.py")), "--repeat", "1"],
            check=True,
        )
    return cached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--trace", help="a Kineto chrome trace (default: the cached 200-step trace)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="fresh load + all views, this many times"
    )
    args = parser.parse_args(argv)

    import perfkit_core
    from perfkit_core.views import registered_views

    trace = _trace(args.trace)
    views = [v for v in ORDER if v in registered_views()] + sorted(
        set(registered_views()) - set(ORDER)
    )
    loads: list[float] = []
    per_view: dict[str, list[float]] = {v: [] for v in views}
    events = 0
    for _ in range(max(args.repeat, 1)):
        gc.collect()
        started = time.perf_counter()
        run = perfkit_core.load(trace)
        loads.append(time.perf_counter() - started)
        events = len(run.events)
        for view in views:
            started = time.perf_counter()
            run.summary(view)
            per_view[view].append(time.perf_counter() - started)
        del run
    load_s = statistics.median(loads)
    print(
        f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB), {events:,} events; medians of {len(loads)} run(s)"
    )
    print(f"  {'perfkit_core.load(path)':<28} {load_s:7.3f} s   1.00")
    total = 0.0
    for view in views:
        t = statistics.median(per_view[view])
        total += t
        print(f"  view {view:<23} {t:7.3f} s   {t / load_s:4.2f}")
    ratio = total / load_s
    print(f"  {'all views together':<28} {total:7.3f} s   {ratio:4.2f}")
    passed = ratio <= TARGET_RATIO
    print(
        f"target: all views / load <= {TARGET_RATIO:.2f}: {'PASS' if passed else 'FAIL'} (ratio {ratio:.2f})"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
