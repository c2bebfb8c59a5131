"""The example plugins of ``examples/`` (shown in the plugins guide) work: each is registered
through the plugin manager for one test, run on a real run, checked, and unregistered."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.advice.combine import SEVERITY_HIGH_PCT, SEVERITY_MEDIUM_PCT
from perfkit_core.cli import main
from perfkit_core.errors import UnknownViewError
from perfkit_core.plugins import get_plugin_manager, make_plugin_manager

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> types.ModuleType:
    """Import ``examples/<name>.py`` as a module of its own."""
    spec = importlib.util.spec_from_file_location(
        f"perfkit_example_{name}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["plugin_view", "plugin_rule"])
def test_examples_are_valid_plugins(name: str) -> None:
    pm = make_plugin_manager(load_entry_points=False)
    pm.register(load_example(name), name=name)
    pm.check_pending()  # every hookimpl names a real hook
    assert name in [n for n, _ in pm.list_name_plugin()]


def test_view_plugin_counts_and_times_every_kind(torch_profile, capsys) -> None:
    plugin = load_example("plugin_view")
    run = perfkit_core.load(torch_profile.runs[0])
    pm = get_plugin_manager()
    pm.register(plugin, name="kinds")
    try:
        table = run.summary("kinds")
        # The same figures computed another way: numpy over the kind column.
        kinds = run.events["kind"].astype(str).to_numpy()
        dur = run.events["dur_ns"].to_numpy()
        expected = {k: (int((kinds == k).sum()), int(dur[kinds == k].sum())) for k in set(kinds)}
        assert {r.name: (r.events, r.total_ns) for r in table.itertuples()} == expected
        assert list(table["total_ns"]) == sorted(table["total_ns"], reverse=True)
        assert run.summary("kinds", top=2)["name"].tolist() == table["name"].tolist()[:2]
        assert run.summary("kinds", rank=0).equals(table)  # a one-rank run
        # perfkit report shows it like a built-in view.
        assert (
            main(["report", str(torch_profile.runs[0]), "--views", "kinds", "--format", "json"])
            == 0
        )
        shown = json.loads(capsys.readouterr().out)["tables"]["kinds"]
        assert [row["name"] for row in shown["rows"]] == table["name"].tolist()
    finally:
        pm.unregister(plugin)
    with pytest.raises(UnknownViewError):
        run.summary("kinds")


def slow_trace(tmp_path: Path, durations_us: list[float]) -> perfkit_core.Run:
    """A trace of steps with the given durations, each holding one op over most of it."""
    events, ts = [], 0.0
    for i, dur in enumerate(durations_us):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": ts + 1,
                "dur": dur - 2,
            }
        )
        ts += dur
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return perfkit_core.load(path)


def test_rule_plugin_finds_the_slow_steps(tmp_path, monkeypatch) -> None:
    plugin = load_example("plugin_rule")
    durations = [1000.0, 1010.0, 990.0, 2500.0, 1005.0]
    run = slow_trace(tmp_path, durations)
    median = float(np.median(durations)) * 1000
    pm = get_plugin_manager()
    pm.register(plugin, name="slow_steps")
    try:
        [finding] = run.advise(rules=[plugin.RULE_ID])
        assert finding.evidence["slow_steps"] == [3]
        assert finding.evidence["median_step_ns"] == median
        # Per step: the slow step's excess spread over the run's 5 steps.
        assert finding.saving_ns == pytest.approx((2500_000 - median) / len(durations))
        assert finding.cites == {"phases": ["step 3"]}
        assert finding.details[0].startswith("step 3: 2.5 ms against a median of 1.0 ms")
        saving_pct = 100.0 * finding.saving_ns / finding.evidence["step_time_ns"]
        expected = (
            "high"
            if saving_pct >= SEVERITY_HIGH_PCT
            else "medium"
            if saving_pct >= SEVERITY_MEDIUM_PCT
            else "low"
        )
        assert finding.severity == expected
        assert finding.remedy == plugin.REMEDIES["torch"]
        monkeypatch.setattr(plugin, "SLOW_STEP_FACTOR", 2.6)
        assert run.advise(rules=[plugin.RULE_ID]) == []
        monkeypatch.setattr(plugin, "SLOW_STEP_FACTOR", 1.5)
        # With every rule: the built-in rules keep their own remedies.
        remedies = {f.rule: f.remedy for f in run.advise()}
        assert remedies[plugin.RULE_ID] == plugin.REMEDIES["torch"]
        assert all(r for rule, r in remedies.items() if rule != plugin.RULE_ID)
    finally:
        pm.unregister(plugin)
    assert plugin.RULE_ID not in {f.rule for f in run.advise()}


def test_rule_plugin_answers_in_paddle_code_for_a_paddle_run(paddle_profile, monkeypatch) -> None:
    plugin = load_example("plugin_rule")
    monkeypatch.setattr(plugin, "SLOW_STEP_FACTOR", 0.0)  # every step counts as slow
    run = perfkit_core.load(paddle_profile.runs[0])
    pm = get_plugin_manager()
    pm.register(plugin, name="slow_steps")
    try:
        [finding] = run.advise(rules=[plugin.RULE_ID])
    finally:
        pm.unregister(plugin)
    assert finding.remedy == plugin.REMEDIES["paddle"]
    assert len(finding.evidence["slow_steps"]) == len(run.meta["steps"])
