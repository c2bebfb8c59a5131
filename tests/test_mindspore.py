"""The MindSpore adapter (perfkit-mindspore): reading MindSpore's profiler folders (CPU, GPU and
Ascend layouts) with no MindSpore installed, agreement with MindSpore's own per-type and
per-operator tables, steps, layers and phases from scopes, MindInsight's operator views, the
comparison with torch layer by layer, and the handler and Callback on real MindSpore runs.

The fixtures in tests/data/mindspore are real MindSpore CPU profiles (generate.py there says how
they were made): the tests that read them need no MindSpore. Tests that profile need mindspore
(with numpy<2; tox's ``mindspore`` environment) and skip without it.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core import TraceError
from perfkit_core.cli import main
from perfkit_core.plugins import framework_hook

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "mindspore"
FIXTURES = ("pynative_mlp", "graph_mlp", "graph_cnn")
HAS_MINDSPORE = importlib.util.find_spec("mindspore") is not None
#: Set in tox's ``mindspore`` environment, where a missing MindSpore fails the tests that need
#: it instead of skipping them.
REQUIRE = os.environ.get("PERFKIT_REQUIRE_MINDSPORE") == "1"
if REQUIRE and not HAS_MINDSPORE:
    raise RuntimeError("PERFKIT_REQUIRE_MINDSPORE=1 but mindspore is not installed")
needs_mindspore = pytest.mark.skipif(not HAS_MINDSPORE, reason="mindspore is not installed")


def profile_folder(fixture: str | Path) -> Path:
    """The ``*_ascend_ms`` folder of a fixture (or of a folder a handler wrote)."""
    base = DATA / fixture if isinstance(fixture, str) else fixture
    (folder,) = base.glob("*_ascend_ms")
    return folder


def mindspore_types(folder: Path) -> dict[str, tuple[int, float]]:
    """MindSpore's own per-type table: type -> (calls, total ns)."""
    (path,) = (folder / "FRAMEWORK").glob("cpu_op_type_info_*.csv")
    with open(path, newline="") as fh:
        return {
            row["op_type"]: (int(row["type_occurrences"]), float(row["total_compute_time"]) * 1e6)
            for row in csv.DictReader(fh)
        }


def mindspore_details(folder: Path) -> dict[str, tuple[int, float]]:
    """MindSpore's own per-operator table: full name -> (calls, total ns)."""
    (path,) = (folder / "FRAMEWORK").glob("cpu_op_detail_info_*.csv")
    with open(path, newline="") as fh:
        return {
            row["full_op_name"]: (int(row["op_occurrences"]), float(row["op_total_time(ms)"]) * 1e6)
            for row in csv.DictReader(fh)
        }


def assert_rows_equal(table, expected: dict[str, tuple[int, float]]) -> None:
    """The operator table has the same rows, the same calls and totals within 0.5% (MindSpore
    writes its totals in ms with six significant digits)."""
    got = {r.name: (int(r.calls), float(r.cpu_total_ns)) for r in table.itertuples()}
    assert set(got) == set(expected)
    for name, (calls, total) in expected.items():
        assert got[name][0] == calls, name
        assert got[name][1] == pytest.approx(total, rel=5e-3, abs=1e3), name


@pytest.fixture(scope="module", params=FIXTURES)
def fixture_run(request):
    return request.param, perfkit_core.load(DATA / request.param)


# --- reading MindSpore's folders ------------------------------------------------------------


def test_operator_rows_equal_mindspore_type_table(fixture_run):
    name, run = fixture_run
    assert run.framework == "mindspore"
    assert_rows_equal(run.summary("operator"), mindspore_types(profile_folder(name)))


def test_group_by_name_equals_mindspore_detail_table(fixture_run):
    name, run = fixture_run
    table = run.summary("operator", group_by="name")
    assert set(table["side"]) == {"host"}
    assert_rows_equal(table.drop(columns="side"), mindspore_details(profile_folder(name)))


def test_a_folder_from_mindspores_own_handler_reads_without_mindspore():
    """MindSpore's tensorboard_trace_handler folder, read where importing mindspore fails."""
    code = (
        "import sys; sys.modules['mindspore'] = None\n"
        "import perfkit_core\n"
        f"run = perfkit_core.load({str(DATA / 'pynative_mlp')!r})\n"
        "print(run.meta['steps'], len(run.summary('operator')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    steps, rows = out.stdout.split("]")
    assert steps == "[1, 2, 3" and int(rows) == len(mindspore_types(profile_folder("pynative_mlp")))


def test_steps_of_the_schedule_from_the_repeating_operators():
    """MindSpore's own handler records no steps: the three active steps of the schedule are
    found from the operators, each holding one step's calls."""
    run = perfkit_core.load(DATA / "pynative_mlp")
    assert run.meta["steps"] == [1, 2, 3]
    assert run.meta["extra"]["steps_from"] == "the repeating sequence of operators"
    ops = run.events[run.events["kind"] == "operator"]
    assert (ops["step"] >= 0).all()
    per_step = ops.groupby("step", observed=True)["full_name"].apply(lambda s: sorted(map(str, s)))
    assert per_step.iloc[0] == per_step.iloc[1] == per_step.iloc[2]
    table = run.summary("operator").set_index("name")
    types = mindspore_types(profile_folder("pynative_mlp"))
    for name, (calls, _) in types.items():
        assert table.loc[name, "calls_per_step"] == calls / 3


def test_steps_recorded_by_the_callback_and_the_step_marker():
    cnn = perfkit_core.load(DATA / "graph_cnn")
    assert cnn.meta["steps"] == [3, 4, 5]
    assert cnn.meta["extra"]["steps_from"] == "ProfilerCallback"
    mlp = perfkit_core.load(DATA / "graph_mlp")
    assert mlp.meta["steps"] == [2, 3, 4]
    assert mlp.meta["extra"]["steps_from"] == "perfkit_mindspore.step"
    for run in (cnn, mlp):
        ev = run.events
        ops = ev[ev["kind"] == "operator"]
        assert (ops["step"] >= 0).all()  # every operator inside its step's span
        steps = ev[ev["kind"] == "step"]
        for step in steps.itertuples():
            mine = ops[ops["step"] == step.step]
            assert mine["start_ns"].min() >= step.start_ns
            assert (mine["start_ns"] + mine["dur_ns"]).max() <= step.start_ns + step.dur_ns
    # The marker's steps also hold the annotate() spans of the training loop.
    user = mlp.summary("user").set_index("name")
    assert user.loc["train_step", "calls"] == 3


def test_layers_phases_and_gradients_from_scopes():
    from perfkit_core.views.anatomy.structure import structure

    run = perfkit_core.load(DATA / "graph_cnn")
    st = structure(run)
    assert set(st.layer_label.values()) == {
        "SequentialCell",
        "SequentialCell / Conv2d",
        "SequentialCell / ReLU",
        "SequentialCell / MaxPool2d",
        "SequentialCell / Dense",
        "SoftmaxCrossEntropyWithLogits",
    }
    # Keys use torch's names, so that the same model lines up across frameworks.
    assert "sequential[1]/linear[1]" in set(st.layer_key.values())
    ev = run.events
    full = ev["full_name"].astype(str)
    backward = (ev["kind"] == "operator") & full.str.startswith("Gradients/")
    linked = ev.loc[backward & (ev["forward_op"] >= 0)]
    assert len(linked) == backward.sum()  # every Grad_X op points at its forward X
    for row in linked.itertuples():
        forward = ev.iloc[row.forward_op]
        scope = str(row.full_name).split("/Grad_")[0].removeprefix("Gradients/")
        assert str(forward.full_name).startswith(scope + "/")
        assert forward.step == row.step
    model = run.summary("model").set_index("name")
    for phase in ("forward", "backward", "optimizer"):
        assert model.loc[phase, "per_step_ns"] > 0, phase
    family = run.summary("family").set_index("name")
    assert {"conv (forward)", "conv (backward)", "optimizer"} <= set(family.index)


def test_input_shapes_from_mindspores_framework_file():
    run = perfkit_core.load(DATA / "graph_cnn")
    table = run.summary("operator", group_by_input_shape=True)
    conv = table[table["name"] == "Conv2D"]
    assert conv["input_shapes"].tolist() == ["[[16, 3, 16, 16], [8, 3, 3, 3]]"]


def test_the_timestamp_files_give_the_same_rows_as_the_timeline(tmp_path):
    folder = shutil.copytree(profile_folder("graph_cnn"), tmp_path / "cnn_1_2_ascend_ms")
    (folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").unlink()
    run = perfkit_core.load(folder)
    assert run.meta["extra"]["read"] == "FRAMEWORK/cpu_op_execute_timestamp_0.txt"
    full = perfkit_core.load(DATA / "graph_cnn")
    a = run.summary("operator").set_index("name")
    b = full.summary("operator").set_index("name")
    assert (a["calls"] == b.loc[a.index, "calls"]).all()
    # The timestamps file holds exact ns; the timeline rounds to the ns of its us strings.
    assert np.allclose(a["cpu_total_ns"], b.loc[a.index, "cpu_total_ns"], atol=5 * a["calls"])


def test_the_timeline_file_alone_loads_with_its_folder():
    trace = profile_folder("graph_cnn") / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    run = perfkit_core.load(trace)
    assert run.meta["steps"] == [3, 4, 5]
    assert run.meta["source"] == str(profile_folder("graph_cnn"))


def test_filter_matches_types_and_full_names():
    run = perfkit_core.load(DATA / "graph_cnn")
    conv = run.summary("operator", filter="conv")
    assert set(conv["name"]) == {"Conv2D", "Conv2DBackpropFilter"}
    grads = run.summary("operator", group_by="name", filter="^Gradients/")
    assert len(grads) and all(n.startswith("Gradients/") for n in grads["name"])
    # The share stays one of all operator time.
    everything = run.summary("operator")
    assert conv["op_time_pct"].sum() == pytest.approx(
        everything.set_index("name").loc[sorted(conv["name"]), "op_time_pct"].sum()
    )
    assert everything["op_time_pct"].sum() == pytest.approx(100.0)
    with pytest.raises(ValueError, match="not a regular expression"):
        run.summary("operator", filter="(")


def test_the_command_line_groups_and_filters(capsys):
    folder = str(DATA / "graph_cnn")
    argv = ["report", folder, "--views", "operator", "--group-by", "name", "--filter", "Conv"]
    assert main([*argv, "--format", "json", "--no-advice"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]["operator"]["rows"]
    details = mindspore_details(profile_folder("graph_cnn"))
    assert {r["name"] for r in rows} == {n for n in details if "Conv" in n}
    assert {r["side"] for r in rows} == {"host"}
    assert main(["report", folder, "--filter", "("]) == 2


def test_the_report_charts_the_top_operators_by_average_time():
    from perfkit_core.report.model import build_report

    run = perfkit_core.load(DATA / "graph_mlp")
    report = build_report(run, ["operator"], advice=False)
    table = report.table("operator_average")
    avg = [r[[c.key for c in table.columns].index("cpu_avg_ns")] for r in table.rows]
    assert avg == sorted(avg, reverse=True) and 2 <= len(avg) <= 20
    (chart,) = [c for c in report.charts if c.table == "operator_average"]
    assert chart.series == ["cpu_avg_ns"] and chart.kind == "hbar"
    labels = {c.key: c.label for c in report.table("operator").columns}
    assert labels["op_time_pct"] == "% of operator time"


def test_perfkit_info_names_the_adapter():
    infos = perfkit_core.get_plugin_manager().hook.perfkit_framework_info()
    (entry,) = [i for i in infos if i and i["framework"] == "mindspore"]
    assert entry["installed"] is HAS_MINDSPORE


def test_remedies_in_mindspores_terms():
    from perfkit_core.advice import Finding

    hook = framework_hook("perfkit_remedy", "mindspore")

    def remedy(rule: str) -> str:
        finding = Finding(id=rule, title="", severity="info", saving_ns=0.0, rule=rule)
        return hook(finding=finding, framework="mindspore")

    assert "mindspore.jit" in remedy("python-overhead") and "GRAPH_MODE" in remedy(
        "python-overhead"
    )
    assert "num_parallel_workers" in remedy("input-pipeline")
    assert "dataset_sink_mode" in remedy("input-pipeline")
    assert "AdamWeightDecay" in remedy("optimizer")


def test_scopes_say_type_layers_and_phase():
    from perfkit_mindspore.scopes import parse

    s = parse("Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0")
    assert (s.type, s.phase, s.cells) == (
        "MatMul",
        "forward",
        (("_backbone", "SequentialCell"), ("0", "Dense")),
    )
    g = parse(
        "Gradients/Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/Grad_MatMul/MatMul-op1"
    )
    assert (g.type, g.phase, g.grad_of, g.cells) == ("MatMul", "backward", "MatMul", s.cells)
    o = parse("Default/optimizer-Momentum/ApplyMomentum-op2")
    assert (o.type, o.phase, o.optimizer, o.cells) == ("ApplyMomentum", "optimizer", "Momentum", ())
    assert parse("Default/Adam-op3").phase == "optimizer"
    assert (parse("Pow").type, parse("Pow").phase) == ("Pow", "")
    loss = parse("Default/network-WithLossCell/_loss_fn-SoftmaxCrossEntropyWithLogits/X-op0")
    assert loss.cells == (("_loss_fn", "SoftmaxCrossEntropyWithLogits"),)


def test_step_count_from_repeats():
    from perfkit_mindspore.steps import infer_step_count

    assert infer_step_count(list("abc") * 3, None) == 3
    assert infer_step_count(list("abc") * 3, 3) == 3
    assert infer_step_count(list("abc") * 3 + ["a"], None) is None
    assert infer_step_count(list("abcd") * 2, 4) is None
    # A step that repeats inside itself is split too finely without a count to go by.
    assert infer_step_count(list("abab") * 3, None) == 6
    assert infer_step_count(list("abab") * 3, 3) == 3


# --- the GPU profiler's layout (files built to MindSpore's documented layout) ----------------

GPU_OPS = {
    "Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0": [
        (1_000_000, 40.0),
        (2_000_000, 42.0),
    ],
    "Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/BiasAdd-op0": [
        (1_050_000, 10.0),
        (2_050_000, 10.0),
    ],
    "Gradients/Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/Grad_MatMul/MatMul-op1": [
        (1_100_000, 60.0),
        (2_100_000, 58.0),
    ],
    "Default/optimizer-Momentum/ApplyMomentum-op0": [(1_200_000, 5.0), (2_200_000, 5.0)],
}
GPU_KERNELS = [  # (kernel, stream, start ns, duration us, launching op)
    (
        "volta_sgemm_64x64_nn",
        7,
        1_005_000,
        30.0,
        "Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0",
    ),
    (
        "volta_sgemm_64x64_nn",
        7,
        2_005_000,
        31.0,
        "Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0",
    ),
    (
        "volta_sgemm_128x64_tn",
        7,
        1_105_000,
        50.0,
        "Gradients/Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/Grad_MatMul/MatMul-op1",
    ),
    (
        "volta_sgemm_128x64_tn",
        7,
        2_105_000,
        48.0,
        "Gradients/Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/Grad_MatMul/MatMul-op1",
    ),
]


def write_gpu_profile(folder: Path, *, type_calls: dict[str, int] | None = None) -> Path:
    """A GPU profiler folder, ``profiler/`` under ``folder``, written to the layout of
    MindSpore's GPU data saver (gpu_data_saver.cc, data_saver.h)."""
    out = folder / "profiler"
    out.mkdir(parents=True)
    lines = [
        f"{name};Ops;" + " ".join(f"{s},{d}" for s, d in calls) + " "
        for name, calls in GPU_OPS.items()
    ]
    (out / "gpu_op_execute_timestamp_0.txt").write_text("\n".join(lines) + "\n")
    (out / "activity_execute_timestamp_0.txt").write_text(
        "".join(f"{k};{stream};{start};{dur}\n" for k, stream, start, dur, _ in GPU_KERNELS)
    )
    activity = [
        "name,type,op_full_name,stream_id,block_dim,grid_dim,occurrences,total_duration(us),avg_duration(us),max_duration(us),min_duration(us)"
    ]
    for kernel in dict.fromkeys(k for k, *_ in GPU_KERNELS):
        rows = [g for g in GPU_KERNELS if g[0] == kernel]
        total = sum(g[3] for g in rows)
        activity.append(
            f'"{kernel}",kernel,{rows[0][4]},7,"128,1,1","4,1,1",{len(rows)},{total},{total / len(rows)},0,0'
        )
    (out / "gpu_activity_data_0.csv").write_text("\n".join(activity) + "\n")
    types: dict[str, list[float]] = {}
    for name, calls in GPU_OPS.items():
        kind = name.rsplit("/", 1)[1].split("-op")[0]
        types.setdefault(kind, []).extend(d for _, d in calls)
    rows = ["op_type,type_occurrences,total_time(us),total_proportion,avg_time(us)"]
    for kind, durs in types.items():
        n = (type_calls or {}).get(kind, len(durs))
        rows.append(f"{kind},{n},{sum(durs)},0.25,{sum(durs) / len(durs)}")
    (out / "gpu_op_type_info_0.csv").write_text("\n".join(rows) + "\n")
    # The asynchronous-launch step trace: iter start, fp start, bp end, iter end (ns) per step.
    (out / "step_trace_profiling_0.txt").write_text(
        "a,990000 b,1000000 c,1160000 d,1300000\na,1990000 b,2000000 c,2160000 d,2300000\n"
    )
    (out / "start_time_0.txt").write_text(
        "host_monotonic_raw_time(ns): 500\ngpu_start_time(ns): 1500\n"
    )
    (out / "cpu_op_execute_timestamp_0.txt").write_text(
        "Default/GetNext-op0;HostCpuOps;980000,0.005,0 1980000,0.005,0 \n"
    )
    return folder


def test_the_gpu_profilers_folder(tmp_path):
    run = perfkit_core.load(write_gpu_profile(tmp_path / "data"))
    assert run.meta["steps"] == [1, 2]
    assert run.meta["devices"][0]["type"] == "gpu"
    table = run.summary("operator").set_index("name")
    assert table.loc["MatMul", "calls"] == 4
    assert table.loc["MatMul", "cpu_total_ns"] == (40 + 42 + 60 + 58) * 1000
    # Device time of each operator is that of the kernels it launched.
    assert table.loc["MatMul", "gpu_total_ns"] == (30 + 31 + 50 + 48) * 1000
    # Host operators are put on the GPU's clock (start_time: +1000 ns).
    get_next = run.events[run.events["name"] == "GetNext"]
    assert get_next["start_ns"].tolist() == [981_000, 1_981_000]
    activity = run.summary("kernel", by_operator=True)
    got = {(r.name, r.operator): (r.calls, r.gpu_total_ns) for r in activity.itertuples()}
    assert got == {
        ("volta_sgemm_64x64_nn", GPU_KERNELS[0][4]): (2, 61_000),
        ("volta_sgemm_128x64_tn", GPU_KERNELS[2][4]): (2, 98_000),
    }
    by_name = run.summary("operator", group_by="name").set_index("name")
    assert by_name.loc[GPU_KERNELS[0][4], "side"] == "device"
    assert by_name.loc["Default/GetNext-op0", "side"] == "host"


def test_a_gpu_type_table_that_disagrees_is_refused(tmp_path):
    folder = write_gpu_profile(tmp_path / "data", type_calls={"MatMul": 5})
    with pytest.raises(TraceError, match=r"gpu_op_type_info_0\.csv.*disagrees"):
        perfkit_core.load(folder)


# --- the Ascend layout (files built to the layout of MindSpore's Ascend output) -------------


def write_ascend_profile(folder: Path, *, statistic_count: int = 2) -> Path:
    """A ``*_ascend_ms`` folder of an Ascend run: trace_view.json with the MindSpore, CANN and
    Ascend Hardware layers, ``async_npu`` flows from operators to tasks, ProfilerStep spans;
    kernel_details.csv and op_statistic.csv."""
    profile = folder / "host_42_20260101000000000_ascend_ms"
    out = profile / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    matmul = "Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0"
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "MindSpore"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CANN"}},
        {
            "ph": "M",
            "name": "process_name",
            "pid": 3,
            "tid": 0,
            "args": {"name": "Ascend Hardware"},
        },
        {
            "ph": "M",
            "name": "process_name",
            "pid": 4,
            "tid": 0,
            "args": {"name": "Overlap Analysis"},
        },
    ]
    tasks = []
    for i, base in enumerate((1_000_000.0, 2_000_000.0), start=1):
        events.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 9,
                "ts": f"{base:.3f}",
                "dur": "900.000",
            }
        )
        events.append(
            {
                "ph": "X",
                "name": matmul,
                "pid": 1,
                "tid": 9,
                "ts": f"{base + 10:.3f}",
                "dur": "20.000",
            }
        )
        events.append(
            {
                "ph": "X",
                "name": "AscendCL@aclnnMatmul",
                "pid": 2,
                "tid": 9,
                "ts": f"{base + 12:.3f}",
                "dur": "5.000",
            }
        )
        events.append(
            {
                "ph": "X",
                "name": matmul,
                "pid": 3,
                "tid": 5,
                "ts": f"{base + 40:.3f}",
                "dur": "100.500",
                "args": {"Task Type": "AI_CORE"},
            }
        )
        events.append(
            {
                "ph": "X",
                "name": "Computing",
                "pid": 4,
                "tid": 0,
                "ts": f"{base + 40:.3f}",
                "dur": "100.500",
            }
        )
        events.append(
            {
                "ph": "s",
                "cat": "async_npu",
                "name": "mindspore_to_npu",
                "id": str(i),
                "pid": 1,
                "tid": 9,
                "ts": f"{base + 10:.3f}",
            }
        )
        events.append(
            {
                "ph": "f",
                "cat": "async_npu",
                "name": "mindspore_to_npu",
                "id": str(i),
                "pid": 3,
                "tid": 5,
                "ts": f"{base + 40:.3f}",
                "bp": "e",
            }
        )
        events.append(
            {
                "ph": "C",
                "name": "AI Core Freq",
                "pid": 5,
                "tid": 0,
                "ts": f"{base:.3f}",
                "args": {"MHz": 1800},
            }
        )
        tasks.append(f'{matmul},MatMul,AI_CORE,"{base + 40:.3f}\t",100.5,0,24,5,{i}')
    (out / "trace_view.json").write_text(json.dumps(events))
    (out / "kernel_details.csv").write_text(
        "Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Num,Stream ID,Step ID\n"
        + "\n".join(tasks)
        + "\n"
    )
    (out / "op_statistic.csv").write_text(
        "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        f"MatMul,AI_CORE,{statistic_count},201,100.5,100.5,100.5,100\n"
    )
    return profile


def test_the_ascend_layout(tmp_path):
    with pytest.warns(perfkit_core.errors.TraceWarning, match="2 counter events"):
        run = perfkit_core.load(write_ascend_profile(tmp_path))
    assert run.meta["steps"] == [1, 2]
    assert run.meta["host"] == "host"
    ev = run.events
    tasks = ev[ev["stream"] >= 0]
    assert (tasks["device_type"] == "npu").all() and len(tasks) == 2
    table = run.summary("operator").set_index("name")
    assert table.loc["MatMul", "calls"] == 2
    assert table.loc["MatMul", "gpu_total_ns"] == 201_000  # the tasks each launch started
    assert run.meta["accounting"]["skipped"] == {"counter events": 2}
    assert (ev.loc[ev["name"] == "Computing", "kind"] == "profiler").all()


def test_an_ascend_statistic_that_disagrees_is_refused(tmp_path):
    with pytest.raises(TraceError, match=r"op_statistic\.csv.*disagrees"):
        perfkit_core.load(write_ascend_profile(tmp_path, statistic_count=3))


# --- comparison with torch -------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["graph_mlp", "graph_cnn"])
def test_torch_and_mindspore_line_up_layer_by_layer(fixture, tmp_path):
    pytest.importorskip("torch")
    sys.path.insert(0, str(REPO / "tests"))
    from mindspore_twins import torch_cnn, torch_mlp

    from perfkit_core.views.anatomy.structure import structure

    twin = torch_mlp if fixture == "graph_mlp" else torch_cnn
    torch_run = perfkit_core.load(twin(tmp_path))
    ms_run = perfkit_core.load(DATA / fixture)
    torch_keys = set(structure(torch_run).layer_key.values())
    ms_keys = set(structure(ms_run).layer_key.values())
    # Every layer MindSpore ran is on torch's row of the same layer (MindSpore's graph compiler
    # leaves a Flatten no operator of its own, so torch may have a layer more).
    assert ms_keys and ms_keys <= torch_keys, ms_keys - torch_keys
    for labels, runs in (
        (["torch", "mindspore"], (torch_run, ms_run)),
        (["mindspore", "torch"], (ms_run, torch_run)),
    ):
        comparison = perfkit_core.compare(*runs, labels=labels)
        layers = comparison.summary("layers")
        rows = layers[
            ~layers["name"].str.startswith("(") & ~layers["name"].isin(["step", "unattributed"])
        ]
        both = rows.dropna(subset=labels)
        assert len(both) >= len(ms_keys) - 1  # the loss layer may run no op of its own in torch
        sentence = comparison.verdict().sentence()
        assert "mindspore" in sentence and "torch" in sentence


# --- profiling with MindSpore ------------------------------------------------------------------


def _pynative_loop(prof, steps: int, *, mark: bool) -> None:
    import mindspore as ms
    from mindspore import nn

    import perfkit_mindspore

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    net = nn.SequentialCell(nn.Dense(32, 32), nn.ReLU(), nn.Dense(32, 10))
    optimizer = nn.Adam(net.trainable_params(), 1e-3)
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
    x = ms.Tensor(np.ones((8, 32), np.float32))
    y = ms.Tensor(np.zeros((8, 10), np.float32))
    for _ in range(steps):
        with perfkit_mindspore.annotate("step_body"):
            _, grads = grad_fn(x, y)
            optimizer(grads)
        if mark:
            perfkit_mindspore.step(prof)
        else:
            prof.step()


@needs_mindspore
@pytest.mark.parametrize("mark", [False, True])
def test_the_handler_saves_a_pynative_mlp(tmp_path, mark):
    import mindspore as ms
    from mindspore.profiler import ProfilerActivity

    import perfkit_mindspore

    handler = perfkit_mindspore.on_trace_ready(tmp_path, worker_name="w", background=False)
    with ms.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=ms.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=handler,
    ) as prof:
        _pynative_loop(prof, 6, mark=mark)
    (run_dir,) = handler.runs
    assert not handler.failures
    assert run_dir.name == "w.step4"
    (folder,) = handler.profiles
    assert folder.parent == tmp_path and (folder / "FRAMEWORK").is_dir()  # MindSpore's own kept
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == [2, 3, 4]  # the schedule's active steps
    assert_rows_equal(run.summary("operator"), mindspore_types(folder))
    assert run.summary("user").set_index("name").loc["step_body", "calls"] == 3
    assert perfkit_core.load(folder).meta["steps"] == [2, 3, 4]  # the folder alone, later


@needs_mindspore
def test_the_callback_saves_a_graph_mode_cnn(tmp_path):
    import mindspore as ms
    import mindspore.dataset as ds
    from mindspore import nn
    from mindspore.train import Model

    import perfkit_mindspore

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    net = nn.SequentialCell(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Dense(4 * 8 * 8, 10))
    model = Model(
        net,
        nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
        nn.Momentum(net.trainable_params(), 0.01, 0.9),
    )
    rng = np.random.default_rng(0)
    data = [
        (
            rng.standard_normal((4, 3, 8, 8), dtype=np.float32),
            rng.integers(0, 10, (4,), dtype=np.int32),
        )
        for _ in range(6)
    ]
    callback = perfkit_mindspore.ProfilerCallback(
        2, 4, tmp_path, worker_name="cnn", background=False
    )
    model.train(
        1,
        ds.GeneratorDataset(data, ["x", "y"], shuffle=False),
        callbacks=[callback],
        dataset_sink_mode=False,
    )
    (run_dir,) = callback.runs
    assert not callback.failures and run_dir.name == "cnn.step4"
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == [2, 3, 4]
    (folder,) = callback.handler.profiles
    assert_rows_equal(run.summary("operator"), mindspore_types(folder))
    assert "SequentialCell / Conv2d" in set(
        __import__("perfkit_core.views.anatomy.structure", fromlist=["structure"])
        .structure(run)
        .layer_label.values()
    )


@needs_mindspore
def test_the_handler_never_raises_and_keeps_mindspores_folder(tmp_path, monkeypatch):
    import mindspore as ms
    from mindspore.profiler import ProfilerActivity

    import perfkit_mindspore
    from perfkit_mindspore import capture

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(capture, "claim_run_dir", refuse)
    handler = perfkit_mindspore.on_trace_ready(tmp_path, background=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ms.profiler.profile(
            activities=[ProfilerActivity.CPU],
            schedule=ms.profiler.schedule(wait=0, warmup=0, active=2, repeat=1),
            on_trace_ready=handler,
        ) as prof:
            _pynative_loop(prof, 3, mark=True)
    assert handler.runs == []
    ((kept, reason),) = handler.failures
    assert "disk full" in reason and kept.is_dir() and kept.name.endswith("_ascend_ms")
    assert any("perfkit: could not save" in str(w.message) for w in caught)
    assert perfkit_core.load(kept).meta["steps"]  # nothing lost: the folder still reads


# --- the model: cells and their parameters for the layers view ---------------------------------


@needs_mindspore
def test_the_callback_records_the_mlps_parameters_as_tfprof_counts_them(tmp_path):
    from perfkit_core.views.anatomy.structure import structure
    from tests.mlp_models import EXPECTED_PARAMS, HIDDEN1_WEIGHT, TOTAL_PARAMS, train

    run_dir = train("mindspore", tmp_path)  # Model.train with ProfilerCallback: no extra call
    run = perfkit_core.load(run_dir)
    tree = run.summary("layers", params=True)
    layers = tree.set_index("name")
    assert layers.loc["MLP", "params_with_children"] == TOTAL_PARAMS
    for name, count in EXPECTED_PARAMS.items():
        assert layers.loc[name, "params_own"] == count
        assert layers.loc[name, "params_with_children"] == count
        assert layers.loc[name, "calls_per_step"] == 1
    hidden1 = int(np.flatnonzero(tree["name"].to_numpy() == "hidden1")[0])
    weight = tree.iloc[hidden1 + 1]
    assert weight["name"] == "weight" and weight["params_own"] == HIDDEN1_WEIGHT
    assert weight["shape"] == "128x784" and weight["dtype"] == "float32"  # MindSpore's (out, in)
    assert weight["params_own_bytes"] == HIDDEN1_WEIGHT * 4
    # Recomputed from the saved record: the layers' own parameters are the model's, and each
    # described cell is a layer the run recorded (its key is one of the trace's layer keys).
    meta = json.loads((run_dir / "meta.json").read_text())
    recorded = meta["model"]["layers"]
    assert sum(p["count"] for layer in recorded for p in layer["params"]) == TOTAL_PARAMS
    keys = set(structure(run).layer_key.values())
    assert {layer["match"] for layer in recorded} <= keys
    assert "parameters not recorded" not in tree.attrs["note"]


@needs_mindspore
def test_describe_model_names_cells_in_lists_and_the_handler_records_it(tmp_path):
    """A ``CellList`` is a layer (its members' scopes hold it); a frozen parameter is not
    counted; the handler's ``model=`` records the description and the tree reads it."""
    import mindspore as ms
    from mindspore import nn
    from mindspore.profiler import ProfilerActivity

    import perfkit_mindspore
    from perfkit_core.views.anatomy.structure import structure

    class Blocks(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.CellList([nn.Dense(8, 8), nn.Dense(8, 8)])
            self.head = nn.Dense(8, 2)
            self.scale = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), requires_grad=False)

        def construct(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x) * self.scale

    net = Blocks()
    described = {d["match"]: d for d in perfkit_mindspore.describe_model(net)["layers"]}
    assert [d["name"] for d in described.values()] == ["", "blocks", "blocks.0", "blocks.1", "head"]
    assert list(described) == [
        "blocks[1]",
        "blocks[1]/celllist[1]",
        "blocks[1]/celllist[1]/linear[1]",
        "blocks[1]/celllist[1]/linear[2]",
        "blocks[1]/linear[1]",
    ]
    assert described["blocks[1]"]["params"] == []  # ``scale`` is not trainable
    assert sum(p["count"] for d in described.values() for p in d["params"]) == 162

    # The handler's ``model=``: a graph-mode training cell profiled under ``profile``.
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    train_net = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.SGD(net.trainable_params()))
    handler = perfkit_mindspore.on_trace_ready(tmp_path, model=net, background=False)
    x = ms.Tensor(np.ones((4, 8), np.float32))
    y = ms.Tensor(np.zeros((4,), np.int32))
    with ms.profiler.profile(
        activities=[ProfilerActivity.CPU],
        schedule=ms.profiler.schedule(wait=0, warmup=1, active=2, repeat=1),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(3):
            train_net(x, y)
            perfkit_mindspore.step(prof)
    (run_dir,) = handler.runs
    run = perfkit_core.load(run_dir)
    tree = run.summary("layers").set_index("name")
    assert tree.loc["blocks.1", "params_own"] == 72 and tree.loc["head", "params_own"] == 18
    assert tree.loc["blocks", "params_with_children"] == 144
    assert tree.loc["Blocks", "params_with_children"] == 162
    assert set(described) <= set(structure(run).layer_key.values())


def test_a_table_with_a_stray_carriage_return_fails_with_one_line(tmp_path):
    """A carriage return inside a field (found by the mutation test) is a one-line error naming
    the file, not a csv.Error; carriage-return line ends read as line ends."""
    from perfkit_mindspore.tables import read_csv

    table = tmp_path / "cpu_op_type_info_0.csv"
    table.write_bytes(b"op_type,total_time\r\nMatMul,1.5\r\n")
    assert read_csv(table, ("op_type",)) == [{"op_type": "MatMul", "total_time": "1.5"}]
    table.write_bytes(b"op_type,total_time\nMat\rMul,1.5\n")
    with pytest.raises(TraceError, match=r"cpu_op_type_info_0\.csv: line 2 has 1 fields"):
        read_csv(table, ("op_type",))


@needs_mindspore
def test_the_demo_compares_mindspore_with_torch_over_steady_steps(tmp_path):
    """The demo profiles MindSpore after its graph compile and times its steps without the
    profiler, as torch's: the verdict against torch agrees with the two runs' medians."""
    pytest.importorskip("torch")
    from perfkit_core.comparison import compare
    from perfkit_core.comparison.overhead import step_timer_times
    from perfkit_mindspore import plugin as ms_plugin
    from perfkit_torch import plugin as torch_plugin

    (ms_dir,) = ms_plugin.perfkit_demo(directory=tmp_path, steps=10)
    (torch_dir,) = torch_plugin.perfkit_demo(directory=tmp_path, steps=10)
    ms_run, torch_run = perfkit_core.load(ms_dir), perfkit_core.load(torch_dir)
    timed = ms_run.meta["step_timer"]
    assert len(timed["unprofiled_ns"]) >= 90 and len(timed["profiled_ns"]) >= 9
    assert not timed.get("unknown_ns")  # the schedule told the timer which steps it recorded
    # no compile step among the profiled ones
    assert ms_run.meta["steps"][0] > 100
    verdict = compare(torch_run, ms_run, labels=["torch", "mindspore"]).verdict()
    assert verdict.unprofiled is not None  # both runs' steps timed without the profiler
    medians = float(np.median(step_timer_times(ms_run)[1])) / float(
        np.median(step_timer_times(torch_run)[1])
    )
    est = verdict.headline
    if medians < 1 / 1.5:
        assert est.direction == "faster", (medians, verdict.sentence())
    elif medians > 1.5:
        assert est.direction == "slower", (medians, verdict.sentence())
    # the headline is the ratio of the mean steps without the profiler, the leading warm-up
    # the verdict names left out: recomputed from the step times each run saved (in between
    # the medians decide nothing: a busy machine's few long steps move a mean, not a median)
    kept = [
        np.asarray(step_timer_times(run)[1], dtype=float)[warm:]
        for run, warm in zip((torch_run, ms_run), verdict.unprofiled_warmup, strict=True)
    ]
    assert est.ratio == pytest.approx(kept[1].mean() / kept[0].mean())
    assert est.low <= est.ratio <= est.high
