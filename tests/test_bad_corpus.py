"""The bad-input corpus (tests/bad_corpus.py) through ``load()`` and every CLI command: one
``TraceError`` naming the file and the problem; exit 2 with one line on stderr; no traceback."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import perfkit_core
from perfkit_core import TraceError
from perfkit_core.cli import main
from perfkit_core.errors import printable
from tests.bad_corpus import BAD, GOOD, write_corpus

BAD_NAMES = [c.name for c in BAD]
GOOD_NAMES = [c.name for c in GOOD]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return write_corpus(tmp_path_factory.mktemp("corpus"))


def _case(name: str):
    return next(c for c in [*BAD, *GOOD] if c.name == name)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_load_raises_one_line_naming_the_file(corpus, name):
    path = corpus[name]
    with pytest.raises(TraceError) as info:
        perfkit_core.load(path)
    message = str(info.value)
    assert message.isprintable(), message  # one line: no line breaks, no escape sequences
    # The file named is the case's, or a file inside it (meta.json of a saved run, a rank).
    assert message.startswith(printable(str(path))) or (
        printable(str(path)) in message and path.is_dir()
    ), message
    assert _case(name).reason.lower() in message.lower(), message


def _commands(path: Path, good: Path, out: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(path)],
        "report-html": ["report", str(path), "--format", "html", "-o", str(out / "r.html")],
        "advise": ["advise", str(path)],
        "export": ["export", str(path), "--to", "folded", "-o", str(out / "f.txt")],
        "compare": ["compare", str(good), str(path)],
    }


@pytest.mark.parametrize("command", ["report", "report-html", "advise", "export", "compare"])
def test_every_command_prints_one_line_and_exits_2(corpus, command, tmp_path, capsys):
    good = corpus["g_run"]
    failures = []
    for name in BAD_NAMES:
        argv = _commands(corpus[name], good, tmp_path)[command]
        code = main(argv)
        captured = capsys.readouterr()
        # A folder of ranks is a job: the notice that its Dask cluster started may come first.
        lines = [
            line
            for line in captured.err.splitlines()
            if not line.startswith("perfkit: started a local Dask cluster")
        ]
        ok = (
            code == 2
            and captured.out == ""
            and len(lines) == 1
            and lines[0].startswith("perfkit: error: ")
            and "Traceback" not in captured.err
        )
        if not ok:
            failures.append((name, code, captured.err[-500:]))
    assert not failures, failures
    assert not list(tmp_path.iterdir())  # nothing written for bad input


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_variants_load_and_report(corpus, name, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = perfkit_core.load(corpus[name])
    assert len(run.events) >= 2
    assert main(["report", str(corpus[name])]) == 0
    if name == "g_no_ts.json":
        # Skipped, counted in the metadata, said once, and shown in the report header.
        assert run.meta["accounting"]["skipped"] == {"without a start time (ts)": 1}
        assert [str(w.message) for w in caught if w.category is perfkit_core.errors.TraceWarning]
        captured = capsys.readouterr()
        assert "Skipped" in captured.out and "without a start time" in captured.out
        assert captured.err.count("perfkit: warning: ") == 1


def test_events_without_ts_are_not_placed_at_time_zero(corpus):
    run = perfkit_core.load(corpus["g_no_ts.json"])
    full = perfkit_core.load(corpus["g_run"])
    # The span stays that of the events that have times (100 us), not back to the epoch.
    assert run.meta["span_ns"] == full.meta["span_ns"]
    assert run.meta["span_ns"][1] - run.meta["span_ns"][0] == 100_000
    assert len(run.events) == len(full.events) - 1


def test_bom_and_gzip_variants_equal_the_plain_trace(corpus):
    plain = perfkit_core.load(corpus["g_run"]).events
    for name in ("g_bom.json", "g_two_members.json.gz", "g_gzip_padding.json.gz"):
        other = perfkit_core.load(corpus[name]).events
        assert other["name"].astype(str).tolist() == plain["name"].astype(str).tolist(), name
        assert other["start_ns"].tolist() == plain["start_ns"].tolist(), name


@pytest.mark.parametrize(
    "name", ["name\nwith newline.json", "p_garbage.paddle_trace.pb", "t_pid_2e63.json"]
)
def test_console_script_prints_one_line(corpus, name):
    proc = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", str(corpus[name])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("perfkit: error: ")


# -- paths perfkit may not read or write ------------------------------------------------------


@contextlib.contextmanager
def _read_only_mount(directory: Path):
    """A small read-only tmpfs at ``directory`` (root only), or skip."""
    directory.mkdir()
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield directory
        finally:
            directory.chmod(0o755)
        return
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot make a read-only folder as root here: {proc.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=False)


def _one_error_line(capsys, *expected: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfkit: error: "), captured.err
    for word in expected:
        assert word in lines[0], lines[0]
    return lines[0]


def test_output_under_a_file(corpus, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    good = str(corpus["g_run"])
    assert main(["report", good, "-o", str(blocker / "r.txt")]) == 2
    _one_error_line(capsys, "cannot write it", "is a file, not a folder")
    assert main(["export", good, "--to", "csv", "-o", str(blocker / "csv")]) == 2
    _one_error_line(capsys, "cannot write it")
    assert main(["advise", good, "-o", str(blocker / "a.txt")]) == 2
    _one_error_line(capsys, "cannot write it")


def test_output_to_a_folder(corpus, tmp_path, capsys):
    assert main(["report", str(corpus["g_run"]), "-o", str(tmp_path)]) == 2
    _one_error_line(capsys, str(tmp_path), "cannot write it")


def test_output_in_a_read_only_folder(corpus, tmp_path, capsys):
    with _read_only_mount(tmp_path / "ro") as ro:
        code = main(["export", str(corpus["g_run"]), "--to", "chrome", "-o", str(ro / "t.json")])
        if code == 0 and os.geteuid() != 0:
            pytest.skip("permission bits are not enforced here")
        assert code == 2
        _one_error_line(capsys, str(ro / "t.json"), "cannot write it")


def test_unreadable_folder_and_file(corpus, tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root reads folders whatever their permission bits")
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "t.json").write_bytes(corpus["g_bom.json"].read_bytes())
    locked.chmod(0o000)
    try:
        with pytest.raises(TraceError, match="cannot be searched"):
            perfkit_core.load(locked / "t.json")
        with pytest.raises(TraceError, match="cannot list the folder"):
            perfkit_core.load(locked)
        assert main(["report", str(locked)]) == 2
        _one_error_line(capsys, str(locked))
    finally:
        locked.chmod(0o755)


def test_permission_errors_are_one_line_whoever_runs(tmp_path, monkeypatch):
    """The same paths with the errors injected, so they are checked even when run as root."""
    import errno

    import perfkit_core.events.loading as loading

    target = tmp_path / "t.json"
    real_stat = os.stat

    def denied_stat(path, *args, **kwargs):
        if Path(path) == target:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(loading.os, "stat", denied_stat)
    with pytest.raises(TraceError, match="cannot be searched"):
        perfkit_core.load(target)
    monkeypatch.undo()

    folder = tmp_path / "folder"
    folder.mkdir()

    def denied_iterdir(self):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied_iterdir)
    with pytest.raises(TraceError, match="cannot list the folder: Permission denied"):
        perfkit_core.load(folder)
