"""Multi-rank jobs made from one real Kineto trace, for tests and benchmarks.

``make_job`` writes one trace per rank: the real trace with its ``distributedInfo`` re-ranked,
and, to make the ranks differ as a real job's do, each rank's data loading in each step
delayed (``jitter_ns`` at random, ``slow_ns`` more on ``slow_rank``). The ranks stay in
lockstep as synchronous training keeps them: at the first collective of each step every rank
waits for the slowest, so its first collective kernel grows by the difference and everything
after it shifts (other device work keeps its duration). A slow rank's steps are therefore no longer than the others'; it shows more
data loading and less waiting, which is what perfkit must find.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

try:  # orjson is a test and bench dependency; fall back to the standard library
    import orjson

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(value)

    def _loads(data: bytes) -> Any:
        return orjson.loads(data)

except ImportError:  # pragma: no cover

    def _dumps(value: Any) -> bytes:
        return json.dumps(value).encode()

    def _loads(data: bytes) -> Any:
        return json.loads(data)


def _read(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return _loads(data)


def _step_points(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Per step, in µs: (start of its data loading, start of its first collective kernel)."""
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    loads = sorted(
        e["ts"]
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("enumerate(DataLoader)")
    )
    comms = sorted(
        e["ts"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in str(e.get("name")).lower()
    )
    points = []
    for start, end in steps:
        load = next((t for t in loads if start <= t < end), start)
        first = next((t for t in comms if load < t < end), None)
        points.append((float(load), float(first) if first is not None else float(end)))
    return points


def make_job(
    base: Path,
    out_dir: Path,
    ranks: int,
    *,
    slow_rank: int | None = None,
    slow_ns: float = 20e6,
    jitter_ns: float = 0.0,
    seed: int = 0,
    compresslevel: int = 1,
) -> list[Path]:
    """Write ``ranks`` traces (``rank{r}.json.gz``) of one job into ``out_dir``; return them.

    Each is the real trace at ``base``, re-ranked (``world_size`` = ``ranks``), its data
    loading in each step delayed by a random ``0..jitter_ns`` (plus ``slow_ns`` on
    ``slow_rank``), and the ranks kept in lockstep at each step's first collective.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = _read(base)
    events = trace["traceEvents"]
    points = _step_points(events)
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    # Times relative to the first event: epoch microseconds (~1.7e15) as floats cannot hold
    # the sub-microsecond offsets below.
    origin = min(float(e["ts"]) for e in timed)
    points = [(load - origin, first - origin) for load, first in points]
    ts = np.array([float(e["ts"]) - origin for e in timed])
    dur = np.array([float(e.get("dur", 0.0)) for e in timed])
    has_dur = np.array(["dur" in e for e in timed])
    # Device work runs on its own: only a collective kernel grows when a shift point falls
    # inside it (it waits); other device events keep their duration and move with their start.
    device = np.array([e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in timed])
    collective = device & np.array(["nccl" in str(e.get("name", "")).lower() for e in timed])
    rigid = device & ~collective
    rng = np.random.default_rng(seed)
    delays = rng.uniform(0.0, jitter_ns, size=(ranks, len(points))) if jitter_ns else None
    if delays is None:
        delays = np.zeros((ranks, len(points)))
    if slow_rank is not None:
        delays[slow_rank] += slow_ns
    slowest = delays.max(axis=0)
    paths = []
    for rank in range(ranks):
        # Shift points (µs) and amounts (µs): data loading delayed by this rank's delay, then
        # the first collective absorbing the wait for the slowest rank; steps add up.
        times, amounts = [], []
        for k, (load, first) in enumerate(points):
            times += [load + 0.0005, first + 0.0005]
            amounts += [delays[rank, k] / 1e3, (slowest[k] - delays[rank, k]) / 1e3]
        times_a = np.asarray(times)
        shift_at = np.concatenate([[0.0], np.cumsum(amounts)])

        def shift(t: np.ndarray, times_a: np.ndarray = times_a, at: np.ndarray = shift_at) -> Any:
            return at[np.searchsorted(times_a, t, side="right")]

        new_ts = np.round(ts + shift(ts), 3)
        new_end = np.round(ts + dur + np.where(rigid, shift(ts), shift(ts + dur)), 3)
        new_dur = np.round(new_end - new_ts, 3).tolist()
        for e, t, d, keep in zip(timed, (new_ts + origin).tolist(), new_dur, has_dur, strict=True):
            e["ts"] = t
            if keep:
                e["dur"] = d
        trace["distributedInfo"] = dict(
            trace.get("distributedInfo") or {}, rank=rank, world_size=ranks
        )
        path = out_dir / f"rank{rank}.json.gz"
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wb", compresslevel=compresslevel) as fh:
            fh.write(_dumps(trace))
        tmp.replace(path)
        paths.append(path)
    return paths
