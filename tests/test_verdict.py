"""The verdict tells the whole story in both directions: the rows that got slower and those that
got faster, in ms per step; shares of the difference only when the steps differ beyond their
noise; within the noise, only rows that differ beyond their own noise, with their intervals.
Comparison tables say whether they compare host wall time or GPU kernel time, and agree row by
row with each run's own report."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.report import build_comparison_report, render

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def phase_trace(path, *, data_us, forward_us, steps=12, jitter_us=0.0, seed=0):
    """A torch-like trace: per step, waiting for data, a forward op, a backward node and the
    optimizer step, one after the other (times in us, each step exactly their sum)."""
    rng = np.random.default_rng(seed)
    events, t = [], 0.0
    for i in range(steps):
        noise = rng.uniform(-jitter_us, jitter_us, 4) if jitter_us else np.zeros(4)
        parts = [
            ("user_annotation", LOADER, data_us + noise[0]),
            ("cpu_op", "aten::linear", forward_us + noise[1]),
            ("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 300 + noise[2]),
            ("user_annotation", "Optimizer.step#SGD.step", 200 + noise[3]),
        ]
        start = t
        for cat, name, dur in parts:
            events.append(
                {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": t, "dur": dur}
            )
            t += dur
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": start,
                "dur": t - start,
            }
        )
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_two_sided_change_is_named_both_ways(tmp_path):
    """Run b's forward takes 60 us more per step and its data 40 us less: the verdict names
    both, with their ms, whichever way the step went."""
    a = phase_trace(tmp_path / "before.json", data_us=100, forward_us=400, jitter_us=2, seed=1)
    b = phase_trace(tmp_path / "after.json", data_us=60, forward_us=460, jitter_us=2, seed=2)
    comparison = perfkit_core.compare(a, b)
    assert comparison.labels == ["before", "after"]
    verdict = comparison.verdict()
    lines = verdict.lines()
    phases = next(line for line in lines if line.startswith("by phase:"))
    assert "slower in after" in phases and "forward +0.060 ms" in phases
    assert "faster in after" in phases and "data -0.040 ms" in phases
    assert {c.name for c in verdict.slower["phases"]} >= {"forward"}
    assert {c.name for c in verdict.faster["phases"]} >= {"data"}
    # The step is 20 us longer, beyond the noise: shares are of that difference.
    assert verdict.profiled.significant and verdict.profiled.direction == "slower"
    forward = next(c for c in verdict.slower["phases"] if c.name == "forward")
    assert forward.share_pct == pytest.approx(100.0 * 60 / 20, rel=0.05)
    assert "(300%)" in phases or "(299%)" in phases or "(301%)" in phases


def test_a_pair_within_the_noise_prints_no_shares(tmp_path):
    """The same loop twice, step times jittering by 80 us: the verdict says so, splits nothing
    into shares, and names only rows that differ beyond their own noise."""
    a = phase_trace(tmp_path / "a.json", data_us=100, forward_us=400, jitter_us=80, seed=3)
    b = phase_trace(tmp_path / "b.json", data_us=100, forward_us=400, jitter_us=80, seed=4)
    comparison = perfkit_core.compare(a, b)
    verdict = comparison.verdict()
    assert not verdict.profiled.significant
    text = "\n".join(verdict.lines())
    assert "within the noise" in verdict.sentence()
    assert not re.search(r"\(-?\d+%\)", text), text  # no share of a difference
    for view in ("family", "phases", "ops"):
        table = comparison.summary(view)
        assert table["share_pct"].isna().all(), view
        assert "no shares" in table.attrs["note"]
    for causes in (*verdict.slower.values(), *verdict.faster.values()):
        assert all(c.resolvable for c in causes)
    pair = json.loads(render(build_comparison_report(comparison), "json"))
    assert pair["verdict"]["unattributed_pct"] is None
    assert pair["verdict"]["explained_pct"] is None


def test_an_unprofiled_difference_says_the_profiled_rows_are_within_the_noise(tmp_path):
    """The step timer finds the second run 10% slower while the profiled steps differ only
    within the noise: the headline is the unprofiled ratio, and the sentence says why the rows
    after it carry intervals and no shares."""
    import dataclasses

    from perfkit_core.comparison.statistics import ratio_of_means

    a = phase_trace(tmp_path / "a.json", data_us=100, forward_us=400, jitter_us=80, seed=3)
    b = phase_trace(tmp_path / "b.json", data_us=100, forward_us=400, jitter_us=80, seed=4)
    verdict = perfkit_core.compare(a, b).verdict()
    assert not verdict.profiled.significant
    rng = np.random.default_rng(0)
    base = rng.normal(1e6, 1e4, 20)
    unprofiled = ratio_of_means(base, 1.1 * rng.normal(1e6, 1e4, 20))
    assert unprofiled.significant and unprofiled.direction == "slower"
    unprofiled_verdict = dataclasses.replace(verdict, unprofiled=unprofiled)
    sentence = unprofiled_verdict.sentence()
    assert sentence.startswith("b is 1.1"), sentence
    assert "without the profiler" in sentence
    lines = unprofiled_verdict.lines()
    assert lines[0] == sentence
    (why,) = [line for line in lines if "the profiled steps differ only within the noise" in line]
    assert "carry intervals, not shares" in why
    family = unprofiled_verdict.family_line()
    assert not re.search(r"\(-?\d+%\)", sentence + family), sentence + family
    # Both within the noise: the headline says so once, with no second clause.
    same = dataclasses.replace(verdict, unprofiled=ratio_of_means(base, base[::-1]))
    assert not any("the profiled steps differ" in line for line in same.lines())
    assert "take the same time per step without the profiler within the noise" in same.sentence()


def test_rows_that_differ_beyond_their_own_noise_are_named_within_the_noise(tmp_path):
    """The steps are too noisy to tell apart, but data loading alone is 30 us faster in every
    step: that row is named, with its own interval, and no share."""
    a = phase_trace(tmp_path / "a.json", data_us=130, forward_us=400, jitter_us=1, seed=5)
    b = phase_trace(tmp_path / "b.json", data_us=100, forward_us=400, jitter_us=1, seed=6)
    # b's optimizer alternates 150 us longer and shorter: its steps vary by 300 us, enough to
    # hide the 30 us the data wait saves.
    events = json.loads(b.read_text())["traceEvents"]
    events.sort(key=lambda e: (e["ts"], not e["name"].startswith("ProfilerStep")))
    shift, k, step = 0.0, 0, None
    for e in events:
        e["ts"] += shift
        if e["name"].startswith("ProfilerStep"):
            step = e
        elif e["name"].startswith("Optimizer"):
            extra = 150.0 if k % 2 == 0 else -150.0
            k += 1
            e["dur"] += extra
            step["dur"] += extra
            shift += extra
    b.write_text(json.dumps({"traceEvents": events}))
    comparison = perfkit_core.compare(a, b)
    verdict = comparison.verdict()
    assert not verdict.profiled.significant
    data = next(c for c in verdict.faster["phases"] if c.name == "data")
    assert data.resolvable and data.high_ns < 0 < -data.low_ns
    phases = next(line for line in verdict.lines() if line.startswith("by phase:"))
    assert "data -0.030 ms (95% CI" in phases


@pytest.fixture(scope="module")
def v100_pair():
    return perfkit_core.compare(shared_trace("resnet_nw0"), shared_trace("resnet_nw4"))


def test_default_labels_say_what_differs(v100_pair, torch_profile, paddle_profile):
    assert v100_pair.labels == ["workers0", "workers4"]
    pair = perfkit_core.compare(torch_profile.runs[0], paddle_profile.runs[0])
    assert pair.labels == ["torch", "paddle"]


def test_v100_report_and_comparison_agree_row_by_row_and_say_host_or_device(v100_pair):
    report = build_comparison_report(v100_pair)
    titles = {t.id: t.title for t in report.tables}
    assert "host wall time" in titles["family"] and "GPU kernel time" in titles["family_gpu"]
    host = v100_pair.summary("family").set_index("name")
    from perfkit_core.comparison.attribution import attribution_table

    gpu = attribution_table(v100_pair, "family", time="device").set_index("name")
    for label, run in zip(v100_pair.labels, v100_pair.runs, strict=True):
        own = run.summary("family").set_index("name")
        for name, row in own.iterrows():
            assert host.loc[name, label] == pytest.approx(row["per_step_ns"]), (label, name)
            if row["gpu_per_step_ns"]:
                assert gpu.loc[name, label] == pytest.approx(row["gpu_per_step_ns"]), (label, name)
        model = run.summary("model").set_index("name")
        assert gpu.loc["step", label] == pytest.approx(model.loc["step", "gpu_per_step_ns"])
    # The verdict names the GPU-time change separately from the host's.
    assert any(line.startswith("GPU time by op family") for line in v100_pair.verdict().lines())


def test_the_num_workers_verdict_names_the_host_slowing_down(v100_pair):
    """Four loader workers cut the data wait by about 68 ms per step, while the host's forward
    and backward took longer: the verdict names all three."""
    phases = next(line for line in v100_pair.verdict().lines() if line.startswith("by phase:"))
    assert re.search(r"faster in workers4: data -6\d\.\d{3} ms", phases)
    assert re.search(r"forward \+1\d\.\d{3} ms", phases) and "backward +" in phases
