"""The documentation runs: every code block of the docs and the README is executed, and the
generated reference matches the code.

**Code blocks.** Every ```` ```python ````, ```` ```sh ````, ```` ```bash ```` and
```` ```console ```` block of ``docs/**/*.md`` and ``README.md`` is executed, unless the line
before its fence is ``<!-- not-run: <reason> -->`` (the reason is required). Blocks of other
languages (toml, text, json, mermaid) are not code to run, and the generated parts of the pages
(``<!-- gen: ... -->``) are read from the code, so they are not run either.

Each page runs in a fresh namespace and a fresh working directory, its blocks in order, so a
block can use the names and files of the blocks before it. The working directory holds:

- ``perfkit_runs/myhost_1234.step7/``: a saved torch run (a real CPU profile of a small MLP,
  with memory events), as ``perfkit_torch.on_trace_ready`` saves one;
- ``trace.pt.trace.json.gz``: a real Kineto trace of ResNet-50 training on a V100 with
  ``DataLoader(num_workers=0)`` (from the shared traces);
- ``before/`` and ``after/``: that training with ``num_workers=0`` and ``4``, as saved runs;
- ``examples/``: the repository's examples;
- ``jax_logs/``: a JAX log folder (``plugins/profile/run/mlp.xplane.pb``), a real CPU profile
  of the MLP of ``perfkit_xla.demo`` (tests/data/xla);
- ``mindspore_profiles/``: a folder holding one MindSpore profile
  (``cnn_1_20260101000000000_ascend_ms/``), a real CPU profile of a CNN trained by
  ``Model.train`` with ``perfkit_mindspore.ProfilerCallback`` (tests/data/mindspore).

Python blocks can import the modules of ``examples/``, as when run from that folder, and a
``--8<-- "path"`` line (pymdownx.snippets) is replaced by the file it names, as MkDocs does.

In shell blocks every line is a command (in ``console`` blocks, every line starting with
``$ ``); each must exit 0. A block of plain ``perfkit ...`` commands runs them in this process
through ``perfkit_core.cli.main``, with a plugin manager of their own, as a new process would
have; any other block runs in bash, where ``perfkit`` and ``python`` run this checkout with the
test's interpreter.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import shared_trace

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
EXAMPLES = REPO / "examples"
PAGES = sorted([*DOCS.rglob("*.md"), REPO / "README.md"])
RUNNABLE = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "console": "console"}
NOT_RUN = re.compile(r"^<!--\s*not-run:(?P<reason>.*?)-->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)(?P<info>.*)$")
#: ruff's markers around a block it must not format (a snippet line is not Python).
FMT_MARKER = re.compile(r"^<!--\s*fmt:\s*(off|on)\s*-->$")
SNIPPET = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')
SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]{}~]|^\w+=")

sys.path.insert(0, str(DOCS))
try:
    import gen  # docs/gen: the reference generators (importing it imports all of them)
finally:
    sys.path.remove(str(DOCS))


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason, when marked not runnable

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """Every fenced code block of ``page`` whose language is one perfkit runs."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = lines[j].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            line = lines[j]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            j += 1
        lang = opening["lang"].lower()
        if lang in RUNNABLE:
            before = next(
                (
                    lines[k].strip()
                    for k in range(i - 1, -1, -1)
                    if lines[k].strip() and not FMT_MARKER.match(lines[k].strip())
                ),
                "",
            )
            marker = NOT_RUN.match(before)
            reason = marker["reason"].strip() if marker else None
            found.append(Block(page, i + 1, RUNNABLE[lang], "\n".join(body), reason))
        i = j + 1
    return found


def with_snippets(code: str) -> str:
    """``code`` with each ``--8<-- "path"`` line replaced by that file (paths from the repo)."""
    out = []
    for line in code.splitlines():
        include = SNIPPET.match(line)
        out.append((REPO / include["path"]).read_text(encoding="utf-8") if include else line)
    return "\n".join(out)


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block: its lines (``$ `` lines of a console block), with
    backslash continuations joined and comment-only lines left out."""
    lines = block.code.splitlines()
    if block.lang == "console":  # prompts and their continuation lines; the rest is output
        kept: list[str] = []
        for line in lines:
            if line.startswith("$ "):
                kept.append(line[2:])
            elif kept and kept[-1].rstrip().endswith("\\"):
                kept.append(line)
        lines = kept
    commands: list[str] = []
    pending: list[str] = []
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1].strip())
            continue
        command = " ".join([*pending, line.strip()]).strip()
        pending = []
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def is_plain_perfkit(command: str) -> bool:
    """A ``perfkit ...`` command with no shell syntax beyond a trailing comment."""
    words = shlex.split(command, comments=True)
    text = command.split(" #", 1)[0]
    return bool(words) and words[0] == "perfkit" and not SHELL_SYNTAX.search(text)


# -- the workspace every page runs in ---------------------------------------------------------


@dataclass
class Workspace:
    root: Path  # the files the examples read
    bin: Path  # a folder holding a `perfkit` command that runs this checkout


@pytest.fixture(scope="session")
def docs_workspace(tmp_path_factory: pytest.TempPathFactory, torch_profile) -> Workspace:
    """The files the docs' examples read (see the module docstring), built once."""
    import perfkit_core

    root = tmp_path_factory.mktemp("docs_workspace")
    shutil.copytree(torch_profile.runs[0], root / "perfkit_runs" / "myhost_1234.step7")
    (root / "trace.pt.trace.json.gz").symlink_to(shared_trace("resnet_nw0"))
    perfkit_core.load(shared_trace("resnet_nw0")).save(root / "before")
    perfkit_core.load(shared_trace("resnet_nw4")).save(root / "after")
    (root / "examples").symlink_to(EXAMPLES)
    (root / "jax_logs").symlink_to(REPO / "tests" / "data" / "xla" / "jax_mlp")
    (root / "mindspore_profiles").symlink_to(REPO / "tests" / "data" / "mindspore" / "graph_cnn")
    bin_dir = tmp_path_factory.mktemp("docs_bin")
    for name, command in (("perfkit", "-m perfkit_core "), ("python", "")):
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" {command}"$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return Workspace(root, bin_dir)


def run_shell(block: Block, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands = shell_commands(block)
    if all(is_plain_perfkit(c) for c in commands):
        from perfkit_core.cli import main
        from perfkit_core.plugins import manager

        for command in commands:
            with monkeypatch.context() as m:
                m.setattr(manager, "_manager", None)  # a new process builds its own
                code = main(shlex.split(command, comments=True)[1:])
            assert code == 0, f"{block}: `{command}` exited {code}"
        return
    env = dict(os.environ)
    env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", "\n".join(commands)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"{block} exited {result.returncode}:\n{result.stderr[-3000:]}"


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if any(b.not_run is None for b in blocks_of(p))],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_code_blocks_run(
    page: Path,
    docs_workspace: Workspace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recwarn: pytest.WarningsRecorder,
) -> None:
    runnable = [b for b in blocks_of(page) if b.not_run is None]
    from perfkit_core.capture import background

    work = tmp_path / "work"
    shutil.copytree(docs_workspace.root, work, symlinks=True)
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    # Each page is a program of its own, with its own conversion helper (started in the page's
    # working directory: the helper resolves relative paths against its own).
    monkeypatch.setattr(background, "_shared", None)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        for block in runnable:
            if block.lang == "python":
                source = with_snippets(block.code)
                exec(compile(source, str(block), "exec"), namespace)
            else:
                run_shell(block, docs_workspace.bin, monkeypatch)
    finally:
        if background._shared is not None:
            background._shared.close(timeout=60)
    failed = [str(w.message) for w in recwarn if str(w.message).startswith("perfkit:")]
    assert not failed, f"{page.name}: a handler could not save a run: {failed}"


def test_every_block_not_run_says_why() -> None:
    blocks = [b for page in PAGES for b in blocks_of(page)]
    assert len(blocks) > 40, "the code blocks of the docs were not found"
    unexplained = [str(b) for b in blocks if b.not_run is not None and not b.not_run]
    assert not unexplained, f"blocks marked not-run without a reason: {unexplained}"
    run = [b for b in blocks if b.not_run is None]
    assert len(run) > 3 * (len(blocks) - len(run)), "most code blocks of the docs must run"


def test_the_block_reader_sees_markers_snippets_and_console_prompts(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not-run: needs a GPU -->\n```python\nimport cuda\n```\n\n"
        '    ```python title="x.py"\n    --8<-- "examples/plugin_view.py"\n    ```\n\n'
        "```console\n$ perfkit info  # list\nAdapters:\n$ perfkit report \\\n  x --top 5\n```\n"
        "```toml\n[x]\n```\n",
        encoding="utf-8",
    )
    gpu, snippet, console = blocks_of(page)
    assert gpu.not_run == "needs a GPU" and snippet.not_run is None
    assert "def kinds_view" in with_snippets(snippet.code)
    assert shell_commands(console) == ["perfkit info  # list", "perfkit report x --top 5"]
    assert all(is_plain_perfkit(c) for c in shell_commands(console))
    assert not is_plain_perfkit("PERFKIT_DISABLE_PLUGINS=paddle perfkit info")
    assert not is_plain_perfkit("perfkit report native/*.json")


# -- the generated reference ------------------------------------------------------------------


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: p.name)
def test_generated_parts_match_the_code(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    expanded = gen.expand(text, str(page.relative_to(DOCS)))
    assert "<!-- gen:" not in expanded


def test_every_generator_is_used() -> None:
    used = {
        m["name"]
        for page in DOCS.rglob("*.md")
        for m in gen.PLACEHOLDER.finditer(page.read_text(encoding="utf-8"))
    }
    assert used == set(gen.GENERATORS), f"unused generators: {set(gen.GENERATORS) - used}"


def test_a_stale_page_fails_the_build() -> None:
    with pytest.raises(gen.DocsError, match="unknown generator"):
        gen.expand("<!-- gen: schema.colums -->")
    with pytest.raises(gen.DocsError, match=r"documents no views\.view"):
        gen.expand("<!-- gen: views.view operator -->")
    with pytest.raises(gen.DocsError, match="does not exist"):
        gen.expand("<!-- gen: code perfkit_core.events.schema.NO_SUCH_NAME -->")
    with pytest.raises(gen.DocsError, match="does not exist"):
        gen.expand("<!-- gen: value perfkit_core.advice.rules.optimizer.OPTIMIZER_SPEEDUPS.jax -->")


def test_a_value_reaches_a_tables_entries_by_their_keys() -> None:
    from perfkit_core.advice.rules.optimizer import OPTIMIZER_SPEEDUPS

    path = "perfkit_core.advice.rules.optimizer.OPTIMIZER_SPEEDUPS"
    for framework, table in OPTIMIZER_SPEEDUPS.items():
        for cls, speedup in table.items():
            shown = gen.expand(f"<!-- gen: value {path}.{framework}.{cls} -->")
            assert float(shown) == speedup


def test_building_the_reference_imports_no_framework() -> None:
    code = (
        "import sys, pathlib; sys.path.insert(0, 'docs'); import gen\n"
        "for page in pathlib.Path('docs').rglob('*.md'):\n"
        "    gen.expand(page.read_text(encoding='utf-8'), str(page))\n"
        "loaded = {'torch', 'paddle'} & set(sys.modules)\n"
        "assert not loaded, f'building the docs imported {loaded}'\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]


# -- what the pages must cover ----------------------------------------------------------------


def test_mkdocs_nav_lists_every_page() -> None:
    nav = set(re.findall(r":\s*([\w/]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert nav == pages, f"pages not in the nav: {pages - nav}; nav entries missing: {nav - pages}"


def test_the_views_guide_names_every_view() -> None:
    from perfkit_core.views import registered_views

    text = (DOCS / "guide" / "views.md").read_text(encoding="utf-8")
    missing = [name for name in registered_views() if f"[`{name}`]" not in text]
    assert not missing, f"docs/guide/views.md does not say what {missing} answer"


def test_options_named_in_the_docs_exist() -> None:
    from click.testing import CliRunner

    from perfkit_core.cli import cli

    help_text = "\n".join(
        CliRunner().invoke(cli, [command, "--help"]).output for command in cli.commands
    )
    # pip, mkdocs, Hypothesis, TensorBoard
    foreign = {"--index-url", "--strict", "--hypothesis-profile", "--logdir"}
    # The example and benchmark scripts' own options (examples/compare_frameworks.py --model,
    # bench/bench_advice.py --repeat ...).
    for script in [*EXAMPLES.glob("*.py"), *(REPO / "bench").glob("*.py")]:
        text = script.read_text(encoding="utf-8")
        help_text += "\n" + "\n".join(re.findall(r'add_argument\(\s*"(--[a-z][a-z-]*)"', text))
    named = {
        option
        for page in PAGES
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", page.read_text(encoding="utf-8"))
    }
    missing = sorted(o for o in named - foreign if o not in help_text)
    assert not missing, f"the docs name options no perfkit command has: {missing}"


def test_docs_and_examples_keep_modules_small() -> None:
    large = {
        str(p.relative_to(REPO)): n
        for p in [*(DOCS / "gen").glob("*.py"), *DOCS.glob("*.py"), *EXAMPLES.glob("*.py")]
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not large, f"modules over 500 lines: {large}"
