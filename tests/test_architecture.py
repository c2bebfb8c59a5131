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
    # the packages' attributes imported on first use (PEP 562)
    "perfkit_core.lazy": 0,
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
    # the web app over a log folder: the same reports and comparisons the command line makes
    "perfkit_core.serve": 8,
    "perfkit_core.cli": 9,
    "perfkit_core.__main__": 10,
    "perfkit_core": 11,
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


def imports_of(
    path: Path, module: str, *, typing: bool = False
) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every runtime import in ``path``;
    with ``typing``, those under ``if TYPE_CHECKING:`` too (the types a module names in its
    annotations)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, list[str], int]] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not typing:
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


#: The benchmarks import each other by bare module name (bench/ is on their path).
BENCH = REPO / "bench"
#: The hook spec module imports the types its hooks name under ``TYPE_CHECKING`` (pytest's
#: pattern), so that it can never join a cycle: those imports are not dependencies.
HOOKSPECS = "perfkit_core.plugins.hookspecs"


def typed_edges() -> dict[str, set[str]]:
    """Module -> the project modules it depends on, bench/ included: runtime imports,
    function-local ones and those under ``TYPE_CHECKING`` (a type named in an annotation is a
    dependency), but not a package ``__init__``'s re-exports: a name imported from a package
    is a dependency on the module that defines it."""
    files = module_files()
    files.update({f"bench.{p.stem}": p for p in sorted(BENCH.glob("*.py"))})
    bench_names = {p.stem for p in BENCH.glob("*.py")}
    raw = {
        m: imports_of(p, m, typing=m != HOOKSPECS and p.name != "__init__.py")
        for m, p in files.items()
    }
    exported: dict[str, dict[str, str]] = {}
    for m, p in files.items():
        if p.name == "__init__.py":
            exported[m] = {
                name: f"{target}.{name}" if f"{target}.{name}" in files else target
                for target, names, _ in raw[m]
                for name in names
                if target in files or f"{target}.{name}" in files
            }

    def resolve(target: str, name: str | None) -> str | None:
        if name and f"{target}.{name}" in files and files[f"{target}.{name}"].name != "__init__.py":
            return f"{target}.{name}"
        for _ in range(5):  # through the packages that re-export it
            if name is None or name not in exported.get(target, {}):
                break
            target = exported[target][name]
        return target if target in files and files[target].name != "__init__.py" else None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        if path.name == "__init__.py":
            continue
        for target, names, _ in raw[module]:
            if module.startswith("bench.") and target.split(".")[0] in bench_names:
                target = f"bench.{target}"
            if not target.startswith((*PACKAGES, "bench.")):
                continue
            for name in names or [None]:
                found = resolve(target, name)
                if found and found != module:
                    graph[module].add(found)
    return graph


def cycles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:  # a module outside the project
                continue
            if w not in index:
                connect(w)
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_cycles_counting_the_types_modules_name() -> None:
    """No cycle in the project's imports, bench/ included, when a type a module names in its
    annotations counts as a dependency: the data types live apart from the code that
    orchestrates them (``comparison.types``, ``advice.finding``, ``bench/scenario_types``)."""
    graph = typed_edges()
    assert graph["perfkit_core.comparison.gate"] >= {"perfkit_core.comparison.types"}
    assert "bench.scenario_types" in graph["bench.advice_gpu"]
    assert cycles_of(graph) == []


def test_the_cycle_check_can_fail() -> None:
    assert cycles_of({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def layer_of(module: str) -> tuple[str, int] | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix, LAYERS[prefix]
    return None


def test_no_import_cycles() -> None:
    cycles = cycles_of(edges())
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


def framework_tests_in_hookimpls() -> list[str]:
    """``module.function`` of every adapter hook implementation whose body compares its
    ``framework`` argument (``==``, ``!=``, ``in``, ``not in``)."""
    found = []
    for package in PACKAGES[1:]:
        path = REPO / package / "plugin.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or "framework" not in {
                a.arg for a in node.args.args
            }:
                continue
            if not any("hookimpl" in ast.unparse(d) for d in node.decorator_list):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Compare) and any(
                    isinstance(n, ast.Name) and n.id == "framework"
                    for n in [inner.left, *inner.comparators]
                ):
                    found.append(f"{package}.plugin.{node.name}")
    return found


def test_no_hookimpl_tests_its_framework() -> None:
    """Each adapter names its frameworks once (``PERFKIT_FRAMEWORKS``) and the core reaches its
    hooks only for those (``perfkit_core.plugins.framework_hook``)."""
    assert framework_tests_in_hookimpls() == []
    for package in PACKAGES[1:]:
        plugin = importlib.import_module(f"{package}.plugin")
        assert plugin.PERFKIT_FRAMEWORKS, package


def _sources() -> dict[str, str]:
    return {module: path.read_text() for module, path in module_files().items()}


def private_cache_uses(sources: dict[str, str]) -> list[str]:
    """``module:line`` of every ``._cache`` attribute or ``"_cache"`` name outside the cache's
    own module (``perfkit_core.events.cache``)."""
    found = []
    for module, text in sources.items():
        if module == "perfkit_core.events.cache":
            continue
        for node in ast.walk(ast.parse(text)):
            hit = (isinstance(node, ast.Attribute) and node.attr == "_cache") or (
                isinstance(node, ast.Constant) and node.value == "_cache"
            )
            if hit:
                found.append(f"{module}:{node.lineno}")
    return found


def test_one_door_to_a_runs_cache() -> None:
    """Every view, rule and export reaches what a run computed once through ``Run.cache`` (or
    ``Run.cached``); the entries kept between views are named in the cache's module only."""
    assert private_cache_uses(_sources()) == []
    assert private_cache_uses({"m": "x = run._cache.get('k')\n"}) == ["m:1"]


#: The keys of a parameter entry (``perfkit_core.events.parameter_entry``).
PARAMETER_KEYS = {"name", "shape", "dtype", "count", "bytes"}


def model_entry_copies(sources: dict[str, str]) -> list[str]:
    """``module:line`` of every dict literal with a parameter entry's keys, and every f-string
    that numbers a layer key (``{kind}[{ordinal}]``), outside ``events.model_entries``."""
    found = []
    for module, text in sources.items():
        if module == "perfkit_core.events.model_entries":
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if keys >= PARAMETER_KEYS:
                    found.append(f"{module}:{node.lineno}")
            elif isinstance(node, ast.JoinedStr):
                parts = node.values
                for a, b, c, d in zip(parts, parts[1:], parts[2:], parts[3:], strict=False):
                    if (
                        isinstance(a, ast.FormattedValue)
                        and isinstance(b, ast.Constant)
                        and b.value == "["
                        and isinstance(c, ast.FormattedValue)
                        and isinstance(d, ast.Constant)
                        and str(d.value).startswith("]")
                    ):
                        found.append(f"{module}:{node.lineno}")
    return found


def test_one_definition_of_the_model_entries() -> None:
    """The four adapters and the layer tree describe parameters and number layer keys through
    ``perfkit_core.events.model_entries`` alone."""
    assert model_entry_copies(_sources()) == []
    copy = 'e = {"name": n, "shape": s, "dtype": d, "count": c, "bytes": b}\nk = f"{p}/{t}[{i}]"\n'
    assert model_entry_copies({"m": copy}) == ["m:1", "m:2"]
