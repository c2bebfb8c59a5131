"""The perfkit command line on real traces."""

from __future__ import annotations

import json
import re
import statistics

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.advice import advise
from perfkit_core.cli import main
from perfkit_core.plugins import DEMO_TIMED_PER_PROFILED
from tests.peer_definitions import read_events, tb_steps


def test_report_prints_aligned_tables(capsys):
    path = shared_trace("resnet_nw4")
    assert (
        main(["report", str(path), "--top", "5", "--time-unit", "us", "--views", "operator"]) == 0
    )
    out = capsys.readouterr().out
    assert "Operator Summary" in out and "Time unit: us" in out
    lines = out.splitlines()
    header_end = next(i for i, line in enumerate(lines) if line.startswith("Name"))
    headers = column_headers(lines, header_end)
    # Totals over the run say how many steps they cover; per-call figures say so too.
    assert "CPU total, 6 steps (us)" in headers and "GPU total, 6 steps (us)" in headers
    assert "CPU avg/call (us)" in headers
    # Every column of the rows sits under its header: the rule's runs of dashes bound both.
    rule = lines[header_end + 1]
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    row = lines[header_end + 2]
    assert all(row[end : end + 2].strip() == "" for _, end in spans[:-1])
    # The first operator row equals the view's top row, converted to us.
    ops = perfkit_core.load(path).summary("operator")
    top = ops.iloc[0]
    assert row.startswith(str(top["name"])[:20])
    cells = [row[start:end].strip() for start, end in spans]
    assert cells[headers.index("CPU total, 6 steps (us)")] == f"{top['cpu_total_ns'] / 1000:.3f}"


def column_headers(lines: list[str], header_end: int) -> list[str]:
    """The whole header of each column of a text table whose header wraps onto lines.

    The dashed rule under the header marks each column's width; the header lines above it, up to
    the rule over the table, hold the column's label a piece per line.
    """
    rule = lines[header_end + 1]
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    top = header_end
    while not lines[top - 1].startswith("---"):
        top -= 1
    block = lines[top : header_end + 1]
    return [" ".join(filter(None, (line[s:e].strip() for line in block))) for s, e in spans]


def test_report_json(capsys):
    path = shared_trace("rank_non_gpu")
    assert (
        main(["report", str(path), "--format", "json", "--views", "operator,user", "--top", "0"])
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    run = perfkit_core.load(path)
    ops = run.summary("operator")
    table = payload["tables"]["operator"]
    assert len(table["rows"]) == len(ops)
    assert table["rows"][0]["cpu_total_ns"] == int(ops.iloc[0]["cpu_total_ns"])
    # No GPU: the GPU columns are left out, with a note, never shown as zeros.
    assert "gpu_total_ns" not in table["rows"][0]
    assert "GPU columns omitted" in table["note"]
    assert {"key": "cpu_total_ns", "label": "CPU total", "unit": "time"} in table["columns"]
    assert payload["meta"]["framework"] == "torch"


def test_report_cpu_only_omits_gpu_columns(capsys):
    assert main(["report", str(shared_trace("rank_non_gpu")), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "GPU total" not in out
    assert "no device events were recorded: GPU columns omitted" in out


def test_report_group_by_shape_and_output_file(tmp_path, capsys):
    out_file = tmp_path / "report.txt"
    assert (
        main(
            [
                "report",
                str(shared_trace("rank_non_gpu")),
                "--group-by-input-shape",
                "-o",
                str(out_file),
            ]
        )
        == 0
    )
    text = out_file.read_text()
    assert "Input shapes" in text


def test_bad_sort_key_is_a_usage_error(capsys):
    code = main(["report", str(shared_trace("rank_non_gpu")), "--sort-by", "bogus"])
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_info_lists_plugins_and_views(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "operator" in out and "user" in out
    # Each installed adapter's framework by its own name and version (not the plugin's name).
    import importlib.util

    for module, name in (("torch", "PyTorch"), ("paddle", "PaddlePaddle")):
        if importlib.util.find_spec(module) is not None:
            assert f"{name} {__import__(module).__version__} installed" in out
    if "perfkit-xla" in out and not any(f"{f} " in out for f in ("jax", "tensorflow")):
        assert "TensorFlow/JAX is not installed" in out


def test_demo_writes_a_run_and_report(tmp_path, capsys):
    pytest.importorskip("torch")
    assert main(["demo", "--out", str(tmp_path), "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "Operator Summary" in out
    reports = sorted(tmp_path.rglob("report.txt"))
    assert len(list(tmp_path.rglob("report.html"))) == len(reports)
    frameworks = {
        perfkit_core.load(r.parent).framework: perfkit_core.load(r.parent) for r in reports
    }
    assert "torch" in frameworks
    import importlib.util

    timed = ["torch"] + (["paddle"] if importlib.util.find_spec("paddle") is not None else [])
    for name in timed:
        # ten times 3 steps timed without the profiler (after the step timer's 2 warm-up
        # steps), then 3 profiled: the advice states its savings against the unprofiled steps
        run = frameworks[name]
        unprofiled = DEMO_TIMED_PER_PROFILED * 3
        assert unprofiled == 30
        record = run.meta["step_timer"]
        assert len(record["unprofiled_ns"]) == unprofiled
        assert len(record["profiled_ns"]) == 3
        if name == "torch":  # the schedule's wait steps are the unprofiled ones
            assert run.meta["steps"] == [2 + unprofiled, 3 + unprofiled, 4 + unprofiled]
            assert not record["unknown_ns"]
        else:
            # Paddle's profiler starts after them (a started Profiler slows its closed steps
            # too: they are neither), and numbers its steps from there
            assert run.meta["steps"] == [2, 3, 4]
            assert len(record["unknown_ns"]) == 2
        findings = advise(run)
        assert findings, name
        for finding in findings:
            assert finding.evidence["basis"] == "unprofiled"
            assert finding.evidence["basis_step_ns"] == pytest.approx(
                statistics.median(record["unprofiled_ns"])
            )
        text = next((tmp_path / name).rglob("report.txt")).read_text()
        assert "of the step without the profiler" in text
        # the demos take each batch before ``with timer.step()``: the training thread's time
        # getting it (torch's loading, Paddle's wait for its loading thread) is the next
        # step's, in its data phase and its time, and the hand-over is timed here
        data = record["phases"]["data"]["unprofiled_ns"]
        assert all(0 < d < t for d, t in zip(data, record["unprofiled_ns"], strict=True))
        assert record["loader_batch_ns"] > 0
        optimizer = {f.id: f for f in findings}.get("optimizer")
        if optimizer is not None:
            # both demos record their model's parameters: the optimizer replay's shapes
            shapes = optimizer.evidence["parameter_shapes"]
            described = [
                p["shape"]
                for layer in run.meta["model"]["layers"]
                for p in layer["params"]
                if p["trainable"]
            ]
            assert sorted(shapes) == sorted(described) and shapes
        loading = {f.id: f for f in findings}.get("input-pipeline")
        if loading is not None and loading.evidence["data_from"] != "thread":
            # the training thread's waits outlasted the loading thread's CPU time (a busy
            # machine holds that thread off its core): the finding is about the waits, and
            # takes no thread apart
            assert "thread_op_from" not in loading.evidence
            assert loading.title.startswith("Waiting for data")
        elif name == "paddle" and loading is not None:
            # the demo's loading thread slices tensors: cheap loading, framework ops of its
            # own. Where the GIL's hand-overs (the cost per training op the step timer timed)
            # would cost the training thread all of that thread's CPU time, the split takes
            # them at that CPU time and says so; a worker saved time in every bench session of
            # this loop, so the finding stays ranked by saving
            from perfkit_core.advice.loader import LOADING_OP_SHARE

            ev = loading.evidence
            assert ev["thread_op_from"] == "training machine"
            assert ev["thread_op_ns"] == run.meta["step_timer"]["thread_op_ns"]
            thread = ev["data_unprofiled_per_step_ns"]
            capped = ev["training_ops_per_step"] * ev["thread_op_ns"] >= thread
            assert ev["handovers_capped"] is capped
            assert loading.within_error is False
            assert ("as much CPU time as the loading thread ran" in loading.estimate) is capped
            if capped:  # the thread pays half of its CPU time, the training thread all of it
                assert ev["loading_per_step_ns"] == pytest.approx(thread * (1 - LOADING_OP_SHARE))
                left = ev["training_cpu_per_step_ns"] - thread
                assert ev["rest_per_step_ns"] == pytest.approx(max(left, 0.0))
    if "paddle" in timed:
        assert (tmp_path / "comparison.html").is_file()
        assert "Difference by Op Family" in (tmp_path / "comparison.txt").read_text()
    if importlib.util.find_spec("jax") is not None:
        assert frameworks["jax"].meta["steps"] == [2, 3, 4]
        assert "matmul (forward)" in (tmp_path / "comparison_torch_jax.txt").read_text()
        assert (tmp_path / "comparison_torch_jax.html").is_file()


def test_report_model_view_numbers(capsys):
    path = shared_trace("resnet_nw0")
    assert main(["report", str(path), "--views", "model", "--format", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["tables"]["model"]["rows"]}
    run = perfkit_core.load(path)
    ev = run.events
    loaders = ev[ev["kind"] == "dataloader"]
    stretched = tb_steps(read_events(path), unlaunched="own_start")
    step = sum(e - s for s, e in stretched) / len(stretched)
    assert rows["step"]["per_step_ns"] == pytest.approx(step)
    assert rows["step"]["steps"] == len(stretched) == 6
    assert rows["data"]["per_step_ns"] == pytest.approx(loaders["dur_ns"].sum() / 6)
    assert rows["data"]["steps"] == len(loaders) == 6
    share = 100 * loaders["dur_ns"].sum() / 6 / step
    assert rows["data"]["step_pct"] == pytest.approx(share)
    assert 30 < share < 50  # single-process DataLoader: a large share of each step
    parts = sum(
        rows[k]["per_step_ns"] for k in ("data", "forward", "backward", "optimizer", "other")
    )
    assert parts == pytest.approx(rows["step"]["per_step_ns"])
