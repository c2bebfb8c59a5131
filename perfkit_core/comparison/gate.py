"""The regression gate CI runs: the last run against the first, on the verdict's estimate for
step time (per step or per sample, as the comparison is), or on the median data-loading time or
device busy share per step; the one-line reason names the main causes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.comparison.types import GateResult

if TYPE_CHECKING:
    from perfkit_core.comparison.types import Comparison

METRICS = ("step_time", "dataloader", "gpu_busy")


def _causes(comparison: Comparison, time_unit: str = "ms") -> list[str]:
    """Up to three causes: the top op family, layer and op (the top families without layers)."""
    verdict = comparison.verdict()
    picked = []
    family = verdict.causes.get("family", [])
    if family:
        picked.append(("family", family[0]))
    for view in ("layers", "ops"):
        for row in verdict.causes.get(view, []):
            # An op that is the same work as a family already named adds nothing.
            if not any(abs(row.delta_ns - c.delta_ns) < 1.0 for _, c in picked):
                picked.append((view.rstrip("s"), row))
                break
    for extra in family[1:]:
        if len(picked) >= 3:
            break
        picked.append(("family", extra))
    return [f"{kind} {cause.text(time_unit)}" for kind, cause in picked[:3]]


def gate(comparison: Comparison, threshold_pct: float, metric: str = "step_time") -> GateResult:
    """Compare the last run with the first on ``metric``. ``step_time`` uses the verdict's
    estimate (mean per step, or per sample; unprofiled when both runs carry step-timer times):
    regressed when the candidate is slower by more than ``threshold_pct`` and the confidence
    interval leaves out "no change". ``dataloader`` and ``gpu_busy`` compare medians per step
    against the larger interquartile range of the two runs."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if metric == "step_time":
        return _step_time_gate(comparison, threshold_pct)
    return _median_gate(comparison, threshold_pct, metric)


def _step_time_gate(comparison: Comparison, threshold_pct: float) -> GateResult:
    verdict = comparison.verdict()
    est = verdict.headline
    base, cand = est.baseline_mean, est.candidate_mean
    first, last = comparison.labels[0], comparison.labels[-1]
    if math.isnan(est.ratio):
        return GateResult(
            False,
            "step_time",
            base,
            cand,
            math.nan,
            math.nan,
            threshold_pct,
            "no step times to compare: not gated",
            [],
        )
    delta = 100.0 * (est.ratio - 1.0)
    noise = 100.0 * max(est.ratio - est.low, est.high - est.ratio)
    per = comparison.per
    source = ", unprofiled" if verdict.unprofiled is not None else ""
    figures = (
        f"{last} mean {cand / 1e6:.3f} ms per {per} vs {first} {base / 1e6:.3f} ms "
        f"({delta:+.1f}%, {100 * est.confidence:.0f}% CI {100 * (est.low - 1):+.1f}% to "
        f"{100 * (est.high - 1):+.1f}%{source})"
    )
    causes = _causes(comparison) if abs(delta) > 0 else []
    because = f"; causes: {', '.join(causes)}" if causes else ""
    worse = delta > 0
    if worse and delta > threshold_pct and est.low > 1.0:
        message = (
            f"regression: {figures} is slower than {first} by more than {threshold_pct:g}%{because}"
        )
        return GateResult(
            True, "step_time", base, cand, delta, noise, threshold_pct, message, causes
        )
    if worse and delta > threshold_pct:
        message = f"noise: {figures}: the interval includes no change{because}"
        return GateResult(
            False, "step_time", base, cand, delta, noise, threshold_pct, message, causes
        )
    word = "improvement" if est.high < 1.0 else "ok"
    message = f"{word}: {figures}{because}"
    return GateResult(False, "step_time", base, cand, delta, noise, threshold_pct, message, causes)


def _median_gate(comparison: Comparison, threshold_pct: float, metric: str) -> GateResult:
    base_vals = _metric_values(comparison, 0, metric)
    cand_vals = _metric_values(comparison, len(comparison.runs) - 1, metric)
    base = float(np.median(base_vals)) if len(base_vals) else math.nan
    cand = float(np.median(cand_vals)) if len(cand_vals) else math.nan
    if not base or math.isnan(base) or math.isnan(cand):
        return GateResult(
            False,
            metric,
            base,
            cand,
            math.nan,
            math.nan,
            threshold_pct,
            f"no {metric} to compare: not gated",
            [],
        )
    delta = 100.0 * (cand - base) / base
    noise = max(_iqr(base_vals), _iqr(cand_vals)) / base * 100.0
    unit = "ms" if metric != "gpu_busy" else "%"
    scale = 1e6 if unit == "ms" else 1.0
    per = comparison.per if metric != "gpu_busy" else "step"
    figures = (
        f"{metric} median {cand / scale:.3f} {unit} per {per} vs {base / scale:.3f} {unit} "
        f"({delta:+.1f}%, noise ±{noise:.1f}%)"
    )
    worse = delta > 0 if metric != "gpu_busy" else delta < 0
    size = abs(delta)
    first = comparison.labels[0]
    if worse and size > threshold_pct and size > noise:
        message = f"regression: {figures} is worse than {first} by more than {threshold_pct:g}%"
        return GateResult(True, metric, base, cand, delta, noise, threshold_pct, message, [])
    if worse and size > threshold_pct:
        message = f"noise: {figures} is within the step-to-step noise"
        return GateResult(False, metric, base, cand, delta, noise, threshold_pct, message, [])
    return GateResult(False, metric, base, cand, delta, noise, threshold_pct, f"ok: {figures}", [])


def _iqr(values: np.ndarray) -> float:
    if len(values) < 2:
        return 0.0
    p25, p75 = np.percentile(values, [25, 75])
    return float(p75 - p25)


def _metric_values(comparison: Comparison, i: int, metric: str) -> np.ndarray:
    steps = comparison.runs[i].summary("steps")
    if metric == "dataloader":
        return steps["data_ns"].to_numpy().astype(float) / comparison.sample_scale(i)
    busy = steps["gpu_busy_ns"].to_numpy().astype(float)
    return 100.0 * busy / steps["dur_ns"].to_numpy()
