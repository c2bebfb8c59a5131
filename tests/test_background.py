"""The helper process that converts traces off the training loop."""

from __future__ import annotations

import shutil

import pandas as pd

import perfkit_core
from conftest import shared_trace
from perfkit_core.capture.background import BackgroundConverter, convert_file


def test_helper_converts_like_a_direct_load(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("resnet_nw4"), trace)
    converter = BackgroundConverter()
    done = []
    converter.submit(
        trace,
        tmp_path / "run",
        {"host": "h1", "extra": {"note": "x"}},
        keep_trace=True,
        done=lambda run_dir, error: done.append((run_dir, error)),
    )
    assert converter.wait(timeout=120)
    converter.close(timeout=30)
    assert done == [(tmp_path / "run", None)]
    saved = perfkit_core.load(tmp_path / "run")
    direct = perfkit_core.load(trace)
    pd.testing.assert_frame_equal(saved.events, direct.events)
    assert saved.meta["host"] == "h1" and saved.meta["extra"]["note"] == "x"
    assert trace.exists()  # keep_trace


def test_helper_reports_bad_input_and_keeps_the_file(tmp_path):
    trace = tmp_path / "bad.json"
    trace.write_bytes(b'{"traceEvents": [')
    converter = BackgroundConverter()
    done = []
    converter.submit(
        trace, tmp_path / "run", {}, keep_trace=False, done=lambda d, e: done.append(e)
    )
    assert converter.wait(timeout=60)
    converter.close(timeout=30)
    assert len(done) == 1 and "TraceError" in done[0] and "truncated" in done[0]
    assert trace.exists()


def test_helper_death_fails_pending_jobs(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("a100_rank3"), trace)
    converter = BackgroundConverter()
    errors = []
    converter.submit(
        trace, tmp_path / "run", {}, keep_trace=False, done=lambda d, e: errors.append(e)
    )
    converter._proc.kill()  # the helper dies before it answers
    assert converter.wait(timeout=60)
    assert len(errors) == 1 and "exited" in errors[0]
    assert trace.exists()
    # The next job starts a new helper.
    converter.submit(
        trace, tmp_path / "run2", {}, keep_trace=True, done=lambda d, e: errors.append(e)
    )
    assert converter.wait(timeout=120)
    converter.close(timeout=30)
    assert errors[1] is None and (tmp_path / "run2" / "meta.json").is_file()


def test_convert_file_removes_the_trace_only_after_saving(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("gloo_rank34"), trace)
    convert_file(trace, tmp_path / "run", {"framework_version": "9.9"}, keep_trace=False)
    assert not trace.exists()
    run = perfkit_core.load(tmp_path / "run")
    assert run.meta["framework_version"] == "9.9" and run.meta["source"] is None
