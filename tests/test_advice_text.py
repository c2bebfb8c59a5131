"""Advice a reader takes in at a glance, with the derivation one flag (or one click) away.

Each finding's default text is its short form (``perfkit_core.report.finding_summary``): the
title, the saving with how sure perfkit is of it, the evidence that carries the figure and the
remedy; ``--explain`` prints it whole. The fixtures in tests/data/advice_text are the advice and
verdicts perfkit printed before the short default: every figure in them must still be printed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from test_reports import CHROMIUM_FLAGS, chromium

from conftest import shared_trace
from perfkit_core.cli import main
from perfkit_core.comparison.verdict import LEAD_WORDS
from perfkit_core.report.finding_summary import split_remedy, summarize

DATA = Path(__file__).resolve().parent / "data" / "advice_text"
#: Fixture name -> what ``perfkit advise`` reads: a shared trace's key or a folder here.
ADVISED = {
    "resnet_nw0": "resnet_nw0",
    "resnet_nw4": "resnet_nw4",
    "a100_rank3": "a100_rank3",
    "v100_rank1": "v100_rank1",
    "demo_torch": "demo/torch",
    "demo_paddle": "demo/paddle",
}
#: Fixture name -> the runs ``perfkit compare`` compares, and their labels.
COMPARED = {
    "resnet_nw0_nw4": (["resnet_nw0", "resnet_nw4"], None),
    "a100_v100": (["a100_rank3", "v100_rank1"], None),
    "demo": (["demo/torch", "demo/paddle"], "torch,paddle"),
}
#: The targets of the short default on the real GPU traces.
MEAN_WORDS, MAX_WORDS = 100, 150
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def source(key: str) -> Path:
    return DATA / key if "/" in key else shared_trace(key)


def advise(capsys: pytest.CaptureFixture[str], key: str, *flags: str) -> str:
    assert main(["advise", str(source(key)), *flags]) == 0
    return capsys.readouterr().out


def findings_of(text: str) -> list[str]:
    """The blocks of an advice text, one per finding."""
    body = text.split("\n", 1)[1] if "\n" in text else ""
    return [b for b in re.split(r"\n(?=\d+\. \[)", body.strip()) if b.strip()]


def words(block: str) -> int:
    """A finding's words: whitespace-separated tokens, the remedy's code lines not counted
    (printed indented by five spaces, the code four more)."""
    return sum(len(line.split()) for line in block.splitlines() if not line.startswith(" " * 9))


def figures(text: str) -> set[str]:
    """Every number a text prints."""
    return set(NUMBER.findall(text))


@pytest.mark.parametrize("key", ["resnet_nw0", "resnet_nw4", "a100_rank3", "v100_rank1"])
def test_the_default_advice_of_a_gpu_trace_is_short(capsys, key):
    blocks = findings_of(advise(capsys, key))
    counts = [words(b) for b in blocks]
    assert blocks
    assert sum(counts) / len(counts) <= MEAN_WORDS, counts
    assert max(counts) <= MAX_WORDS, counts
    for block in blocks:
        lines = block.splitlines()
        assert lines[1].lstrip().startswith("Saves "), block
        evidence = [line for line in lines if line.startswith("   - ")]
        assert 1 <= len(evidence) <= 2, block
        assert "How:" not in block


@pytest.mark.parametrize("name", sorted(ADVISED))
def test_explain_prints_every_figure_and_word_of_the_advice_before(capsys, name):
    before = (DATA / f"{name}.advise.txt").read_text()
    explained = advise(capsys, ADVISED[name], "--explain")
    old, new = findings_of(before), findings_of(explained)
    assert len(new) == len(old)
    for was, now in zip(old, new, strict=True):
        assert words(now) >= words(was), now
        assert figures(was) <= figures(now), sorted(figures(was) - figures(now))
    short = advise(capsys, ADVISED[name])
    # the short form's figures are the whole's, never a second version of them
    assert figures(short) <= figures(explained) | {"2", "3", "4", "5", "6", "7"}


@pytest.mark.parametrize("name", sorted(COMPARED))
def test_the_verdict_leads_with_one_short_sentence_and_loses_no_figure(capsys, name):
    keys, labels = COMPARED[name]
    argv = ["compare", *(str(source(k)) for k in keys), "--views", "steps"]
    assert main([*argv, *(["--labels", labels] if labels else [])]) == 0
    text = capsys.readouterr().out
    before = (DATA / f"{name}.compare.txt").read_text()
    verdict = lambda t: t.split("\n\nComparing ", 1)[0]  # noqa: E731
    assert figures(verdict(before)) <= figures(verdict(text))
    assert main([*argv, *(["--labels", labels] if labels else []), "--format", "json"]) == 0
    lead = json.loads(capsys.readouterr().out)["verdict"]["lines"][0]
    assert len(lead.split()) <= LEAD_WORDS, lead
    assert ("faster" in lead or "slower" in lead or "same time" in lead) and "cause" in lead


def test_the_json_carries_the_short_form_beside_the_whole(capsys):
    assert main(["advise", str(shared_trace("a100_rank3")), "--format", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)
    assert findings
    for f in findings:
        summary = f["summary"]
        assert summary["evidence"] + summary["more_evidence"] == f["details"]
        assert summary["how"] == f["estimate"]
        assert summary["saving"].startswith(f"{f['saving_ns'] / 1e6:.3f} ms per step (")
        for line in summary["remedy"].splitlines():
            if line.startswith("    "):  # code is never cut
                assert line in f["remedy"]


def test_the_short_saving_line_states_the_figure_of_the_whole(capsys):
    short = advise(capsys, "resnet_nw0")
    whole = advise(capsys, "resnet_nw0", "--explain")
    saves = re.findall(r"Saves (.+?) per step \((.+?)\)", short)
    estimated = re.findall(r"Estimated saving: (.+?) per step \((.+?)\)", whole)
    assert saves and saves == estimated


def test_caveats_and_alternatives_are_cut_and_kept():
    remedy = (
        "Load batches in worker processes:\n"
        "    loader = DataLoader(dataset, num_workers=1)\n"
        "and copy with batch.to(device).\n"
        "(Under the default strategy the worker's\n"
        "thread waits (for the GIL).)"
    )
    kept, caveats = split_remedy(remedy)
    assert kept == "\n".join(remedy.splitlines()[:3])
    assert caveats == ["(Under the default strategy the worker's thread waits (for the GIL).)"]


def test_a_finding_that_promises_nothing_says_so_in_words(capsys):
    text = advise(capsys, "demo/paddle")
    for block in findings_of(text):
        if "not expected to pay here" in block:
            assert "Saves no time here" in block and "0.000 ms" not in block


def test_a_saving_of_nothing_within_error_still_says_its_estimate_says_why():
    """A finding whose saving is zero is within any error: its short line points at the
    estimate's reason, whatever ``within_error`` says; a positive saving within error says
    it may save nothing."""
    from perfkit_core.advice.finding import Finding
    from perfkit_core.report.finding_summary import sureness

    nothing = Finding(id="python-overhead", title="t", severity="info", saving_ns=0.0)
    nothing.within_error = True
    assert sureness(nothing) == "its estimate says why"
    doubtful = Finding(id="python-overhead", title="t", severity="info", saving_ns=1e5)
    doubtful.within_error = True
    assert sureness(doubtful) == "within its estimate's error: it may save nothing"
    risk = Finding(id="x", title="t", severity="info", saving_ns=0.0, saves_time=False)
    risk.within_error = True
    assert sureness(risk) == "it is about a risk, not time"


def test_the_report_folds_the_rest_and_one_click_opens_it(tmp_path):
    out = tmp_path / "report.html"
    assert (
        main(["report", str(shared_trace("a100_rank3")), "--format", "html", "-o", str(out)]) == 0
    )
    page = out.read_text()
    assert page.count('<details class="more">') >= 1
    assert "How it is estimated:" in page.split('<details class="more">', 1)[1]
    # click every fold's summary in Chromium: each opens and shows its derivation
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.replace(
            "</body>",
            "<script>const folds = [...document.querySelectorAll('details.more')];"
            "const shut = folds.map(d => d.querySelector('.how').checkVisibility());"
            "folds.forEach(d => d.querySelector('summary').click());"
            "document.body.dataset.probe = JSON.stringify({n: folds.length, shut: shut,"
            " open: folds.map(d => d.open), shown: folds.map(d =>"
            " d.querySelector('.how').checkVisibility())});</script></body>",
        )
    )
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,1000",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'data-probe="([^"]+)"', proc.stdout)
    assert found, proc.stdout[-500:]
    probe_data = json.loads(found.group(1).replace("&quot;", '"'))
    assert probe_data["n"] >= 1
    assert not any(probe_data["shut"])  # folded: not shown
    assert all(probe_data["open"]) and all(probe_data["shown"])


def test_summarize_keeps_the_first_evidence_sentence_always(capsys):
    import perfkit_core

    run = perfkit_core.load(shared_trace("a100_rank3"))
    for finding in run.advise():
        short = summarize(finding)
        assert short.evidence == finding.details[: len(short.evidence)]
        assert short.evidence or not finding.details
