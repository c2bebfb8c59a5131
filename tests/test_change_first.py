"""The headline's "Change first" names the finding worth most among those whose saving is
beyond their estimate's error (``Finding.within_error``), in text, HTML and JSON, with its own
advice number; when every finding is within its error, the headline says so instead of
putting one first. The advice comes in that order: the savings the estimates stand behind
first, so "Change first" is advice 1 whenever there is one, and a finding within its error
says so beside its severity."""

from __future__ import annotations

import json
from types import SimpleNamespace

import markupsafe
import pytest

import perfkit_core
from perfkit_core.advice import Finding
from perfkit_core.advice.engine import advice_order
from perfkit_core.cli import main
from perfkit_core.plugins import hookimpl
from perfkit_core.plugins import manager as plugins
from perfkit_core.report.headline import DOUBT_LABEL, WITHIN_ERROR_NOTE, change_first
from tests.test_plugins import _tiny_trace


def test_change_first_skips_findings_within_their_error():
    sure = SimpleNamespace(saving_ns=2.0, within_error=False)
    unsure = SimpleNamespace(saving_ns=3.0, within_error=True)
    nothing = SimpleNamespace(saving_ns=0.0, within_error=False)
    assert change_first([unsure, sure]) == (sure, 2)
    assert change_first([sure, unsure]) == (sure, 1)
    assert change_first([unsure, nothing, sure]) == (sure, 3)
    assert change_first([unsure, nothing]) == (None, 0)  # nothing promised beyond its error
    assert change_first([]) == (None, 0)
    assert change_first(None) == (None, 0)


def test_advice_puts_the_savings_its_estimates_stand_behind_first():
    def finding(id_, saving, within):
        return Finding(id=id_, title=id_, severity="", saving_ns=saving, within_error=within)

    found = [
        finding("doubtful-large", 9.0, True),
        finding("nothing", 0.0, False),
        finding("sure-small", 2.0, False),
        finding("doubtful-small", 1.0, True),
        finding("sure-large", 5.0, False),
    ]
    ordered = sorted(found, key=advice_order)
    assert [f.id for f in ordered] == [
        "sure-large",
        "sure-small",
        "doubtful-large",
        "doubtful-small",
        "nothing",
    ]
    assert change_first(ordered) == (ordered[0], 1)


class _TwoFindings:
    """A rule with a large saving within its error and a smaller one beyond it, on the
    trace's step (so their order among the findings is known)."""

    def __init__(self, *, both_unsure: bool = False) -> None:
        self.both_unsure = both_unsure

    @hookimpl
    def perfkit_register_advisors(self, register):
        def two(ctx):
            return [
                Finding(
                    id="unsure",
                    title="A saving the model cannot tell from nothing",
                    severity="",
                    saving_ns=0.9 * ctx.step_ns,
                    within_error=True,
                ),
                Finding(
                    id="sure",
                    title="A saving beyond its error",
                    severity="",
                    saving_ns=0.8 * ctx.step_ns,
                    within_error=self.both_unsure,
                ),
            ]

        register("two-findings", two, "two findings, one within its error")


@pytest.fixture
def rule(request):
    pm = plugins.get_plugin_manager()
    plugin = _TwoFindings(both_unsure=request.param)
    pm.register(plugin, name="two-findings")
    yield
    pm.unregister(plugin)


def _reports(tmp_path):
    trace = _tiny_trace(tmp_path)
    out = {}
    for fmt in ("text", "html", "json"):
        path = tmp_path / f"report.{fmt}"
        args = ["report", str(trace), "--format", fmt, "-o", str(path)]
        assert main(args) == 0
        out[fmt] = path.read_text()
    return out


@pytest.mark.parametrize("rule", [False], indirect=True)
def test_the_headline_puts_the_first_finding_beyond_its_error_first(rule, tmp_path):
    findings = perfkit_core.load(_tiny_trace(tmp_path)).advise(rules=["two-findings"])
    # the smaller saving the estimate stands behind comes first, the larger doubtful one after
    assert [(f.id, f.within_error) for f in findings] == [("sure", False), ("unsure", True)]
    reports = _reports(tmp_path)
    change = next(line for line in reports["text"].splitlines() if "Change first:" in line)
    assert "A saving beyond its error" in change and change.endswith("(advice 1 below)")
    assert "1. [high] A saving beyond its error" in reports["text"]
    doubt = f"2. [high{DOUBT_LABEL}] A saving the model cannot tell from nothing"
    assert doubt in reports["text"]
    page = reports["html"]
    assert '<a href="#finding-1">[high] A saving beyond its error</a>' in page
    assert 'id="finding-1"><b>1. [high] A saving beyond its error' in page
    assert f'id="finding-2"><b>{doubt}' in page
    data = json.loads(reports["json"])
    assert data["headline"]["finding"] == "sure"
    mine = [(f["id"], f["within_error"]) for f in data["advice"] if f["rule"] == "two-findings"]
    assert mine == [("sure", False), ("unsure", True)]


@pytest.mark.parametrize("rule", [True], indirect=True)
def test_no_finding_goes_first_when_every_one_is_within_its_error(rule, tmp_path):
    reports = _reports(tmp_path)
    assert "Change first:" not in reports["text"] and "Change first:" not in reports["html"]
    # the built-in rules' findings on this trace promise nothing (python-overhead's 0 ms)
    data = json.loads(reports["json"])
    assert all(f["within_error"] or f["saving_ns"] <= 0 for f in data["advice"]), data["advice"]
    assert any(line.endswith(WITHIN_ERROR_NOTE) for line in reports["text"].splitlines())
    assert str(markupsafe.escape(WITHIN_ERROR_NOTE)) in reports["html"]  # as Jinja escapes it
    assert data["headline"]["finding"] is None
    assert data["headline"]["note"] == WITHIN_ERROR_NOTE


def test_merged_findings_keep_one_verdict():
    from perfkit_core.advice.combine import merge_shared_remedies

    def finding(id_, saving, within, shared):
        return Finding(
            id=id_,
            title=id_,
            severity="",
            saving_ns=saving,
            remedy_key="compile",
            within_error=within,
            evidence={"saving_of": "compile"} if shared else {},
        )

    # one shared estimate: the lead's verdict
    [one] = merge_shared_remedies(
        [finding("a", 5.0, True, True), finding("b", 5.0, False, True)], 100.0
    )
    assert one.id == "a" and one.within_error
    # a sum of separate savings: within its error only when each part is
    [summed] = merge_shared_remedies(
        [finding("a", 5.0, True, False), finding("b", 4.0, False, False)], 100.0
    )
    assert not summed.within_error
    [both] = merge_shared_remedies(
        [finding("a", 5.0, True, False), finding("b", 4.0, True, False)], 100.0
    )
    assert both.within_error


def test_a_replay_s_verdict_replaces_the_models():
    from perfkit_core.advice.engine import measure_saving

    class Replay:
        def __init__(self, result):
            self.result = result

        @hookimpl
        def perfkit_measure_saving(self, finding, framework):
            return self.result

    ctx = SimpleNamespace(framework="a test framework", step_ns=10.0)
    for result, want in (
        ({"saving_ns": 1.0}, False),
        ({"saving_ns": 1.0, "within_error": True}, True),
        ({"saving_ns": 1.0, "within_error": "yes"}, False),  # only True counts
    ):
        pm = plugins.get_plugin_manager()
        plugin = Replay(result)
        pm.register(plugin, name="replay")
        try:
            found = Finding(id="x", title="x", severity="", saving_ns=5.0, within_error=not want)
            measure_saving(found, ctx, pm)
        finally:
            pm.unregister(plugin)
        assert found.saving_ns == 1.0 and found.within_error is want


def test_all_advice_names_the_savings_within_their_error():
    from perfkit_core.advice.combine import combined_saving

    def finding(id_, saving, within):
        return Finding(id=id_, title=id_, severity="", saving_ns=saving, within_error=within)

    sure, doubtful = finding("optimizer", 2.0, False), finding("python-overhead", 3.0, True)
    saving, how = combined_saving([sure, doubtful], 100.0)
    assert saving == pytest.approx(5.0)  # still in the sum: the sentence says which is doubtful
    assert how.endswith("; the python-overhead saving in it is within its estimate's error")
    _, how = combined_saving([sure, doubtful, finding("small-ops", 1.0, True)], 100.0)
    assert how.endswith(
        "; the python-overhead, small-ops savings in it are within their estimates' error"
    )
    _, how = combined_saving([sure, finding("nothing", 0.0, True)], 100.0)
    assert "error" not in how  # a doubtful finding that saves nothing adds nothing to doubt
