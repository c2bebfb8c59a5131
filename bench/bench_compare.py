"""Benchmark: comparing two ~500k-event runs, against loading one, and against HTA's TraceDiff.

Target (issue "comparison that explains"): the whole comparison of two loaded runs (the verdict,
every attribution table, steps and totals, and the report model) takes at most the time of
loading one of them (compare/load <= 1.0): explaining a difference may cost no more than reading
a run does.

Method: the ~220 MB chrome trace of the 200-step torch MLP run (``_workload.py``, cached in
``bench/out/`` by ``bench_load.py``, made here if absent) is loaded twice with
``perfkit_core.load`` (each load timed); ``perfkit_core.compare`` then builds the verdict, every
comparison table and the report model, timed together (the runs' caches are empty before, as
after a fresh load). Peer, when ``holistictraceanalysis`` is installed: HTA parses the same trace
into a ``LabeledTrace`` for each side and ``TraceDiff.compare_traces`` diffs operator counts and
durations of every iteration, both timed. HTA's diff is the closest peer; it lines ops up by name
and says nothing about which run is faster or why, so the ratio compares cost, not output.
``--repeat`` repeats everything and reports medians.

Run: ``python bench/bench_compare.py [--trace PATH] [--repeat K]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _workload import DEFAULT_STEPS, OUT_DIR

TARGET_RATIO = 1.0


def _trace(path: str | None) -> Path:
    if path:
        return Path(path)
    cached = OUT_DIR / f"torch_mlp_steps{DEFAULT_STEPS}.json"
    if not cached.is_file():
        import subprocess

        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("bench_load.py")),
                "--generate",
                "--steps",
                str(DEFAULT_STEPS),
            ],
            check=True,
        )
    return cached


def _perfkit(trace: Path) -> tuple[float, float, int]:
    """(seconds per load, seconds for the whole comparison, events per run)."""
    import perfkit_core
    from perfkit_core.comparison import VIEWS
    from perfkit_core.report import build_comparison_report

    gc.collect()
    started = time.perf_counter()
    base = perfkit_core.load(trace)
    cand = perfkit_core.load(trace)
    load_s = (time.perf_counter() - started) / 2
    started = time.perf_counter()
    comparison = perfkit_core.compare(base, cand, labels=["base", "new"])
    comparison.verdict()
    for view in VIEWS:
        comparison.summary(view)
    build_comparison_report(comparison, gate=comparison.gate(5.0))
    compare_s = time.perf_counter() - started
    return load_s, compare_s, len(base.events)


def _hta(trace: Path) -> tuple[float, float] | None:
    """(seconds per parse, seconds for the diff) with HTA, or None when it is not installed."""
    try:
        from hta.trace_diff import LabeledTrace, TraceDiff
    except ImportError:
        return None
    import logging

    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = Path(tempfile.mkdtemp(prefix="bench_compare_"))
    try:
        (folder / "rank0.json").symlink_to(trace.resolve())
        gc.collect()
        started = time.perf_counter()
        base = LabeledTrace(label="base", trace_dir=str(folder))
        cand = LabeledTrace(label="new", trace_dir=str(folder))
        parse_s = (time.perf_counter() - started) / 2
        iterations = base.iterations()
        started = time.perf_counter()
        TraceDiff.compare_traces(
            base, cand, control_iteration=iterations, test_iteration=iterations
        )
        diff_s = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return parse_s, diff_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--trace", help="a Kineto chrome trace (default: the cached 200-step trace)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="repeat everything, take medians")
    args = parser.parse_args(argv)
    trace = _trace(args.trace)
    loads, compares, parses, diffs = [], [], [], []
    events = 0
    for _ in range(max(args.repeat, 1)):
        load_s, compare_s, events = _perfkit(trace)
        loads.append(load_s)
        compares.append(compare_s)
        peer = _hta(trace)
        if peer is not None:
            parses.append(peer[0])
            diffs.append(peer[1])
    load_s, compare_s = statistics.median(loads), statistics.median(compares)
    print(
        f"trace: {trace} ({trace.stat().st_size / 1e6:.1f} MB), {events:,} events per run; "
        f"medians of {len(loads)} run(s); ratios against one perfkit load"
    )
    print(f"  {'perfkit_core.load (one run)':<36} {load_s:7.2f} s   1.00")
    print(f"  {'perfkit compare (all, 2 runs)':<36} {compare_s:7.2f} s   {compare_s / load_s:4.2f}")
    if parses:
        parse_s, diff_s = statistics.median(parses), statistics.median(diffs)
        print(f"  {'HTA LabeledTrace (one run)':<36} {parse_s:7.2f} s   {parse_s / load_s:4.2f}")
        print(f"  {'HTA TraceDiff.compare_traces':<36} {diff_s:7.2f} s   {diff_s / load_s:4.2f}")
    else:
        print("  HTA not installed (pip install holistictraceanalysis): no peer figures")
    ratio = compare_s / load_s
    passed = ratio <= TARGET_RATIO
    print(
        f"target: compare / load <= {TARGET_RATIO:.2f}: {'PASS' if passed else 'FAIL'} "
        f"(ratio {ratio:.2f})"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
