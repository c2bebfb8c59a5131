"""The performance model and the roofline: FLOPs against torch's own counts (``with_flops``,
``FlopCounterMode``) and a published architecture, figures of named ops recomputed by hand from
the raw events of the real GPU traces, device peaks, MFU, and peaks measured on this machine."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.views.costmodel.opcost import MODEL_KINDS
from perfkit_core.views.costmodel.peaks import DEVICE_PEAKS, lookup_device
from perfkit_core.views.costs import run_costs
from perfkit_core.views.roofline import LATENCY_BOUND_NS, op_table

MATRIX_KINDS = ("gemm", "conv", "attention")


@pytest.fixture(scope="module")
def v100():
    return perfkit_core.load(shared_trace("resnet_nw0"))


@pytest.fixture(scope="module")
def a100():
    return perfkit_core.load(shared_trace("a100_rank3"))


# ------------------------------------------------------------------ FLOPs against torch


def _profile(tmp_path, step, **options):
    """Run ``step`` once to warm up, then under torch.profiler; return (the perfkit run of the
    exported trace, torch's profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, **options) as prof:
        step()
    trace = tmp_path / "step.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    assert torch.get_num_threads() >= 1
    return perfkit_core.load(trace), prof


def test_flops_equal_torch_with_flops_on_a_cpu_run(tmp_path):
    """Every op torch's profiler counts FLOPs for (``with_flops=True``: conv2d, mm, addmm, bmm,
    baddbmm, mul, add) gets exactly its count from the model, call by call."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
    linear = torch.nn.Linear(8 * 8 * 8, 24)
    x = torch.randn(3, 4, 16, 16, requires_grad=True)
    a, b, c = torch.randn(5, 6, 7), torch.randn(5, 7, 9), torch.randn(5, 6, 9)

    def step():
        h = linear(conv(x).flatten(1))
        y = torch.baddbmm(c, a, b) + torch.bmm(a, b)
        z = torch.mm(h, h.t()) * 2.0 + h.sum()
        (z.sum() + y.mul(y).sum()).backward()

    run, prof = _profile(tmp_path, step, with_flops=True)
    counted = [e for e in prof.events() if e.flops]
    names = {e.name for e in counted}
    assert {
        "aten::conv2d",
        "aten::addmm",
        "aten::mm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::mul",
    } <= names
    own = run_costs(run).own_flops
    ev = run.events
    # Kineto's Concrete Inputs reach the input_values column: the stride the FLOPs need.
    conv = ev[ev["name"] == "aten::conv2d"]
    assert set(conv["input_values"].astype(str)) == {
        '["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"]'
    }
    event_names = ev["name"].astype(str).to_numpy()
    start = ev["start_ns"].to_numpy()
    for name in sorted(names):
        theirs = [
            e.flops for e in sorted(counted, key=lambda e: e.time_range.start) if e.name == name
        ]
        rows = np.flatnonzero(event_names == name)
        ours = own[rows[np.argsort(start[rows], kind="stable")]]
        ours = ours[ours > 0]  # torch counts no FLOPs for an op it cannot (a scalar operand)
        assert list(ours) == theirs, name


@pytest.mark.parametrize("model", ["cnn", "transformer", "lstm"])
def test_matrix_flops_match_flop_counter_mode_on_the_demo_models(model, tmp_path):
    """The GEMM, convolution and attention FLOPs of a training step of each demo model, from the
    profile's shapes, are FlopCounterMode's count of the same step (within 1%; the LSTM's own
    GEMMs, which FlopCounterMode does not count, are left out of the comparison)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from perfkit_torch.demo_models import MODELS, build

    torch.manual_seed(0)
    module, optimizer, make_data = build(model)
    inputs, targets = make_data(MODELS[model]["batch"])
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward_backward():
        out = module(inputs)
        loss_fn(out.reshape(-1, out.shape[-1]), targets.reshape(-1)).backward()

    def step():
        forward_backward()
        optimizer.step()
        optimizer.zero_grad()

    counter = FlopCounterMode(display=False)
    with counter:
        forward_backward()
    optimizer.zero_grad()
    run, _ = _profile(tmp_path, step)
    costs = run_costs(run)
    ours = float(costs.flops[np.isin(costs.kind, MATRIX_KINDS)].sum())
    theirs = counter.get_total_flops()
    assert theirs > 0
    assert abs(ours - theirs) <= 0.01 * theirs, (ours, theirs)


def resnet50_conv_flops(batch: int, size: int = 224) -> tuple[float, float]:
    """(all convolutions' forward FLOPs, the first convolution's) of torchvision's ResNet-50
    (v1.5: a bottleneck's stride on its 3x3 convolution) at ``batch`` images of ``size``
    pixels: 2 FLOPs per multiply-add."""
    convs = []  # (in channels, out channels, kernel, stride, input size)
    convs.append((3, 64, 7, 2, size))
    h = size // 4  # after the stem's stride-2 convolution and max pool
    channels = 64
    for blocks, width, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            convs.append((channels, width, 1, 1, h))
            convs.append((width, width, 3, s, h))
            convs.append((width, 4 * width, 1, 1, h // s))
            if i == 0:
                convs.append((channels, 4 * width, 1, s, h))
            channels, h = 4 * width, h // s
    flops = [2.0 * batch * (hin // st) ** 2 * cout * cin * k * k for cin, cout, k, st, hin in convs]
    return sum(flops), flops[0]


def test_resnet50_conv_flops_match_the_published_architecture(v100):
    """The V100 trace trains torchvision's ResNet-50 on batches of 32 images of 224 x 224: its
    convolutions' FLOPs per step, forward and both gradients, are the architecture's."""
    forward, first = resnet50_conv_flops(32)
    table = v100.summary("roofline").set_index("name")
    assert table.loc["aten::conv2d", "gflops"] * 1e9 == pytest.approx(forward, rel=1e-12)
    assert table.loc["aten::cudnn_convolution_backward_weight", "gflops"] * 1e9 == pytest.approx(
        forward, rel=1e-12
    )
    # The first convolution's input (the images) needs no gradient.
    assert table.loc["aten::cudnn_convolution_backward_input", "gflops"] * 1e9 == pytest.approx(
        forward - first, rel=1e-12
    )
    assert forward / 32 == pytest.approx(8.18e9, rel=0.01)  # the usual "4.1 GMACs" per image


# ------------------------------------------------------------------ the real GPU traces


def test_every_matmul_and_conv_has_its_figures(v100, a100):
    for run in (v100, a100):
        table = op_table(run, None)
        view = run.summary("roofline")
        matrix = table[np.isin(table["kind"], ("gemm", "conv"))]
        assert len(matrix) > 20
        assert (matrix["flops"] > 0).all() and (matrix["bytes"] > 0).all()
        names = set(matrix["name"])
        rows = view[view["name"].isin(names)]
        for column in (
            "gflops",
            "intensity_flop_per_byte",
            "achieved_tflops_per_s",
            "roofline_pct",
        ):
            assert rows[column].gt(0).all(), column
        assert set(rows["bound"]) <= {"compute", "memory", "latency"} and rows["bound"].ne("").all()


def test_a100_gemms_on_tensor_cores_meet_the_tf32_peak(a100):
    """fp32 GEMMs whose kernels ran on tensor cores (``cutlass_80_tensorop_s1688gemm``) are
    measured against the A100's TF32 tensor peak, those on ``ampere_sgemm`` against fp32."""
    view = a100.summary("roofline")
    mm = view[view["name"] == "aten::mm"].set_index("precision")
    assert mm.loc["tf32 tensor", "peak_tflops_per_s"] == 156.0
    assert mm.loc["fp32", "peak_tflops_per_s"] == 19.5
    assert view.attrs["labels"]["roofline_pct"].startswith("% of roofline bound")
    table = op_table(a100, None)
    costs = run_costs(a100)
    kernel_of = dict(zip(costs.rows.tolist(), costs.kernel.tolist(), strict=True))
    for row, precision in table[table["kind"] == "gemm"][["row", "precision"]].itertuples(
        index=False
    ):
        kernel = kernel_of[row]
        assert ("s1688gemm" in kernel or "tensorop" in kernel) == (precision == "tf32 tensor"), (
            kernel
        )


def _raw_events(path):
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


DEVICE_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy", "memset", "memcpy")
#: Ops a matrix product may run inside, which the roofline then counts instead.
WRAPPERS = ("aten::linear", "aten::matmul", "aten::einsum")


def _inside(op, others):
    return any(
        str(o["tid"]) == str(op["tid"]) and o["ts"] <= op["ts"] <= o["ts"] + o["dur"]
        for o in others
    )


def _by_hand(path, name, flops_of):
    """(calls, FLOPs, device ns, steps) of the ops called ``name`` in the steps and not inside
    a ``WRAPPERS`` op, from the raw trace: each op's FLOPs from its ``Input Dims`` by
    ``flops_of``, its device time that of the device events (kernels, sets, copies) whose
    ``correlation`` a runtime call made inside the op (same thread, within its span) carries."""
    events = _raw_events(path)
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    first, last = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    wrappers = [e for e in events if e.get("name") in WRAPPERS and e.get("ph") == "X"]
    ops = [
        e
        for e in events
        if e.get("name") == name
        and e.get("ph") == "X"
        and first <= e["ts"] <= last
        and not _inside(e, wrappers)
    ]
    runtime = [e for e in events if e.get("cat", "").lower() in ("runtime", "cuda_runtime")]
    kernels: dict[int, float] = {}
    for e in events:
        if e.get("cat", "").lower() in DEVICE_CATEGORIES:
            kernels[e["args"]["correlation"]] = (
                kernels.get(e["args"]["correlation"], 0.0) + e["dur"]
            )
    flops = device_us = 0.0
    for op in ops:
        flops += flops_of(op["args"]["Input Dims"])
        for r in runtime:
            if str(r["tid"]) == str(op["tid"]) and op["ts"] <= r["ts"] <= op["ts"] + op["dur"]:
                device_us += kernels.get(r["args"]["correlation"], 0.0)
    return len(ops), flops, device_us * 1000, len(steps)


def _mm_flops(dims):
    (m, k), (_, n) = dims[0], dims[1]
    return 2.0 * m * n * k


def _bmm_flops(dims):
    (b, m, k), (_, _, n) = dims[0], dims[1]
    return 2.0 * b * m * n * k


@pytest.mark.parametrize(
    ("trace", "name", "flops_of"),
    [
        ("resnet_nw0", "aten::mm", _mm_flops),
        ("a100_rank3", "aten::bmm", _bmm_flops),
        ("a100_rank3", "aten::mm", _mm_flops),
    ],
)
def test_named_ops_recomputed_from_raw_events(trace, name, flops_of):
    """Calls, GFLOP and device time per step and achieved TFLOP/s of named ops, from the raw
    JSON of the trace by hand, equal the roofline view's (its rows of that op summed over
    precisions)."""
    path = shared_trace(trace)
    calls, flops, device_ns, steps = _by_hand(path, name, flops_of)
    view = perfkit_core.load(path).summary("roofline")
    rows = view[view["name"] == name]
    assert rows["calls_per_step"].sum() * steps == pytest.approx(calls)
    assert rows["gflops"].sum() * 1e9 * steps == pytest.approx(flops, rel=1e-9)
    assert rows["time_ns"].sum() * steps == pytest.approx(device_ns, rel=1e-6)
    achieved = flops / device_ns / 1e3
    combined = (rows["gflops"].sum() * 1e9) / rows["time_ns"].sum() / 1e3
    assert combined == pytest.approx(achieved, rel=1e-6)


def test_mfu_of_each_step(v100):
    """MFU per step: the step's GEMM and convolution FLOPs over its time (the step stretched
    over its device work) against the V100's fp32 peak, recomputed from the op table."""
    from perfkit_core.events.intervals import step_spans

    mfu = v100.summary("mfu")
    spans = step_spans(v100)
    table = op_table(v100, None)
    model = table[np.isin(table["kind"], MODEL_KINDS)]
    for number, start, end in zip(spans["step"], spans["start_ns"], spans["end_ns"], strict=True):
        row = mfu.set_index("name").loc[f"step {number}"]
        flops = float(model.loc[model["step"] == number, "flops"].sum())
        assert row["model_gflops"] * 1e9 == pytest.approx(flops)
        assert row["dur_ns"] == end - start
        assert row["mfu_pct"] == pytest.approx(100.0 * flops / ((end - start) / 1e9) / 15.7e12)
    assert 10.0 < mfu.set_index("name").loc["mean", "mfu_pct"] < 60.0
    assert mfu.attrs["labels"]["mfu_pct"] == "MFU (% of the fp32 peak)"


def test_the_report_prints_each_steps_mfu(tmp_path):
    from perfkit_core.cli import main

    out = tmp_path / "report.txt"
    assert main(["report", str(shared_trace("resnet_nw0")), "--views", "mfu", "-o", str(out)]) == 0
    text = out.read_text()
    assert "Model FLOPs utilisation per step" in text
    assert all(f"step {n}" in text for n in range(5, 11))


def test_given_peaks_replace_the_devices(v100, tmp_path):
    view = v100.summary("roofline", peak_tflops=100.0, peak_bandwidth=2.0)
    assert set(view["peak_tflops_per_s"]) == {100.0} and set(view["peak_tb_per_s"]) == {2.0}
    assert "given" in view.attrs["note"]
    from perfkit_core.cli import main

    out = tmp_path / "report.json"
    args = ["--views", "roofline,mfu", "--peak-tflops", "100", "--peak-bandwidth", "2"]
    assert (
        main(["report", str(shared_trace("resnet_nw0")), *args, "--format", "json", "-o", str(out)])
        == 0
    )
    tables = json.loads(out.read_text())["tables"]
    assert {row["peak_tflops_per_s"] for row in tables["roofline"]["rows"]} == {100.0}
    assert {row["peak_tflops_per_s"] for row in tables["mfu"]["rows"]} == {100.0}


def test_latency_bound_ops_are_the_tiny_ones(a100):
    table = a100.summary("roofline", by="shape")
    latency = table[table["bound"] == "latency"]
    per_call = latency["bound_time_ns"] / latency["calls_per_step"]
    assert len(latency) and (per_call < LATENCY_BOUND_NS).all()


# ------------------------------------------------------------------ peaks


@pytest.mark.parametrize(
    ("name", "cc", "memory_gib", "expected"),
    [
        ("Tesla V100-DGXS-32GB", "7.0", 32, "NVIDIA V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "7.0", 16, "NVIDIA V100 PCIe"),
        ("Tesla T4", "7.5", 16, "NVIDIA T4"),
        ("NVIDIA A10", "8.6", 24, "NVIDIA A10"),
        ("NVIDIA A100-PG509-200", "8.0", 40, "NVIDIA A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", "8.0", 80, "NVIDIA A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "8.0", 80, "NVIDIA A100 80GB PCIe"),
        ("NVIDIA L4", "8.9", 24, "NVIDIA L4"),
        ("NVIDIA L40S", "8.9", 48, "NVIDIA L40S"),
        ("NVIDIA H100 80GB HBM3", "9.0", 80, "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "9.0", 80, "NVIDIA H100 PCIe"),
        ("NVIDIA H200", "9.0", 141, "NVIDIA H200 SXM"),
        ("AMD Instinct MI250X/MI250", None, 64, "AMD Instinct MI250X"),
        ("AMD Instinct MI300X", None, 192, "AMD Instinct MI300X"),
        ("NVIDIA A10G", "8.6", 24, None),
        ("NVIDIA A100-SXM4-40GB", "9.0", 40, None),  # the capability must agree
    ],
)
def test_device_peaks_by_name_capability_and_memory(name, cc, memory_gib, expected):
    found = lookup_device(name, cc, memory_gib * 2**30)
    assert (found.name if found else None) == expected


def test_every_device_has_its_figures_and_source():
    for entry in DEVICE_PEAKS:
        assert entry.tflops["fp32"] > 0 and entry.bandwidth_tbps > 0
        assert entry.source.startswith("https://")
        tensor = [v for k, v in entry.tflops.items() if k.endswith("tensor")]
        assert tensor and min(tensor) > entry.tflops["fp32"] * 0.99


def test_cpu_peaks_from_perfkit_peaks_bound_the_demo_matmuls(tmp_path, monkeypatch):
    """``perfkit peaks`` measures this machine and caches the result; a CPU run of the demo
    recorded here is then measured against it, and its matmuls reach a share of the peak in
    (0, 100%]."""
    pytest.importorskip("torch")
    from perfkit_core.cli import main
    from perfkit_torch.demo import train_mlp

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["peaks", "--seconds", "1"]) == 0
    record = json.loads((tmp_path / "cache" / "peaks.json").read_text())
    assert record["tflops"]["fp32"] > 0 and record["bandwidth_tbps"] > 0
    runs, _ = train_mlp(tmp_path / "runs", steps=3, width=256, batch_size=64, background=False)
    view = perfkit_core.load(runs[0]).summary("roofline")
    assert "measured on" in view.attrs["note"]
    gemms = view[view["name"].isin(["aten::linear", "aten::addmm", "aten::mm"])]
    assert len(gemms)
    share = gemms["achieved_tflops_per_s"] / gemms["peak_tflops_per_s"]
    assert ((share > 0) & (share <= 1.0)).all(), gemms[["name", "achieved_tflops_per_s"]]
    assert (gemms["peak_tflops_per_s"] == record["tflops"]["fp32"]).all()


def test_no_peaks_known_says_what_to_do(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from perfkit_torch.demo import train_mlp

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "empty"))
    runs, _ = train_mlp(tmp_path / "runs", steps=2, background=False)
    view = perfkit_core.load(runs[0]).summary("roofline")
    assert len(view) and view["roofline_pct"].isna().all() and (view["gflops"] >= 0).all()
    assert "perfkit peaks" in view.attrs["note"]
    assert math.isnan(perfkit_core.load(runs[0]).summary("mfu")["mfu_pct"].iloc[0])
