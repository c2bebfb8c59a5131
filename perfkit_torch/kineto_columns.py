"""Column builders for the Kineto reader: typed event fields to numpy arrays and pandas
categoricals, and how a row is named in messages."""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from perfkit_core.events import INT64_MAX, INT64_MIN, TraceError, check_int_range
from perfkit_torch.kineto_format import Event, _Args, int_id, parse_int

#: The JSON key of each ``_Args`` field, for messages.
_ARG_KEYS = dict(zip(_Args.__struct_fields__, _Args.__struct_encode_fields__, strict=True))


def _categorical_from_raw(raws: list[msgspec.Raw], *, dims: bool = False) -> Any:
    """Categorical of raw JSON values: ``[64, 1, 1]`` becomes ``64,1,1`` when ``dims``."""
    import pandas as pd

    # One C-level join and split turns the raw slices into bytes far faster than bytes() each.
    parts = b"\x00".join(raws).split(b"\x00") if raws else []
    codes, uniques = pd.factorize(np.asarray(parts, dtype=object))
    labels = [u.decode("utf-8", "replace") for u in uniques]
    if dims:
        labels = [label.strip("[]").replace(" ", "") for label in labels]
    return _from_codes(codes, labels)


def _from_codes(codes: np.ndarray, labels: list[str]) -> Any:
    import pandas as pd

    uniq: dict[str, int] = {}
    remap = np.empty(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        remap[i] = uniq.setdefault(label, len(uniq))
    return pd.Categorical.from_codes(remap[codes] if len(codes) else codes, categories=list(uniq))


_get_ph = attrgetter("ph")
_get_args = attrgetter("args")
_get_dims = attrgetter("input_dims")
_get_types = attrgetter("input_type")
_get_stack = attrgetter("call_stack")


def _ints(objs: list[Any], attr: str, path: Path) -> np.ndarray:
    """Int64 column of ``attr`` of ``objs`` (events' args read from ``path``). Kineto writers
    put ints, or text: ROCm's writes ``"stream": "0x0"``. Decimal and hex text are read as the
    number they write; other text, or a number out of the int64 range, raises ``TraceError``."""
    try:
        return np.fromiter(map(attrgetter(attr), objs), np.int64, len(objs))
    except (ValueError, TypeError, OverflowError):
        pass  # text numpy does not read (hex): convert one at a time
    key = _ARG_KEYS.get(attr, attr)
    get = attrgetter(attr)
    out = np.empty(len(objs), dtype=np.int64)
    for i, obj in enumerate(objs):
        value = get(obj)
        number = value if type(value) is int else parse_int(str(value))
        if number is None:
            raise TraceError(
                path, f"args[{key!r}] is {value!r}: not an integer (decimal or 0x hex)"
            )
        out[i] = check_int_range(path, number, f"args[{key!r}]", low=INT64_MIN, high=INT64_MAX)
    return out


def _floats(objs: list[Any], attr: str) -> np.ndarray:
    """Float column of ``attr``; None (not recorded) becomes NaN."""
    return np.array(list(map(attrgetter(attr), objs)), dtype=np.float64)


def _ids(path: Path, rows: list[Event], attr: str, *, device: bool = False) -> np.ndarray:
    """Integer ids (pid/tid); Kineto writes ints, older traces strings like "25738" or "stream 7".

    Ids repeat a lot, so only the distinct values are converted (and range-checked: a string
    may hold any number of digits).
    """
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(list(map(attrgetter(attr), rows)), dtype=object))
    values = [v if type(v) is int else int_id(v, device=device) for v in uniques]
    for v in values:
        check_int_range(path, v, attr)
    converted = np.array(values, dtype=np.int64)
    return converted[codes] if len(codes) else np.empty(0, dtype=np.int64)


def _scatter_categorical(n: int, rows: np.ndarray, values: Any) -> Any:
    """A length-``n`` categorical holding ``values`` at ``rows`` and "" elsewhere."""
    import pandas as pd

    categories = list(values.categories)
    if "" not in categories:
        categories.append("")
    codes = np.full(n, categories.index(""), dtype=np.int32)
    codes[rows] = values.codes
    return pd.Categorical.from_codes(codes, categories=categories)


def _describe(rows: list[Event], row_index: np.ndarray, i: int) -> str:
    """``traceEvents[7] ("aten::add")``: where row ``i`` came from, for messages."""
    name = rows[i].name
    shown = name if len(name) <= 60 else name[:57] + "..."
    return f"traceEvents[{int(row_index[i])}] ({shown!r})"


def _stack_categorical(stacks: list[str]) -> Any:
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(stacks, dtype=object))
    labels = ["\n".join(f for f in str(u).split(";") if f) for u in uniques]
    return _from_codes(codes, labels)
