"""MkDocs hooks: fill in the generated parts of the pages (``docs/gen/``) at build time.

Configured under ``hooks:`` in ``mkdocs.yml``. Nothing generated is checked in, so nothing can
go stale: a page that no longer matches the code fails ``mkdocs build``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

DOCS = Path(__file__).resolve().parent
if str(DOCS) not in sys.path:
    sys.path.insert(0, str(DOCS))

import gen  # noqa: E402  (docs/gen, found through the path set above)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the page's ``<!-- gen: ... -->`` placeholders with text generated from the code."""
    try:
        return gen.expand(markdown, page.file.src_uri)
    except gen.DocsError as exc:
        raise PluginError(f"docs out of date with the code: {exc}") from None
