"""Jobs analysed on a real Dask cluster on this machine: a ``LocalCluster`` perfkit starts and
closes, and an external ``dask scheduler`` + ``dask worker`` started here. The job is the real
A100 rank re-ranked 4 times, rank 2 made slow in its data loading; every table the workers
send back is checked against the same job analysed in one process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import perfkit_core
from conftest import JOB16_RANKS, JOB16_SLOW_RANK, JOB_RANKS, JOB_SLOW_RANK, ROOT, shared_trace
from perfkit_core.cli import main
from perfkit_core.jobs.tasks import view_key

SLOW_RANK = JOB_SLOW_RANK
RANKS = JOB_RANKS
#: Views compared between the Dask job and the run loaded in one process.
VIEWS = ("ranks", "collectives", "model", "phases", "overview", "operator", "kernel", "steps")


@pytest.fixture(scope="module")
def job_dir(a100_job_dir):
    return a100_job_dir


def _child_pids() -> set[int]:
    """Processes this one started, less multiprocessing's resource tracker (one helper that
    lives as long as this process once any spawned process was started)."""
    import psutil

    return {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if "resource_tracker" not in " ".join(p.cmdline())
    }


def test_local_cluster_job_matches_the_run_in_one_process(job_dir, a100_job, tmp_path):
    from perfkit_core.jobs import analyse_job

    before = _child_pids()
    lines: list[str] = []
    job = analyse_job(job_dir, VIEWS, workers=2, notify=lines.append, save_to=tmp_path / "saved")
    assert _child_pids() == before, "the local cluster's processes were left running"
    assert lines and lines[0].startswith("started a local Dask cluster of 2 worker process(es)")
    assert job.meta["ranks"] == list(range(RANKS))
    assert job.meta["engine"] == {"kind": "local", "workers": 2}
    run = a100_job
    for view in VIEWS:
        got, expected = job.summary(view), run.summary(view)
        if view in ("phases", "steps", "collectives"):
            keys = [c for c in ("name", "step", "rank", "bytes") if c in got.columns]
            got = got.sort_values(keys).reset_index(drop=True)
            expected = expected.sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False, obj=view)
        assert got.attrs.get("note") == expected.attrs.get("note"), view
    got_findings = {(f.id, round(f.saving_ns)) for f in job.advise()}
    assert got_findings == {(f.id, round(f.saving_ns)) for f in run.advise()}
    # Each worker loaded its own ranks; the saved job reads back the same.
    assert sorted(r["rank"] for r in job.results) == list(range(RANKS))
    assert all(r["peak_rss_bytes"] > 0 for r in job.results)
    saved = perfkit_core.load(tmp_path / "saved")
    pd.testing.assert_frame_equal(saved.summary("ranks"), run.summary("ranks"))


def test_report_of_a_job_folder_starts_and_closes_a_cluster(a100_job16_dir, capsys):
    """The whole check on 16 ranks: a local cluster started and closed, the job views and the
    straggler found (rank 5, made slow in its data loading)."""
    job_dir = a100_job16_dir
    before = _child_pids()
    code = main(["report", str(job_dir), "--workers", "2", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "started a local Dask cluster of 2 worker process(es)" in captured.err
    assert "dashboard" in captured.err
    assert _child_pids() == before
    report = json.loads(captured.out)
    tables = report["tables"]
    assert {"ranks", "collectives", "model", "operator"} <= set(tables)
    assert "device" not in tables  # per-rank blocks are left to --views
    ranks = tables["ranks"]
    assert sorted(r["rank"] for r in ranks["rows"]) == list(range(JOB16_RANKS))
    flagged = [r for r in ranks["rows"] if r["straggler"]]
    assert [r["rank"] for r in flagged] == [JOB16_SLOW_RANK]
    assert flagged[0]["slow_phase"] == "data loading"
    straggler = [f for f in report["advice"] if f["rule"] == "straggler"]
    assert straggler and straggler[0]["evidence"]["rank"] == JOB16_SLOW_RANK


def test_rank_option_reads_one_rank_without_a_cluster(job_dir, capsys):
    code = main(["report", str(job_dir), "--rank", "2", "--views", "model", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Dask" not in captured.err
    model = json.loads(captured.out)["tables"]["model"]
    alone = perfkit_core.load(job_dir / "rank2.json.gz").summary("model")
    assert [r["per_step_ns"] for r in model["rows"]] == alone["per_step_ns"].tolist()
    code = main(["report", str(job_dir), "--rank", "9", "--views", "model"])
    assert code == 2
    assert "no trace holds rank 9 (ranks: 0-3)" in capsys.readouterr().err


def test_a_bad_rank_is_left_out_and_named_in_one_line(job_dir, tmp_path, capfd):
    """A 4-rank job with rank 2 cut short: the report of ranks 0, 1 and 3 on stdout, which says
    rank 2 is missing; rank 2 named in one line on stderr; exit 2; nothing of Dask's worker
    logging (a "Compute Failed ... Traceback" block, and the whole job refused, before)."""
    import gzip

    for f in job_dir.iterdir():
        if f.name != "rank2.json.gz":
            (tmp_path / f.name).symlink_to(f)
    whole = gzip.decompress((job_dir / "rank2.json.gz").read_bytes())
    (tmp_path / "rank2.json").write_bytes(whole[: len(whole) // 2])
    code = main(["report", str(tmp_path), "--workers", "2", "--format", "json"])
    out, err = capfd.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("perfkit: started a local Dask cluster of 2 worker process(es)")
    assert lines[1:] == [
        f"perfkit: error: rank 2 ({tmp_path / 'rank2.json'}): truncated JSON: the file ends "
        "before the trace does"
    ], err
    report = json.loads(out)
    ranks = report["tables"]["ranks"]
    assert [r["rank"] for r in ranks["rows"]] == [0, 1, 3]
    assert "rank 2 is missing (could not be read) and left out" in ranks["note"]
    header = {item["label"]: item["value"] for item in report["header"]}
    assert (
        header["Missing rank 2"]
        == "rank2.json: truncated JSON: the file ends before the trace does"
    )
    assert header["Ranks"] == "0, 1, 3 (world size 4)"
    # The same job through the Python API: the missing rank is listed, every table says so.
    from perfkit_core.jobs import analyse_job

    lines_seen: list[str] = []
    job = analyse_job(tmp_path, ("ranks", "model"), workers=2, notify=lines_seen.append)
    assert [m["rank"] for m in job.missing_ranks] == [2]
    assert "rank 2 is missing" in job.summary("model").attrs["note"]
    assert lines_seen[-1].startswith("error: rank 2 (")


def test_a_job_whose_ranks_all_fail_is_one_line(tmp_path, capfd):
    for i in range(2):
        (tmp_path / f"r{i}.json").write_text('{"traceEvents": [{"ph": "X"}, }')
    (tmp_path / "r2.json").write_bytes(json.dumps({"traceEvents": []}).encode())
    code = main(["report", str(tmp_path), "--workers", "2"])
    out, err = capfd.readouterr()
    assert (code, out) == (2, "")
    errors = [line for line in err.splitlines() if not line.startswith("perfkit: started")]
    assert len(errors) == 4 and "Traceback" not in err, err
    assert errors[-1].startswith(f"perfkit: error: {tmp_path}: none of its 3 ranks could be read")


def test_two_files_of_one_rank_are_refused(job_dir, tmp_path, capsys):
    """Two files recording rank 1: refused before any cluster starts, naming the later file in
    name order and the earlier one (the file named changed from run to run, as ranks arrived)."""
    for name in ("a.json.gz", "b.json.gz", "c.json.gz"):
        (tmp_path / name).symlink_to(
            job_dir / ("rank1.json.gz" if name != "c.json.gz" else "rank0.json.gz")
        )
    code = main(["report", str(tmp_path), "--workers", "2"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"perfkit: error: {tmp_path / 'b.json.gz'}: rank 1 is also in {tmp_path / 'a.json.gz'}; "
        "a job holds each rank once\n"
    )


def test_local_workers_get_memory_returning_allocators(monkeypatch):
    """A local cluster's workers use Arrow's system allocator and a fixed mmap threshold (so a
    worker gives a rank's memory back), unless the user set those variables."""
    from perfkit_core.jobs.cluster import WORKER_ENVIRON, job_client

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "262144")
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)

    def worker_env() -> dict[str, str | None]:
        import pyarrow

        return {
            "pool": pyarrow.default_memory_pool().backend_name,
            **{key: os.environ.get(key) for key in WORKER_ENVIRON},
        }

    with job_client(workers=1, ranks=2) as (client, info):
        assert info.kind == "local"
        (seen,) = client.run(worker_env).values()
    assert seen == {
        "pool": "system",
        "ARROW_DEFAULT_MEMORY_POOL": "system",
        "MALLOC_MMAP_THRESHOLD_": "262144",
    }


def test_local_workers_run_without_the_dask_profiler_unless_asked(monkeypatch):
    """A local cluster's workers keep no statistical profile (its history grows with the job's
    length); a user who sets Dask's variable for it gets their setting."""
    import dask

    from perfkit_core.jobs.cluster import dask_environ_name, job_client, local_cluster

    key = "distributed.worker.profile.enabled"
    assert dask_environ_name(key) == "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"
    monkeypatch.delenv(dask_environ_name(key), raising=False)
    with job_client(workers=1, ranks=2) as (client, _info):
        (seen,) = client.run(lambda: dask.config.get(key)).values()
    assert seen is False

    def settings(**_options):
        return dask.config.get(key)

    monkeypatch.setenv(dask_environ_name(key), "True")
    with dask.config.set({key: True}):  # what Dask read from the variable at its import
        assert local_cluster(1, settings) is True


def test_dropping_the_views_caches_changes_no_summary():
    """A worker drops what each view cached for itself (keeping the links between rows and the
    shared analysis): every per-rank table, figure and finding of a rank equals those computed
    with the cache kept."""
    from perfkit_core.advice.engine import advise_rank
    from perfkit_core.events.cache import KEPT_BETWEEN_VIEWS
    from perfkit_core.jobs import DEFAULT_JOB_VIEWS
    from perfkit_core.jobs.tasks import (
        RankTask,
        drop_view_caches,
        load_rank,
        summarise_rank,
    )
    from perfkit_core.views.multirank.collectives import collective_calls
    from perfkit_core.views.multirank.ranks import rank_figures
    from perfkit_core.views.registry import get_view, rank_view

    views = tuple((v, ()) for v in DEFAULT_JOB_VIEWS if get_view(v).across != "native")
    task = RankTask(0, str(shared_trace("a100_rank3")), views=views)
    got = summarise_rank(task)
    run = load_rank(task)
    for name, options in task.views:
        expected = rank_view(run, get_view(name), dict(options))
        pd.testing.assert_frame_equal(got.frames[view_key(name, options)], expected)
    assert got.findings == [f.to_dict() for f in advise_rank(run)]
    assert got.figures == rank_figures(run)
    pd.testing.assert_frame_equal(got.calls, collective_calls(run))
    assert any(k == "structure" for k in run.cache)
    drop_view_caches(run)
    kept = run.cache.names()
    assert kept and kept <= KEPT_BETWEEN_VIEWS
    assert "structure" in kept  # the shared analysis stays for the next view


def test_one_rank_never_imports_dask(tmp_path):
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "rank3.json.gz").symlink_to(shared_trace("a100_rank3"))
    code = (
        "import sys\n"
        "from perfkit_core.cli import main\n"
        f"assert main(['report', {str(folder)!r}, '--views', 'model,ranks']) == 0\n"
        f"assert main(['report', {str(shared_trace('rank_non_gpu'))!r}, '--views', 'model']) == 0\n"
        "assert 'distributed' not in sys.modules and 'dask' not in sys.modules, 'dask imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Dask" not in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def external_cluster(tmp_path):
    """A ``dask scheduler`` and two ``dask worker`` processes on localhost, importing perfkit
    from this checkout; torn down after the test."""
    dask = Path(sys.executable).parent / "dask"
    if not dask.exists():
        pytest.skip("the dask command is not installed next to this Python")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    logs = [open(tmp_path / name, "w") for name in ("scheduler.log", "worker.log")]  # noqa: SIM115
    procs = [
        subprocess.Popen(
            [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=logs[0],
            stderr=subprocess.STDOUT,
            env=env,
        )
    ]
    try:
        procs.append(
            subprocess.Popen(
                [
                    str(dask),
                    "worker",
                    address,
                    "--nworkers",
                    "2",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--death-timeout",
                    "60",
                ],
                stdout=logs[1],
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
        from distributed import Client

        deadline = time.monotonic() + 90
        with Client(address, timeout=60, set_as_default=False) as client:
            while len(client.scheduler_info(n_workers=-1)["workers"]) < 2:
                if time.monotonic() > deadline:
                    pytest.fail("the external Dask workers did not start")
                time.sleep(0.5)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        for log in logs:
            log.close()


def test_report_on_an_external_scheduler(
    job_dir, a100_job16_dir, external_cluster, capsys, monkeypatch
):
    before = _child_pids()
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", external_cluster)
    code = main(["report", str(a100_job16_dir), "--format", "json", "--views", "ranks,collectives"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"using the Dask scheduler at {external_cluster} (2 worker(s))" in captured.err
    assert _child_pids() == before  # nothing started here
    report = json.loads(captured.out)
    ranks = {r["rank"]: r for r in report["tables"]["ranks"]["rows"]}
    assert sorted(ranks) == list(range(JOB16_RANKS))
    assert [r for r, row in ranks.items() if row["straggler"]] == [JOB16_SLOW_RANK]
    assert report["tables"]["collectives"]["rows"]
    assert any(
        f["rule"] == "straggler" and f["evidence"]["rank"] == JOB16_SLOW_RANK
        for f in report["advice"]
    )
    # The same with --scheduler, and the cluster is still there for the next job.
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    code = main(["advise", str(job_dir), "--scheduler", external_cluster, "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert any(f["rule"] == "straggler" for f in json.loads(captured.out))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_workers_peak_is_its_own_not_the_peak_of_the_process_that_started_it():
    """On Linux ``ru_maxrss`` survives ``exec``: a process started by a bigger one reports the
    bigger one's peak. The per-rank peak perfkit reports (``peak_rss_bytes``) is the process's
    own."""
    held = bytearray(300 << 20)
    held[:: 1 << 12] = b"\x01" * len(held[:: 1 << 12])  # touch every page: 300 MB resident
    code = (
        "import resource\n"
        "from perfkit_core.jobs.tasks import peak_rss_bytes\n"
        "print(peak_rss_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    own, inherited = map(int, out.stdout.split())
    del held
    assert inherited >= 300 << 20  # the starter's peak, carried over
    assert 0 < own < 200 << 20  # an interpreter with pandas and numpy imported


def test_advise_measure_of_a_job_is_refused_in_one_line(job_dir, capsys):
    """``--measure`` replays one run's recorded work: given a job it says so (exit 2) instead of
    advising the job without measuring."""
    assert main(["advise", str(job_dir), "--measure"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--measure" in err and str(job_dir) in err
