"""How sure a comparison is: the ratio of two runs' mean step times with a bootstrap confidence
interval, and the smallest change the two runs' step-to-step noise lets them resolve."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Confidence of every interval a comparison states.
CONFIDENCE = 0.95
#: Bootstrap resamples; the seed is fixed so that a comparison reads the same every time.
RESAMPLES = 2000
SEED = 0
#: z-scores of a two-sided 95% test and of 80% power, for the resolvable change.
_Z_TEST = 1.959964
_Z_POWER = 0.841621


@dataclass
class RatioEstimate:
    """``candidate`` mean over ``baseline`` mean, with its confidence interval.

    ``baseline_mean`` and ``candidate_mean`` are in the unit of the samples (ns per step or per
    sample); ``low`` and ``high`` bound ``ratio`` at ``confidence``; ``resolvable_pct`` is the
    smallest change (percent of the baseline mean) these samples would detect at that
    confidence with 80% power, NaN when a run has fewer than two samples.
    """

    ratio: float
    low: float
    high: float
    baseline_mean: float
    candidate_mean: float
    baseline_n: int
    candidate_n: int
    resolvable_pct: float
    confidence: float = CONFIDENCE

    @property
    def delta(self) -> float:
        """Candidate minus baseline mean, in the samples' unit."""
        return self.candidate_mean - self.baseline_mean

    @property
    def significant(self) -> bool:
        """True when the interval leaves out 1: the runs differ beyond their noise."""
        return bool(self.low > 1.0 or self.high < 1.0)

    @property
    def direction(self) -> str:
        """``slower`` or ``faster`` (the candidate against the baseline, beyond the noise), or
        ``same`` (within it)."""
        if not self.significant:
            return "same"
        return "slower" if self.ratio >= 1.0 else "faster"

    @property
    def factor(self) -> tuple[float, float, float]:
        """The figure a reader is told, with its interval: ``ratio`` when the candidate is
        slower or the same, ``1 / ratio`` when it is faster ("1.25x faster" for a ratio of
        0.80)."""
        if self.direction == "faster":
            return 1.0 / self.ratio, 1.0 / self.high, 1.0 / self.low
        return self.ratio, self.low, self.high

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON (NaN as None): ``ratio`` is the candidate's mean over the
        baseline's; ``direction`` and ``factor`` (with ``factor_low``, ``factor_high``) are what
        the verdict's sentence says ("1.25x faster")."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = None if isinstance(value, float) and math.isnan(value) else value
        out["delta"] = None if math.isnan(self.delta) else self.delta
        out["significant"] = self.significant
        out["direction"] = self.direction
        factor, low, high = self.factor
        for key, value in (("factor", factor), ("factor_low", low), ("factor_high", high)):
            out[key] = None if math.isnan(value) else value
        return out


def ratio_of_means(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> RatioEstimate:
    """Return the ratio of the means of ``candidate`` and ``baseline`` (per-step samples) with a
    percentile bootstrap interval: each run's steps are resampled with replacement,
    independently, ``resamples`` times. With one sample in a run the interval is that run's
    point value (no spread is known)."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) == 0 or len(b) == 0 or a.mean() <= 0:
        nan = math.nan
        return RatioEstimate(nan, nan, nan, nan, nan, len(a), len(b), nan, confidence)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    low, high = _bootstrap_bounds(a, b, np.mean, lambda x, y: y / x, confidence, resamples, seed)
    return RatioEstimate(
        ratio=mean_b / mean_a,
        low=float(low),
        high=float(high),
        baseline_mean=mean_a,
        candidate_mean=mean_b,
        baseline_n=len(a),
        candidate_n=len(b),
        resolvable_pct=resolvable_pct(a, b),
        confidence=confidence,
    )


def resolvable_pct(baseline: np.ndarray, candidate: np.ndarray) -> float:
    """The smallest difference of means (percent of the baseline mean) that a two-sided test at
    95% confidence detects with 80% power, given the two runs' step-to-step spread and step
    counts: (z_0.975 + z_0.8) * sqrt(var_a / n_a + var_b / n_b) / mean_a. NaN with fewer than
    two steps in a run."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    if len(a) < 2 or len(b) < 2 or a.mean() <= 0:
        return math.nan
    spread = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return 100.0 * (_Z_TEST + _Z_POWER) * spread / float(a.mean())


def _bootstrap_bounds(
    a: np.ndarray,
    b: np.ndarray,
    statistic: Any,
    combine: Any,
    confidence: float,
    resamples: int,
    seed: int,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``combine(statistic of a, statistic of b)``
    (``statistic`` reduces along ``axis=1``, as ``np.mean`` and ``np.median`` do): each
    sample resampled with replacement, independently, ``resamples`` times."""
    rng = np.random.default_rng(seed)
    boot_a = statistic(a[rng.integers(0, len(a), size=(resamples, len(a)))], axis=1)
    boot_b = statistic(b[rng.integers(0, len(b), size=(resamples, len(b)))], axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(combine(boot_a, boot_b), [tail, 100.0 - tail])
    return float(low), float(high)


def difference_of_means(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """(the mean of ``baseline`` less the mean of ``candidate``, the low and high ends of its
    percentile bootstrap interval): each run's steps are resampled with replacement,
    independently, ``resamples`` times. The interval holds the two runs' step-to-step spread
    only, not a machine that ran slower while one of them was recorded. NaN ends when a run has
    fewer than two finite samples; NaN throughout when one has none."""
    return _difference(np.mean, baseline, candidate, confidence, resamples, seed)


def _difference(
    statistic: Any,
    baseline: np.ndarray,
    candidate: np.ndarray,
    confidence: float,
    resamples: int,
    seed: int,
) -> tuple[float, float, float]:
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) == 0 or len(b) == 0:
        return math.nan, math.nan, math.nan
    point = float(statistic(a) - statistic(b))
    if len(a) < 2 or len(b) < 2:
        return point, math.nan, math.nan
    low, high = _bootstrap_bounds(a, b, statistic, np.subtract, confidence, resamples, seed)
    return point, low, high


def ratio_of_medians(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """(the median of ``candidate`` over the median of ``baseline``, the low and high ends of
    its percentile bootstrap interval), each run's samples resampled independently; NaN
    throughout where either has fewer than two positive finite samples."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(candidate, dtype=np.float64)
    a, b = a[np.isfinite(a) & (a > 0)], b[np.isfinite(b) & (b > 0)]
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan, math.nan
    low, high = _bootstrap_bounds(a, b, np.median, lambda x, y: y / x, confidence, resamples, seed)
    return float(np.median(b) / np.median(a)), low, high
