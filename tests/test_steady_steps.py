"""Which steps a step average leaves out (``perfkit_core.events.steady``): leading warm-up
steps are left out of the comparison's verdict, its interval and attribution, the regression
gate, the report's headline and tables and the advice, and named; a slow step later in a run
stays in and is named.

The runs are one real 20-step torch CPU run (the demo's MLP) and copies of its Kineto trace
with some steps stretched or shrunk in time (``tests/retimed_traces.py``). A is the run with its
first two steps set to the median step: a real run's first recorded steps can take a few times
the rest on a busy machine without being warm-up by the rule, which would move the ratios
checked here by more than their tolerance. B has A's first two steps stretched to 40 times the
median step, C runs every step twice as fast with the same two slow first steps, D has one step
in the middle stretched to 40 times (a checkpoint).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.cli import main
from perfkit_core.comparison import compare
from perfkit_core.comparison.overhead import step_timer_times, whole_step_timer_times
from perfkit_core.comparison.rows import row_intervals
from perfkit_core.events.steady import (
    WARMUP_TIMES_MEDIAN,
    leading_warmup,
    steady_run,
    steady_steps,
)
from perfkit_core.report.model import SLOW_STEPS_ITEM, WARMUP_ITEM, build_report
from perfkit_core.views.anatomy.step_time import step_durations
from tests.retimed_traces import faster_copy, retime, slow_step_copy, warmup_copy

MIDDLE = 10  # the step (from 0) D stretches


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A: a real 20-step torch CPU trace with its first two steps evened; B, C and D: its
    retimed copies."""
    pytest.importorskip("torch")
    from tests.torch_profiles import record

    folder = tmp_path_factory.mktemp("steady")
    profile = record(folder, steps=20, blocks=2)
    a = retime(profile.trace, folder / "A.pt.trace.json", lambda i, d, m: m / d if i < 2 else 1.0)
    return {
        "A": a,
        "B": warmup_copy(a, folder / "B.pt.trace.json"),
        "C": faster_copy(a, folder / "C.pt.trace.json"),
        "D": slow_step_copy(a, folder / "D.pt.trace.json", at=MIDDLE),
    }


@pytest.fixture(scope="module")
def runs(traces: dict[str, Path]) -> dict[str, perfkit_core.Run]:
    return {name: perfkit_core.load(path) for name, path in traces.items()}


# -- the rule


@pytest.mark.parametrize(
    ("durations", "left_out"),
    [
        ([52.9, 35.1] + [1.5] * 18, 2),  # two compile steps
        # a compile spread over six steps (MindSpore's graph mode on a 2-core machine)
        ([10.5, 16.0, 15.5, 59.8, 77.1, 44.7, 3.0, 3.1, 2.8, 2.5, 2.3, 2.4, 2.3, 2.0], 6),
        ([3.0] * 5 + [50.0] + [3.0] * 14, 0),  # a checkpoint after steady steps
        ([50.0, 3.0, 3.0, 3.0, 30.0] + [3.0] * 15, 1),  # warm-up, then a checkpoint
        ([1.5, 40.0, 1.0, 1.0, 1.0, 1.0], 0),  # a steady step first: no warm-up
        ([4.0, 3.0, 3.1, 2.9], 0),  # a first step 1.3x the rest is not far above it
        ([50.0, 1.0], 1),
        ([50.0, 60.0, 70.0, 80.0, 1.0, 1.0, 1.0], 3),  # at most half the steps
        ([7.0], 0),
        ([], 0),
        ([5.0, 0.0, 0.0, 0.0], 0),  # later steps of no time: nothing to be far above
        ([9.0, 0.0, 1.0, 1.0, 0.0, 1.0], 1),
    ],
)
def test_the_rule_leaves_out_leading_steps_far_above_the_rest(durations, left_out):
    assert leading_warmup(durations) == left_out


def test_a_step_just_over_the_threshold_is_warm_up_and_one_just_under_is_not():
    rest = [2.0] * 9
    assert leading_warmup([WARMUP_TIMES_MEDIAN * 2.0 * 1.01, *rest]) == 1
    assert leading_warmup([WARMUP_TIMES_MEDIAN * 2.0 * 0.99, *rest]) == 0


def test_the_copies_are_retimed_as_intended(runs):
    a, b, c, d = (step_durations(runs[k]) for k in "ABCD")
    median = float(np.median(a))
    assert a[:2] == pytest.approx([median] * 2, rel=0.1)  # evened
    assert b[:2] == pytest.approx([40 * median] * 2, rel=1e-3)
    assert b[2:] == pytest.approx(a[2:], rel=1e-3, abs=2e3)
    assert c[2:] == pytest.approx(a[2:] / 2, rel=1e-3, abs=2e3)
    assert d[MIDDLE] == pytest.approx(40 * median, rel=1e-3)


def test_steady_steps_name_the_warm_up_and_the_steady_run_leaves_out_its_events(runs):
    b = runs["B"]
    judged = steady_steps(b)
    numbers = b.meta["steps"]
    assert [s.step for s in judged.warmup] == numbers[:2]
    assert judged.kept == len(numbers) - 2 and not judged.slow
    kept = steady_run(b)
    assert kept.meta["steps"] == numbers[2:]
    assert not set(kept.events["step"].unique()) & set(numbers[:2])
    # every event of the later steps is kept, and nothing outside the steps is lost
    step = b.events["step"].to_numpy()
    assert len(kept.events) == int((~np.isin(step, numbers[:2])).sum())
    assert step_durations(kept) == pytest.approx(step_durations(b)[2:])
    assert judged.mean_kept_ns == pytest.approx(float(step_durations(b)[2:].mean()))
    assert judged.mean_all_ns == pytest.approx(float(step_durations(b).mean()))
    assert steady_run(kept) is kept  # the rule is not applied twice
    assert steady_run(runs["A"]) is runs["A"]  # nothing to leave out


# -- the comparison and the gate


def test_warm_up_steps_do_not_decide_the_comparison(runs):
    comparison = compare(runs["A"], runs["B"], labels=["A", "B"])
    verdict = comparison.verdict()
    est = verdict.headline
    assert est.direction == "same"
    assert 0.90 <= est.ratio <= 1.15
    a, b = step_durations(runs["A"]), step_durations(runs["B"])
    assert est.baseline_mean == pytest.approx(a.mean())
    assert est.candidate_mean == pytest.approx(b[2:].mean())
    assert (est.baseline_n, est.candidate_n) == (len(a), len(a) - 2)
    # with the warm-up in, B would read several times slower: what the rule prevents
    assert verdict.with_warmup is not None and verdict.with_warmup.ratio > 3.0
    # the steps left out are named, with the ratio they would have given
    numbers = runs["B"].meta["steps"][:2]
    assert [s.step for s in verdict.steady[1].warmup] == numbers
    assert not verdict.steady[0].warmup
    assert "B's first 2 left out as warm-up" in verdict.sentence()
    text = "\n".join(verdict.lines())
    assert f"B steps {numbers[0]}, {numbers[1]} (" in text
    assert verdict.with_warmup is not None
    assert verdict.with_warmup.ratio == pytest.approx(b.mean() / a.mean())
    assert f"with them the ratio would be {verdict.with_warmup.ratio:.2f}" in text
    # the per-phase attribution is over the same steps: no phase differs beyond its noise
    phases = row_intervals(comparison, "phases", "host")
    for row in phases.itertuples():
        assert row.low_ns <= row.delta_ns <= row.high_ns, row.name
        assert not row.resolvable, (row.name, row.delta_ns, row.low_ns, row.high_ns)
    payload = verdict.to_dict()
    assert [s["step"] for s in payload["steady_steps"]["B"]["warmup"]] == numbers


def test_a_run_twice_as_fast_with_slow_first_steps_reads_faster(runs):
    verdict = compare(runs["A"], runs["C"], labels=["A", "C"]).verdict()
    assert verdict.headline.direction == "faster"
    assert verdict.headline.ratio <= 0.62
    # C's steps are A's at half the time; A's own first steps may run slower than the rest
    # on a busy machine without being warm-up, so the ratio is recomputed from the steps kept
    kept_a, kept_c = steady_steps(runs["A"]), steady_steps(runs["C"])
    assert len(kept_c.warmup) >= 2  # its two slow first steps, whatever A itself had
    expected = kept_c.mean_kept_ns / kept_a.mean_kept_ns
    assert verdict.headline.ratio == pytest.approx(expected, rel=1e-9)
    said = re.search(r"C is ([0-9.]+)x faster", verdict.sentence())
    assert said is not None and float(said.group(1)) == pytest.approx(1 / expected, abs=0.006)
    # with the warm-up in, the same runs read slower: what the rule prevents
    assert verdict.with_warmup is not None and verdict.with_warmup.ratio > 1.0


def test_the_gate_neither_fails_on_warm_up_nor_hides_a_regression(traces, capsys):
    assert main(["compare", str(traces["A"]), str(traces["B"]), "--fail-on-regression", "5"]) == 0
    passed = capsys.readouterr().out
    assert "left out as warm-up" in passed
    assert main(["compare", str(traces["C"]), str(traces["A"]), "--fail-on-regression", "5"]) == 1
    failed = capsys.readouterr().out
    assert "regression:" in failed
    # every recorded step counted: the warm-up hides the regression
    argv = ["compare", str(traces["C"]), str(traces["A"]), "--fail-on-regression", "5"]
    assert main([*argv, "--all-steps"]) == 0
    assert "left out as warm-up" not in capsys.readouterr().out


def test_a_slow_step_in_the_middle_stays_in_and_is_named(runs):
    d = runs["D"]
    judged = steady_steps(d)
    assert not judged.warmup
    (slow,) = judged.slow
    assert slow.step == d.meta["steps"][MIDDLE] and slow.times_median > 30
    assert steady_run(d) is d
    comparison = compare(runs["A"], d, labels=["A", "D"])
    verdict = comparison.verdict()
    assert verdict.headline.candidate_mean == pytest.approx(step_durations(d).mean())
    assert verdict.with_warmup is None
    text = "\n".join(verdict.lines())
    assert "slow steps kept in every average (" in text
    assert f"D step {slow.step} (" in text
    assert "left out as warm-up" not in text


def test_the_steady_rule_also_applies_to_the_step_timer(runs, traces):
    run = runs["A"]
    unprofiled = [40e6, 30e6] + [2e6 + 1e4 * i for i in range(30)]
    run.meta["step_timer"] = {"profiled_ns": [3e6] * 20, "unprofiled_ns": unprofiled}
    try:
        profiled, kept = step_timer_times(run)
        assert len(profiled) == 20 and list(kept) == unprofiled[2:]
        assert list(whole_step_timer_times(run)[1]) == unprofiled
        other = perfkit_core.load(traces["A"])
        other.meta["step_timer"] = {"profiled_ns": [3e6] * 20, "unprofiled_ns": unprofiled[2:]}
        verdict = compare(other, run, labels=["A0", "A"]).verdict()
        assert verdict.unprofiled is not None
        assert verdict.unprofiled.ratio == pytest.approx(1.0)
        assert verdict.unprofiled_warmup == [0, 2]
        assert "A's first 2 left out as warm-up" in verdict.sentence()
        assert verdict.with_warmup is not None
        assert verdict.with_warmup.ratio == pytest.approx(
            np.mean(unprofiled) / np.mean(unprofiled[2:])
        )
    finally:
        run.meta.pop("step_timer", None)


# -- the report and the advice


def test_the_report_of_the_warm_up_run_averages_the_steady_steps(runs):
    a, b = runs["A"], runs["B"]
    report = build_report(b, advice=True)
    items = {item.label: item.value for item in report.headline.items}
    mean_after = float(step_durations(a)[2:].mean())
    assert items["Step time (mean)"] == pytest.approx(mean_after, rel=0.05)
    header = {item.label: item.value for item in report.header}
    assert header["Steps"] == len(b.meta["steps"]) - 2
    numbers = b.meta["steps"][:2]
    assert header[WARMUP_ITEM].startswith(f"steps {numbers[0]}, {numbers[1]} (")
    assert f"{step_durations(b).mean() / 1e6:.3f} ms" in header[WARMUP_ITEM]
    # the phases the headline stacks add up to the step it states
    assert sum(p.per_step_ns for p in report.headline.phases) == pytest.approx(
        items["Step time (mean)"], rel=1e-6
    )
    # a report and a comparison of the same runs agree
    verdict = compare(a, b, labels=["A", "B"]).verdict()
    assert items["Step time (mean)"] == pytest.approx(verdict.profiled.candidate_mean, rel=1e-9)
    # the advice states its savings on the same step
    for finding in report.findings or []:
        assert finding.evidence["step_time_ns"] == pytest.approx(items["Step time (mean)"])
        assert finding.evidence["steps"] == len(b.meta["steps"]) - 2
    whole = build_report(b, steady=False, advice=False)
    whole_items = {item.label: item.value for item in whole.headline.items}
    assert whole_items["Step time (mean)"] == pytest.approx(step_durations(b).mean(), rel=1e-6)
    assert WARMUP_ITEM not in {item.label for item in whole.header}


def test_the_report_names_a_slow_step_it_keeps(runs, traces, capsys):
    d = runs["D"]
    report = build_report(d, advice=False)
    header = {item.label: item.value for item in report.header}
    slow = d.meta["steps"][MIDDLE]
    assert header[SLOW_STEPS_ITEM].startswith(f"step {slow} (")
    items = {item.label: item.value for item in report.headline.items}
    assert items["Step time (mean)"] == pytest.approx(step_durations(d).mean(), rel=1e-6)
    assert main(["report", str(traces["B"]), "--format", "json", "--no-advice"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert "Warm-up left out" in json.dumps(payload)


def test_advice_on_the_warm_up_run_states_the_steady_step(runs):
    b = runs["B"]
    steady_mean = float(step_durations(b)[2:].mean())
    for finding in b.advise():
        assert finding.evidence["step_time_ns"] == pytest.approx(steady_mean, rel=1e-6)
    for finding in b.advise(steady=False):
        assert finding.evidence["step_time_ns"] == pytest.approx(
            float(step_durations(b).mean()), rel=1e-6
        )
