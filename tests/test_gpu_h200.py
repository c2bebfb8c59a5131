"""Real torch runs on an NVIDIA H200 (tests/data/torch_gpu_h200): what only a GPU shows, read
again on a machine without one. Each figure perfkit gives is recomputed from the raw events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.views.costmodel.peaks import run_peaks
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


def mean_unprofiled_step_ns(run) -> float:
    """The mean step the step timer timed without the profiler, its leading warm-up left out."""
    from perfkit_core.events.steady import without_warmup

    return float(np.mean(without_warmup(run.meta["step_timer"]["unprofiled_ns"])))


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
    # ... nor does low-gpu-utilization, whose idle time this finding explains: it promised
    # 0 ms and repeated the GPU's busy share against the profiled step.
    assert "low-gpu-utilization" not in {f.id for f in advise(eager)}


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
    # The table's delivered time is the difference of the mean steps, as the verdict's, each
    # run's leading warm-up left out.
    rows, figures = follow_up(fp32, bf16)
    row = next(r for r in rows if r.id == "amp")
    means = mean_unprofiled_step_ns(fp32) - mean_unprofiled_step_ns(bf16)
    assert row.acted_on and row.delivered_ns == pytest.approx(means)
    assert (row.state_before, row.state_after) == ("fp32", "tensor cores")
    assert figures["delivered_ns"] == pytest.approx(means)
    assert abs(finding.saving_ns / means - 1) <= 0.2  # the promise holds on the means as well
    assert "amp" not in {f.id for f in advise(bf16)}


def profiled_step_median_ns(run) -> float:
    """The median step the step timer timed under the profiler, from the run's record."""
    return float(np.median(run.meta["step_timer"]["profiled_ns"]))


def test_every_gpu_finding_is_stated_on_the_step_without_the_profiler():
    """With a step timer, every finding of the kept runs states its saving against the step
    without the profiler, so the headline's "Change first" and "All advice" share one step.
    Before, the roofline rules, placement and cpu-bound-op used the profiled step, and the
    headline fell back to it: "All advice" read 55.6% of the profiled step beside "Change
    first"'s 93.8% of the step without the profiler."""
    from perfkit_core.advice import advise
    from perfkit_core.report.headline import headline
    from perfkit_core.report.text import render_headline

    for name in ("launch_eager", "placement_syncs", "pinned", "pageable", "amp_bf16"):
        run = load(name)
        findings = advise(run)
        assert findings, name
        step = unprofiled_step_ns(run)
        for f in findings:
            assert f.evidence["basis"] == "unprofiled", (name, f.id)
            assert f.evidence["basis_step_ns"] == pytest.approx(step), (name, f.id)
        top = headline(run, findings, None, None)
        if sum(f.saving_ns > 0 for f in findings) > 1:
            assert top.combined is not None and top.combined.step_ns == pytest.approx(step)
            text = render_headline(top, "ms")
            line = next(x for x in text.splitlines() if x.startswith("All advice:"))
            pct = 100 * top.combined.saving_ns / step
            assert f"({pct:.1f}% of the step without the profiler)" in line, line


def test_device_time_savings_are_used_as_recorded_and_host_paced_ones_scaled():
    """The roofline rules' savings are device time, which the profiler does not slow: only
    their step changes. cpu-bound-op's host time is paced by the host, which the profiler
    slows with the rest of the step: it is scaled by the step without the profiler over the
    profiled one. Placement's replay runs the host at the pace that gives the step without the
    profiler (tests/test_timeline_replay.py recomputes it)."""
    from perfkit_core.advice import advise

    eager, untimed = load("launch_eager"), load("launch_eager")
    del untimed.meta["step_timer"]  # the same profile, as if no step timer had run
    fused = next(f for f in advise(eager) if f.id == "unfused-elementwise")
    as_recorded = next(f for f in advise(untimed) if f.id == "unfused-elementwise")
    assert (fused.evidence["basis"], as_recorded.evidence["basis"]) == ("unprofiled", "profiled")
    assert fused.saving_ns == as_recorded.saving_ns > 0
    assert "the device's time is used as recorded" in fused.estimate
    run = load("pinned")
    ratio = unprofiled_step_ns(run) / profiled_step_median_ns(run)
    finding = next(f for f in advise(run) if f.rule == "cpu-bound-op")
    ev = finding.evidence
    recorded = (ev["cpu_total_ns"] - ev["gpu_total_ns"]) / len(run.meta["steps"])
    assert finding.saving_ns == pytest.approx(recorded * ratio, rel=1e-9)
    assert "scaled by it over the profiled step" in finding.estimate
    assert 0.5 < ratio < 1
    run = load("placement_syncs")
    finding = next(f for f in advise(run) if f.rule == "placement")
    assert finding.evidence["replay"]["replayed_step_ns"] == pytest.approx(unprofiled_step_ns(run), rel=1e-3)
    assert 0 < finding.evidence["replay"]["event_cost_ns"] < 20e3
    assert "the step timer's steps without the profiler" in finding.estimate


def test_the_gpu_idle_finding_is_bounded_by_the_step_without_the_profiler():
    """bf16 autocast at batch 256: the GPU was busy 1.31 ms of a 4.13 ms step without the
    profiler. The idle time no other finding claims is at most the rest of that step; against
    the profiled step (6.16 ms) it read 4.84 ms, more than the step could lose."""
    from perfkit_core.advice import advise

    run = load("amp_bf16")
    idle = next(f for f in advise(run) if f.id == "low-gpu-utilization")
    busy, step = merged_busy_ns(run), unprofiled_step_ns(run)
    assert idle.evidence["gpu_busy_per_step_ns"] == pytest.approx(busy, rel=1e-6)
    assert idle.evidence["gpu_busy_pct"] == pytest.approx(100 * busy / step, rel=1e-6)
    assert f"{100 * busy / step:.1f}% of the step without the profiler" in idle.title
    assert 0 < idle.saving_ns <= step - busy + 1


def test_a_finding_that_promises_nothing_gives_no_recipe_and_no_change_first():
    """Where the host paces the step, the amp finding promises 0 ms: the headline says no
    finding promises a shorter step (not that the savings are within their error), and the
    finding says what to do first instead of the autocast recipe."""
    from perfkit_core.advice import advise
    from perfkit_core.report.headline import NO_SAVING_NOTE, WITHIN_ERROR_NOTE, headline

    run = load("amp_fp32")
    findings = advise(run)
    assert [f.id for f in findings] == ["amp"] and findings[0].saving_ns == 0
    top = headline(run, findings, None, None)
    assert top.finding is None and top.note == NO_SAVING_NOTE != WITHIN_ERROR_NOTE
    from perfkit_core.advice.rules.device import AMP_HOST_PACED_HEADING
    from perfkit_core.report.headline import remedy_label

    remedy = findings[0].remedy
    # what to shorten first, under the rule's own heading, not "the usual remedy"
    assert remedy_label(findings[0]) == AMP_HOST_PACED_HEADING
    assert AMP_HOST_PACED_HEADING.startswith("Not yet: the host's own work sets this step")
    assert remedy.startswith("CUDA graphs or a compiler")
    assert "autocast" not in remedy and "GradScaler" not in remedy
    # where it promises a saving, the recipe is the framework's
    promising = next(f for f in advise(load("amp4096_fp32")) if f.id == "amp")
    assert promising.saving_ns > 0 and "autocast" in promising.remedy


class _Unpaid:
    """An advisor whose one finding saves time but promises none here, without a heading of
    its own."""

    @perfkit_core.hookimpl
    def perfkit_register_advisors(self, register):
        from perfkit_core.advice.engine import Finding

        def unpaid(ctx):
            return [
                Finding(
                    "unpaid",
                    "Work a remedy would not shorten here",
                    "low",
                    0.0,
                    remedy="do the usual thing",
                )
            ]

        register("unpaid", unpaid, "a finding whose usual remedy would not pay")


def test_a_remedy_not_expected_to_pay_is_labelled_so_in_text_and_html(tmp_path):
    """A finding that saves time but promises none here shows its remedy under a heading that
    says so, in the text and HTML reports, greyed in the HTML; the rule's own heading where it
    words one (amp on a step the host paces: what to shorten first); one that promises a
    saving, or warns of a risk rather than time (memory-pressure), under "What to change"."""
    from perfkit_core import plugins
    from perfkit_core.advice.engine import Finding
    from perfkit_core.advice.rules.device import AMP_HOST_PACED_HEADING
    from perfkit_core.cli import main
    from perfkit_core.report.headline import REMEDY_LABEL, UNPAID_REMEDY_LABEL, remedy_label

    def pages(name):
        found = {}
        for fmt in ("text", "html"):
            out = tmp_path / f"{name}.{fmt}"
            assert main(["report", str(H200 / name), "--format", fmt, "-o", str(out)]) == 0
            found[fmt] = out.read_text()
        return found

    labels = (REMEDY_LABEL, UNPAID_REMEDY_LABEL, AMP_HOST_PACED_HEADING)
    for name, label in (("amp_fp32", AMP_HOST_PACED_HEADING), ("amp4096_fp32", REMEDY_LABEL)):
        page = pages(name)
        assert f"   {label}\n" in page["text"]
        assert not any(other in page["text"] for other in labels if other != label)
        assert ('<div class="how unpaid">' in page["html"]) == (label != REMEDY_LABEL)
    pm = plugins.get_plugin_manager()
    plugin = _Unpaid()
    pm.register(plugin, name="unpaid")
    try:
        page = pages("launch_graphs")  # no finding of its own
    finally:
        pm.unregister(plugin)
    assert f"   {UNPAID_REMEDY_LABEL}\n     do the usual thing" in page["text"]
    assert REMEDY_LABEL not in page["text"]
    assert f'<div class="how unpaid">{UNPAID_REMEDY_LABEL}</div>' in page["html"]
    risk = Finding("memory-pressure", "GPU 0 peaks at 97%", "medium", 0.0, saves_time=False)
    assert remedy_label(risk) == REMEDY_LABEL


def test_each_advise_gets_findings_of_its_own():
    """Rules whose findings others read (launch-bound, the roofline rules) compute them once
    per ``advise``; a later ``advise`` of the same run gets new findings, untouched by what was
    done to the earlier ones (the engine sets a finding's severity and remedy, a replay its
    saving, merging its verdict)."""
    from perfkit_core.advice import advise

    run = load("launch_eager")
    for _ in range(5):
        first = advise(run)
        assert {"launch-bound", "unfused-elementwise"} <= {f.id for f in first}
        for f in first:
            f.evidence["touched"] = True
        del first
        assert not [f.id for f in advise(run) if "touched" in f.evidence]


def test_all_advice_says_how_many_findings_promise_a_saving():
    """`placement_syncs`: three findings, of which amp promises nothing (the host paces the
    step). "All advice" counts all three, since the combined saving is theirs together, and
    says that two of them promise a saving, as their own figures do."""
    from perfkit_core.advice import advise
    from perfkit_core.report.headline import headline
    from perfkit_core.report.text import render_headline

    run = load("placement_syncs")
    findings = advise(run)
    promising = [f.id for f in findings if f.saving_ns > 0]
    assert len(findings) == 3 and len(promising) == 2, [(f.id, f.saving_ns) for f in findings]
    top = headline(run, findings, None, None)
    assert (top.combined.findings, top.combined.promising) == (3, 2)
    line = next(x for x in render_headline(top, "ms").splitlines() if x.startswith("All advice"))
    assert "applying all 3 findings (2 of them promise a saving) would save about" in line
    # the placement sentence gives the recorded figure, and says so beside the scaled saving
    placement = next(f for f in findings if f.id == "placement")
    assert placement.details[0].endswith("around them in the profiled steps.")
    # where every finding promises a saving, the count stands alone
    eager = load("launch_eager")
    combined = headline(eager, advise(eager), None, None).combined
    assert combined.findings_text() == "all 2 findings"
    # where one finding promises a saving, applying all is applying it: "Change first" says so,
    # and no "All advice" line repeats its figure (text, HTML, JSON)
    pinned = load("pinned")
    findings = advise(pinned)
    assert len(findings) == 2 and sum(f.saving_ns > 0 for f in findings) == 1
    top = headline(pinned, findings, None, None)
    assert top.finding is findings[0] and top.combined is None
    assert "All advice" not in render_headline(top, "ms")
