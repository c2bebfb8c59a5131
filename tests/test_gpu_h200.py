"""Real torch runs on an NVIDIA H200 (tests/data/torch_gpu_h200): what only a GPU shows, read
again on a machine without one. Each figure perfkit gives is recomputed from the raw events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.views.peaks import run_peaks
from perfkit_core.views.roofline import roofline_view

H200 = Path(__file__).parent / "data" / "torch_gpu_h200"


def load(name: str):
    return perfkit_core.load(H200 / name)


def kernel_ns(run, pattern: str) -> float:
    """The device time of the run's kernels whose names contain ``pattern``, from the events."""
    ev = run.events
    kernels = ev[(ev["kind"] == "kernel") & ev["name"].astype(str).str.contains(pattern)]
    return float(kernels["dur_ns"].sum())


def test_hopper_nvjet_gemms_are_placed_against_the_tensor_core_roof():
    """cuBLAS runs bf16 products on Hopper as ``nvjet_*`` kernels. Read as CUDA-core kernels,
    an 8192³ bf16 product was measured against the fp32 peak (67 TFLOP/s) and ran at 1202% of
    its roofline."""
    run = load("roofline")
    peaks = run_peaks(run)
    assert peaks is not None and peaks.device == "NVIDIA H200 SXM"
    view = roofline_view(run, by="shape")
    steps = len(run.meta["steps"])
    flops = 2.0 * 8192**3
    rows = {(r.name, r.precision, round(r.gflops / r.calls_per_step)): r for r in view.itertuples()}
    bf16 = rows[("aten::matmul", "bf16 tensor", round(flops / 1e9))]
    tf32 = rows[("aten::matmul", "tf32 tensor", round(flops / 1e9))]
    fp32 = rows[("aten::matmul", "fp32", round(2.0 * 4096**3 / 1e9))]
    # The bf16 product's time is its nvjet kernel's, and its rate that kernel's from the events.
    nvjet_ns = kernel_ns(run, "nvjet_sm90") / steps
    # Its device time also holds a memset of under 1 us a call.
    assert 0 <= bf16.time_ns - nvjet_ns < 1000
    assert bf16.achieved_tflops_per_s == pytest.approx(flops / bf16.time_ns / 1e3, rel=1e-9)
    assert bf16.achieved_tflops_per_s == pytest.approx(flops / nvjet_ns / 1e3, rel=1e-3)
    assert bf16.peak_tflops_per_s == 989.5
    assert 50 < bf16.roofline_pct <= 100
    assert bf16.roofline_pct == pytest.approx(100 * bf16.achieved_tflops_per_s / 989.5, rel=1e-6)
    # TF32 (sm90_xmma ... tf32 ...) and plain fp32 (sm80_xmma ... ffma) stay as they were read.
    assert tf32.peak_tflops_per_s == 494.5 and 50 < tf32.roofline_pct <= 100
    assert fp32.peak_tflops_per_s == 67.0 and 50 < fp32.roofline_pct <= 100
    assert fp32.time_ns == pytest.approx(kernel_ns(run, "ffma") / steps, rel=1e-6)


def test_amp_is_not_advised_once_the_products_run_in_bf16_on_hopper():
    """The bf16 run of the loop, whose products ran as nvjet kernels, gets neither amp nor
    tensor-cores-unused for them."""
    from perfkit_core.advice import advise

    after = {f.id for f in advise(load("amp_bf16"))}
    assert "amp" not in after and "tensor-cores-unused" not in after
    bf16 = load("amp_bf16")
    kernels = bf16.summary("kernel")
    nvjet = kernels[kernels["name"].str.contains("nvjet")]
    assert len(nvjet) >= 3 and bool(nvjet["tensor_cores"].all())
    assert np.isclose(nvjet["gpu_total_ns"].sum(), kernel_ns(bf16, "nvjet"))


def test_amp_promises_nothing_where_the_host_paces_the_step():
    """fp32 products took 75% of the GPU's time, but the host took 2.9 of the 3.4 ms step: under
    bf16 autocast the GPU's time fell from 2.99 to 1.31 ms a step while the step without the
    profiler grew from 3.36 to 4.13 ms (40 casts a step more to dispatch). The finding says the
    host paces the step and promises nothing."""
    from perfkit_core.advice import advise

    fp32, bf16 = load("amp_fp32"), load("amp_bf16")
    finding = next(f for f in advise(fp32) if f.id == "amp")
    assert finding.saving_ns == 0
    assert "the host paces the step" in finding.title
    ev = finding.evidence
    # The parts, recomputed: the products at the bf16 peak's share of the fp32 one ...
    assert ev["speedup"] == pytest.approx(989.5 / 67.0, rel=0.01)
    assert ev["matrix_ops_after_per_step_ns"] == pytest.approx(
        ev["matrix_ops_per_step_ns"] * 67.0 / 989.5, rel=0.01
    )
    # ... the casts autocast adds, counted against those the bf16 run recorded ...
    steps = len(bf16.meta["steps"])
    names = bf16.events["name"].astype(str)
    recorded = ((names == "aten::_to_copy") & (bf16.events["step"] >= 0)).sum() / steps
    assert abs(ev["casts_per_step"] - recorded) <= 0.1 * recorded
    # ... and the host's own time: the step without the profiler less its waits.
    assert ev["host_per_step_ns"] < unprofiled_step_ns(fp32)
    assert ev["host_bound_step_ns"] > unprofiled_step_ns(fp32)
    # What autocast delivered: the GPU's time fell, the step did not.
    assert merged_busy_ns(bf16) < 0.5 * merged_busy_ns(fp32)
    assert unprofiled_step_ns(bf16) > unprofiled_step_ns(fp32)


def test_an_autocast_product_is_counted_in_the_precision_it_ran_in():
    """Under autocast, ``aten::linear`` of float32 inputs casts them and calls ``aten::linear``
    of bf16 ones. The inner one is counted, in bf16 on tensor cores with its own kernel's time;
    the casts are counted as the copies they are, not as fp32 math of the product."""
    run = load("amp_bf16")
    view = roofline_view(run, by="shape")
    steps = len(run.meta["steps"])
    linear = view[
        (view["name"] == "aten::linear")
        & (view["input_shapes"].str.startswith("[[256, 4096], [4096, 4096]"))
    ]
    assert len(linear) == 1
    row = linear.iloc[0]
    assert row["precision"] == "bf16 tensor"
    assert row["time_ns"] == pytest.approx(
        kernel_ns(run, "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_bias") / steps, rel=1e-6
    )
    assert row["gflops"] == pytest.approx(4 * 2 * 256 * 4096 * 4096 / 1e9, rel=1e-9)
    casts = view[view["name"] == "aten::_to_copy"]
    assert casts["time_ns"].sum() > row["time_ns"]


def unprofiled_step_ns(run) -> float:
    """The median step the step timer timed without the profiler, from the run's record."""
    return float(np.median(run.meta["step_timer"]["unprofiled_ns"]))


def merged_busy_ns(run) -> float:
    """The device's busy time per step, its kernels, copies and sets merged, from the events."""
    ev = run.events
    device = ev[ev["kind"].isin(["kernel", "memcpy", "memset"]) & (ev["step"] >= 0)]
    device = device.sort_values("start_ns")
    busy, end = 0, -1
    for start, dur in zip(device["start_ns"], device["dur_ns"], strict=True):
        stop = start + dur
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy / len(run.meta["steps"])


def test_launch_bound_promises_what_cuda_graphs_delivered():
    """A chain of 200 tiny elementwise links: the host launched 1022 kernels a step that ran
    0.94 ms on the GPU. The finding promises the step without the profiler less the GPU's busy
    time; replayed as CUDA graphs, the same loop's step fell from 16.08 to 1.53 ms."""
    from perfkit_core.advice import advise

    eager, graphs = load("launch_eager"), load("launch_graphs")
    finding = next(f for f in advise(eager) if f.id == "launch-bound")
    assert finding.evidence["basis"] == "unprofiled"
    expected = unprofiled_step_ns(eager) - merged_busy_ns(eager)
    assert finding.saving_ns == pytest.approx(expected, rel=0.01)
    delivered = unprofiled_step_ns(eager) - unprofiled_step_ns(graphs)
    assert abs(finding.saving_ns / delivered - 1) <= 0.2
    # The graph replays its kernels: the remedied run is not told to use graphs again, and
    # the idle time the finding claimed is not claimed twice.
    assert "launch-bound" not in {f.id for f in advise(graphs)}
    # The tiny ops' host time is the launches this finding claims: no cpu-bound-op finding
    # claims it again (three did, 12.5 ms a step together).
    assert not [f.id for f in advise(eager) if f.rule == "cpu-bound-op"]
    idle = next(f for f in advise(eager) if f.id == "low-gpu-utilization")
    assert idle.saving_ns < 0.05 * finding.saving_ns


def test_amp_promises_what_bf16_autocast_delivered_where_the_gpu_paces_the_step():
    """Batch 4096: fp32 products took 94% of the GPU's 31 ms a step, and the host waited for
    the GPU most of the step. Under bf16 autocast the step without the profiler fell from 32.05
    to 4.97 ms; the finding promised that within 20%, from the device's peaks (14.8x), the casts
    autocast adds, and the host's own time as the floor."""
    from perfkit_core.advice import advise
    from perfkit_core.advice.followup import follow_up

    fp32, bf16 = load("amp4096_fp32"), load("amp4096_bf16")
    finding = next(f for f in advise(fp32) if f.id == "amp")
    delivered = unprofiled_step_ns(fp32) - unprofiled_step_ns(bf16)
    assert abs(finding.saving_ns / delivered - 1) <= 0.2
    ev = finding.evidence
    assert ev["speedup_from"] == "peaks" and ev["speedup"] == pytest.approx(989.5 / 67, rel=0.01)
    # The step after is the host's: its own time plus the casts' dispatch, which the bf16 run
    # took (its step without the profiler) within 20%.
    assert ev["host_bound_step_ns"] > ev["gpu_bound_step_ns"]
    assert abs(ev["host_bound_step_ns"] / unprofiled_step_ns(bf16) - 1) <= 0.2
    assert finding.saving_ns == pytest.approx(ev["basis_step_ns"] - ev["host_bound_step_ns"])
    # perfkit compare of the pair: promised against delivered, the remedy read from the runs.
    rows, figures = follow_up(fp32, bf16)
    row = next(r for r in rows if r.id == "amp")
    assert row.acted_on and row.delivered_ns == pytest.approx(delivered)
    assert (row.state_before, row.state_after) == ("fp32", "tensor cores")
    assert figures["delivered_ns"] == pytest.approx(delivered)
    assert "amp" not in {f.id for f in advise(bf16)}
