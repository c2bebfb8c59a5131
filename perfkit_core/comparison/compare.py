"""Compare runs: before and after a change, or one model in two frameworks, side by side.

``compare(*runs)`` returns a ``Comparison``. ``verdict()`` says which run is faster, by how much
(with a confidence interval) and what explains the difference; ``summary(view)`` tables have the
key column ``name`` and one column per run (its label): ``steps`` (step times and spread),
``totals`` (device, copy, communication and data-loading time), and the attribution tables that
add up to the step-time difference, ranked by their share of it: ``phases``, ``family`` (op
families), ``layers``, ``user`` (annotated spans) and ``ops`` (canonical ops, lined up across
frameworks); ``efficiency`` and ``layer_efficiency`` (achieved TFLOP/s, share of the peak and
of the roofline bound per canonical op or layer, and each run's MFU). Times are per step, or
per sample when batch sizes are given. ``gate(pct)`` is the
regression check CI uses. The first run is the baseline; differences are last minus first.

Every figure is taken over each run's steady steps (``events.steady``): leading warm-up steps
far above the rest (a compile, a first step that fills caches) are left out of the ratio, its
interval, the attribution tables and the gate, and the verdict names them with the ratio they
would have given; a slow step later in a run stays in and is named.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.comparison.attribution import ATTRIBUTION_VIEWS, attribution_table
from perfkit_core.comparison.efficiency import efficiency_table
from perfkit_core.comparison.gate import GateResult, gate
from perfkit_core.comparison.overhead import host_events_per_step
from perfkit_core.comparison.statistics import RatioEstimate, ratio_of_means
from perfkit_core.comparison.verdict import Verdict, build_verdict
from perfkit_core.events.steady import SteadySteps, steady_run, steady_steps
from perfkit_core.views.attribution import step_slices
from perfkit_core.views.canonical import OpMap
from perfkit_core.views.step_time import phase_times, step_durations

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

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
        return any(bool((r.events["stream"].to_numpy() >= 0).any()) for r in self.runs)

    def verdict(self) -> Verdict:
        """Which run is faster (last against first), by how much, and why."""
        if self._verdict is None:
            self._verdict = build_verdict(self)
        return self._verdict

    def summary(self, view: str = "steps") -> pd.DataFrame:
        """Return the comparison table ``view``, one of ``VIEWS``."""
        if view in ATTRIBUTION_VIEWS:
            return attribution_table(self, view)
        builders = {
            "steps": self._steps,
            "totals": self._totals,
            "efficiency": lambda: efficiency_table(self, "ops"),
            "layer_efficiency": lambda: efficiency_table(self, "layers"),
        }
        if view not in builders:
            raise KeyError(f"unknown comparison view {view!r}; known: {', '.join(VIEWS)}")
        return builders[view]()

    def gate(self, threshold_pct: float, metric: str = "step_time") -> GateResult:
        """The regression gate (``comparison.gate.gate``): last run against the first."""
        return gate(self, threshold_pct, metric)

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
            if (run.events["stream"].to_numpy() >= 0).any():
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
        from perfkit_core.views.structure import structure

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
    return int((run.events["kind"] == "step").sum()) or 1


def _step_durations(run: Run) -> np.ndarray:
    """The run's step durations (ns), as its report times them: each step stretched over the
    device work it launched (``views.step_time.step_durations``)."""
    return step_durations(run)


#: File name endings a default label leaves out.
TRACE_SUFFIXES = (
    ".pt.trace.json.gz",
    ".pt.trace.json",
    ".paddle_trace.json",
    ".paddle_trace.pb",
    ".xplane.pb",
    ".json.gz",
    ".json",
    ".gz",
)
_TOKENS = re.compile(r"[^_\-./\s]+")


def default_labels(inputs: tuple[Any, ...], runs: list[Run]) -> list[str]:
    """Short labels for the runs, from what differs between them: the parts of their file or
    folder names no other input shares (``resnet50_v100_num_workers_0.pt.trace.json.gz`` and
    ``..._4...`` read ``workers0`` and ``workers4``), else their frameworks when those differ
    (``torch``, ``paddle``), else ``run1``, ``run2``, ...; always unique."""
    from perfkit_core.events.run import Run

    names = []
    for i, item in enumerate(inputs):
        origin = getattr(item, "origin", None) if isinstance(item, Run) else item
        text = os.path.basename(os.fspath(origin).rstrip("/")) if origin else ""
        for suffix in TRACE_SUFFIXES:
            if text.endswith(suffix):
                text = text[: -len(suffix)]
                break
        names.append(text or f"run{i + 1}")
    tokens = [_TOKENS.findall(n) for n in names]
    common = set.intersection(*(set(t) for t in tokens)) if tokens else set()
    labels = []
    for own, name in zip(tokens, names, strict=True):
        parts = [t for t in own if t not in common]
        # A bare number reads better with the word before it (num_workers_0 -> workers0).
        if len(parts) == 1 and parts[0].isdigit():
            at = own.index(parts[0])
            parts = [own[at - 1] + parts[0]] if at > 0 else parts
        labels.append("_".join(parts) or name)
    frameworks = [r.framework for r in runs]
    if len(set(labels)) < len(labels) and len(set(frameworks)) == len(frameworks):
        labels = list(frameworks)
    if len(set(labels)) < len(labels) or set(labels) & RESERVED_COLUMNS:
        labels = [f"{i + 1}:{label}" for i, label in enumerate(labels)]
    return labels


def check_labels(labels: list[str]) -> list[str]:
    """Return ``labels`` stripped, or raise ValueError: labels must be non-empty, unique, and
    name no column a comparison table uses itself (``name``, ``delta_ns``, ...), nor another
    run's ``<label> calls`` / ``<label> ops`` column."""
    cleaned = [str(label).strip() for label in labels]
    if any(not label for label in cleaned):
        raise ValueError("a run label is empty")
    seen: set[str] = set()
    for label in cleaned:
        if label in seen:
            raise ValueError(f"run label {label!r} is given twice: labels must be unique")
        seen.add(label)
    for label in cleaned:
        if label in RESERVED_COLUMNS:
            raise ValueError(
                f"run label {label!r} is a column name of the comparison tables; choose another"
            )
        for other in cleaned:
            if label in (f"{other} calls", f"{other} ops"):
                raise ValueError(f"run label {label!r} clashes with run {other!r}'s columns")
    return cleaned


def compare(
    *runs: Any,
    labels: list[str] | None = None,
    batch_sizes: list[int | None] | None = None,
    per: str = "step",
    op_map: OpMap | str | os.PathLike[str] | None = None,
    steady: bool = True,
) -> Comparison:
    """Return a ``Comparison`` of ``runs`` (``Run`` objects or paths ``perfkit_core.load`` reads).

    The first run is the baseline. ``labels`` name the runs (default: the file or folder names;
    unique, see ``check_labels``); ``batch_sizes`` enables ``per="sample"`` normalization (times
    per sample instead of per step); ``op_map`` adds or overrides canonical-op mappings (an
    ``OpMap``, or a TOML/YAML file read by ``comparison.opmap.load_op_map``). With ``steady``
    (the default) each run's leading warm-up steps are left out (``events.steady``); without
    it every recorded step counts.
    """
    from perfkit_core.comparison.opmap import load_op_map
    from perfkit_core.events.loading import load
    from perfkit_core.events.run import Run

    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if per not in ("step", "sample"):
        raise ValueError("per must be 'step' or 'sample'")
    if op_map is not None and not isinstance(op_map, OpMap):
        op_map = load_op_map(op_map)
    loaded = [r if isinstance(r, Run) else load(r) for r in runs]
    if labels is None:
        labels = default_labels(runs, loaded)
    if len(labels) != len(loaded):
        raise ValueError(f"give one label per run: {len(labels)} labels for {len(loaded)} runs")
    labels = check_labels(list(labels))
    kept = [steady_run(r) for r in loaded] if steady else loaded
    comparison = Comparison(kept, labels, list(batch_sizes or []), per, op_map, whole_runs=loaded)
    if per == "sample":
        for i in range(len(loaded)):
            comparison.sample_scale(i)
    return comparison
