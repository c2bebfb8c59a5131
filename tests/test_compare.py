"""Comparing runs: before/after on the real ResNet traces, torch against paddle on real CPU
runs of the same MLP, and the regression gate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import shared_trace
from perfkit_core.cli import main
from perfkit_core.comparison import compare
from perfkit_core.views.families import family_times
from tests.peer_definitions import read_events, tb_steps


@pytest.fixture(scope="module")
def resnet():
    return compare(shared_trace("resnet_nw0"), shared_trace("resnet_nw4"), labels=["nw0", "nw4"])


def test_num_workers_cuts_dataloader_and_step_time(resnet):
    totals = resnet.summary("totals").set_index("name")
    assert -99.9 < totals.loc["data", "delta_pct"] < -95  # about 98% less waiting for data
    steps = resnet.summary("steps").set_index("name")
    assert -35 < steps.loc["nw4", "delta_pct"] < -15  # about 25% shorter median step
    for label, run, key in zip(resnet.labels, resnet.runs, ("resnet_nw0", "resnet_nw4"), strict=True):
        # The steps as each run's report times them: stretched over their device work.
        stretched = tb_steps(read_events(shared_trace(key)), unlaunched="own_start")
        assert steps.loc[label, "median_step_ns"] == np.median([e - s for s, e in stretched])
        report = run.summary("model").set_index("name")
        assert totals.loc["step", label] == pytest.approx(report.loc["step", "per_step_ns"])
        assert totals.loc["data", label] == pytest.approx(report.loc["data", "per_step_ns"])
        assert totals.loc["gpu", label] == pytest.approx(report.loc["step", "gpu_per_step_ns"])
    loaders = resnet.runs[0].events
    loaders = loaders.loc[loaders["kind"] == "dataloader", "dur_ns"].sum() / 6
    assert totals.loc["data", "nw0"] == pytest.approx(loaders)


def test_ops_table_statuses(resnet):
    ops = resnet.summary("ops")
    assert set(ops["status"]) <= {"nw0 only", "nw4 only", "faster", "slower", "same", ""}
    gone = ops[ops["status"] == "nw0 only"]
    assert (gone["nw4"].fillna(0) == 0).all() and (gone["nw0"] > 0).all()
    same = ops[ops["status"] == "same"]
    assert ((same["nw4"] - same["nw0"]).abs() <= 0.05 * same["nw0"]).all()
    assert set(ops.loc[ops["name"].isin(["step", "unattributed"]), "status"]) == {""}
    # Outermost ops only: no op is listed again inside another (conv2d > convolution > ...).
    names = set(ops["name"])
    assert "conv (forward)" in names
    assert not any(n.startswith(("convolution", "_convolution", "cudnn")) for n in names)


def test_gate_both_directions(capsys):
    a, b = str(shared_trace("resnet_nw0")), str(shared_trace("resnet_nw4"))
    assert main(["compare", a, b, "--fail-on-regression", "10", "--views", "steps"]) == 0
    # A text report on standard output ends with the gate's line (and stderr stays quiet).
    captured = capsys.readouterr()
    last = captured.out.strip().splitlines()[-1]
    assert last.startswith("improvement:") and "causes: family data" in last and not captured.err
    assert (
        main(
            ["compare", b, a, "--fail-on-regression", "10", "--views", "steps", "--format", "json"]
        )
        == 1
    )
    captured = capsys.readouterr()
    gate = json.loads(captured.out)["gate"]
    assert gate["regressed"] is True and gate["delta_pct"] > 10
    assert captured.err.strip().splitlines()[-1].startswith("regression:")


def _steps_trace(tmp_path, name, durations_us):
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
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": d - 2,
            }
        )
        t += d
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_gate_reports_noise_as_noise(tmp_path):
    steady = _steps_trace(tmp_path, "a.json", [100, 100, 101, 99, 100, 100])
    noisy = _steps_trace(tmp_path, "b.json", [80, 140, 90, 150, 100, 130])
    result = compare(steady, noisy).gate(5)
    assert not result.regressed and result.message.startswith("noise:")
    slower = _steps_trace(tmp_path, "c.json", [130, 131, 129, 130, 130, 131])
    result = compare(steady, slower).gate(5)
    assert result.regressed and result.delta_pct == pytest.approx(30, abs=1)


def test_torch_and_paddle_mlp_fill_the_same_families(torch_profile, paddle_profile):
    comparison = compare(torch_profile.runs[0], paddle_profile.runs[0], labels=["torch", "paddle"])
    family = comparison.summary("family").set_index("name")
    for fam in (
        "matmul (forward)",
        "activation (forward)",
        "loss (forward)",
        "optimizer",
        "matmul (backward)",
    ):
        assert family.loc[fam, "torch"] > 0, fam
        assert family.loc[fam, "paddle"] > 0, fam
    # The family table splits each run's step time; its op rows are the run's outermost work
    # on the training thread (the family view also counts other threads' work).
    for label, run in zip(comparison.labels, comparison.runs, strict=True):
        steps = int((run.events["kind"] == "step").sum())
        whole = {k: v / steps for k, v in family_times(run).items()}
        for fam in ("matmul (forward)", "matmul (backward)", "norm (forward)"):
            assert family.loc[fam, label] == pytest.approx(whole[fam]), (label, fam)


def test_per_sample_normalization(resnet):
    per_sample = compare(*resnet.runs, labels=resnet.labels, batch_sizes=[32, 32], per="sample")
    a = resnet.summary("phases").set_index("name")
    b = per_sample.summary("phases").set_index("name")
    assert b.loc["step", "nw0"] == pytest.approx(a.loc["step", "nw0"] / 32)
    with pytest.raises(ValueError, match="batch size"):
        compare(*resnet.runs, per="sample")


def test_compare_html_is_self_contained_and_escaped(tmp_path):
    path = tmp_path / "evil.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
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
                        "cat": "cpu_op",
                        "name": "<img src=x onerror=alert(1)>",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1,
                        "dur": 50,
                    },
                ]
            }
        )
    )
    out = tmp_path / "cmp.html"
    assert main(["compare", str(path), str(path), "--format", "html", "-o", str(out)]) == 0
    html = out.read_text().replace("<wbr>", "")  # perfkit's own wrap points
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script src=" not in html and "<link" not in html and 'src="http' not in html


def test_compare_needs_two_runs(capsys):
    assert main(["compare", str(shared_trace("resnet_nw0"))]) == 2
    assert "at least two" in capsys.readouterr().err


def test_totals_leave_out_rows_that_say_nothing(resnet):
    """The single-GPU ResNet runs call no collective: no communication row of zeros. The A100
    rank's NCCL time stays, equal to its communication events per step; the step row always
    stays."""
    totals = resnet.summary("totals")
    assert "communication" not in set(totals["name"]) and "step" in set(totals["name"])
    assert "0 in every run" in totals.attrs["note"]
    a100 = compare(shared_trace("a100_rank3"), shared_trace("a100_rank3"), labels=["a", "b"])
    rows = a100.summary("totals").set_index("name")
    run = a100.runs[0]
    ev = run.events
    device_comm = (ev["kind"] == "communication") & (ev["stream"] >= 0) & (ev["step"] >= 0)
    comm = ev.loc[device_comm, "dur_ns"].sum()
    steps = int((ev["kind"] == "step").sum())
    assert comm > 0 and rows.loc["communication", "a"] == pytest.approx(comm / steps)
