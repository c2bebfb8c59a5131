"""Exports for other tools: chrome traces (Perfetto, chrome://tracing), folded stacks for
flamegraph tools, and every summary as CSV, Parquet or JSON. All read only the event table."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.errors import OptionError
from perfkit_core.events import links
from perfkit_core.events.atomic import write_bytes
from perfkit_core.events.facts import has_device
from perfkit_core.events.schema import str_values

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

FORMATS = ("chrome", "folded", "pprof", "csv", "parquet", "json")
#: ``otherData.producer`` of perfkit's chrome exports.
PRODUCER = "perfkit"


def chrome_trace(run: Run, *, advice: bool = True) -> dict[str, Any]:
    """Return the run's events as a chrome trace object (``{"traceEvents": [...]}``).

    Every event with a duration becomes a complete (``X``) event and every instant an ``i``
    event, on one process per rank and side (host, each device) with threads and streams as
    lanes; each kernel, copy and set gets a flow arrow (``s``/``f``) from the runtime call that
    launched it; advice findings become global instant markers at the start of the profile.
    Times are microseconds from the start of the run.
    """
    ev = run.events
    origin = int(ev["start_ns"].min()) if len(ev) else 0
    start_us = (ev["start_ns"].to_numpy() - origin) / 1000.0
    dur_us = ev["dur_ns"].to_numpy() / 1000.0
    names = str_values(ev["name"])
    kinds = str_values(ev["kind"])
    cats = str_values(ev["category"])
    ranks = ev["rank"].to_numpy()
    stream = ev["stream"].to_numpy()
    tid = ev["tid"].to_numpy()
    dev_index = ev["device_index"].to_numpy()
    is_instant = (ev["dur_ns"].to_numpy() == 0) & np.isin(kinds, ["memory", "other", "profiler"])
    device = stream >= 0
    pid = np.where(
        device,
        ranks.astype(np.int64) * 1000 + 100 + np.maximum(dev_index, 0),
        ranks.astype(np.int64) * 1000,
    )
    lane = np.where(device, stream, tid)
    out: list[dict[str, Any]] = []
    for p, r, d in sorted(
        {(int(a), int(b), bool(c)) for a, b, c in zip(pid, ranks, device, strict=True)}
    ):
        label = f"rank {r} " + (f"GPU {p - r * 1000 - 100}" if d else "host")
        out.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": label}})
    # Lanes named as the trace named them (host threads), or by their stream (devices).
    threads = run.meta.get("threads") or {}
    for p, lane_id, d in sorted(
        {(int(a), int(b), bool(c)) for a, b, c in zip(pid, lane, device, strict=True)}
    ):
        lane_name = (
            f"stream {lane_id}" if d else str(threads.get(str(lane_id), f"thread {lane_id}"))
        )
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": p,
                "tid": lane_id,
                "args": {"name": lane_name},
            }
        )
    nbytes = ev["bytes"].to_numpy()
    for i in range(len(ev)):
        record: dict[str, Any] = {
            "ph": "i" if is_instant[i] else "X",
            "cat": kinds[i],
            "name": names[i],
            "pid": int(pid[i]),
            "tid": int(lane[i]),
            "ts": round(float(start_us[i]), 3),
            "args": {"category": cats[i], "step": int(ev["step"].iat[i])},
        }
        if is_instant[i]:
            record["s"] = "t"
            if not math.isnan(nbytes[i]):
                record["args"]["bytes"] = float(nbytes[i])
        else:
            record["dur"] = round(float(dur_us[i]), 3)
        out.append(record)
    launcher = links.run_launchers(run)
    for flow_id, row in enumerate(np.flatnonzero(launcher >= 0).tolist(), start=1):
        src = launcher[row]
        out.append(
            {
                "ph": "s",
                "id": flow_id,
                "cat": "launch",
                "name": "launch",
                "pid": int(pid[src]),
                "tid": int(lane[src]),
                "ts": round(float(start_us[src]), 3),
            }
        )
        out.append(
            {
                "ph": "f",
                "bp": "e",
                "id": flow_id,
                "cat": "launch",
                "name": "launch",
                "pid": int(pid[row]),
                "tid": int(lane[row]),
                "ts": round(float(start_us[row]), 3),
            }
        )
    if advice:
        for finding in run.advise():
            out.append(
                {
                    "ph": "i",
                    "s": "g",
                    "cat": "advice",
                    "name": f"advice: {finding.title}",
                    "pid": 0,
                    "tid": 0,
                    "ts": 0,
                    "args": {
                        "id": finding.id,
                        "saving_ns": finding.saving_ns,
                        "remedy": finding.remedy,
                    },
                }
            )
    # otherData first: readers (perfkit's own load() among them) see who wrote the file from
    # its first bytes.
    return {
        "otherData": {"producer": PRODUCER, "framework": run.framework},
        "traceEvents": out,
        "displayTimeUnit": "ms",
    }


def folded_stacks(run: Run, *, metric: str = "cpu") -> list[str]:
    """Return ``frame;frame;... count`` lines (outermost frame first), like torch's
    ``export_stacks``: ``metric="cpu"`` counts each host event's self time, ``"gpu"`` the
    device time of the kernels, copies and sets launched (the device event is the leaf frame),
    in whole microseconds; zero counts are left out. The format has no escapes: a ``;`` in a
    name is written as ``:`` and control characters (line breaks, tabs) as spaces, and a
    ``TraceWarning`` says how many names were changed."""
    from perfkit_core.views.operators import host_self_time

    if metric not in ("cpu", "gpu"):
        raise ValueError("metric must be 'cpu' or 'gpu'")
    ev = run.events
    if metric == "gpu" and not has_device(run):
        raise OptionError(
            "the run recorded no device events, so there is no device time to fold: "
            "use --metric cpu"
        )
    names = str_values(ev["name"])
    parent = ev["parent"].to_numpy()
    host = (ev["stream"].to_numpy() < 0) & (ev["kind"].to_numpy() != "memory")
    if metric == "cpu":
        rows = np.flatnonzero(host)
        weights = host_self_time(run)[rows] / 1000.0
        leaves = rows
        extra = [None] * len(rows)
    else:
        launcher = links.run_launchers(run)
        rows = np.flatnonzero(launcher >= 0)
        weights = ev["dur_ns"].to_numpy()[rows] / 1000.0
        leaves = launcher[rows]
        extra = [names[r] for r in rows.tolist()]
    counts: dict[str, float] = {}
    cache: dict[int, str] = {}
    changed: set[str] = set()

    def frame(name: str) -> str:
        clean = _FOLDED_UNSAFE.sub(_folded_substitute, name)
        if clean != name:
            changed.add(name)
        return clean

    for leaf, weight, tail in zip(leaves.tolist(), weights.tolist(), extra, strict=True):
        if weight <= 0:
            continue
        stack = cache.get(leaf)
        if stack is None:
            frames = []
            node = leaf
            while node >= 0:
                frames.append(frame(names[node]))
                node = parent[node]
            stack = ";".join(reversed(frames))
            cache[leaf] = stack
        key = stack if tail is None else f"{stack};{frame(tail)}"
        counts[key] = counts.get(key, 0.0) + weight
    if changed:
        import warnings

        from perfkit_core.errors import TraceWarning

        warnings.warn(
            TraceWarning(
                f"folded stacks: {len(changed)} frame name(s) held ';' or control characters "
                "(line breaks, tabs), which the format cannot hold: written with ':' and spaces"
            ),
            stacklevel=2,
        )
    return [
        f"{stack} {round(count)}" for stack, count in sorted(counts.items()) if round(count) > 0
    ]


#: What a folded-stacks frame cannot hold: the frame separator and control characters.
_FOLDED_UNSAFE = re.compile(r"[;\x00-\x1f\x7f]")


def _folded_substitute(match: re.Match[str]) -> str:
    return ":" if match.group(0) == ";" else " "


def summaries(run: Run) -> dict[str, Any]:
    """Every registered summary view of ``run`` as DataFrames, by view name."""
    from perfkit_core.views import registered_views

    return {name: run.summary(name) for name in registered_views()}


def export(run: Run, to: str, output: str | Path, *, metric: str = "cpu") -> list[Path]:
    """Write ``run`` in format ``to`` (one of ``FORMATS``) to ``output``; return the files written.

    ``chrome``, ``folded`` and ``pprof`` (a gzipped ``profile.proto``,
    ``perfkit_core.report.pprof``) write one file; ``json`` writes one file holding every summary;
    ``csv`` and ``parquet`` write one file per summary into the folder ``output``.
    """
    output = Path(output)
    if to == "chrome":
        write_bytes(output, json.dumps(chrome_trace(run), default=float).encode())
        return [output]
    if to == "pprof":
        from perfkit_core.report.pprof import pprof_profile

        write_bytes(output, pprof_profile(run))
        return [output]
    if to == "folded":
        write_bytes(output, ("\n".join(folded_stacks(run, metric=metric)) + "\n").encode())
        return [output]
    tables = summaries(run)
    if to == "json":
        from perfkit_core.report.json import frame_records

        payload = {name: frame_records(frame) for name, frame in tables.items()}
        write_bytes(output, json.dumps(payload, indent=1, default=str).encode())
        return [output]
    if to in ("csv", "parquet"):
        output.mkdir(parents=True, exist_ok=True)
        written = []
        for name, frame in tables.items():
            target = output / f"{name}.{to}"
            if to == "csv":
                write_bytes(target, frame.to_csv(index=False).encode())
            else:
                import io

                buffer = io.BytesIO()
                frame.to_parquet(buffer, index=False)
                write_bytes(target, buffer.getvalue())
            written.append(target)
        return written
    raise ValueError(f"export format must be one of {', '.join(FORMATS)}, not {to!r}")
