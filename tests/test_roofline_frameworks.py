"""The performance model in Paddle and XLA runs, the op-cost hook's reach, the advice and the
comparison built on the roofline, and the roofline chart in a real browser."""

from __future__ import annotations

import re

import numpy as np
import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.views.roofline import op_table

# ------------------------------------------------------------------ Paddle


def _paddle_gpu_pb(path):
    """A Paddle protobuf export shaped as a CUDA profile holds it (the CPU build records no
    shapes): in one step, a matmul and a stride-2 convolution forward, each launching a
    kernel, then the convolution's gradient node, on an A100."""
    pytest.importorskip("google.protobuf")
    from perfkit_paddle.pb_schema import node_trees_class

    m = node_trees_class()(version="1.0.2", span_indx=0)
    m.extra_info.add(key="7", value="MainThread")
    m.device_property.add(
        id=0, name="NVIDIA A100-SXM4-40GB", total_global_memory=40 << 30, compute_major=8,
        compute_minor=0, sm_count=108,
    )  # fmt: skip
    tree = m.thread_trees.add(thread_id=7)
    ids = iter(range(1000))

    def host(parent, name, start, end, kind=0):
        node = tree.host_nodes.add(id=next(ids), parentid=parent)
        e = node.host_trace_event
        e.name, e.type, e.start_ns, e.end_ns, e.process_id, e.thread_id = (
            name, kind, start, end, 1, 7,
        )  # fmt: skip
        return node

    def op(parent, name, start, inputs, kernel, kernel_ns, correlation):
        node = host(parent, name, start, start + 40_000)
        sup = node.op_supplement_nodes.add().op_supplement_event
        for key, shape in inputs.items():
            sup.input_shapes.key.append(key)
            sup.input_shapes.shape_vecs.add().shapes.add().size.extend(shape)
            sup.dtypes.key.append(key)
            sup.dtypes.dtype_vecs.add().dtype.append("float32")
        rt = node.runtime_nodes.add().runtime_trace_event
        rt.name, rt.start_ns, rt.end_ns, rt.process_id, rt.thread_id, rt.correlation_id = (
            "cudaLaunchKernel", start + 1_000, start + 2_000, 1, 7, correlation,
        )  # fmt: skip
        k = node.runtime_nodes[0].device_nodes.add().device_event
        k.name, k.type, k.start_ns, k.end_ns, k.device_id, k.stream_id, k.correlation_id = (
            kernel, 4, start + 3_000, start + 3_000 + kernel_ns, 0, 7, correlation,
        )  # fmt: skip
        return node

    host(-1, "Thread 7", 0, 0)
    for step in range(2):
        base = 1_000_000 * step
        s = host(
            0, f"ProfileStep#{step + 1}", base + 1_000, base + 900_000, kind=2
        ).host_trace_event
        parent = tree.host_nodes[-1].id
        op(parent, "matmul dygraph", base + 10_000, {"x": [64, 128], "y": [128, 256]},
           "ampere_sgemm_128x64_nn", 20_000, 10 + 10 * step)  # fmt: skip
        op(parent, "conv2d dygraph", base + 100_000,
           {"input": [8, 16, 32, 32], "filter": [32, 16, 3, 3]},
           "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32", 30_000, 11 + 10 * step)  # fmt: skip
        op(parent, "Global_Conv2dGradNodeFinal", base + 300_000,
           {"input": [8, 16, 32, 32], "filter": [32, 16, 3, 3], "out_grad": [8, 32, 16, 16]},
           "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32", 50_000, 12 + 10 * step)  # fmt: skip
        del s
    path.write_bytes(m.SerializeToString())
    return path


def test_paddle_gpu_shaped_profile_gets_flops_from_named_shapes(tmp_path):
    run = perfkit_core.load(_paddle_gpu_pb(tmp_path / "gpu.paddle_trace.pb"))
    view = run.summary("roofline").set_index("name")
    matmul = view.loc["matmul dygraph"]
    assert matmul["gflops"] * 1e9 == 2 * 64 * 256 * 128
    assert matmul["precision"] == "fp32" and matmul["peak_tflops_per_s"] == 19.5
    assert matmul["time_ns"] == 20_000 and matmul["calls_per_step"] == 1
    # The stride-2 output (16 x 16) comes from the gradient node's out_grad.
    conv_flops = 2 * 8 * 16 * 16 * 32 * 16 * 9
    conv = view.loc["conv2d dygraph"]
    assert conv["gflops"] * 1e9 == conv_flops
    assert conv["precision"] == "tf32 tensor" and conv["peak_tflops_per_s"] == 156.0
    assert view.loc["Global_Conv2dGradNodeFinal", "gflops"] * 1e9 == 2 * conv_flops
    assert "assumed" not in view.attrs["note"]


def test_paddle_cpu_run_says_no_shapes_were_recorded(paddle_profile):
    run = perfkit_core.load(paddle_profile.runs[0])
    view = run.summary("roofline")
    assert view.empty
    assert "Paddle's CPU build records none" in view.attrs["note"]


# ------------------------------------------------------------------ XLA


def test_xla_dots_get_gemm_flops_from_the_hlo_shapes():
    from pathlib import Path

    run = perfkit_core.load(Path(__file__).parent / "data" / "xla" / "jax_mlp")
    table = op_table(run, None)
    dots = table[table["kind"] == "gemm"]
    assert len(dots)
    for shapes, flops in dots[["input_shapes", "flops"]].itertuples(index=False):
        (a, b) = [tuple(s) for s in __import__("json").loads(shapes)[:2]]
        k = next(x for x in a[::-1] if x in b)
        assert flops == 2 * (a[0] * a[1] // k) * (b[0] * b[1] // k) * k
    assert set(run.summary("mfu")["model_gflops"].round(9)) == {
        round(float(dots.groupby("step")["flops"].sum().iloc[0]) / 1e9, 9)
    }


# ------------------------------------------------------------------ advice


def test_advice_from_the_roofline_on_the_a100_trace():
    """On the A100 trace: each finding's saving is per step, at most the time of the ops it
    names, and no op call is claimed by two of these rules."""
    run = perfkit_core.load(shared_trace("a100_rank3"))
    findings = {f.id: f for f in run.advise()}
    ours = [
        findings[r]
        for r in ("tensor-cores-unused", "gemm-alignment", "small-gemms", "unfused-elementwise")
        if r in findings
    ]
    assert {"gemm-alignment", "small-gemms"} <= {f.id for f in ours}
    steps = len(run.meta["steps"])
    for f in ours:
        assert 0 < f.saving_ns <= f.evidence["time_per_step_ns"]
        assert f.acts_on == "device" and f.cites["roofline"]
    total = sum(f.evidence["time_per_step_ns"] for f in ours) * steps
    table = op_table(run, None)
    assert total <= table["time_ns"].sum()
    alignment = findings["gemm-alignment"]
    assert all(n % 8 or k % 8 for _, n, k in alignment.evidence["shapes"])


def test_no_roofline_advice_where_amp_already_speaks():
    """The V100 ResNet-50 runs no kernel on tensor cores: the ``amp`` rule gives that advice,
    and ``tensor-cores-unused`` stays silent rather than claim the same time."""
    findings = {f.id for f in perfkit_core.load(shared_trace("resnet_nw0")).advise()}
    assert "amp" in findings and "tensor-cores-unused" not in findings


# ------------------------------------------------------------------ comparison


def test_efficiency_side_by_side_equals_each_runs_roofline():
    a, b = shared_trace("resnet_nw0"), shared_trace("resnet_nw4")
    comparison = perfkit_core.compare(a, b, labels=["nw0", "nw4"])
    table = comparison.summary("efficiency").set_index("name")
    for label, run in zip(comparison.labels, comparison.runs, strict=True):
        conv = run.summary("roofline").set_index("name").loc["aten::conv2d"]
        row = table.loc["conv (forward)"]
        assert row[f"{label} TFLOP/s"] == pytest.approx(conv["achieved_tflops_per_s"])
        assert row[f"{label} % of bound"] == pytest.approx(conv["roofline_pct"])
        mfu = run.summary("mfu").set_index("name").loc["mean", "mfu_pct"]
        assert table.iloc[0][f"{label} % of peak"] == pytest.approx(mfu)
    labels = table.attrs["labels"]
    assert all("% of" in v for k, v in labels.items() if "%" in k)


# ------------------------------------------------------------------ the chart


def test_roofline_chart_in_the_v100_report(tmp_path):
    """The V100 trace's HTML report draws the roofline: a log-log bubble chart with a point per
    op of the roofline table and the V100's ceilings; a full-page screenshot holds it."""
    from test_browser import screenshot
    from test_reports import dump_dom

    from perfkit_core.cli import main

    Image = pytest.importorskip("PIL.Image")
    html = tmp_path / "v100.html"
    assert (
        main(["report", str(shared_trace("resnet_nw0")), "--format", "html", "-o", str(html)]) == 0
    )
    page = html.read_text()
    spec = re.search(r'"id": "chart-roofline", "config": (\{.*?\}\}\})', page)
    assert spec, "no roofline chart in the page"
    assert '"type": "logarithmic"' in spec.group(1) and "15.7 TFLOP/s, 0.9 TB/s" in spec.group(1)
    dom = dump_dom(html, tmp_path)
    canvas = re.search(r'<canvas id="chart-roofline"[^>]*>', dom).group(0)
    assert 'data-rendered="1"' in canvas and 'data-type="bubble"' in canvas
    height = int(re.search(r'data-page-height="(\d+)"', dom).group(1))
    png = screenshot(html, height, tmp_path)
    image = Image.open(png).convert("RGB")
    # The ceiling's colour (#c0392b) is drawn in the picture.
    pixels = np.asarray(image)
    red = (abs(pixels[..., 0].astype(int) - 0xC0) < 8) & (
        abs(pixels[..., 1].astype(int) - 0x39) < 8
    )
    assert red.sum() > 200


def test_roofline_per_layer_of_a_torch_cnn(tmp_path):
    """With layer spans (``perfkit_torch.record_modules``), ``by="layer"`` gives each layer its
    ops' FLOPs, backward included: the demo CNN's second convolution does its forward, input
    gradient and weight gradient; the first, whose input needs no gradient, two of them."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from perfkit_torch.demo_models import MODELS, build
    from perfkit_torch.modules import record_modules

    torch.manual_seed(0)
    model, optimizer, make_data = build("cnn")
    batch = MODELS["cnn"]["batch"]
    x, y = make_data(batch)
    loss_fn = torch.nn.CrossEntropyLoss()
    record_modules(model, loss_fn)

    def step():
        loss_fn(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    prof.export_chrome_trace(str(tmp_path / "cnn.pt.trace.json"))
    view = perfkit_core.load(tmp_path / "cnn.pt.trace.json").summary("roofline", by="layer")
    layers = view.set_index("name")["gflops"] * 1e9
    first = 2 * batch * 32 * 32 * 16 * 3 * 9
    second = 2 * batch * 16 * 16 * 32 * 16 * 9
    assert layers["Sequential / Conv2d 1"] == pytest.approx(2 * first)
    assert layers["Sequential / Conv2d 2"] == pytest.approx(3 * second)
    assert "precision" not in view.columns
