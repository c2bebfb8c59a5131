"""Benchmark: whole jobs of 16 and 64 ranks analysed on Dask with 1 and with 2 workers.

The jobs are made from the real A100 rank in ../shared/traces (rank 3 of an 8-GPU NCCL job, 6
steps, 109k events, 1.7 MB gzip, 34.8 MB of JSON): re-ranked 16 and 64 times, each rank's data
loading delayed by a random 0-1 ms per step and the ranks kept in lockstep at each step's first
collective (``tests/job_traces.py``), written to ``bench/out/job{N}/`` once and reused.

Each analysis runs in a fresh subprocess: ``perfkit_core.jobs.analyse_job(job, workers=W)``
with the default job views and advice, on a local cluster of W worker processes (one thread
each) that the call starts and closes. Measured:

* **analysis s**: from the cluster being up (its start is reported apart) to the ``Job``
  returned; **s per rank** divides it by the ranks; **speed-up** is 1 worker's over 2's.
* **client peak MB**: peak RSS of the process that ran ``analyse_job`` (``VmHWM``, its own
  address space's; ``ru_maxrss`` would carry over the peak of the process that started it):
  the Dask client and scheduler, and the combined tables (the workers are other processes).
* **worker peak MB**: the highest peak RSS of a worker process (``VmHWM`` after its last
  rank), and **worker growth MB**: that less the peak of a worker that summarised a tiny
  two-event trace (so it imported everything a rank needs; measured on its own). The growth is
  what a rank costs a worker.

Targets: client peak RSS for 64 ranks within 1.2x that for 16; worker growth under 2x the
largest rank's decoded trace; 2 workers at least 1.7x as fast as 1 on a 2-core machine.

Run: ``python bench/bench_jobs.py [--ranks 16 64] [--workers 1 2]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "bench" / "out"
TRACES = Path(os.environ.get("PERFKIT_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
BASE = TRACES / "torch-gpu" / "a100_8gpu_rank3.json.gz"
CLIENT_GROWTH_MAX = 1.2
WORKER_GROWTH_MAX = 2.0
SPEEDUP_MIN = 1.7


def make_jobs(sizes: list[int]) -> dict[int, Path]:
    """The job folders, made on first use (``bench/out/job{N}``)."""
    sys.path.insert(0, str(ROOT))
    from tests.job_traces import make_job

    out = {}
    for n in sizes:
        folder = OUT_DIR / f"job{n}"
        done = folder / ".complete"
        if not done.exists():
            began = time.perf_counter()
            print(f"making a {n}-rank job in {folder} ...", flush=True)
            make_job(BASE, folder, n, jitter_ns=1e6, seed=n)
            done.write_text("ok\n")
            print(f"  made in {time.perf_counter() - began:.1f} s", flush=True)
        out[n] = folder
    return out


def child(job: str, workers: int, target: str) -> None:
    """Analyse ``job`` with ``workers`` local workers; write the figures to ``target``."""
    from perfkit_core.jobs import DEFAULT_JOB_VIEWS, analyse_job
    from perfkit_core.jobs.tasks import peak_rss_bytes

    marks: dict[str, float] = {"begin": time.perf_counter()}

    def notify(line: str) -> None:
        marks["cluster_up"] = time.perf_counter()

    result = analyse_job(job, DEFAULT_JOB_VIEWS, workers=workers, notify=notify)
    marks["end"] = time.perf_counter()
    findings = result.advise()
    payload = {
        "ranks": len(result.meta["ranks"]),
        "cluster_start_s": marks["cluster_up"] - marks["begin"],
        "analysis_s": marks["end"] - marks["cluster_up"],
        "client_peak_bytes": peak_rss_bytes(),
        "results": result.results,
        "stragglers": int(result.summary("ranks")["straggler"].sum()),
        "findings": len(findings),
    }
    Path(target).write_text(json.dumps(payload))


def idle_worker(target: str) -> None:
    """Peak RSS of a worker that imported what a rank needs, but loaded none."""
    from distributed import Client, LocalCluster

    from perfkit_core.jobs.cluster import local_cluster

    def imports() -> int:
        # Summarise a tiny trace: every module a rank needs is imported, nothing big is held.
        import tempfile

        from perfkit_core.jobs import DEFAULT_JOB_VIEWS
        from perfkit_core.jobs.job import plan_tasks
        from perfkit_core.jobs.tasks import summarise_rank

        with tempfile.TemporaryDirectory() as tmp:
            for rank in (0, 1):
                trace = dict(TINY_TRACE, distributedInfo={"rank": rank, "world_size": 2})
                (Path(tmp) / f"rank{rank}.json").write_text(json.dumps(trace))
            summarise_rank(plan_tasks(tmp, DEFAULT_JOB_VIEWS, {})[0])
        from perfkit_core.jobs.tasks import peak_rss_bytes

        return peak_rss_bytes()

    with (
        local_cluster(1, LocalCluster) as cluster,
        Client(cluster) as client,
    ):
        peak = client.submit(imports, pure=False).result()
    Path(target).write_text(json.dumps({"peak_bytes": peak}))


#: A two-event Kineto trace with one step, for the idle worker.
TINY_TRACE: dict[str, Any] = {
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
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0},
    ],
}


def _run_child(args: list[str]) -> dict[str, Any]:
    target = OUT_DIR / f"bench_jobs_{os.getpid()}.json"
    subprocess.run(
        [sys.executable, __file__, *args, str(target)],
        check=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    data = json.loads(target.read_text())
    target.unlink()
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child", nargs=3, metavar=("JOB", "WORKERS", "OUT"))
    parser.add_argument("--idle-worker", metavar="OUT")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    if args.idle_worker:
        idle_worker(args.idle_worker)
        return 0
    if not BASE.is_file():
        print(f"the real trace {BASE} is missing")
        return 1
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    jobs = make_jobs(args.ranks)
    largest = max(
        (f for folder in jobs.values() for f in folder.glob("*.json.gz")), key=os.path.getsize
    )
    compressed = largest.stat().st_size
    decoded = len(gzip.decompress(largest.read_bytes()))
    idle = _run_child(["--idle-worker"])["peak_bytes"]
    rows = []
    for n, folder in jobs.items():
        for w in args.workers:
            data = _run_child(["--child", str(folder), str(w)])
            peaks = [r["peak_rss_bytes"] for r in data["results"]]
            row = {
                "ranks": n,
                "workers": w,
                "start": data["cluster_start_s"],
                "analysis": data["analysis_s"],
                "per_rank": data["analysis_s"] / n,
                "client": data["client_peak_bytes"],
                "worker": max(peaks),
                "growth": max(peaks) - idle,
                "stragglers": data["stragglers"],
            }
            rows.append(row)
            print(
                f"  {n} ranks, {w} worker(s): analysis {row['analysis']:.1f} s "
                f"(cluster start {row['start']:.1f} s), client peak {row['client'] / 2**20:.0f} MB, "
                f"worker peak {row['worker'] / 2**20:.0f} MB",
                flush=True,
            )
    mb = 2**20
    print()
    print(
        f"job: the A100 rank ({largest.name}: {compressed / mb:.1f} MB gzip, "
        f"{decoded / mb:.1f} MB decoded) re-ranked and jittered; idle worker peak {idle / mb:.0f} MB"
    )
    header = (
        f"{'ranks':>5} {'workers':>7} {'analysis s':>10} {'s/rank':>7} {'speed-up':>8} "
        f"{'client MB':>9} {'worker MB':>9} {'growth MB':>9} {'growth/decoded':>14}"
    )
    print(header)
    print("-" * len(header))
    by = {(r["ranks"], r["workers"]): r for r in rows}
    for r in rows:
        one = by.get((r["ranks"], 1))
        speed = one["analysis"] / r["analysis"] if one else float("nan")
        print(
            f"{r['ranks']:>5} {r['workers']:>7} {r['analysis']:>10.2f} {r['per_rank']:>7.3f} "
            f"{speed:>8.2f} {r['client'] / mb:>9.0f} {r['worker'] / mb:>9.0f} "
            f"{r['growth'] / mb:>9.0f} {r['growth'] / decoded:>14.2f}"
        )
    verdicts = []
    sizes = sorted(jobs)
    if len(sizes) >= 2 and 1 in args.workers:
        small, big = by[(sizes[0], 1)], by[(sizes[-1], 1)]
        ratio = big["client"] / small["client"]
        verdicts.append(
            (
                f"client peak RSS {sizes[-1]} vs {sizes[0]} ranks <= {CLIENT_GROWTH_MAX}x",
                ratio <= CLIENT_GROWTH_MAX,
                f"{ratio:.2f}x",
            )
        )
    growth = max(r["growth"] for r in rows) / decoded
    verdicts.append(
        (
            f"worker growth <= {WORKER_GROWTH_MAX}x the largest rank's decoded trace",
            growth <= WORKER_GROWTH_MAX,
            f"{growth:.2f}x",
        )
    )
    if 1 in args.workers and 2 in args.workers:
        speed = min(by[(n, 1)]["analysis"] / by[(n, 2)]["analysis"] for n in sizes)
        verdicts.append(
            (f"speed-up with 2 workers >= {SPEEDUP_MIN}x", speed >= SPEEDUP_MIN, f"{speed:.2f}x")
        )
    print()
    for label, ok, value in verdicts:
        print(f"target: {label}: {'PASS' if ok else 'FAIL'} ({value})")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
