"""The ``code`` view (time per Python function) and ``perfkit export --to pprof``, on a real torch
run profiled with ``with_stack=True``: the view recomputed from the raw frames, the pprof file
decoded by a reader of its own here, and read back by Go's ``pprof -top`` where Go is installed."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stack_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "mlp_models.py"), "torch",
         str(tmp_path_factory.mktemp("stack")), "stack"],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


def _steps(run: perfkit_core.Run) -> int:
    return int(run.events.loc[run.events["kind"] == "step", "step"].nunique())


def test_code_view_recomputed_from_the_frames(stack_run: Path) -> None:
    run = perfkit_core.load(stack_run)
    view = run.summary("code").set_index("name")
    ev = run.events
    frames = ev[(ev["kind"] == "python") & (ev["stream"] < 0) & (ev["step"] >= 0)]
    steps = _steps(run)
    # The model's forward: called once a step, its time with children its calls' durations.
    fwd = frames[frames["name"].astype(str).str.contains(r"mlp_models\.py\(\d+\): forward")]
    row = view.loc[next(n for n in view.index if n.startswith("forward (") and "mlp_models.py:" in n)]
    assert row["calls_per_step"] == pytest.approx(len(fwd) / steps)
    assert row["host_with_children_ns"] == pytest.approx(fwd["dur_ns"].sum() / steps)
    # Own time recomputed by interval containment on each thread (not through the parent
    # column): a frame's duration less its direct callees', over the frames in the steps.
    every = ev[(ev["kind"] == "python") & (ev["stream"] < 0)]
    own_total = 0.0
    for _, thread in every.groupby("tid"):
        start = thread["start_ns"].to_numpy()
        end = start + thread["dur_ns"].to_numpy()
        in_step = thread["step"].to_numpy() >= 0
        own = (end - start).astype(float)
        stack: list[int] = []
        for i in np.lexsort((-end, start)).tolist():
            while stack and start[i] >= end[stack[-1]]:
                stack.pop()
            if stack:
                own[stack[-1]] -= end[i] - start[i]
            stack.append(i)
        own_total += own[in_step].sum()
    assert view["host_own_ns"].sum() == pytest.approx(own_total / steps, rel=1e-9)
    # The linear built-in holds the matmuls: its own time is the frames' full duration.
    linear = frames[frames["name"].astype(str) == "<built-in function linear>"]
    assert view.loc["built-in: linear", "host_own_ns"] == pytest.approx(
        linear["dur_ns"].sum() / steps
    )


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i += 1
        shift += 7
        if not byte & 0x80:
            return value, i


def _fields(data: bytes) -> list[tuple[int, object]]:
    """A protobuf message's (field number, value) pairs: ints, or bytes for wire type 2."""
    out: list[tuple[int, object]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            out.append((number, data[i : i + size]))
            i += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def _packed(data: bytes) -> list[int]:
    values, i = [], 0
    while i < len(data):
        v, i = _varint(data, i)
        values.append(v)
    return values


def decode_pprof(path: Path) -> tuple[dict[str, float], dict[str, float]]:
    """(flat, cum) ns per function name of a gzipped profile.proto, decoded here."""
    fields = _fields(gzip.decompress(path.read_bytes()))
    strings = [bytes(v).decode() for n, v in fields if n == 6]  # type: ignore[arg-type]
    function_name = {}
    for n, v in fields:
        if n == 5:
            f = dict(_fields(v))  # type: ignore[arg-type]
            function_name[f[1]] = strings[f.get(2, 0)]
    location_function = {}
    for n, v in fields:
        if n == 4:
            loc = _fields(v)  # type: ignore[arg-type]
            lid = dict(loc)[1]
            line = dict(_fields(next(x for k, x in loc if k == 4)))  # type: ignore[arg-type]
            location_function[lid] = function_name[line[1]]
    flat: dict[str, float] = {}
    cum: dict[str, float] = {}
    for n, v in fields:
        if n == 2:
            sample = dict(_fields(v))  # type: ignore[arg-type]
            names = [location_function[x] for x in _packed(sample[1])]  # type: ignore[arg-type]
            value = float(_packed(sample[2])[0])  # type: ignore[arg-type]
            flat[names[0]] = flat.get(names[0], 0.0) + value
            for name in set(names):
                cum[name] = cum.get(name, 0.0) + value
    return flat, cum


def test_pprof_export_holds_the_code_view(stack_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "code.pb.gz"
    assert main(["export", str(stack_run), "--to", "pprof", "-o", str(out)]) == 0
    flat, cum = decode_pprof(out)
    run = perfkit_core.load(stack_run)
    view = run.summary("code").set_index("name")
    steps = _steps(run)
    for name, row in view.iterrows():
        if row["host_own_ns"] * steps >= 1:
            assert flat[name] == pytest.approx(row["host_own_ns"] * steps, abs=steps)
        assert cum.get(name, 0.0) == pytest.approx(
            row["host_with_children_ns"] * steps, rel=1e-6, abs=steps + 1
        )


_UNITS = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1.0}


def _pprof_ns(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(s|ms|us|µs|ns)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (Debian: golang-go)")
def test_go_pprof_reads_the_same_top_functions(stack_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "code.pb.gz"
    assert main(["export", str(stack_run), "--to", "pprof", "-o", str(out)]) == 0
    env = {**os.environ, "HOME": str(tmp_path), "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    result = subprocess.run(
        ["go", "tool", "pprof", "-top", "-nodecount=8", "-nodefraction=0", str(out)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [
        re.match(r"^\s*(\S+)\s+\S+\s+\S+\s+(\S+)\s+\S+\s+(.+?)\s*$", line)
        for line in result.stdout.splitlines()
        if re.match(r"^\s*[\d.]+(s|ms|us|µs|ns)\s", line)
    ]
    top = [(m[3], _pprof_ns(m[1]), _pprof_ns(m[2])) for m in rows if m]
    assert len(top) == 8
    run = perfkit_core.load(stack_run)
    steps = _steps(run)
    view = run.summary("code", order_by="host_own_ns").set_index("name")
    # pprof's top functions by own (flat) time are the code view's top ones (functions tied
    # within pprof's printed precision may swap places), with the same times.
    own = view["host_own_ns"].to_numpy() * steps
    assert top[0][0] == view.index[0]
    ninth = own[8] if len(own) > 8 else 0.0
    for name, _, _ in top:
        assert view.loc[name, "host_own_ns"] * steps >= ninth - 20_000, name
    for name, flat, cum in top:
        row = view.loc[name]
        assert flat == pytest.approx(row["host_own_ns"] * steps, rel=0.01, abs=20_000)
        assert cum == pytest.approx(row["host_with_children_ns"] * steps, rel=0.01, abs=20_000)
    # Every function pprof lists is one row of the code view, under its name: pprof cuts the
    # "(file:line)" off a name with brackets ("[genexpr] (...)") unless told not to demangle.
    every = subprocess.run(
        ["go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", str(out)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )
    assert every.returncode == 0, every.stderr[-2000:]
    listed = [
        m[3]
        for line in every.stdout.splitlines()
        if re.match(r"^\s*[\d.]+(s|ms|us|µs|ns)\s", line)
        and (m := re.match(r"^\s*(\S+)\s+\S+\s+\S+\s+(\S+)\s+\S+\s+(.+?)\s*$", line))
    ]
    assert sorted(listed) == sorted(view.index)
    assert any(name.startswith("[genexpr] (") for name in listed)


def test_code_view_without_frames_says_so(torch_profile) -> None:
    run = perfkit_core.load(torch_profile.runs[0])
    frame = run.summary("code")
    assert frame.empty and "with_stack=True" in frame.attrs["note"]
    layers_only = Path(torch_profile.runs[0]).parent / "layers.pb.gz"
    assert main(["export", str(torch_profile.runs[0]), "--to", "pprof", "-o", str(layers_only)]) == 0
    flat, _ = decode_pprof(layers_only)
    tree = run.summary("layers")
    steps = _steps(run)
    # Without frames the profile is the layer tree: each layer's own time over the steps.
    assert sum(flat.values()) == pytest.approx(tree["host_own_ns"].sum() * steps, abs=len(tree))
