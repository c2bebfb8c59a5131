"""Rules about host-side time: host-bound ops and device_guard-style placement."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.advice import timeline
from perfkit_core.advice.basis import scaled_basis_text, step_basis
from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.text import duration_text, per_step_text
from perfkit_core.advice.waits import sync_rows, waiting_rows
from perfkit_core.events import links
from perfkit_core.events.intervals import merge_intervals
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_contains, str_values
from perfkit_core.views.common import DEVICE_KINDS
from perfkit_core.views.families import normalize

if TYPE_CHECKING:
    import pandas as pd


# ------------------------------------------------------------------ thresholds (documented)
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

# ------------------------------------------------------------------ helpers shared by rules


def _ops_table(ctx: Context) -> pd.DataFrame:
    return ctx.run.cached("advice_ops", lambda: ctx.run.summary("operator").set_index("name"))


def _outermost_operator(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For each row, its outermost enclosing operator (the op user code called), or -1."""
    parent = events["parent"].to_numpy()
    is_op = str_values(events["kind"]) == "operator"
    best = np.where(is_op[rows], rows, -1)
    cur = parent[rows].copy()
    while (cur >= 0).any():
        idx = np.flatnonzero(cur >= 0)
        hit = idx[is_op[cur[idx]]]
        best[hit] = cur[hit]
        cur[idx] = parent[cur[idx]]
    return best


# ------------------------------------------------------------------ rules


def rule_cpu_bound_op(ctx: Context) -> list[Finding] | None:
    """In a run with a GPU, an op whose time is at least CPU_BOUND_MIN_HOST_PCT host-only and
    which takes at least CPU_BOUND_MIN_STEP_PCT of step time. Ops whose host time is mostly
    waiting on the device (syncs, copies) are left to the placement rule.

    Saving: the op's host time beyond its device time (``cpu_total - gpu_total``), scaled to
    the step without the profiler where the step timer timed it (``Basis.scaled``).

    Where the launch-bound finding fires, ops whose device work per call is as short as a
    launch-bound kernel are its: their host time is the launches it claims, and its remedy
    (CUDA graphs) removes it.
    """
    if not ctx.has_device or not ctx.total_ns:
        return None
    from perfkit_core.advice.rules.device import (
        LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS,
        rule_launch_bound,
    )

    launch_bound = rule_launch_bound(ctx) is not None
    basis = step_basis(ctx)
    ops = _ops_table(ctx)
    waiting = _sync_time_by_op(ctx)
    findings = []
    candidates: list[str] = []
    for name, row in ops.iterrows():
        cpu = float(row["cpu_total_ns"])
        gpu = 0.0 if math.isnan(row["gpu_total_ns"]) else float(row["gpu_total_ns"])
        if 100.0 * cpu / ctx.total_ns < CPU_BOUND_MIN_STEP_PCT or cpu <= 0:
            continue
        if launch_bound and gpu < LAUNCH_BOUND_MAX_MEDIAN_KERNEL_NS * int(row["calls"]):
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
                title=f"{name} spends {100.0 * host_only / cpu:.0f}% of its time on the host ({100.0 * ctx.per_step(cpu) / ctx.step_ns:.1f}% of the step)",
                severity="",
                saving_ns=basis.scaled(ctx.per_step(host_only)),
                details=[
                    f"{name}: {ctx.per_step(int(row['calls'])):g} calls per step, "
                    f"{per_step_text(ctx.per_step(cpu), ctx.step_ns)} on the host, of which the "
                    f"device work it launched matches only {duration_text(ctx.per_step(gpu))} per "
                    "step" + (" (the profiled steps)." if basis.name == "unprofiled" else ".")
                ],
                estimate=(
                    "The op's host time beyond the device time it launched. "
                    + scaled_basis_text(basis)
                ),
                cites={"operator": [name]},
                evidence={
                    "op": name,
                    "calls": int(row["calls"]),
                    "cpu_total_ns": cpu,
                    "gpu_total_ns": gpu,
                    "cpu_self_ns": float(row["cpu_self_ns"]),
                    "basis": basis.name,
                    "basis_step_ns": basis.step_ns,
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
    all_names = str_values(events["name"])
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


def _sync_time_by_op(ctx: Context) -> dict[str, float]:
    """Host time each operator name spends waiting for the device (summed over its calls)."""
    cached = ctx.run.cache.get("advice_sync_by_op")
    if cached is None:
        ev = ctx.run.events
        rows = waiting_rows(ctx.run)
        names = str_values(ev["name"])
        dur = ev["dur_ns"].to_numpy()
        cached = {}
        parent = ev["parent"].to_numpy()
        is_op = str_values(ev["kind"]) == "operator"
        for r in rows.tolist():
            p = parent[r]
            while p >= 0:
                if is_op[p]:
                    cached[names[p]] = cached.get(names[p], 0.0) + float(dur[r])
                p = parent[p]
        ctx.run.cache.put("advice_sync_by_op", cached)
    return cached


def rule_placement(ctx: Context) -> list[Finding] | None:
    """Ops whose execution forces device-to-host copies or host/device synchronizations while
    doing little device work of their own (``.item()``, ``.cpu()``, ``.tolist()``, control flow
    on device values, printing a tensor), holding the host at least PLACEMENT_MIN_STEP_PCT of
    step time. One finding per run, naming the ops with their copies and syncs per step.

    Saving: the recorded steps replayed (``advice.timeline.Replay``) with and without those
    ops' host spans: their calls are not made, their host work is not done and the host stops
    waiting where they waited, while device work queued before them still runs. The host's
    work loses the profiler's cost per recorded host event, the cost at which the replayed
    steps last as long as the step timer's steps without the profiler, or runs as recorded
    without a step timer. Where the replay does not give back the recorded steps within
    ``timeline.FAITHFUL``, the device's idle time around the syncs and copies instead (from its
    last work before each one returns to its next work after, at most the time the host was
    blocked in it), scaled to the step without the profiler (``Basis.scaled``).
    """
    if not ctx.has_device or not ctx.total_ns:
        return None
    ev = ctx.run.events
    names = str_values(ev["name"])
    kind = str_values(ev["kind"])
    dur = ev["dur_ns"].to_numpy().astype(np.float64)
    launcher = links.run_launchers(ctx.run)
    dtoh = np.flatnonzero((kind == "memcpy") & str_contains(ev["name"], "DtoH"))
    syncs = sync_rows(ev)
    start = ev["start_ns"].to_numpy()
    bubble = _device_bubbles(ev, start, start + ev["dur_ns"].to_numpy())
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
            owner, {"dtoh": 0.0, "syncs": 0.0, "blocked": 0.0, "copy_ns": 0.0, "bubble": 0.0}
        )
        entry["dtoh"] += 1
        entry["blocked"] += dur[launch]
        entry["copy_ns"] += dur[copy]
        entry["bubble"] += bubble[launch]
    sync_owners = _outermost_operator(ev, syncs) if len(syncs) else np.empty(0, dtype=np.int64)
    for owner, sync in zip(sync_owners.tolist(), syncs.tolist(), strict=True):
        if owner < 0:
            continue
        entry = culprit_rows.setdefault(
            owner, {"dtoh": 0.0, "syncs": 0.0, "blocked": 0.0, "copy_ns": 0.0, "bubble": 0.0}
        )
        entry["syncs"] += 1
        entry["blocked"] += dur[sync]
        entry["bubble"] += bubble[sync]
    if not culprit_rows:
        return None
    by_name: dict[str, dict[str, float]] = {}
    _, gpu_total = links.device_time_by_launcher(ctx.run)
    for row, entry in culprit_rows.items():
        agg = by_name.setdefault(
            names[row],
            {
                "calls": 0.0,
                "dtoh": 0.0,
                "syncs": 0.0,
                "blocked": 0.0,
                "copy_ns": 0.0,
                "bubble": 0.0,
                "cpu_ns": 0.0,
                "gpu_ns": 0.0,
            },
        )
        agg["calls"] += 1
        for key in ("dtoh", "syncs", "blocked", "copy_ns", "bubble"):
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
    if not culprits or 100.0 * blocked / ctx.total_ns < PLACEMENT_MIN_STEP_PCT:
        return None
    ranked = sorted(culprits.items(), key=lambda kv: -kv[1]["blocked"])
    steps = max(ctx.steps, 1)
    saving = sum(min(a["bubble"], a["blocked"], a["cpu_ns"]) for a in culprits.values())
    ops: list[dict[str, Any]] = [
        {
            "op": name,
            "calls": int(a["calls"]),
            "device_to_host_copies_per_step": a["dtoh"] / steps,
            "syncs_per_step": a["syncs"] / steps,
            "blocked_per_step_ns": min(a["blocked"], a["cpu_ns"]) / steps,
            "device_idle_per_step_ns": min(a["bubble"], a["blocked"], a["cpu_ns"]) / steps,
            "cpu_total_ns": a["cpu_ns"],
            "gpu_total_ns": a["gpu_ns"],
        }
        for name, a in ranked[:5]
    ]
    top = ops[0]["op"]
    basis = step_basis(ctx)
    replayed = _replayed_saving(ctx, [r for r in culprit_rows if names[r] in culprits])
    copies = sum(a["dtoh"] for a in culprits.values()) / steps
    sync_count = sum(a["syncs"] for a in culprits.values()) / steps
    # the figures as recorded: where the saving is scaled to the step without the profiler,
    # the sentences say they are the profiled steps'
    recorded = " in the profiled steps" if basis.name == "unprofiled" else ""
    details = [
        f"{o['op']}: {o['device_to_host_copies_per_step']:g} device-to-host copies and "
        f"{o['syncs_per_step']:g} syncs per step hold the host "
        f"{duration_text(o['blocked_per_step_ns'])} per step; the device sits idle "
        f"{duration_text(o['device_idle_per_step_ns'])} per step around them{recorded}."
        for o in ops
    ]
    if replayed is None:  # not replayed, or the replay is not faithful: the idle time instead
        saving_ns = basis.scaled(saving / steps)
        estimate = (
            "The device's idle time around the syncs and copies (from its last work before "
            "each returns to its next work after), at most the time the host was blocked; "
            "device work the host waited for still has to run and is not counted. "
            + scaled_basis_text(basis)
        )
    else:
        saving_ns, estimate = replayed["saving_ns"], replayed["estimate"]
        details.append(replayed["text"])
    return [
        Finding(
            id="placement",
            title=f"{top} and {len(ops) - 1} other op(s) force device-to-host copies or syncs every step"
            if len(ops) > 1
            else f"{top} forces device-to-host copies or syncs every step",
            severity="",
            saving_ns=saving_ns,
            details=details,
            cites={"operator": [o["op"] for o in ops]},
            acts_on="device",
            estimate=estimate,
            evidence={
                "estimated_by": "device idle" if replayed is None else "replay",
                "replay": None if replayed is None else replayed["evidence"],
                "ops": ops,
                "device_to_host_copies_per_step": copies,
                "syncs_per_step": sync_count,
                "blocked_per_step_ns": blocked / steps,
                "device_idle_per_step_ns": saving / steps,
                "basis": basis.name,
                "basis_step_ns": basis.step_ns,
            },
        )
    ]


def _replayed_saving(ctx: Context, rows: list[int]) -> dict[str, Any] | None:
    """What the step would lose without the host spans of ``rows`` (ops of ``ctx``'s run), by
    the replay: ``saving_ns`` per step, against the step without the profiler where the step
    timer timed it (the cost per recorded event at which the replay matches it taken out of the
    host's work), else the profiled step; a ``text`` for the finding's details, its
    ``estimate`` and ``evidence``. None where the run cannot be replayed, the replay does not
    give back the recorded steps within ``timeline.FAITHFUL``, or no cost per event makes it
    last as long as the step without the profiler."""
    replay = timeline.Replay.of(ctx.run)
    if replay is None or not rows:
        return None
    fidelity = replay.fidelity
    if abs(fidelity) > timeline.FAITHFUL:
        return None
    ev = ctx.run.events
    begin = (ev["start_ns"].to_numpy()[rows] - replay.origin).astype(np.float64)
    removed = merge_intervals(begin, begin + ev["dur_ns"].to_numpy()[rows])
    steps = max(ctx.steps, 1)
    basis = step_basis(ctx)
    unprofiled = basis.name == "unprofiled"
    cost = replay.calibrate(basis.step_ns * steps) if unprofiled else 0.0
    if cost is None:
        return None  # the device and the waits alone take longer than the step
    now = replay.total(cost) / steps
    remedied = replay.total(cost, removed) / steps
    saving = max(now - remedied, 0.0)
    # shown against the step the saving is stated against (the replay gives it back within
    # its fidelity, or within the calibration's tolerance)
    step = basis.step_ns
    against = (
        f"the step without the profiler, {cost / 1e3:.1f} us per recorded event taken out of the "
        "host's work to match it"
        if unprofiled
        else "the profiled step, the host at its recorded pace"
    )
    text = (
        f"Replayed without these calls, the steps would take {duration_text(step - saving)} "
        f"against {duration_text(step)} ({against}): {duration_text(saving)} per step less, as the "
        "calls' own host time goes and the host, no longer waiting, queues the device's next "
        "work while it still runs."
    )
    pace = (
        f"It takes {cost / 1e3:.1f} us per recorded event out of the host's work (the time "
        "waits held it is kept): the cost at which the replayed steps last as long as the step "
        f"timer's steps without the profiler ({basis.step_ns / 1e6:.2f} ms)"
        + (
            ", and the basis's cost per event"
            if basis.event_cost_from == "replay"
            else "; the device paces too much of the steps for it to be the profiler's cost per "
            "event, which the other findings take from the steps' extra time"
        )
        + "."
        if unprofiled
        else "The host runs at its recorded pace: without the step timer's figures the saving "
        "is against the profiled step."
    )
    estimate = (
        "The recorded steps replayed with and without these calls: each host call after the "
        "host work recorded before it, each kernel once its launch is made and its stream is "
        "free, each wait until the device has finished the work queued before it. Without the "
        "calls the host neither makes them nor waits there; device work queued before them "
        f"still runs. The replay gives back the recorded steps within "
        f"{max(100 * abs(fidelity), 0.1):.1f}%. " + pace
    )
    evidence = {
        "event_cost_ns": float(cost),
        "fidelity": float(fidelity),
        "replayed_step_ns": float(now),
        "replayed_remedied_step_ns": float(remedied),
    }
    return {"saving_ns": saving, "text": text, "estimate": estimate, "evidence": evidence}


def _device_bubbles(events: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For every row, the device idle time around the moment it ends: from the device's last
    work ending at or before the row's end (but not before the row's start) to its next work
    starting after, at most the row's own duration (ns). Host rows only; 0 without device work."""
    device = (events["stream"].to_numpy() >= 0) & kind_is(events, *DEVICE_KINDS)
    out = np.zeros(len(start), dtype=np.float64)
    if not device.any():
        return out
    busy_start, busy_end = merge_intervals(start[device], end[device])
    nxt = np.searchsorted(busy_start, end, side="right")
    next_start = np.where(
        nxt < len(busy_start), busy_start[np.minimum(nxt, len(busy_start) - 1)], end
    )
    prev = np.searchsorted(busy_end, end, side="right") - 1
    last_end = np.where(prev >= 0, busy_end[np.maximum(prev, 0)], start)
    # A row that ends while the device is still busy (a block that started before it) has no
    # bubble at its end.
    inside = (
        (nxt - 1 >= 0)
        & (busy_start[np.maximum(nxt - 1, 0)] <= end)
        & (busy_end[np.maximum(nxt - 1, 0)] > end)
    )
    gap = next_start - np.maximum(last_end, start)
    gap = np.where(inside, 0, gap)
    return np.clip(gap, 0, end - start).astype(np.float64)
