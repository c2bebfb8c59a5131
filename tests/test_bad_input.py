"""Bad input: one TraceError naming the file and the reason; the CLI prints one line, exits 2."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

import perfkit_core
from perfkit_core import TraceError
from perfkit_core.cli import main

GOOD = {
    "schemaVersion": 1,
    "traceEvents": [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 1,
            "tid": 1,
            "ts": 10.5,
            "dur": 2.25,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "brand_new_category",
            "name": "mystery",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 1,
        },
    ],
}


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


CASES = {
    "not_a_trace.json": (b'{"hello": "world", "numbers": [1, 2, 3]}', "not a trace"),
    "text.json": (b"this is not json at all\n", "not a trace"),
    "empty.json": (b"", "empty"),
    "blank.json": (b"   \n  ", "empty"),
    "truncated.json": (json.dumps(GOOD).encode()[:-40], "truncated"),
    "broken.json.gz": (gzip.compress(json.dumps(GOOD).encode())[:-30], "gzip"),
    "garbage.json.gz": (b"\x1f\x8b" + b"\x00garbage" * 10, "gzip"),
    "no_events.json": (b'{"schemaVersion": 1, "traceEvents": []}', "no events"),
    "wrong_types.json": (
        b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": "soon"}]}',
        "not a Kineto trace",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_file_raises_trace_error_naming_file(tmp_path, name):
    data, reason = CASES[name]
    path = write(tmp_path, name, data)
    with pytest.raises(TraceError) as info:
        perfkit_core.load(path)
    message = str(info.value)
    assert str(path) in message
    assert reason.lower() in message.lower()
    assert "\n" not in message
    assert info.value.path == str(path)


def test_bare_list_of_events_is_a_chrome_trace(tmp_path):
    # The chrome trace format allows a bare JSON list of events (torch's legacy autograd profiler
    # writes one); it loads like the same events inside {"traceEvents": [...]}.
    listed = perfkit_core.load(
        write(tmp_path, "list.json", json.dumps(GOOD["traceEvents"]).encode())
    )
    wrapped = perfkit_core.load(write(tmp_path, "object.json", json.dumps(GOOD).encode()))
    assert listed.events["name"].astype(str).tolist() == wrapped.events["name"].astype(str).tolist()
    assert (
        listed.events["start_ns"].tolist()
        == wrapped.events["start_ns"].tolist()
        == [10_500, 20_000]
    )


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        perfkit_core.load(tmp_path / "nope.json")


def test_empty_directory(tmp_path):
    with pytest.raises(TraceError, match=r"no profiler trace in this folder .* it holds nothing"):
        perfkit_core.load(tmp_path)


@pytest.mark.parametrize(
    "name", ["truncated.json", "broken.json.gz", "not_a_trace.json", "no_events.json"]
)
def test_cli_prints_one_line_and_exits_2(tmp_path, name, capsys):
    data, _reason = CASES[name]
    path = write(tmp_path, name, data)
    code = main(["report", str(path)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("perfkit: error: ") and str(path) in lines[0]
    assert "Traceback" not in captured.err


def test_console_script_exit_code(tmp_path):
    path = write(tmp_path, "empty.json", b"")
    proc = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "empty" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_category_is_kept_as_other(tmp_path):
    path = write(tmp_path, "good.json", json.dumps(GOOD).encode())
    run = perfkit_core.load(path)
    row = run.events[run.events["name"] == "mystery"].iloc[0]
    assert row["kind"] == "other"
    assert row["category"] == "brand_new_category"
    add = run.events[run.events["name"] == "aten::add"].iloc[0]
    assert add["start_ns"] == 10_500 and add["dur_ns"] == 2_250
    assert run.meta["accounting"]["rows"] == 2


def test_unknown_view_is_one_line(tmp_path, capsys):
    path = write(tmp_path, "good.json", json.dumps(GOOD).encode())
    assert main(["report", str(path), "--views", "operator,nonsense"]) == 2
    err = capsys.readouterr().err
    assert "unknown view 'nonsense'" in err and err.count("\n") == 1


def test_folder_of_saved_runs_names_them(tmp_path):
    import shutil

    from conftest import shared_trace

    run = perfkit_core.load(shared_trace("gloo_rank34"))
    run.save(tmp_path / "w.step1")
    run.save(tmp_path / "w.step2")
    with pytest.raises(TraceError, match=r"2 saved runs .*w\.step1, w\.step2"):
        perfkit_core.load(tmp_path)
    shutil.rmtree(tmp_path / "w.step2")
