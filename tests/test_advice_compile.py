"""The compile remedy's saving (python-overhead and small-ops: ``torch.compile``), on a real
torch CPU loop of many tiny ops, recomputed from the raw events one row at a time."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from perfkit_core.advice import (  # noqa: E402
    COMPILED_CALL_NS,
    FUSED_FLOP_NS,
    FUSED_KERNEL_NS,
    TRANSCENDENTAL_NS,
    CompileCosts,
    compiled_step_ns,
)
from perfkit_core.advice.compiled import COMPILE_ERROR, KEPT_FAMILIES  # noqa: E402
from perfkit_core.views.costmodel.family_rules import family_of  # noqa: E402
from tests.test_advice_savings import _train_and_profile  # noqa: E402


class _Chain(torch.nn.Module):
    """Two Linear layers with a chain of tiny elementwise ops between them."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 16)
        self.last = torch.nn.Linear(16, 4)

    def forward(self, x):
        x = self.first(x)
        for i in range(30):
            x = torch.tanh(x * 1.01 + 0.01 * i)
        return self.last(x)


def _chain_run(directory, *, compiled: bool = False, shapes: bool = False):
    """The chain trained with SGD under torch.profiler with perfkit's handler and a step timer
    (``compiled``: the model through ``torch.compile``; ``shapes``: recording shapes)."""
    import perfkit_core

    torch.manual_seed(0)
    model = _Chain()
    if compiled:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return perfkit_core.load(
        _train_and_profile(directory, "chain", model, optimizer, shapes=shapes)
    )


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    return _chain_run(tmp_path_factory.mktemp("chain"))


def _model_costs(run):
    """The call and kernel costs the compile estimate of ``run`` takes, recomputed: the
    model's constants times the eager pass its step timer timed over the reference machine's
    (or as they are, with no pass timed); and that factor (or None)."""
    from perfkit_core.advice.compiled import REFERENCE_EAGER_PASS_NS

    timed = run.meta.get("step_timer", {}).get("eager_pass_ns")
    if not timed:
        return COMPILED_CALL_NS, FUSED_KERNEL_NS, None
    scale = timed / REFERENCE_EAGER_PASS_NS
    return COMPILED_CALL_NS * scale, FUSED_KERNEL_NS * scale, scale


def _compile_finding(findings):
    found = [f for f in findings if f.rule in ("python-overhead", "small-ops")]
    assert len(found) == 1, [f.rule for f in findings]
    return found[0]


def _ancestor_kinds(row: int, parent, kind, name) -> list[tuple[str, str]]:
    out = []
    p = parent[row]
    while p >= 0:
        out.append((kind[p], name[p]))
        p = parent[p]
    return out


def test_compile_saving_is_recomputed_from_the_events(chain_run):
    """Eager: the step timer's forward and backward phases (medians of the unprofiled steps).
    Compiled: the kept ops' recorded time scaled by the unprofiled step over the profiled one
    (medians), one fused kernel per run of other ops (in the forward and the backward, per
    step, in time order; a run of layout ops only needs none) and the call overhead. The
    rule's figures, recomputed row by row."""
    run = chain_run
    ev = run.events
    kind = ev["kind"].astype(str).to_numpy()
    name = ev["name"].astype(str).to_numpy()
    parent = ev["parent"].to_numpy()
    step = ev["step"].to_numpy()
    stream = ev["stream"].to_numpy()
    start = ev["start_ns"].to_numpy()
    dur = ev["dur_ns"].to_numpy()
    steps = int((kind == "step").sum())
    timer = run.meta["step_timer"]
    kept_ns = 0.0
    regions: dict[tuple[int, str], list[tuple[int, bool]]] = {}
    for r in range(len(ev)):
        if kind[r] != "operator" or stream[r] >= 0 or step[r] < 0:
            continue
        above = _ancestor_kinds(r, parent, kind, name)
        kinds_above = {k for k, _ in above}
        if kinds_above & {"operator", "optimizer", "dataloader"}:
            continue  # not a unit, or the optimizer's or the loader's
        backward = "backward" in kinds_above
        in_layer = any(k == "user" and n.startswith("nn.Module: ") for k, n in above)
        family = family_of(name[r])
        kept = family in KEPT_FAMILIES
        if backward or in_layer:
            regions.setdefault((int(step[r]), "bwd" if backward else "fwd"), []).append(
                (int(start[r]), kept, family == "layout")
            )
        if kept or not (backward or in_layer):  # kept ops, and the loop's own ops
            kept_ns += dur[r]
    profiled, unprofiled = np.median(timer["profiled_ns"]), np.median(timer["unprofiled_ns"])
    # scaled by the step without the profiler over the profiled one, whichever was faster:
    # the saving is stated against the step without the profiler whenever it was timed
    kept = kept_ns / steps * unprofiled / profiled
    kernels = 0
    for units in regions.values():
        fusible: list[bool] = []  # the current run of fusible units: which are layout ops
        for _, is_kept, layout in [*sorted(units), (0, True, False)]:
            if not is_kept:
                fusible.append(layout)
                continue
            kernels += bool(fusible) and not all(fusible)  # views alone need no kernel
            fusible = []
    kernels_per_step = kernels / steps
    phases = timer["phases"]
    eager = np.median(phases["forward"]["unprofiled_ns"]) + np.median(
        phases["backward"]["unprofiled_ns"]
    )
    # the call and kernel costs scaled to this machine by the eager pass the timer timed
    call, kernel, scale = _model_costs(run)
    assert scale is not None and scale > 0
    # no shapes recorded: the fused kernels' arithmetic is not counted, and the text says so
    expected = max(eager - (kept + kernels_per_step * kernel + call), 0.0)

    finding = _compile_finding(run.advise())
    evidence = finding.evidence
    assert evidence["compile_arithmetic"] == "no shapes"
    assert evidence["fused_flops_per_step"] == evidence["transcendentals_per_step"] == 0
    assert "record_shapes=True" in finding.estimate
    assert evidence["compile_source"] == "timed"
    assert evidence["eager_ns"] == pytest.approx(eager)
    assert evidence["compile_kept_ns"] == pytest.approx(kept)
    assert evidence["fused_kernels_per_step"] == pytest.approx(kernels_per_step)
    assert finding.saving_ns == pytest.approx(expected)
    # 30 links of three ops each: their forward is one run, their backward another
    assert kernels_per_step >= 2
    assert f"{kernels_per_step:.0f} fused kernels" in finding.estimate
    assert evidence["compile_costs_scale"] == pytest.approx(scale)
    assert evidence["compile_call_ns"] == pytest.approx(call)
    assert evidence["compile_kernel_ns"] == pytest.approx(kernel)
    assert f"the model's times {scale:.2f}" in finding.estimate


def test_without_an_eager_pass_the_costs_are_the_models(chain_run):
    """A run whose step timer timed no eager pass (saved by an older perfkit, or with
    ``eager_pass=False``) takes the model's call and kernel costs as they are, and says so."""
    import perfkit_core

    run = perfkit_core.load(chain_run.origin)
    del run.meta["step_timer"]["eager_pass_ns"]
    finding = _compile_finding(run.advise())
    evidence = finding.evidence
    assert evidence["compile_costs_scale"] is None
    assert evidence["compile_call_ns"] == COMPILED_CALL_NS
    assert evidence["compile_kernel_ns"] == FUSED_KERNEL_NS
    assert "no step timer timed this machine's eager pass" in finding.estimate


def test_the_eager_pass_leaves_the_program_as_it_was():
    """Timing the eager pass where a run trained changes neither the random state, nor the
    intra-op threads, nor the grad mode of the program that trains."""
    from perfkit_torch.replay_compile import eager_pass_ns

    threads = torch.get_num_threads()
    state = torch.get_rng_state()
    with torch.no_grad():
        assert eager_pass_ns() > 0
        assert not torch.is_grad_enabled()
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.get_num_threads() == threads


#: The chain's fused ops with their FLOPs per element of their first input: the forward's
#: multiply, add and tanh, the backward's tanh gradient and multiply, and the bias gradients'
#: sums (one per input element).
_CHAIN_FLOPS = ("aten::mul", "aten::add", "aten::tanh", "aten::tanh_backward", "aten::sum")


def test_fused_arithmetic_is_counted_from_the_recorded_shapes(tmp_path):
    """With shapes recorded, the fused kernels' arithmetic: the fused ops' FLOPs (one per
    element of each elementwise op and of each sum's input) and tanh's elements, recomputed
    from the recorded input shapes, at the model's costs; the saving is eager less all of it."""
    import json
    import math

    run = _chain_run(tmp_path, shapes=True)
    ev = run.events
    name = ev["name"].astype(str).to_numpy()
    kind = ev["kind"].astype(str).to_numpy()
    step = ev["step"].to_numpy()
    shapes = ev["input_shapes"].astype(str).to_numpy()
    steps = int((kind == "step").sum())
    flops = transcendentals = 0.0
    for r in np.flatnonzero((kind == "operator") & (step >= 0)):
        if name[r] not in _CHAIN_FLOPS:
            continue
        first = json.loads(shapes[r])[0]
        elements = math.prod(first) if first else 0
        flops += elements
        transcendentals += elements if name[r] == "aten::tanh" else 0
    flops, transcendentals = flops / steps, transcendentals / steps
    assert transcendentals == 30 * 8 * 16  # 30 links on batches of 8 by 16

    finding = _compile_finding(run.advise())
    evidence = finding.evidence
    assert evidence["compile_arithmetic"] == "counted"
    assert evidence["fused_flops_per_step"] == pytest.approx(flops)
    assert evidence["transcendentals_per_step"] == pytest.approx(transcendentals)
    call, kernel, _ = _model_costs(run)
    compiled = (
        evidence["compile_kept_ns"]
        + evidence["fused_kernels_per_step"] * kernel
        + flops * FUSED_FLOP_NS
        + transcendentals * TRANSCENDENTAL_NS
        + call
    )
    assert evidence["compiled_ns"] == pytest.approx(compiled)
    assert finding.saving_ns == pytest.approx(max(evidence["eager_ns"] - compiled, 0.0))
    assert f"{transcendentals / 1e3:.1f}k transcendental elements" in finding.estimate
    # within the model's error exactly when the saving is under COMPILE_ERROR of the compiled
    # step (or compiling costs more), and then the estimate says compiling may not pay
    unsure = evidence["eager_ns"] - compiled < COMPILE_ERROR * compiled
    assert finding.within_error is unsure
    assert ("not pay here" in finding.estimate) is unsure


def test_findings_of_one_remedy_state_its_one_saving(chain_run):
    """python-overhead and small-ops both prescribe compiling: merged, the finding states the
    remedy's saving once, not the two findings' savings added."""
    finding = _compile_finding(run_findings := chain_run.advise())
    merged = finding.evidence.get("merged", [])
    by_finding = finding.evidence.get("saving_by_finding", {finding.rule: finding.saving_ns})
    assert finding.evidence["saving_of"] == "compile"
    assert all(s == pytest.approx(finding.saving_ns) for s in by_finding.values())
    assert set(by_finding) == {finding.rule, *merged}
    assert "savings add up" not in finding.estimate
    assert run_findings[0] is finding or finding.saving_ns <= run_findings[0].saving_ns


def test_measure_times_a_compiled_graph(chain_run):
    """``advise(measure=True)``: the compiled graph's call overhead and fused kernel's cost
    measured by compiling two small models here, put into the same formula."""
    finding = _compile_finding(chain_run.advise(measure=True))
    evidence = finding.evidence
    if evidence.get("measured") != "replay":
        pytest.skip("torch.compile cannot compile on this machine")
    call, kernel = evidence["replay_call_ns"], evidence["replay_kernel_ns"]
    flop, heavy = evidence["replay_flop_ns"], evidence["replay_transcendental_ns"]
    assert call > 0 and kernel >= 0 and flop >= 0 and heavy >= 0
    compiled = compiled_step_ns(
        evidence["compile_kept_ns"],
        evidence["fused_kernels_per_step"],
        CompileCosts(call, kernel, flop, heavy),
        fused_flops=evidence["fused_flops_per_step"],
        transcendentals=evidence["transcendentals_per_step"],
    )
    assert finding.saving_ns == pytest.approx(max(evidence["eager_ns"] - compiled, 0.0))
    assert f"{call / 1e6:.3f} ms per forward and backward" in finding.estimate
    # the replay's verdict, not the model's
    unsure = evidence["eager_ns"] - compiled < COMPILE_ERROR * compiled
    assert finding.within_error is unsure
    assert ("not pay here" in finding.estimate) is unsure


def test_paddle_compile_finding_promises_no_saving(tmp_path):
    """The compile model describes torch's inductor; Paddle's to_static made the bench's CPU
    loops slower, so a Paddle run's compile finding states no saving and says why."""
    pytest.importorskip("paddle")
    import perfkit_core
    from tests.test_advice_savings import _record_paddle

    run = perfkit_core.load(_record_paddle(tmp_path, multi_tensor=True))
    found = [f for f in run.advise() if f.rule in ("python-overhead", "small-ops")]
    assert found, [f.rule for f in run.advise()]
    assert found[0].saving_ns == 0
    assert found[0].evidence["compile_source"] == "unmodelled"
    assert "No saving is promised" in found[0].estimate
    assert "to_static" in found[0].remedy


def test_compare_sees_the_model_compiled(chain_run, tmp_path):
    """``perfkit compare`` of the chain against the same loop compiled: the compile finding was
    acted on (the ops it fuses are no longer recorded), and promised against delivered are
    printed. The compiled run is not promised its own compilation again: its compiled regions
    count as kept."""
    from perfkit_core.advice.followup import follow_up

    after = _chain_run(tmp_path, compiled=True)
    before_finding = _compile_finding(chain_run.advise())
    rows, figures = follow_up(chain_run, after)
    row = next(r for r in rows if r.id == before_finding.id)
    assert row.acted_on, row
    assert (row.state_before, row.state_after) == ("eager", "compiled")
    assert row.delivered_ns == pytest.approx(figures["delivered_ns"])
    assert "delivered" in row.sentence()
    later = [f for f in after.advise() if f.rule in ("python-overhead", "small-ops")]
    for finding in later:
        fusible = finding.evidence["fusible_per_step_ns"]
        assert fusible <= 0.5 * before_finding.evidence["fusible_per_step_ns"]


def test_a_compile_that_does_not_pay_says_so():
    """When the compiled forward and backward cost more than the eager ones, the estimate opens
    by saying compiling is not expected to pay, with the time it would lose and its share of
    the eager time; when they cost less by under the model's error, that it may not pay; when
    it pays more than that, it opens with the compiled against the eager time."""
    from perfkit_core.advice import MODEL_COSTS, compile_verdict
    from perfkit_core.advice.compiled import CompileEstimate

    # 0.10 ms of kept ops, 10 kernels: compiled = 0.10 + 10 * kernel + call (no arithmetic)
    slower = CompileEstimate(0.0, 0.20e6, 0.10e6, 10, "timed", arithmetic="device")
    lost = slower.compiled_ns - slower.eager_ns
    assert lost == pytest.approx(0.10e6 + 10 * MODEL_COSTS.kernel_ns + MODEL_COSTS.call_ns - 0.20e6)
    assert lost > 0
    text = slower.text()
    assert text.startswith(compile_verdict(slower.eager_ns, slower.compiled_ns).strip() + " ")
    from perfkit_core.advice.text import duration_text

    assert f"would be {duration_text(lost)} per step slower ({100 * lost / 0.20e6:.0f}% of" in text
    assert "not expected to pay" in text
    from perfkit_core.advice.compiled import COMPILE_ERROR

    # a saving under the model's error (a share of the compiled step) is not a clear one
    even = compile_verdict(1e6, 1e6)
    assert "would cost about what they cost eager (1.00 against 1.00 ms)" in even
    assert f"within the model's error ({100 * COMPILE_ERROR:.0f}% of the compiled step)" in even
    assert "may not pay" in compile_verdict(1.09e6, 1e6)
    assert compile_verdict(1.11e6, 1e6) == ""
    pays = CompileEstimate(0.0, 2.0e6, 0.10e6, 10, "timed", arithmetic="device")
    assert pays.compiled_ns < pays.eager_ns and not pays.verdict_text()
    assert pays.text().startswith(
        f"Compiled, the forward and backward would take about {pays.compiled_ns / 1e6:.2f} ms "
        "per step against 2.00 ms eager. Compiling saves"
    )
    paying = CompileEstimate(1.0e6, 2.0e6, 0.10e6, 10, "timed", arithmetic="device")
    assert paying.compiled_ns < paying.eager_ns
    assert compile_verdict(paying.eager_ns, paying.compiled_ns) == ""
    assert "not expected to pay" not in paying.text() and "may not pay" not in paying.text()


def test_a_replay_term_it_could_not_resolve_keeps_the_models():
    """A replay whose fused block timed no dearer than its Linear layer alone (the timings'
    noise exceeded the kernel's cost) measured no kernel cost: the model's constant stands in
    for that term, and the replay says which terms it did not resolve."""
    pytest.importorskip("torch")
    from perfkit_core.advice import MODEL_COSTS
    from perfkit_torch.replay_compile import resolved_costs

    measured = {"call_ns": 2e5, "kernel_ns": -300.0, "flop_ns": 0.19, "transcendental_ns": 0.0}
    costs, unresolved = resolved_costs(measured)
    assert costs.call_ns == 2e5 and costs.flop_ns == 0.19
    assert costs.kernel_ns == MODEL_COSTS.kernel_ns
    assert costs.transcendental_ns == MODEL_COSTS.transcendental_ns
    assert unresolved == ("fused kernel", "transcendental element")
    resolved = {"call_ns": 2e5, "kernel_ns": 9e3, "flop_ns": 0.13, "transcendental_ns": 4.5}
    assert resolved_costs(resolved) == (CompileCosts(2e5, 9e3, 0.13, 4.5), ())
