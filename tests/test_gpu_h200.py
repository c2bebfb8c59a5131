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
    """The fp32 run gets the amp finding; the same loop under bf16 autocast, whose products
    ran as nvjet kernels, gets neither amp nor tensor-cores-unused for them."""
    from perfkit_core.advice import advise

    before = {f.id for f in advise(load("amp_fp32"))}
    after = {f.id for f in advise(load("amp_bf16"))}
    assert "amp" in before
    assert "amp" not in after and "tensor-cores-unused" not in after
    bf16 = load("amp_bf16")
    kernels = bf16.summary("kernel")
    nvjet = kernels[kernels["name"].str.contains("nvjet")]
    assert len(nvjet) >= 3 and bool(nvjet["tensor_cores"].all())
    assert np.isclose(nvjet["gpu_total_ns"].sum(), kernel_ns(bf16, "nvjet"))


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
