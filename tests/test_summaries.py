"""Every summary view recomputed another way, on the real GPU traces and real CPU runs."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

import perfkit_core
from conftest import GPU_TRACES, shared_trace
from perfkit_core.events.intervals import intersect_length, merge_intervals
from tests.peer_definitions import read_events, tb_steps

VIEWS = (
    "model",
    "model_spans",
    "phases",
    "family",
    "overview",
    "device",
    "operator",
    "user",
    "kernel",
    "memcpy",
    "memory",
    "distributed",
    "steps",
    "benchmark",
)


def raw(key):
    with gzip.open(shared_trace(key)) as fh:
        return json.load(fh)["traceEvents"]


@pytest.fixture(scope="module", params=sorted(GPU_TRACES))
def gpu_run(request):
    return request.param, perfkit_core.load(shared_trace(request.param))


def test_kernel_view_equals_raw_kernel_events(gpu_run):
    key, run = gpu_run
    calls, total = Counter(), Counter()
    for e in raw(key):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"):
            calls[e["name"]] += 1
            total[e["name"]] += round(e["dur"] * 1000)
    kernels = run.summary("kernel").set_index("name")
    assert dict(kernels["calls"]) == dict(calls)
    assert {k: int(v) for k, v in kernels["gpu_total_ns"].items()} == dict(total)
    assert kernels["gpu_ratio_pct"].sum() == pytest.approx(100.0)
    assert ((kernels["gpu_ratio_pct"] >= 0) & (kernels["gpu_ratio_pct"] <= 100)).all()


def test_memcpy_view_counts_raw_copies(gpu_run):
    key, run = gpu_run
    events = [
        e
        for e in raw(key)
        if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
    ]
    view = run.summary("memcpy")
    assert view["calls"].sum() == len(events)
    assert view["gpu_total_ns"].sum() == sum(round(e["dur"] * 1000) for e in events)
    assert view["bytes"].sum() == sum(e["args"].get("bytes", 0) for e in events)
    by_dir = view.groupby("direction")["calls"].sum().to_dict()
    raw_dir = Counter(
        (
            "HtoD"
            if "HtoD" in e["name"]
            else "DtoH"
            if "DtoH" in e["name"]
            else "DtoD"
            if "DtoD" in e["name"]
            else ""
        )
        for e in events
    )
    assert {k: v for k, v in by_dir.items()} == {k: v for k, v in raw_dir.items()}


def test_overview_merged_times_stay_within_wall_time(gpu_run):
    key, run = gpu_run
    view = run.summary("overview").set_index("name")
    ev = run.events
    # The steps stretched over the device work they launched, from the raw trace.
    stretched = tb_steps(read_events(shared_trace(key)), unlaunched="own_start")
    steps = len(stretched)
    step = view.loc["step", "cpu_per_step_ns"]
    assert step * steps == pytest.approx(sum(e - s for s, e in stretched))  # they do not overlap
    assert view.loc["step", "calls_per_step"] == 1
    for name, row in view.iterrows():
        for col in ("cpu_ratio_pct", "gpu_ratio_pct"):
            if not math.isnan(row[col]):
                assert 0 <= row[col] <= 100, (name, col)
                base = row[col.replace("ratio_pct", "per_step_ns")]
                assert row[col] == pytest.approx(100.0 * base / step), (name, col)
        for col in ("cpu_per_step_ns", "gpu_per_step_ns"):
            if not math.isnan(row[col]):
                assert row[col] <= step
                if name != "step":
                    kind_rows = ev[ev["kind"] == name]
                    assert row[col] * steps <= kind_rows["dur_ns"].sum() + 1
                    assert row["calls_per_step"] * steps == len(kind_rows)


def test_device_view_is_merged_device_time(gpu_run):
    key, run = gpu_run
    view = run.summary("device")
    ev = run.events
    dev = ev[(ev["stream"] >= 0) & ev["kind"].isin(["kernel", "communication", "memcpy", "memset"])]
    stretched = np.array(tb_steps(read_events(shared_trace(key)), unlaunched="own_start"))
    window = merge_intervals(stretched[:, 0], stretched[:, 1])
    busy = merge_intervals(dev["start_ns"].to_numpy(), (dev["start_ns"] + dev["dur_ns"]).to_numpy())
    expected = intersect_length(busy, window)
    host = view.set_index("name").loc["CPU (host threads busy)"]
    # Work on host threads: not the step spans that hold it, nor Kineto's own profiler span
    # (category "Trace", pid -1), which would count as one more thread busy all along.
    own_span = ev["category"].astype(str).str.lower() == "trace"
    host_rows = ev[(ev["stream"] < 0) & (ev["dur_ns"] > 0) & (ev["kind"] != "step") & ~own_span]
    expected_host = 0
    for _, group in host_rows.groupby(["rank", "pid", "tid"]):
        merged = merge_intervals(
            group["start_ns"].to_numpy(), (group["start_ns"] + group["dur_ns"]).to_numpy()
        )
        expected_host += intersect_length(merged, window)
    steps = len(stretched)
    window_ns = int((window[1] - window[0]).sum())
    assert host["busy_per_step_ns"] * steps == pytest.approx(expected_host)
    assert host["cores_busy"] == pytest.approx(expected_host / window_ns)
    assert math.isnan(host["utilization_pct"])  # a sum over threads is not a share of the step
    gpu = view[view["name"].str.startswith("GPU")]
    assert len(gpu) == 1
    assert gpu["busy_per_step_ns"].iloc[0] * steps == pytest.approx(expected)
    assert gpu["step_ns"].iloc[0] == pytest.approx(window_ns / steps)
    assert gpu["utilization_pct"].iloc[0] == pytest.approx(100.0 * expected / window_ns)
    assert 0 < gpu["utilization_pct"].iloc[0] <= 100


def test_model_view_phases_add_up_to_the_stretched_step(gpu_run):
    """The model view splits every step (stretched over its device work, recomputed from the raw
    trace) into phases that add up to it; data is the loader spans on the training thread."""
    key, run = gpu_run
    model = run.summary("model").set_index("name")
    raw_events = read_events(shared_trace(key))
    stretched = tb_steps(raw_events, unlaunched="own_start")
    steps = len(stretched)
    step = sum(e - s for s, e in stretched) / steps
    assert model.loc["step", "per_step_ns"] == pytest.approx(step)
    assert model.loc["step", "steps"] == steps
    phases = ["data", "forward", "backward", "optimizer", "other"]
    assert model.loc[phases, "per_step_ns"].sum() == pytest.approx(step)
    assert model.loc[phases, "step_pct"].sum() == pytest.approx(100.0)
    assert ((model["step_pct"] >= 0) & (model["step_pct"] <= 100)).all()
    # Per step too: each step's phases add up to it.
    times = run.summary("phases")
    parts = times[[f"{p}_ns" for p in phases]].sum(axis=1)
    assert parts.to_numpy() == pytest.approx(times["step_ns"].to_numpy())
    assert times["step_ns"].tolist() == [e - s for s, e in stretched]
    # Data: the DataLoader spans, all on the training thread inside the steps here.
    loading = [
        (int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000))
        for e in raw_events
        if str(e.get("name", "")).startswith("enumerate(DataLoader)")
    ]
    if loading:
        inside = sum(
            max(0, min(e, s1) - max(s, s0)) for s, e in loading for s0, s1 in stretched
        )
        assert model.loc["data", "per_step_ns"] * steps == pytest.approx(inside)
    # GPU time by phase: every kernel launched in a step counts in exactly one phase.
    assert model.loc[phases, "gpu_per_step_ns"].sum() == pytest.approx(
        model.loc["step", "gpu_per_step_ns"]
    )
    assert model.loc[phases, "gpu_share_pct"].sum() == pytest.approx(100.0)


def test_model_spans_view_sums_the_phase_spans(gpu_run):
    """Paddle's definition: each phase row sums the outermost spans of its kind."""
    _, run = gpu_run
    model = run.summary("model_spans").set_index("name")
    ev = run.events
    spans = ev[ev["kind"] == "dataloader"]
    assert model.loc["dataloader", "calls"] == len(spans)
    assert model.loc["dataloader", "cpu_total_ns"] == spans["dur_ns"].sum()
    parts = model.loc[
        ["dataloader", "forward", "backward", "optimization", "others"], "cpu_total_ns"
    ].sum()
    assert parts == model.loc["step", "cpu_total_ns"]
    assert ((model["cpu_ratio_pct"].dropna() >= 0) & (model["cpu_ratio_pct"].dropna() <= 100)).all()


def test_distributed_view_on_nccl_jobs():
    run = perfkit_core.load(shared_trace("a100_rank3"))
    view = run.summary("distributed").set_index("name")
    ev = run.events
    comm = ev[(ev["kind"] == "communication") & (ev["stream"] >= 0)]
    assert len(comm) > 0
    steps = int((ev["kind"] == "step").sum())
    assert view.loc["communication", "per_step_ns"] * steps <= comm["dur_ns"].sum()
    assert view.loc["overlap", "per_step_ns"] <= min(
        view.loc["communication", "per_step_ns"], view.loc["computation", "per_step_ns"]
    )
    step = run.summary("model").set_index("name").loc["step", "per_step_ns"]
    assert view.loc["step", "per_step_ns"] == pytest.approx(step)
    assert ((view["ratio_pct"] >= 0) & (view["ratio_pct"] <= 100)).all()


def test_steps_and_benchmark_views():
    run = perfkit_core.load(shared_trace("resnet_nw0"))
    steps = run.summary("steps")
    ev = run.events
    spans = ev[ev["kind"] == "step"].sort_values("start_ns")
    stretched = tb_steps(read_events(shared_trace("resnet_nw0")), unlaunched="own_start")
    assert steps["dur_ns"].tolist() == [e - s for s, e in stretched]
    assert steps["host_dur_ns"].tolist() == spans["dur_ns"].tolist()
    # Waiting for data: the loader spans on the training thread, clipped to each stretched step
    # (a step stretched over its device work holds the start of the next step's loading).
    loaders = ev[ev["kind"] == "dataloader"]
    clipped = [
        sum(
            max(0, min(int(b), e) - max(int(a), s0))
            for a, b in zip(loaders["start_ns"], loaders["start_ns"] + loaders["dur_ns"], strict=True)
        )
        for s0, e in stretched
    ]
    assert steps["data_ns"].tolist() == pytest.approx(clipped)
    bench = run.summary("benchmark").set_index("name")
    kept = steps["dur_ns"].to_numpy() / 1.0  # every step, in ns
    assert bench.loc["batch_cost", "unit"] == "ns"
    assert bench.loc["batch_cost", "avg"] == pytest.approx(kept.mean())
    assert bench.loc["batch_cost", "max"] == pytest.approx(kept.max())
    assert bench.loc["reader_cost", "avg"] == pytest.approx(steps["data_ns"].mean())
    assert bench.loc["ips", "avg"] == pytest.approx(len(kept) / kept.sum() * 1e9)
    assert bench.attrs["note"] == "all 6 steps"
    # The headline's throughput is the same figure.
    model = run.summary("model").set_index("name")
    assert bench.loc["ips", "avg"] == pytest.approx(1e9 / model.loc["step", "per_step_ns"])
    with_batch = run.summary("benchmark", batch_size=32).set_index("name")
    assert with_batch.loc["ips_samples", "avg"] == pytest.approx(32 * len(kept) / kept.sum() * 1e9)
    warm = run.summary("benchmark", warmup=1).set_index("name")
    assert warm.loc["batch_cost", "avg"] == pytest.approx(kept[1:].mean())
    assert "5 of 6 steps" in warm.attrs["note"]


def test_memory_view_recomputes_from_raw_memory_events():
    """Bytes allocated per step: the allocations inside a ProfilerStep span, over the 6 steps
    (tests/test_memory.py recomputes every figure of the memory views)."""
    key = "resnet_nw0"
    events = raw(key)
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    ]
    run = perfkit_core.load(shared_trace(key))
    by_device = run.summary("memory", by="device").set_index("name")
    allocs = defaultdict(int)
    for e in events:
        a = e.get("args") or {}
        if e.get("name") != "[memory]" or a["Bytes"] <= 0:
            continue
        if any(s <= e["ts"] <= end for s, end in steps):
            allocs["cpu" if a["Device Type"] == 0 else f"gpu:{a['Device Id']}"] += a["Bytes"]
    per_step = {k: v / len(steps) for k, v in allocs.items()}
    assert dict(by_device["allocated_bytes"]) == pytest.approx(per_step)
    by_op = run.summary("memory")
    assert by_op["allocated_bytes"].sum() == pytest.approx(sum(per_step.values()))


def test_cpu_runs_say_gpu_was_not_measured(torch_profile, paddle_profile):
    for run in (
        perfkit_core.load(torch_profile.runs[0]),
        perfkit_core.load(paddle_profile.runs[0]),
    ):
        assert run.summary("kernel").empty and "no kernels" in run.summary("kernel").attrs["note"]
        assert run.summary("memcpy").empty
        over = run.summary("overview")
        assert over["gpu_per_step_ns"].isna().all()
        assert "gpu_per_step_ns" not in run.summary("model").columns
        assert run.summary("model_spans")["gpu_total_ns"].isna().all()
        assert run.summary("memory")["allocations"].sum() > 0  # both recorded memory


def test_trace_without_steps_counts_the_whole_span(tmp_path):
    path = tmp_path / "nosteps.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::mm",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 10,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::add",
                        "pid": 1,
                        "tid": 1,
                        "ts": 20,
                        "dur": 5,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::add",
                        "pid": 1,
                        "tid": 2,
                        "ts": 22,
                        "dur": 5,
                    },
                ]
            }
        )
    )
    run = perfkit_core.load(path)
    for view in VIEWS:
        frame = run.summary(view)  # never a crash
        assert frame is not None
    model = run.summary("model").set_index("name")
    assert model.loc["step", "per_step_ns"] == 27_000
    assert list(model.index) == ["step"]  # phases need steps
    assert "no steps" in run.summary("model").attrs["note"]
    spans = run.summary("model_spans").set_index("name")
    assert spans.loc["step", "cpu_total_ns"] == 27_000
    over = run.summary("overview").set_index("name")
    assert over.loc["operator", "cpu_per_step_ns"] == 10_000 + 7_000  # two threads overlap 20-27 us


def test_overlapping_same_thread_events_and_clock_skew(tmp_path):
    path = tmp_path / "odd.json"
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
        },
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": 30},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "b",
            "pid": 1,
            "tid": 1,
            "ts": 30,
            "dur": 30,
        },  # overlaps a, not nested
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 35,
            "dur": 2,
            "args": {"correlation": 7},
        },
        # device clock behind the host's: the kernel "starts" before its launch
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 4,
            "args": {"correlation": 7, "device": 0, "stream": 7},
        },
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    run = perfkit_core.load(path)
    for view in VIEWS:
        run.summary(view)
    ev = run.events.set_index(run.events["name"].astype(str))
    assert ev.loc["k", "step"] == 1  # the step of its launch, not of its skewed start
    ops = run.summary("operator").set_index("name")
    assert (ops["cpu_self_ns"] >= 0).all()
    assert ops.loc["b", "gpu_total_ns"] == 4000


def test_views_agree_between_saved_and_loaded_runs(tmp_path):
    run = perfkit_core.load(shared_trace("v100_rank1"))
    back = perfkit_core.load(run.save(tmp_path / "r"))
    for view in VIEWS:
        a, b = run.summary(view), back.summary(view)
        assert a.equals(b), view


def test_interval_helpers():
    s, e = merge_intervals(np.array([5, 0, 20, 8]), np.array([10, 6, 30, 9]))
    assert s.tolist() == [0, 20] and e.tolist() == [10, 30]
    assert (
        intersect_length((np.array([0]), np.array([10])), (np.array([5, 8]), np.array([6, 20])))
        == 3
    )


def test_phase_time_outside_steps_is_not_shared_out(tmp_path):
    path = tmp_path / "outside.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 70,
                    },
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": "ProfilerStep#3",
                        "pid": 1,
                        "tid": 1,
                        "ts": 100,
                        "dur": 100,
                    },
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                        "pid": 1,
                        "tid": 1,
                        "ts": 100,
                        "dur": 20,
                    },
                ]
            }
        )
    )
    run = perfkit_core.load(path)
    model = run.summary("model_spans").set_index("name")
    assert model.loc["dataloader", "cpu_total_ns"] == 20_000
    assert model.loc["others", "cpu_total_ns"] == 80_000
    assert (model["cpu_ratio_pct"].dropna() >= 0).all()
    phases = run.summary("model").set_index("name")
    assert phases.loc["data", "per_step_ns"] == 20_000
    assert phases.loc["step", "per_step_ns"] == 100_000


def test_cli_passes_rank_and_top_to_every_view(tmp_path, capsys):
    from perfkit_core.cli import main

    for key in ("a100_rank3", "v100_rank1"):
        src = shared_trace(key)
        (tmp_path / src.name).write_bytes(src.read_bytes())
    assert (
        main(
            [
                "report",
                str(tmp_path),
                "--views",
                "model,kernel,steps",
                "--rank",
                "1",
                "--top",
                "2",
                "--format",
                "json",
            ]
        )
        == 0
    )
    tables = json.loads(capsys.readouterr().out)["tables"]
    views = {name: table["rows"] for name, table in tables.items()}
    run = perfkit_core.load(tmp_path)
    # --top cuts ranked tables (kernels) only; the model view's phases are shown whole.
    expected = run.summary("model", rank=1)
    assert [r["per_step_ns"] for r in views["model"]] == expected["per_step_ns"].tolist()
    assert len(views["kernel"]) == 2
    assert {r["rank"] for r in views["steps"]} == {1}


def test_torch_forward_is_derived_by_the_documented_rule(tmp_path):
    path = tmp_path / "phases.json"
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 10,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::linear",
            "pid": 1,
            "tid": 1,
            "ts": 15,
            "dur": 20,
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 40, "dur": 15},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "autograd::engine::evaluate_function: AddmmBackward0",
            "pid": 1,
            "tid": 1,
            "ts": 50,
            "dur": 20,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "Optimizer.step#SGD.step",
            "pid": 1,
            "tid": 1,
            "ts": 80,
            "dur": 10,
        },
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    run = perfkit_core.load(path)
    model = run.summary("model_spans").set_index("name")
    # forward: linear (15-35) and relu clipped at the first backward event (40-50) = 30 us
    assert model.loc["forward", "cpu_total_ns"] == 30_000
    assert model.loc["forward", "calls"] == 1
    assert model.loc["backward", "cpu_total_ns"] == 20_000
    assert model.loc["others", "cpu_total_ns"] == 100_000 - 10_000 - 30_000 - 20_000 - 10_000
    # The step's phases: data 0-10; forward 10-50 (the step before its first backward event,
    # the gaps between ops included); backward 50-70; then 70-80 other and 80-90 the
    # optimizer; 90-100 other again.
    phases = run.summary("model").set_index("name")["per_step_ns"]
    assert phases.to_dict() == {
        "step": 100_000,
        "data": 10_000,
        "forward": 40_000,
        "backward": 20_000,
        "optimizer": 10_000,
        "other": 20_000,
    }


@pytest.mark.parametrize("key", ["resnet_nw0", "a100_rank3"])
def test_torch_model_spans_view_adds_up_on_real_traces(key):
    model = perfkit_core.load(shared_trace(key)).summary("model_spans").set_index("name")
    assert model.loc["forward", "calls"] == model.loc["step", "calls"] == 6
    parts = ["dataloader", "forward", "backward", "optimization", "others"]
    assert model.loc[parts, "cpu_total_ns"].sum() == model.loc["step", "cpu_total_ns"]
    assert model.loc[parts, "gpu_total_ns"].sum() == pytest.approx(
        model.loc["step", "gpu_total_ns"]
    )
    assert (model.loc[parts, "cpu_total_ns"] >= 0).all() and (
        model.loc[parts, "gpu_total_ns"] >= 0
    ).all()
    assert model.loc["backward", "gpu_total_ns"] > model.loc["forward", "gpu_total_ns"] > 0


@pytest.mark.parametrize("key", ["resnet_nw0", "a100_rank3"])
def test_model_view_counts_one_backward_per_step(key):
    """Steps, not spans: torch records one span per autograd node, but a step has one backward
    pass, and the GPU time of its kernels is backward's, not forward's."""
    model = perfkit_core.load(shared_trace(key)).summary("model").set_index("name")
    assert (model["steps"] == 6).all()
    assert model.loc["backward", "gpu_per_step_ns"] > model.loc["forward", "gpu_per_step_ns"] > 0


def test_single_threaded_cpu_run_is_never_over_100_percent_busy(torch_profile):
    """The demo trains on one thread: before the profiler's own span was set apart, its
    `PyTorch Profiler (0)` span counted as a second busy thread (193.9%)."""
    run = perfkit_core.load(torch_profile.runs[0])
    host = run.summary("device").set_index("name").loc["CPU (host threads busy)"]
    assert 0.5 < host["cores_busy"] <= 1.0


def test_profiled_span_ends_with_the_work_not_the_profiler_marker(traces_dir):
    run = perfkit_core.load(traces_dir / "torch-cpu" / "gloo_cpu_only_rank34.pt.trace.json.gz")
    ev = run.events
    marker = ev[ev["name"] == "Record Window End"]
    assert len(marker) == 1 and (marker["kind"] == "profiler").all()
    work = ev[~ev["name"].astype(str).isin(["PyTorch Profiler (0)", "Record Window End"])]
    work = work[~work["name"].astype(str).str.startswith("Iteration Start")]
    start, end = run.meta["span_ns"]
    assert start == work["start_ns"].min()
    assert end == (work["start_ns"] + work["dur_ns"]).max()
    assert end < marker["start_ns"].iloc[0]


@pytest.mark.parametrize("seed", range(20))
def test_overlap_per_window_equals_intersecting_each_window(seed):
    """The breakdown's per-step overlaps (prefix sums trimmed at the edges) against intersecting
    each window with the merged list, one window at a time."""
    from perfkit_core.events.intervals import intersect_intervals, length, overlap_per_window

    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 1000, size=rng.integers(0, 40))
    merged = merge_intervals(starts, starts + rng.integers(0, 60, size=len(starts)))
    a = rng.integers(-50, 1050, size=30)
    b = a + rng.integers(0, 200, size=30)
    expected = [
        length(intersect_intervals((np.array([s]), np.array([e])), merged))
        for s, e in zip(a.tolist(), b.tolist(), strict=True)
    ]
    assert overlap_per_window(merged, a, b).tolist() == expected


@pytest.mark.parametrize("key", ["a100_rank3", "rank_non_gpu"])
def test_category_subset_reads_as_category_values(key):
    """The operator table groups rows by their names as codes (``category_subset``): per row
    they read as the rows' strings (``category_values``), a missing value as "", on a real
    trace, and equal texts share one category."""
    from perfkit_core.views.common import category_subset, category_values

    ev = perfkit_core.load(shared_trace(key)).events
    rows = np.flatnonzero(ev["stream"].to_numpy() < 0)[::3]
    for column in ("name", "full_name", "input_shapes", "stack"):
        coded = category_subset(ev[column], rows)
        assert coded.categories.is_unique
        texts = np.asarray(coded.categories, dtype=object)[coded.codes]
        assert texts.tolist() == category_values(ev[column], rows).tolist(), column
