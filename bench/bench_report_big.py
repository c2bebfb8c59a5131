"""Benchmark: ``perfkit report`` of one big torch trace, its peak memory against the file's size.

Target: the whole ``perfkit report TRACE`` (load, every default view, advice, text rendered)
of a trace of over 500 MB peaks under 2x the file's size in RSS.

The trace is the torch MLP training run of ``_workload.py`` (the one ``bench_load.py`` uses)
profiled for ``--steps`` steps (default 520: ~570 MB, ~1.4 million events), cached in
``bench/out/``; ``--trace PATH`` uses another. The report runs in a fresh subprocess,
``python -m perfkit_core report TRACE -o FILE``, and its peak RSS is the child's ``ru_maxrss``.

Run: ``python bench/bench_report_big.py [--steps N] [--trace PATH]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_load import cached_trace, warm_page_cache

TARGET = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=520)
    parser.add_argument("--trace", type=Path)
    args = parser.parse_args()
    path = args.trace or cached_trace(args.steps)
    warm_page_cache(path)
    size = path.stat().st_size
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.txt"
        began = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "perfkit_core", "report", str(path), "-o", str(out)],
            cwd=tmp,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])),
        )
        # This child's own rusage (the trace's generation, if it ran, was another child).
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - began
        if child.returncode != 0:
            print(f"perfkit report failed (exit {child.returncode})")
            return 1
        lines = len(out.read_text().splitlines())
    peak = usage.ru_maxrss * 1024
    ratio = peak / size
    print(f"trace: {path} ({size / 1e6:.0f} MB)")
    print(
        f"perfkit report: {seconds:.1f} s, peak RSS {peak / 1e6:.0f} MB ({ratio:.2f}x the file), {lines} lines"
    )
    ok = ratio <= TARGET
    print(f"target: peak RSS <= {TARGET:.1f}x the file: {'PASS' if ok else 'FAIL'} ({ratio:.2f}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
