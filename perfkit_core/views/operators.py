"""The operator and user views: calls, CPU and GPU time per host event name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import links
from perfkit_core.events.facts import step_count
from perfkit_core.events.links import kind_is
from perfkit_core.events.schema import str_values
from perfkit_core.views.anatomy.structure import LAYER_PREFIX
from perfkit_core.views.common import categorical_of, category_subset, category_values

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run


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
    cached = run.cache.get("self_ns")
    if cached is None:
        events = run.events
        dur = events["dur_ns"].to_numpy()
        child = links.children_sum(events["parent"].to_numpy(), dur.astype(np.float64))
        cached = np.maximum(dur - child.astype(np.int64), 0)
        run.cache.put("self_ns", cached)
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


#: Events of a kind that are not that kind's rows, by name prefix: torch's layer spans
#: (``nn.Module: Type_k``, kind ``user``) are layers, not user-defined spans.
SKIPPED_PREFIXES: dict[str, tuple[str, ...]] = {"user": (LAYER_PREFIX,)}

#: Help of the command-line options of the operator and user views.
OPTION_HELP = {
    "group_by": "Operator rows by type (the operator's name) or by full name with the side it "
    "ran on, where the profiler records full names (MindSpore).",
    "filter": "Only operators and user spans whose name or full name matches this regular "
    "expression (anywhere, case-insensitive); in the layers view, the layers whose name or "
    "path matches or that ran an op whose type matches, with the layers around them.",
}
#: What ``group_by`` may name: ``type``, one row per event name (torch's and Paddle's operator
#: names, MindSpore's operator types); ``name``, one row per full name where the profiler
#: records one (MindSpore's scoped names), with the side it ran on.
GROUP_BY = ("type", "name")


def _matching(run: Run, rows: np.ndarray, pattern: str) -> np.ndarray:
    """Which of ``rows`` have a name or full name that the regular expression ``pattern``
    matches anywhere (case-insensitive, as MindInsight's operator search)."""
    import re

    from perfkit_core.errors import OptionError
    from perfkit_core.events.schema import str_contains

    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise OptionError(f"filter {pattern!r} is not a regular expression: {exc}") from None
    events = run.events
    hit = str_contains(events["name"], compiled) | str_contains(events["full_name"], compiled)
    return rows[hit[rows]]


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
    group_by: str = "type",
    filter: str | None = None,
) -> pd.DataFrame:
    """Return one row per name (and shape / stack / thread when asked) of host events of ``kinds``
    (``user`` events that are layer spans, ``SKIPPED_PREFIXES``, left out).

    ``group_by="name"`` keys the rows by the full name instead, where the profiler recorded one
    (``full_name``; the name elsewhere), and adds ``side``: ``device`` when the calls launched
    device work, else ``host`` (MindInsight's per-operator table). ``filter`` keeps the events
    whose name or full name the regular expression matches (anywhere, case-insensitive).

    Columns: ``name``, [``side``], [``input_shapes``], [``stack``], ``calls``, ``cpu_total_ns``,
    ``cpu_self_ns``, ``cpu_avg_ns``, ``cpu_max_ns``, ``cpu_min_ns``, ``gpu_total_ns``,
    ``gpu_self_ns``, ``gpu_avg_ns``, ``gpu_max_ns``, ``gpu_min_ns`` (ns; GPU columns are NaN when
    the run recorded no device events). CPU time is wall time on the host thread; self time
    excludes nested host events and is never negative. GPU time is the device time of the work
    the event launched (total: itself and everything nested in it; self: launched directly).
    A torch operator whose only child is an operator of the same name (``aten::div`` calling
    ``aten::div``) counts once, as in torch's ``key_averages``: the child's self time and
    device work are the parent's (``links.repeated_only_children``).
    Where the profiler recorded FLOPs, ``flops`` sums them and ``gflops_per_s`` divides them by
    the GPU time (the CPU time when no GPU time was recorded); both are NaN otherwise.
    ``by_thread`` adds the ``tid`` key (one row per thread instead of threads merged).
    """
    import pandas as pd

    if sort_by not in SORT_KEYS and sort_by != "name":
        raise ValueError(f"sort_by must be one of {', '.join(SORT_KEYS)} or name, not {sort_by!r}")
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}, not {group_by!r}")
    events = run.events
    kinds = tuple(kinds)
    mask = kind_is(events, *kinds) & (events["stream"].to_numpy() < 0)
    if rank is not None:
        mask &= events["rank"].to_numpy() == rank
    skip_prefixes = tuple(p for k in kinds for p in SKIPPED_PREFIXES.get(k, ()))
    if skip_prefixes:
        names = events["name"]
        skipped = np.array(
            [str(c).startswith(skip_prefixes) for c in names.cat.categories] + [False], dtype=bool
        )
        mask &= ~skipped[names.cat.codes.to_numpy()]
    gpu_self, gpu_total = links.device_time_by_launcher(run)
    self_ns = host_self_time(run)
    # A torch operator that only re-enters itself (aten::div calling aten::div) is one call,
    # as in torch's key_averages: the inner row's self time and directly launched device work
    # go to the outer row.
    into = links.run_repeated_only_children(run)
    folded = into >= 0
    if folded.any():
        mask &= ~folded
        self_ns = self_ns + np.bincount(
            into[folded], weights=self_ns[folded], minlength=len(events)
        ).astype(np.int64)
        gpu_self = gpu_self + np.bincount(
            into[folded], weights=np.nan_to_num(gpu_self[folded]), minlength=len(events)
        )
    rows = np.flatnonzero(mask)
    if filter:
        rows = _matching(run, rows, filter)
    # Names as codes of the chosen rows (a string per row would be 525k strings on a big
    # trace, copied again into Arrow text by pandas); made text again once grouped.
    names = category_subset(events["name"], rows)
    if group_by == "name":
        full = category_subset(events["full_name"], rows)
        # The full name where there is one, else the name: one code per pair present.
        width = len(names.categories)
        pairs, at = np.unique(
            full.codes.astype(np.int64) * width + names.codes, return_inverse=True
        )
        labels = [
            full.categories[p // width] or names.categories[p % width] for p in pairs.tolist()
        ]
        names = categorical_of(np.asarray(at).reshape(-1), labels)
        del full, pairs, at
    frame = pd.DataFrame(
        {
            "name": names,
            "dur": events["dur_ns"].to_numpy()[rows],
            "self": self_ns[rows],
            "gpu_total": gpu_total[rows],
            "gpu_self": gpu_self[rows],
            "flops": events["flops"].to_numpy()[rows],
        }
    )
    keys = ["name"]
    if by_thread:
        frame["tid"] = events["tid"].to_numpy()[rows]
        keys.append("tid")
    notes = []
    if group_by_input_shape:
        frame["input_shapes"] = category_values(events["input_shapes"], rows)
        keys.append("input_shapes")
        if len(rows) and not frame["input_shapes"].astype(bool).any():
            notes.append(
                "input shapes were not recorded: profile with record_shapes=True to group by them"
            )
    if group_by_stack_n > 0:
        recorded = category_values(events["stack"], rows)
        if any(recorded):
            stacks = ["\n".join(s.split("\n")[:group_by_stack_n]) for s in recorded]
        else:
            stacks = _python_stacks(run, rows, group_by_stack_n)
        frame["stack"] = stacks
        keys.append("stack")
        if len(rows) and not any(stacks):
            notes.append(
                "call stacks were not recorded: profile with with_stack=True to group by them"
            )
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
        launched=("gpu_total", lambda g: bool((g.fillna(0) > 0).any())),
    ).reset_index()
    del frame, grouped
    out["name"] = out["name"].astype(str)
    if group_by == "name":
        out.insert(1, "side", np.where(out["launched"].to_numpy(dtype=bool), "device", "host"))
        keys.insert(1, "side")
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
    out = out.reset_index(drop=True)
    if notes:
        out.attrs["note"] = "; ".join(notes)
    return out


#: Header labels of the columns the operator view adds to ``host_event_table``'s.
OPERATOR_LABELS = {
    "side": "Side",
    "calls_per_step": "Calls per step",
    "op_time_pct": "% of operator time",
}


def operator_view(run: Run, *, op_detail: bool = False, **options: Any) -> pd.DataFrame:
    """Operators: calls and CPU/GPU time per operator name (see ``host_event_table``).

    Adds ``calls_per_step`` (calls over the run's step spans; NaN when it recorded none) and
    ``op_time_pct``: the rows' self time as a share of the self time of every operator of the
    run (before ``filter`` and ``top``; self time, so that nested operators are not counted
    twice and the shares add up to 100), MindInsight's share of operator time.

    ``op_detail=True`` follows each operator row with its detail rows (column ``level`` 1,
    ``detail_of`` naming the operator): the inner stages recorded directly inside it (Paddle's
    infer_meta, kernel launch, compute, ...) with their CPU time, then the device kernels its
    runtime calls launched with their GPU time, as Paddle's operator view with op_detail does.
    """
    import pandas as pd

    top = options.pop("top", None)
    table = host_event_table(run, ("operator",), **options)
    steps = step_count(run, options.get("rank"))
    calls_at = table.columns.get_loc("calls") + 1
    table.insert(calls_at, "calls_per_step", table["calls"] / steps if steps else np.nan)
    everything = (
        host_event_table(run, ("operator",), rank=options.get("rank"))
        if options.get("filter")
        else table
    )
    whole = float(everything["cpu_self_ns"].sum())
    table.insert(
        table.columns.get_loc("cpu_self_ns") + 1,
        "op_time_pct",
        100.0 * table["cpu_self_ns"] / whole if whole else np.nan,
    )
    if top is not None:
        table = table.head(top).reset_index(drop=True)
    table.attrs["labels"] = {k: v for k, v in OPERATOR_LABELS.items() if k in table.columns}
    if not op_detail:
        return table
    ev = run.events
    names = str_values(ev["name"])
    kind = str_values(ev["kind"])
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
    launcher = links.run_launchers(run)
    dev = np.flatnonzero(launcher >= 0)
    issued_by = links.launch_parents(run)
    op_of = np.where(dev.size > 0, issued_by[launcher[dev]], -1) if dev.size else dev
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
    out.attrs.update(table.attrs)
    for col in ("calls", "level"):
        out[col] = out[col].astype(np.int64)
    for col in table.columns:
        if col.endswith(("_ns", "_pct", "_per_s")) or col == "flops":
            out[col] = out[col].astype(np.float64)
    return out


def user_view(run: Run, **options: Any) -> pd.DataFrame:
    """User-defined spans (record_function, RecordEvent): calls and time per span name. torch's
    layer spans (``nn.Module: Type_k``) are layers, not user spans, as Paddle's layer events are
    not in its user-defined summary: they are left out."""
    return host_event_table(run, ("user",), **options)
