"""Runs of several ranks in one process: every view per rank or combined as its note says,
the ranks and collectives views, cross-rank advice, saved jobs. The job is the real A100 rank
re-ranked 4 times, rank 2 made slow in its data loading (``tests/job_traces.py``); every
combined figure is recomputed from the ranks' traces loaded one by one."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

import perfkit_core
from conftest import JOB_RANKS, JOB_SLOW_NS, JOB_SLOW_RANK, shared_trace
from perfkit_core.events.intervals import length, merge_intervals
from tests.job_traces import make_job

SLOW_RANK = JOB_SLOW_RANK
SLOW_NS = JOB_SLOW_NS
RANKS = JOB_RANKS


@pytest.fixture(scope="session")
def job_dir(a100_job_dir):
    return a100_job_dir


@pytest.fixture(scope="session")
def job(a100_job):
    return a100_job


@pytest.fixture(scope="session")
def singles(job_dir):
    """Each rank loaded on its own from its own file: the other way to every figure."""
    return {r: perfkit_core.load(job_dir / f"rank{r}.json.gz") for r in range(RANKS)}


def test_the_job_holds_every_rank_and_slices_back_to_each(job, singles):
    from perfkit_core.events.ranks import rank_run

    assert job.meta["ranks"] == list(range(RANKS))
    for r, one in singles.items():
        sliced = rank_run(job, r)
        assert len(sliced.events) == len(one.events)
        pd.testing.assert_frame_equal(sliced.events, one.events, check_categorical=False)
        assert sliced.meta["steps"] == one.meta["steps"]


MEAN_VIEWS = {
    "model": ("name", ["per_step_ns", "gpu_per_step_ns", "steps"]),
    "model_spans": ("name", ["cpu_total_ns", "gpu_total_ns", "calls"]),
    "overview": ("name", ["cpu_per_step_ns", "gpu_per_step_ns", "calls_per_step"]),
    "operator": ("name", ["cpu_total_ns", "cpu_self_ns", "gpu_total_ns", "calls"]),
    "kernel": ("name", ["gpu_total_ns", "calls"]),
    "memcpy": ("name", ["gpu_total_ns", "bytes", "calls"]),
    "family": ("name", ["per_step_ns", "gpu_per_step_ns"]),
    "user": ("name", ["cpu_total_ns", "calls"]),
}


@pytest.mark.parametrize("view", sorted(MEAN_VIEWS))
def test_mean_views_are_the_mean_of_the_ranks(job, singles, view):
    key, sums = MEAN_VIEWS[view]
    combined = job.summary(view).set_index(key)
    assert "mean per rank over 4 ranks" in combined.attrs["note"]
    per_rank = [singles[r].summary(view).set_index(key) for r in range(RANKS)]
    names = set().union(*(set(p.index) for p in per_rank))
    assert set(combined.index) == names
    for column in sums:
        # Not measured on any rank stays NaN; a rank without the row counts 0.
        expected = pd.concat([p[column] for p in per_rank], axis=1).sum(axis=1, min_count=1)
        expected = expected / RANKS
        got = combined[column].reindex(expected.index).astype(float)
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=1e-9)
    for column in [c for c in combined.columns if c.endswith("_max_ns")]:
        expected = pd.concat([p[column] for p in per_rank], axis=1).max(axis=1)
        np.testing.assert_allclose(
            combined[column].reindex(expected.index).astype(float), expected.astype(float)
        )


def test_model_view_shares_are_of_the_mean_rank_and_never_above_100(job, singles):
    model = job.summary("model").set_index("name")
    step = model.loc["step", "per_step_ns"]
    assert step == pytest.approx(
        np.mean([s.summary("model").iloc[0]["per_step_ns"] for s in singles.values()])
    )
    phases = ["data", "forward", "backward", "optimizer", "other"]
    for phase in phases:
        assert model.loc[phase, "step_pct"] == pytest.approx(
            100.0 * model.loc[phase, "per_step_ns"] / step
        )
        assert 0 <= model.loc[phase, "step_pct"] <= 100
    # The phases add up to the mean rank's step, as they do on one rank.
    assert model.loc[phases, "per_step_ns"].sum() == pytest.approx(step)
    # The slow rank's data loading shows in the maximum, the mean dilutes it over the ranks.
    assert model.loc["data", "max_per_step_ns"] > SLOW_NS


def test_rank_option_gives_that_ranks_own_view(job, singles):
    for view in ("model", "operator", "kernel", "overview", "steps", "device", "distributed"):
        got = job.summary(view, rank=SLOW_RANK)
        expected = singles[SLOW_RANK].summary(view, rank=SLOW_RANK)
        pd.testing.assert_frame_equal(
            got.reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False
        )


@pytest.mark.parametrize("view", ["steps", "device", "distributed"])
def test_per_rank_blocks_name_their_rank(job, singles, view):
    combined = job.summary(view)
    assert "one block of rows per rank" in combined.attrs["note"]
    for r in range(RANKS):
        block = combined[combined["rank"] == r]
        own = singles[r].summary(view)
        assert len(block) == len(own)
        assert all(str(n).endswith(f"(rank {r})") for n in block["name"])
        for column in [c for c in own.columns if c.endswith(("_ns", "_pct"))]:
            np.testing.assert_allclose(
                block[column].to_numpy(dtype=float), own[column].to_numpy(dtype=float)
            )
    pct = [c for c in combined.columns if c.endswith("_pct")]
    if view == "distributed":
        assert (combined[pct].to_numpy() <= 100.0 + 1e-9).all()


def test_phases_and_benchmark_combine_over_ranks(job, singles):
    phases = job.summary("phases").set_index("step")
    per_rank = [singles[r].summary("phases").set_index("step") for r in range(RANKS)]
    for column in ("step_ns", "data_ns", "forward_ns"):
        expected = sum(p[column] for p in per_rank) / RANKS
        np.testing.assert_allclose(phases[column], expected)
    bench = job.summary("benchmark").set_index("name")
    own = [singles[r].summary("benchmark").set_index("name") for r in range(RANKS)]
    assert bench.loc["batch_cost", "avg"] == pytest.approx(
        np.mean([o.loc["batch_cost", "avg"] for o in own])
    )
    assert bench.loc["reader_cost", "max"] == pytest.approx(
        max(o.loc["reader_cost", "max"] for o in own)
    )


def test_ranks_view_flags_the_slow_rank_and_its_cause(job, singles):
    ranks = job.summary("ranks").set_index("rank")
    assert ranks["straggler"].tolist() == [r == SLOW_RANK for r in range(RANKS)]
    assert ranks.loc[SLOW_RANK, "slow_phase"] == "data loading"
    assert "median + 3 x 1.4826 x MAD" in ranks.attrs["note"]
    for r, one in singles.items():
        ev = one.events
        steps = ev[ev["kind"] == "step"]
        assert ranks.loc[r, "steps"] == len(steps)
        # The steps as the rank's own report times them (stretched over their device work).
        durations = one.summary("steps")["dur_ns"]
        assert ranks.loc[r, "step_median_ns"] == pytest.approx(durations.median())
        loader = ev[ev["kind"] == "dataloader"]
        merged = length(
            merge_intervals(
                loader["start_ns"].to_numpy(), (loader["start_ns"] + loader["dur_ns"]).to_numpy()
            )
        )
        assert ranks.loc[r, "data_ns"] == pytest.approx(merged / len(steps), rel=1e-3)
        model = one.summary("model").set_index("name")
        assert ranks.loc[r, "data_ns"] == pytest.approx(model.loc["data", "per_step_ns"])
    # The slow rank loads ~20 ms more per step and waits ~0; the others wait for it.
    assert ranks.loc[SLOW_RANK, "data_ns"] > SLOW_NS
    fast = ranks.drop(index=SLOW_RANK)
    assert (fast["wait_ns"] > 0.9 * SLOW_NS).all()
    assert ranks.loc[SLOW_RANK, "wait_ns"] < 0.05 * SLOW_NS
    # Synchronous training: every rank's steps take as long; work tells the straggler apart.
    assert ranks["step_median_ns"].max() - ranks["step_median_ns"].min() < 0.01 * SLOW_NS
    assert ranks.loc[SLOW_RANK, "work_ns"] - fast["work_ns"].median() > 0.9 * SLOW_NS


def test_collective_waits_recomputed_from_the_kernels(job, singles):
    calls = job.summary("collectives", by="rank")
    # The first collective kernel of the first step, on every rank, from the raw events.
    starts, durs = {}, {}
    for r, one in singles.items():
        ev = one.events
        k = ev[(ev["kind"] == "communication") & (ev["stream"] >= 0)].sort_values("start_ns")
        starts[r] = int(k["start_ns"].iloc[0])
        durs[r] = int(k["dur_ns"].iloc[0])
    last = max(starts.values())
    assert max(starts, key=starts.get) == SLOW_RANK
    from perfkit_core.views.multirank.collectives import align_calls, collective_calls

    aligned = align_calls(pd.concat([collective_calls(s) for s in singles.values()]))
    first = aligned.sort_values("start_ns").groupby("rank").head(1).set_index("rank")
    for r in range(RANKS):
        assert first.loc[r, "wait_ns"] == pytest.approx(min(max(last - starts[r], 0), durs[r]))
        assert first.loc[r, "transfer_ns"] == pytest.approx(durs[r] - first.loc[r, "wait_ns"])
        assert first.loc[r, "last_rank"] == SLOW_RANK
    # Per rank and collective: time = wait + transfer; wait % of the time, at most 100.
    assert np.allclose(calls["time_ns"], calls["wait_ns"] + calls["transfer_ns"])
    assert (calls["wait_pct"].dropna() <= 100).all()
    top = job.summary("collectives").iloc[0]
    assert top["name"] == "all_to_all" and top["last_rank"] == SLOW_RANK
    # all_to_all of a [8, 1024, 8816] float tensor: 288,882,688 bytes; algbw over transfer.
    sized = job.summary("collectives").set_index("bytes")
    row = sized.loc[8 * 1024 * 8816 * 4]
    assert row["algbw_gb_per_s"] == pytest.approx(
        row["calls"] * 8 * 1024 * 8816 * 4 / row["transfer_ns"], rel=1e-6
    )


def test_one_rank_has_no_wait_to_measure(singles):
    calls = singles[0].summary("collectives")
    assert calls["wait_ns"].isna().all()
    assert "one rank" in calls.attrs["note"]
    ranks = singles[0].summary("ranks")
    assert len(ranks) == 1 and not ranks["straggler"].any()


_PCT = re.compile(r"(\d+(?:\.\d+)?)%")


def test_job_advice_names_the_straggler_and_no_share_exceeds_100(job):
    findings = job.advise()
    straggler = [f for f in findings if f.rule == "straggler"]
    assert len(straggler) == 1
    assert straggler[0].evidence["rank"] == SLOW_RANK
    assert straggler[0].evidence["cause"] == "data loading"
    assert f"Rank {SLOW_RANK}" in straggler[0].title
    # Its saving, per step: the extra work per step, at most what the others wait.
    ranks = job.summary("ranks").set_index("rank")
    extra = ranks.loc[SLOW_RANK, "work_ns"] - ranks["work_ns"].median()
    waited = ranks.drop(index=SLOW_RANK)["wait_ns"].median()
    assert straggler[0].saving_ns == pytest.approx(min(extra, waited))
    for finding in findings:
        for pct in _PCT.findall(finding.title):
            assert float(pct) <= 100.0, finding.title
        step = finding.evidence["step_time_ns"]
        assert finding.saving_ns <= step + 1, finding.title
    # Per-rank findings name the worst rank and how many ranks show them.
    merged = [f for f in findings if "worst on rank" in f.title]
    assert merged and all(f.evidence["saving"].startswith("mean per rank") for f in merged)
    loading = next(f for f in findings if f.rule == "input-pipeline")
    assert loading.evidence["rank"] == SLOW_RANK and "1 of 4 ranks" in loading.title
    assert not any(f.rule == "communication" for f in findings)  # superseded in a job


def test_identical_ranks_have_no_straggler(tmp_path):
    make_job(shared_trace("a100_rank3"), tmp_path, 3)
    run = perfkit_core.load(tmp_path)
    ranks = run.summary("ranks")
    assert not ranks["straggler"].any()
    assert (ranks["wait_ns"] == 0).all()
    assert not any(f.rule in ("straggler", "load-imbalance") for f in run.advise())


def test_saved_job_is_a_parquet_dataset_partitioned_by_rank(job, tmp_path):
    import pyarrow as pa
    import pyarrow.dataset as ds

    from perfkit_core.events.dataset import read_rank

    target = job.save(tmp_path / "saved")
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*.parquet"))
    assert files == [f"events/rank={r}/part-0.parquet" for r in range(RANKS)]
    dataset = ds.dataset(
        target / "events",
        format="parquet",
        partitioning=ds.partitioning(pa.schema([("rank", pa.int32())]), flavor="hive"),
    )
    assert dataset.count_rows() == len(job.events)
    two = dataset.to_table(filter=ds.field("rank") == 2, columns=["dur_ns"]).num_rows
    assert two == int((job.events["rank"] == 2).sum())
    back = perfkit_core.load(target)
    assert back.meta["ranks"] == list(range(RANKS))
    pd.testing.assert_frame_equal(back.summary("ranks"), job.summary("ranks"))
    # One rank, only the columns the ranks view reads: the same figures.
    from perfkit_core.views.multirank.ranks import FIGURE_EVENT_COLUMNS, rank_figures

    thin = read_rank(target, SLOW_RANK, columns=FIGURE_EVENT_COLUMNS)
    assert set(thin.meta["columns_read"]) <= set(FIGURE_EVENT_COLUMNS)
    full = read_rank(target, SLOW_RANK)
    assert rank_figures(thin) == pytest.approx(rank_figures(full), nan_ok=True)


def test_no_percentage_of_a_job_report_exceeds_100(job):
    from perfkit_core.report.model import build_report

    model = build_report(job, advice=False)
    for table in model.tables:
        for i, column in enumerate(table.columns):
            if column.unit != "pct" or table.id == "device":
                continue  # device: host threads busy counts each thread (documented)
            values = [row[i] for row in table.rows if row[i] is not None]
            assert all(v <= 100.0 + 1e-6 for v in values), (table.id, column.key)
            assert all(not math.isnan(v) for v in values)


def test_a_plugin_view_without_a_rule_is_one_block_per_rank(job, singles):
    from perfkit_core.plugins import get_plugin_manager, hookimpl

    class Kinds:
        @hookimpl
        def perfkit_register_views(self, register):
            register(
                "kinds",
                lambda run, **_: (
                    run.events["kind"]
                    .astype(str)
                    .value_counts()
                    .rename_axis("name")
                    .reset_index(name="events")
                ),
                "events per kind",
            )

    pm = get_plugin_manager()
    plugin = Kinds()
    pm.register(plugin, name="kinds-test-plugin")
    try:
        table = job.summary("kinds")
        assert "one block of rows per rank (4 ranks)" in table.attrs["note"]
        for r in range(RANKS):
            block = table[table["rank"] == r].set_index("name")["events"]
            own = singles[r].summary("kinds").set_index("name")["events"]
            suffix = f" (rank {r})"
            assert block.rename(lambda n, s=suffix: n.replace(s, "")).to_dict() == own.to_dict()
        assert job.summary("ranks", rank=SLOW_RANK)["straggler"].tolist() == [True]
    finally:
        pm.unregister(plugin)


def test_a_folder_of_paddle_traces_is_a_job_numbered_by_file(paddle_profile, tmp_path):
    """Paddle's chrome export records no rank: a folder of them is a job whose ranks are the
    files' places in name order, read by the same per-rank code as torch traces."""
    from perfkit_core.jobs import is_job
    from perfkit_core.jobs.job import load_job_rank

    trace = paddle_profile.json_export
    for name in ("a.paddle_trace.json", "b.paddle_trace.json"):
        (tmp_path / name).symlink_to(trace)
    assert is_job(tmp_path)
    job = perfkit_core.load(tmp_path)
    assert job.meta["ranks"] == [0, 1]
    ranks = job.summary("ranks")
    assert ranks["rank"].tolist() == [0, 1]
    # The same trace twice: the same figures on both ranks, and no straggler.
    assert ranks.iloc[0]["step_median_ns"] == ranks.iloc[1]["step_median_ns"] > 0
    assert not ranks["straggler"].any()
    alone = load_job_rank(tmp_path, 1)
    assert alone.meta["ranks"] == [1]
    own = perfkit_core.load(trace).summary("model").drop(columns="rank", errors="ignore")
    got = alone.summary("model").drop(columns="rank", errors="ignore")
    pd.testing.assert_frame_equal(got, own)
