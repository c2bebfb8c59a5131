"""The ``layers`` view: tfprof's MLP read back in torch and Paddle with each adapter's default
handler (parameters per layer and per weight), and the tree's times and FLOPs recomputed from
the model and mfu views of the same runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core.views.layers import NO_LAYER, NO_PARAMS_NOTE, NO_STEPS_NOTE
from tests.mlp_models import (
    EXPECTED_PARAMS,
    HIDDEN1_WEIGHT,
    TOTAL_PARAMS,
    train_in_subprocess,
)

ROOT = Path(__file__).resolve().parents[1]


def _train(framework: str, directory: Path, *options: str) -> Path:
    pytest.importorskip(framework)
    return train_in_subprocess(framework, directory, *options)


@pytest.fixture(scope="module")
def mlp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The MLP trained in each framework (each in a process of its own), recorded lazily."""
    root = tmp_path_factory.mktemp("mlp")
    found: dict[str, Path] = {}

    class Runs(dict):  # type: ignore[type-arg]
        def __missing__(self, framework: str) -> Path:
            found[framework] = _train(framework, root / framework)
            self[framework] = found[framework]
            return found[framework]

    return Runs()


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_mlp_parameters_as_tfprof_counts_them(mlp_runs: dict[str, Path], framework: str) -> None:
    run = perfkit_core.load(mlp_runs[framework])
    tree = run.summary("layers", params=True)
    layers = tree.set_index("name")
    root = tree[tree["depth"] == 1].iloc[0]
    assert root["params_with_children"] == TOTAL_PARAMS
    for name, count in EXPECTED_PARAMS.items():
        assert layers.loc[name, "params_own"] == count
        assert layers.loc[name, "params_with_children"] == count
    # Each weight is listed under its layer, with its shape.
    hidden1 = int(np.flatnonzero(tree["name"].to_numpy() == "hidden1")[0])
    weight = tree.iloc[hidden1 + 1]
    assert weight["name"] == "weight" and weight["params_own"] == HIDDEN1_WEIGHT
    assert sorted(weight["shape"].split("x")) == ["128", "784"]  # torch: 128x784, Paddle: 784x128
    assert weight["params_own_bytes"] == HIDDEN1_WEIGHT * 4
    # The layers' own parameters add up to the model's, recomputed from the saved description.
    meta = json.loads((mlp_runs[framework] / "meta.json").read_text())
    recorded = sum(p["count"] for layer in meta["model"]["layers"] for p in layer["params"])
    assert recorded == TOTAL_PARAMS == tree[tree["level"] <= 1]["params_own"].sum() - 0
    # every weight of the MLP is trained (the optimizer replay takes the trainable ones)
    assert all(p["trainable"] is True for layer in meta["model"]["layers"] for p in layer["params"])


def _assert_adds_up(run: perfkit_core.Run) -> None:
    """The tree's own times plus (no layer) are the model view's forward and backward phases;
    its FLOPs the mfu view's model FLOPs per step; totals roll up."""
    tree = run.summary("layers")
    model = run.summary("model").set_index("name")
    phases = model.loc["forward", "per_step_ns"] + model.loc["backward", "per_step_ns"]
    assert tree["host_own_ns"].sum() == pytest.approx(phases, rel=1e-9)
    if len(tree) > 1:  # some time is in layers
        assert tree.loc[tree["name"] == NO_LAYER, "host_own_ns"].iloc[0] < phases
    mfu = run.summary("mfu").set_index("name")
    assert tree["model_gflops_own"].sum() == pytest.approx(mfu.loc["mean", "model_gflops"], rel=1e-9)
    top = tree[tree["depth"] == 1]
    assert top["host_with_children_ns"].sum() == pytest.approx(phases, rel=1e-9)
    # Each layer's total is its own plus its children's totals.
    for _, row in tree.iterrows():
        if row["name"] == NO_LAYER:
            continue
        kids = tree[(tree["depth"] == row["depth"] + 1) & tree["path"].str.startswith(row["path"] + "/")]
        assert row["host_with_children_ns"] == pytest.approx(
            row["host_own_ns"] + kids["host_with_children_ns"].sum(), rel=1e-9
        )


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_mlp_tree_adds_up_to_phases_and_model_flops(
    mlp_runs: dict[str, Path], framework: str
) -> None:
    run = perfkit_core.load(mlp_runs[framework])
    _assert_adds_up(run)
    tree = run.summary("layers").set_index("name")
    if framework == "torch":  # Paddle's CPU profile records no shapes of its matmuls
        # hidden1: forward 2*64*784*128 FLOPs and its weight gradient as many (no input gradient).
        assert tree.loc["hidden1", "model_gflops_own"] == pytest.approx(2 * 2 * 64 * 784 * 128 / 1e9)


def test_demo_models_tree_adds_up(torch_profile, paddle_profile) -> None:
    torch_run = perfkit_core.load(torch_profile.runs[0])
    _assert_adds_up(torch_run)
    assert (torch_run.summary("layers")["model_gflops_own"] > 0).any()
    paddle_run = perfkit_core.load(paddle_profile.runs[0])
    _assert_adds_up(paddle_run)


def test_a_raw_trace_says_parameters_not_recorded(torch_profile) -> None:
    if torch_profile.trace is None:
        pytest.skip("no native trace kept")
    run = perfkit_core.load(torch_profile.trace)
    tree = run.summary("layers")
    assert tree.attrs["note"].count("parameters not recorded") == 1
    assert NO_PARAMS_NOTE in tree.attrs["note"]
    assert tree["params_own"].isna().all()


def test_options_depth_order_filter_step(mlp_runs: dict[str, Path]) -> None:
    run = perfkit_core.load(mlp_runs["torch"])
    full = run.summary("layers")
    assert full["depth"].max() == 2
    top = run.summary("layers", max_depth=1)
    assert list(top["name"]) == ["MLP", NO_LAYER]
    ordered = run.summary("layers", order_by="params_own")
    assert list(ordered["name"])[1:4] == ["hidden1", "hidden2", "softmax_linear"]
    by_time = run.summary("layers", order_by="host_with_children_ns")
    kids = by_time[by_time["depth"] == 2]["host_with_children_ns"].to_numpy()
    assert (np.diff(kids) <= 0).all()
    only = run.summary("layers", filter="HIDDEN2")
    assert list(only["name"]) == ["MLP", "hidden2", NO_LAYER]
    steps = run.summary("steps")
    numbers = [int(s) for s in run.events["step"][run.events["kind"] == "step"].unique()]
    one = run.summary("layers", step=numbers[0])
    model = run.summary("phases")
    first = model.iloc[0]
    assert one["host_own_ns"].sum() == pytest.approx(first["forward_ns"] + first["backward_ns"])
    assert len(steps) == len(numbers)
    with pytest.raises(ValueError, match="not in the run"):
        run.summary("layers", step=10_000)
    with pytest.raises(ValueError, match="cannot order"):
        run.summary("layers", order_by="nope")



def _layers_holding(run: perfkit_core.Run, op_type: str) -> set[str]:
    """Recomputed from the raw events: the module spans (``nn.Module: Type_k``) that are the
    innermost span around a call of ``op_type`` in a step, by time on its thread."""
    ev = run.events
    name = ev["name"].astype(str)
    spans = ev[(ev["kind"].astype(str) == "user") & name.str.startswith("nn.Module: ")]
    ops = ev[(ev["kind"].astype(str) == "operator") & (name == op_type) & (ev["step"] >= 0)]
    found = set()
    for op in ops.itertuples():
        around = spans[
            (spans["tid"] == op.tid)
            & (spans["start_ns"] <= op.start_ns)
            & (spans["start_ns"] + spans["dur_ns"] >= op.start_ns + op.dur_ns)
        ]
        if len(around):
            found.add(str(around.sort_values("dur_ns").iloc[0]["name"]))
    return found


@pytest.mark.parametrize("op_type", ["aten::relu", "aten::addmm"])
def test_filter_keeps_the_layers_that_ran_an_op_type(
    mlp_runs: dict[str, Path], op_type: str
) -> None:
    run = perfkit_core.load(mlp_runs["torch"])
    spans = _layers_holding(run, op_type)
    described = {
        layer["match"]: layer["name"] or layer["type"] for layer in run.meta["model"]["layers"]
    }
    expected = {described[s] for s in spans}
    assert expected == ({"MLP"} if op_type == "aten::relu" else set(EXPECTED_PARAMS))
    tree = run.summary("layers", filter=f"^{op_type}$")
    shown = set(tree["name"]) - {NO_LAYER}
    assert shown == expected | {"MLP"}  # with the model around them
    # Each layer keeps all its figures: the rows are the unfiltered tree's rows.
    full = run.summary("layers").set_index("name")
    for row in tree.itertuples():
        assert row.host_with_children_ns == full.loc[row.name, "host_with_children_ns"]
    assert "ran an op of a matching type" in tree.attrs["note"]
    # A layer name still matches as before; a type no layer ran leaves only (no layer).
    by_name = run.summary("layers", filter="softmax_linear")
    assert list(by_name["name"]) == ["MLP", "softmax_linear", NO_LAYER]
    assert list(run.summary("layers", filter="^no such op$")["name"]) == [NO_LAYER]


def test_cli_prints_the_tree(mlp_runs: dict[str, Path]) -> None:
    from perfkit_core.cli import main

    run = str(mlp_runs["torch"])
    out = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", run, "--views", "layers",
         "--max-depth", "2", "--order-by", "params", "--no-advice"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    hidden1 = next(line for line in lines if line.lstrip().startswith("hidden1"))
    assert hidden1.startswith("  hidden1")  # indented under the model
    assert "100480/100480" in hidden1
    root = next(line for line in lines if line.startswith("MLP"))
    assert f"/{TOTAL_PARAMS}" in root
    assert main(["report", run, "--views", "layers", "--order-by", "bogus", "--no-advice"]) == 2


def test_html_tree_folds_in_chromium(mlp_runs: dict[str, Path], tmp_path: Path) -> None:
    from test_reports import dump_dom

    from perfkit_core.cli import main

    html = tmp_path / "layers.html"
    args = ["report", str(mlp_runs["torch"]), "--views", "layers", "--params", "--no-advice"]
    assert main([*args, "--format", "html", "-o", str(html)]) == 0
    dom = dump_dom(html, tmp_path)
    # One fold button per layer with rows under it: the model and its three layers' weights.
    assert dom.count('class="fold"') == 4
    assert dom.count('data-level="2"') == 6  # the weights and biases
    assert 'style="display: none;"' not in dom
    # Fold the model: every row under it is hidden, (no layer) stays.
    clicked = tmp_path / "clicked.html"
    clicked.write_text(
        html.read_text().replace(
            "</body>",
            "<script>document.querySelector('button.fold').click();</script></body>",
        )
    )
    folded = dump_dom(clicked, tmp_path)
    assert folded.count('style="display: none;"') == 9
    assert "(no layer)" in folded


def test_gpu_trace_device_time_adds_up_to_the_phases() -> None:
    from conftest import shared_trace

    run = perfkit_core.load(shared_trace("resnet_nw0"))
    tree = run.summary("layers")
    model = run.summary("model").set_index("name")
    gpu = model.loc["forward", "gpu_per_step_ns"] + model.loc["backward", "gpu_per_step_ns"]
    assert gpu > 0
    assert tree["gpu_own_ns"].sum() == pytest.approx(gpu, rel=1e-9)
    _assert_adds_up(run)


def test_json_rows_have_path_and_depth_and_select_keeps_figures(
    mlp_runs: dict[str, Path], tmp_path: Path
) -> None:
    from perfkit_core.cli import main

    out = tmp_path / "layers.json"
    args = ["report", str(mlp_runs["paddle"]), "--views", "layers", "--no-advice"]
    assert main([*args, "--select", "params", "--format", "json", "-o", str(out)]) == 0
    table = json.loads(out.read_text())["tables"]["layers"]
    rows = {r["name"]: r for r in table["rows"]}
    assert rows["hidden1"]["path"] == "mlp[1]/linear[1]" and rows["hidden1"]["depth"] == 2
    assert rows["hidden1"]["params_own"] == EXPECTED_PARAMS["hidden1"]
    assert {c["key"] for c in table["columns"]} == {
        "name", "path", "depth", "params_own", "params_with_children"
    }
    assert main([*args, "--select", "nonsense"]) == 2


def test_memory_allocated_per_layer(torch_profile) -> None:
    run = perfkit_core.load(torch_profile.runs[0])
    tree = run.summary("layers")
    steps = _steps_of(run)
    ev = run.events
    allocs = ev[(ev["kind"] == "memory") & (ev["bytes"] > 0) & (ev["step"] >= 0)]
    in_layers = tree.loc[tree["name"] != NO_LAYER, "allocated_own_bytes"].sum()
    assert in_layers > 0
    # The tree holds the allocations of the forward and backward phases: at most the steps'.
    assert tree["allocated_own_bytes"].sum() <= allocs["bytes"].sum() / steps + 1e-6
    # Forward allocations made inside a layer span count in that layer or a layer inside it.
    from perfkit_core.views.anatomy.structure import structure

    st = structure(run)
    rows = allocs.index.to_numpy()
    forward = [
        r for r in rows.tolist()
        if st.layer_of[ev["parent"].iat[r]] >= 0 and st.kind[ev["parent"].iat[r]] == "operator"
        and "Backward" not in str(st.names[ev["parent"].iat[r]])
    ]
    top = tree[tree["depth"] == 1]
    layered_total = top.loc[top["name"] != NO_LAYER, "allocated_with_children_bytes"].sum()
    assert layered_total == pytest.approx(in_layers)
    assert layered_total * steps >= ev.loc[forward, "bytes"].sum() > 0


def _steps_of(run: perfkit_core.Run) -> int:
    return int(run.events.loc[run.events["kind"] == "step", "step"].nunique())


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_tower_parameters_counted_once(framework: str, tmp_path: Path) -> None:
    """The tower of module lists and a layer called twice: every weight counted once, and the
    layers named by their attributes."""
    pytest.importorskip(framework)
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, '.');"
        "from tests.layer_models import train; print(train(sys.argv[1], Path(sys.argv[2])))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, framework, str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    run = perfkit_core.load(Path(out.stdout.strip().splitlines()[-1]))
    tree = run.summary("layers", params=True)
    layers = tree[tree["shape"].isna()]
    width = 16  # tests.layer_models.WIDTH
    block = width * width + width + 2 * width  # fc, then the layer norm's weight and bias
    expected = (8 * width + width) + 4 * block + 2 * (width * 4 + 4) + (4 * 4 + 4)
    root = layers[layers["depth"] == 1].iloc[0]
    assert root["params_with_children"] == expected
    assert tree.loc[tree["shape"].notna(), "params_own"].sum() == expected
    names = set(layers["name"])
    assert {"stem", "blocks.0", "blocks.3", "heads.1", "fc", "norm", "shared"} <= names
    shared = layers[layers["path"].isin(["tower[1]/linear[3]", "tower[1]/linear[4]"])]
    assert sorted(shared["params_own"]) == [0, 20]
    # torch knows the module of each call; Paddle's names assume one call per layer, so the
    # second call of the shared layer stays unnamed.
    expected_names = ["shared", "shared"] if framework == "torch" else ["shared", "Linear 4"]
    assert list(shared["name"]) == expected_names


def test_a_run_without_steps_shows_the_model_and_says_why_no_times(tmp_path: Path) -> None:
    """A torch run profiled without a schedule (no prof.step()): no figure per step can be
    made, so the tree is the recorded model's layers with their parameters and a note; with no
    model either, the report says so in one line instead of leaving the section out."""
    from perfkit_core.cli import main
    from perfkit_core.views.anatomy.structure import structure

    run_dir = _train("torch", tmp_path / "run", "nosteps")
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == []
    tree = run.summary("layers", params=True)
    assert NO_STEPS_NOTE in tree.attrs["note"]
    assert NO_LAYER not in set(tree["name"])  # (no layer)'s time is per step too
    layers = tree.set_index("name")
    assert layers.loc["MLP", "params_with_children"] == TOTAL_PARAMS
    for name, count in EXPECTED_PARAMS.items():
        assert layers.loc[name, "params_own"] == count
    assert (tree["name"] == "weight").sum() == 3
    assert tree.loc[tree["name"] == "weight", "params_own"].max() == HIDDEN1_WEIGHT
    for column in ("calls_per_step", "host_own_ns", "host_with_children_ns", "model_gflops_own"):
        assert tree[column].isna().all(), column
    # The rows are each module's first call: the structure's key of its first span.
    st = structure(run)
    first: dict[str, str] = {}
    for row in sorted(st.layer_key, key=lambda r: int(st.start[r])):
        first.setdefault(str(st.names[row]), st.layer_key[row])
    layer_rows = tree[tree["shape"].isna()]
    assert set(layer_rows["path"]) == set(first.values())
    # Without the model either: nothing to show, and the report says why.
    meta = json.loads((run_dir / "meta.json").read_text())
    del meta["model"]
    (run_dir / "meta.json").write_text(json.dumps(meta))
    bare = perfkit_core.load(run_dir).summary("layers")
    assert bare.empty and bare.attrs["note"].startswith(NO_STEPS_NOTE)
    out = tmp_path / "report.txt"
    args = ["report", str(run_dir), "--views", "layers", "--no-advice"]
    assert main([*args, "-o", str(out)]) == 0
    text = " ".join(out.read_text().split())
    assert "Layers" in text and "no steps were recorded" in text and "no model either" in text


def test_a_malformed_trainable_flag_is_an_error_naming_the_run(
    mlp_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A parameter's ``trainable`` must be true or false: anything else makes the model
    description malformed, a one-line error naming the run's folder (exit 2), not a parameter
    silently trained or not."""
    import shutil

    from perfkit_core.cli import main

    run = tmp_path / "run"
    shutil.copytree(mlp_runs["torch"], run)
    meta = json.loads((run / "meta.json").read_text())
    meta["model"]["layers"][-1]["params"][0]["trainable"] = "yes"
    (run / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["report", str(run), "--views", "layers", "--no-advice"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(run) in err  # the run's folder, as the user named it
    assert "model description is malformed" in err and "'yes'" in err
