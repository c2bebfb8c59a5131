"""Compare runs: before and after a change, or one model in two frameworks, side by side.

``compare(*runs)`` returns a ``Comparison`` whose ``summary(view)`` tables have the key column
``name`` and one column per run (its label): ``steps`` (median step time and spread), ``phases``
(the model view), ``totals`` (device, copy, communication and data-loading time), ``ops`` (each
op: appeared, disappeared, faster, slower, with deltas) and ``family`` (canonical op families,
so a torch run and a paddle run read as one table). Times are per step, or per sample when
batch sizes are given. ``Comparison.gate(pct)`` is the regression check CI uses.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.views.families import family_times

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: An op whose time per step changes by less than this (percent) is reported as ``same``.
SAME_PCT = 5.0
METRICS = ("step_time", "dataloader", "gpu_busy")


@dataclass
class GateResult:
    """Outcome of the regression gate: ``regressed`` and a one-line ``message``."""

    regressed: bool
    metric: str
    baseline: float
    candidate: float
    delta_pct: float
    noise_pct: float
    threshold_pct: float
    message: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Comparison:
    """Runs lined up for comparison; see ``summary`` and ``gate``."""

    runs: list[Run]
    labels: list[str]
    batch_sizes: list[int | None] = field(default_factory=list)
    per: str = "step"

    def _divisor(self, i: int) -> float:
        steps = max(_step_count(self.runs[i]), 1)
        if self.per == "sample":
            batch = self.batch_sizes[i] if i < len(self.batch_sizes) else None
            if not batch:
                raise ValueError("per='sample' needs a batch size for every run")
            return float(steps * batch)
        return float(steps)

    def _repr_html_(self) -> str:
        """The comparison page, for Jupyter (the report layer, above this one, is bound late)."""
        import importlib

        notebook = importlib.import_module("perfkit_core.report.notebook")
        return str(notebook.comparison_html(self))

    def summary(self, view: str = "steps") -> pd.DataFrame:
        """Return the comparison table ``view``: steps, phases, totals, ops or family."""
        builders = {
            "steps": self._steps,
            "phases": self._phases,
            "totals": self._totals,
            "ops": self._ops,
            "family": self._family,
        }
        if view not in builders:
            raise KeyError(f"unknown comparison view {view!r}; known: {', '.join(builders)}")
        return builders[view]()

    # -- views

    def _steps(self) -> pd.DataFrame:
        import pandas as pd

        rows = []
        for label, run, i in zip(self.labels, self.runs, range(len(self.runs)), strict=True):
            durs = _step_durations(run)
            med = float(np.median(durs)) if len(durs) else math.nan
            p25, p75 = np.percentile(durs, [25, 75]) if len(durs) else (math.nan, math.nan)
            row = {
                "name": label,
                "framework": run.framework,
                "steps": len(durs),
                "median_step_ns": med,
                "p25_step_ns": float(p25),
                "p75_step_ns": float(p75),
                "spread_pct": 100.0 * (p75 - p25) / med if med else math.nan,
                "mean_step_ns": float(np.mean(durs)) if len(durs) else math.nan,
            }
            batch = self.batch_sizes[i] if i < len(self.batch_sizes) else None
            row["median_sample_ns"] = med / batch if batch else math.nan
            gpu = run.summary("device")
            gpu = gpu[gpu["name"].str.startswith("GPU")]
            row["gpu_busy_pct"] = float(gpu["utilization_pct"].mean()) if len(gpu) else math.nan
            rows.append(row)
        frame = pd.DataFrame(rows)
        base = frame["median_step_ns"].iloc[0]
        frame["delta_pct"] = 100.0 * (frame["median_step_ns"] - base) / base if base else math.nan
        return frame

    def _wide(
        self, per_run: list[dict[str, float]], order: list[str] | None = None
    ) -> pd.DataFrame:
        import pandas as pd

        names = order or sorted({k for d in per_run for k in d})
        frame = pd.DataFrame({"name": names})
        for label, values in zip(self.labels, per_run, strict=True):
            frame[label] = [values.get(n, math.nan) for n in names]
        if len(self.labels) >= 2:
            first, last = frame[self.labels[0]], frame[self.labels[-1]]
            frame["delta_ns"] = last - first
            frame["delta_pct"] = np.where(
                first.fillna(0) != 0, 100.0 * (last - first) / first, math.nan
            )
        return frame

    def _phases(self) -> pd.DataFrame:
        order = ["step", "dataloader", "forward", "backward", "optimization", "others"]
        per_run = []
        for i, run in enumerate(self.runs):
            model = run.summary("model").set_index("name")
            per_run.append(
                {k: float(model.loc[k, "cpu_total_ns"]) / self._divisor(i) for k in order}
            )
        return self._wide(per_run, order)

    def _totals(self) -> pd.DataFrame:
        order = ["step", "dataloader", "kernel", "memcpy", "communication"]
        per_run = []
        for i, run in enumerate(self.runs):
            ev = run.events
            device = ev["stream"].to_numpy() >= 0
            kind = ev["kind"].to_numpy()
            dur = ev["dur_ns"].to_numpy().astype(float)
            has_device = bool(device.any())
            steps = run.summary("steps")
            div = self._divisor(i)
            copies = device & np.isin(kind, ["memcpy", "memset"])
            per_run.append(
                {
                    "step": float(steps["dur_ns"].sum()) / div if len(steps) else math.nan,
                    "dataloader": float(steps["dataloader_ns"].sum()) / div
                    if len(steps)
                    else math.nan,
                    "kernel": float(dur[device & (kind == "kernel")].sum()) / div
                    if has_device
                    else math.nan,
                    "memcpy": float(dur[copies].sum()) / div if has_device else math.nan,
                    "communication": float(dur[kind == "communication"].sum()) / div,
                }
            )
        return self._wide(per_run, order)

    def _ops(self) -> pd.DataFrame:
        import pandas as pd

        frames = []
        for i, run in enumerate(self.runs):
            ops = run.summary("operator")
            div = self._divisor(i)
            frames.append(
                pd.DataFrame(
                    {
                        "name": ops["name"],
                        f"{self.labels[i]} calls": ops["calls"] / div,
                        f"{self.labels[i]}": _op_time(ops) / div,
                    }
                )
            )
        merged = frames[0]
        for f in frames[1:]:
            merged = merged.merge(f, on="name", how="outer")
        first, last = self.labels[0], self.labels[-1]
        a, b = merged[first], merged[last]
        merged["delta_ns"] = b - a
        merged["delta_pct"] = np.where(a.fillna(0) > 0, 100.0 * (b - a) / a, math.nan)
        status = np.where(
            a.isna(),
            "appeared",
            np.where(
                b.isna(),
                "disappeared",
                np.where(
                    merged["delta_pct"] > SAME_PCT,
                    "slower",
                    np.where(merged["delta_pct"] < -SAME_PCT, "faster", "same"),
                ),
            ),
        )
        merged["status"] = status
        merged["_order"] = merged["delta_ns"].abs().fillna(np.fmax(a.fillna(0), b.fillna(0)))
        return (
            merged.sort_values("_order", ascending=False)
            .drop(columns="_order")
            .reset_index(drop=True)
        )

    def _family(self) -> pd.DataFrame:
        per_run = []
        for i, run in enumerate(self.runs):
            per_run.append({k: v / self._divisor(i) for k, v in family_times(run).items()})
        return self._wide(per_run)

    # -- gate

    def gate(self, threshold_pct: float, metric: str = "step_time") -> GateResult:
        """Compare the last run with the first on ``metric`` (median per step); regressed when
        it is worse by more than ``threshold_pct`` and by more than the step-to-step noise
        (the larger interquartile range of the two runs, as a percent of the baseline median)."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        base_vals = _metric_values(self.runs[0], metric)
        cand_vals = _metric_values(self.runs[-1], metric)
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
            )
        delta = 100.0 * (cand - base) / base
        noise = max(_iqr(base_vals), _iqr(cand_vals)) / base * 100.0
        unit = "ms" if metric != "gpu_busy" else "%"
        scale = 1e6 if unit == "ms" else 1.0
        figures = f"{metric} median {cand / scale:.3f} {unit} vs {base / scale:.3f} {unit} ({delta:+.1f}%, noise ±{noise:.1f}%)"
        worse = delta > 0 if metric != "gpu_busy" else delta < 0
        size = abs(delta)
        if worse and size > threshold_pct and size > noise:
            return GateResult(
                True,
                metric,
                base,
                cand,
                delta,
                noise,
                threshold_pct,
                f"regression: {figures} is worse than {self.labels[0]} by more than {threshold_pct:g}%",
            )
        if worse and size > threshold_pct:
            return GateResult(
                False,
                metric,
                base,
                cand,
                delta,
                noise,
                threshold_pct,
                f"noise: {figures} is within the step-to-step noise",
            )
        return GateResult(False, metric, base, cand, delta, noise, threshold_pct, f"ok: {figures}")


def _iqr(values: np.ndarray) -> float:
    if len(values) < 2:
        return 0.0
    p25, p75 = np.percentile(values, [25, 75])
    return float(p75 - p25)


def _step_count(run: Run) -> int:
    return int((run.events["kind"] == "step").sum()) or 1


def _step_durations(run: Run) -> np.ndarray:
    ev = run.events
    steps = ev[ev["kind"] == "step"]
    if steps.empty:
        span = run.meta.get("span_ns") or [0, 0]
        return np.array([span[1] - span[0]], dtype=float)
    return steps["dur_ns"].to_numpy().astype(float)


def _metric_values(run: Run, metric: str) -> np.ndarray:
    if metric == "step_time":
        return _step_durations(run)
    steps = run.summary("steps")
    if metric == "dataloader":
        return steps["dataloader_ns"].to_numpy().astype(float)
    busy = steps["gpu_busy_ns"].to_numpy().astype(float)
    return 100.0 * busy / steps["dur_ns"].to_numpy()


def _op_time(ops: pd.DataFrame) -> pd.Series:
    """Per-op time to compare: GPU time where device work was recorded, else CPU time."""
    gpu = ops["gpu_total_ns"]
    return gpu.where(gpu.notna() & (gpu > 0), ops["cpu_total_ns"]).astype(float)


def compare(
    *runs: Any,
    labels: list[str] | None = None,
    batch_sizes: list[int | None] | None = None,
    per: str = "step",
) -> Comparison:
    """Return a ``Comparison`` of ``runs`` (``Run`` objects or paths ``perfkit_core.load`` reads).

    ``labels`` name the runs (default: the file or folder names); ``batch_sizes`` enables
    ``per="sample"`` normalization (times per sample instead of per step).
    """
    from perfkit_core.events.loading import load
    from perfkit_core.events.run import Run

    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if per not in ("step", "sample"):
        raise ValueError("per must be 'step' or 'sample'")
    loaded = [r if isinstance(r, Run) else load(r) for r in runs]
    if labels is None:
        names: list[str] = []
        for i, r in enumerate(runs):
            base = (
                os.path.basename(os.fspath(r).rstrip("/"))
                if not isinstance(r, Run)
                else f"run{i + 1}"
            )
            names.append(base or f"run{i + 1}")
        if len(set(names)) < len(names):
            names = [f"{i + 1}:{label}" for i, label in enumerate(names)]
        labels = names
    if len(labels) != len(loaded):
        raise ValueError("give one label per run")
    comparison = Comparison(loaded, list(labels), list(batch_sizes or []), per)
    if per == "sample":
        for i in range(len(loaded)):
            comparison._divisor(i)
    return comparison
