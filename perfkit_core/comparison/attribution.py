"""Attribution that adds up: each run's step time split by phase, op family, canonical op,
layer or user span (``perfkit_core.views.anatomy.attribution.step_slices``), lined up across runs and
ranked by how much of the step-time difference each row explains.

Every table has a ``step`` row (the mean step time), the rows that split it, and, except the
phase table (phases are time windows that cover the whole step), an ``unattributed`` row: the
step time no recorded event covers. So the rows' ``delta_ns`` add up to the step row's, and
their ``share_pct`` to 100. Times are means per step (or per sample).

Layers are compared only when every run recorded layer spans: when one did and another did not,
a row of one would be a row of the other's ``(no layer)`` time, so every run's layer table is
by phase instead (``(no layer) forward``, ...), and ``missing_layers_line`` says which run lacks
them and how its framework records them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.comparison.keys import TOTAL, slice_keys
from perfkit_core.comparison.rows import layers_by_phase, per_step_values, runs_without_layers
from perfkit_core.plugins import framework_hook
from perfkit_core.views.anatomy.attribution import PHASES, UNATTRIBUTED

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.comparison.types import Comparison

#: Comparison views built from the slices, and the column of the slices each groups by.
#: An op whose time changes by less than this share of its baseline time is ``same``.
SAME_PCT = 5.0
#: What a comparison says when the run's adapter has no advice of its own.
NO_LAYERS_GENERIC = "record each layer's forward as a span named after its class"


def missing_layers_line(comparison: Comparison) -> str:
    """One line saying that layers are not compared and why: which run recorded no layer
    spans, and how its framework records them (its adapter's ``perfkit_layer_spans_fix``);
    empty when layers are compared."""
    missing = runs_without_layers(comparison)
    if not missing:
        return ""
    parts = []
    for i in missing:
        framework = comparison.runs[i].framework
        fix = (
            framework_hook("perfkit_layer_spans_fix", framework)(framework=framework)
            or NO_LAYERS_GENERIC
        )
        parts.append(f"{comparison.labels[i]} recorded no layer spans (to record them: {fix})")
    return "layers not compared, rows by phase: " + "; ".join(parts)


def per_run_totals(comparison: Comparison, view: str, time: str = "host") -> list[dict[str, float]]:
    """For each run, time per step (or sample) of every row of ``view``, and ``TOTAL``:
    wall time on the training thread (``time="host"``; the rows add up to the step), or the
    kernel time each row launched (``time="device"``; ``TOTAL`` is then the kernel time the
    steps launched)."""
    if time == "device":
        out = []
        for i in range(len(comparison.runs)):
            per_step = per_step_values(comparison, i, view, "device")
            means = {str(k): float(v) for k, v in per_step.mean(axis=0).items()}
            means[TOTAL] = float(sum(means.values()))
            out.append(means)
        return out
    out = []
    by_phase = layers_by_phase(comparison, view)
    for i in range(len(comparison.runs)):
        slices = comparison.slices(i)
        divisor = comparison.divisor(i)
        keys = slice_keys(slices, view, by_phase=by_phase)
        ns = slices["ns"].to_numpy()
        values: dict[str, float] = {}
        if len(keys):
            uniques, inverse = np.unique(keys, return_inverse=True)
            sums = np.bincount(inverse, weights=ns, minlength=len(uniques))
            values = {str(k): float(v) / divisor for k, v in zip(uniques, sums, strict=True)}
        total = float(comparison.step_samples(i).mean())
        covered = sum(values.values())
        # Steps no slice covers (a run without events in some step) count as unattributed.
        if view != "phases" and total - covered > 0.5:
            values[UNATTRIBUTED] = values.get(UNATTRIBUTED, 0.0) + total - covered
        values[TOTAL] = total
        out.append(values)
    return out


def _order(names: list[str], delta: dict[str, float]) -> list[str]:
    """Total first, then by the size of the row's contribution either way, unattributed last."""
    body = [n for n in names if n not in (TOTAL, UNATTRIBUTED)]
    body.sort(key=lambda n: (-abs(delta.get(n, 0.0)), n))
    tail = [UNATTRIBUTED] if UNATTRIBUTED in names else []
    return [TOTAL, *body, *tail]


def attribution_table(
    comparison: Comparison, view: str, *, top: int | None = None, time: str = "host"
) -> pd.DataFrame:
    """The comparison table of ``view`` (one of ``ATTRIBUTION_VIEWS``): ``name``, one column
    per run (its label; ns per step or sample; NaN where the run has no such row), ``delta_ns``
    (last run minus first) and ``share_pct`` (of the step row's delta; NaN throughout when the
    runs' steps do not differ beyond their noise, as shares of noise mean nothing).
    ``time="device"``: the kernel time each row launched, the ``step`` row being the kernel time
    the steps launched (runs with device work). ``ops`` adds per run
    ``<label> calls`` (calls per step or sample) and ``<label> ops`` (the native ops behind the
    row, largest first), and ``status``. Rows: ``step`` first, then by contribution to the
    difference (its size, either way), ``unattributed`` last (not in ``phases``). With ``top``, rows past the first
    ``top`` are summed into one ``(N more rows)`` row, so the table still adds up."""
    import pandas as pd

    cached = comparison.cache.get(("table", view, top, time))
    if cached is not None:
        return cached.copy()
    per_run = per_run_totals(comparison, view, time)
    labels = comparison.labels
    names = sorted({k for values in per_run for k in values})
    if view == "phases":
        names = [TOTAL, *[p for p in PHASES if any(p in v for v in per_run)]]
    if view != "phases" and UNATTRIBUTED not in names and time == "host":
        names.append(UNATTRIBUTED)
        for values in per_run:
            values[UNATTRIBUTED] = 0.0
    first, last = per_run[0], per_run[-1]
    delta = {n: last.get(n, 0.0) - first.get(n, 0.0) for n in names}
    total_delta = delta[TOTAL]
    if view != "phases":
        names = _order(names, delta)
    if top is not None and view != "phases" and len(names) > top + 2:
        rest = names[1 + top : -1]
        merged = f"({len(rest)} more {'row' if len(rest) == 1 else 'rows'})"
        for values in per_run:
            values[merged] = sum(values.get(n, 0.0) for n in rest)
        delta[merged] = sum(delta[n] for n in rest)
        names = [*names[: 1 + top], merged, names[-1]]
    frame = pd.DataFrame({"name": names})
    for label, values in zip(labels, per_run, strict=True):
        frame[label] = [values.get(n, math.nan) for n in names]
    frame["delta_ns"] = [delta[n] for n in names]
    significant = comparison.profiled_estimate().significant
    frame["share_pct"] = [
        100.0 * delta[n] / total_delta if total_delta and significant else math.nan for n in names
    ]
    if view == "ops" and time == "host":
        _add_op_detail(comparison, frame)
    if view == "layers":
        frame["name"] = [layer_labels(comparison).get(n, n) for n in names]
    notes = [_note(comparison, view, time)]
    if not significant:
        notes.append(
            "no shares: the steps do not differ beyond their noise, so a share of the "
            "difference would be a share of noise"
        )
    frame.attrs["note"] = "; ".join(notes)
    comparison.cache[("table", view, top, time)] = frame
    return frame.copy()


def layer_labels(comparison: Comparison) -> dict[str, str]:
    """Layer key -> the label the first run that has the layer gives it."""
    labels: dict[str, str] = {}
    for i in range(len(comparison.runs)):
        pairs = comparison.slices(i)[["layer", "layer_label"]].drop_duplicates("layer")
        for key, label in pairs.itertuples(index=False):
            if key and key not in labels:
                labels[str(key)] = str(label)
    return labels


def _add_op_detail(comparison: Comparison, frame: pd.DataFrame) -> None:
    """Calls per step and the native ops behind each row of the ops table, and its status."""
    names = frame["name"].tolist()
    for i, label in enumerate(comparison.labels):
        slices = comparison.slices(i)
        keys = slice_keys(slices, "ops")
        table = slices.assign(_key=keys)
        calls = table[table["family"] != UNATTRIBUTED].groupby("_key")["owner"].nunique()
        divisor = comparison.divisor(i)
        native = table.groupby(["_key", "native"])["ns"].sum()
        texts: dict[str, str] = {}
        for key in names:
            if key not in native.index.get_level_values(0):
                continue
            parts = native.loc[key].sort_values(ascending=False)
            whole = float(parts.sum())
            shown = [
                f"{name} {100.0 * value / whole:.0f}%" if whole else str(name)
                for name, value in parts.head(3).items()
            ]
            if len(parts) > 3:
                shown.append(f"+{len(parts) - 3} more")
            texts[key] = ", ".join(shown)
        frame[f"{label} calls"] = [
            float(calls[k]) / divisor if k in calls.index and k != TOTAL else math.nan
            for k in names
        ]
        frame[f"{label} ops"] = [texts.get(k, "") if k != UNATTRIBUTED else "" for k in names]
    first, last = frame[comparison.labels[0]], frame[comparison.labels[-1]]
    base = first.fillna(0.0)
    pct = np.where(base > 0, 100.0 * (last.fillna(0.0) - base) / base.where(base > 0, 1), 0.0)
    status = np.where(
        first.isna() | (first == 0),
        f"{comparison.labels[-1]} only",
        np.where(
            last.isna() | (last == 0),
            f"{comparison.labels[0]} only",
            np.where(pct > SAME_PCT, "slower", np.where(pct < -SAME_PCT, "faster", "same")),
        ),
    )
    fixed = np.isin(frame["name"].to_numpy(), [TOTAL, UNATTRIBUTED])
    fixed |= frame["name"].str.contains(r"^\(\d+ more rows?\)$").to_numpy()
    status[fixed] = ""
    frame["status"] = status


def _note(comparison: Comparison, view: str, time: str = "host") -> str:
    missing = missing_layers_line(comparison) if view == "layers" else ""
    if missing:
        return f"{missing}; {_view_note(comparison, view, time)}"
    return _view_note(comparison, view, time)


def _view_note(comparison: Comparison, view: str, time: str) -> str:
    unit = comparison.per
    if time == "device":
        return (
            f"kernel time per {unit} each row launched (a kernel counts in the row of its "
            f"launching op); delta = {comparison.labels[-1]} - {comparison.labels[0]}; share = "
            "part of the difference in the kernel time the steps launched"
        )
    base = (
        f"host wall time per {unit} on the training thread; delta = {comparison.labels[-1]} - "
        f"{comparison.labels[0]}; share = part of the step-time delta"
    )
    if view == "phases":
        return (
            base + "; one phase definition for every framework: data = data loading; "
            "forward = the step before its first backward event, loss included; backward = "
            "first to last backward event, time between autograd nodes included; optimizer = "
            "optimizer step and zero_grad; other = the rest"
        )
    if view == "ops":
        return (
            base + "; outermost ops only, as canonical ops (an op and its gradient share one "
            "name; ops inside a known layer count as that layer's op, e.g. a conv's bias add)"
        )
    if view == "layers":
        return base + "; a backward op counts in the layer of the forward op it differentiates"
    return base
