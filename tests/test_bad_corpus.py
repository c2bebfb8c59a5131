"""The bad-input corpus (tests/bad_corpus.py) through ``load()`` and every CLI command: one
``TraceError`` naming the file and the problem; exit 2 with one line on stderr; no traceback."""

from __future__ import annotations

import contextlib
import json
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
        if _case(name).partial and command in JOB_COMMANDS:
            continue  # test_a_job_reports_the_ranks_that_load
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


#: Commands that analyse a job rank by rank, reporting the ranks that load.
JOB_COMMANDS = ("report", "report-html", "advise")


@pytest.mark.parametrize("name", [c.name for c in BAD if c.partial])
@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_a_job_reports_the_ranks_that_load(corpus, name, command, tmp_path, capsys):
    """A job with a bad rank: the report of the others, the bad rank named in one line on
    stderr (its file and the reason), exit 2, no traceback."""
    code = main(_commands(corpus[name], corpus["g_run"], tmp_path)[command])
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("perfkit: error: ")]
    assert code == 2, captured.err
    assert len(errors) == 1, captured.err
    assert errors[0].startswith("perfkit: error: rank "), errors
    assert _case(name).reason.lower() in errors[0].lower(), errors
    assert "Traceback" not in captured.err and "distributed." not in captured.err
    if command != "advise":  # the report's header and tables say which rank is missing
        report = captured.out or (tmp_path / "r.html").read_text()
        assert "Missing rank" in report and "missing (could not be read)" in report


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


#: Capabilities that let root read, list and search anything, whatever the permission bits.
DAC_CAPS = "-dac_override,-dac_read_search"


def unprivileged() -> list[str]:
    """The command prefix that runs a command without the power to ignore permission bits: none
    for a user that is not root; ``setpriv`` dropping ``CAP_DAC_OVERRIDE`` and
    ``CAP_DAC_READ_SEARCH`` for root (as CI runs); skip when root cannot drop them."""
    import shutil

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux) to drop its capabilities")
    prefix = [setpriv, f"--bounding-set={DAC_CAPS}", f"--inh-caps={DAC_CAPS}"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop capabilities here: {probe.stderr.strip()}")
    return prefix


def permission_cases(directory: Path, good_trace: Path, good_run: Path) -> dict[str, Path]:
    """Inputs a user without privileges cannot read: each one a path to give perfkit."""
    import shutil

    cases = {}
    directory.mkdir(exist_ok=True)
    locked_run = directory / "locked_run"  # a saved run in a folder with mode 000
    shutil.copytree(good_run, locked_run)
    cases["locked_run"] = locked_run
    locked_traces = directory / "locked_traces"  # two traces in a folder with mode 000
    locked_traces.mkdir()
    for i in range(2):
        shutil.copy(good_trace, locked_traces / f"r{i}.json")
    cases["locked_traces"] = locked_traces
    cases["locked_trace_file"] = locked_traces / "r0.json"  # a file under that folder
    listed = directory / "listed_not_searched"  # mode 600: its names, not its files
    listed.mkdir()
    shutil.copy(good_trace, listed / "t.json")
    cases["listed_not_searched"] = listed
    unreadable = directory / "unreadable.json"  # a trace with mode 000
    shutil.copy(good_trace, unreadable)
    cases["unreadable_file"] = unreadable
    meta_locked = directory / "meta_locked"  # a saved run whose meta.json has mode 000
    shutil.copytree(good_run, meta_locked)
    cases["meta_locked"] = meta_locked
    events_locked = directory / "events_locked"  # ... whose events.parquet has mode 000
    shutil.copytree(good_run, events_locked)
    cases["events_locked"] = events_locked
    for path, mode in (
        (locked_run, 0o000),
        (locked_traces, 0o000),
        (listed, 0o600),
        (unreadable, 0o000),
        (meta_locked / "meta.json", 0o000),
        (events_locked / "events.parquet", 0o000),
    ):
        path.chmod(mode)
    return cases


def test_unreadable_inputs_are_one_line_without_privileges(corpus, tmp_path):
    """Folders and files a user may not read, searched or listed (as a user without root's
    capabilities meets them): every command prints one line naming the path and exits 2, with
    no traceback (``PermissionError`` from ``is_file`` in the job check before)."""
    prefix = unprivileged()
    cases = permission_cases(tmp_path, corpus["g_bom.json"], corpus["g_run"])
    failures = []
    for name, path in cases.items():
        for command in (["report"], ["advise"], ["export", "--to", "folded", "-o", "-"]):
            proc = subprocess.run(
                [
                    *prefix,
                    sys.executable,
                    "-m",
                    "perfkit_core",
                    command[0],
                    str(path),
                    *command[1:],
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            lines = proc.stderr.splitlines()
            ok = (
                proc.returncode == 2
                and proc.stdout == ""
                and len(lines) == 1
                and lines[0].startswith(f"perfkit: error: {path}")
                and any(w in lines[0] for w in ("ermission denied", "cannot be searched"))
            )
            if not ok:
                failures.append((name, command[0], proc.returncode, proc.stderr[-600:]))
    # An op map the user may not read (click's own check printed a usage message before).
    op_map = tmp_path / "ops.toml"
    op_map.write_text("[ops]\n")
    op_map.chmod(0o000)
    good = str(corpus["g_run"])
    proc = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "perfkit_core",
            "compare",
            good,
            good,
            "--op-map",
            str(op_map),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if (proc.returncode, proc.stdout, proc.stderr) != (
        2,
        "",
        f"perfkit: error: {op_map}: Permission denied\n",
    ):
        failures.append(("op map", "compare", proc.returncode, proc.stderr[-600:]))
    for path in tmp_path.rglob("*"):
        path.chmod(0o755)
    assert not failures, failures


def test_the_corpus_without_privileges(corpus, tmp_path):
    """The whole bad-input corpus and the unreadable inputs of ``permission_cases`` through
    every command, run as a user that cannot ignore permission bits (``setpriv`` as root): the
    same single lines, no traceback."""
    prefix = unprivileged()
    extra = permission_cases(tmp_path / "perm", corpus["g_bom.json"], corpus["g_run"])
    script = tmp_path / "run_corpus.py"
    script.write_text(
        "import json, sys, traceback\n"
        "from pathlib import Path\n"
        "\n"
        "\n"
        "def run(root, corpus, out, *extra):\n"
        "    sys.path.insert(0, root)\n"
        "    from perfkit_core.cli import main\n"
        "    from tests.bad_corpus import BAD\n"
        "\n"
        "    results = []\n"
        "    for path in [str(Path(corpus) / case.name) for case in BAD] + list(extra):\n"
        "        for argv in (\n"
        "            ['report', path],\n"
        "            ['advise', path],\n"
        "            ['export', path, '--to', 'folded', '-o', str(Path(out) / 'f.txt')],\n"
        "            ['compare', str(Path(corpus) / 'g_run'), path],\n"
        "        ):\n"
        "            try:\n"
        "                code = main(argv)\n"
        "            except BaseException:\n"
        "                code = 'traceback: ' + traceback.format_exc()[-300:]\n"
        "            results.append([path, argv[0], code])\n"
        "    print(json.dumps(results))\n"
        "\n"
        "\n"
        "if __name__ == '__main__':  # Dask's worker processes import this file again\n"
        "    run(*sys.argv[1:])\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    root = Path(__file__).resolve().parent.parent
    corpus_dir = corpus["g_run"].parent
    proc = subprocess.run(
        [*prefix, sys.executable, str(script), str(root), str(corpus_dir), str(out)]
        + [str(p) for p in extra.values()],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    for path in (tmp_path / "perm").rglob("*"):
        path.chmod(0o755)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    assert len(results) == 4 * (len(BAD) + len(extra))
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    bad = [r for r in results if r[2] != 2]
    assert not bad, bad
    errors = [line for line in proc.stderr.splitlines() if line.startswith("perfkit: error: ")]
    # One line per refusal (a job with a bad rank: the rank's line, the others reported).
    assert len(errors) == len(results), proc.stderr[-3000:]


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
