"""The co-run replay: how much a loader worker on a free core and the training step slow each
other (``perfkit_core.advice.corun``), run for real with a second interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfkit_core.advice import corun, corun_loading


def _children() -> set[int]:
    """The pids of this process's live children (Linux), or an empty set elsewhere."""
    try:
        listed = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text()
    except OSError:
        return set()
    return {int(pid) for pid in listed.split()}


def _numpy_work(items: int) -> None:  # the training side: NumPy ops, not a framework's
    import numpy as np

    x = np.ones((64, 64))
    for _ in range(items):
        x = np.tanh(x @ x * 0.01)


def test_the_replay_gives_two_slowdowns_and_leaves_no_process_behind():
    before = _children()
    training, loading = corun.corun_slowdowns(_numpy_work, unit_ns=2e6, rounds=3)
    assert training >= 1.0 and loading >= 1.0
    assert _children() <= before


def test_the_loading_script_answers_its_protocol():
    """``corun_loading`` run as a script: ``alone`` answers three units' ns, ``beside`` answers
    ``busy`` and then, at ``stop``, the units it ran, and ``end`` stops it."""
    process = subprocess.Popen(
        [sys.executable, corun_loading.__file__, "1000000"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        process.stdin.write("alone\n")
        process.stdin.flush()
        alone = process.stdout.readline().split()
        assert len(alone) == 3 and all(int(unit) > 0 for unit in alone)
        process.stdin.write("beside\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "busy"
        import time

        time.sleep(0.05)  # about 50 units of 1 ms
        process.stdin.write("stop\n")
        process.stdin.flush()
        units = [int(word) for word in process.stdout.readline().split()]
        assert units and all(unit > 0 for unit in units)
        process.stdin.write("end\n")
        process.stdin.flush()
        assert process.wait(20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_second_process_that_does_not_answer_is_an_error_and_is_stopped(
    tmp_path, monkeypatch
):
    """The step timer and ``--measure`` take the error for no answer; the silent process is
    killed, not left running."""
    silent = tmp_path / "silent.py"
    silent.write_text("import time\ntime.sleep(600)\n")
    monkeypatch.setattr(corun, "corun_loading", SimpleNamespace(__file__=str(silent)))
    monkeypatch.setattr(corun, "CORUN_TIMEOUT_S", 0.5)
    before = _children()
    with pytest.raises(RuntimeError, match="did not answer"):
        corun.corun_slowdowns(_numpy_work, unit_ns=1e6, rounds=2)
    assert _children() <= before
    ended = tmp_path / "ended.py"
    ended.write_text("")
    monkeypatch.setattr(corun, "corun_loading", SimpleNamespace(__file__=str(ended)))
    with pytest.raises((RuntimeError, OSError)):  # ended before or after it was spoken to
        corun.corun_slowdowns(_numpy_work, unit_ns=1e6, rounds=2)
    assert _children() <= before


def test_the_loading_work_is_the_same_work_each_time():
    assert corun_loading.loading_work(20) == corun_loading.loading_work(20)
    assert corun_loading.unit_items(corun_loading.loading_work, 1e6) >= 1
