"""The shape of the code: imports point one way, no module is too large, adapters use only the
public API. Imports are read from the source (function-local ones included; those under
``if TYPE_CHECKING:`` are for the type checker only and do not count)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("perfkit_core", "perfkit_torch", "perfkit_paddle", "perfkit_xla", "perfkit_mindspore")
#: The layers of perfkit_core, lowest first: a module may import only from its own sub-package
#: or from a lower layer. capture and views sit side by side, as do nothing else.
LAYERS = {
    "perfkit_core.errors": 0,
    "perfkit_core.progress": 0,
    "perfkit_core.plugins": 1,
    "perfkit_core.events": 2,
    "perfkit_core.capture": 3,
    "perfkit_core.views": 3,
    "perfkit_core.comparison": 4,
    "perfkit_core.advice": 5,
    # jobs runs views and advice rank by rank on Dask workers and combines them; the report
    # and the command line build on it.
    "perfkit_core.jobs": 6,
    "perfkit_core.report": 7,
    "perfkit_core.cli": 8,
    "perfkit_core.__main__": 9,
    "perfkit_core": 10,
}
#: Sub-packages whose ``__all__`` is the documented API an adapter may use.
PUBLIC_PACKAGES = (
    "perfkit_core",
    "perfkit_core.plugins",
    "perfkit_core.events",
    "perfkit_core.capture",
    "perfkit_core.views",
    "perfkit_core.comparison",
    "perfkit_core.advice",
)
MAX_LINES = 500


def module_files() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if "build" in parts:  # pip's copy of an adapter built in place, not its source
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every runtime import in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, list[str], int]] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, [], child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".")
                    anchor = anchor if is_package else anchor[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                found.append((base, [a.name for a in child.names], child.lineno))
            visit(child)

    visit(tree)
    return found


def edges() -> dict[str, set[str]]:
    """Module -> the perfkit modules it imports (``from pkg import submodule`` names the
    submodule)."""
    files = module_files()
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for target, names, _ in imports_of(path, module):
            if not target.startswith(PACKAGES):
                continue
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in files]
            if subs:
                graph[module].update(subs)
            if len(subs) < len(names) or not names:
                graph[module].add(target)
    return graph


def layer_of(module: str) -> tuple[str, int] | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix, LAYERS[prefix]
    return None


def test_no_import_cycles() -> None:
    graph = edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    assert not cycles, f"import cycles: {cycles}"


def test_core_layers_point_one_way() -> None:
    wrong = []
    for module, targets in edges().items():
        if not module.startswith("perfkit_core"):
            continue
        src = layer_of(module)
        assert src is not None, f"{module} is in no layer: add it to LAYERS"
        for target in targets:
            dst = layer_of(target)
            if dst is None or dst[0] == src[0]:
                continue
            if dst[1] >= src[1]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the flow of the layers:\n" + "\n".join(sorted(wrong))


def test_the_checks_see_function_local_imports(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from perfkit_core.report import text\n"
        "def f():\n    from perfkit_core.views import registry\n"
    )
    found = [t for t, _, _ in imports_of(source, "perfkit_core.events.sample")]
    assert "perfkit_core.views" in found and "perfkit_core.report" not in found


def test_no_module_is_too_large() -> None:
    large = {
        m: n
        for m, p in module_files().items()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not large, f"modules over {MAX_LINES} lines: {large}"


@pytest.mark.parametrize(
    "adapter", ["perfkit_torch", "perfkit_paddle", "perfkit_xla", "perfkit_mindspore"]
)
def test_adapters_use_only_the_public_api(adapter: str) -> None:
    public = {p: set(importlib.import_module(p).__all__) for p in PUBLIC_PACKAGES}
    wrong = []
    for module, path in module_files().items():
        if not module.startswith(adapter):
            continue
        for target, names, line in imports_of(path, module):
            if not target.startswith("perfkit_core"):
                continue
            if target not in public:
                wrong.append(f"{path.name}:{line} imports from {target}, not a public package")
                continue
            private = [n for n in names if n not in public[target]]
            if private:
                wrong.append(f"{path.name}:{line} imports {private} from {target}")
    assert not wrong, "\n".join(wrong)


def test_report_tables_are_the_comparison_views_and_advice() -> None:
    """The CLI lists a comparison's tables from ``REPORT_VIEWS`` without importing the comparison
    package; it must name exactly the comparison views, in order, and ``advice``."""
    from perfkit_core.comparison.compare import VIEWS
    from perfkit_core.report.comparison_model import DEFAULT_COMPARISON_VIEWS, REPORT_VIEWS

    assert (*VIEWS, "advice") == REPORT_VIEWS
    assert set(DEFAULT_COMPARISON_VIEWS) <= set(REPORT_VIEWS)
