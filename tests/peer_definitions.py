"""The peers' definitions, re-derived from raw Kineto trace events (never from perfkit's table),
for side-by-side checks.

TensorBoard profiler plugin (torch_tb_profiler, pytorch/kineto tb_plugin): step spans stretched
over the device work each step launched (``StepParser``), the exclusive overview breakdown
(``OverallParser``), GPU utilisation and duration-weighted occupancy (``GPUMetricsParser``).
Written from the plugin's published behaviour; times here are int ns, as perfkit keeps them.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from perfkit_core.events.intervals import intersect_length, merge_intervals

RUNTIME_CATS = {"runtime", "cuda_runtime", "mtia_runtime", "xpu_runtime", "privateuse1_runtime"}
KERNEL_CATS = {"kernel"}
MEMCPY_CATS = {"memcpy", "gpu_memcpy"}
MEMSET_CATS = {"memset", "gpu_memset"}
DEVICE_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
OPERATOR_CATS = {"cpu_op", "operator", "python", "python_function", "user_annotation"}
TB_COMM_OPS = {
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
}

#: The TensorBoard profiler's overview roles, in its priority order.
TB_ROLES = ("Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec")


def ns(value_us: float) -> int:
    """Kineto microseconds to int ns, as perfkit converts them."""
    whole = int(np.floor(value_us))
    return whole * 1000 + int(np.rint((value_us - whole) * 1000))


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The complete (``ph == "X"``) events of a Kineto trace file (gzip or plain)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        data = json.load(fh)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def cat(event: dict[str, Any]) -> str:
    return str(event.get("cat", "")).lower()


def span(event: dict[str, Any]) -> tuple[int, int]:
    start = ns(float(event["ts"]))
    return start, start + ns(float(event["dur"]))


def is_step(event: dict[str, Any]) -> bool:
    return str(event.get("name", "")).startswith("ProfilerStep#")


def tb_steps(events: list[dict[str, Any]], *, unlaunched: str = "tb") -> list[tuple[int, int]]:
    """The TensorBoard profiler's step spans: each ProfilerStep stretched to the end of the device
    events launched by runtime calls lying wholly inside it, starting no earlier than the
    previous step's stretched end (and, for the first step, than the end of earlier unlaunched
    device work that ends before the step's own device work starts).

    ``unlaunched="tb"``: device events without a recorded runtime call belong to no step (the
    plugin's rule); ``"own_start"``: to the step their own start lies in (perfkit's rule).
    """
    steps = sorted(span(e) for e in events if is_step(e))
    by_corr: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if cat(e) in DEVICE_CATS:
            by_corr[(e.get("args") or {}).get("correlation")].append(span(e))
    runtimes = sorted(
        (span(e), (e.get("args") or {}).get("correlation"))
        for e in events
        if cat(e) in RUNTIME_CATS
    )
    device_range: list[tuple[int, int] | None] = []
    matched: set[tuple[int, int]] = set()
    for s0, e0 in steps:
        lo, hi, found = None, None, False
        for (rs, re_), corr in runtimes:
            if rs >= s0 and re_ <= e0 and corr in by_corr:
                for ds, de in by_corr[corr]:
                    lo = ds if lo is None else min(lo, ds)
                    hi = de if hi is None else max(hi, de)
                    matched.add((ds, de))
                    found = True
        if unlaunched == "own_start":
            launched_corrs = {corr for _, corr in runtimes}
            for corr, items in by_corr.items():
                if corr in launched_corrs:
                    continue
                for ds, de in items:
                    if s0 <= ds < e0:
                        lo = ds if lo is None else min(lo, ds)
                        hi = de if hi is None else max(hi, de)
                        matched.add((ds, de))
                        found = True
        device_range.append((lo, hi) if found else None)  # type: ignore[arg-type]
    if not matched:
        return steps
    previous = steps[0][0]
    first = device_range[0]
    if first is not None:
        for items in by_corr.values():
            for ds, de in items:
                if (ds, de) not in matched and de < first[0]:
                    previous = max(previous, de)
    out = []
    for (s0, e0), dev in zip(steps, device_range, strict=True):
        start = max(previous, s0)
        end = max(e0, dev[1]) if dev is not None else max(e0, start)
        end = max(end, start)
        out.append((start, end))
        previous = end
    return out


def merged(ranges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    if not ranges:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    arr = np.array(ranges, dtype=np.int64)
    return merge_intervals(arr[:, 0], arr[:, 1])


def subtract(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]):
    """Merged ``a`` minus merged ``b``, point by point on a fine enough grid of their edges."""
    edges = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    if len(edges) < 2:
        return a
    lo, hi = edges[:-1], edges[1:]
    mid_in = lambda iv: (  # noqa: E731
        np.searchsorted(iv[1], lo, side="right") < np.searchsorted(iv[0], lo, side="right")
    )
    keep = mid_in(a) & ~mid_in(b)
    return merge_intervals(lo[keep], hi[keep])


def tb_role_ranges(
    events: list[dict[str, Any]],
    *,
    communication_kernels: str = "tb",
    host_communication: set[str] | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Merged time ranges of each TensorBoard overview role (before the priority rule).

    ``communication_kernels="tb"``: a kernel is Communication when an operator named
    ``nccl:*``/``gloo:*`` with the same External id launched it (the plugin's rule);
    ``"name"``: when its own name says NCCL (perfkit's rule), for comparing the rest.
    ``host_communication``: names of host events that are Communication (default: the
    plugin's ``nccl:*``/``gloo:*`` names).
    """
    host_comm = TB_COMM_OPS if host_communication is None else host_communication
    comm_ext = {
        (e.get("args") or {}).get("External id")
        for e in events
        if cat(e) in OPERATOR_CATS and e.get("name") in TB_COMM_OPS
    }
    roles: dict[str, list[tuple[int, int]]] = {r: [] for r in TB_ROLES}
    for e in events:
        c, name = cat(e), str(e.get("name", ""))
        if c in KERNEL_CATS:
            if communication_kernels == "tb":
                is_comm = (e.get("args") or {}).get("External id") in comm_ext
            else:
                is_comm = "nccl" in name.lower()
            roles["Communication" if is_comm else "Kernel"].append(span(e))
        elif c in MEMCPY_CATS:
            roles["Memcpy"].append(span(e))
        elif c in MEMSET_CATS:
            roles["Memset"].append(span(e))
        elif c in RUNTIME_CATS:
            roles["Runtime"].append(span(e))
        elif is_step(e):
            continue
        elif c in {"cpu_op", "operator", "user_annotation"} and (
            (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))
            or name.startswith("enumerate(DataPipe)#")
        ):
            roles["DataLoader"].append(span(e))
        elif c in OPERATOR_CATS:
            role = "Communication" if name in host_comm else "CPU Exec"
            roles[role].append(span(e))
    return {r: merged(v) for r, v in roles.items()}


def tb_breakdown(
    events: list[dict[str, Any]],
    *,
    communication_kernels: str = "tb",
    host_communication: set[str] | None = None,
    unlaunched: str = "tb",
) -> list[dict[str, int]]:
    """Per TensorBoard step: the exclusive time of each role and ``Other`` and ``Total``, in ns.
    Each role takes the step time no higher-priority role took."""
    steps = tb_steps(events, unlaunched=unlaunched)
    roles = tb_role_ranges(
        events,
        communication_kernels=communication_kernels,
        host_communication=host_communication,
    )
    slots = merged(steps)
    taken: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for role in TB_ROLES:
        rng = roles[role]
        inter = subtract(slots, subtract(slots, rng))  # slots intersect role
        taken[role] = inter
        slots = subtract(slots, inter)
    taken["Other"] = slots
    out = []
    for s0, e0 in steps:
        window = (np.array([s0]), np.array([e0]))
        row = {r: intersect_length(window, taken[r]) for r in (*TB_ROLES, "Other")}
        row["Total"] = e0 - s0
        out.append(row)
    return out


def tb_gpu_utilization(events: list[dict[str, Any]], *, unlaunched: str = "tb") -> float:
    """The TensorBoard profiler's GPU utilisation (one device): merged kernel time within
    [first step start, last step end] over that span, as a fraction."""
    steps = tb_steps(events, unlaunched=unlaunched)
    window = (np.array([steps[0][0]]), np.array([steps[-1][1]]))
    kernels = merged([span(e) for e in events if cat(e) in KERNEL_CATS])
    return intersect_length(kernels, window) / (steps[-1][1] - steps[0][0])


def tb_occupancy(
    events: list[dict[str, Any]],
    *,
    unlaunched: str = "tb",
    windows: list[tuple[int, int]] | None = None,
) -> float | None:
    """The TensorBoard profiler's device-level mean achieved occupancy: each kernel's
    ``est. achieved occupancy %`` weighted by its duration within [first step start, last step
    end] (or within each of ``windows``); kernels without the figure left out."""
    if windows is None:
        steps = tb_steps(events, unlaunched=unlaunched)
        windows = [(steps[0][0], steps[-1][1])]
    num = den = 0.0
    for e in events:
        occ = (e.get("args") or {}).get("est. achieved occupancy %")
        if cat(e) not in KERNEL_CATS or occ is None or occ < 0:
            continue
        s0, e0 = span(e)
        for lo, hi in windows:
            d = min(e0, hi) - max(s0, lo)
            if d > 0:
                num += occ * d
                den += d
    return num / den if den else None


def tb_kernel_occupancy(events: list[dict[str, Any]]) -> dict[str, float]:
    """The TensorBoard kernel table's mean occupancy per kernel name: weighted by duration,
    over every call (a call without the figure weighs in as 0)."""
    num: dict[str, float] = defaultdict(float)
    den: dict[str, float] = defaultdict(float)
    for e in events:
        if cat(e) not in KERNEL_CATS:
            continue
        occ = (e.get("args") or {}).get("est. achieved occupancy %")
        d = float(e["dur"])
        num[e["name"]] += (occ or 0.0) * d
        den[e["name"]] += d
    return {k: num[k] / den[k] for k in num if den[k] > 0}


# ---------------------------------------------------------------------------------------------
# HTA (facebookresearch/HolisticTraceAnalysis)


def hta_iteration_device_time(events: list[dict[str, Any]]) -> dict[int, int]:
    """Merged device time per iteration, HTA's way: a device event takes the iteration of the
    runtime call it correlates with (the ProfilerStep holding the call's start); ns."""
    steps = sorted((span(e), int(str(e["name"]).split("#")[1])) for e in events if is_step(e))
    runtime_at = {
        (e.get("args") or {}).get("correlation"): span(e)[0]
        for e in events
        if cat(e) in RUNTIME_CATS
    }
    per: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if cat(e) not in DEVICE_CATS:
            continue
        at = runtime_at.get((e.get("args") or {}).get("correlation"))
        if at is None:
            continue
        for (s0, e0), number in steps:
            if s0 <= at < e0:
                per[number].append(span(e))
    out = {}
    for number, ranges in per.items():
        s, e = merged(ranges)
        out[number] = int((e - s).sum())
    return out


def hta_idle_breakdown(
    events: list[dict[str, Any]], threshold_ns: int = 30_000, *, negative: str = "hta"
) -> dict[tuple[int, int], dict[str, int]]:
    """HTA's idle time breakdown per (device, stream): gaps between consecutive device events
    (in start order) filed as host wait (the launching runtime call started after the previous
    event ended), kernel wait (other gaps under the threshold) or other; ns. ``negative="hta"``
    sums negative gaps (overlapping events) as they are, as HTA does; ``"zero"`` counts them
    as 0 (perfkit's rule)."""
    launch_start = {
        (e.get("args") or {}).get("correlation"): span(e)[0]
        for e in events
        if cat(e) in RUNTIME_CATS | {"cuda_driver"}
    }
    per: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if cat(e) in DEVICE_CATS:
            args = e.get("args") or {}
            per[(int(args.get("device", e.get("pid"))), int(args["stream"]))].append(e)
    out = {}
    for key, items in per.items():
        items.sort(key=lambda e: span(e)[0])
        sums = {"host_wait": 0, "kernel_wait": 0, "other": 0}
        for prev, cur in itertools.pairwise(items):
            prev_end = span(prev)[1]
            gap = span(cur)[0] - prev_end
            if negative == "zero":
                gap = max(gap, 0)
            launched = launch_start.get((cur.get("args") or {}).get("correlation"))
            if launched is not None and launched > prev_end:
                sums["host_wait"] += gap
            elif gap < threshold_ns:
                sums["kernel_wait"] += gap
            else:
                sums["other"] += gap
        out[key] = sums
    return out
