"""The data types of a comparison: ``Comparison`` (runs lined up, with their step times and
the facade that builds every table and the verdict) and ``GateResult`` (the regression gate's
outcome).

The comparison's parts (attribution, efficiency, the verdict's causes, the gate) take a
``Comparison``; this module imports none of them. Its facade methods hand over to them by name
(``PARTS``), as ``Run``'s do to the views and advice, so the import graph keeps pointing one
way: the parts depend on the types, never the reverse.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.comparison.overhead import host_events_per_step
from perfkit_core.comparison.statistics import RatioEstimate, ratio_of_means
from perfkit_core.events.facts import has_device, step_count
from perfkit_core.events.steady import SteadySteps, steady_steps
from perfkit_core.views.anatomy.attribution import step_slices
from perfkit_core.views.anatomy.step_time import phase_times, step_durations
from perfkit_core.views.costmodel.canonical import OpMap

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.comparison.verdict import Verdict
    from perfkit_core.events.run import Run

#: Comparison tables that split the step-time difference and add up to it
#: (``comparison.attribution``).
ATTRIBUTION_VIEWS = ("phases", "family", "layers", "user", "ops")
#: What ``Comparison``'s facade methods call, as ``module:function`` in the comparison's parts.
PARTS: dict[str, str] = {
    "attribution_table": "perfkit_core.comparison.attribution:attribution_table",
    "efficiency_table": "perfkit_core.comparison.efficiency:efficiency_table",
    "build_verdict": "perfkit_core.comparison.causes:build_verdict",
    "gate": "perfkit_core.comparison.gate:gate",
}


def _part(name: str) -> Any:
    module, function = PARTS[name].split(":")
    return getattr(importlib.import_module(module), function)


#: Every comparison view, in the order a comparison report shows them.
VIEWS = (
    "steps",
    "phases",
    "family",
    "layers",
    "user",
    "ops",
    "totals",
    "efficiency",
    "layer_efficiency",
)
#: Column names a comparison table uses itself: no run label may take one.
RESERVED_COLUMNS = frozenset(
    {"name", "framework", "steps", "delta_ns", "delta_pct", "share_pct", "status"}
)


@dataclass
class GateResult:
    """Outcome of the regression gate: ``regressed`` and a one-line ``message``.

    ``baseline`` and ``candidate`` are the metric's values (ns per step or sample for times, %
    for ``gpu_busy``); ``delta_pct`` the change; ``noise_pct`` the change the runs cannot tell
    from noise (for ``step_time``: how far the interval's edge is from the ratio); ``causes``
    the rows that explain a step-time change (``view: name +x ms``)."""

    regressed: bool
    metric: str
    baseline: float
    candidate: float
    delta_pct: float
    noise_pct: float
    threshold_pct: float
    message: str
    causes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in self.__dict__.items()
        }


@dataclass
class Comparison:
    """Runs lined up for comparison; see ``summary`` and ``gate``. ``runs`` are the runs'
    steady steps (``events.steady.steady_run``), which every figure is taken over;
    ``whole_runs`` the runs as recorded, warm-up included (``runs`` when none was left out)."""

    runs: list[Run]
    labels: list[str]
    batch_sizes: list[int | None] = field(default_factory=list)
    per: str = "step"
    op_map: OpMap | None = None
    whole_runs: list[Run] = field(default_factory=list)
    _verdict: Verdict | None = field(default=None, repr=False)
    #: Tables already built, by (view, top): a verdict and a report ask for the same ones.
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    def sample_scale(self, i: int) -> float:
        """What run ``i``'s step times are divided by: its batch size per sample, else 1."""
        if self.per != "sample":
            return 1.0
        batch = self.batch_sizes[i] if i < len(self.batch_sizes) else None
        if not batch:
            raise ValueError("per='sample' needs a batch size for every run")
        return float(batch)

    def divisor(self, i: int) -> float:
        """What run ``i``'s whole-run times are divided by: its steps (times its batch size)."""
        return float(max(_step_count(self.runs[i]), 1)) * self.sample_scale(i)

    def step_samples(self, i: int) -> np.ndarray:
        """Run ``i``'s step durations in ns, per sample when the comparison is."""
        return _step_durations(self.runs[i]) / self.sample_scale(i)

    def warmup(self, i: int) -> SteadySteps:
        """What the steady-step rule left out of run ``i`` and which slow steps it kept
        (nothing left out of a comparison made with ``steady=False``)."""
        judged = steady_steps(self.runs[i])
        whole = self.whole_runs[i] if i < len(self.whole_runs) else self.runs[i]
        if judged.warmup and whole is self.runs[i]:
            return SteadySteps(
                [], judged.slow, judged.steps, judged.mean_all_ns, judged.mean_all_ns
            )
        return judged

    def whole_step_samples(self, i: int) -> np.ndarray:
        """Run ``i``'s step durations in ns, warm-up included, per sample when the comparison
        is."""
        whole = self.whole_runs[i] if i < len(self.whole_runs) else self.runs[i]
        return _step_durations(whole) / self.sample_scale(i)

    def slices(self, i: int) -> pd.DataFrame:
        """Run ``i``'s step time cut into labelled slices (``views.attribution.step_slices``)."""
        return step_slices(self.runs[i], op_map=self.op_map)

    def step_index(self, i: int) -> pd.MultiIndex:
        """Run ``i``'s steps as (rank, step) pairs, in order; one pair (its rank, -1) for a run
        without steps."""
        import pandas as pd

        from perfkit_core.events.intervals import step_spans

        spans = step_spans(self.runs[i])
        if len(spans["step"]) == 0:
            rank = int((self.runs[i].meta.get("ranks") or [0])[0])
            return pd.MultiIndex.from_tuples([(rank, -1)], names=["rank", "step"])
        return pd.MultiIndex.from_arrays(
            [spans["rank"].astype(np.int64), spans["step"].astype(np.int64)],
            names=["rank", "step"],
        )

    def profiled_estimate(self) -> RatioEstimate:
        """The ratio of the last run's mean profiled step to the first run's, with its
        interval (``statistics.ratio_of_means``); cached."""
        cached = self.cache.get("profiled_estimate")
        if cached is None:
            cached = ratio_of_means(self.step_samples(0), self.step_samples(len(self.runs) - 1))
            self.cache["profiled_estimate"] = cached
        return cached

    def has_device(self) -> bool:
        """Whether any run recorded device work (the comparison then offers GPU-time tables)."""
        return any(has_device(r) for r in self.runs)

    def verdict(self) -> Verdict:
        """Which run is faster (last against first), by how much, and why."""
        if self._verdict is None:
            self._verdict = _part("build_verdict")(self)
        return self._verdict

    def summary(self, view: str = "steps") -> pd.DataFrame:
        """Return the comparison table ``view``, one of ``VIEWS``."""
        if view in ATTRIBUTION_VIEWS:
            table: pd.DataFrame = _part("attribution_table")(self, view)
            return table
        builders = {
            "steps": self._steps,
            "totals": self._totals,
            "efficiency": lambda: _part("efficiency_table")(self, "ops"),
            "layer_efficiency": lambda: _part("efficiency_table")(self, "layers"),
        }
        if view not in builders:
            raise KeyError(f"unknown comparison view {view!r}; known: {', '.join(VIEWS)}")
        return builders[view]()

    def gate(self, threshold_pct: float, metric: str = "step_time") -> GateResult:
        """The regression gate (``comparison.gate.gate``): last run against the first."""
        result: GateResult = _part("gate")(self, threshold_pct, metric)
        return result

    # -- views

    def _steps(self) -> pd.DataFrame:
        import pandas as pd

        rows = []
        for i, (label, run) in enumerate(zip(self.labels, self.runs, strict=True)):
            durs = _step_durations(run)
            scale = self.sample_scale(i)
            has = len(durs) > 0
            med = float(np.median(durs)) if has else math.nan
            p25, p75 = np.percentile(durs, [25, 75]) if has else (math.nan, math.nan)
            mean = float(np.mean(durs)) if has else math.nan
            row: dict[str, Any] = {
                "name": label,
                "framework": run.framework,
                "steps": len(durs),
                "mean_step_ns": mean,
                "median_step_ns": med,
                "p25_step_ns": float(p25),
                "p75_step_ns": float(p75),
                "spread_pct": 100.0 * (p75 - p25) / med if med else math.nan,
            }
            if self.per == "sample":
                row["mean_sample_ns"] = mean / scale
            row["host_events_per_step"] = host_events_per_step(run)
            row["gpu_busy_pct"] = math.nan
            if has_device(run):
                gpu = run.summary("device")
                gpu = gpu[gpu["name"].str.startswith("GPU")]
                if len(gpu):
                    row["gpu_busy_pct"] = float(gpu["utilization_pct"].mean())
            rows.append(row)
        frame = pd.DataFrame(rows)
        key = "mean_sample_ns" if self.per == "sample" else "mean_step_ns"
        base = frame[key].iloc[0]
        frame["delta_pct"] = 100.0 * (frame[key] - base) / base if base else math.nan
        frame.attrs["note"] = f"delta: mean per {self.per} against {self.labels[0]}"
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

    def _totals(self) -> pd.DataFrame:
        """Per run, per step (or sample): the step, its time waiting for data (the model
        view's ``data`` phase), the GPU time its kernels took (the model view's GPU time of the
        step: kernels and communication kernels launched in it), device copies and sets, and
        communication kernels."""
        from perfkit_core.views.anatomy.structure import structure

        order = ["step", "data", "gpu", "memcpy", "communication"]
        per_run = []
        for i, run in enumerate(self.runs):
            ev = run.events
            kind = structure(run).kind
            device = ev["stream"].to_numpy() >= 0
            dur = ev["dur_ns"].to_numpy().astype(float)
            has_device = bool(device.any())
            times = phase_times(run)
            div = self.divisor(i)
            in_steps = ev["step"].to_numpy() >= 0
            copies = device & in_steps & np.isin(kind, ["memcpy", "memset"])
            comm = device & in_steps & (kind == "communication")
            per_run.append(
                {
                    "step": float(_step_durations(run).sum()) / div,
                    "data": float(times["data_ns"].sum()) / div if len(times) else math.nan,
                    "gpu": float(times["gpu_step_ns"].sum()) / div
                    if has_device and "gpu_step_ns" in times
                    else math.nan,
                    "memcpy": float(dur[copies].sum()) / div if has_device else math.nan,
                    "communication": float(dur[comm].sum()) / div if has_device else math.nan,
                }
            )
        frame = self._wide(per_run, order)
        # A row no run recorded (device rows of CPU runs) or that is 0 in every run (no
        # collective was called) says nothing; the step row always stays.
        values = frame[self.labels]
        recorded = values.notna().any(axis=1) & (values.fillna(0) != 0).any(axis=1)
        recorded |= frame["name"] == "step"
        frame = frame[recorded].reset_index(drop=True)
        if not recorded.all():
            frame.attrs["note"] = "rows no run recorded, or that are 0 in every run, are left out"
        return frame


def _step_count(run: Run) -> int:
    """The steps a whole-run figure is divided by: the run's steps, 1 for a run without."""
    return max(step_count(run), 1)


def _step_durations(run: Run) -> np.ndarray:
    """The run's step durations (ns), as its report times them: each step stretched over the
    device work it launched (``views.step_time.step_durations``)."""
    return step_durations(run)
