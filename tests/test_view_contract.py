"""The views' schema is a contract: every column a view returns is described by hand in
``docs/gen/view_text.py`` (the reference pages are generated from it, never it from the code),
its version is in every JSON report, and a column renamed in this release still reads under its
old name with a warning that names the new one (``perfkit_core.views.contract``)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.cli import main
from perfkit_core.events.schema import SCHEMA_VERSION
from perfkit_core.views import contract
from perfkit_core.views.contract import MOVED, RENAMED, VIEWS_SCHEMA_VERSION, with_old_names

DOCS = Path(__file__).resolve().parents[1] / "docs"
TORCH_CPU = Path(__file__).resolve().parent / "data" / "torch_cpu" / "mlp_adam_cpu.pt.trace.json.gz"

sys.path.insert(0, str(DOCS))
try:
    from gen import views as gen_views
    from gen.view_text import VIEW_COLUMNS
finally:
    sys.path.remove(str(DOCS))


def test_every_view_returns_exactly_the_columns_its_contract_describes():
    """On the synthetic GPU run the reference is built from, with each view's variants: a
    column returned but not described, or described but never returned, fails."""
    views = gen_views.own_views()
    assert len(views) >= 20
    for name in views:
        rows = gen_views.column_rows(name)  # raises DocsError on a mismatch
        assert rows, name
        assert {r[0].strip("`") for r in rows} == set(VIEW_COLUMNS[name]), name


@pytest.mark.parametrize("source", ["a100_rank3", "torch_cpu"])
def test_real_runs_return_only_described_columns(source):
    path = TORCH_CPU if source == "torch_cpu" else shared_trace(source)
    run = perfkit_core.load(path)
    for name in gen_views.own_views():
        try:
            frame = run.summary(name)
        except (KeyError, ValueError):  # a view this run cannot give (no peaks, one rank)
            continue
        described = set(VIEW_COLUMNS[name])
        returned = {gen_views.generic_column(c) for c in frame.columns}
        assert returned <= described, (name, sorted(returned - described))


def test_the_contract_check_can_fail(monkeypatch):
    monkeypatch.setitem(
        VIEW_COLUMNS, "steps", {k: v for k, v in VIEW_COLUMNS["steps"].items() if k != "data_ns"}
    )
    with pytest.raises(gen_views.DocsError, match="data_ns"):
        gen_views.column_rows("steps")


def test_json_reports_say_which_schema_they_are_written_in(capsys):
    path = shared_trace("v100_rank1")
    assert main(["report", str(path), "--format", "json", "--views", "steps", "--no-advice"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["schema_version"] == {"events": SCHEMA_VERSION, "views": VIEWS_SCHEMA_VERSION}
    assert main(["compare", str(path), str(path), "--format", "json", "--views", "steps"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["schema_version"]["views"] == VIEWS_SCHEMA_VERSION


def test_a_renamed_column_reads_under_its_old_name_with_a_warning(monkeypatch):
    frame = pd.DataFrame({"name": ["a"], "new_ns": [1.0]})
    frame.attrs["note"] = "kept"
    monkeypatch.setitem(RENAMED, "example", {"old_ns": "new_ns"})
    wrapped = with_old_names(frame, "example")
    assert wrapped.attrs == {"note": "kept"}
    with pytest.warns(DeprecationWarning, match="column 'old_ns' is now 'new_ns'"):
        assert wrapped["old_ns"].tolist() == [1.0]
    with pytest.warns(DeprecationWarning, match="'new_ns'"):
        assert wrapped.old_ns.tolist() == [1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wrapped["new_ns"].tolist() == [1.0]  # the new name: no warning
        assert type(wrapped[["name"]]) is pd.DataFrame  # what it makes is a plain frame
    with pytest.raises(KeyError):
        wrapped["never_existed"]
    # compared with a plain frame either way round, it is the plain frame it holds
    pd.testing.assert_frame_equal(frame, wrapped)
    pd.testing.assert_frame_equal(wrapped, frame)
    assert with_old_names(frame, "other") is frame


@pytest.mark.parametrize(
    ("view", "old", "new"), [(v, o, n) for v, m in RENAMED.items() for o, n in m.items()]
)
def test_each_renamed_column_of_the_release_reads_under_its_old_name(view, old, new):
    run = perfkit_core.load(shared_trace("resnet_nw0"))
    frame = run.summary(view)
    with pytest.warns(DeprecationWarning, match=f"'{old}' is now '{new}'"):
        values = frame[old]
    assert values.equals(frame[new])
    assert old in (DOCS.parent / "CHANGELOG.md").read_text()


def test_the_contract_names_its_version_in_the_changelog():
    text = (DOCS.parent / "CHANGELOG.md").read_text()
    assert f"views schema {VIEWS_SCHEMA_VERSION}" in text
    assert contract.__doc__ and "CHANGELOG.md" in contract.__doc__


def test_the_model_views_old_columns_read_from_model_spans_on_its_rows():
    """0.1's model view (Paddle's span-summing Model Summary) is the model_spans view: its
    columns, asked of the model view, are model_spans' values on the model view's rows."""
    run = perfkit_core.load(shared_trace("resnet_nw0"))
    model, spans = run.summary("model"), run.summary("model_spans")
    other, columns, rows = MOVED["model"]
    assert other == "model_spans" and set(columns) <= set(spans.columns)
    held = dict(zip((rows.get(n, n) for n in spans["name"]), spans["cpu_total_ns"], strict=True))
    with pytest.warns(DeprecationWarning, match="now the model_spans view's"):
        values = model["cpu_total_ns"]
    assert values.tolist() == [held[n] for n in model["name"]]
    assert values.index.equals(model.index)
    text = (DOCS.parent / "CHANGELOG.md").read_text()
    assert "model_spans" in text and "cpu_total_ns" in text
