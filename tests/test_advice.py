"""Advice rules: each fires where it should and stays quiet where it should not, on small
synthetic traces; and the real evidence the issue names, on the real traces and CPU runs."""

from __future__ import annotations

import json

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.advice.loader import LOADER_BATCH_NS
from perfkit_core.cli import main
from perfkit_core.plugins import framework_hook

GPU_RULES = {
    "placement",
    "cpu-bound-op",
    "launch-bound",
    "low-gpu-utilization",
    "amp",
    "memory-pressure",
    "pageable-memcpy",
}


class Trace:
    """A small Kineto-style trace, built event by event (times in microseconds)."""

    def __init__(self, steps: int = 4, step_us: float = 1000.0) -> None:
        self.events: list[dict] = []
        self.extra: dict = {}
        self.steps = steps
        self.step_us = step_us
        self.corr = 0
        for i in range(steps):
            self.events.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{i}",
                    "pid": 1,
                    "tid": 1,
                    "ts": i * step_us,
                    "dur": step_us,
                }
            )

    def each_step(self):
        return [i * self.step_us for i in range(self.steps)]

    def sync(self, ts, dur):
        """The host waits for the device (``cudaDeviceSynchronize``) from ``ts`` for ``dur``."""
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaDeviceSynchronize",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {},
            }
        )

    def op(self, name, ts, dur, cat="cpu_op"):
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
        )

    def launch(
        self,
        ts,
        dur,
        device_name,
        dev_ts,
        dev_dur,
        *,
        cat="kernel",
        runtime="cudaLaunchKernel",
        args=None,
    ):
        self.corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": runtime,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": self.corr},
            }
        )
        dev_args = {"correlation": self.corr, "device": 0, "stream": 7, **(args or {})}
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": device_name,
                "pid": 0,
                "tid": 7,
                "ts": dev_ts,
                "dur": dev_dur,
                "args": dev_args,
            }
        )

    def write(self, path):
        path.write_text(json.dumps({"traceEvents": self.events, **self.extra}))
        return perfkit_core.load(path)


def fired(run, rule):
    return [f for f in run.advise() if f.rule == rule]


def check_saving_bound(finding, based_on):
    assert 0 <= finding.saving_ns <= based_on + 1e-6


# ------------------------------------------------------------------ each rule, both ways


@pytest.mark.parametrize("loader_us,expected", [(200, True), (20, False)])
def test_input_pipeline(tmp_path, loader_us, expected):
    t = Trace()
    for s in t.each_step():
        t.op(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            s,
            loader_us,
            cat="user_annotation",
        )
        t.op("aten::mm", s + loader_us + 10, 500)
    found = fired(t.write(tmp_path / "t.json"), "input-pipeline")
    assert bool(found) == expected
    if found:
        # Savings are per step: each of the 4 steps waits loader_us for data, and the rest of
        # the step plus receiving a batch from a worker (2.3 ms) is longer than the 1 ms step
        # was: workers would save nothing here.
        check_saving_bound(found[0], loader_us * 1000)
        ev = found[0].evidence
        assert ev["data_per_step_ns"] == loader_us * 1000
        assert ev["rest_per_step_ns"] + LOADER_BATCH_NS > ev["basis_step_ns"]
        assert found[0].saving_ns == 0.0
        assert ev["data_pct"] == pytest.approx(20.0)


@pytest.mark.parametrize("dtoh,expected", [(True, True), (False, False)])
def test_placement(tmp_path, dtoh, expected):
    t = Trace()
    for s in t.each_step():
        t.op("aten::mm", s + 10, 50)
        t.launch(s + 20, 5, "gemm_kernel", s + 30, 400)
        t.op("aten::item", s + 100, 300)
        t.op("aten::_local_scalar_dense", s + 101, 298)
        if dtoh:
            t.launch(
                s + 110,
                280,
                "Memcpy DtoH (Device -> Pageable)",
                s + 380,
                5,
                cat="gpu_memcpy",
                runtime="cudaMemcpyAsync",
                args={"bytes": 4},
            )
        t.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamSynchronize" if dtoh else "cudaGetDevice",
                "pid": 1,
                "tid": 1,
                "ts": s + 391,
                "dur": 5,
            }
        )
    found = fired(t.write(tmp_path / "t.json"), "placement")
    assert bool(found) == expected
    if found:
        f = found[0]
        assert f.evidence["ops"][0]["op"] == "aten::item"
        assert f.evidence["device_to_host_copies_per_step"] == 1
        assert f.evidence["syncs_per_step"] == 1
        check_saving_bound(f, 4 * 300 * 1000)
        assert "aten::item" in f.remedy and ".item()" in f.remedy


@pytest.mark.parametrize("device_us,expected", [(5, True), (900, False)])
def test_cpu_bound_op(tmp_path, device_us, expected):
    t = Trace()
    for s in t.each_step():
        t.op("slice_grad", s + 10, 400)
        t.launch(s + 20, 5, "slice_kernel", s + 30, device_us)
    found = fired(t.write(tmp_path / "t.json"), "cpu-bound-op")
    assert bool(found) == expected
    if found:
        assert found[0].evidence["op"] == "slice_grad"
        check_saving_bound(found[0], 4 * 400 * 1000)


@pytest.mark.parametrize("kernel_us,expected", [(2, True), (200, False)])
def test_launch_bound(tmp_path, kernel_us, expected):
    t = Trace()
    for s in t.each_step():
        for k in range(40 if kernel_us == 2 else 4):
            t.launch(s + 10 + k * 20, 15, "tiny_kernel", s + 20 + k * 20, kernel_us)
    run = t.write(tmp_path / "t.json")
    found = fired(run, "launch-bound")
    assert bool(found) == expected
    if found:
        f = found[0]
        assert f.evidence["median_kernel_ns"] == 2000
        # The step less the GPU's busy time (40 kernels of 2 us): no step timer, so the
        # profiled step, and no other finding claims the idle time.
        step = float(run.summary("steps")["dur_ns"].mean())
        assert f.evidence["gpu_busy_per_step_ns"] == 40 * 2000
        assert f.saving_ns == pytest.approx(step - 40 * 2000)


@pytest.mark.parametrize("kernel_us,expected", [(100, True), (900, False)])
def test_low_gpu_utilization(tmp_path, kernel_us, expected):
    t = Trace()
    for s in t.each_step():
        t.launch(s + 10, 5, "big_kernel", s + 20, kernel_us)
    found = fired(t.write(tmp_path / "t.json"), "low-gpu-utilization")
    assert bool(found) == expected
    if found:
        assert found[0].evidence["gpu_busy_pct"] == pytest.approx(100 * kernel_us / 1000)
        check_saving_bound(found[0], 1000 * 1000)


@pytest.mark.parametrize("overlapped,expected", [(False, True), (True, False)])
def test_communication(tmp_path, overlapped, expected):
    t = Trace()
    for s in t.each_step():
        t.launch(s + 10, 5, "compute_kernel", s + 20, 600)
        comm_start = s + 100 if overlapped else s + 650
        comm_len = 300 if not overlapped else 20
        t.launch(s + 15, 5, "ncclKernel_AllReduce_RING_LL_Sum_float", comm_start, comm_len)
    found = fired(t.write(tmp_path / "t.json"), "communication")
    assert bool(found) == expected
    if found:
        check_saving_bound(found[0], found[0].evidence["communication_per_step_ns"])


@pytest.mark.parametrize(
    "kernel,expected",
    [
        ("volta_sgemm_128x64_nn", True),
        ("volta_s1688gemm_fp16_128x128_tn", False),
        # cuBLAS's FP32 GEMM with TF32 off on an A100 or newer: an xmma kernel on CUDA cores
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
            "aligna4_alignc4_execute_kernel__5x_cublas",
            True,
        ),
        # the same family with TF32 on runs on tensor cores
        (
            "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_"
            "tensor16x8x8_execute_kernel__5x_cublas",
            False,
        ),
    ],
)
def test_amp(tmp_path, kernel, expected):
    t = Trace()
    for s in t.each_step():
        t.launch(s + 10, 5, kernel, s + 20, 700)
        t.sync(s + 16, 705)  # the host waits for the product, as a loop that reads its loss
    found = fired(t.write(tmp_path / "t.json"), "amp")
    assert bool(found) == expected
    if found:
        # No device peaks or shapes: the product's time at AMP_SPEEDUP, all of it off a step
        # the GPU paces (the host's own time is its 6 us launch and the rest of the step).
        assert found[0].evidence["speedup_from"] == "constant"
        assert found[0].saving_ns == pytest.approx(700 * 1000 / 2)  # per step
        assert "torch.autocast" in found[0].remedy
    run = perfkit_core.load(tmp_path / "t.json")
    assert bool(run.summary("kernel").set_index("name").loc[kernel, "tensor_cores"]) != expected


@pytest.mark.parametrize("share,expected", [(0.95, True), (0.5, False)])
def test_memory_pressure(tmp_path, share, expected):
    t = Trace()
    total = 16 * 2**30
    t.extra["deviceProperties"] = [{"id": 0, "name": "GPU", "totalGlobalMem": total}]
    t.launch(10, 5, "k", 20, 600)
    t.events.append(
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 30,
            "args": {
                "Device Type": 1,
                "Device Id": 0,
                "Bytes": 1024,
                "Total Allocated": int(total * share),
                "Total Reserved": int(total * share),
            },
        }
    )
    found = fired(t.write(tmp_path / "t.json"), "memory-pressure")
    assert bool(found) == expected
    if found:
        assert found[0].saving_ns == 0 and found[0].evidence["peak_bytes"] == int(total * share)


@pytest.mark.parametrize("memory,expected", [("Pageable", True), ("Pinned", False)])
def test_pageable_memcpy(tmp_path, memory, expected):
    t = Trace()
    for s in t.each_step():
        t.launch(
            s + 10,
            50,
            f"Memcpy HtoD ({memory} -> Device)",
            s + 20,
            40,
            cat="gpu_memcpy",
            runtime="cudaMemcpyAsync",
            args={"bytes": 1 << 20},
        )
        t.launch(s + 70, 5, "k", s + 80, 800)
    found = fired(t.write(tmp_path / "t.json"), "pageable-memcpy")
    assert bool(found) == expected
    if found:
        assert found[0].saving_ns == 50 * 1000  # per step
        assert "pin_memory" in found[0].remedy


# ------------------------------------------------------------------ real evidence


def test_single_process_dataloader_resnet_gets_input_pipeline_advice():
    run = perfkit_core.load(shared_trace("resnet_nw0"))
    (finding,) = fired(run, "input-pipeline")
    share = 100 * finding.saving_ns / finding.evidence["step_time_ns"]
    assert 35 <= share <= 45  # about 40% of each step
    ev = run.events
    # The data phase: the DataLoader spans within the (stretched) steps, per step.
    steps = run.summary("steps")
    # All of it leaves but receiving each batch from a worker (the rest of the step is longer).
    assert finding.saving_ns == pytest.approx(steps["data_ns"].mean() - LOADER_BATCH_NS)
    assert (finding.saving_ns + LOADER_BATCH_NS) * len(steps) == pytest.approx(
        ev.loc[ev["kind"] == "dataloader", "dur_ns"].sum(), rel=1e-6
    )
    assert "num_workers" in finding.remedy and "pin_memory=True" in finding.remedy
    assert finding.severity == "high"


def test_four_worker_resnet_gets_no_input_pipeline_advice():
    assert fired(perfkit_core.load(shared_trace("resnet_nw4")), "input-pipeline") == []


def test_a100_job_gets_placement_advice_naming_the_dtoh_op():
    run = perfkit_core.load(shared_trace("a100_rank3"))
    (finding,) = fired(run, "placement")
    ops = [o["op"] for o in finding.evidence["ops"]]
    assert "aten::item" in ops
    assert finding.evidence["device_to_host_copies_per_step"] > 0
    blocked = sum(o["blocked_per_step_ns"] for o in finding.evidence["ops"])
    assert finding.saving_ns <= blocked + 1
    steps = finding.evidence["steps"]
    assert finding.saving_ns <= sum(o["cpu_total_ns"] for o in finding.evidence["ops"]) / steps


def test_cpu_runs_get_no_gpu_advice(torch_profile, paddle_profile):
    for run in (
        perfkit_core.load(torch_profile.runs[0]),
        perfkit_core.load(paddle_profile.runs[0]),
        perfkit_core.load(shared_trace("rank_non_gpu")),
    ):
        rules = {f.rule for f in run.advise()}
        assert not rules & GPU_RULES, rules


def test_findings_are_sorted_and_bounded():
    run = perfkit_core.load(shared_trace("v100_rank1"))
    findings = run.advise()
    savings = [f.saving_ns for f in findings]
    assert savings == sorted(savings, reverse=True)
    for f in findings:
        assert f.severity in ("high", "medium", "low")
        assert f.saving_ns <= f.evidence["step_time_ns"]
        assert f.remedy


def test_paddle_runs_get_paddle_remedies(paddle_profile):
    from perfkit_core.advice import Finding

    pm = perfkit_core.get_plugin_manager()
    finding = Finding(
        id="placement",
        title="t",
        severity="high",
        saving_ns=1.0,
        rule="placement",
        evidence={"ops": [{"op": "where"}]},
    )
    text = framework_hook("perfkit_remedy", "paddle", pm)(finding=finding, framework="paddle")
    assert "device_guard('cpu')" in text and "CPUPlace" in text and "where" in text


def test_cli_advise_text_and_json(capsys):
    path = shared_trace("resnet_nw0")
    assert main(["advise", str(path)]) == 0
    out = capsys.readouterr().out
    assert "input-pipeline" in out and "What to change" in out and "Saves " in out
    # Evidence reads as sentences with units, not raw keys (the JSON keeps the keys).
    steps = perfkit_core.load(path).summary("steps").set_index("step")
    worst = steps["data_ns"].idxmax()
    assert (
        f"Step {worst}: waiting for data {steps.loc[worst, 'data_ns'] / 1e6:.1f} ms of "
        f"{steps.loc[worst, 'dur_ns'] / 1e6:.1f} ms." in out
    )
    assert "data_per_step_ns" not in out and "worst_steps" not in out
    assert main(["advise", str(path), "--format", "json", "--rules", "input-pipeline"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [f["id"] for f in data] == ["input-pipeline"]
    assert set(data[0]) >= {"id", "title", "severity", "evidence", "saving_ns", "remedy"}
    assert data[0]["evidence"]["data_per_step_ns"] - LOADER_BATCH_NS == data[0]["saving_ns"]
    assert data[0]["details"] and data[0]["estimate"]


def test_report_shows_advice_first(capsys):
    assert main(["report", str(shared_trace("resnet_nw0")), "--views", "model"]) == 0
    out = capsys.readouterr().out
    assert out.index("Advice") < out.index("Model Summary")
