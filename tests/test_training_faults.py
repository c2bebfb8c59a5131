"""Faults injected into real CPU training loops under perfkit's handlers (torch and Paddle).

Each case runs ``tests/fault_loop.py`` in a subprocess and reads the JSON line it prints. A
read-only target and a full filesystem are small tmpfs mounts in a private mount namespace
(``unshare --user --map-root-user --mount``); where that is not available the case is skipped.
What must hold whatever the fault: the loop finishes (no exception reached training), every
profiled cycle is either a run that loads or a failure whose recorded path is a complete native
trace (or names why nothing could be kept), and no folder holds an event table without its
``meta.json``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

FRAMEWORKS = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            importlib.util.find_spec(name) is None, reason=f"{name} is not installed"
        ),
    )
    for name in ("torch", "paddle")
]


@functools.cache
def namespaces_available() -> bool:
    """True when this user can mount a tmpfs in a private user + mount namespace."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d" && rmdir "$d"',
        ],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


def run_loop(
    tmp_path: Path,
    framework: str,
    *args: str,
    mount: str | None = None,
    target: Path | None = None,
) -> dict[str, Any]:
    """Run the fault loop writing under ``target`` (default ``tmp_path/runs``); with ``mount``
    (tmpfs options such as ``size=1m`` or ``ro,size=1m``) ``target``'s parent is a fresh tmpfs
    in a private mount namespace. Returns the loop's report."""
    target = target or tmp_path / ("mnt" if mount else "") / "runs"
    env = dict(os.environ, TMPDIR=str(_tmpdir(tmp_path)))
    command = [
        sys.executable,
        "-m",
        "tests.fault_loop",
        "--framework",
        framework,
        "--dir",
        str(target),
        *args,
    ]
    if mount is not None:
        if not namespaces_available():
            pytest.skip("cannot mount a tmpfs here (unshare --user --mount is not permitted)")
        target.parent.mkdir(parents=True, exist_ok=True)
        command = [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            f'mount -t tmpfs -o {mount} tmpfs "$0" && exec "$@"',
            str(target.parent),
            *command,
        ]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("FAULT_LOOP ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(lines[-1].split(" ", 1)[1])


def _tmpdir(tmp_path: Path) -> Path:
    path = tmp_path / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_accounted(report: dict[str, Any], cycles: int, *, chained: int = 0) -> None:
    """Every cycle is a run that loads or a failure with a truthful record; nothing half-saved."""
    for run in report["runs"]:
        assert run["loads"] and run["has_meta"] and run["rows"] > 0, run
    not_saved = [f for f in report["failures"] if not f["reason"].startswith("chained handler")]
    assert len(report["runs"]) + len(not_saved) == cycles, report
    for failure in not_saved:
        kept = failure["kept"]
        if kept is not None:  # a kept trace is complete and loads
            assert kept["complete"] and kept["bytes"] > 0 and kept["rows"] > 0, failure
    assert report["parquet_without_meta"] == []
    assert sorted(r["path"] for r in report["runs"]) == report["run_dirs_on_disk"]
    assert len(report["failures"]) - len(not_saved) == chained


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_read_only_target_names_the_problem_and_keeps_the_trace(tmp_path, framework):
    report = run_loop(tmp_path, framework, "--cycles", "2", "--steps", "1", mount="ro,size=1m")
    check_accounted(report, 2)
    assert report["runs"] == [] and len(report["failures"]) == 2
    target = str(tmp_path / "mnt" / "runs")
    for failure in report["failures"]:
        assert "read-only file system" in failure["reason"] and target in failure["reason"]
        kept = failure["kept"]  # exported to <TMPDIR>/perfkit_unsaved instead
        assert kept is not None and kept["path"].startswith(str(_tmpdir(tmp_path)))
    (warning,) = report["warnings"]
    assert "read-only file system" in warning and target in warning
    assert "could not export" not in warning


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_full_filesystem_keeps_every_cycle(tmp_path, framework):
    """A 1 MB filesystem: pending traces wait for room and space is checked before each export,
    so the default (background) handler saves every cycle, as the in-process one does."""
    cycles = 8
    background = run_loop(
        tmp_path / "bg", framework, "--cycles", str(cycles), "--steps", "1", mount="size=1m"
    )
    check_accounted(background, cycles)
    sync = run_loop(
        tmp_path / "sync",
        framework,
        "--cycles",
        str(cycles),
        "--steps",
        "1",
        "--sync",
        mount="size=1m",
    )
    check_accounted(sync, cycles)
    assert len(background["runs"]) == len(sync["runs"]) == cycles


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_filesystem_too_small_for_one_trace(tmp_path, framework):
    """A trace that cannot fit is never recorded as kept at a path holding a cut file: the cycle
    says disk full, and once the trace's size is known later cycles go to the fallback folder."""
    report = run_loop(tmp_path, framework, "--cycles", "3", "--steps", "4", mount="size=32k")
    check_accounted(report, 3)
    assert report["runs"] == []
    for failure in report["failures"]:
        assert "disk full" in failure["reason"], failure
    assert report["failures"][-1]["kept"] is not None  # later cycles: kept elsewhere, whole


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_killed_helper_loses_nothing_and_misattributes_nothing(tmp_path, framework):
    cycles = 4
    report = run_loop(
        tmp_path, framework, "--cycles", str(cycles), "--steps", "3", "--kill-helper-at", "2"
    )
    assert report["killed"], "the helper was running when the chained handler killed it"
    check_accounted(report, cycles)
    for failure in report["failures"]:
        assert "killed by SIGKILL" in failure["reason"] and failure["kept"] is not None
    saved = {r["path"] for r in report["runs"]}
    assert not saved & {str(Path(f["path"]).parent) for f in report["failures"]}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_raising_chained_handler_is_recorded(tmp_path, framework):
    report = run_loop(tmp_path, framework, "--cycles", "2", "--steps", "1", "--chain-raises")
    check_accounted(report, 2, chained=2)
    assert len(report["runs"]) == 2
    reasons = [f["reason"] for f in report["failures"]]
    assert [r.endswith(f"broke at cycle {i}") for i, r in enumerate(reasons, 1)] == [True, True]
    assert all("RuntimeError" in r for r in reasons)
    assert len(report["warnings"]) == 1 and "broke at cycle 1" in report["warnings"][0]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_writers_sharing_a_folder_and_worker_name(tmp_path, framework):
    cycles = 5
    target = tmp_path / "shared"
    env = dict(os.environ, TMPDIR=str(_tmpdir(tmp_path)))
    command = [
        sys.executable,
        "-m",
        "tests.fault_loop",
        "--framework",
        framework,
        "--dir",
        str(target),
        "--cycles",
        str(cycles),
        "--steps",
        "1",
        "--worker",
        "same",
    ]
    procs = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        line = [x for x in out.splitlines() if x.startswith("FAULT_LOOP ")][-1]
        reports.append(json.loads(line.split(" ", 1)[1]))
    for report in reports:
        assert report["failures"] == []
        assert len(report["runs"]) == cycles
        # Each writer's runs hold its own profile.
        assert {r["pid"] for r in report["runs"]} == {report["pid"]}
    folders = [r["path"] for report in reports for r in report["runs"]]
    assert len(set(folders)) == 2 * cycles
    on_disk = sorted(p for p in target.iterdir() if (p / "meta.json").is_file())
    assert len(on_disk) == 2 * cycles


def folders_after_death(target: Path) -> list[dict[str, Any]]:
    """What a killed or interrupted loop left: each run folder, and whether it holds a saved run
    or a native export (either must load), or an event table without its metadata."""
    import perfkit_core

    found = []
    for folder in sorted(p for p in target.iterdir() if p.is_dir()):
        names = {p.name for p in folder.iterdir()}
        entry: dict[str, Any] = {"folder": folder.name, "files": sorted(names)}
        entry["orphan_table"] = "events.parquet" in names and "meta.json" not in names
        try:
            entry["rows"] = len(perfkit_core.load(folder).events)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        found.append(entry)
    return found


def _default_sigint() -> None:
    """In the child before it runs: SIGINT to its default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGINT"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_killed_or_interrupted_training_keeps_every_profile(tmp_path, framework, signal_name):
    """The process dies (SIGKILL once the export of cycle 2 is on disk and its run is being
    saved by the helper) or is interrupted (Ctrl-C, to the whole process group as a
    terminal sends it, in the step after the callback of cycle 2): each
    cycle that reached the handler left a folder that loads, as a saved run or as the native
    export, and no folder shows an event table without its metadata."""
    target = tmp_path / "runs"
    flag = "--sigkill-self-at" if signal_name == "SIGKILL" else "--interrupt-at"
    command = [
        sys.executable,
        "-m",
        "tests.fault_loop",
        "--framework",
        framework,
        "--dir",
        str(target),
        "--cycles",
        "3",
        "--steps",
        "2",
        flag,
        "2",
    ]
    env = dict(os.environ, TMPDIR=str(_tmpdir(tmp_path)))
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,  # its Ctrl-C reaches its own process group only
        # Ctrl-C as a terminal's program gets it, even when this process ignores SIGINT (an
        # ignored signal is inherited, and Python then installs no KeyboardInterrupt handler).
        preexec_fn=_default_sigint,
    )
    assert done.returncode != 0  # it did not get to finish the loop
    if signal_name == "SIGINT":
        assert (
            "KeyboardInterrupt" in done.stderr
            and "Traceback" not in done.stderr.split("KeyboardInterrupt")[-1]
        ), done.stderr[-2000:]
    assert "FAULT_LOOP" not in done.stdout
    found = folders_after_death(target)
    assert len(found) == 2, found  # cycles 1 and 2 reached the handler
    for entry in found:
        assert not entry["orphan_table"], entry
        assert entry.get("rows", 0) > 0, entry
    if signal_name == "SIGINT":
        # Interrupted, the program left its queued runs to the helper, which saves them after
        # it; loading each folder above waited for the helper where it had not finished.
        after = folders_after_death(target)
        assert all(
            "meta.json" in entry["files"] and ".perfkit-pending" not in entry["files"]
            for entry in after
        ), after
    elif framework == "torch":
        # Killed inside cycle 2's callback: cycle 1's trace had been sent to the helper, which
        # outlives the training process and saves it (it stops deferring when its pipe closes);
        # cycle 2's was not sent yet and stays as torch's export, which loads.
        first = target / found[0]["folder"] / "meta.json"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not first.is_file():
            time.sleep(0.2)
        after = folders_after_death(target)
        assert "meta.json" in after[0]["files"], after
        assert all(entry.get("rows", 0) > 0 for entry in after), after
