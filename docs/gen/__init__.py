"""Generators for the reference pages: facts read from the code at build time, never typed in.

A page asks for generated text with a placeholder, on a line of its own or inside a sentence::

    <!-- gen: schema.columns -->
    Launch flows (categories <!-- gen: code perfkit_torch.kineto_format.LAUNCH_FLOW_CATEGORIES -->)

``expand(markdown, page)`` replaces every placeholder with what its generator returns; the MkDocs
hook (``docs/hooks.py``) calls it for every page, so the built site always matches the code. An
unknown generator, a generator whose checks fail (a documented example that no longer holds, a
column with no description), or a page that covers only part of a set (a view or advice rule
missing from its reference page) raises ``DocsError``, which fails ``mkdocs build``.

Each generator lives in a small module of this package and registers itself with
``@generator(name)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from gen.markdown import DocsError

GENERATORS: dict[str, Callable[..., str]] = {}
#: name -> the keys a page must give that generator, all of them, once it uses it at all.
COVERAGE: dict[str, Callable[[], Iterable[str]]] = {}

PLACEHOLDER = re.compile(r"<!-- gen: (?P<name>[\w.]+)(?P<args>(?: [^\s>]+)*) -->")


def generator(
    name: str, *, covers: Callable[[], Iterable[str]] | None = None
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register the decorated function as the generator ``name``.

    ``covers`` returns every first argument a page must pass to it: a page that uses the
    generator for some of them but not all fails (so a new view or rule cannot go undocumented).
    """

    def register(function: Callable[..., str]) -> Callable[..., str]:
        if name in GENERATORS:
            raise DocsError(f"generator {name!r} is registered twice")
        GENERATORS[name] = function
        if covers is not None:
            COVERAGE[name] = covers
        return function

    return register


def expand(markdown: str, page: str = "<page>") -> str:
    """Return ``markdown`` with every placeholder replaced by its generator's text."""
    used: dict[str, list[str]] = {}

    def replace(match: re.Match[str]) -> str:
        name, args = match["name"], match["args"].split()
        if name not in GENERATORS:
            raise DocsError(f"{page}: unknown generator {name!r}; known: {sorted(GENERATORS)}")
        used.setdefault(name, []).append(args[0] if args else "")
        try:
            return GENERATORS[name](*args)
        except DocsError as exc:
            raise DocsError(f"{page}: {match[0]}: {exc}") from None

    out = PLACEHOLDER.sub(replace, markdown)
    for name, keys in used.items():
        if name in COVERAGE:
            missing = [k for k in COVERAGE[name]() if k not in keys]
            if missing:
                raise DocsError(f"{page} documents no {name} for {missing}; add a placeholder")
    return out


# Importing the generator modules registers them.
from gen import (  # noqa: E402
    advice,
    cli,
    examples,
    hookspecs,
    layout,
    paddle_events,
    peaks,
    schema,
    torch_kineto,
    values,
    views,
)

__all__ = [
    "COVERAGE",
    "GENERATORS",
    "PLACEHOLDER",
    "DocsError",
    "advice",
    "cli",
    "examples",
    "expand",
    "generator",
    "hookspecs",
    "layout",
    "paddle_events",
    "peaks",
    "schema",
    "torch_kineto",
    "values",
    "views",
]
