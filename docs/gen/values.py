"""Single values from the code, for use inside a sentence.

``<!-- gen: code perfkit_torch.kineto_format.FLOW_PHASES -->`` gives the value as code spans
(each item of a collection, sets sorted; a regular expression's pattern); ``value`` gives it as
plain text (a number, a sentence). Both take the dotted path of a module attribute, and of a
dict's entries below it by their keys (``...OPTIMIZER_SPEEDUPS.torch.Adam``).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from gen import generator
from gen.markdown import DocsError, code, codes


def resolve(path: str) -> Any:
    """Return the object at the dotted ``path`` (``package.module.ATTRIBUTE``, then a dict's
    keys)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                # a table's entry by its key: OPTIMIZER_SPEEDUPS.torch.Adam
                obj = obj[attr] if isinstance(obj, dict) else getattr(obj, attr)
        except (AttributeError, KeyError):
            raise DocsError(f"{path} does not exist any more") from None
        return obj
    raise DocsError(f"no module in {path!r}")


@generator("code")
def code_value(path: str) -> str:
    """The value at ``path`` as code: a collection item by item, a pattern as its text."""
    value = resolve(path)
    if isinstance(value, re.Pattern):
        return code(value.pattern)
    if isinstance(value, str | bytes):
        return code(value.decode() if isinstance(value, bytes) else value)
    if isinstance(value, dict | list | tuple | set | frozenset):
        items = [v.decode() if isinstance(v, bytes) else v for v in value]
        return codes(set(items) if isinstance(value, set | frozenset) else items)
    return code(value)


@generator("value")
def plain_value(path: str) -> str:
    """The value at ``path`` as plain text (numbers without a trailing ``.0``)."""
    value = resolve(path)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
