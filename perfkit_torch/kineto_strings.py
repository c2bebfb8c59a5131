"""Per-trace string coding for the Kineto reader.

A trace of half a million events holds a few hundred distinct names, categories, call stacks and
argument texts (``Input Dims``, ``Input type``, ``Concrete Inputs``, ``grid``, ``block``). Each
distinct value is given an integer code the first time a piece of the trace shows it (``Codes``), so a piece
becomes int32 code arrays in one C-level pass per field, and each distinct value is looked at
(classified, decoded, range-checked) once per trace instead of once per piece or per event. The
event table's categoricals are made once, at the end, from the codes and the distinct values.

``EventKeys`` codes an event's (phase, category, name, pid, tid) together: everything the reader
decides from those fields (row, flow or metadata; kind; step number; host pid and tid; device
category) is decided once per distinct key and looked up per event with numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from perfkit_core.events import KINDS, check_int_range
from perfkit_torch.kineto_format import (
    DEVICE_CATEGORIES,
    DEVICE_TYPE_OF_CATEGORY,
    FLOW_PHASES,
    FWDBWD_FLOW_CATEGORY,
    LAUNCH_FLOW_CATEGORIES,
    STEP_RE,
    Event,
    classify,
    int_id,
)

#: What an event is, by its phase: a row with a phase, a row without one (``{}`` padding when it
#: has no ``ts`` either), a flow event, a metadata event.
ROW, ROW_NO_PHASE, FLOW, META = 0, 1, 2, 3
#: What a flow event is for, by its phase and category: a launch-to-kernel link (``ac2g``), one
#: end of a forward-to-backward link (``fwdbwd``, ``s`` or ``f``), or another flow (and not a flow).
OTHER_FLOW, LAUNCH_FLOW, FWDBWD_FLOW = 0, 1, 2
#: The event table's ``kind`` categories, and the code of each.
KIND_ORDER = tuple(KINDS)
KIND_CODE = {kind: i for i, kind in enumerate(KIND_ORDER)}

_KEY = attrgetter("ph", "cat", "name", "pid", "tid")


class Codes(dict[Hashable, int]):
    """Distinct values, each mapped to an int code in the order they were first seen."""

    def __init__(self) -> None:
        super().__init__()
        #: The values in code order.
        self.values_in_order: list[Any] = []

    def __missing__(self, key: Hashable) -> int:
        code = self[key] = len(self.values_in_order)
        self.values_in_order.append(key)
        return code

    def encode(self, values: Iterable[Hashable], n: int) -> np.ndarray:
        """int32 codes of the ``n`` ``values`` (new values get new codes)."""
        return np.fromiter(map(self.__getitem__, values), np.int32, n)

    def encode_raw(self, raws: list[msgspec.Raw]) -> np.ndarray:
        """int32 codes of raw JSON values, keyed by their bytes."""
        # One C-level join and split turns the raw slices into bytes far faster than bytes()
        # each; JSON text holds no NUL byte, but a split that miscounts falls back to that.
        parts = b"\x00".join(raws).split(b"\x00") if raws else []
        if len(parts) != len(raws):
            parts = [bytes(r) for r in raws]
        return self.encode(parts, len(parts))


def _grow(array: np.ndarray, values: list[Any]) -> np.ndarray:
    return np.concatenate([array, np.asarray(values, dtype=array.dtype)]) if values else array


class EventKeys:
    """The distinct (ph, cat, name, pid, tid) of a trace's events and what each decides.

    ``encode(events)`` gives each event its key code; ``phase_class[code]`` says whether it is a
    row, a flow or metadata, and ``flow_class[code]`` what a flow is for. Keys of rows are then ``describe``d once: their name and category
    codes (``names``, ``categories``: first seen first, so the categoricals list them in the
    order the rows show them), kind, step number, host pid and tid, and device category.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.codes = Codes()
        self.names = Codes()
        self.categories = Codes()
        self.phase_class = np.zeros(0, dtype=np.int8)
        self.flow_class = np.zeros(0, dtype=np.int8)
        #: Per key, set once it was described (the arrays below hold its values).
        self.described = np.zeros(0, dtype=bool)
        self.name = np.zeros(0, dtype=np.int32)
        self.category = np.zeros(0, dtype=np.int32)
        self.kind = np.zeros(0, dtype=np.int8)
        self.step = np.zeros(0, dtype=np.int64)
        self.pid = np.zeros(0, dtype=np.int64)
        self.tid = np.zeros(0, dtype=np.int64)
        self.device_category = np.zeros(0, dtype=bool)
        #: The ``device_type`` label of the key's device events by category ("gpu" or, for
        #: ``DEVICE_TYPE_OF_CATEGORY``, its own), as an index into ``device_types``.
        self.device_type = np.zeros(0, dtype=np.int16)
        #: The trace's ``device_type`` labels, in the order they were first needed.
        self.device_types = ["cpu", "gpu"]

    def encode(self, events: list[Event]) -> np.ndarray:
        """The key code of each event (new keys get their phase class)."""
        known = len(self.phase_class)
        codes = self.codes.encode(map(_KEY, events), len(events))
        new = self.codes.values_in_order[known:]
        if new:
            self.phase_class = _grow(self.phase_class, [_phase_class(k[0]) for k in new])
            self.flow_class = _grow(self.flow_class, [_flow_class(k[0], k[1]) for k in new])
            self.described = _grow(self.described, [False] * len(new))
            for name, array in (
                ("name", self.name),
                ("category", self.category),
                ("kind", self.kind),
                ("step", self.step),
                ("pid", self.pid),
                ("tid", self.tid),
                ("device_category", self.device_category),
                ("device_type", self.device_type),
            ):
                setattr(self, name, _grow(array, [0] * len(new)))
        return codes

    def describe_rows(self, row_keys: np.ndarray) -> None:
        """Describe the keys of rows not described yet, in the order the rows show them;
        ``TraceError`` for a step number, pid or tid out of range."""
        fresh = ~self.described[row_keys]
        if not fresh.any():
            return
        keys, first = np.unique(row_keys[fresh], return_index=True)
        for code in keys[np.argsort(first)].tolist():
            self._describe(code)

    def _describe(self, code: int) -> None:
        path = self.path
        _ph, cat, name, pid, tid = self.codes.values_in_order[code]
        kind = classify(cat, name)
        match = STEP_RE.match(name)
        step = -1
        if match:
            number = check_int_range(path, int(match.group(1)), f"{name!r}: step number")
            step = number if kind == "step" else -1
        pid_value = pid if type(pid) is int else int_id(pid)
        tid_value = tid if type(tid) is int else int_id(tid, device=True)
        check_int_range(path, pid_value, "pid")
        check_int_range(path, tid_value, "tid")
        lower = cat.lower()
        label = DEVICE_TYPE_OF_CATEGORY.get(lower)
        if label is not None and label not in self.device_types:
            self.device_types.append(label)
        self.name[code] = self.names[name]
        self.category[code] = self.categories[cat]
        self.kind[code] = KIND_CODE[kind]
        self.step[code] = step
        self.pid[code] = pid_value
        self.tid[code] = tid_value
        self.device_category[code] = lower in DEVICE_CATEGORIES
        self.device_type[code] = 1 if label is None else self.device_types.index(label)
        self.described[code] = True

    def device_type_code(self, label: str) -> int:
        """The index of ``label`` in ``device_types`` (added when new)."""
        if label not in self.device_types:
            self.device_types.append(label)
        return self.device_types.index(label)


def _flow_class(ph: str, cat: str) -> int:
    if cat == FWDBWD_FLOW_CATEGORY and ph in ("s", "f"):
        return FWDBWD_FLOW
    if cat.lower() in LAUNCH_FLOW_CATEGORIES:
        return LAUNCH_FLOW
    return OTHER_FLOW


def _phase_class(ph: str) -> int:
    if ph in FLOW_PHASES:
        return FLOW
    if ph == "M":
        return META
    return ROW if ph else ROW_NO_PHASE


class TraceStrings:
    """Everything a trace's pieces code per trace: event keys and argument texts."""

    def __init__(self, path: Path) -> None:
        self.keys = EventKeys(path)
        #: ``args`` that most events lack or share, as one key: (``external id``, ``flops``,
        #: ``Call stack``). ``rare_*`` hold each key's values (``rare_int``: whether its
        #: ``external id`` is an int, which text is not).
        self.rare = Codes()
        self.rare_ext_old = np.zeros(0, dtype=np.int64)
        self.rare_int = np.zeros(0, dtype=bool)
        self.rare_flops = np.zeros(0, dtype=np.float64)
        self.rare_stack = np.zeros(0, dtype=np.int32)
        self.stacks = Codes()
        #: ``Input Dims``, ``Input type`` and ``Concrete Inputs`` of an event together, as
        #: ``dims + b"\x01" + types + b"\x01" + values`` (they go together: one code per
        #: triple is one pass instead of three).
        self.inputs = Codes()
        self.grids = Codes()
        self.blocks = Codes()


def categorical(codes: np.ndarray, labels: list[str]) -> Any:
    """A categorical of ``codes`` into ``labels``; equal labels become one category (the first)."""
    import pandas as pd

    # The distinct labels in order, and each label's category, in C-level passes: a trace's
    # ``Concrete Inputs`` alone can hold tens of thousands of distinct texts.
    uniq = list(dict.fromkeys(labels))
    index = dict(zip(uniq, range(len(uniq)), strict=True))
    # Codes as narrow as pandas keeps them, made in one step.
    remap = np.fromiter(map(index.__getitem__, labels), code_dtype(len(uniq)), len(labels))
    return pd.Categorical.from_codes(remap[codes], categories=uniq)


def code_dtype(n_categories: int) -> np.dtype:
    """The integer type pandas keeps the codes of ``n_categories`` categories in."""
    for dtype in (np.int8, np.int16, np.int32):
        if n_categories < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def text_labels(values: list[bytes], transform: Callable[[str], str] | None = None) -> list[str]:
    """Labels of raw JSON texts: decoded (invalid UTF-8 replaced), then ``transform``ed."""
    # One C-level decode and split for all: JSON text holds no NUL, and ASCII ends any invalid
    # UTF-8 sequence, so the replacements are those of decoding each value alone.
    labels = b"\x00".join(values).decode("utf-8", "replace").split("\x00") if values else []
    if len(labels) != len(values):
        labels = [v.decode("utf-8", "replace") for v in values]
    return [transform(label) for label in labels] if transform else labels


def text_fields(values: list[bytes], fields: int) -> list[list[str]]:
    """The first ``fields`` parts of each of ``values`` (raw JSON texts joined by ``\\x01``, as
    ``TraceStrings.inputs`` keeps them; each holds at least ``fields``), decoded as
    ``text_labels`` does: one list per part.
    """
    # Decoded and split in one C-level call each, as in ``text_labels``; where the count of
    # parts is not ``fields`` per value, a value holds a ``\\x01`` of its own: split alone.
    flat = b"\x01".join(values).decode("utf-8", "replace").split("\x01") if values else []
    if len(flat) == fields * len(values):
        return [flat[i::fields] for i in range(fields)]
    parts = [v.split(b"\x01") for v in values]
    return [text_labels([p[i] for p in parts]) for i in range(fields)]


_RARE = attrgetter("external_id_old", "flops", "call_stack")


def encode_rare(strings: TraceStrings, args: list[Any]) -> np.ndarray:
    """The ``rare`` key code of each of the rows' ``args`` (new keys get their values)."""
    known = len(strings.rare_int)
    codes = strings.rare.encode(map(_RARE, args), len(args))
    new = strings.rare.values_in_order[known:]
    if new:
        ext_old = [v[0] if type(v[0]) is int else -1 for v in new]
        strings.rare_ext_old = _grow(strings.rare_ext_old, ext_old)
        strings.rare_int = _grow(strings.rare_int, [type(v[0]) is int for v in new])
        flops = [math.nan if v[1] is None else v[1] for v in new]
        strings.rare_flops = _grow(strings.rare_flops, flops)
        strings.rare_stack = _grow(strings.rare_stack, [strings.stacks[v[2]] for v in new])
    return codes
