"""Markdown helpers shared by the generators."""

from __future__ import annotations

import ast
import inspect
import re
import types
from collections.abc import Sequence


class DocsError(Exception):
    """The docs no longer match the code: the message says what to update."""


CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")


def cell(text: object) -> str:
    """Return ``text`` made safe for one cell of a Markdown table: on one line, with pipes and
    ``<`` outside code spans escaped (Python-Markdown keeps code spans as they are)."""

    def escape(prose: str) -> str:
        return prose.replace("|", "\\|").replace("<", "&lt;")

    text = str(text).replace("\n", " ")
    out, last = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [escape(text[last : span.start()]), span[0]]
        last = span.end()
    out.append(escape(text[last:]))
    return "".join(out)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Return a Markdown table."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def code(text: object) -> str:
    """Return ``text`` as an inline code span (with longer fences when it holds backticks)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def codes(values: object) -> str:
    """Return each of ``values`` as a code span, joined with commas (sets sorted)."""
    items = sorted(values) if isinstance(values, set | frozenset) else list(values)
    return ", ".join(code(v) for v in items)


def blocks(*parts: str) -> str:
    """Join Markdown blocks with one blank line, leaving out empty ones."""
    return "\n\n".join(p.strip("\n") for p in parts if p and p.strip())


def constant_comment(module: types.ModuleType, name: str) -> str:
    """The ``#:`` comment lines right above the module-level assignment of ``name``."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and node.targets else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id == name:
            comment: list[str] = []
            i = node.lineno - 2
            while i >= 0 and lines[i].lstrip().startswith("#:"):
                comment.insert(0, lines[i].lstrip()[2:].strip())
                i -= 1
            return " ".join(comment)
    raise DocsError(f"{module.__name__}.{name} is not assigned at the top of its module")
