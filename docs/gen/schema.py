"""The event table's columns, kinds and run metadata (``perfkit_core.events.schema``)."""

from __future__ import annotations

from gen import generator
from gen.markdown import code, table
from perfkit_core.events import schema


@generator("schema.columns")
def columns() -> str:
    """One row per column of the event table, in order."""
    rows = []
    for col in schema.COLUMNS:
        if col.dtype == "category":
            none = code('""')
        elif col.dtype.startswith("float"):
            none = "NaN"
        else:
            none = "" if col.missing is None else code(col.missing)
        unit = {"row": "row position"}.get(col.unit, col.unit)
        rows.append([code(col.name), col.dtype, unit, none, col.description])
    return table(["column", "dtype", "unit", "none", "meaning"], rows)


@generator("schema.kinds")
def kinds() -> str:
    """Every value of the ``kind`` column."""
    return table(["kind", "meaning"], [[code(k), v] for k, v in schema.KINDS.items()])


@generator("schema.meta")
def meta_keys() -> str:
    """Every key of ``Run.meta``."""
    return table(["key", "holds"], [[code(k), v] for k, v in schema.META_KEYS.items()])
