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
#: The pages docs/gen_docs.py writes, by the module attribute holding each path.
GENERATED = {
    "schema.md": "SCHEMA_MD",
    "hooks.md": "HOOKS_MD",
    "views.md": "VIEWS_MD",
    "advice.md": "ADVICE_MD",
}


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
    generated = gen_docs.generate()
    assert {p.name for p in generated} == set(GENERATED), "a generated page is not generated"
    stale = gen_docs.stale_files(generated)
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
    for name, attr in GENERATED.items():
        monkeypatch.setattr(gen_docs, attr, tmp_path / name)
    assert gen_docs.main(["--check"]) == 1  # missing files are stale
    assert gen_docs.main([]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(GENERATED)
    assert gen_docs.main(["--check"]) == 0
    for name in ("hooks.md", "advice.md"):
        (tmp_path / name).write_text("edited by hand\n", encoding="utf-8")
    capsys.readouterr()
    assert gen_docs.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "hooks.md" in out and "advice.md" in out
    assert "schema.md" not in out and "views.md" not in out


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
    assert specs, "no hook specs found in perfkit_core.plugins.hookspecs"
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
    from perfkit_core.events.run import Run

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


def _help(*args: str) -> str:
    from click.testing import CliRunner

    from perfkit_core.cli import cli

    return CliRunner().invoke(cli, [*args, "--help"]).output


def test_index_mentions_only_existing_cli_options() -> None:
    report_help = _help("report")
    help_text = "\n".join(
        _help(cmd) for cmd in ("report", "advise", "info", "demo", "compare", "export")
    )
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert options, "docs/index.md names no CLI option"
    missing = {o for o in options if o not in help_text} - {"--rank"}  # said not to exist
    assert not missing, f"docs/index.md names options no perfkit command has: {sorted(missing)}"
    assert "--rank" not in report_help or "There is no `--rank`" not in text
    for page in GENERATED:
        assert f"({page})" in text, f"docs/index.md does not link {page}"


def test_index_option_table_covers_the_report_options() -> None:
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    table = text.split("## Read a report", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(?:-o, )?(--[a-z][a-z-]*)", table, flags=re.M))
    if "| `--advice / --no-advice` |" in table:
        listed.add("--no-advice")
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", _help("report"))) - {"--help"}
    missing = flags - listed
    assert not missing, f"the option table of docs/index.md lacks {sorted(missing)}"


def test_index_mentions_every_cli_command() -> None:
    from perfkit_core.cli import cli

    text = (DOCS / "index.md").read_text(encoding="utf-8")
    for command in ("report", "advise", "info", "demo", "compare", "export"):
        assert command in cli.commands, f"perfkit has no `{command}` command any more"
        assert f"`perfkit {command}" in text, f"docs/index.md does not mention perfkit {command}"


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
    from perfkit_core.views.phases import model_view

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


def test_index_lists_every_view_and_rule() -> None:
    from perfkit_core.advice import BUILTIN_RULES
    from perfkit_core.views import registered_views

    text = (DOCS / "index.md").read_text(encoding="utf-8")
    views = text.split("\n## Views\n", 1)[1].split("\n## ", 1)[0]
    for name, spec in registered_views().items():
        if spec.function.__module__.split(".")[0] in (
            "perfkit_core",
            "perfkit_torch",
            "perfkit_paddle",
        ):
            assert f"- [`{name}`](views.md#{name})" in views, f"docs/index.md omits view {name}"
    advice = text.split("\n## Advice\n", 1)[1].split("\n## ", 1)[0]
    for rule_id, _function, _description in BUILTIN_RULES:
        assert f"`{rule_id}`" in advice, f"the advice section of docs/index.md omits {rule_id}"


# views.md --------------------------------------------------------------------------------------


def _section(text: str, heading: str) -> str:
    assert heading in text, f"{heading!r} is missing"
    return text.split(heading, 1)[1].split("\n### ", 1)[0]


def test_views_doc_lists_every_registered_view(gen_docs: types.ModuleType) -> None:
    from perfkit_core.views import registered_views

    text = (DOCS / "views.md").read_text(encoding="utf-8")
    own = {
        name
        for name, spec in registered_views().items()
        if spec.function.__module__.split(".")[0] in gen_docs.OWN_PACKAGES
    }
    assert own, "no views registered"
    assert own == set(gen_docs.own_views())
    for name in own:
        assert f"\n### `{name}`\n" in text, f"view {name} missing from docs/views.md"
        assert f"[`{name}`](#{name})" in text, f"view {name} missing from the views table"


def test_views_doc_columns_are_what_the_views_return(gen_docs: types.ModuleType) -> None:
    text = (DOCS / "views.md").read_text(encoding="utf-8")
    demo = gen_docs.synthetic_run()
    for name, spec in gen_docs.own_views().items():
        section = _section(text, f"\n### `{name}`\n")
        frames = [spec.function(demo)]
        frames += [spec.function(demo, **v) for v in gen_docs.VIEW_VARIANTS.get(name, ())]
        for frame in frames:
            for column in frame.columns:
                assert f"| `{column}` |" in section, f"docs/views.md: {name} lacks {column}"
        for option in gen_docs.view_parameters(spec):
            assert f"| `{option.name}` |" in section, f"docs/views.md: {name} lacks {option.name}"


def test_views_doc_states_units_and_the_derivation_rules() -> None:
    from perfkit_core import summaries, views

    text = (DOCS / "views.md").read_text(encoding="utf-8")
    for needle in ("`*_ns`", "`*_pct`", "`gb_per_s`", "NaN means not measured"):
        assert needle in text, f"docs/views.md does not explain {needle}"
    model = " ".join(_section(text, "\n### `model`\n").split())
    rule = (inspect.getdoc(views._derived_forward) or "").split("\n\n", 1)[1]
    assert " ".join(rule.split()) in model, "the forward-derivation rule is not quoted"
    assert views._BACKWARD_OP_RE.pattern in model
    benchmark = _section(text, "\n### `benchmark`\n")
    assert f"DEFAULT_WARMUP_MIN_STEPS = {summaries.DEFAULT_WARMUP_MIN_STEPS}" in benchmark


# advice.md -------------------------------------------------------------------------------------


def test_advice_doc_covers_every_rule_and_threshold(gen_docs: types.ModuleType) -> None:
    from perfkit_core import advice
    from perfkit_paddle.remedies import REMEDIES as PADDLE
    from perfkit_torch.remedies import REMEDIES as TORCH

    text = (DOCS / "advice.md").read_text(encoding="utf-8")
    constants = gen_docs.advice_constants()
    covered: set[str] = set()
    for rule_id, function, _description in advice.BUILTIN_RULES:
        section = _section(text, f"\n### `{rule_id}`\n")
        names = gen_docs.rule_constants(function)
        # every constant the rule's docstring names is among them
        named = set(re.findall(r"\b[A-Z][A-Z0-9_]+_(?:PCT|NS)\b", function.__doc__ or ""))
        assert named <= set(names), f"{rule_id}: docstring names {named - set(names)}"
        for name in names:
            value = gen_docs.constant_value(name, constants[name])
            assert f"| `{name}` | {value} |" in section, f"{rule_id}: threshold {name} missing"
        covered |= set(names)
        assert "**Why these defaults.**" in section, f"{rule_id} has no rationale"
        assert TORCH[rule_id].rstrip() in section, f"{rule_id}: torch remedy missing"
        assert PADDLE[rule_id].rstrip() in section, f"{rule_id}: paddle remedy missing"
    assert covered == set(constants) - set(gen_docs.SEVERITY_CONSTANTS)
    for name in gen_docs.SEVERITY_CONSTANTS:
        assert f"`{name}` = {getattr(advice, name):g}%" in text


def test_advice_doc_describes_findings() -> None:
    import dataclasses

    from perfkit_core.advice import Context, Finding

    text = (DOCS / "advice.md").read_text(encoding="utf-8")
    for cls in (Finding, Context):
        for field in dataclasses.fields(cls):
            assert f"| `{field.name}` |" in text, f"docs/advice.md: {cls.__name__}.{field.name}"


def test_docs_python_examples_parse() -> None:
    import ast

    for page in ("views.md", "advice.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
        assert blocks, f"docs/{page} has no Python example"
        for block in blocks:
            ast.parse(block)


def test_advice_example_plugin_is_the_one_shown_and_works(gen_docs: types.ModuleType) -> None:
    import ast

    from perfkit_core.advice import registered_advisors
    from perfkit_core.plugins import get_plugin_manager

    text = (DOCS / "advice.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert gen_docs.EXAMPLE_ADVISOR in blocks, "the example plugin in docs/advice.md is stale"
    assert gen_docs.EXAMPLE_ADVISOR_TRY in blocks
    ast.parse(gen_docs.EXAMPLE_ADVISOR)
    assert "[project.entry-points.perfkit]\noptim_advice = " in text

    findings = gen_docs.run_example_advisor(gen_docs.synthetic_run())
    assert [f.id for f in findings] == [gen_docs.EXAMPLE_ADVISOR_RULE]
    assert findings[0].remedy.startswith("Use a fused optimizer")
    # registered for the run only: the process-wide plugin manager is as it was
    assert not get_plugin_manager().has_plugin(gen_docs.EXAMPLE_ADVISOR_NAME)
    assert gen_docs.EXAMPLE_ADVISOR_RULE not in registered_advisors()
    assert "perfkit_optim_advice" not in sys.modules


def test_generating_the_new_pages_never_imports_paddle() -> None:
    code = (
        "import runpy, sys; "
        f"g = runpy.run_path({str(GEN_DOCS)!r}, run_name='perfkit_docs_check'); "
        "g['render_views'](); g['render_advice'](); "
        "assert 'paddle' not in sys.modules, 'docs/gen_docs.py imported paddle'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
