"""Every hook of ``perfkit_core.plugins.hookspecs``: signature, calling convention, docstring;
and the entry points perfkit's own adapters declare."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from gen import generator
from gen.markdown import DocsError, blocks, code, table
from perfkit_core.plugins import hookspecs
from perfkit_core.plugins.manager import ENTRY_POINT_GROUP

REPO = Path(__file__).resolve().parents[2]
HOOK_PREFIX = "perfkit_"
#: The adapter distributions of this repository, by folder.
ADAPTER_FOLDERS = ("perfkit_torch", "perfkit_paddle", "perfkit_xla", "perfkit_mindspore")


def hook_functions() -> list[Callable[..., Any]]:
    """Every hook spec, in the order the module defines them."""
    found = [
        fn
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith(HOOK_PREFIX) and fn.__module__ == hookspecs.__name__
    ]
    return sorted(found, key=lambda fn: fn.__code__.co_firstlineno)


def spec_options(fn: Callable[..., Any]) -> dict[str, Any]:
    """The options pluggy's ``@hookspec`` marker stored on ``fn``."""
    return dict(getattr(fn, f"{hookspecs.PROJECT_NAME}_spec", None) or {})


def signature_text(fn: Callable[..., Any]) -> str:
    """``def name(arg: type, ...) -> type: ...`` with the annotations as written."""
    sig = inspect.signature(fn)

    def ann(a: object) -> str:
        return a if isinstance(a, str) else inspect.formatannotation(a)

    params = [
        p.name if p.annotation is p.empty else f"{p.name}: {ann(p.annotation)}"
        for p in sig.parameters.values()
    ]
    ret = "" if sig.return_annotation is sig.empty else f" -> {ann(sig.return_annotation)}"
    return f"def {fn.__name__}({', '.join(params)}){ret}: ..."


def docstring_markdown(doc: str) -> str:
    """A reST-style docstring as Markdown: ``:param x:`` and ``:returns:`` become a list."""
    out: list[str] = []
    fields: list[str] = []
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.startswith(":param "):
            name, _, text = stripped[len(":param ") :].partition(":")
            fields.append(f"- **`{name.strip()}`**: {text.strip()}")
        elif stripped.startswith((":returns:", ":return:")):
            fields.append(f"- **Returns:** {stripped.partition(':')[2].partition(':')[2].strip()}")
        elif fields and line.startswith((" ", "\t")) and stripped:
            fields[-1] += " " + stripped
        else:
            if fields:
                out.append("\n".join(fields))
                fields = []
            out.append(line)
    if fields:
        out.append("\n".join(fields))
    return "\n".join(out).strip()


def calling_convention(fn: Callable[..., Any]) -> str:
    opts = spec_options(fn)
    if opts.get("firstresult"):
        text = (
            "**firstresult**: implementations are called one by one (in pluggy's order: the "
            "latest registered first, unless marked `tryfirst`/`trylast`) until one returns "
            "something other than `None`; that value is the result."
        )
    else:
        text = (
            "**Not firstresult**: every plugin's implementation is called; pluggy collects "
            "their non-`None` return values into a list."
        )
    if opts.get("historic"):
        text += " **historic**: plugins registered later are called too."
    return text


@generator("hooks.overview")
def overview() -> str:
    rows = [
        [
            f"[`{fn.__name__}`](#{fn.__name__})",
            "yes" if spec_options(fn).get("firstresult") else "no",
            (inspect.getdoc(fn) or "").split("\n", 1)[0],
        ]
        for fn in hook_functions()
    ]
    return table(["hook", "firstresult", "purpose"], rows)


@generator("hooks.sections")
def sections() -> str:
    """One section per hook."""
    parts = []
    for fn in hook_functions():
        doc = inspect.getdoc(fn) or ""
        if "returns" not in doc.lower():
            raise DocsError(f"the docstring of {fn.__name__} does not say what it returns")
        parts.append(
            blocks(
                f"### `{fn.__name__}`",
                f"```python\n{signature_text(fn)}\n```",
                calling_convention(fn),
                docstring_markdown(doc),
            )
        )
    return blocks(*parts)


@generator("hooks.aliases")
def aliases() -> str:
    """Type aliases of the spec module used in hook signatures, with their ``#:`` comments."""
    source = inspect.getsource(hookspecs)
    lines = source.splitlines()
    used = " ".join(signature_text(fn) for fn in hook_functions())
    rows = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name) or target.id not in used:
            continue
        comment: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#:"):
            comment.insert(0, lines[i].lstrip()[2:].strip())
            i -= 1
        value = ast.get_source_segment(source, node.value) or ""
        rows.append([code(target.id), code(value), " ".join(comment)])
    return table(["name", "definition", "meaning"], rows)


@generator("hooks.adapter_entry_points")
def adapter_entry_points() -> str:
    """The entry-point tables of the adapters' ``pyproject.toml`` files, as TOML blocks."""
    parts = []
    for folder in ADAPTER_FOLDERS:
        data = tomllib.loads((REPO / folder / "pyproject.toml").read_text(encoding="utf-8"))
        project = data.get("project", {})
        eps = project.get("entry-points", {}).get(ENTRY_POINT_GROUP)
        if not eps:
            raise DocsError(
                f"{folder}/pyproject.toml declares no {ENTRY_POINT_GROUP!r} entry point"
            )
        body = "\n".join(f'{name} = "{target}"' for name, target in eps.items())
        parts.append(
            f"`{folder}/pyproject.toml` (`{project.get('name')}`):\n\n"
            f"```toml\n[project.entry-points.{ENTRY_POINT_GROUP}]\n{body}\n```"
        )
    return blocks(*parts)
