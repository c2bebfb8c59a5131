"""The helper process that converts traces off the training loop."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pandas as pd

import perfkit_core
from conftest import shared_trace
from perfkit_core.capture.background import BackgroundConverter
from perfkit_core.capture.helper import MIN_IDLE_CORES, convert_file


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
    # the run's note says the helper gave it up, and why
    from perfkit_core.events import pending

    note = pending.read_note(tmp_path / "run")
    assert note is not None and note["error"] == done[0]
    assert not pending.helper_will_save(note)


def test_close_does_not_wait_for_a_process_forked_since_the_helper_started(tmp_path):
    """A process forked from the training process after the helper started (a DataLoader
    worker) holds the helper's input pipe open until it ends; closing tells the helper to stop
    instead of waiting for the pipe's end, which at the program's exit would wait for the
    worker while the worker waits for the program (a Paddle DataLoader's persistent workers)."""
    import signal

    trace = tmp_path / "bad.json"
    trace.write_bytes(b'{"traceEvents": [')
    converter = BackgroundConverter()
    converter.submit(trace, tmp_path / "run", {}, keep_trace=True, done=lambda d, e: None)
    assert converter.wait(timeout=60)
    helper = converter._proc
    child = os.fork()
    if child == 0:  # holds a copy of every descriptor of this process, as a forked worker does
        time.sleep(60)
        os._exit(0)
    try:
        converter.close(timeout=30)
        assert helper.returncode == 0  # it stopped when told, not killed when the wait ran out
        assert os.waitpid(child, os.WNOHANG) == (0, 0)  # while the forked process still ran
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def _wait_until(condition, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


def test_killed_helper_fails_only_the_run_it_was_converting(tmp_path):
    """The helper is killed while converting A, with B queued behind it and C sent right after
    the kill (before its reader saw the exit): only A fails, naming the kill; B and C go to a new
    helper and are saved. Repeated, since the kill races the next job."""
    source = shared_trace("a100_rank3")
    for trial in range(3):
        work = tmp_path / str(trial)
        work.mkdir()
        _kill_while_converting(work, source)


def _kill_while_converting(work, source):
    traces = {}
    for name in "ABC":
        traces[name] = work / f"{name}.json.gz"
        shutil.copy(source, traces[name])
    converter = BackgroundConverter(max_jobs=8, defer_bytes=0)
    done = {}

    def submit(name):
        converter.submit(
            traces[name],
            work / f"run{name}",
            {},
            keep_trace=False,
            done=lambda d, e: done.setdefault(name, (d, e)),
        )

    submit("A")
    submit("B")
    _wait_until(lambda: any(j.started for j in converter._pending.values()))
    first = converter._proc
    # What the helper leaves in A's folder when it is killed while saving: its claim on the
    # folder and the hidden temporary files of the two files it was writing.
    leftovers = [
        work / "runA" / ".perfkit-saving",
        work / "runA" / ".events.parquet.x1y2.tmp",
        work / "runA" / ".meta.json.x1y2.tmp",
    ]
    (work / "runA").mkdir(exist_ok=True)
    for path in leftovers:
        path.write_text(f"{first.pid} {socket.gethostname()}")
    first.kill()
    submit("C")
    assert converter.wait(timeout=300)
    converter.close(timeout=60)
    assert done["A"][0] == work / "runA"
    assert "killed by SIGKILL" in done["A"][1] and str(first.pid) in done["A"][1]
    assert traces["A"].is_file()  # the native trace of the failed run is kept
    assert not (work / "runA" / "meta.json").exists()
    # nothing half-written left behind; the note stays, so that a reader of the folder
    # converts the kept trace with the metadata the handler gave it
    assert [p.name for p in (work / "runA").iterdir()] == [".perfkit-pending"]
    assert perfkit_core.load(work / "runA").meta["ranks"] == [3]
    assert (work / "runA" / "meta.json").is_file()
    for name in "BC":
        assert done[name] == (work / f"run{name}", None), (name, done[name])
        assert perfkit_core.load(work / f"run{name}").meta["ranks"] == [3]
        assert not traces[name].exists()


def test_helper_runs_at_the_lowest_priority_with_one_thread(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("resnet_nw4"), trace)
    own_nice = os.getpriority(os.PRIO_PROCESS, 0)
    converter = BackgroundConverter(defer_bytes=0)
    converter.submit(trace, tmp_path / "run", {}, keep_trace=True, done=lambda d, e: None)
    _wait_until(
        lambda: any(j.started for j in converter._pending.values()) or not converter.pending()
    )
    pid = converter.helper_pid
    try:
        assert os.getpriority(os.PRIO_PROCESS, pid) == 19
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        environ = Path(f"/proc/{pid}/environ")
        if environ.exists():
            env = dict(
                item.split("=", 1) for item in environ.read_text().split("\0") if "=" in item
            )
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                assert env[name] == "1"
    finally:
        assert converter.wait(timeout=120)
        converter.close(timeout=30)
    # The training process keeps its own priority.
    assert os.getpriority(os.PRIO_PROCESS, 0) == own_nice


def test_helper_is_at_the_lowest_priority_as_soon_as_it_starts():
    """Its interpreter's start and imports do not compete with training: the program lowers
    the helper's priority as it starts it, before the helper could lower its own."""
    own_nice = os.getpriority(os.PRIO_PROCESS, 0)
    converter = BackgroundConverter()
    converter.start()
    pid = converter.helper_pid
    try:
        assert os.getpriority(os.PRIO_PROCESS, pid) == 19
        if hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
    finally:
        converter.close(timeout=30)
    assert os.getpriority(os.PRIO_PROCESS, 0) == own_nice


def test_queue_is_bounded_in_jobs_and_bytes(tmp_path):
    traces = []
    for i in range(2):
        traces.append(tmp_path / f"t{i}.json.gz")
        shutil.copy(shared_trace("a100_rank3"), traces[-1])
    size = traces[0].stat().st_size
    converter = BackgroundConverter(max_jobs=2, max_bytes=size + size // 2)
    assert converter.has_room(10 * size)  # an empty queue always takes the next trace
    converter.submit(traces[0], tmp_path / "r0", {}, keep_trace=True, done=lambda d, e: None)
    assert converter.pending_bytes() == size
    assert not converter.has_room(size)  # two would exceed max_bytes
    assert converter.has_room(size // 4)
    converter.submit(traces[1], tmp_path / "r1", {}, keep_trace=True, done=lambda d, e: None)
    assert not converter.has_room(0)  # max_jobs reached
    assert converter.wait_for_room(size, timeout=300)
    assert converter.pending() <= 1
    assert converter.wait(timeout=300)
    converter.close(timeout=30)
    assert converter.pending_bytes() == 0


def test_convert_file_sets_the_launchers_rank(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("resnet_nw4"), trace)
    convert_file(trace, tmp_path / "run", {"rank": 5, "world_size": 8}, keep_trace=True)
    run = perfkit_core.load(tmp_path / "run")
    assert run.meta["ranks"] == [5] and run.meta["rank"] == 5 and run.meta["world_size"] == 8
    assert (run.events["rank"] == 5).all()


def test_convert_file_removes_the_trace_only_after_saving(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("gloo_rank34"), trace)
    convert_file(trace, tmp_path / "run", {"framework_version": "9.9"}, keep_trace=False)
    assert not trace.exists()
    run = perfkit_core.load(tmp_path / "run")
    assert run.meta["framework_version"] == "9.9" and run.meta["source"] is None


class _Cores:
    """Stands in for ``IdleCores``: says ``idle`` cores were idle over every sample."""

    measurable = True

    def __init__(self, idle):
        self.idle = idle
        self.samples = 0

    def restart(self):
        pass

    def sample(self, min_s):
        self.samples += 1
        return self.idle


def _inbox(lines):
    from perfkit_core.capture.helper import Inbox

    read, write = os.pipe()
    writer = os.fdopen(write, "wb", buffering=0)
    for line in lines:
        writer.write(line)
    return Inbox(os.fdopen(read, "rb")), writer


def test_a_deferred_job_waits_for_an_idle_core_or_the_parents_hurry():
    import threading

    job = b'{"id": 0, "trace": "t", "defer": true}\n'
    # Busy cores: the job waits, sampling, until the parent says hurry.
    inbox, writer = _inbox([job])
    busy = _Cores(0.1)
    got = []
    thread = threading.Thread(target=lambda: got.append(inbox.next_job(busy)))
    thread.start()
    time.sleep(1.6)
    assert got == [] and busy.samples >= 2
    writer.write(b'{"hurry": 0}\n')
    thread.join(10)
    assert got and got[0]["id"] == 0
    # A hurry for an earlier id does not release a later job; closing the pipe does.
    inbox, writer = _inbox([b'{"hurry": 0}\n', job.replace(b'"id": 0', b'"id": 1')])
    got = []
    thread = threading.Thread(target=lambda: got.append(inbox.next_job(_Cores(0.0))))
    thread.start()
    time.sleep(1.1)
    assert got == []
    writer.close()
    thread.join(10)
    assert got and got[0]["id"] == 1
    assert inbox.next_job(_Cores(0.0)) is None  # closed and empty
    # While the parent exports, idle cores do not start it; once the export is over they do.
    inbox, writer = _inbox([b'{"hold": true}\n', job])
    idle, got = _Cores(MIN_IDLE_CORES), []
    thread = threading.Thread(target=lambda: got.append(inbox.next_job(idle)))
    thread.start()
    time.sleep(1.1)
    assert got == [] and idle.samples == 0
    writer.write(b'{"hold": false}\n')
    thread.join(10)
    assert got and got[0]["id"] == 0 and idle.samples == 1
    # An idle core lets it start; a job that is not deferrable never samples.
    inbox, writer = _inbox([job, b'{"id": 1, "trace": "t", "defer": false}\n'])
    idle, never = _Cores(MIN_IDLE_CORES), _Cores(MIN_IDLE_CORES - 0.01)
    assert inbox.next_job(idle)["id"] == 0 and idle.samples == 1
    assert inbox.next_job(never)["id"] == 1 and never.samples == 0
    writer.close()


def test_the_helper_readies_no_loaders_once_the_program_closed_the_pipe():
    """An exiting program's queue is converted after its exit; importing the loaders beside
    that exit would slow it, idle cores or not."""
    import threading

    from perfkit_core.capture.helper import ready_loaders

    inbox, writer = _inbox([b'{"id": 0, "trace": "t", "defer": true}\n'])
    writer.write(b'{"close": true, "exiting": true}\n')
    _wait_until(lambda: inbox.closed, timeout=10)
    idle = _Cores(8.0)
    ready = threading.Thread(target=ready_loaders, args=(inbox, idle))
    ready.start()
    ready.join(10)
    assert not ready.is_alive() and idle.samples == 0
    # While the pipe is open and the cores are busy it keeps sampling, and stops at the close.
    inbox, writer = _inbox([b'{"id": 0, "trace": "t", "defer": true}\n'])
    busy = _Cores(0.0)
    ready = threading.Thread(target=ready_loaders, args=(inbox, busy))
    ready.start()
    time.sleep(1.2)
    assert ready.is_alive() and busy.samples >= 1
    writer.close()
    ready.join(10)
    assert not ready.is_alive()


def _spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _busy_children(seconds):
    """One spinning process per usable core, for ``seconds``."""
    import multiprocessing

    from perfkit_core.capture.helper import usable_cores

    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(target=_spin, args=(seconds,), daemon=True)
        for _ in range(max(int(usable_cores() + 0.99), 1))
    ]
    for child in children:
        child.start()
    return children


def test_idle_cores_sees_a_busy_machine_and_a_busy_process():
    from perfkit_core.capture.helper import IdleCores, usable_cores

    children = _busy_children(6.0)
    try:
        time.sleep(1.0)  # they are running
        cores = IdleCores(children[0].pid)
        if not cores.measurable:
            import pytest

            pytest.skip("no /proc/stat here: the helper converts at once")
        assert cores.sample(0.5) is None  # too short a stretch: no figure yet
        time.sleep(1.0)
        idle = cores.sample(0.5)
        # Every usable core spins; the watched process alone takes about one of them.
        assert idle is not None and idle < 0.5
        assert idle <= usable_cores() - 0.5
    finally:
        for child in children:
            child.join(10)


def test_converter_defers_while_every_core_is_busy_and_converts_when_waited_for(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("resnet_nw4"), trace)
    converter = BackgroundConverter()
    children = _busy_children(5.0)
    try:
        time.sleep(1.0)  # they are running
        converter.submit(trace, tmp_path / "run", {}, keep_trace=True, done=lambda d, e: None)
        time.sleep(3.0)
        # Training (here: spinning processes) keeps every core: the trace waits on disk.
        assert converter.pending() == 1
        assert not any(job.started for job in converter._pending.values())
        assert not (tmp_path / "run" / "meta.json").exists()
        # and the waiting helper has loaded none of what a conversion needs (numpy, Arrow,
        # pandas): importing them is work it would do beside training
        maps = Path(f"/proc/{converter.helper_pid}/maps")
        if maps.exists():
            loaded = maps.read_text()
            for library in ("numpy", "pyarrow", "pandas"):
                assert f"/{library}/" not in loaded, library
    finally:
        for child in children:
            child.join(10)
    assert converter.wait(timeout=120)  # waiting for it makes the helper convert at once
    converter.close(timeout=30)
    assert perfkit_core.load(tmp_path / "run").meta["source"] is not None


def test_jobs_sent_while_someone_waits_are_not_deferred(tmp_path):
    """A job submitted inside ``urgent()`` (a handler's ``wait()`` while a Paddle export is
    still on its way to the helper) starts at once even with every core busy."""
    trace = tmp_path / "t.json.gz"
    shutil.copy(shared_trace("resnet_nw4"), trace)
    converter = BackgroundConverter()
    children = _busy_children(60.0)
    try:
        time.sleep(1.0)
        with converter.urgent():
            converter.submit(trace, tmp_path / "run", {}, keep_trace=True, done=lambda d, e: None)
            # Not converter.wait(), which would hurry by itself: poll while urgent, for less
            # than the cores stay busy (a deferred job would wait for them to go idle).
            began = time.monotonic()
            _wait_until(lambda: not converter.pending(), timeout=40)
            print(f"converted in {time.monotonic() - began:.1f} s beside busy cores")
    finally:
        for child in children:
            child.terminate()
            child.join(10)
    converter.close(timeout=30)
    assert (tmp_path / "run" / "meta.json").is_file()


def _note(run_dir, trace, meta, *, helper, program):
    from perfkit_core.events import pending

    assert pending.write_note(
        run_dir, trace, meta, keep_trace=False, helper_pid=helper, program=program
    )


def _gone_pid():
    """The process id of a process that has exited (and been reaped)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def test_a_reader_converts_a_queued_run_whose_helper_is_gone(tmp_path):
    """The helper died before saving a queued run (its machine went down with it): loading
    the folder converts the trace with the metadata the handler gave it, saves the run there,
    and removes the note and the trace, as the helper would have."""
    from perfkit_core.events.pending import PENDING_FILE

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trace = run_dir / "trace.json.gz"
    shutil.copy(shared_trace("gloo_rank34"), trace)
    direct = perfkit_core.load(trace)
    gone = _gone_pid()
    _note(run_dir, trace, {"rank": 3, "extra": {"worker_name": "w"}}, helper=gone, program=gone)
    run = perfkit_core.load(run_dir)
    assert run.meta["rank"] == 3 and run.meta["extra"]["worker_name"] == "w"
    assert run.meta["source"] is None
    pd.testing.assert_frame_equal(
        run.events.drop(columns="rank"), direct.events.drop(columns="rank")
    )
    assert (run_dir / "meta.json").is_file() and not (run_dir / PENDING_FILE).exists()
    assert not trace.exists()
    again = perfkit_core.load(run_dir)  # now a saved run
    pd.testing.assert_frame_equal(again.events, run.events)


def test_a_reader_of_a_run_queued_by_a_running_program_writes_nothing(tmp_path):
    """While the program that queued a run still trains (its helper defers conversions on busy
    cores), a reader gets the run the helper will save, from the trace and the note, and leaves
    the folder to the helper."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trace = run_dir / "trace.json.gz"
    shutil.copy(shared_trace("gloo_rank34"), trace)
    _note(run_dir, trace, {"framework_version": "9.9"}, helper=os.getpid(), program=os.getpid())
    before = sorted(p.name for p in run_dir.iterdir())
    run = perfkit_core.load(run_dir)
    assert run.meta["framework_version"] == "9.9"
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_a_reader_waits_for_the_helper_finishing_after_its_program(tmp_path, capfd):
    """The program exited and its helper is finishing the queue: a reader waits for the saved
    run, and says on stderr what it waits for."""
    import subprocess
    import sys
    import threading

    run_dir = tmp_path / "run"
    trace = tmp_path / "trace.json.gz"
    shutil.copy(shared_trace("gloo_rank34"), trace)
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_dir.mkdir()
        _note(run_dir, trace, {"framework_version": "1.2"}, helper=helper.pid, program=_gone_pid())

        def the_helper_saves():
            time.sleep(1.5)
            convert_file(trace, run_dir, {"framework_version": "saved"}, keep_trace=True)

        saver = threading.Thread(target=the_helper_saves)
        saver.start()
        run = perfkit_core.load(run_dir)
        saver.join()
    finally:
        helper.kill()
        helper.wait()
    assert run.meta["framework_version"] == "saved"  # the helper's run, not one made meanwhile
    assert f"waiting for the conversion helper (pid {helper.pid})" in capfd.readouterr().err


def test_a_reader_of_a_run_its_helper_gave_up_does_not_wait_for_it(tmp_path, monkeypatch):
    """The program exited and its helper, still finishing the queue, could not convert a run
    (a truncated trace): a reader does not wait for a run the helper will not save, but
    converts the trace at once and says what is wrong with it."""
    import subprocess
    import sys

    import pytest

    from perfkit_core.errors import TraceError
    from perfkit_core.events import pending

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trace = tmp_path / "bad.json"
    trace.write_bytes(b'{"traceEvents": [')
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _note(run_dir, trace, {}, helper=helper.pid, program=_gone_pid())
        assert pending.finishing(pending.read_note(run_dir) or {})  # a reader would wait
        pending.mark_failed(run_dir, "TraceError: truncated")

        def no_wait(seconds: float) -> None:
            raise AssertionError(f"the reader waited {seconds} s for the helper")

        monkeypatch.setattr(pending.time, "sleep", no_wait)
        with pytest.raises(TraceError, match=r"bad\.json.*truncated"):
            perfkit_core.load(run_dir)
    finally:
        helper.kill()
        helper.wait()
    assert trace.exists()  # nothing lost


def test_a_program_exits_without_waiting_and_its_runs_are_saved_after_it(tmp_path):
    """A torch training script with the default handler exits without waiting for its queued
    conversions; it says so on stderr; what a reader loads from a run folder at once equals the
    run the helper saves there after the program is gone, and no note or native trace stays."""
    import subprocess
    import sys

    from perfkit_core.events.pending import PENDING_FILE

    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "from perfkit_torch import TraceHandler\n"
        "from torch.profiler import profile, schedule\n"
        "handler = TraceHandler(sys.argv[1])\n"
        "model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)])\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "x = torch.randn(16, 64)\n"
        "with profile(schedule=schedule(wait=1, warmup=1, active=4, repeat=2),\n"
        "             on_trace_ready=handler) as prof:\n"
        "    for _ in range(14):\n"
        "        opt.zero_grad(); model(x).sum().backward(); opt.step(); prof.step()\n"
    )
    runs = tmp_path / "runs"
    # both cores busy: the helper defers every conversion to the program's end
    env = dict(os.environ, PERFKIT_WAIT_AT_EXIT="")
    done = subprocess.run(
        [sys.executable, str(script), str(runs)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    folders = sorted(p for p in runs.iterdir() if p.is_dir())
    assert len(folders) == 2
    if "being saved as runs by the conversion helper" not in done.stderr:
        # the helper saved both on an idle core before the program ended
        assert all((f / "meta.json").is_file() for f in folders), done.stderr[-2000:]
    read_at_once = [perfkit_core.load(f) for f in folders]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
        (f / PENDING_FILE).exists() or not (f / "meta.json").is_file() for f in folders
    ):
        time.sleep(0.2)
    for folder, early in zip(folders, read_at_once, strict=True):
        saved = perfkit_core.load(folder)
        assert sorted(p.name for p in folder.iterdir()) == ["events.parquet", "meta.json"]
        pd.testing.assert_frame_equal(saved.events, early.events)
        assert saved.meta["model"] == early.meta["model"]
        assert saved.meta["extra"]["worker_name"] == early.meta["extra"]["worker_name"]


def _program_that_queues(cwd, trace, folders, **env):
    """Run a program that copies ``trace`` into each of ``folders``, queues each copy for the
    shared converter and exits (``env`` added to its environment, ``PERFKIT_WAIT_AT_EXIT``
    unset unless given); its completed process."""
    import subprocess
    import sys

    script = (
        "import shutil, sys\n"
        "from pathlib import Path\n"
        "from perfkit_core.capture.background import shared_converter\n"
        "for d in map(Path, sys.argv[2:]):\n"
        "    d.mkdir(parents=True)\n"
        "    t = d / 'trace.json.gz'; shutil.copy(sys.argv[1], t)\n"
        "    shared_converter().submit(t, d, {}, keep_trace=False, done=lambda *a: None)\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "PERFKIT_WAIT_AT_EXIT"}
    return subprocess.run(
        [sys.executable, "-c", script, str(trace), *map(str, folders)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**environ, **env},
        cwd=cwd,
    )


def test_wait_at_exit_keeps_the_program_until_its_runs_are_saved(tmp_path):
    """``PERFKIT_WAIT_AT_EXIT=1``: the program exits once every queued run is saved."""
    out = tmp_path / "out"
    done = _program_that_queues(
        tmp_path, shared_trace("gloo_rank34"), [out / "a", out / "b"], PERFKIT_WAIT_AT_EXIT="1"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("a", "b"):
        assert sorted(p.name for p in (out / name).iterdir()) == ["events.parquet", "meta.json"]


def test_the_helper_finishing_after_the_program_does_not_hold_its_pipes(tmp_path):
    """A program piped into another (``python train.py 2>&1 | tee log``) ends its pipe when it
    exits, not when its helper has finished the queue after it."""
    from perfkit_core.events.pending import PENDING_FILE

    run_dir = tmp_path / "run"
    done = _program_that_queues(tmp_path, shared_trace("a100_rank3"), [run_dir])
    assert done.returncode == 0, done.stderr[-2000:]
    # the 219 MB trace takes seconds to convert: the pipes ended before the helper did
    assert (run_dir / PENDING_FILE).exists() and not (run_dir / "meta.json").exists()
    assert "being saved as runs by the conversion helper" in done.stderr
    run = perfkit_core.load(run_dir)  # waits for the helper
    assert len(run.events) > 0 and not (run_dir / PENDING_FILE).exists()


def test_the_queue_of_an_exiting_program_waits_for_its_exit(monkeypatch):
    """A program that says it is exiting has its queue converted once it has exited, not beside
    its exit (here the "program" never exits: the wait ends at its bound); a plain close
    (``converter.close()``, which waits for the helper) starts the queue at once."""
    from perfkit_core.capture import helper
    from perfkit_core.capture.helper import Inbox

    # the bound, not a speed: the plain close must not wait for it, however loaded the machine
    bound = 3.0
    monkeypatch.setattr(helper, "PARENT_EXIT_WAIT_S", bound)
    job = b'{"id": 0, "trace": "t", "defer": true}\n'
    for close, least, most in (
        (b'{"close": true, "exiting": true}\n', bound, 60.0),
        (b'{"close": true}\n', 0.0, bound * 0.9),
    ):
        read, write = os.pipe()
        writer = os.fdopen(write, "wb", buffering=0)
        writer.write(job + close)
        inbox = Inbox(os.fdopen(read, "rb"), parent=os.getppid())
        began = time.monotonic()
        assert inbox.next_job(_Cores(0.0))["id"] == 0
        assert least <= time.monotonic() - began <= most, close
        writer.close()
