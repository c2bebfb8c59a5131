"""Benchmark: ``perfkit_core.load()`` of a ~200 MB torch chrome trace against plain JSON parsers.

Targets on a ~220 MB / ~500k-event Kineto trace: ``perfkit_core.load(path)`` takes at most half
the time of ``orjson.loads`` of the same bytes (perfkit/orjson <= 0.50), no longer than
``orjson.loads`` with the garbage collector off (<= 1.00), and at most twice the time of reading
the same file and parsing it with simdjson (perfkit/simdjson <= 2.00); its peak RSS is at most
284 MB (the load's peak before the loader was last reworked) and at most 0.3x that of HTA's
``TraceAnalysis`` loading the same file.

What is measured, each in its own fresh subprocess (so peak RSS, ``ru_maxrss``, belongs to one
tool and the imports of one tool do not pollute another), ``--repeat`` times, interleaved:

* ``orjson.loads(data)``: the parse only; the bytes are read into memory before the clock starts.
* the same with the cyclic garbage collector disabled (for information: perfkit disables it
  while loading, orjson/json callers usually do not).
* ``json.loads(data)`` from the standard library: the parse only, as above.
* ``simdjson.Parser().parse(path.read_bytes())`` (pysimdjson): reading the file *and* parsing it,
  as perfkit's row does (simdjson's parse builds its own document, not Python objects; the
  events are counted through it).
* ``perfkit_core.load(path)``: the whole call, *including reading the file* (from the page
  cache) and building the event table. Imports and one tiny warm-up load happen first, untimed.
* ``hta.trace_analysis.TraceAnalysis(trace_dir=...)`` of a folder holding only this trace
  (HolisticTraceAnalysis, when installed): its whole load, once by default (``--hta-repeat``).

Every subprocess first reads the trace once so it comes from the page cache, not the disk.
"base MB" is the peak RSS just before the timed call (interpreter, imports and, for the JSON
parsers, the input bytes); "peak MB" is the peak RSS at the end.

The trace is made by a real torch CPU training run (see ``_workload.py``): ``--steps`` profiled
steps (default 200, ~500k events), exported with ``prof.export_chrome_trace`` inside an
``on_trace_ready`` function, and cached in ``bench/out/`` for later runs. ``--trace PATH`` uses
an existing trace instead.

Run: ``python bench/bench_load.py [--steps N] [--trace PATH] [--repeat K]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _workload import DEFAULT_STEPS, OUT_DIR, profile_training

#: Targets: perfkit's time over orjson.loads with the garbage collector on, and off; its peak
#: RSS over HTA's TraceAnalysis load of the same file.
TARGET_RATIO = 0.5
TARGET_RATIO_NOGC = 1.0
TARGET_RSS_VS_HTA = 0.3
#: Targets: perfkit's time over reading the file and parsing it with simdjson, and its peak
#: RSS in MB.
TARGET_RATIO_SIMDJSON = 2.0
TARGET_PEAK_MB = 284.0
CHUNK = 16 * 1024 * 1024

#: Tool key -> label in the table; the order in which they run and are printed.
TOOLS: dict[str, str] = {
    "orjson": "orjson.loads(bytes)",
    "orjson-nogc": "orjson.loads(bytes), gc off",
    "json": "json.loads(bytes) (stdlib)",
    "simdjson": "simdjson read + parse(path) *",
    "perfkit": "perfkit_core.load(path) *",
    "hta": "HTA TraceAnalysis(trace_dir) *",
}
BASELINE = "orjson"


@dataclass
class Sample:
    """One measurement, as a worker subprocess reports it."""

    seconds: float
    base_mb: float
    peak_mb: float
    events: int
    rows: int | None


# --------------------------------------------------------------------------- the trace


def cached_trace(steps: int) -> Path:
    """Return the cached trace of a ``steps``-step profile, making it first when absent.

    The profile runs in a subprocess: a child inherits the peak RSS of its parent (through
    fork and exec), so a parent that had held the 2 GB torch profile would inflate every
    worker's ``ru_maxrss``.
    """
    path = OUT_DIR / f"torch_mlp_steps{steps}.json"
    if path.is_file() and path.stat().st_size > 0:
        print(f"using cached trace {path}")
        return path
    print(
        f"generating {path} with a {steps}-step torch profile (takes a minute or two)...",
        flush=True,
    )
    started = time.perf_counter()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--generate", "--steps", str(steps)]
    subprocess.run(cmd, check=True)
    print(f"generated in {time.perf_counter() - started:.1f} s")
    return path


def generate_trace(steps: int) -> Path:
    """Profile ``steps`` training steps and export the chrome trace to the cache; return it."""
    path = OUT_DIR / f"torch_mlp_steps{steps}.json"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    def export(prof: Any) -> None:
        prof.export_chrome_trace(str(tmp))

    try:
        profile_training(steps, export)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def warm_page_cache(path: Path) -> None:
    """Read ``path`` once in chunks so the next reads come from the page cache."""
    with open(path, "rb") as fh:
        while fh.read(CHUNK):
            pass


# --------------------------------------------------------------------------- worker side

#: A tiny Kineto trace loaded once before the timed call, so lazy imports are not timed.
_WARMUP_TRACE = {
    "schemaVersion": 1,
    "traceEvents": [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0.0,
            "dur": 9.0,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 1.0,
            "dur": 2.0,
            "args": {
                "External id": 1,
                "Sequence number": 0,
                "Input Dims": [[2, 2], [2, 2]],
                "Input type": ["float", "float"],
            },
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "MmBackward0",
            "pid": 1,
            "tid": 2,
            "ts": 5.0,
            "dur": 2.0,
            "args": {"External id": 2, "Sequence number": 0},
        },
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 0, "pid": 1, "tid": 1, "ts": 1.0},
        {
            "ph": "f",
            "cat": "fwdbwd",
            "name": "fwdbwd",
            "id": 0,
            "pid": 1,
            "tid": 2,
            "ts": 5.0,
            "bp": "e",
        },
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    ],
}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _not_installed() -> dict[str, Any]:
    """A worker's result for a tool that is not installed: no figures, printed as such."""
    return {
        "seconds": float("nan"),
        "base_mb": float("nan"),
        "peak_mb": float("nan"),
        "events": 0,
        "rows": None,
    }


def worker(tool: str, path: Path) -> dict[str, Any]:
    """Measure ``tool`` on ``path`` in this (fresh) process; return what ``Sample`` holds."""
    warm_page_cache(path)
    rows: int | None = None
    if tool == "perfkit":
        import perfkit_core

        with tempfile.TemporaryDirectory() as tmp:
            warmup = Path(tmp) / "warmup.json"
            warmup.write_text(json.dumps(_WARMUP_TRACE))
            perfkit_core.load(warmup)
        base = _peak_mb()
        started = time.perf_counter()
        run = perfkit_core.load(path)
        seconds = time.perf_counter() - started
        events = int(run.meta["accounting"]["events_in_file"])
        rows = len(run.events)
    elif tool in ("orjson", "orjson-nogc", "json"):
        import gc

        parse: Callable[[bytes], Any]
        if tool == "json":
            parse = json.loads
        else:
            import orjson

            parse = orjson.loads
        data = path.read_bytes()
        if tool == "orjson-nogc":
            gc.disable()
        base = _peak_mb()
        started = time.perf_counter()
        obj = parse(data)
        seconds = time.perf_counter() - started
        events = len(obj["traceEvents"])
    elif tool == "simdjson":
        try:
            import simdjson
        except ImportError:
            return _not_installed()
        parser = simdjson.Parser()
        base = _peak_mb()
        started = time.perf_counter()
        doc = parser.parse(path.read_bytes())
        seconds = time.perf_counter() - started
        events = len(doc["traceEvents"])
    elif tool == "hta":
        try:
            from hta.trace_analysis import TraceAnalysis
        except ImportError:
            return _not_installed()
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "rank0.json").symlink_to(path.resolve())
            base = _peak_mb()
            started = time.perf_counter()
            analysis = TraceAnalysis(trace_dir=tmp)
            seconds = time.perf_counter() - started
            rows = len(analysis.t.get_trace(0))
            events = 0
    else:
        raise SystemExit(f"unknown tool {tool!r}")
    return {
        "seconds": seconds,
        "base_mb": base,
        "peak_mb": _peak_mb(),
        "events": events,
        "rows": rows,
    }


# --------------------------------------------------------------------------- parent side


def measure(tool: str, path: Path) -> Sample:
    """Run one worker subprocess for ``tool`` and return its measurement."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", tool, "--trace", str(path)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, cwd=tempfile.gettempdir()
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} worker failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return Sample(**json.loads(proc.stdout.strip().splitlines()[-1]))


def report(path: Path, samples: dict[str, list[Sample]]) -> bool:
    """Print the table and the verdict; return whether the target is met."""
    size_mb = path.stat().st_size / 1e6
    events = {s.events for runs in samples.values() for s in runs if s.events}
    rows = next((s.rows for s in samples["perfkit"] if s.rows is not None), None)
    repeat = len(samples[BASELINE])
    print()
    print(
        f"trace: {path} ({size_mb:.1f} MB, {max(events):,} events in the file; perfkit table: {rows:,} rows)"
    )
    print(
        f"each tool: {repeat} fresh subprocess(es), interleaved; times are the median and the best"
    )
    if len(events) > 1:
        print(f"WARNING: the tools disagree on the number of events: {sorted(events)}")
    base_median = statistics.median(s.seconds for s in samples[BASELINE])
    base_best = min(s.seconds for s in samples[BASELINE])
    simd_median = statistics.median(s.seconds for s in samples["simdjson"])
    header = (
        f"{'tool':<30} {'median s':>9} {'best s':>8} {'ratio med':>10} {'ratio best':>11} "
        f"{'/simdjson':>10} {'base MB':>8} {'peak MB':>8}"
    )
    print(header)
    print("-" * len(header))
    for tool, label in TOOLS.items():
        runs = samples[tool]
        if not runs:  # HTA with --hta-repeat 0
            continue
        median = statistics.median(s.seconds for s in runs)
        best = min(s.seconds for s in runs)
        base = max(s.base_mb for s in runs)
        peak = max(s.peak_mb for s in runs)
        print(
            f"{label:<30} {median:>9.3f} {best:>8.3f} {median / base_median:>10.2f} "
            f"{best / base_best:>11.2f} {median / simd_median:>10.2f} {base:>8.0f} {peak:>8.0f}"
        )
    print("* perfkit, simdjson and HTA times include reading the file (page cache); orjson/json")
    print("  time the parse of bytes already in memory. ratio = tool / orjson.loads; /simdjson =")
    print("  tool / (read + simdjson parse), medians; MB = peak RSS (ru_maxrss).")
    perfkit = statistics.median(s.seconds for s in samples["perfkit"])
    nogc = statistics.median(s.seconds for s in samples["orjson-nogc"])
    verdicts = [
        (f"perfkit/orjson <= {TARGET_RATIO:.2f}", perfkit / base_median, TARGET_RATIO),
        (f"perfkit/orjson (gc off) <= {TARGET_RATIO_NOGC:.2f}", perfkit / nogc, TARGET_RATIO_NOGC),
    ]
    if simd_median == simd_median:  # pysimdjson installed
        verdicts.append(
            (
                f"perfkit/simdjson (both read the file) <= {TARGET_RATIO_SIMDJSON:.2f}",
                perfkit / simd_median,
                TARGET_RATIO_SIMDJSON,
            )
        )
    else:
        print("pysimdjson is not installed (pip install pysimdjson -c constraints.txt)")
    perfkit_peak = max(s.peak_mb for s in samples["perfkit"])
    verdicts.append((f"perfkit peak RSS MB <= {TARGET_PEAK_MB:.0f}", perfkit_peak, TARGET_PEAK_MB))
    hta_peak = max((s.peak_mb for s in samples["hta"]), default=None)
    if hta_peak is None:
        print("HTA was not timed (--hta-repeat 0)")
    elif hta_peak == hta_peak:  # HTA installed
        peak = max(s.peak_mb for s in samples["perfkit"])
        verdicts.append(
            (
                f"perfkit peak RSS / HTA's <= {TARGET_RSS_VS_HTA:.2f}",
                peak / hta_peak,
                TARGET_RSS_VS_HTA,
            )
        )
    else:
        print("HTA is not installed (pip install HolisticTraceAnalysis -c constraints.txt)")
    passed = True
    for label, value, limit in verdicts:
        ok = value <= limit
        passed &= ok
        figure = f"{value:.0f} MB" if "MB" in label else f"median ratio {value:.2f}"
        print(f"target: {label}: {'PASS' if ok else 'FAIL'} ({figure})")
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help="profiled steps of the generated trace (default %(default)s)",
    )
    parser.add_argument(
        "--trace", type=Path, help="use this chrome trace instead of generating one"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="fresh subprocesses per tool (default %(default)s)"
    )
    parser.add_argument(
        "--hta-repeat",
        type=int,
        default=1,
        help="HTA subprocesses (default %(default)s; ~1 min each)",
    )
    parser.add_argument("--worker", choices=sorted(TOOLS), help=argparse.SUPPRESS)
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.generate:
        generate_trace(args.steps)
        return 0

    if args.worker:
        result = worker(args.worker, args.trace)
        print(json.dumps(result), flush=True)
        os._exit(0)  # skip freeing the parsed objects: nothing is measured after this

    path = args.trace or cached_trace(args.steps)
    warm_page_cache(path)
    samples: dict[str, list[Sample]] = {tool: [] for tool in TOOLS}
    for i in range(max(args.repeat, 1)):
        for tool in TOOLS:
            if tool == "hta" and i >= args.hta_repeat:
                continue
            sample = measure(tool, path)
            samples[tool].append(sample)
            print(
                f"  round {i + 1}: {tool:<12} {sample.seconds:7.3f} s  peak {sample.peak_mb:6.0f} MB",
                flush=True,
            )
    return 0 if report(path, samples) else 1


if __name__ == "__main__":
    sys.exit(main())
