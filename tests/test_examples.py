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
from perfkit_core.advice.engine import SEVERITY_HIGH_PCT, SEVERITY_MEDIUM_PCT
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


def optimizer_share(run: perfkit_core.Run) -> tuple[float, float]:
    """(outermost optimizer time, its share of the step time in %), from the events."""
    ev = run.events
    kind = ev["kind"].to_numpy()
    parent = ev["parent"].to_numpy()
    host = ev["stream"].to_numpy() < 0
    optimizer = host & (kind == "optimizer")
    outermost = optimizer & ~((parent >= 0) & optimizer[np.maximum(parent, 0)])
    optimizer_ns = float(ev["dur_ns"].to_numpy()[outermost & (ev["step"].to_numpy() >= 0)].sum())
    step_ns = float(ev["dur_ns"].to_numpy()[kind == "step"].sum())  # steps do not overlap
    return optimizer_ns, 100.0 * optimizer_ns / step_ns


def test_rule_plugin_finds_the_optimizer_share(torch_profile, monkeypatch) -> None:
    plugin = load_example("plugin_rule")
    run = perfkit_core.load(torch_profile.runs[0])
    optimizer_ns, share = optimizer_share(run)
    assert optimizer_ns > 0
    pm = get_plugin_manager()
    pm.register(plugin, name="optimizer_share")
    try:
        monkeypatch.setattr(plugin, "OPTIMIZER_MIN_PCT", share + 1.0)
        assert run.advise(rules=[plugin.RULE_ID]) == []
        monkeypatch.setattr(plugin, "OPTIMIZER_MIN_PCT", share - 1.0)
        [finding] = run.advise(rules=[plugin.RULE_ID])
        assert finding.rule == plugin.RULE_ID
        assert finding.evidence["optimizer_ns"] == pytest.approx(optimizer_ns)
        assert finding.evidence["optimizer_pct"] == pytest.approx(share)
        assert finding.saving_ns == pytest.approx(optimizer_ns * (1 - 1 / plugin.FUSED_SPEEDUP))
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
        # With every rule: the built-in rules keep their own remedies.
        remedies = {f.rule: f.remedy for f in run.advise()}
        assert remedies[plugin.RULE_ID] == plugin.REMEDIES["torch"]
        assert all(r for rule, r in remedies.items() if rule != plugin.RULE_ID)
    finally:
        pm.unregister(plugin)
    assert run.advise(rules=[plugin.RULE_ID]) == []


def test_rule_plugin_answers_in_paddle_code_for_a_paddle_run(paddle_profile, monkeypatch) -> None:
    plugin = load_example("plugin_rule")
    monkeypatch.setattr(plugin, "OPTIMIZER_MIN_PCT", 0.0)
    run = perfkit_core.load(paddle_profile.runs[0])
    pm = get_plugin_manager()
    pm.register(plugin, name="optimizer_share")
    try:
        [finding] = run.advise(rules=[plugin.RULE_ID])
    finally:
        pm.unregister(plugin)
    assert finding.remedy == plugin.REMEDIES["paddle"]
    assert finding.evidence["optimizer_ns"] > 0
