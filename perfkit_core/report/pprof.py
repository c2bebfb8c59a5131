"""A run as a pprof profile: the gzipped ``profile.proto`` that Go's ``pprof``, speedscope and
continuous-profiling services read, written by a small protobuf encoder of its own (perfkit
depends on no protobuf library).

Where the trace recorded Python frames (torch ``with_stack=True``), each frame call in the
steps is one sample: its stack (the call and the frames around it, innermost first) and its
own host time in ns (``perfkit_core.views.code.code_frames``), so ``pprof -top`` gives each
function's own time as *flat* and its time with children as *cum*, over all the profiled steps
(the ``code`` view gives the same per step). A run without Python frames is written as its
layer tree instead: one sample per layer with its own host time (``layers`` view, over all the
steps), its stack the layer path, and ``(no layer)`` for the forward and backward time outside
layers.
"""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING

import numpy as np

from perfkit_core.errors import OptionError

if TYPE_CHECKING:
    from perfkit_core.events.run import Run


def _varint(value: int) -> bytes:
    """``value`` (>= 0, or a negative int64 as two's complement) as a protobuf varint."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    """Field ``number`` (wire type varint) holding ``value``; nothing for 0 (the default)."""
    return _varint(number << 3) + _varint(value) if value else b""


def _bytes_field(number: int, payload: bytes) -> bytes:
    """Field ``number`` (wire type length-delimited) holding ``payload``."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _packed(number: int, values: list[int]) -> bytes:
    """A packed repeated varint field."""
    return _bytes_field(number, b"".join(_varint(v) for v in values)) if values else b""


class _Strings:
    """The profile's string table (index 0 is the empty string)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        if text not in self.index:
            self.index[text] = len(self.index)
        return self.index[text]


def encode_profile(
    stacks: list[list[tuple[str, str, int]]],
    values: list[int],
    *,
    sample_type: tuple[str, str] = ("wall", "nanoseconds"),
    duration_ns: int = 0,
) -> bytes:
    """The gzipped ``profile.proto`` of samples: ``stacks[i]`` the frames of sample ``i``,
    innermost first, each (function name, file, line); ``values[i]`` its value in
    ``sample_type``'s unit."""
    strings = _Strings()
    functions: dict[tuple[str, str, int], int] = {}
    body = bytearray()
    value_type = _int_field(1, strings(sample_type[0])) + _int_field(2, strings(sample_type[1]))
    body += _bytes_field(1, value_type)
    for stack, value in zip(stacks, values, strict=True):
        ids = []
        for frame in stack:
            if frame not in functions:
                functions[frame] = len(functions) + 1
            ids.append(functions[frame])
        body += _bytes_field(2, _packed(1, ids) + _packed(2, [int(value)]))
    for (_, _, line), fid in functions.items():
        # One location per function: its id, and one line naming the function at its start.
        line_msg = _int_field(1, fid) + _int_field(2, line)
        body += _bytes_field(4, _int_field(1, fid) + _bytes_field(4, line_msg))
    for (name, file, line), fid in functions.items():
        # No system name: pprof reads a function whose system name equals its name as one to
        # demangle, and cuts the "(file:line)" off a name holding brackets ("[genexpr]
        # (train.py:12)" showed as "[genexpr]", every generator expression in one row).
        function = (
            _int_field(1, fid)
            + _int_field(2, strings(name))
            + _int_field(4, strings(file))
            + _int_field(5, line)
        )
        body += _bytes_field(5, function)
    table = list(strings.index)  # insertion order: the indices given out
    for text in table:
        body += _bytes_field(6, text.encode())
    body += _int_field(10, duration_ns)
    body += _bytes_field(11, value_type)
    return gzip.compress(bytes(body), mtime=0)


def code_samples(run: Run) -> tuple[list[list[tuple[str, str, int]]], list[int]]:
    """(stacks, own ns) of every Python frame call in the run's steps (all of them when the
    run recorded no steps), frames with no own time left out."""
    from perfkit_core.views.code import code_frames, steps_taken

    frames = code_frames(run)
    wanted = steps_taken(run, None)
    take = np.isin(frames.step, wanted) if wanted is not None else np.ones(len(frames.rows), bool)
    named = [(name, file, line) for name, file, line, _ in frames.functions]
    stacks, values = [], []
    for i in np.flatnonzero(take & (frames.own_ns > 0)).tolist():
        stack = []
        j = i
        while j >= 0:
            stack.append(named[int(frames.function[j])])
            j = int(frames.caller[j])
        stacks.append(stack)
        values.append(round(float(frames.own_ns[i])))
    return stacks, values


def layer_samples(run: Run) -> tuple[list[list[tuple[str, str, int]]], list[int]]:
    """(stacks, own ns over all the steps) of the layers view's rows: a layer's stack is its
    path, innermost first."""
    from perfkit_core.views.code import steps_taken
    from perfkit_core.views.layers import NO_LAYER

    tree = run.summary("layers")
    steps = len(steps_taken(run, None) or [0])
    names = dict(zip(tree["path"], tree["name"], strict=True))
    stacks, values = [], []
    for path, name, own in zip(tree["path"], tree["name"], tree["host_own_ns"], strict=True):
        if own != own:  # NaN: a run without steps has no layer times
            continue
        value = round(float(own) * steps)
        if value <= 0:
            continue
        if name == NO_LAYER:
            stacks.append([(NO_LAYER, "", 0)])
        else:
            parts = str(path).split("/")
            keys = ["/".join(parts[: k + 1]) for k in range(len(parts))]
            stacks.append([(f"{names.get(k, k)} [{k}]", "", 0) for k in reversed(keys)])
        values.append(value)
    return stacks, values


def pprof_profile(run: Run) -> bytes:
    """The gzipped pprof profile of ``run`` (see the module docstring); ``OptionError`` when the
    run recorded neither Python frames nor steps to cut into layers."""
    stacks, values = code_samples(run)
    if not stacks:
        stacks, values = layer_samples(run)
    if not stacks:
        raise OptionError(
            "nothing to write as a pprof profile: the run recorded no Python frames (torch: "
            "with_stack=True) and no step time in forward and backward phases"
        )
    span = run.meta.get("span_ns") or [0, 0]
    return encode_profile(stacks, values, duration_ns=int(span[1] - span[0]))
