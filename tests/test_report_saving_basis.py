"""A saving stated on the step timed without the profiler is shown as a share of that step,
named so, in the headline, the advice and the combined saving; and the headline shows that
step (the step timer's median unprofiled step), so the reader sees the share's denominator."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from perfkit_core.report import build_report, render
from perfkit_core.report.format import UNPROFILED_STEP
from perfkit_core.report.headline import UNPROFILED_STEP_ITEM
from tests.test_advice_compile import _chain_run


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return _chain_run(tmp_path_factory.mktemp("basis"))


def test_savings_are_shares_of_the_step_they_were_stated_on(chain):
    run = chain
    unprofiled = float(np.median(run.meta["step_timer"]["unprofiled_ns"]))
    findings = run.advise()
    stated = [f for f in findings if f.evidence.get("basis") == "unprofiled"]
    assert stated, [f.rule for f in findings]
    model = build_report(run)
    text = render(model, "text")
    explained = render(model, "text", explain=True)
    lines = text.splitlines()
    headline = next(line for line in lines if line.startswith(UNPROFILED_STEP_ITEM))
    assert f"{unprofiled / 1e6:.3f} ms" in headline
    for finding in stated:
        assert finding.evidence["basis_step_ns"] == pytest.approx(unprofiled)
        share = 100.0 * finding.saving_ns / unprofiled
        said = f"{finding.saving_ns / 1e6:.3f} ms per step ({share:.1f}% of {UNPROFILED_STEP})"
        assert f"Estimated saving: {said} ({finding.id})" in explained
        if finding.saving_ns > 0:  # the short form's line
            assert f"Saves {said}: modelled on the step without the profiler ({finding.id})" in text
    change_first = next(line for line in lines if line.startswith("Change first:"))
    top = findings[0]
    if top.evidence.get("basis") == "unprofiled":
        assert f"% of {UNPROFILED_STEP})" in change_first
    document = json.loads(render(build_report(run), "json"))
    items = {i["label"]: i["value"] for i in document["headline"]["items"]}
    assert items[UNPROFILED_STEP_ITEM] == pytest.approx(unprofiled)
