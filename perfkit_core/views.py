"""Summary views: the registry, and the built-in ``operator`` and ``user`` views.

A view is a function ``view(run, **options) -> DataFrame`` registered through the
``perfkit_register_views`` hook. This module is itself a built-in plugin.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core import structure
from perfkit_core.errors import UnknownViewError
from perfkit_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.run import Run


@dataclass(frozen=True)
class ViewSpec:
    """A registered view: its name, the function computing it, and a one-line description."""

    name: str
    function: Callable[..., pd.DataFrame]
    description: str


_views: dict[str, ViewSpec] | None = None
_views_lock = threading.Lock()


def clear_view_cache() -> None:
    """Forget the registered views; the next lookup asks the plugins again."""
    global _views
    with _views_lock:
        _views = None


def registered_views() -> dict[str, ViewSpec]:
    """Return every view the installed plugins register, by name."""
    global _views
    with _views_lock:
        if _views is None:
            from perfkit_core.plugins import get_plugin_manager

            found: dict[str, ViewSpec] = {}

            def register(
                name: str, function: Callable[..., pd.DataFrame], description: str = ""
            ) -> None:
                found[name] = ViewSpec(name, function, description)

            hook = get_plugin_manager().hook.perfkit_register_views
            # Built-ins register first, so plugins registered later may override them.
            for impl in hook.get_hookimpls():
                impl.function(register=register)
            _views = found
        return dict(_views)


def get_view(name: str) -> ViewSpec:
    """Return the view called ``name``; ``UnknownViewError`` lists the known ones otherwise."""
    views = registered_views()
    if name not in views:
        raise UnknownViewError(f"unknown view {name!r}; known views: {', '.join(sorted(views))}")
    return views[name]


# ---------------------------------------------------------------------------------------------
# Host-event tables (operator, user)

SORT_KEYS = (
    "calls",
    "cpu_total",
    "cpu_self",
    "cpu_avg",
    "cpu_max",
    "cpu_min",
    "gpu_total",
    "gpu_self",
    "gpu_avg",
    "gpu_max",
    "gpu_min",
)


def host_self_time(run: Run) -> np.ndarray:
    """Return each row's self time in ns: its duration less its host children's, never negative.

    Cached on the run.
    """
    cached = run._cache.get("self_ns")
    if cached is None:
        events = run.events
        dur = events["dur_ns"].to_numpy()
        child = structure.children_sum(events["parent"].to_numpy(), dur.astype(np.float64))
        cached = np.maximum(dur - child.astype(np.int64), 0)
        run._cache["self_ns"] = cached
    return cached


def _python_stacks(run: Run, rows: np.ndarray, n: int) -> list[str]:
    """Top ``n`` enclosing Python frames of each row (innermost first), newline-joined."""
    events = run.events
    parent = events["parent"].to_numpy()
    is_python = (events["kind"] == "python").to_numpy()
    name_codes = events["name"].cat.codes.to_numpy().astype(np.int64)
    categories = events["name"].cat.categories
    frames = np.full((len(rows), n), -1, dtype=np.int64)
    count = np.zeros(len(rows), dtype=np.int64)
    cur = parent[rows]
    active = cur >= 0
    while active.any():
        idx = np.flatnonzero(active)
        hit = idx[is_python[cur[idx]]]
        frames[hit, count[hit]] = name_codes[cur[hit]]
        count[hit] += 1
        cur[idx] = parent[cur[idx]]
        active = (cur >= 0) & (count < n)
    uniq, inverse = np.unique(frames, axis=0, return_inverse=True)
    labels = ["\n".join(str(categories[c]) for c in row if c >= 0) for row in uniq]
    return [labels[i] for i in np.asarray(inverse).reshape(-1)]


def host_event_table(
    run: Run,
    kinds: Iterable[str],
    *,
    group_by_input_shape: bool = False,
    group_by_stack_n: int = 0,
    rank: int | None = None,
    by_thread: bool = False,
    sort_by: str = "cpu_total",
    top: int | None = None,
) -> pd.DataFrame:
    """Return one row per name (and shape / stack / thread when asked) of host events of ``kinds``.

    Columns: ``name``, [``input_shapes``], [``stack``], ``calls``, ``cpu_total_ns``,
    ``cpu_self_ns``, ``cpu_avg_ns``, ``cpu_max_ns``, ``cpu_min_ns``, ``gpu_total_ns``,
    ``gpu_self_ns``, ``gpu_avg_ns``, ``gpu_max_ns``, ``gpu_min_ns`` (ns; GPU columns are NaN when
    the run recorded no device events). CPU time is wall time on the host thread; self time
    excludes nested host events and is never negative. GPU time is the device time of the work
    the event launched (total: itself and everything nested in it; self: launched directly).
    Where the profiler recorded FLOPs, ``flops`` sums them and ``gflops_per_s`` divides them by
    the GPU time (the CPU time when no GPU time was recorded); both are NaN otherwise.
    ``by_thread`` adds the ``tid`` key (one row per thread instead of threads merged).
    """
    import pandas as pd

    if sort_by not in SORT_KEYS and sort_by != "name":
        raise ValueError(f"sort_by must be one of {', '.join(SORT_KEYS)} or name, not {sort_by!r}")
    events = run.events
    mask = events["kind"].isin(list(kinds)).to_numpy() & (events["stream"].to_numpy() < 0)
    if rank is not None:
        mask &= events["rank"].to_numpy() == rank
    rows = np.flatnonzero(mask)
    gpu_self, gpu_total = structure.device_time_by_launcher(run)
    frame = pd.DataFrame(
        {
            "name": events["name"].to_numpy()[rows].astype(object),
            "dur": events["dur_ns"].to_numpy()[rows],
            "self": host_self_time(run)[rows],
            "gpu_total": gpu_total[rows],
            "gpu_self": gpu_self[rows],
            "flops": events["flops"].to_numpy()[rows],
        }
    )
    keys = ["name"]
    if by_thread:
        frame["tid"] = events["tid"].to_numpy()[rows]
        keys.append("tid")
    if group_by_input_shape:
        frame["input_shapes"] = events["input_shapes"].to_numpy()[rows].astype(object)
        keys.append("input_shapes")
    if group_by_stack_n > 0:
        recorded = events["stack"].to_numpy()[rows].astype(object)
        if any(recorded):
            stacks = ["\n".join(s.split("\n")[:group_by_stack_n]) for s in recorded]
        else:
            stacks = _python_stacks(run, rows, group_by_stack_n)
        frame["stack"] = stacks
        keys.append("stack")
    grouped = frame.groupby(keys, sort=False, observed=True, dropna=False)
    out = grouped.agg(
        calls=("dur", "size"),
        cpu_total_ns=("dur", "sum"),
        cpu_self_ns=("self", "sum"),
        cpu_max_ns=("dur", "max"),
        cpu_min_ns=("dur", "min"),
        gpu_total_ns=("gpu_total", "sum"),
        gpu_self_ns=("gpu_self", "sum"),
        gpu_max_ns=("gpu_total", "max"),
        gpu_min_ns=("gpu_total", "min"),
        flops=("flops", lambda f: f.sum(min_count=1)),
    ).reset_index()
    has_gpu = not np.isnan(gpu_total).all()
    seconds = (
        np.where(out["gpu_total_ns"].fillna(0) > 0, out["gpu_total_ns"], out["cpu_total_ns"]) / 1e9
    )
    out["gflops_per_s"] = np.where(
        seconds > 0, out["flops"] / 1e9 / np.where(seconds > 0, seconds, 1), np.nan
    )
    out["cpu_avg_ns"] = out["cpu_total_ns"] / out["calls"]
    out["gpu_avg_ns"] = out["gpu_total_ns"] / out["calls"]
    if not has_gpu:
        for col in ("gpu_total_ns", "gpu_self_ns", "gpu_avg_ns", "gpu_max_ns", "gpu_min_ns"):
            out[col] = np.nan
    ordered = [
        *keys,
        "calls",
        "cpu_total_ns",
        "cpu_self_ns",
        "cpu_avg_ns",
        "cpu_max_ns",
        "cpu_min_ns",
        "gpu_total_ns",
        "gpu_self_ns",
        "gpu_avg_ns",
        "gpu_max_ns",
        "gpu_min_ns",
        "flops",
        "gflops_per_s",
    ]
    out = out[ordered]
    out["calls"] = out["calls"].astype(np.int64)
    for col in ("cpu_total_ns", "cpu_self_ns", "cpu_max_ns", "cpu_min_ns"):
        out[col] = out[col].astype(np.int64)
    if sort_by == "name":
        out = out.sort_values(keys, kind="stable")
    else:
        column = sort_by if sort_by == "calls" else f"{sort_by}_ns"
        out = out.sort_values([column, "name"], ascending=[False, True], kind="stable")
    if top is not None:
        out = out.head(top)
    return out.reset_index(drop=True)


def operator_view(run: Run, *, op_detail: bool = False, **options: Any) -> pd.DataFrame:
    """Operators: calls and CPU/GPU time per operator name (see ``host_event_table``).

    ``op_detail=True`` follows each operator row with its detail rows (column ``level`` 1,
    ``detail_of`` naming the operator): the inner stages recorded directly inside it (Paddle's
    infer_meta, kernel launch, compute, ...) with their CPU time, then the device kernels its
    runtime calls launched with their GPU time, as Paddle's operator view with op_detail does.
    """
    import pandas as pd

    table = host_event_table(run, ("operator",), **options)
    if not op_detail:
        return table
    ev = run.events
    names = ev["name"].astype(str).to_numpy()
    kind = ev["kind"].to_numpy()
    parent = ev["parent"].to_numpy()
    dur = ev["dur_ns"].to_numpy()
    parts = []
    inner = np.flatnonzero((kind == "operator_inner") & (parent >= 0))
    inner = inner[kind[parent[inner]] == "operator"]
    if len(inner):
        f = pd.DataFrame(
            {"detail_of": names[parent[inner]], "name": names[inner], "dur": dur[inner]}
        )
        g = f.groupby(["detail_of", "name"], sort=False).agg(
            calls=("dur", "size"),
            cpu_total_ns=("dur", "sum"),
            cpu_max_ns=("dur", "max"),
            cpu_min_ns=("dur", "min"),
        )
        g = g.reset_index()
        g["cpu_avg_ns"] = g["cpu_total_ns"] / g["calls"]
        parts.append(g.sort_values("cpu_total_ns", ascending=False, kind="stable"))
    launcher = structure.run_launchers(run)
    dev = np.flatnonzero(launcher >= 0)
    op_of = np.where(dev.size > 0, parent[launcher[dev]], -1) if dev.size else dev
    if dev.size:
        ok = op_of >= 0
        dev, op_of = dev[ok], op_of[ok]
        ok = kind[op_of] == "operator"
        dev, op_of = dev[ok], op_of[ok]
    if len(dev):
        f = pd.DataFrame({"detail_of": names[op_of], "name": names[dev], "dur": dur[dev]})
        g = f.groupby(["detail_of", "name"], sort=False).agg(
            calls=("dur", "size"),
            gpu_total_ns=("dur", "sum"),
            gpu_max_ns=("dur", "max"),
            gpu_min_ns=("dur", "min"),
        )
        g = g.reset_index()
        g["gpu_avg_ns"] = g["gpu_total_ns"] / g["calls"]
        parts.append(g.sort_values("gpu_total_ns", ascending=False, kind="stable"))
    table = table.assign(level=0, detail_of="")
    if not parts:
        return table
    detail = pd.concat(parts, ignore_index=True).assign(level=1)
    by_op = {name: grp for name, grp in detail.groupby("detail_of", sort=False)}
    pieces = []
    for _, row in table.iterrows():
        pieces.append(row.to_frame().T)
        extra = by_op.get(row["name"])
        if extra is not None:
            pieces.append(extra.reindex(columns=table.columns))
    out = pd.concat(pieces, ignore_index=True)
    for col in ("calls", "level"):
        out[col] = out[col].astype(np.int64)
    for col in table.columns:
        if col.endswith(("_ns", "_pct", "_per_s")) or col == "flops":
            out[col] = out[col].astype(np.float64)
    return out


def user_view(run: Run, **options: Any) -> pd.DataFrame:
    """User-defined spans (record_function, RecordEvent): calls and time per span name."""
    return host_event_table(run, ("user",), **options)


@hookimpl
def perfkit_register_views(
    register: Callable[[str, Callable[..., pd.DataFrame], str], None],
) -> None:
    """Register the built-in views."""
    register("operator", operator_view, "calls, CPU and GPU time per operator")
    register("user", user_view, "calls, CPU and GPU time per user-defined span")
    register(
        "model",
        model_view,
        "step time by training phase: dataloader, forward, backward, optimization, others",
    )
    from perfkit_core import summaries

    register(
        "overview",
        summaries.overview_view,
        "time per event kind, overlaps merged, host and device side",
    )
    register(
        "device",
        summaries.device_view,
        "CPU utilization where recorded, and each GPU's busy share of the steps",
    )
    register(
        "kernel", summaries.kernel_view, "calls, time, launch shape and occupancy per GPU kernel"
    )
    register(
        "memcpy",
        summaries.memcpy_view,
        "device copies and sets by direction, host memory and sync: time, bytes, GB/s",
    )
    register(
        "memory",
        summaries.memory_view,
        "allocations and frees per op (by='device': peaks per device)",
    )
    register(
        "distributed", summaries.distributed_view, "communication, computation and their overlap"
    )
    register(
        "steps", summaries.steps_view, "one row per step: duration, data loading, device busy time"
    )
    register(
        "benchmark",
        summaries.benchmark_view,
        "reader_cost, batch_cost and ips per step, warm-up left out",
    )


# ---------------------------------------------------------------------------------------------
# Model view: where each step's time goes, by training phase

#: Rows of the model view and the event kind behind each phase row.
MODEL_PHASES: tuple[tuple[str, str], ...] = (
    ("dataloader", "dataloader"),
    ("forward", "forward"),
    ("backward", "backward"),
    ("optimization", "optimizer"),
)
GPU_KINDS = ("kernel", "communication")
_BACKWARD_OP_RE = re.compile(r"Backward\d*$")


def _kernel_time_per_step(events: pd.DataFrame, step_rows: np.ndarray) -> np.ndarray:
    """Kernel time (ns) of the device work assigned to each step span in ``step_rows``."""
    kernels = (events["stream"].to_numpy() >= 0) & events["kind"].isin(list(GPU_KINDS)).to_numpy()
    step_of = events["step"].to_numpy()
    rank = events["rank"].to_numpy()
    dur = events["dur_ns"].to_numpy()
    out = np.zeros(len(step_rows))
    for i, s in enumerate(step_rows.tolist()):
        out[i] = dur[kernels & (step_of == step_of[s]) & (rank == rank[s])].sum()
    return out


def _derived_forward(
    events: pd.DataFrame,
    kind: np.ndarray,
    outermost_phase: np.ndarray,
    step_rows: np.ndarray,
    kernel_ns: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Forward time per step for frameworks that mark no forward spans (torch).

    Rule: the forward pass of a step is the step's top-level work (events directly inside the
    step span, other than data loading and optimizer spans) before the step's first backward
    event; its CPU time is the union of those events clipped at that first backward event (the
    whole step when it has none). Its GPU time is the kernel time launched from the step's
    thread in that window outside any phase span.
    """
    start = events["start_ns"].to_numpy()
    end = start + events["dur_ns"].to_numpy()
    parent = events["parent"].to_numpy()
    step_of = events["step"].to_numpy()
    rank = events["rank"].to_numpy()
    tid = events["tid"].to_numpy()
    in_phase = outermost_phase | structure.has_ancestor(parent, outermost_phase)
    launcher = structure.launcher_rows(events)
    is_kernel = np.isin(events["kind"].to_numpy(), GPU_KINDS) & (launcher >= 0)
    backward = outermost_phase & (kind == "backward")
    not_forward = np.isin(kind, ["dataloader", "optimizer", "backward", "memory"])
    cpu, gpu = [], []
    for s in step_rows.tolist():
        same = (step_of == step_of[s]) & (rank == rank[s])
        b = np.flatnonzero(backward & same)
        limit = int(start[b].min()) if len(b) else int(end[s])
        top = np.flatnonzero((parent == s) & ~not_forward & (start < limit))
        if len(top) == 0:
            continue
        cpu.append(structure.union_length(start[top], np.minimum(end[top], limit)))
        k = np.flatnonzero(is_kernel & same)
        lk = launcher[k]
        mine = (start[lk] >= start[s]) & (start[lk] < limit) & (tid[lk] == tid[s]) & ~in_phase[lk]
        gpu.append(float(kernel_ns[k[mine]].sum()))
    return np.asarray(cpu, dtype=np.int64), np.asarray(gpu, dtype=np.float64)


def _phase_events(
    run: Run, rank: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The model view's classification, shared by ``model_view`` and ``step_phases``.

    Returns (host mask, kinds with old-style ``*Backward`` ops counted as backward, outermost
    phase events, step rows, whether forward must be derived). When steps were recorded, only
    phase events inside a step count: time outside every step is not shared out.
    """
    events = run.events
    host = events["stream"].to_numpy() < 0
    if rank is not None:
        host &= events["rank"].to_numpy() == rank
    kind = events["kind"].to_numpy().copy()
    derived = not (host & (kind == "forward")).any()
    if derived and not (host & (kind == "backward")).any() and host.any():
        # Older torch traces record no autograd spans: their backward ops are named *Backward*.
        names = events["name"].astype(str).to_numpy()
        backward_op = (
            host & (kind == "operator") & np.array([bool(_BACKWARD_OP_RE.search(n)) for n in names])
        )
        kind[backward_op] = "backward"
    is_phase = np.isin(kind, [k for _, k in MODEL_PHASES])
    outermost = is_phase & ~structure.has_ancestor(events["parent"].to_numpy(), is_phase) & host
    step_rows = np.flatnonzero((kind == "step") & host)
    if len(step_rows):
        outermost &= events["step"].to_numpy() >= 0
    return host, kind, outermost, step_rows, derived


def model_view(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Step time split into phases: rows ``step``, ``dataloader``, ``forward``, ``backward``,
    ``optimization``, ``others``.

    A phase row sums the outermost events of that phase's kind (an event inside another phase
    event is not counted again), as Paddle's Model Summary does. ``others`` is the step time no
    phase covers. CPU ratios are shares of the merged step time; GPU time is the kernel time
    launched within the events, and GPU ratios are shares of the steps' kernel time. GPU columns
    are NaN when no device events were recorded. When the run has no steps, the whole profiled
    span counts as one step and ``frame.attrs["note"]`` says so.
    """
    import pandas as pd

    events = run.events
    host, kind, outermost, step_rows, derived = _phase_events(run, rank)
    parent = events["parent"].to_numpy()
    start = events["start_ns"].to_numpy()
    dur = events["dur_ns"].to_numpy()
    _, gpu_total = structure.device_time_by_launcher(run, GPU_KINDS)
    has_gpu = not np.isnan(gpu_total).all()
    note = None
    if len(step_rows):
        step_durs = dur[step_rows]
        # A step's GPU time is that of the kernels launched in it, from any thread.
        step_gpu = (
            _kernel_time_per_step(events, step_rows) if has_gpu else np.full(len(step_rows), np.nan)
        )
        step_total = structure.union_length(start[step_rows], start[step_rows] + dur[step_rows])
    else:
        note = "no steps were recorded: the whole profiled span counts as one step"
        lo = int(start[host].min()) if host.any() else 0
        hi = int((start[host] + dur[host]).max()) if host.any() else 0
        step_durs = np.array([hi - lo])
        roots = host & (parent < 0)
        step_gpu = np.array([np.nansum(gpu_total[roots]) if has_gpu else np.nan])
        step_total = hi - lo
    step_gpu_total = float(np.nansum(step_gpu)) if has_gpu else np.nan

    def row(name: str, cpu: np.ndarray, gpu: np.ndarray) -> dict[str, Any]:
        calls = len(cpu)
        total = int(cpu.sum())
        gpu_sum = float(np.nansum(gpu)) if has_gpu else np.nan
        return {
            "name": name,
            "calls": calls,
            "cpu_total_ns": total,
            "cpu_avg_ns": total / calls if calls else np.nan,
            "cpu_max_ns": float(cpu.max()) if calls else np.nan,
            "cpu_min_ns": float(cpu.min()) if calls else np.nan,
            "cpu_ratio_pct": 100.0 * total / step_total if step_total else np.nan,
            "gpu_total_ns": gpu_sum,
            "gpu_avg_ns": gpu_sum / calls if calls and has_gpu else np.nan,
            "gpu_max_ns": float(np.nanmax(gpu)) if calls and has_gpu else np.nan,
            "gpu_min_ns": float(np.nanmin(gpu)) if calls and has_gpu else np.nan,
            "gpu_ratio_pct": 100.0 * gpu_sum / step_gpu_total
            if has_gpu and step_gpu_total
            else np.nan,
        }

    rows = [row("step", step_durs, step_gpu)]
    phase_cpu = 0
    phase_gpu = 0.0
    for label, phase_kind in MODEL_PHASES:
        sel = np.flatnonzero(outermost & (kind == phase_kind))
        if phase_kind == "forward" and derived and len(step_rows):
            cpu_fwd, gpu_fwd = _derived_forward(
                events, kind, outermost, step_rows, dur.astype(np.float64)
            )
            r = row(label, cpu_fwd, gpu_fwd)
            note = "forward derived: the step's top-level work before its first backward event"
        else:
            r = row(label, dur[sel], gpu_total[sel])
        phase_cpu += r["cpu_total_ns"]
        phase_gpu += 0.0 if np.isnan(r["gpu_total_ns"]) else r["gpu_total_ns"]
        rows.append(r)
    others_cpu = step_total - phase_cpu
    others_gpu = step_gpu_total - phase_gpu if has_gpu else np.nan
    rows.append(
        {
            "name": "others",
            "calls": 0,
            "cpu_total_ns": int(others_cpu),
            "cpu_avg_ns": np.nan,
            "cpu_max_ns": np.nan,
            "cpu_min_ns": np.nan,
            "cpu_ratio_pct": 100.0 * others_cpu / step_total if step_total else np.nan,
            "gpu_total_ns": others_gpu,
            "gpu_avg_ns": np.nan,
            "gpu_max_ns": np.nan,
            "gpu_min_ns": np.nan,
            "gpu_ratio_pct": 100.0 * others_gpu / step_gpu_total
            if has_gpu and step_gpu_total
            else np.nan,
        }
    )
    frame = pd.DataFrame(rows)
    frame.loc[0, "cpu_total_ns"] = int(step_total)
    frame.loc[0, "cpu_ratio_pct"] = 100.0 if step_total else np.nan
    if note:
        frame.attrs["note"] = note
    return frame


def step_phases(run: Run, *, rank: int | None = None) -> pd.DataFrame:
    """Per step, the time of each model-view phase (ns): columns ``step``, ``dataloader``,
    ``forward``, ``backward``, ``optimization``, ``others`` (``others`` = step time no phase
    covers). The same rules as the model view, split by step (for stacked per-step charts)."""
    import pandas as pd

    events = run.events
    _, kind, outermost, step_rows, derived = _phase_events(run, rank)
    dur = events["dur_ns"].to_numpy()
    step_of = events["step"].to_numpy()
    columns = [
        "name",
        "step",
        "dur_ns",
        "dataloader_ns",
        "forward_ns",
        "backward_ns",
        "optimization_ns",
        "others_ns",
    ]
    if len(step_rows) == 0:
        return pd.DataFrame(columns=columns)
    forward_cpu = None
    if derived:
        forward_cpu, _ = _derived_forward(
            events, kind, outermost, step_rows, dur.astype(np.float64)
        )
    rows = []
    for i, s in enumerate(step_rows.tolist()):
        in_step = outermost & (step_of == step_of[s])
        row = {"name": f"step {int(step_of[s])}", "step": int(step_of[s]), "dur_ns": int(dur[s])}
        total = 0
        for label, phase_kind in MODEL_PHASES:
            if phase_kind == "forward" and forward_cpu is not None:
                value = int(forward_cpu[i]) if i < len(forward_cpu) else 0
            else:
                value = int(dur[in_step & (kind == phase_kind)].sum())
            row[f"{label}_ns"] = value
            total += value
        row["others_ns"] = max(int(dur[s]) - total, 0)
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
