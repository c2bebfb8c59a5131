"""Advice with evidence: rules that read the event table and say what to change.

``run.advise()`` runs every registered rule (``perfkit_register_advisors``) and returns
``Finding`` objects, most valuable first. Rules live here and read only ``run.events`` and
``run.meta``; what to change in code comes from the adapter of the run's framework through
``perfkit_remedy``, so a torch run gets torch code and a paddle run paddle code.

Every rule states its thresholds (module constants below) and how it estimates ``saving_ns``:
the time over the profiled steps that the change would save at best. A saving is never larger
than the measured time it is based on.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core import structure
from perfkit_core.families import normalize
from perfkit_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.run import Run

# ------------------------------------------------------------------ thresholds (documented)
#: input-pipeline: data loading takes at least this share of step time.
INPUT_PIPELINE_MIN_PCT = 5.0
#: cpu-bound-op: the op takes at least this share of step time ...
CPU_BOUND_MIN_STEP_PCT = 5.0
#: ... and at least this share of its own time is host-only (not matched by device time).
CPU_BOUND_MIN_HOST_PCT = 90.0
#: ... unless at least this share of its time is spent waiting for the device (placement's case).
CPU_BOUND_MAX_WAITING_PCT = 50.0
#: Allocation ops are host-only by design; the allocator, not the op, is what to look at.
ALLOCATION_OPS = frozenset({"empty", "empty_strided", "empty_like", "resize_", "set_"})
#: placement: ops that force copies or syncs, holding the host at least this share of step time,
PLACEMENT_MIN_STEP_PCT = 1.0
#: ... while their own device work is under this share of their host time ("little device work").
PLACEMENT_MAX_DEVICE_PCT = 50.0
#: Nested ops repeat their children's time: a culprit whose calls mostly (over this share) run
#: inside another culprit is left to the outer one.
_NESTED_MAJORITY = 0.5
#: launch-bound: median kernel shorter than this, GPU busy under LOW_GPU_UTIL_PCT, and host
#: launch time above the kernels' device time.
LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS = 20_000
#: low-gpu-utilization: GPU busy under this share of step time.
LOW_GPU_UTIL_PCT = 50.0
#: communication: communication above this share of step time, or ...
COMMUNICATION_MIN_PCT = 10.0
#: ... less than this share of it overlapped with computation (when it takes at least
#: COMMUNICATION_MIN_POOR_OVERLAP_PCT of the step: tiny, unoverlapped transfers cost little).
COMMUNICATION_MIN_OVERLAP_PCT = 50.0
#: communication: poorly overlapped communication must take at least this share of step time.
COMMUNICATION_MIN_POOR_OVERLAP_PCT = 5.0
#: amp: fp32 matmul/conv kernels take at least this share of kernel time, none on tensor cores.
AMP_MIN_KERNEL_PCT = 20.0
#: amp: assumed speed-up of matmul/conv on tensor cores in reduced precision (conservative;
#: NVIDIA quotes 2-8x for fp16/bf16 tensor cores over fp32 CUDA cores).
AMP_SPEEDUP = 2.0
#: memory-pressure: peak reserved memory above this share of the device's memory.
MEMORY_PRESSURE_PCT = 90.0
#: pageable-memcpy: host-to-device copies from pageable memory, at least this share of step time
#: of host time blocked in their launches.
PAGEABLE_MIN_STEP_PCT = 0.5

SEVERITY_HIGH_PCT = 10.0
SEVERITY_MEDIUM_PCT = 2.0

_SYNC_RE = re.compile(
    r"Synchronize|^cudaMemcpy$|^cudaMemcpy2D$|^hipMemcpy$",
    re.IGNORECASE,
)
_MATMUL_CONV_RE = re.compile(r"gemm|conv|cutlass|wgrad|dgrad|matmul|implicit", re.IGNORECASE)
_NORM_RE = re.compile(r"\bbn_|batch_?norm|layer_?norm|_norm", re.IGNORECASE)


@dataclass
class Finding:
    """One piece of advice: what is wrong, the numbers behind it, the estimated saving (ns over
    the profiled steps), and what to change (``remedy``, in the run's framework)."""

    id: str
    title: str
    severity: str
    saving_ns: float
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain JSON-ready data."""
        return asdict(self)


@dataclass
class Context:
    """Figures most rules need, computed once per ``advise()``."""

    run: Run
    step_ns: int
    steps: int
    has_device: bool
    framework: str


Advisor = Callable[[Context], "list[Finding] | Finding | None"]

_advisors: dict[str, tuple[Advisor, str]] | None = None
_lock = threading.Lock()


def clear_advisor_cache() -> None:
    """Forget the registered rules; the next ``advise()`` asks the plugins again."""
    global _advisors
    with _lock:
        _advisors = None


def registered_advisors() -> dict[str, tuple[Advisor, str]]:
    """Every rule the installed plugins register: id -> (function, description)."""
    global _advisors
    with _lock:
        if _advisors is None:
            from perfkit_core.plugins import get_plugin_manager

            found: dict[str, tuple[Advisor, str]] = {}

            def register(rule_id: str, function: Advisor, description: str = "") -> None:
                found[rule_id] = (function, description)

            for impl in get_plugin_manager().hook.perfkit_register_advisors.get_hookimpls():
                impl.function(register=register)
            _advisors = found
        return dict(_advisors)


def _severity(saving_ns: float, step_ns: int) -> str:
    share = 100.0 * saving_ns / step_ns if step_ns else 0.0
    if share >= SEVERITY_HIGH_PCT:
        return "high"
    if share >= SEVERITY_MEDIUM_PCT:
        return "medium"
    return "low"


def advise(run: Run, *, rules: list[str] | None = None) -> list[Finding]:
    """Return the findings of every registered rule on ``run`` (or only ``rules``), the largest
    estimated saving first. Each finding gets its remedy from the run's adapter."""
    from perfkit_core.plugins import get_plugin_manager
    from perfkit_core.summaries import step_window

    window, has_steps = step_window(run)
    ev = run.events
    ctx = Context(
        run=run,
        step_ns=int((window[1] - window[0]).sum()),
        steps=int((ev["kind"] == "step").sum()) if has_steps else 1,
        has_device=bool((ev["stream"].to_numpy() >= 0).any()),
        framework=run.framework,
    )
    findings: list[Finding] = []
    for rule_id, (function, _description) in registered_advisors().items():
        if rules is not None and rule_id not in rules:
            continue
        result = function(ctx)
        if result is None:
            continue
        for finding in result if isinstance(result, list) else [result]:
            finding.rule = finding.rule or rule_id
            finding.saving_ns = float(max(finding.saving_ns, 0.0))
            finding.severity = finding.severity or _severity(finding.saving_ns, ctx.step_ns)
            finding.evidence.setdefault("step_time_ns", ctx.step_ns)
            finding.evidence.setdefault("steps", ctx.steps)
            findings.append(finding)
    hook = get_plugin_manager().hook.perfkit_remedy
    for finding in findings:
        if not finding.remedy:
            finding.remedy = hook(finding=finding, framework=ctx.framework) or GENERIC_REMEDIES.get(
                finding.rule, ""
            )
    findings.sort(key=lambda f: (-f.saving_ns, f.id))
    return findings


GENERIC_REMEDIES = {
    "input-pipeline": "Load data in background workers and overlap it with compute (more loader workers, pinned memory, prefetching).",
    "cpu-bound-op": "Look at the op's host-side implementation, or replace it with a device-side equivalent.",
    "placement": "Keep these values on the host, or stop reading device values in the step (log less often).",
    "launch-bound": "Launch fewer, larger kernels: capture the step in a graph, compile it, fuse ops, or use larger batches.",
    "low-gpu-utilization": "Feed the GPU more work per step: larger batches, fewer host stalls, overlap data loading.",
    "communication": "Overlap communication with computation (bucketed gradients, async collectives) or communicate less.",
    "amp": "Run matmuls and convolutions in reduced precision on tensor cores (automatic mixed precision).",
    "memory-pressure": "Lower peak memory: smaller batches, activation checkpointing, or freeing cached blocks.",
    "pageable-memcpy": "Copy from pinned host memory, asynchronously.",
}


# ------------------------------------------------------------------ helpers shared by rules


def _ops_table(ctx: Context) -> pd.DataFrame:
    cached = ctx.run._cache.get("advice_ops")
    if cached is None:
        cached = ctx.run.summary("operator").set_index("name")
        ctx.run._cache["advice_ops"] = cached
    return cached


def _outermost_operator(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each row, its outermost enclosing operator (the op user code called), or -1."""
    parent = events["parent"].to_numpy()
    is_op = events["kind"].to_numpy() == "operator"
    best = np.where(is_op[rows], rows, -1)
    cur = parent[rows].copy()
    while (cur >= 0).any():
        idx = np.flatnonzero(cur >= 0)
        hit = idx[is_op[cur[idx]]]
        best[hit] = cur[hit]
        cur[idx] = parent[cur[idx]]
    return best


# ------------------------------------------------------------------ rules


def rule_input_pipeline(ctx: Context) -> Finding | None:
    """Data loading takes at least INPUT_PIPELINE_MIN_PCT of step time.

    Saving: the data-loading time inside the steps; with loading done in background workers it
    overlaps compute, so at best all of it leaves the step.
    """
    model = ctx.run.summary("model").set_index("name")
    loading = float(model.loc["dataloader", "cpu_total_ns"])
    share = 100.0 * loading / ctx.step_ns if ctx.step_ns else 0.0
    if share < INPUT_PIPELINE_MIN_PCT:
        return None
    steps = ctx.run.summary("steps")
    worst = steps.sort_values("dataloader_ns", ascending=False).head(3)
    return Finding(
        id="input-pipeline",
        title=f"Data loading takes {share:.1f}% of each step",
        severity="",
        saving_ns=loading,
        evidence={
            "dataloader_ns": loading,
            "dataloader_pct": share,
            "dataloader_calls": int(model.loc["dataloader", "calls"]),
            "worst_steps": [
                {
                    "step": int(r.step),
                    "dataloader_ns": int(r.dataloader_ns),
                    "dur_ns": int(r.dur_ns),
                }
                for r in worst.itertuples()
            ],
        },
    )


def rule_cpu_bound_op(ctx: Context) -> list[Finding] | None:
    """In a run with a GPU, an op whose time is at least CPU_BOUND_MIN_HOST_PCT host-only and
    which takes at least CPU_BOUND_MIN_STEP_PCT of step time. Ops whose host time is mostly
    waiting on the device (syncs, copies) are left to the placement rule.

    Saving: the op's host time beyond its device time (``cpu_total - gpu_total``).
    """
    if not ctx.has_device or not ctx.step_ns:
        return None
    ops = _ops_table(ctx)
    waiting = _sync_time_by_op(ctx)
    findings = []
    candidates: list[str] = []
    for name, row in ops.iterrows():
        cpu = float(row["cpu_total_ns"])
        gpu = 0.0 if math.isnan(row["gpu_total_ns"]) else float(row["gpu_total_ns"])
        if 100.0 * cpu / ctx.step_ns < CPU_BOUND_MIN_STEP_PCT or cpu <= 0:
            continue
        host_only = max(cpu - gpu, 0.0)
        if 100.0 * host_only / cpu < CPU_BOUND_MIN_HOST_PCT:
            continue
        if waiting.get(name, 0.0) >= CPU_BOUND_MAX_WAITING_PCT / 100.0 * cpu:
            continue
        if normalize(name) in ALLOCATION_OPS:
            continue
        candidates.append(name)
        findings.append(
            Finding(
                id=f"cpu-bound-op:{name}",
                title=f"{name} spends {100.0 * host_only / cpu:.0f}% of its time on the host ({100.0 * cpu / ctx.step_ns:.1f}% of step time)",
                severity="",
                saving_ns=host_only,
                evidence={
                    "op": name,
                    "calls": int(row["calls"]),
                    "cpu_total_ns": cpu,
                    "gpu_total_ns": gpu,
                    "cpu_self_ns": float(row["cpu_self_ns"]),
                },
            )
        )
    # Nested ops repeat their children's time: keep the outermost culprits only.
    inner = _mostly_nested(ctx.run.events, candidates)
    findings = [f for f in findings if f.evidence["op"] not in inner]
    findings.sort(key=lambda f: -f.saving_ns)
    return findings[:3] or None


def _mostly_nested(events: pd.DataFrame, names: list[str]) -> set[str]:
    """Names among ``names`` whose calls mostly run inside a call of another name in ``names``."""
    if len(names) < 2:
        return set()
    all_names = events["name"].astype(str).to_numpy()
    parent = events["parent"].to_numpy()
    wanted = set(names)
    inner = set()
    for name in names:
        rows = np.flatnonzero(all_names == name)
        inside = np.zeros(len(rows), dtype=bool)
        cur = parent[rows].copy()
        while (cur >= 0).any():
            idx = np.flatnonzero(cur >= 0)
            hit = np.array(
                [all_names[c] in wanted and all_names[c] != name for c in cur[idx]], dtype=bool
            )
            inside[idx[hit]] = True
            cur[idx] = parent[cur[idx]]
        if len(rows) and inside.mean() > _NESTED_MAJORITY:
            inner.add(name)
    return inner


def _sync_rows(events: pd.DataFrame) -> np.ndarray:
    names = events["name"].astype(str)
    runtime = (events["kind"] == "runtime").to_numpy()
    return np.flatnonzero(runtime & names.str.contains(_SYNC_RE).to_numpy())


def _waiting_rows(run: Run) -> np.ndarray:
    """Runtime calls in which the host waits for the device: syncs, and launches of
    device-to-host copies (they return once the copy is done)."""
    events = run.events
    launcher = structure.run_launchers(run)
    dtoh = (events["kind"] == "memcpy").to_numpy() & events["name"].astype(str).str.contains(
        "DtoH"
    ).to_numpy()
    copy_launches = launcher[np.flatnonzero(dtoh)]
    return np.union1d(_sync_rows(events), copy_launches[copy_launches >= 0])


def _sync_time_by_op(ctx: Context) -> dict[str, float]:
    """Host time each operator name spends waiting for the device (summed over its calls)."""
    cached = ctx.run._cache.get("advice_sync_by_op")
    if cached is None:
        ev = ctx.run.events
        rows = _waiting_rows(ctx.run)
        names = ev["name"].astype(str).to_numpy()
        dur = ev["dur_ns"].to_numpy()
        cached = {}
        parent = ev["parent"].to_numpy()
        is_op = ev["kind"].to_numpy() == "operator"
        for r in rows.tolist():
            p = parent[r]
            while p >= 0:
                if is_op[p]:
                    cached[names[p]] = cached.get(names[p], 0.0) + float(dur[r])
                p = parent[p]
        ctx.run._cache["advice_sync_by_op"] = cached
    return cached


def rule_placement(ctx: Context) -> list[Finding] | None:
    """Ops whose execution forces device-to-host copies or host/device synchronizations while
    doing little device work of their own (``.item()``, ``.cpu()``, ``.tolist()``, control flow
    on device values, printing a tensor), holding the host at least PLACEMENT_MIN_STEP_PCT of
    step time. One finding per run, naming the ops with their copies and syncs per step.

    Saving: the host time spent blocked in those syncs and device-to-host copies.
    """
    if not ctx.has_device or not ctx.step_ns:
        return None
    ev = ctx.run.events
    names = ev["name"].astype(str).to_numpy()
    kind = ev["kind"].to_numpy()
    dur = ev["dur_ns"].to_numpy().astype(np.float64)
    launcher = structure.run_launchers(ctx.run)
    dtoh = np.flatnonzero(
        (kind == "memcpy") & ev["name"].astype(str).str.contains("DtoH").to_numpy()
    )
    syncs = _sync_rows(ev)
    culprit_rows: dict[int, dict[str, float]] = {}
    # device-to-host copies: blame the op that issued the launch; blocked time = launch call
    copy_launch = launcher[dtoh]
    ok = copy_launch >= 0
    owners = _outermost_operator(ev, copy_launch[ok]) if ok.any() else np.empty(0, dtype=np.int64)
    for owner, launch, copy in zip(
        owners.tolist(), copy_launch[ok].tolist(), dtoh[ok].tolist(), strict=True
    ):
        if owner < 0:
            continue
        entry = culprit_rows.setdefault(
            owner, {"dtoh": 0.0, "syncs": 0.0, "blocked": 0.0, "copy_ns": 0.0}
        )
        entry["dtoh"] += 1
        entry["blocked"] += dur[launch]
        entry["copy_ns"] += dur[copy]
    sync_owners = _outermost_operator(ev, syncs) if len(syncs) else np.empty(0, dtype=np.int64)
    for owner, sync in zip(sync_owners.tolist(), syncs.tolist(), strict=True):
        if owner < 0:
            continue
        entry = culprit_rows.setdefault(
            owner, {"dtoh": 0.0, "syncs": 0.0, "blocked": 0.0, "copy_ns": 0.0}
        )
        entry["syncs"] += 1
        entry["blocked"] += dur[sync]
    if not culprit_rows:
        return None
    by_name: dict[str, dict[str, float]] = {}
    _, gpu_total = structure.device_time_by_launcher(ctx.run)
    for row, entry in culprit_rows.items():
        agg = by_name.setdefault(
            names[row],
            {
                "calls": 0.0,
                "dtoh": 0.0,
                "syncs": 0.0,
                "blocked": 0.0,
                "copy_ns": 0.0,
                "cpu_ns": 0.0,
                "gpu_ns": 0.0,
            },
        )
        agg["calls"] += 1
        for key in ("dtoh", "syncs", "blocked", "copy_ns"):
            agg[key] += entry[key]
        agg["cpu_ns"] += dur[row]
        agg["gpu_ns"] += 0.0 if math.isnan(gpu_total[row]) else gpu_total[row]
    # Little device work of their own: the op's kernels are a small part of its host time.
    culprits = {
        n: a
        for n, a in by_name.items()
        if a["gpu_ns"] < PLACEMENT_MAX_DEVICE_PCT / 100.0 * a["cpu_ns"]
    }
    blocked = sum(min(a["blocked"], a["cpu_ns"]) for a in culprits.values())
    if not culprits or 100.0 * blocked / ctx.step_ns < PLACEMENT_MIN_STEP_PCT:
        return None
    ranked = sorted(culprits.items(), key=lambda kv: -kv[1]["blocked"])
    steps = max(ctx.steps, 1)
    ops = [
        {
            "op": name,
            "calls": int(a["calls"]),
            "device_to_host_copies_per_step": a["dtoh"] / steps,
            "syncs_per_step": a["syncs"] / steps,
            "blocked_ns": min(a["blocked"], a["cpu_ns"]),
            "cpu_total_ns": a["cpu_ns"],
            "gpu_total_ns": a["gpu_ns"],
        }
        for name, a in ranked[:5]
    ]
    top = ops[0]["op"]
    return [
        Finding(
            id="placement",
            title=f"{top} and {len(ops) - 1} other op(s) force device-to-host copies or syncs every step"
            if len(ops) > 1
            else f"{top} forces device-to-host copies or syncs every step",
            severity="",
            saving_ns=blocked,
            evidence={
                "ops": ops,
                "device_to_host_copies_per_step": sum(a["dtoh"] for a in culprits.values()) / steps,
                "syncs_per_step": sum(a["syncs"] for a in culprits.values()) / steps,
                "blocked_ns": blocked,
            },
        )
    ]


def _gpu_busy(ctx: Context) -> tuple[int, int]:
    """(merged device busy ns within the steps, kernel count)."""
    from perfkit_core.summaries import DEVICE_KINDS, clip_to, step_window

    ev = ctx.run.events
    sel = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(list(DEVICE_KINDS)).to_numpy()
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    window, _ = step_window(ctx.run)
    busy = clip_to(start[sel], end[sel], window)
    return int((busy[1] - busy[0]).sum()), int((ev["kind"] == "kernel").sum())


def rule_low_gpu_utilization(ctx: Context) -> Finding | None:
    """GPU busy (kernels, copies, sets, merged) under LOW_GPU_UTIL_PCT of step time.

    Saving: the GPU's idle time in the steps, an upper bound (the step cannot get shorter than
    its busy time).
    """
    if not ctx.has_device or not ctx.step_ns:
        return None
    busy, _ = _gpu_busy(ctx)
    share = 100.0 * busy / ctx.step_ns
    if share >= LOW_GPU_UTIL_PCT:
        return None
    return Finding(
        id="low-gpu-utilization",
        title=f"The GPU is busy only {share:.1f}% of the step",
        severity="",
        saving_ns=ctx.step_ns - busy,
        evidence={"gpu_busy_ns": busy, "gpu_busy_pct": share},
    )


def rule_launch_bound(ctx: Context) -> Finding | None:
    """Many short kernels: median kernel under LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS, GPU busy under
    LOW_GPU_UTIL_PCT, and host time in kernel launches above the kernels' device time.

    Saving: launch time beyond device time, at most the GPU's idle time.
    """
    if not ctx.has_device or not ctx.step_ns:
        return None
    ev = ctx.run.events
    kernels = ev[(ev["kind"] == "kernel") & (ev["stream"] >= 0)]
    if kernels.empty:
        return None
    median = float(kernels["dur_ns"].median())
    busy, count = _gpu_busy(ctx)
    names = ev["name"].astype(str)
    launches = ev[(ev["kind"] == "runtime") & names.str.contains("Launch", case=False).to_numpy()]
    launch_ns = float(launches["dur_ns"].sum())
    kernel_ns = float(kernels["dur_ns"].sum())
    if (
        median >= LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS
        or 100.0 * busy / ctx.step_ns >= LOW_GPU_UTIL_PCT
        or launch_ns <= kernel_ns
    ):
        return None
    saving = min(launch_ns - kernel_ns, ctx.step_ns - busy)
    return Finding(
        id="launch-bound",
        title=f"{count / max(ctx.steps, 1):.0f} short kernels per step (median {median / 1000:.1f} us): the host cannot launch them fast enough",
        severity="",
        saving_ns=saving,
        evidence={
            "kernels_per_step": count / max(ctx.steps, 1),
            "median_kernel_ns": median,
            "launch_ns": launch_ns,
            "kernel_ns": kernel_ns,
            "gpu_busy_ns": busy,
        },
    )


def rule_communication(ctx: Context) -> Finding | None:
    """Communication above COMMUNICATION_MIN_PCT of step time, or less than
    COMMUNICATION_MIN_OVERLAP_PCT of it overlapped with computation.

    Saving: the communication time not hidden behind computation.
    """
    if not ctx.step_ns:
        return None
    view = ctx.run.summary("distributed")
    if view.empty:
        return None
    totals = view.groupby(view["name"].str.split(" ").str[0])["time_ns"].sum()
    comm = float(totals.get("communication", 0.0))
    if comm <= 0:
        return None
    overlap = float(totals.get("overlap", 0.0))
    share = 100.0 * comm / ctx.step_ns
    overlapped = 100.0 * overlap / comm
    poorly_overlapped = (
        overlapped < COMMUNICATION_MIN_OVERLAP_PCT and share >= COMMUNICATION_MIN_POOR_OVERLAP_PCT
    )
    if share < COMMUNICATION_MIN_PCT and not poorly_overlapped:
        return None
    return Finding(
        id="communication",
        title=f"Communication takes {share:.1f}% of the step, {overlapped:.0f}% of it overlapped with computation",
        severity="",
        saving_ns=comm - overlap,
        evidence={
            "communication_ns": comm,
            "overlap_ns": overlap,
            "communication_pct": share,
            "overlap_pct": overlapped,
        },
    )


def rule_amp(ctx: Context) -> Finding | None:
    """Matmul/convolution kernels take at least AMP_MIN_KERNEL_PCT of kernel time and none of
    the run's kernels ran on tensor cores.

    Saving: that kernel time times (1 - 1/AMP_SPEEDUP).
    """
    if not ctx.has_device:
        return None
    kernels = ctx.run.summary("kernel")
    if kernels.empty or kernels["tensor_cores"].any():
        return None
    names = kernels["name"]
    heavy = kernels[names.str.contains(_MATMUL_CONV_RE) & ~names.str.contains(_NORM_RE)]
    total = float(kernels["gpu_total_ns"].sum())
    heavy_ns = float(heavy["gpu_total_ns"].sum())
    if not total or 100.0 * heavy_ns / total < AMP_MIN_KERNEL_PCT:
        return None
    return Finding(
        id="amp",
        title=f"matmul/convolution kernels take {100.0 * heavy_ns / total:.0f}% of GPU time and none run on tensor cores",
        severity="",
        saving_ns=heavy_ns * (1.0 - 1.0 / AMP_SPEEDUP),
        evidence={
            "matmul_conv_ns": heavy_ns,
            "kernel_ns": total,
            "top_kernels": heavy.head(5)[["name", "calls", "gpu_total_ns"]].to_dict("records"),
        },
    )


def rule_memory_pressure(ctx: Context) -> Finding | None:
    """Peak reserved (or allocated) device memory above MEMORY_PRESSURE_PCT of the device.

    Saving: none in time (0); the risk is running out of memory and allocator thrash.
    """
    devices = {
        d.get("index"): d for d in ctx.run.meta.get("devices") or [] if d.get("total_memory_bytes")
    }
    if not devices:
        return None
    memory = ctx.run.summary("memory", by="device")
    if memory.empty:
        return None
    worst = None
    for row in memory.itertuples():
        if not str(row.name).startswith("gpu:"):
            continue
        index = int(str(row.name).split(":")[1])
        total = devices.get(index, {}).get("total_memory_bytes")
        peak = float(np.fmax(row.peak_reserved_bytes, row.peak_allocated_bytes))
        pressured = (
            bool(total) and not math.isnan(peak) and 100.0 * peak / total >= MEMORY_PRESSURE_PCT
        )
        if pressured and (worst is None or peak / total > worst[1] / worst[2]):
            worst = (index, float(peak), float(total))
    if worst is None:
        return None
    index, peak, total = worst
    return Finding(
        id="memory-pressure",
        title=f"GPU {index} peaks at {100.0 * peak / total:.0f}% of its memory",
        severity="medium",
        saving_ns=0.0,
        evidence={"device": index, "peak_bytes": peak, "total_bytes": total},
    )


def rule_pageable_memcpy(ctx: Context) -> Finding | None:
    """Host-to-device copies from pageable memory, their launches holding the host at least
    PAGEABLE_MIN_STEP_PCT of step time.

    Saving: the host time blocked in those copy launches (a pinned, asynchronous copy returns
    at once).
    """
    if not ctx.has_device or not ctx.step_ns:
        return None
    ev = ctx.run.events
    names = ev["name"].astype(str)
    copies = np.flatnonzero(
        (
            (ev["kind"] == "memcpy") & names.str.contains("HtoD") & names.str.contains("Pageable")
        ).to_numpy()
    )
    if len(copies) == 0:
        return None
    launcher = structure.run_launchers(ctx.run)[copies]
    dur = ev["dur_ns"].to_numpy()
    blocked = float(dur[launcher[launcher >= 0]].sum())
    if 100.0 * blocked / ctx.step_ns < PAGEABLE_MIN_STEP_PCT:
        return None
    return Finding(
        id="pageable-memcpy",
        title=f"{len(copies)} host-to-device copies from pageable memory hold the host {blocked / 1e6:.3f} ms",
        severity="",
        saving_ns=blocked,
        evidence={
            "copies": len(copies),
            "bytes": float(np.nansum(ev["bytes"].to_numpy()[copies])),
            "copy_ns": float(dur[copies].sum()),
            "blocked_ns": blocked,
        },
    )


BUILTIN_RULES: tuple[tuple[str, Advisor, str], ...] = (
    ("input-pipeline", rule_input_pipeline, "data loading takes a real share of each step"),
    (
        "placement",
        rule_placement,
        "ops force device-to-host copies or syncs while doing little device work",
    ),
    ("cpu-bound-op", rule_cpu_bound_op, "an op is mostly host-side in a GPU run"),
    ("launch-bound", rule_launch_bound, "many short kernels; launches can't keep the GPU busy"),
    ("low-gpu-utilization", rule_low_gpu_utilization, "the GPU is idle for much of the step"),
    ("communication", rule_communication, "communication is large or poorly overlapped"),
    ("amp", rule_amp, "fp32 matmul/conv time with no tensor-core kernels"),
    ("memory-pressure", rule_memory_pressure, "peak device memory close to the device's capacity"),
    ("pageable-memcpy", rule_pageable_memcpy, "host-to-device copies from pageable memory"),
)


@hookimpl
def perfkit_register_advisors(register: Callable[[str, Advisor, str], None]) -> None:
    """Register the built-in rules."""
    for rule_id, function, description in BUILTIN_RULES:
        register(rule_id, function, description)
