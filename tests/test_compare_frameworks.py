"""One model in two frameworks: the same CNN, transformer and LSTM trained in torch and in paddle
on the CPU (``demo_models``), compared. The attribution must add up to the step-time
difference with little left unattributed, every number is recomputed from the raw events, and
the verdict, the tables and the gate read the same in every form."""

from __future__ import annotations

import html as html_lib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.cli import main
from perfkit_core.comparison import compare
from perfkit_core.comparison.verdict import LEAD_WORDS
from perfkit_core.report import build_comparison_report, render

MODELS = ("cnn", "transformer", "lstm")
VIEWS = ("phases", "family", "layers", "user", "ops")


@pytest.fixture(scope="module", params=MODELS)
def pair(request, model_pairs):
    torch_dir, paddle_dir = model_pairs(request.param)
    return request.param, compare(torch_dir, paddle_dir, labels=["torch", "paddle"])


def _step_mean(run) -> float:
    ev = run.events
    return float(ev.loc[ev["kind"] == "step", "dur_ns"].mean())


def test_attribution_adds_up_with_little_unattributed(pair):
    model, comparison = pair
    torch_run, paddle_run = comparison.runs
    delta = _step_mean(paddle_run) - _step_mean(torch_run)
    for view in VIEWS:
        table = comparison.summary(view).set_index("name")
        assert table.loc["step", "torch"] == pytest.approx(_step_mean(torch_run))
        assert table.loc["step", "paddle"] == pytest.approx(_step_mean(paddle_run))
        body = table.drop(index="step")
        for label in ("torch", "paddle"):
            assert body[label].fillna(0).sum() == pytest.approx(table.loc["step", label]), view
        assert body["delta_ns"].sum() == pytest.approx(delta), view
        if comparison.profiled_estimate().significant:
            assert body["share_pct"].sum() == pytest.approx(100.0), view
        else:  # within the noise a share of the difference is a share of noise: none shown
            assert body["share_pct"].isna().all(), view
        if view != "phases":
            # Each run's events cover its step to within 5% ...
            for label in ("torch", "paddle"):
                own = table.loc["unattributed", label]
                assert abs(own) < 0.05 * table.loc["step", label], (model, view, label, own)
            # ... and what is left of the difference is under 10% of it. When the frameworks
            # take nearly the same time (the difference under a tenth of the slower step), the
            # difference of two runs' few-percent gaps is no share of it to bound: the bound
            # above is the claim.
            slower = max(_step_mean(torch_run), _step_mean(paddle_run))
            unattributed = abs(table.loc["unattributed", "delta_ns"])
            if abs(delta) >= 0.1 * slower:
                assert unattributed < 0.1 * abs(delta), (model, view, unattributed, delta)


def test_every_run_puts_under_10_percent_of_op_time_in_no_family(pair):
    _, comparison = pair
    for run in comparison.runs:
        family = run.summary("family")
        assert family.loc[family["family"] == "other", "step_pct"].sum() < 10.0


def test_phases_are_one_definition_recomputed_from_raw_events(pair):
    """backward = first to last backward span of the step; forward holds the loss."""
    _, comparison = pair
    for i, run in enumerate(comparison.runs):
        ev = run.events
        slices = comparison.slices(i)
        steps = ev[ev["kind"] == "step"]
        backward = ev[(ev["kind"] == "backward") & (ev["stream"] < 0)]
        for step, start, dur in zip(steps["step"], steps["start_ns"], steps["dur_ns"], strict=True):
            inside = backward[
                (backward["start_ns"] >= start) & (backward["start_ns"] < start + dur)
            ]
            window = (inside["start_ns"] + inside["dur_ns"]).max() - inside["start_ns"].min()
            got = slices.loc[(slices["step"] == step) & (slices["phase"] == "backward"), "ns"].sum()
            assert got == pytest.approx(window), (run.framework, step)
        loss = slices[slices["user"] == "loss"]
        assert len(loss) and set(loss["phase"]) == {"forward"}, run.framework


def _direct_children(ev, rows):
    parent = ev["parent"].to_numpy()
    return np.flatnonzero(np.isin(parent, rows))


def test_layers_own_their_ops_and_python_recomputed_from_layer_spans(pair):
    """A layer's forward time is its spans' time less its child layers' spans, both runs."""
    model, comparison = pair
    leaf = {"cnn": "conv2d", "transformer": "selfattention", "lstm": "lstm"}[model]
    for i, run in enumerate(comparison.runs):
        ev = run.events
        names = ev["name"].astype(str)
        kind = ev["kind"].astype(str)
        is_layer = (kind == "forward") | names.str.startswith("nn.Module: ")
        layer_type = names.str.replace(r"^nn\.Module: (.*)_\d+$", r"\1", regex=True).str.lower()
        rows = np.flatnonzero(is_layer & (layer_type == leaf) & (ev["step"] >= 0))
        children = _direct_children(ev, rows)
        child_layers = children[is_layer.to_numpy()[children]]
        expected = ev["dur_ns"].to_numpy()[rows].sum() - ev["dur_ns"].to_numpy()[child_layers].sum()
        slices = comparison.slices(i)
        leaf_of = (
            slices["layer"].str.rsplit("/", n=1).str[-1].str.replace(r"\[\d+\]$", "", regex=True)
        )
        got = slices.loc[(leaf_of == leaf) & (slices["direction"] == "forward"), "ns"].sum()
        assert got == pytest.approx(expected), (run.framework, leaf)


def test_a_bias_add_inside_a_conv_layer_counts_as_the_conv(model_pairs):
    comparison = compare(*model_pairs("cnn"), labels=["torch", "paddle"])
    paddle = comparison.runs[1]
    ev = paddle.events
    conv_layers = np.flatnonzero((ev["kind"] == "forward") & (ev["name"] == "Conv2D"))
    children = _direct_children(ev, conv_layers)
    child_names = set(ev["name"].astype(str).to_numpy()[children])
    assert any(n.startswith("add ") for n in child_names), child_names
    ops = comparison.summary("ops").set_index("name")
    # Every op directly inside a Conv2D layer (conv2d, its reshape and its bias add) is the conv.
    assert ops.loc["conv (forward)", "paddle"] * 10 == pytest.approx(
        ev["dur_ns"].to_numpy()[children].sum()
    )
    assert "add" in ops.loc["conv (forward)", "paddle ops"]
    assert "add (forward)" not in ops.index
    # The bias add's gradient follows it into the conv layer, paired in reverse order.
    slices = comparison.slices(1)
    backward = slices[slices["direction"] == "backward"]
    conv = backward[backward["layer_label"].str.contains("Conv2D")]
    assert {"Conv2dGradNodeFinal", "AddGradNode"} <= set(conv["native"])
    linear = backward[backward["layer_label"].str.endswith("Linear")]
    assert "Conv2dGradNodeFinal" not in set(linear["native"])
    assert "MatmulGradNode" in set(linear["native"])
    families = comparison.summary("family").set_index("name")
    assert "elementwise (forward)" not in families.index or np.isnan(
        families.loc["elementwise (forward)", "paddle"]
    )


def test_loader_thread_work_is_data(model_pairs):
    _, paddle_dir = model_pairs("cnn")
    run = perfkit_core.load(paddle_dir)
    ev = run.events
    steps = ev[ev["kind"] == "step"]
    step_tids = set(steps["tid"])
    host = ev[(ev["stream"] < 0) & (ev["kind"] != "memory")]
    other = host[~host["tid"].isin(step_tids) & (host["parent"] < 0)]
    assert len(other), "the paddle DataLoader's prefetch thread recorded no ops"
    # The family view splits the step's own wall time: "data" is the training thread's wait
    # for the next batch, the same figure as the model view's data phase ...
    family = run.summary("family").set_index("name")
    model = run.summary("model").set_index("name")
    assert family.loc["data", "per_step_ns"] == pytest.approx(model.loc["data", "per_step_ns"])
    assert not any(name.startswith("other") for name in family.index)
    # ... and the prefetch thread's own work, which overlaps the step, is named in the note.
    per_step = other["dur_ns"].sum() / len(steps)
    assert (
        f"ran {per_step / 1e6:.3f} ms of work per step outside the step's thread"
        in (run.summary("family").attrs["note"])
    )


def test_verdict_names_the_biggest_causes(pair):
    _, comparison = pair
    verdict = comparison.verdict()
    assert verdict.baseline == "torch" and verdict.candidate == "paddle"
    family = comparison.summary("family").set_index("name")
    body = family.drop(index=["step", "unattributed"])
    sentence = verdict.sentence()
    assert "paddle" in sentence and "torch" in sentence
    assert len(sentence.split()) <= LEAD_WORDS, sentence
    # the causes in both directions follow the sentence, by op family
    family_line = verdict.family_line()
    step_delta = family.loc["step", "delta_ns"]
    if comparison.profiled_estimate().significant:
        # The rows going the way the step went, largest first, and the largest the other way.
        same_way = body[np.sign(body["delta_ns"]) == np.sign(step_delta)]
        top = same_way["delta_ns"].abs().idxmax()
        assert verdict.causes["family"][0].name == top and top in family_line
        assert (top in sentence) != verdict.rows_disagree
        other_way = body[np.sign(body["delta_ns"]) == -np.sign(step_delta)]
        other = other_way["delta_ns"].abs().idxmax()
        if abs(other_way.loc[other, "delta_ns"]) >= 0.02 * abs(step_delta):
            assert other in family_line and "offsetting part of it" in family_line
    else:
        # The profiled steps differ within their noise: the rows named are those differing
        # beyond their own noise, whatever the unprofiled headline says.
        assert ("the op family differing most" in sentence) == bool(verdict.causes["family"])
        assert all(c.resolvable for c in verdict.causes["family"])
    _check_unprofiled_phases(comparison, verdict, sentence)
    est = verdict.headline
    # The head states the headline (the unprofiled ratio), "within the noise" when it is.
    assert ("within the noise" in sentence) == (est.direction == "same")
    assert est.low <= est.ratio <= est.high
    # Both runs carry step-timer times, so the headline is the unprofiled ratio.
    assert verdict.unprofiled is not None
    torch_timer = comparison.runs[0].meta["step_timer"]["unprofiled_ns"]
    paddle_timer = comparison.runs[1].meta["step_timer"]["unprofiled_ns"]
    assert est.ratio == pytest.approx(np.mean(paddle_timer) / np.mean(torch_timer))


def _check_unprofiled_phases(comparison, verdict, sentence: str) -> None:
    """The phases both runs timed without the profiler, recomputed from the step timer's own
    lists; where the profiled steps say the opposite of the unprofiled headline, the sentence
    names the largest phase that goes the headline's way beyond its noise, and no op family."""
    timers = [run.meta["step_timer"] for run in comparison.runs]
    kept = [
        len(t["unprofiled_ns"]) - o.warmup_unprofiled
        for t, o in zip(timers, verdict.overheads, strict=True)
    ]
    expected = {}
    for phase in ("data", "forward", "backward", "optimizer"):
        lists = [t.get("phases", {}).get(phase, {}).get("unprofiled_ns") for t in timers]
        if all(lists) and all(any(x) for x in lists):
            a, b = (
                np.asarray(v[len(v) - n :], dtype=float) for v, n in zip(lists, kept, strict=True)
            )
            expected[phase] = b.mean() - a.mean()
    found = {c.name: c for c in verdict.unprofiled_phases}
    assert set(found) == set(expected)
    total = verdict.unprofiled.delta
    for phase, delta in expected.items():
        assert found[phase].delta_ns == pytest.approx(delta)
        assert found[phase].share_pct == pytest.approx(100 * delta / total)
        assert found[phase].resolvable == (not found[phase].low_ns <= 0 <= found[phase].high_ns)
    if expected:
        line = verdict.unprofiled_phases_line()
        assert line in verdict.lines() and f"{total / 1e6:+.3f} ms difference" in line
        rest = total - sum(expected.values())
        assert f"{rest / 1e6:+.3f} ms" in line
    if not verdict.rows_disagree:
        assert "without the profiler:" not in sentence
        return
    going = [
        c for c in verdict.unprofiled_phases if c.resolvable and (c.delta_ns > 0) == (total > 0)
    ]
    if going:
        top = max(going, key=lambda c: abs(c.delta_ns))
        assert f"the biggest timed phase without the profiler: {top.name} " in sentence
        assert f"{top.delta_ns / 1e6:+.3f} ms per step" in sentence
    else:
        assert sentence.endswith("the profiled steps, which the rows come from, say the opposite")
    assert "the biggest cause" not in sentence


def _slower_last(pair, labels=("torch", "paddle")):
    """The pair's runs and labels ordered so that the second is the slower (profiled): which
    framework is faster depends on the machine's load (torch's threads suffer more when the
    cores are shared), and the gate tests need a regression."""
    first, second = pair
    if compare(first, second).gate(0.0).delta_pct < 0:
        return (second, first), [labels[1], labels[0]]
    return (first, second), list(labels)


def test_verdict_attribution_and_gate_agree_in_every_form(model_pairs, tmp_path):
    runs, labels = _slower_last(model_pairs("cnn"))
    comparison = compare(*runs, labels=labels)
    gate = comparison.gate(10.0)
    model = build_comparison_report(comparison, gate=gate)
    data = json.loads(render(model, "json"))
    text = render(model, "text")
    page = render(model, "html")
    verdict = comparison.verdict()
    assert data["verdict"]["lines"] == verdict.lines("ms")
    for line in data["verdict"]["lines"]:
        # The text form wraps long verdict lines at 160 columns: compare the words.
        assert " ".join(line.split()) in " ".join(text.split())
        assert line in html_lib.unescape(page)
    head = data["verdict"]["unprofiled"]
    assert head["significant"] == (head["low"] > 1.0 or head["high"] < 1.0)
    if not head["significant"]:  # the interval holds 1: no faster or slower is claimed
        assert "within the noise" in data["verdict"]["lines"][0]
        assert f"ratio {head['ratio']:.2f}" in data["verdict"]["lines"][0]
        assert f"{head['low']:.2f}-{head['high']:.2f}" in data["verdict"]["lines"][0]
    elif head["ratio"] >= 1.0:
        assert f"{head['ratio']:.2f}x slower" in data["verdict"]["lines"][0]
        assert f"{head['low']:.2f}-{head['high']:.2f}" in data["verdict"]["lines"][0]
    else:  # the unprofiled steps can rank the runs the other way round
        assert f"{1 / head['ratio']:.2f}x faster" in data["verdict"]["lines"][0]
        assert f"{1 / head['high']:.2f}-{1 / head['low']:.2f}" in data["verdict"]["lines"][0]
    lines = data["verdict"]["lines"]
    family_line = next(line for line in lines if line.startswith("by op family"))
    causes = data["verdict"]["causes"]["family"]
    if causes:  # the biggest leads, every one is on the op-family line
        top = causes[0]
        assert f"{top['name']} {top['delta_ns'] / 1e6:+.3f} ms per step" in lines[0]
    for cause in causes:
        assert f"{cause['name']} {cause['delta_ns'] / 1e6:+.3f} ms" in family_line
        row = next(r for r in data["tables"]["family"]["rows"] if r["name"] == cause["name"])
        assert row["delta_ns"] == pytest.approx(cause["delta_ns"])
    assert data["gate"]["message"] == gate.message
    assert gate.message in text and html_lib.escape(gate.message) in page
    assert data["gate"]["regressed"] is gate.regressed
    top = data["verdict"]["causes"]["family"][0]["name"]
    assert f"causes: family {top} " in gate.message


def test_gate_honours_per_sample_and_names_the_cause(model_pairs, tmp_path, capsys):
    """16 vs 64 samples per step at 3x the step time: 25% faster per sample, not +200%."""
    a = _trace(tmp_path / "b16.json", [100] * 8, conv=50)
    b = _trace(tmp_path / "b64.json", [300] * 8, conv=150)
    argv = ["compare", str(a), str(b), "--fail-on-regression", "10", "--views", "steps"]
    # The text report ends with the gate's line; other formats send it to standard error.
    assert main([*argv, "--per", "sample", "--batch-sizes", "16,64"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("improvement:") and "-25.0%" in line
    assert main(argv) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("regression:") and "conv (forward) +0.100 ms" in line
    (fast, slow), _ = _slower_last(model_pairs("cnn"))
    gate = compare(fast, slow).gate(10.0)
    argv = ["compare", str(fast), str(slow), "--fail-on-regression", "10"]
    assert main([*argv, "--format", "json"]) == (1 if gate.regressed else 0)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == gate.message
    assert line.startswith("regression:") is gate.regressed
    assert gate.causes and f"causes: {gate.causes[0]}" in line and "family" in gate.causes[0]


def _trace(path, durations_us, *, conv):
    events, t = [], 0.0
    for i, d in enumerate(durations_us):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": d,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::conv2d",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": conv,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::relu",
                "pid": 1,
                "tid": 1,
                "ts": t + 2 + conv,
                "dur": d - conv - 4,
            }
        )
        t += d
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ("name,x", "column name"),
        ("a,a", "given twice"),
        ("a,", "empty"),
        ("x,x ops", "clashes"),
        ("b,a", None),
    ],
)
def test_labels_are_validated(tmp_path, capsys, labels, message):
    a = _trace(tmp_path / "a.json", [100] * 3, conv=10)
    code = main(["compare", str(a), str(a), "--labels", labels, "--views", "steps"])
    err = capsys.readouterr().err
    if message is None:
        assert code == 0
        return
    assert code == 2 and message in err and "Traceback" not in err


def test_user_and_layer_views_from_the_command_line(model_pairs, capsys):
    torch_dir, paddle_dir = model_pairs("lstm")
    out = ["compare", str(torch_dir), str(paddle_dir), "--labels", "torch,paddle"]
    assert main([*out, "--views", "user,layers", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    user = {r["name"] for r in data["tables"]["user"]["rows"]}
    assert {"forward", "loss", "backward", "optimizer", "unattributed"} <= user
    layers = {r["name"] for r in data["tables"]["layers"]["rows"]}
    assert "LanguageModel / LSTM" in layers
    assert main([*out, "--views", "bogus"]) == 2
    assert "unknown comparison view 'bogus'" in capsys.readouterr().err


# -- Layers and annotated spans line up row by row

FRAMEWORKS = ("torch", "paddle")


def _train_in_subprocess(code: str, *args: str) -> Path:
    """Run ``code`` (which prints a run folder last) in a fresh process from the repository's
    root; return that folder."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip().splitlines()[-1])


_DEMO = """
import sys
from pathlib import Path
from perfkit_{fw}.demo import train_mlp
runs, _ = train_mlp(Path(sys.argv[1]), steps=5)
print(runs[0])
"""


@pytest.fixture(scope="module")
def demo_pair(tmp_path_factory):
    """The comparison of ``perfkit demo``'s two runs: its MLP trained by each framework's demo
    loop (``perfkit_torch.demo``, ``perfkit_paddle.demo``), each in its own process."""
    pytest.importorskip("torch")
    pytest.importorskip("paddle")
    root = tmp_path_factory.mktemp("demo_pair")
    runs = [_train_in_subprocess(_DEMO.format(fw=fw), str(root / fw)) for fw in FRAMEWORKS]
    return compare(*runs, labels=list(FRAMEWORKS))


_TOWER = """
import sys
from pathlib import Path
from tests.layer_models import train
print(train(sys.argv[1], Path(sys.argv[2]), layers=sys.argv[3] == "1"))
"""


@pytest.fixture(scope="module")
def tower_runs(tmp_path_factory):
    """The tower of ``tests/layer_models.py`` (nested containers, a block used four times from
    a module list, two listed heads, a layer called twice) trained in torch with and without
    perfkit's layer spans, and in Paddle: run folders by name."""
    pytest.importorskip("torch")
    pytest.importorskip("paddle")
    root = tmp_path_factory.mktemp("tower")
    return {
        name: _train_in_subprocess(_TOWER, fw, str(root / name), layers)
        for name, fw, layers in (
            ("torch", "torch", "1"),
            ("torch_no_layers", "torch", "0"),
            ("paddle", "paddle", "1"),
        )
    }


def _assert_rows_line_up(comparison, annotated):
    """Every layer of either run is a row with a figure for both runs, and so is every span
    in ``annotated``: the runs record the same layer paths and annotated spans."""
    from perfkit_core.views.anatomy.structure import structure

    keys = [set(structure(run).layer_key.values()) for run in comparison.runs]
    assert keys[0], "the torch run recorded no layer"
    assert keys[0] == keys[1], sorted(keys[0] ^ keys[1])
    labels = comparison.labels
    layers = comparison.summary("layers")
    rows = layers[
        ~layers["name"].isin(["step", "unattributed"])
        & ~layers["name"].str.startswith("(no layer)")
    ]
    assert len(rows) == len(keys[0])
    one_sided = rows[rows[labels].isna().any(axis=1)]
    assert one_sided.empty, one_sided[["name", *labels]]
    user = comparison.summary("user")
    spans = user[~user["name"].isin(["step", "unattributed", "(not annotated)"])]
    assert set(spans["name"]) == set(annotated)
    assert not spans[labels].isna().any().any(), spans[["name", *labels]]


def test_every_layer_and_annotated_span_of_a_model_pair_is_on_one_row(pair):
    """CNN, transformer and LSTM: torch's layers come from the handler alone."""
    _, comparison = pair
    _assert_rows_line_up(comparison, {"forward", "loss", "backward", "optimizer"})


def test_the_demo_compares_the_same_layers_and_annotated_spans(demo_pair):
    _assert_rows_line_up(demo_pair, {"forward_and_loss", "backward"})
    names = set(demo_pair.summary("layers")["name"])
    assert {"Sequential / Linear 1", "Sequential / Linear 5", "Sequential / ReLU 4"} <= names


def test_nested_repeated_and_listed_layers_have_one_path_in_both_frameworks(tower_runs):
    from perfkit_core.views.anatomy.structure import structure
    from tests.layer_models import EXPECTED_KEYS

    runs = {name: perfkit_core.load(tower_runs[name]) for name in ("torch", "paddle")}
    labels = {}
    for name, run in runs.items():
        st = structure(run)
        assert set(st.layer_key.values()) == EXPECTED_KEYS, name
        labels[name] = {st.layer_key[r]: st.layer_label[r] for r in st.layer_key}
    assert labels["torch"] == labels["paddle"]
    assert labels["torch"]["tower[1]/block[4]/layernorm[1]"] == "Tower / Block 4 / LayerNorm"
    assert labels["torch"]["tower[1]/linear[4]"] == "Tower / Linear 4"
    comparison = compare(tower_runs["torch"], tower_runs["paddle"], labels=list(FRAMEWORKS))
    _assert_rows_line_up(comparison, {"forward", "backward"})


@pytest.mark.parametrize("order", [("torch_no_layers", "paddle"), ("paddle", "torch_no_layers")])
def test_a_run_without_layer_spans_is_compared_by_phase_and_says_why(tower_runs, order):
    labels = ["torch" if name.startswith("torch") else name for name in order]
    comparison = compare(*(tower_runs[name] for name in order), labels=labels)
    table = comparison.summary("layers")
    body = table[~table["name"].isin(["step", "unattributed"])]
    assert body["name"].str.startswith("(no layer) ").all(), list(body["name"])
    # Each row is the phase's time outside unattributed gaps, recomputed from the slices.
    for i, label in enumerate(labels):
        slices = comparison.slices(i)
        kept = slices[slices["family"] != "unattributed"]
        steps = slices["step"].nunique()
        per_phase = kept.groupby("phase", observed=True)["ns"].sum() / steps
        for row in body.itertuples(index=False):
            phase = row.name.removeprefix("(no layer) ")
            assert getattr(row, label) == pytest.approx(per_phase.get(phase, np.nan)), row.name
    line = (
        "layers not compared, rows by phase: torch recorded no layer spans (to record them: "
        "profile with perfkit_torch.on_trace_ready(...)"
    )
    assert table.attrs["note"].startswith(line)
    verdict = comparison.verdict()
    assert verdict.causes["layers"] == []
    by_layer = [x for x in verdict.lines("ms") if x.startswith("by layer: ")]
    assert by_layer == [f"by layer: {verdict.layers_missing}"]
    assert verdict.layers_missing.startswith(line) and "layers=False" in verdict.layers_missing
    model = build_comparison_report(comparison)
    data = json.loads(render(model, "json"))
    assert data["verdict"]["layers_missing"] == verdict.layers_missing
    text = render(model, "text")
    # The verdict's line and the table's note (the text form wraps at 160 columns: by words).
    assert " ".join(text.split()).count(" ".join(verdict.layers_missing.split())) == 2


def test_a_comparison_of_two_frameworks_has_no_advice_acted_on(tower_runs):
    """Advice "acted on" is a before/after reading: a Paddle run did not act on a torch run's
    findings, so a comparison across frameworks leaves that table out."""
    from perfkit_core.advice.followup import follow_up
    from perfkit_core.report.comparison_model import advice_table

    comparison = compare(tower_runs["torch"], tower_runs["paddle"], labels=list(FRAMEWORKS))
    rows, _ = follow_up(*comparison.runs)
    assert rows  # the torch run has findings a before/after comparison would follow up
    assert advice_table(comparison) is None
    model = build_comparison_report(comparison)
    assert "advice" not in {t.id for t in model.tables}
