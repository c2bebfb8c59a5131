"""One figure, one meaning: a quantity a report shows in several places (the headline, the
tables, the advice; text, JSON and HTML) has one value and one unit everywhere, and every
percentage names what it is a percentage of.

Checked on real runs: a torch CPU run and a Paddle CPU run profiled here, the V100 and A100
traces, and a comparison of the two CPU runs.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from typing import Any

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.report import build_comparison_report, build_report, render
from perfkit_core.report.format import format_value, header_label, per_step_value

#: A percentage's header must say what it is a percentage of.
DENOMINATOR = re.compile(r"% of ")


@pytest.fixture(scope="module", params=["torch_cpu", "paddle_cpu", "resnet_nw0", "a100_rank3"])
def report(request, torch_profile, paddle_profile) -> dict[str, Any]:
    runs = {
        "torch_cpu": lambda: perfkit_core.load(torch_profile.runs[0]),
        "paddle_cpu": lambda: perfkit_core.load(paddle_profile.runs[0]),
    }
    run = (
        runs[request.param]()
        if request.param in runs
        else perfkit_core.load(shared_trace(request.param))
    )
    model = build_report(run, top=30)
    return {
        "name": request.param,
        "run": run,
        "model": model,
        "json": json.loads(render(model, "json")),
        "text": render(model, "text"),
        "html": html_lib.unescape(render(model, "html")),
    }


def _rows(data: dict[str, Any], table: str) -> dict[str, dict[str, Any]]:
    return {str(r["name"]): r for r in data["tables"][table]["rows"]}


def _headline(data: dict[str, Any]) -> dict[str, Any]:
    return {item["label"]: item["value"] for item in data["headline"]["items"]}


def _ms(ns: float) -> str:
    return format_value(ns, "time", "ms")


def test_the_step_is_one_figure(report):
    """The mean step: headline, model table, benchmark's batch cost, the steps' mean."""
    data, run = report["json"], report["run"]
    step = _headline(data)["Step time (mean)"]
    assert _rows(data, "model")["step"]["per_step_ns"] == pytest.approx(step)
    assert _rows(data, "benchmark")["batch_cost"]["avg"] == pytest.approx(step)
    assert run.summary("steps")["dur_ns"].mean() == pytest.approx(step)
    assert data["tables"]["benchmark"]["row_units"][:2] == ["time", "time"]
    # Throughput is steps over their time: the benchmark's ips.
    throughput = _headline(data)["Throughput (steps/s)"]
    assert throughput == pytest.approx(1e9 / step)
    assert _rows(data, "benchmark")["ips"]["avg"] == pytest.approx(throughput)
    # Each form writes it the same way, in ms, in the headline and in the tables.
    text = _ms(step)
    for form in ("text", "html"):
        assert report[form].count(text) >= 3, (form, text)  # headline, model, benchmark
    # Every share of the step on the page divides by this step.
    for finding in data["advice"]:
        assert finding["evidence"]["step_time_ns"] == pytest.approx(step)


def test_each_phase_is_one_figure(report):
    """A phase: the headline's bar, the model table, the phases table's mean, and the family
    table for data and the optimizer (the same slices of the step)."""
    data, run = report["json"], report["run"]
    model = _rows(data, "model")
    step = model["step"]["per_step_ns"]
    phases = {p["name"]: p for p in data["headline"]["phases"]}
    per_step = run.summary("phases")
    family = {r["name"]: r for r in run.summary("family").to_dict("records")}
    assert sum(r["per_step_ns"] for n, r in model.items() if n != "step") == pytest.approx(step)
    for name in ("data", "forward", "backward", "optimizer", "other"):
        value = model[name]["per_step_ns"] if name in model else 0.0
        assert per_step[f"{name}_ns"].mean() == pytest.approx(value), name
        if name in phases:
            assert phases[name]["per_step_ns"] == pytest.approx(value), name
            assert phases[name]["share_pct"] == pytest.approx(model[name]["step_pct"]), name
            shown = f"{name} {format_value(value / step * 100, 'pct')}% ({_ms(value)} ms)"
            assert shown in report["text"], shown
        if name in ("data", "optimizer") and value:
            assert family[name]["per_step_ns"] == pytest.approx(value), name
            assert family[name]["step_pct"] == pytest.approx(model[name]["step_pct"]), name
    # Waiting for data is also the benchmark's reader cost and the steps' data column.
    data_ns = model["data"]["per_step_ns"] if "data" in model else 0.0
    assert _rows(data, "benchmark")["reader_cost"]["avg"] == pytest.approx(data_ns)
    assert run.summary("steps")["data_ns"].mean() == pytest.approx(data_ns)


def test_each_saving_is_one_figure(report):
    """A finding's saving: per step, with its share of the same step, the same text in the
    headline and in the finding, in text and HTML; the input-pipeline saving is recomputed
    from its data phase, the rest of the step and the free cores; the combined saving is below the plain sum when host and device savings mix."""
    data = report["json"]
    step = _headline(data).get("Step time (mean)")
    findings = data["advice"]
    if not findings:
        pytest.skip(f"{report['name']}: no finding")
    for finding in findings:
        if not finding["saving_ns"] > 0:  # the short form says so in words, within error or not
            why = "its estimate says why" if finding.get("saves_time", True) else "it is about a risk, not time"
            said = f"Saves no time here: {why} ({finding['id']})."
            assert said in report["text"] and said in report["html"], finding["id"]
            continue
        text = per_step_value(finding["saving_ns"], step, "ms")
        assert text in report["text"] and text in report["html"], (finding["id"], text)
    # the first finding that promises a saving beyond its estimate's error
    top = next((f for f in findings if f["saving_ns"] > 0 and not f["within_error"]), None)
    assert data["headline"]["finding"] == (top["id"] if top else None)
    if top is not None:
        change = next(line for line in report["text"].splitlines() if "Change first:" in line)
        assert per_step_value(top["saving_ns"], step, "ms") in change
        assert change.endswith(f"(advice {findings.index(top) + 1} below)")
    loading = [f for f in findings if f["rule"] == "input-pipeline"]
    if loading:
        from perfkit_core.advice.loader import loader_saving

        ev = loading[0]["evidence"]
        assert ev["data_per_step_ns"] == pytest.approx(_rows(data, "model")["data"]["per_step_ns"])
        # receiving costs the training side the hand-over, unless the step timer timed what
        # it adds to a busy step on the machine that trained (the run's record, below)
        record = report["run"].meta.get("step_timer") or {}
        assert ev["loader_receive_ns"] == record.get("loader_receive_ns", ev["loader_batch_ns"])
        expected = loader_saving(
            ev["loading_per_step_ns"],
            ev["rest_per_step_ns"],
            ev["free_cores"],
            ev["loader_batch_ns"],
            ev["contention_per_step_ns"],
            ev["loader_receive_ns"],
            # how much a worker and the step slow each other, where the step timer timed it
            (record.get("training_slowdown", 1.0), record.get("loading_slowdown", 1.0)),
        )
        assert (ev["training_slowdown"], ev["loading_slowdown"]) == (
            record.get("training_slowdown", 1.0),
            record.get("loading_slowdown", 1.0),
        )
        assert loading[0]["saving_ns"] == pytest.approx(expected)
    combined = data["headline"]["combined"]
    if combined is not None:
        plain = sum(f["saving_ns"] for f in findings)
        assert combined["saving_ns"] <= plain + 1e-6
        assert combined["saving_ns"] <= step
        kinds = {f["acts_on"] for f in findings}
        if len(kinds) > 1:
            assert combined["saving_ns"] < plain
    # No two findings prescribe the same remedy.
    keys = [f["remedy_key"] for f in findings if f["remedy_key"]]
    assert len(keys) == len(set(keys))


def test_every_percentage_names_its_denominator(report):
    for table in report["model"].tables:
        for column in table.columns:
            if column.unit == "pct":
                label = header_label(column.label, column.unit, "ms")
                assert DENOMINATOR.search(label), (table.id, column.key, label)
                # The page shows it whole (the text form may wrap it onto lines).
                assert label in report["html"], (table.id, label)


def test_every_time_is_per_step_or_says_what_it_covers(report):
    """A time column either is a time per step (the report's rule) or says what it covers in
    its header: a total over the steps, or per call."""
    per_step_views = {"model", "phases", "family", "overview", "breakdown", "device", "steps"}
    for table in report["model"].tables:
        for column in table.columns:
            if column.unit != "time":
                continue
            label = column.label.lower()
            if column.key == "offset_ns":
                assert label.startswith("start")  # a point in time, not a duration
                continue
            says = any(word in label for word in ("step", "/call", "per call", "slice"))
            assert says or table.id in per_step_views, (table.id, column.key, column.label)


def test_gpu_figures_of_a_gpu_run_agree_across_views(report):
    """GPU time: the model view's step GPU time is every kernel the steps launched; the
    family view's GPU time adds up to the same; the device view's kernel-busy time is never
    more than it (overlapping kernels are merged there)."""
    run = report["run"]
    if not (run.events["stream"].to_numpy() >= 0).any():
        pytest.skip("a CPU run")
    model = run.summary("model").set_index("name")
    family = run.summary("family")
    gpu = model.loc["step", "gpu_per_step_ns"]
    assert family["gpu_per_step_ns"].sum() == pytest.approx(gpu, rel=1e-9)
    device = run.summary("device")
    kernel_busy = device[device["name"].str.startswith("GPU")]["kernel_busy_per_step_ns"].sum()
    assert kernel_busy <= gpu * (1 + 1e-9)


def test_a_comparison_and_its_runs_reports_agree(torch_profile, paddle_profile):
    """The comparison of two runs shows each run's step, phases and families with the values
    its own report shows, and its percentages name their denominators."""
    torch_run = perfkit_core.load(torch_profile.runs[0])
    paddle_run = perfkit_core.load(paddle_profile.runs[0])
    comparison = perfkit_core.compare(torch_run, paddle_run, labels=["torch", "paddle"])
    pair = build_comparison_report(comparison)
    for table in pair.tables:
        for column in table.columns:
            if column.unit == "pct":
                label = header_label(column.label, column.unit, "ms")
                assert DENOMINATOR.search(label), (table.id, column.key, label)
    phases = comparison.summary("phases").set_index("name")
    family = comparison.summary("family").set_index("name")
    for label, run in (("torch", torch_run), ("paddle", paddle_run)):
        model = run.summary("model").set_index("name")
        assert phases.loc["step", label] == pytest.approx(model.loc["step", "per_step_ns"])
        for phase in ("data", "forward", "backward", "optimizer", "other"):
            if phase in phases.index and phase in model.index:
                assert phases.loc[phase, label] == pytest.approx(model.loc[phase, "per_step_ns"]), (
                    label,
                    phase,
                )
        own = run.summary("family").set_index("name")["per_step_ns"]
        for name, value in own.items():
            if name in family.index:
                assert family.loc[name, label] == pytest.approx(value), (label, name)
    # The verdict's sentence says the factor its JSON holds.
    verdict = comparison.verdict()
    factor, _, _ = verdict.headline.factor
    assert f"{factor:.2f}" in verdict.sentence()
    data = json.loads(render(pair, "json"))["verdict"]
    head = data[data["headline"]]
    assert head["factor"] == pytest.approx(factor) and head["direction"] in verdict.sentence()
