"""The layout of ``perfkit_core`` for the architecture page: its layers as
``tests/test_architecture.py`` enforces them, and each module's purpose from its docstring."""

from __future__ import annotations

import ast
from pathlib import Path

from gen import generator
from gen.markdown import DocsError, code, table

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE_TEST = REPO / "tests" / "test_architecture.py"


def layers() -> dict[str, int]:
    """``LAYERS`` of the architecture test (module -> layer), read from its source."""
    tree = ast.parse(ARCHITECTURE_TEST.read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "LAYERS":
            return ast.literal_eval(node.value)
    raise DocsError("tests/test_architecture.py no longer defines LAYERS")


def summary(path: Path) -> str:
    """The first sentence of a module's docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    if not first:
        raise DocsError(f"{path.relative_to(REPO)} has no docstring")
    return first


@generator("architecture.layers")
def layer_table() -> str:
    """One row per layer of perfkit_core, lowest first, with the modules of each."""
    rows = []
    for module, layer in sorted(layers().items(), key=lambda item: (item[1], item[0])):
        parts = module.split(".")
        path = REPO.joinpath(*parts)
        if path.is_dir() and len(parts) == 1:  # the package itself: its public names
            rows.append([str(layer), code(module), summary(path / "__init__.py"), ""])
        elif path.is_dir():
            init = path / "__init__.py"
            modules = sorted(
                p.relative_to(path)
                .with_suffix("")
                .as_posix()
                .replace("/__init__", "")
                .replace("/", ".")
                for p in path.rglob("*.py")
                if p != init and "__pycache__" not in p.parts
            )
            rows.append(
                [str(layer), code(module), summary(init), ", ".join(code(m) for m in modules)]
            )
        elif path.with_suffix(".py").is_file():
            rows.append([str(layer), code(module), summary(path.with_suffix(".py")), ""])
        else:
            raise DocsError(f"the architecture test names {module}, which does not exist")
    return table(["layer", "package", "what it holds", "modules"], rows)
