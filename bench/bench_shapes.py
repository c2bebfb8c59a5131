"""Costs bounded by the data, not its shape: a trace nested 200,000 deep, and a gzip bomb.

Each measurement is a fresh ``perfkit report`` subprocess (its own wall time and peak RSS), side
by side with a native tool doing the least the same input asks for: ``json.loads`` of the deep
trace (the parse alone), ``gzip -dc | wc -c`` of the bomb (inflating it, no more).

Targets: the whole report of the 200,000-deep trace within 10 s; the 2 GiB bomb refused in one
line within 5 s with a peak RSS under 1 GB, with no memory limit and under a 1 GiB address-space
limit (``ulimit -v``).

    python bench/bench_shapes.py
    python bench/bench_shapes.py --depth 20000
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
GIB = 2**30


def run(command: list[str], memory_limit: int | None = None) -> tuple[float, int, int, str]:
    """(wall s, peak RSS bytes, exit status, stderr) of ``command`` in a fresh process."""

    def limit() -> None:
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    began = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
    )
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    return (
        time.perf_counter() - began,
        usage.ru_maxrss * 1024,
        os.waitstatus_to_exitcode(status),
        err,
    )


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tests.test_shapes import deep_trace, gzip_bomb

    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=200_000)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    deep = deep_trace(OUT / f"deep{args.depth}.json", args.depth)
    bomb = OUT / "bomb_2gib.json.gz"
    if not bomb.exists():
        gzip_bomb(bomb)
    perfkit = [sys.executable, "-m", "perfkit_core", "report"]
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    rows = []
    parse = run([sys.executable, "-c", f"import json; json.load(open({str(deep)!r}))"])
    report = run([*perfkit, str(deep)])
    rows.append((f"deep {args.depth:,}: json.loads (reference)", parse))
    rows.append((f"deep {args.depth:,}: perfkit report", report))
    inflate = run(["sh", "-c", f"gzip -dc {bomb} | wc -c"])
    refused = run([*perfkit, str(bomb)])
    limited = run([*perfkit, str(bomb)], memory_limit=GIB)
    rows.append(("bomb: gzip -dc | wc -c (reference)", inflate))
    rows.append(("bomb: perfkit report", refused))
    rows.append(("bomb: perfkit report, ulimit -v 1 GiB", limited))
    print(f"{'':48}{'wall s':>8}{'peak MB':>10}{'exit':>6}")
    for label, (wall, peak, code, _) in rows:
        print(f"{label:48}{wall:8.2f}{peak / 1e6:10.0f}{code:6d}")
    print(f"deep report / json.loads: {report[0] / parse[0]:.1f}x")
    ok = True
    checks = [
        ("deep report within 10 s, exit 0", report[0] <= 10 and report[2] == 0),
    ]
    for label, (wall, peak, code, err) in (("bomb", refused), ("bomb under 1 GiB", limited)):
        one_line = len(err.splitlines()) == 1 and err.startswith("perfkit: error: ")
        checks.append(
            (
                f"{label}: one line, exit 2, within 5 s, peak under 1 GB",
                one_line and code == 2 and wall <= 5 and peak < 1e9,
            )
        )
    for label, passed in checks:
        print(f"{'PASS' if passed else 'FAIL'}: {label}")
        ok &= passed
    print(refused[3].strip())
    print(limited[3].strip())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
