"""Benchmark: reading a JAX profile with perfkit-xla against JAX's own reader and the trace
viewer JSON, side by side in one run.

The profile is made by a real JAX CPU training run (the MLP of ``perfkit_xla.demo``, the
Python tracer on, as by default): ``--steps`` steps under ``jax.profiler.trace``, cached in
``bench/out/xla_<steps>/``. What is measured, ``--repeat`` times, interleaved, in this process
(the file is read once first, so it comes from the page cache):

* ``perfkit_xla.load_xplane(path)``: the whole call: reading, decoding the XSpace protobuf
  (protobuf's compiled parser and NumPy), the HLO protos, and building the finished event table
  (sorted, nested, steps).
* ``jax.profiler.ProfileData.from_file(path)`` plus a walk over every event's name, start and
  duration: JAX's own (C++) XSpace reader, which gives events one by one, no table.
* ``json.load`` of the ``.trace.json.gz`` the profiler writes beside it: the trace viewer's data,
  parsed only.

Prints each tool's median time and perfkit's time over each. Needs jax. The target (load_xplane
at most 2.0x JAX's reader, on a 300-step profile) is checked by ``bench_report.py``, in fresh
processes; this script is the quick look, in one process.

Run: ``python bench/bench_xla.py [--steps N] [--repeat K]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"


def make_profile(steps: int) -> tuple[Path, Path]:
    """Profile ``steps`` steps of the demo MLP (cached); return (xplane, trace viewer JSON)."""
    folder = OUT_DIR / f"xla_{steps}"
    found = sorted(folder.rglob("*.xplane.pb"))
    if not found:
        import jax

        from perfkit_xla.demo import mlp_training, run_steps

        step, _ = mlp_training()
        run_steps(step, 2, annotate=False)
        with jax.profiler.trace(str(folder)):
            run_steps(step, steps, first=2)
        found = sorted(folder.rglob("*.xplane.pb"))
    xplane = found[-1]
    return xplane, xplane.with_name(xplane.name.replace(".xplane.pb", ".trace.json.gz"))


def time_it(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from jax.profiler import ProfileData

    from perfkit_xla import load_xplane

    xplane, viewer = make_profile(args.steps)
    xplane.read_bytes()
    viewer.read_bytes()

    def perfkit() -> int:
        return len(load_xplane(xplane).events)

    def jax_reader() -> int:
        n = 0
        data = ProfileData.from_file(str(xplane))
        for plane in data.planes:
            for line in plane.lines:
                for event in line.events:
                    _ = (event.name, event.start_ns, event.duration_ns)
                    n += 1
        return n

    def viewer_json() -> int:
        with gzip.open(viewer) as fh:
            return len(json.load(fh)["traceEvents"])

    rows = perfkit(), jax_reader(), viewer_json()
    results = {}
    for _ in range(args.repeat):  # interleaved, one of each per round
        for name, fn in (
            ("perfkit_xla.load_xplane", perfkit),
            ("jax ProfileData + walk", jax_reader),
            ("json.load(trace.json.gz)", viewer_json),
        ):
            results.setdefault(name, []).append(time_it(fn, 1))
    size = xplane.stat().st_size / 1e6
    print(f"profile: {xplane} ({size:.1f} MB, {args.steps} steps)")
    print(f"events: perfkit rows {rows[0]}, jax events {rows[1]}, viewer JSON entries {rows[2]}")
    base = statistics.median(results["perfkit_xla.load_xplane"])
    print(f"{'reader':<28} {'median s':>9} {'perfkit / it':>13}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:<28} {median:9.3f} {base / median:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
