"""The parts a comparison is built from, each checked against a second computation: the ratio's
interval, the resolvable change, the user's op map, the profiler-overhead figures and the step
timer's record."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

import perfkit_core
from perfkit_core.cli import main
from perfkit_core.comparison import compare, load_op_map, ratio_of_means
from perfkit_core.comparison.overhead import host_events_per_step
from perfkit_core.comparison.statistics import resolvable_pct
from perfkit_core.errors import TraceError


def _trace(path, steps_us, ops):
    """A Kineto trace: each step holds ``ops`` (name, duration in us) back to back."""
    events, t = [], 0.0
    for i, d in enumerate(steps_us):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": d,
            }
        )
        at = t + 1
        for name, dur in ops:
            events.append(
                {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": at, "dur": dur}
            )
            at += dur + 1
        t += d
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_ratio_interval_covers_the_true_ratio_and_shrinks_with_steps():
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(40):
        a = rng.normal(100.0, 10.0, 30)
        b = rng.normal(130.0, 10.0, 30)
        est = ratio_of_means(a, b, seed=trial)
        assert est.ratio == pytest.approx(b.mean() / a.mean())
        covered += est.low <= 1.3 <= est.high
    assert covered >= 34  # a 95% interval misses about 2 of 40
    few = ratio_of_means(rng.normal(100, 10, 5), rng.normal(100, 10, 5))
    many = ratio_of_means(rng.normal(100, 10, 500), rng.normal(100, 10, 500))
    assert (many.high - many.low) < (few.high - few.low) / 4
    assert not many.significant and many.low < 1.0 < many.high


def test_resolvable_change_is_the_normal_approximation():
    a = np.array([100.0, 102, 98, 101, 99, 100])
    b = np.array([110.0, 108, 112, 109, 111, 110])
    spread = math.sqrt(a.var(ddof=1) / 6 + b.var(ddof=1) / 6)
    assert resolvable_pct(a, b) == pytest.approx(100 * (1.959964 + 0.841621) * spread / 100.0)
    assert math.isnan(resolvable_pct(a[:1], b))


def test_op_map_adds_and_overrides_canonical_ops(tmp_path):
    a = _trace(tmp_path / "a.json", [100] * 4, [("aten::my_fused_gemm", 40), ("aten::relu", 20)])
    b = _trace(tmp_path / "b.json", [100] * 4, [("aten::mm", 30), ("aten::relu", 20)])
    plain = compare(a, b, labels=["fused", "plain"]).summary("ops").set_index("name")
    assert "my_fused_gemm (forward)" in plain.index and "matmul (forward)" in plain.index
    toml = tmp_path / "map.toml"
    toml.write_text(
        '[ops.torch]\n"aten::my_fused_gemm" = "matmul"\n'
        '[families]\nmatmul = "matmul"\n[layers]\nMyBlock = "conv"\n'
    )
    op_map = load_op_map(toml)
    assert op_map.layers == {"myblock": "conv"}
    mapped = compare(a, b, labels=["fused", "plain"], op_map=op_map).summary("ops")
    row = mapped.set_index("name").loc["matmul (forward)"]
    assert row["fused"] == pytest.approx(40_000) and row["plain"] == pytest.approx(30_000)
    assert row["status"] == "faster" and "my_fused_gemm" in row["fused ops"]


def test_op_map_errors_name_the_file(tmp_path, capsys, monkeypatch):
    a = _trace(tmp_path / "a.json", [100] * 2, [("aten::mm", 30)])
    cases = {
        "bad.toml": ("[ops\n", "not valid TOML"),
        "section.toml": ("[opz]\n", "unknown section 'opz'"),
        "family.toml": ('[families]\nmm = "gemm"\n', "is not a family"),
        "value.toml": ("[layers]\nx = 3\n", "must map to a non-empty string"),
    }
    for name, (body, reason) in cases.items():
        path = tmp_path / name
        path.write_text(body)
        with pytest.raises(TraceError, match=reason):
            load_op_map(path)
        assert main(["compare", str(a), str(a), "--op-map", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and name in err and reason in err
    yaml_map = tmp_path / "map.yaml"
    yaml_map.write_text("ops:\n  torch:\n    aten::mm: linear\n")
    if "yaml" in sys.modules or _has_yaml():
        assert load_op_map(yaml_map).ops == {"torch": {"aten::mm": "linear"}}
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(TraceError, match="needs PyYAML"):
        load_op_map(yaml_map)


def _has_yaml() -> bool:
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def test_host_events_per_step_and_density_warning(tmp_path):
    sparse = _trace(tmp_path / "sparse.json", [100] * 4, [("aten::mm", 60)])
    dense = _trace(tmp_path / "dense.json", [100] * 4, [("aten::mm", 20), ("aten::add", 5)] * 3)
    comparison = compare(sparse, dense, labels=["sparse", "dense"])
    assert host_events_per_step(comparison.runs[0]) == 1.0
    assert host_events_per_step(comparison.runs[1]) == 6.0
    steps = comparison.summary("steps").set_index("name")
    assert steps.loc["dense", "host_events_per_step"] == 6.0
    warnings = comparison.verdict().warnings
    assert len(warnings) == 1 and "differ 6.0x (sparse 1, dense 6)" in warnings[0]
    assert "step_timer" in warnings[0]


def test_step_timer_record_becomes_the_headline(tmp_path):
    a = _trace(tmp_path / "a.json", [100] * 6, [("aten::mm", 60)])
    b = _trace(tmp_path / "b.json", [150] * 6, [("aten::mm", 90)])
    runs = []
    for path, unprofiled in ((a, [80_000] * 5 + [90_000]), (b, [160_000] * 6)):
        run = perfkit_core.load(path)
        run.meta["step_timer"] = {"profiled_ns": [100_000] * 6, "unprofiled_ns": unprofiled}
        runs.append(run)
    verdict = compare(*runs, labels=["a", "b"]).verdict()
    assert verdict.profiled.ratio == pytest.approx(1.5)
    assert verdict.unprofiled is not None
    assert verdict.headline.ratio == pytest.approx(160_000 / np.mean([80_000] * 5 + [90_000]))
    assert "without the profiler" in verdict.sentence()
    overhead = verdict.overheads[0].overhead_pct
    assert overhead == pytest.approx(100 * (100_000 / np.mean([80_000] * 5 + [90_000]) - 1))
    assert any(line.startswith("profiled steps give 1.50x") for line in verdict.lines())


def test_step_timer_saves_into_the_run(tmp_path):
    run = perfkit_core.load(_trace(tmp_path / "a.json", [100] * 3, [("aten::mm", 60)]))
    folder = run.save(tmp_path / "run")
    timer = perfkit_core.step_timer(object(), warmup=1)
    for _ in range(4):
        with timer.step():
            pass
    assert len(timer.unknown_ns) == 3  # a profiler no adapter knows: nobody can tell
    timer.unprofiled_ns = [5, 6]
    timer.save(folder)
    saved = perfkit_core.load(folder).meta["step_timer"]
    assert saved["unprofiled_ns"] == [5, 6] and saved["warmup"] == 1
    with pytest.raises(TraceError, match="cannot add step times"):
        timer.save(tmp_path / "missing")


def test_per_sample_divides_every_table_by_the_batch(tmp_path):
    a = _trace(tmp_path / "a.json", [100] * 4, [("aten::mm", 60)])
    b = _trace(tmp_path / "b.json", [300] * 4, [("aten::mm", 200)])
    per_step = compare(a, b, labels=["b16", "b64"])
    per_sample = compare(a, b, labels=["b16", "b64"], batch_sizes=[16, 64], per="sample")
    for view in ("family", "ops", "phases"):
        x = per_step.summary(view).set_index("name")
        y = per_sample.summary(view).set_index("name")
        assert y.loc["step", "b16"] == pytest.approx(x.loc["step", "b16"] / 16)
        assert y.loc["step", "b64"] == pytest.approx(x.loc["step", "b64"] / 64)
    assert per_sample.verdict().headline.ratio == pytest.approx(0.75)
    assert "1.33x faster per sample" in per_sample.verdict().sentence()
    gate = per_sample.gate(10)
    assert not gate.regressed and gate.message.startswith("improvement:")


def test_a_profiled_difference_pointing_the_other_way_is_said_first(tmp_path):
    """The profiler lengthens the first run's step by 88% and shortens the second's (its
    unprofiled steps were slower): profiled, the second is 1.5x faster; without the profiler
    it is 2x slower. The sentence leads with the unprofiled
    verdict and says at once that the profiled rows after it point the other way, and why."""
    a = _trace(tmp_path / "a.json", [150] * 6, [("aten::mm", 90)])
    b = _trace(tmp_path / "b.json", [100] * 6, [("aten::mm", 60)])
    runs = []
    for path, profiled, unprofiled in ((a, 150_000, 80_000), (b, 100_000, 160_000)):
        run = perfkit_core.load(path)
        run.meta["step_timer"] = {"profiled_ns": [profiled] * 6, "unprofiled_ns": [unprofiled] * 6}
        runs.append(run)
    verdict = compare(*runs, labels=["a", "b"]).verdict()
    assert verdict.profiled.direction == "faster" and verdict.headline.direction == "slower"
    effects = [round(100 * (p / u - 1)) for p, u in ((150_000, 80_000), (100_000, 160_000))]
    assert verdict.profiler_effects() == f"a {effects[0]:+d}%, b {effects[1]:+d}%"
    sentence = verdict.sentence()
    assert sentence.startswith("b is 2.00x slower per step than a without the profiler")
    # the profiled steps' other direction is a line of its own, before the rows it explains
    lines = verdict.lines()
    said = (
        f"the profiled steps say the opposite (1.50x faster; profiled against unprofiled "
        f"step time: a {effects[0]:+d}%, b {effects[1]:+d}%), so the rows by op family, layer, "
        "op and phase are the profiled difference's"
    )
    assert lines[1] == said and said not in sentence
    # reversed, still opposite
    reversed_lines = compare(*runs[::-1], labels=["b", "a"]).verdict().lines()
    assert any("say the opposite" in line for line in reversed_lines)
    # no phase timed without the profiler: the sentence names no profiled row as the cause
    assert sentence.endswith("the profiled steps, which the rows come from, say the opposite")
    assert "aten::mm" not in sentence and not verdict.unprofiled_phases
    # with the phases both runs timed without the profiler, it names the largest going the
    # headline's way beyond its noise; a phase only one run timed is left out
    phases = (
        {"data": [20_000, 22_000] * 3, "optimizer": [30_000, 31_000] * 3},
        {"data": [70_000, 74_000] * 3, "optimizer": [20_000, 21_000] * 3, "forward": [9] * 6},
    )
    for run, timed in zip(runs, phases, strict=True):
        run.meta["step_timer"]["phases"] = {
            name: {"profiled_ns": times, "unprofiled_ns": times} for name, times in timed.items()
        }
    timed_verdict = compare(*runs, labels=["a", "b"]).verdict()
    data = np.mean(phases[1]["data"]) - np.mean(phases[0]["data"])
    optimizer = np.mean(phases[1]["optimizer"]) - np.mean(phases[0]["optimizer"])
    assert data == 51_000 and optimizer == -10_000
    assert [(c.name, c.delta_ns) for c in timed_verdict.unprofiled_phases] == [
        ("data", data),
        ("optimizer", optimizer),
    ]
    assert timed_verdict.sentence().endswith(
        "; the biggest timed phase without the profiler: data +0.051 ms per step (64% of the "
        "difference)"
    )
    assert 100 * data / 80_000 == pytest.approx(63.75)
    rest = 80_000 - data - optimizer
    assert timed_verdict.lines()[2] == (
        "without the profiler, of the +0.080 ms difference in mean step time, the phases both "
        f"runs timed: data +0.051 ms (64%), optimizer -0.010 ms (-12%); +{rest / 1e6:.3f} ms "
        f"({100 * rest / 80_000:.0f}%) in the rest of the step"
    )
    plain = timed_verdict.to_dict()["unprofiled_phases"]
    assert [(p["name"], p["delta_ns"], p["resolvable"]) for p in plain] == [
        ("data", data, True),
        ("optimizer", optimizer, True),
    ]
    # the same direction both ways: no such line
    runs[1].meta["step_timer"]["unprofiled_ns"] = [50_000] * 6
    agree = compare(*runs, labels=["a", "b"]).verdict()
    assert agree.headline.direction == "faster"
    assert not any("say the opposite" in line for line in agree.lines())
    # there the profiled rows go the headline's way, and the sentence names the biggest of them
    assert "; the biggest cause: " in agree.sentence() and agree.unprofiled_phases
