"""One report model, three forms: every number the JSON form holds appears in the same row of
the text form and of the HTML form, for run reports and comparisons of real runs."""

from __future__ import annotations

import html as html_lib
import json
import re
from typing import Any

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.report import build_comparison_report, build_report, render
from perfkit_core.report.format import format_value

_TR = re.compile(r"<tr>(.*?)</tr>", re.S)
_TD = re.compile(r"<td[^>]*>(.*?)</td>", re.S)


def html_rows(page: str, table_id: str) -> list[list[str]]:
    """The cell texts of each body row of the HTML table ``table-<id>``."""
    found = re.search(rf'<table class="data[^"]*" id="table-{table_id}">', page)
    assert found, table_id
    start = found.start()
    body = page[page.index("<tbody>", start) : page.index("</tbody>", start)]
    return [
        [html_lib.unescape(c).replace("\u2003", "") for c in _TD.findall(row)]
        for row in _TR.findall(body)
    ]


def text_rows(text: str, title: str) -> list[list[str]]:
    """The cells of each row of the text table under the banner holding ``title``, cut at the
    column extents its rule line (``-----  ---``) marks."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {title} " in line and line.startswith("-"))
    rows: list[str] = []
    rule = ""
    rules = 0
    for line in lines[start + 1 :]:
        if line.startswith("--") and set(line) <= {"-", " "}:
            rules += 1
            rule = line
            if rules == 3:
                break
            continue
        if rules == 2:
            rows.append(line)
    extents = [m.span() for m in re.finditer(r"-+", rule)]
    return [[line[a:b].strip() for a, b in extents] for line in rows]


def numbers_of(
    table: dict[str, Any], row: dict[str, Any], time_unit: str, row_unit: str = ""
) -> list[str]:
    """The numbers of ``row`` as a reader sees them: in their column's unit, or in the row's
    own unit where the table's rows differ in unit (the benchmark's costs and rates)."""
    return [
        format_value(
            row[c["key"]],
            row_unit if row_unit and c["unit"] in ("number", "count") else c["unit"],
            time_unit,
        )
        for c in table["columns"]
        if c["unit"] != "text" and not c.get("repeats_name")
    ]


def check_forms(model: Any) -> int:
    """Assert every JSON number is in the text and HTML forms of ``model``; return how many."""
    data = json.loads(render(model, "json"))
    text = render(model, "text")
    page = render(model, "html")
    unit = data["time_unit"]
    checked = 0
    assert data["tables"], "the report holds no tables"
    for table_id, table in data["tables"].items():
        lines = text_rows(text, table["title"])
        cells = html_rows(page, table_id)
        assert len(lines) == len(table["rows"]) == len(cells), table_id
        row_units = table.get("row_units") or [""] * len(table["rows"])
        for row, row_unit, text_cells, html_cells in zip(
            table["rows"], row_units, lines, cells, strict=True
        ):
            wanted = numbers_of(table, row, unit, row_unit)
            for form, got in (("text", text_cells), ("html", html_cells)):
                shown = [c for c in table["columns"] if not c.get("repeats_name")]
                numeric = [cell for cell, c in zip(got, shown, strict=True) if c["unit"] != "text"]
                assert numeric == wanted, (form, table_id, got, wanted)
            checked += len(wanted)
    for item in data.get("header", []):
        value = format_value(item["value"], item["unit"], unit)
        assert value in text and html_lib.escape(value) in page, item
        checked += 1
    for finding in data.get("advice", []):
        saving = f"{finding['saving_ns'] / {'ms': 1e6, 'us': 1e3, 's': 1e9, 'ns': 1}[unit]:.3f}"
        assert saving in text and saving in page, finding["id"]
        checked += 1
    if data.get("gate"):
        assert data["gate"]["message"] in text and html_lib.escape(data["gate"]["message"]) in page
    verdict = data.get("verdict")
    if verdict:
        shown = html_lib.unescape(page)
        # The text form wraps long verdict lines at 160 columns: compare the words.
        flat = " ".join(text.split())
        for line in verdict["lines"]:
            assert " ".join(line.split()) in flat and line in shown, line
            checked += 1
        est = verdict[verdict["headline"]]
        head = verdict["lines"][0]
        ratio = est["ratio"] if est["ratio"] >= 1 or not est["significant"] else 1 / est["ratio"]
        assert f"{ratio:.2f}" in head, (ratio, head)
        # the biggest cause leads; every cause is on the op-family line after it
        causes = verdict["causes"].get("family", [])
        family = next((line for line in verdict["lines"] if line.startswith("by op family")), "")
        for cause in causes:
            assert f"{cause['delta_ns'] / TIME[unit]:+.3f} {unit}" in family, cause
        if causes:
            assert f"{causes[0]['delta_ns'] / TIME[unit]:+.3f} {unit}" in head, causes[0]
    return checked


TIME = {"ms": 1e6, "us": 1e3, "s": 1e9, "ns": 1.0}


def test_the_row_check_can_fail() -> None:
    table = {"columns": [{"key": "name", "unit": "text"}, {"key": "t", "unit": "time"}]}
    assert numbers_of(table, {"name": "x", "t": 1_500_000}, "ms") == ["1.500"]
    assert numbers_of(table, {"name": "x", "t": 1_500_000}, "us") == ["1500.000"]


@pytest.mark.parametrize("trace", ["resnet_nw0", "a100_rank3", "rank_non_gpu"])
def test_real_trace_reports_agree_in_every_form(trace: str) -> None:
    run = perfkit_core.load(shared_trace(trace))
    assert check_forms(build_report(run, top=20)) > 100


def test_torch_cpu_run_report_agrees_in_every_form(torch_profile: Any) -> None:
    run = perfkit_core.load(torch_profile.runs[0])
    model = build_report(run, top=10, time_unit="us", options={"operator": {"op_detail": True}})
    assert check_forms(model) > 50


def test_paddle_cpu_run_report_agrees_in_every_form(paddle_profile: Any) -> None:
    run = perfkit_core.load(paddle_profile.runs[0])
    model = build_report(run, top=10, options={"operator": {"op_detail": True}})
    assert check_forms(model) > 50


def test_comparison_agrees_in_every_form(torch_profile: Any, paddle_profile: Any) -> None:
    torch_run = perfkit_core.load(torch_profile.runs[0])
    paddle_run = perfkit_core.load(paddle_profile.runs[0])
    comparison = perfkit_core.compare(torch_run, paddle_run, labels=["torch", "paddle"])
    model = build_comparison_report(comparison, gate=comparison.gate(5.0))
    assert check_forms(model) > 20
    assert model.verdict_lines and model.verdict is comparison.verdict()


def test_model_pair_comparison_agrees_in_every_form(model_pairs: Any) -> None:
    comparison = perfkit_core.compare(*model_pairs("transformer"), labels=["torch", "paddle"])
    model = build_comparison_report(comparison, time_unit="us", gate=comparison.gate(10.0))
    assert check_forms(model) > 100


def test_difference_chart_shows_longer_in_red_and_shorter_in_green() -> None:
    """The comparison's difference chart: each family row is drawn once, in the "longer"
    (red) series when the later run takes longer and in "shorter" (green) otherwise, so the
    legend names both colours; the values are the family table's deltas."""
    from perfkit_core.report.html import _tables

    a = perfkit_core.load(shared_trace("resnet_nw0"))
    b = perfkit_core.load(shared_trace("resnet_nw4"))
    model = build_comparison_report(perfkit_core.compare(a, b, labels=["nw0", "nw4"]))
    _, specs = _tables(model.tables, model.charts, model.time_unit)
    (spec,) = [s for s in specs if s["id"] == "chart-difference"]
    longer, shorter = spec["config"]["data"]["datasets"]
    assert (longer["label"], longer["backgroundColor"]) == ("longer in nw4", "#c0392b")
    assert (shorter["label"], shorter["backgroundColor"]) == ("shorter in nw4", "#27ae60")
    assert spec["config"]["options"]["plugins"]["legend"]["display"]
    family = next(t for t in model.tables if t.id == "family")
    delta = [c.key for c in family.columns].index("delta_ns")
    name = [c.key for c in family.columns].index("name")
    deltas = [r[delta] / 1e6 for r in family.rows if r[name] != "step"]
    drawn = [
        x if x is not None else y for x, y in zip(longer["data"], shorter["data"], strict=True)
    ]
    assert all(
        (x is None) != (y is None) for x, y in zip(longer["data"], shorter["data"], strict=True)
    )
    assert drawn == pytest.approx(deltas, abs=1e-6)
    assert any(v is not None for v in longer["data"]) and any(
        v is not None for v in shorter["data"]
    )
