"""The generated reference docs are current and cover the code; the examples in them work."""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from perfkit_core import hookspecs, schema

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs"
GEN_DOCS = DOCS / "gen_docs.py"


@pytest.fixture(scope="module")
def gen_docs() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("perfkit_docs_gen_docs", GEN_DOCS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hook_specs() -> dict[str, Any]:
    return {
        name: fn
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("perfkit_")
    }


# (a) the generated files are current ---------------------------------------------------------


def test_generated_docs_are_current(gen_docs: types.ModuleType) -> None:
    stale = gen_docs.stale_files()
    assert not stale, (
        f"stale generated docs: {[p.name for p in stale]}; run `python docs/gen_docs.py`"
    )


def test_check_mode_command_line() -> None:
    result = subprocess.run(
        [sys.executable, str(GEN_DOCS), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_mode_names_stale_files(
    gen_docs: types.ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(gen_docs, "SCHEMA_MD", tmp_path / "schema.md")
    monkeypatch.setattr(gen_docs, "HOOKS_MD", tmp_path / "hooks.md")
    assert gen_docs.main(["--check"]) == 1  # missing files are stale
    assert gen_docs.main([]) == 0
    assert gen_docs.main(["--check"]) == 0
    (tmp_path / "hooks.md").write_text("edited by hand\n", encoding="utf-8")
    capsys.readouterr()
    assert gen_docs.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "hooks.md" in out
    assert "schema.md" not in out


# (b) schema.md covers every column and kind ----------------------------------------------------


def test_schema_doc_lists_every_column_kind_and_meta_key() -> None:
    text = (DOCS / "schema.md").read_text(encoding="utf-8")
    assert schema.SCHEMA_VERSION in text
    for col in schema.COLUMNS:
        assert f"| `{col.name}` |" in text, f"column {col.name} missing from docs/schema.md"
    for kind in schema.KINDS:
        assert f"| `{kind}` |" in text, f"kind {kind} missing from docs/schema.md"
    for key in schema.META_KEYS:
        assert f"| `{key}` |" in text, f"meta key {key} missing from docs/schema.md"


# (c) hooks.md covers every hook; every hook documents what it returns ------------------------


def test_hooks_doc_lists_every_hook() -> None:
    specs = hook_specs()
    assert specs, "no hook specs found in perfkit_core.hookspecs"
    text = (DOCS / "hooks.md").read_text(encoding="utf-8")
    for name in specs:
        assert f"### `{name}`" in text, f"hook {name} missing from docs/hooks.md"


@pytest.mark.parametrize("name", sorted(hook_specs()))
def test_hook_docstring_says_what_it_returns(name: str) -> None:
    doc = inspect.getdoc(hook_specs()[name]) or ""
    assert doc.strip(), f"hook {name} has no docstring"
    assert "returns" in doc.lower(), f"the docstring of {name} does not say what it returns"


# the examples in the docs ---------------------------------------------------------------------


def _small_run() -> Any:
    from perfkit_core.run import Run

    events = schema.build_events(
        {
            "kind": ["step", "operator", "operator", "user"],
            "name": ["ProfilerStep#1", "aten::mm", "aten::add", "forward"],
            "start_ns": [0, 10, 40, 5],
            "dur_ns": [100, 20, 5, 60],
            "tid": [1, 1, 1, 1],
        }
    )
    return Run(events, {"framework": "torch"})


def test_example_plugin_registers_a_working_view(
    gen_docs: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfkit_core.plugins import get_plugin_manager, make_plugin_manager
    from perfkit_core.views import clear_view_cache

    module = types.ModuleType("perfkit_kinds")
    exec(compile(gen_docs.EXAMPLE_PLUGIN, "perfkit_kinds.py", "exec"), module.__dict__)

    # Through an isolated plugin manager: the hook validates and registers the view.
    pm = make_plugin_manager(disabled=(), load_entry_points=False)
    pm.register(module, name="kinds")
    pm.check_pending()
    found: dict[str, Any] = {}
    pm.hook.perfkit_register_views(register=lambda n, f, d="": found.setdefault(n, f))
    assert "kinds" in found
    table = found["kinds"](_small_run())
    assert list(table.columns) == ["name", "events", "total_ns"]
    assert table["name"].tolist() == ["step", "user", "operator"]
    assert table["total_ns"].tolist() == [100, 60, 25]

    # The "try it without installing it" snippet, on the process-wide manager.
    monkeypatch.setitem(sys.modules, "perfkit_kinds", module)
    try:
        exec(compile(gen_docs.EXAMPLE_TRY, "try_plugin.py", "exec"), {})
        summary = _small_run().summary("kinds", top=1)
        assert summary["name"].tolist() == ["step"]
    finally:
        global_pm = get_plugin_manager()
        if global_pm.has_plugin("kinds"):
            global_pm.unregister(name="kinds")
        clear_view_cache()


def test_index_mentions_only_existing_cli_options() -> None:
    from click.testing import CliRunner

    from perfkit_core.cli import cli

    help_text = CliRunner().invoke(cli, ["report", "--help"]).output
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert options, "docs/index.md names no CLI option"
    missing = {o for o in options if o not in help_text} - {"--rank"}  # said not to exist
    assert not missing, f"docs/index.md names options `perfkit report` lacks: {sorted(missing)}"
    assert "--rank" not in help_text or "There is no `--rank`" not in text
    assert "(schema.md)" in text and "(hooks.md)" in text


# the Paddle sections of schema.md ---------------------------------------------------------------

DIFFERS_HEADING = "### Where perfkit differs from Paddle's summary on purpose, and why"


def test_schema_doc_lists_every_paddle_event_type() -> None:
    from perfkit_paddle.kinds import MEMORY_TYPES, TYPE_KINDS

    text = (DOCS / "schema.md").read_text(encoding="utf-8")
    assert "## How Paddle event types map to kinds" in text
    for type_name, kind in TYPE_KINDS.items():
        assert f"| `{type_name}` | `{kind}` |" in text, (
            f"Paddle event type {type_name} missing from docs/schema.md"
        )
    for type_name in MEMORY_TYPES:
        assert f"| `{type_name}` | `memory` |" in text, (
            f"Paddle memory type {type_name} missing from docs/schema.md"
        )


def test_schema_doc_has_the_differs_on_purpose_section() -> None:
    text = (DOCS / "schema.md").read_text(encoding="utf-8")
    assert text.count(DIFFERS_HEADING) == 1, "the 'differs on purpose' section is missing"
    section = text.split(DIFFERS_HEADING, 1)[1].split("\n## ", 1)[0]
    for needle in (
        "`UserDefined`",  # (a) Paddle's own C++ spans are kind `other`
        "`PythonUserDefined`",
        "never negative",  # (b) self time is clipped
        "NaN",  # (c) GPU columns without device events
        "`matmul dygraph`",  # (d) names kept as recorded
        "format='json'",  # (e) .pb of dygraph runs
        "microsecond",  # (f) memory events of a JSON export
    ):
        assert needle in section, f"the 'differs on purpose' section no longer mentions {needle}"


def test_generating_the_docs_never_imports_paddle() -> None:
    code = (
        "import runpy, sys; "
        f"runpy.run_path({str(GEN_DOCS)!r}, run_name='perfkit_docs_check')['render_schema'](); "
        "assert 'paddle' not in sys.modules, 'docs/gen_docs.py imported paddle'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# index.md ---------------------------------------------------------------------------------------


def test_index_python_examples_parse() -> None:
    import ast

    text = (DOCS / "index.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/index.md has no Python example"
    for block in blocks:
        ast.parse(block)


def test_index_documents_paddle_annotate_and_the_model_view() -> None:
    from perfkit_core.views import model_view

    text = (DOCS / "index.md").read_text(encoding="utf-8")
    for needle in (
        "## Profile a training loop with PaddlePaddle",
        "perfkit_paddle.on_trace_ready(",
        "prof.step()",
        ".paddle_trace.json",
        "perfkit_core.annotate(",
        "## The model view",
        'run.summary("model")',
        "--views model",
    ):
        assert needle in text, f"docs/index.md no longer mentions {needle}"
    rows = model_view(_small_run())["name"].tolist()
    section = text.split("## The model view", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.M)
    assert documented == rows, f"the model view's rows are {rows}, docs/index.md lists {documented}"
