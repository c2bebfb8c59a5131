"""How names and titles read: shortened kernel names stay distinct, and every page is titled
with the run's label (escaped)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import perfkit_core
from conftest import GPU_TRACES, shared_trace
from perfkit_core.cli import main
from perfkit_core.events.names import short_name, short_names
from perfkit_core.report import build_report, render


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_shortened_kernel_names_stay_distinct(key):
    """On every real GPU trace, different kernels get different shortened names (the V100
    kernel table read ``implicit_convolve_sgemm<…>(…)`` five times)."""
    names = list(perfkit_core.load(shared_trace(key)).summary("kernel")["name"])
    shown = short_names(names)
    assert len(set(shown)) == len(set(names))
    collapsed = Counter(short_name(n) for n in names)
    assert any(n > 1 for n in collapsed.values())  # the trace has names that used to collapse
    for name, text in zip(names, shown, strict=True):
        if collapsed[short_name(name)] == 1:
            assert text == short_name(name)  # names that were distinct read as before


def test_kernel_names_keep_the_template_arguments_that_differ():
    names = [
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>"
        "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, "
        "unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
        "void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>"
        "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, "
        "unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
        "void implicit_convolve_sgemm<float, float, 512, 6, 8, 3, 3, 5, 1, false, true, true>"
        "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, "
        "unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
        "aten::addmm",
    ]
    shown = short_names([*names, names[0]])
    assert shown[:3] == [
        "implicit_convolve_sgemm<…, 1024, …>(…)",
        "implicit_convolve_sgemm<…, 128, …>(…)",
        "implicit_convolve_sgemm<…, 512, …>(…)",
    ]
    assert shown[3] == "aten::addmm" and shown[4] == shown[0]  # the same name, the same text
    # A return type's template is not the kernel's; a function without one still separates.
    gemv = [
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
        f"float, float, false, true, {flag}, false, 7, cublasGemvParams<cublasGemvTensorStrided"
        "Batched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensor"
        "StridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float "
        "const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched"
        "<float>, float>)"
        for flag in ("true", "false")
    ]
    assert short_names(gemv) == [
        "std::enable_if<…>::type internal::gemvx::kernel<…, true, …>(…)",
        "std::enable_if<…>::type internal::gemvx::kernel<…, false, …>(…)",
    ]


def test_the_v100_report_shows_distinct_kernel_names_in_text_and_html():
    run = perfkit_core.load(shared_trace("resnet_nw0"))
    report = build_report(run, ["kernel"], advice=False, top=None)
    kernels = report.table("kernel")
    text = render(report, "text")
    rows = [line.split("  ")[0] for line in text.splitlines() if "sgemm" in line]
    assert len(rows) == len(set(rows)) >= 4
    html = render(report, "html")
    cells = re.findall(r'<td class="name"[^>]*>(.*?)</td>', html)
    assert len(cells) == len(kernels.rows) == len(set(cells))


def test_pages_are_titled_with_the_run_label(torch_profile, paddle_profile, tmp_path):
    """A report is titled with its run's folder or file name, a comparison with its labels, so
    browser tabs can be told apart; the label is escaped."""
    out = tmp_path / "report.html"
    assert main(["report", str(torch_profile.runs[0]), "--format", "html", "-o", str(out)]) == 0
    title = re.search(r"<title>(.*?)</title>", out.read_text()).group(1)
    assert title == f"{torch_profile.runs[0].name} — perfkit report"
    trace = shared_trace("resnet_nw0")
    assert main(["report", str(trace), "--format", "html", "-o", str(out)]) == 0
    assert f"<title>{trace.name} — perfkit report</title>" in out.read_text()
    runs = [str(torch_profile.runs[0]), str(paddle_profile.runs[0])]
    assert main(["compare", *runs, "--labels", "torch,paddle", "--format", "html", "-o",
                 str(out)]) == 0  # fmt: skip
    assert "<title>torch vs paddle — perfkit comparison</title>" in out.read_text()
    comparison = perfkit_core.compare(*runs, labels=["<b>torch</b>", "p&p"])
    page = render(perfkit_core.report.build_comparison_report(comparison), "html")
    assert "<title>&lt;b&gt;torch&lt;/b&gt; vs p&amp;p — perfkit comparison</title>" in page
