"""Benchmark: answers at the speed of reading. ``perfkit report`` (text and HTML) and ``perfkit
compare`` of the 200-step torch trace against loading it, the report's peak memory, and
perfkit-xla's reader against JAX's own, side by side in one run.

Targets:

* ``perfkit report TRACE`` and ``perfkit report TRACE --format html``: at most 2.0x
  ``perfkit_core.load(TRACE)``;
* ``perfkit compare A B`` of two such traces: at most 2.0x loading both;
* the peak memory of ``perfkit report TRACE``: at most 370 MB;
* ``perfkit_xla.load_xplane`` of a 300-step JAX CPU profile: at most 2.0x JAX's own reader
  (``jax.profiler.ProfileData.from_file``) with a walk over every event's name, start and
  duration.

Method. The traces are the torch MLP training run of ``_workload.py`` profiled for 200 steps
(~545k events, ~220 MB), made and cached by ``bench_load.py`` (the first, seed 0) and here (the
second, the same run with seed 1); the JAX profile is the demo MLP of ``perfkit_xla.demo``
profiled for 300 steps, made and cached by ``bench_xla.py`` (needs jax; without it the XLA rows
are left out). Every measurement is a fresh Python process that does one thing, ``--repeat``
rounds (default 3), the kinds interleaved within a round; figures are medians.

* For the trace rows the time is the whole process, from its start to its exit, as a user waits
  for a command: ``perfkit_core.load(A)``; loading A and B; the CLI's ``main()`` running
  ``report A -o FILE``, ``report A --format html -o FILE`` and ``compare A B -o FILE``. Each
  includes starting Python and importing perfkit, so both sides of a ratio pay that once.
* For the XLA rows the time is the call alone (imports and a warm-up read of the small profile
  in ``tests/data/xla`` come first, untimed): ``load_xplane(X)``, against
  ``ProfileData.from_file(X)`` and the walk.
* Peak memory is the process's ``VmHWM`` (``perfkit_core.jobs.tasks.peak_rss_bytes``), read
  just before it exits.

The load average (``/proc/loadavg``, 1 minute) is printed beside each figure: the benchmark
shares its cores with whatever else runs, and a figure taken under load is slower.

Run: ``python bench/bench_report.py [--repeat K]``. Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _workload import DEFAULT_STEPS, OUT_DIR

REPO = Path(__file__).resolve().parents[1]
TARGET_REPORT = 2.0
TARGET_COMPARE = 2.0
TARGET_PEAK_MB = 370.0
TARGET_XLA = 2.0
XLA_STEPS = 300
#: The small JAX profile read first, untimed, so lazy imports are not timed.
XLA_WARMUP = REPO / "tests" / "data" / "xla" / "jax_mlp" / "plugins" / "profile" / "run"

#: Kind -> label; the order in which a round runs them.
KINDS: dict[str, str] = {
    "load": "perfkit_core.load(A)",
    "report": "perfkit report A",
    "report-html": "perfkit report A --format html",
    "load2": "perfkit_core.load(A), load(B)",
    "compare": "perfkit compare A B",
    "xla": "perfkit_xla.load_xplane(X)",
    "xla-jax": "jax ProfileData(X) + walk",
}
XLA_KINDS = ("xla", "xla-jax")


@dataclass
class Sample:
    """One measurement: the process's wall time, the timed call inside it, its peak memory,
    what it read, and the load average when it started."""

    process_s: float
    call_s: float
    peak_mb: float
    rows: int
    load_average: float


def load_average() -> float:
    """The 1-minute load average (NaN where there is none)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


# --------------------------------------------------------------------------- inputs


def second_trace(steps: int) -> Path:
    """The cached second trace (the run of ``_workload.py`` with seed 1), made when absent."""
    path = OUT_DIR / f"torch_mlp_steps{steps}_seed1.json"
    if not (path.is_file() and path.stat().st_size > 0):
        print(f"generating {path} (a {steps}-step torch profile, seed 1)...", flush=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--generate-second", str(steps)]
        subprocess.run(cmd, check=True)
    return path


def generate_second(steps: int) -> None:
    from _workload import profile_training

    path = OUT_DIR / f"torch_mlp_steps{steps}_seed1.json"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        profile_training(steps, lambda prof: prof.export_chrome_trace(str(tmp)), seed=1)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def xla_profile(steps: int) -> Path | None:
    """The cached JAX profile of ``steps`` steps (made by bench_xla.py in a subprocess), or
    None when jax is not installed."""
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        return None
    code = f"from bench_xla import make_profile; print(make_profile({steps})[0])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- worker side


def worker(kind: str, a: Path, b: Path, xplane: Path | None, out: Path) -> dict[str, Any]:
    """Do ``kind`` in this fresh process; return the call's time, the rows read and the peak."""
    rows = 0
    if kind in XLA_KINDS:
        assert xplane is not None
        if kind == "xla":
            from perfkit_xla import load_xplane

            load_xplane(XLA_WARMUP / "mlp.xplane.pb")
            started = time.perf_counter()
            rows = len(load_xplane(xplane).events)
        else:
            from jax.profiler import ProfileData

            def walk(path: Path) -> int:
                n = 0
                for plane in ProfileData.from_file(str(path)).planes:
                    for line in plane.lines:
                        for event in line.events:
                            _ = (event.name, event.start_ns, event.duration_ns)
                            n += 1
                return n

            walk(XLA_WARMUP / "mlp.xplane.pb")
            started = time.perf_counter()
            rows = walk(xplane)
        call_s = time.perf_counter() - started
    elif kind in ("load", "load2"):
        import perfkit_core

        started = time.perf_counter()
        rows = len(perfkit_core.load(a).events)
        if kind == "load2":
            rows += len(perfkit_core.load(b).events)
        call_s = time.perf_counter() - started
    else:
        from perfkit_core.cli import main

        argv = {
            "report": ["report", str(a), "-o", str(out / "report.txt")],
            "report-html": ["report", str(a), "--format", "html", "-o", str(out / "r.html")],
            "compare": ["compare", str(a), str(b), "-o", str(out / "compare.txt")],
        }[kind]
        started = time.perf_counter()
        code = main(argv)
        call_s = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"perfkit {' '.join(argv)} exited {code}")
    from perfkit_core.jobs.tasks import peak_rss_bytes

    return {"call_s": call_s, "peak_mb": peak_rss_bytes() / 1e6, "rows": rows}


# --------------------------------------------------------------------------- parent side


def measure(kind: str, a: Path, b: Path, xplane: Path | None) -> Sample:
    """Run one fresh process for ``kind``; return its measurement."""
    average = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind]
        cmd += ["--trace", str(a), "--trace2", str(b), "--out", tmp]
        if xplane is not None:
            cmd += ["--xplane", str(xplane)]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env, check=False)
        process_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return Sample(process_s, result["call_s"], result["peak_mb"], result["rows"], average)


def summary(samples: dict[str, list[Sample]]) -> dict[str, dict[str, float]]:
    """Per kind: medians of the process time, the call time and the peak, and the load
    averages seen (lowest and highest)."""
    out = {}
    for kind, runs in samples.items():
        if runs:
            out[kind] = {
                "process_s": statistics.median(s.process_s for s in runs),
                "call_s": statistics.median(s.call_s for s in runs),
                "peak_mb": statistics.median(s.peak_mb for s in runs),
                "rows": runs[0].rows,
                "load_low": min(s.load_average for s in runs),
                "load_high": max(s.load_average for s in runs),
            }
    return out


def verdicts(m: dict[str, dict[str, float]]) -> list[tuple[str, float, float, str]]:
    """(target, value, limit, unit) of each target that was measured."""
    out = []
    load = m["load"]["process_s"]
    for kind, what in (("report", "text"), ("report-html", "html")):
        out.append(
            (
                f"perfkit report ({what}) <= {TARGET_REPORT:.1f}x load",
                m[kind]["process_s"] / load,
                TARGET_REPORT,
                "x",
            )
        )
    out.append(
        (
            f"perfkit compare <= {TARGET_COMPARE:.1f}x two loads",
            m["compare"]["process_s"] / m["load2"]["process_s"],
            TARGET_COMPARE,
            "x",
        )
    )
    out.append(
        (
            f"peak memory of perfkit report <= {TARGET_PEAK_MB:.0f} MB",
            m["report"]["peak_mb"],
            TARGET_PEAK_MB,
            " MB",
        )
    )
    if "xla" in m:
        out.append(
            (
                f"load_xplane <= {TARGET_XLA:.1f}x ProfileData + walk",
                m["xla"]["call_s"] / m["xla-jax"]["call_s"],
                TARGET_XLA,
                "x",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default %(default)s)")
    parser.add_argument("--worker", choices=sorted(KINDS), help=argparse.SUPPRESS)
    parser.add_argument("--trace", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trace2", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--xplane", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--generate-second", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate_second:
        generate_second(args.generate_second)
        return 0
    if args.worker:
        print(json.dumps(worker(args.worker, args.trace, args.trace2, args.xplane, args.out)))
        return 0

    from bench_load import cached_trace, warm_page_cache

    a, b = cached_trace(DEFAULT_STEPS), second_trace(DEFAULT_STEPS)
    xplane = xla_profile(XLA_STEPS)
    for path in (a, b, xplane):
        if path is not None:
            warm_page_cache(path)
    kinds = [k for k in KINDS if xplane is not None or k not in XLA_KINDS]
    samples: dict[str, list[Sample]] = {k: [] for k in kinds}
    for i in range(max(args.repeat, 1)):
        for kind in kinds:
            sample = measure(kind, a, b, xplane)
            samples[kind].append(sample)
            print(
                f"  round {i + 1}: {kind:<12} process {sample.process_s:7.2f} s  call"
                f" {sample.call_s:7.3f} s  peak {sample.peak_mb:6.0f} MB  load {sample.load_average:.2f}",
                flush=True,
            )
    m = summary(samples)
    print()
    print(f"A: {a} ({a.stat().st_size / 1e6:.0f} MB, {m['load']['rows']:,} rows)")
    print(
        f"B: {b} ({b.stat().st_size / 1e6:.0f} MB, {m['load2']['rows'] - m['load']['rows']:,} rows)"
    )
    if xplane is not None:
        print(
            f"X: {xplane} ({xplane.stat().st_size / 1e6:.1f} MB, {XLA_STEPS} steps, {m['xla']['rows']:,} rows)"
        )
    else:
        print("X: jax is not installed: the XLA rows are left out")
    print(f"medians of {args.repeat} rounds, each a fresh process; load = 1-minute load average")
    header = f"{'what':<32} {'process s':>10} {'call s':>9} {'peak MB':>8} {'ratio':>7}  load"
    print(header)
    print("-" * len(header))
    bases = {"report": "load", "report-html": "load", "compare": "load2", "xla": "xla-jax"}
    for kind, label in KINDS.items():
        if kind not in m:
            continue
        row = m[kind]
        base = bases.get(kind)
        key = "call_s" if kind in XLA_KINDS else "process_s"
        ratio = f"{row[key] / m[base][key]:7.2f}" if base else f"{'':>7}"
        print(
            f"{label:<32} {row['process_s']:>10.2f} {row['call_s']:>9.3f} {row['peak_mb']:>8.0f} {ratio}"
            f"  {row['load_low']:.2f}-{row['load_high']:.2f}"
        )
    print("ratio: report and compare over the load row above them (process times);")
    print("       load_xplane over JAX's reader (call times, imports not timed)")
    passed = True
    for label, value, limit, unit in verdicts(m):
        ok = value <= limit
        passed &= ok
        shown = f"{value:.2f}{unit}" if unit == "x" else f"{value:.0f}{unit}"
        print(f"target: {label}: {'PASS' if ok else 'FAIL'} ({shown})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
