"""Which rows explain a comparison's difference, and the verdict built from them: the rows of
each attribution table that take longer and less time in the last run (``both_sides``), the
causes the verdict names (``top_causes``) and the ``Verdict`` of a ``Comparison``
(``build_verdict``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.comparison.attribution import TOTAL, attribution_table, missing_layers_line
from perfkit_core.comparison.overhead import (
    RunOverhead,
    density_warning,
    run_overhead,
    step_timer_phase,
    step_timer_phase_ns,
)
from perfkit_core.comparison.rows import mean_difference
from perfkit_core.comparison.statistics import ratio_of_means
from perfkit_core.comparison.verdict import (
    CAUSE_VIEWS,
    MIN_CAUSE_PCT,
    TOP_CAUSES,
    Cause,
    Verdict,
)
from perfkit_core.views.anatomy.attribution import UNATTRIBUTED

if TYPE_CHECKING:
    from perfkit_core.comparison.types import Comparison
    from perfkit_core.events.run import Run


def both_sides(
    comparison: Comparison, view: str, time: str = "host", limit: int = TOP_CAUSES
) -> tuple[list[Cause], list[Cause]]:
    """The rows of ``view`` that take longer and less time in the last run, largest first, at
    most ``limit`` each. When the steps differ beyond their noise: rows of at least
    ``MIN_CAUSE_PCT`` of the step-time difference's size; otherwise only rows that differ
    beyond their own noise. The total and unattributed rows are never named."""
    from perfkit_core.comparison.rows import row_intervals

    table = attribution_table(comparison, view, time=time)
    total = float(table.loc[table["name"] == TOTAL, "delta_ns"].iloc[0]) if len(table) else 0.0
    intervals = row_intervals(comparison, view, time).set_index("name")
    labels = dict(zip(table["name"], table["name"], strict=True))
    if view == "layers":
        from perfkit_core.comparison.attribution import layer_labels

        labels = layer_labels(comparison)
    significant = comparison.profiled_estimate().significant
    found: list[Cause] = []
    for key, row in intervals.iterrows():
        name = labels.get(str(key), str(key))
        if name in (TOTAL, UNATTRIBUTED) or str(key) in (TOTAL, UNATTRIBUTED):
            continue
        delta = float(row["delta_ns"])
        if significant:
            if not total or abs(delta) < MIN_CAUSE_PCT / 100.0 * abs(total):
                continue
        elif not row["resolvable"]:
            continue
        share = 100.0 * delta / total if significant and total else math.nan
        found.append(
            Cause(
                view,
                name,
                delta,
                share,
                float(row["low_ns"]),
                float(row["high_ns"]),
                bool(row["resolvable"]),
            )
        )
    slower = [c for c in found if c.delta_ns > 0][:limit]
    faster = [c for c in found if c.delta_ns < 0][:limit]
    return slower, faster


def top_causes(comparison: Comparison, view: str, limit: int = TOP_CAUSES) -> list[Cause]:
    """The rows of ``view`` that go the way the step does, largest first (``both_sides``);
    within the noise, the resolvable rows of both sides."""
    slower, faster = both_sides(comparison, view, limit=limit)
    if not comparison.profiled_estimate().significant:
        return sorted(slower + faster, key=lambda c: -abs(c.delta_ns))[:limit]
    return slower if comparison.profiled_estimate().delta > 0 else faster


#: The step timer's phases that are parts of a step's wall time (the others are CPU times:
#: ``training_cpu``, ``data_cpu``, and ``loading``, a loading thread's beside the step).
WALL_PHASES = ("data", "forward", "backward", "optimizer")


def unprofiled_phases(
    comparison: Comparison, overheads: list[RunOverhead], total: float
) -> list[Cause]:
    """The phases both the first and the last run timed without the profiler
    (``WALL_PHASES``, from the step timer's ``phases``), each as a ``Cause``: the last run's
    mean per step (or sample) less the first's, over the steps the headline's ratio is taken
    over (their warm-up left out), its share of ``total`` (the difference of those steps'
    means, ns), and its 95% interval from the two runs' step-to-step spread; largest first.
    Empty where either run has no unprofiled steps."""
    first, last = 0, len(comparison.runs) - 1
    ends = (first, last)
    if any(len(overheads[i].unprofiled_ns) == 0 for i in ends):
        return []
    scale = [comparison.sample_scale(i) for i in ends]
    found = []
    for phase in WALL_PHASES:
        va, vb = (
            _phase_steps(comparison.runs[i], phase, overheads[i]) / scale[k]
            for k, i in enumerate(ends)
        )
        if min(len(va), len(vb)) < 2 or not (va.any() and vb.any()):
            continue
        delta, low, high = mean_difference(va, vb)
        share = 100.0 * delta / total if total else math.nan
        found.append(
            Cause("unprofiled phases", phase, delta, share, low, high, low > 0 or high < 0)
        )
    return sorted(found, key=lambda c: -abs(c.delta_ns))


def _phase_steps(run: Run, phase: str, overhead: RunOverhead) -> np.ndarray:
    """``phase``'s unprofiled time in each step the headline keeps (ns; 0 in a step it did not
    run in), or an empty array where the run did not time it in step with its steps."""
    times = step_timer_phase_ns(run, phase)
    if len(times) != len(overhead.whole_unprofiled_ns):
        return np.zeros(0)
    return times[overhead.warmup_unprofiled :]


def build_verdict(comparison: Comparison) -> Verdict:
    """The verdict of ``comparison``: its last run against its first."""
    first, last = 0, len(comparison.runs) - 1
    profiled = comparison.profiled_estimate()
    overheads = [run_overhead(run) for run in comparison.runs]
    steady = [comparison.warmup(i) for i in range(len(comparison.runs))]
    unprofiled_warmup = [o.warmup_unprofiled for o in overheads]
    unprofiled = None
    with_warmup = None
    if len(overheads[first].unprofiled_ns) and len(overheads[last].unprofiled_ns):
        unprofiled = ratio_of_means(
            overheads[first].unprofiled_ns / comparison.sample_scale(first),
            overheads[last].unprofiled_ns / comparison.sample_scale(last),
        )
        if unprofiled_warmup[first] or unprofiled_warmup[last]:
            with_warmup = ratio_of_means(
                overheads[first].whole_unprofiled_ns / comparison.sample_scale(first),
                overheads[last].whole_unprofiled_ns / comparison.sample_scale(last),
            )
    elif steady[first].warmup or steady[last].warmup:
        with_warmup = ratio_of_means(
            comparison.whole_step_samples(first), comparison.whole_step_samples(last)
        )
    layers_missing = missing_layers_line(comparison)
    sides = {
        view: ([], []) if view == "layers" and layers_missing else both_sides(comparison, view)
        for view in CAUSE_VIEWS
    }
    going = profiled.delta > 0
    causes = {
        view: (
            (slower if going else faster)
            if profiled.significant
            else sorted(slower + faster, key=lambda c: -abs(c.delta_ns))[:TOP_CAUSES]
        )
        for view, (slower, faster) in sides.items()
    }
    gpu_slower: list[Cause] = []
    gpu_faster: list[Cause] = []
    if comparison.has_device():
        gpu_slower, gpu_faster = both_sides(comparison, "family", "device")
    family = attribution_table(comparison, "family").set_index("name")
    unattributed = (
        float(family.loc[UNATTRIBUTED, "share_pct"]) if UNATTRIBUTED in family.index else 0.0
    )
    unattributed_ns = (
        float(family.loc[UNATTRIBUTED, "delta_ns"]) if UNATTRIBUTED in family.index else 0.0
    )
    warnings = []
    dense = density_warning(comparison.labels, overheads)
    if dense and unprofiled is None:
        warnings.append(
            dense + "; time steps without the profiler with perfkit_core.step_timer() for an "
            "unbiased ratio"
        )
    elif dense:
        warnings.append(dense + "; the headline uses the unprofiled step-timer times")
    return Verdict(
        baseline=comparison.labels[first],
        candidate=comparison.labels[last],
        per=comparison.per,
        profiled=profiled,
        unprofiled=unprofiled,
        causes=causes,
        unattributed_pct=unattributed if not math.isnan(unattributed) else 0.0,
        overheads=overheads,
        labels=list(comparison.labels),
        warnings=warnings,
        slower={view: pair[0] for view, pair in sides.items()},
        faster={view: pair[1] for view, pair in sides.items()},
        unattributed_ns=unattributed_ns,
        gpu_slower=gpu_slower,
        gpu_faster=gpu_faster,
        layers_missing=layers_missing,
        loading_thread_ns=[step_timer_phase(run, "loading", mean=True) for run in comparison.runs],
        steady=steady,
        unprofiled_warmup=unprofiled_warmup,
        with_warmup=with_warmup,
        unprofiled_phases=(
            unprofiled_phases(comparison, overheads, unprofiled.delta) if unprofiled else []
        ),
    )
