"""Benchmark: perfkit's torch ``on_trace_ready`` handler against ``prof.export_chrome_trace``.

Target: on a ~500k-event profile, the handler (``perfkit_torch.on_trace_ready(dir)``: it exports
the chrome trace, converts it into a perfkit run and saves ``events.parquet`` + ``meta.json``)
takes at most 2x what torch's own ``prof.export_chrome_trace(path)`` takes (handler/export <= 2.00).

What is measured: one real torch CPU training run (see ``_workload.py``; ``--steps`` profiled
steps per cycle, default 200, ~545k events, a ~220 MB trace), timed inside ``on_trace_ready``:
the wall time of ``prof.export_chrome_trace(path)`` alone, and that of calling a perfkit handler
with the profiler. torch exports a profile only once (a second ``export_chrome_trace`` of the
same cycle raises "Trace is already saved."), so the two are timed on *different cycles of
the same run*, each recording the same ``--steps`` steps: ``--repeat`` pairs of cycles, in the
order export/handler, handler/export, ... to even out drift. The verdict uses the ratio of the
medians. An untimed warm-up (a 2-step profile through a throwaway handler) comes first, so
imports are not timed. Also reported: the rows of the first saved run
(``len(perfkit_core.load(handler.runs[0]).events)``) and ``handler.failures`` (must be empty).

Everything is written under ``bench/out/`` (gitignored) and removed afterwards.

Run: ``python bench/bench_handler.py [--steps N] [--repeat K]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _workload import DEFAULT_STEPS, OUT_DIR, profile_training

TARGET_RATIO = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help="profiled steps per cycle (default %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="rounds of export/handler/in-process cycles (default %(default)s)",
    )
    args = parser.parse_args(argv)
    repeat = max(args.repeat, 1)

    import perfkit_core
    import perfkit_torch

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT_DIR, prefix="handler-") as tmp:
        work = Path(tmp)
        handler = perfkit_torch.on_trace_ready(work / "runs")
        sync_handler = perfkit_torch.on_trace_ready(work / "sync", background=False)
        export_s: list[float] = []
        handler_s: list[float] = []
        saved_s: list[float] = []
        sync_s: list[float] = []
        trace_mb: list[float] = []
        cycle = 0
        kinds = ("export", "handler", "sync")

        def on_trace_ready(prof: Any) -> None:
            nonlocal cycle
            rnd, pos = divmod(cycle, len(kinds))
            cycle += 1
            kind = kinds[(pos + rnd) % len(kinds)]  # rotate the order round by round
            started = time.perf_counter()
            if kind == "export":
                native = work / f"native{cycle}.pt.trace.json"
                prof.export_chrome_trace(str(native))
                export_s.append(time.perf_counter() - started)
                trace_mb.append(native.stat().st_size / 1e6)
                native.unlink()
                print(
                    f"  cycle {cycle}: prof.export_chrome_trace      {export_s[-1]:7.3f} s",
                    flush=True,
                )
            elif kind == "handler":
                handler(prof)
                handler_s.append(time.perf_counter() - started)
                handler.wait()
                saved_s.append(time.perf_counter() - started)
                print(
                    f"  cycle {cycle}: perfkit handler (background) {handler_s[-1]:7.3f} s,"
                    f" run saved after {saved_s[-1]:.3f} s",
                    flush=True,
                )
            else:
                sync_handler(prof)
                sync_s.append(time.perf_counter() - started)
                print(
                    f"  cycle {cycle}: perfkit handler (in-process) {sync_s[-1]:7.3f} s", flush=True
                )

        # Untimed: a tiny profile through throwaway handlers, so lazy imports (pandas, pyarrow,
        # the plugin manager) and the start of the helper process are not timed.
        warm = perfkit_torch.on_trace_ready(work / "warmup")
        profile_training(2, warm)
        warm.wait()
        profile_training(2, perfkit_torch.on_trace_ready(work / "warmup2", background=False))
        print(
            f"profiling {len(kinds) * repeat} cycles of {args.steps} steps of the torch MLP...",
            flush=True,
        )
        started = time.perf_counter()
        profile_training(args.steps, on_trace_ready, cycles=len(kinds) * repeat)
        print(f"training, exports and handler calls took {time.perf_counter() - started:.1f} s")

        failures = handler.failures + sync_handler.failures
        saved = [perfkit_core.load(path) for path in handler.runs]
        rows = len(saved[0].events) if saved else 0
        in_files = [int(r.meta.get("accounting", {}).get("events_in_file", 0)) for r in saved]
        saved_mb = sum(f.stat().st_size for f in handler.runs[0].iterdir()) / 1e6 if saved else 0.0
        n_runs = len(handler.runs) + len(sync_handler.runs)

    export_med = statistics.median(export_s)
    handler_med, saved_med, sync_med = (statistics.median(x) for x in (handler_s, saved_s, sync_s))
    ratio = handler_med / export_med
    print()
    print(
        f"profile: {args.steps} steps per cycle; native traces {min(trace_mb):.1f}-{max(trace_mb):.1f} MB; "
        f"events in the handler's traces {min(in_files, default=0):,}-{max(in_files, default=0):,}"
    )
    print(f"{repeat} cycle(s) each; median (best); ratio to the export's median")
    print(
        f"  prof.export_chrome_trace(path)             {export_med:7.3f} s ({min(export_s):.3f})   1.00"
    )
    print(
        f"  on_trace_ready(dir): training loop waits   {handler_med:7.3f} s ({min(handler_s):.3f})"
        f"  {ratio:5.2f}   export, then conversion queued to the helper process"
    )
    print(
        f"  on_trace_ready(dir): run saved after       {saved_med:7.3f} s ({min(saved_s):.3f})"
        f"  {saved_med / export_med:5.2f}   export + convert + save, end to end"
    )
    print(
        f"  on_trace_ready(dir, background=False)      {sync_med:7.3f} s ({min(sync_s):.3f})"
        f"  {sync_med / export_med:5.2f}   everything inside the callback"
    )
    print(
        f"saved runs: {n_runs}; len(perfkit_core.load(handler.runs[0]).events) = {rows:,} "
        f"({saved_mb:.1f} MB on disk)"
    )
    print(f"handler.failures: {failures}")
    passed = ratio <= TARGET_RATIO and not failures and rows > 0
    print(
        f"target: time the training loop waits in the handler / export <= {TARGET_RATIO:.2f} "
        f"with no failures: {'PASS' if passed else 'FAIL'} (median ratio {ratio:.2f})"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
