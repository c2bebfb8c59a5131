"""Package attributes imported on first use: a package's ``__getattr__`` (PEP 562) hands an
unknown name to ``lazy_attribute``, which imports the module its table names for it, so that
importing the package costs only what is used."""

from __future__ import annotations

import importlib
from typing import Any


def lazy_attribute(namespace: dict[str, Any], table: dict[str, str], name: str) -> Any:
    """The attribute ``name`` of the package whose globals are ``namespace``: imported from the
    module ``table`` names for it and kept in ``namespace`` (later look-ups find it there);
    ``AttributeError`` for a name the table does not hold."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
