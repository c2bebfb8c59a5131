"""The Paddle adapter on real paddle CPU runs, checked against Paddle's own statistics."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import perfkit_core
from perfkit_core import TraceError
from perfkit_core.cli import main

paddle = pytest.importorskip("paddle")


def test_handler_saves_one_run_per_span(paddle_profile):
    assert len(paddle_profile.runs) == 1
    run = perfkit_core.load(paddle_profile.runs[0])
    assert run.framework == "paddle"
    assert run.meta["framework_version"] == paddle.__version__
    assert run.meta["steps"] == [2, 3, 4, 5]
    assert "MainThread" in run.meta["threads"].values()


def test_operator_counts_and_totals_match_paddles_tree(paddle_profile):
    ops = perfkit_core.load(paddle_profile.runs[0]).summary("operator").set_index("name")
    tree = paddle_profile.tree_ops
    assert set(ops.index) == set(tree)
    for name, (count, total_ns) in tree.items():
        assert ops.loc[name, "calls"] == count, name
        assert ops.loc[name, "cpu_total_ns"] == pytest.approx(total_ns, rel=0.01), name


def test_operator_view_matches_paddle_statistics(paddle_profile):
    ops = perfkit_core.load(paddle_profile.runs[0]).summary("operator").set_index("name")
    items = paddle_profile.statistic.event_summary.items
    assert set(items) == set(ops.index)
    for name, item in items.items():
        assert ops.loc[name, "calls"] == item.call
        assert ops.loc[name, "cpu_total_ns"] == pytest.approx(item.cpu_time, rel=0.01)
        assert ops.loc[name, "cpu_max_ns"] == item.max_cpu_time
        assert ops.loc[name, "cpu_min_ns"] == item.min_cpu_time


def test_model_spans_view_matches_paddle_statistics(paddle_profile):
    model = perfkit_core.load(paddle_profile.runs[0]).summary("model_spans").set_index("name")
    theirs = paddle_profile.statistic.event_summary.model_perspective_items
    mapping = {
        "ProfileStep": "step",
        "Dataloader": "dataloader",
        "Forward": "forward",
        "Backward": "backward",
        "Optimization": "optimization",
    }
    for their_name, ours in mapping.items():
        item = theirs[their_name]
        assert model.loc[ours, "calls"] == item.call, ours
        assert model.loc[ours, "cpu_total_ns"] == pytest.approx(item.cpu_time, rel=0.01), ours
        assert model.loc[ours, "cpu_max_ns"] == item.max_cpu_time
        assert model.loc[ours, "cpu_min_ns"] == item.min_cpu_time
    step = theirs["ProfileStep"].cpu_time
    phases = sum(theirs[k].cpu_time for k in ("Dataloader", "Forward", "Backward", "Optimization"))
    assert model.loc["others", "cpu_total_ns"] == pytest.approx(step - phases, rel=0.01)
    assert model["gpu_total_ns"].isna().all()  # a CPU run: not measured, not zero


def test_model_view_against_paddles_model_summary(paddle_profile):
    """The report's phases split each step so that they add up to it. Against Paddle's Model
    Summary of the same profile: the steps, the data wait and the optimizer step are Paddle's
    figures; backward runs from the first to the last backward event, which holds Paddle's
    Backward span; forward is the rest of the step before it, so it holds Paddle's Forward and
    the loss Paddle counts in Others."""
    run = perfkit_core.load(paddle_profile.runs[0])
    model = run.summary("model").set_index("name")
    theirs = paddle_profile.statistic.event_summary.model_perspective_items
    n = int(model.loc["step", "steps"])
    assert n == theirs["ProfileStep"].call
    total = {name: model.loc[name, "per_step_ns"] * n for name in model.index}
    assert total["step"] == pytest.approx(theirs["ProfileStep"].cpu_time, rel=0.01)
    assert total["data"] == pytest.approx(theirs["Dataloader"].cpu_time, rel=0.01)
    assert total["optimizer"] == pytest.approx(theirs["Optimization"].cpu_time, rel=0.01)
    assert total["backward"] >= theirs["Backward"].cpu_time * 0.99
    assert total["forward"] >= theirs["Forward"].cpu_time * 0.99
    assert (model["steps"] == n).all()  # one of each phase per step, not one per span


def _printed_rows(text: str, title: str) -> dict[str, tuple[str, list[float]]]:
    """Rows of one table of Paddle's printed summary: name -> (calls, CPU figures)."""
    block = text.split(title, 1)[1].split("Note:", 1)[0].split("\n\n\n", 1)[0]
    rows = {}
    for line in block.splitlines():
        m = re.match(r"^\s*(\S.*?)\s{2,}(\d+|-)\s{2,}([-0-9./ ]+?)\s{2,}", line)
        if m:
            figures = [
                float(x) if x.strip() not in ("-",) else np.nan for x in m.group(3).split("/")
            ]
            rows[m.group(1).strip()] = (m.group(2), figures)
    return rows


def test_model_and_user_views_agree_with_printed_summary(paddle_profile):
    run = perfkit_core.load(paddle_profile.runs[0])
    printed = _printed_rows(paddle_profile.summary_text, "Model Summary")
    model = run.summary("model_spans").set_index("name")
    names = {
        "ProfileStep": "step",
        "Dataloader": "dataloader",
        "Forward": "forward",
        "Backward": "backward",
        "Optimization": "optimization",
        "Others": "others",
    }
    assert set(printed) == set(names)
    for their_name, ours in names.items():
        calls, figures = printed[their_name]
        if calls != "-":
            assert int(calls) == model.loc[ours, "calls"]
        total_us, ratio = figures[0], figures[-1]
        assert model.loc[ours, "cpu_total_ns"] / 1000 == pytest.approx(total_us, rel=0.01, abs=0.01)
        assert model.loc[ours, "cpu_ratio_pct"] == pytest.approx(ratio, abs=0.01)
    user_printed = _printed_rows(paddle_profile.summary_text, "UserDefined Summary")
    user = run.summary("user").set_index("name")
    assert set(user_printed) == set(user.index) == {"forward_and_loss", "backward"}
    for name, (calls, figures) in user_printed.items():
        assert int(calls) == user.loc[name, "calls"]
        assert user.loc[name, "cpu_total_ns"] / 1000 == pytest.approx(
            figures[0], rel=0.01, abs=0.01
        )


def test_nesting_matches_paddles_tree(paddle_profile):
    run = perfkit_core.load(paddle_profile.runs[0])
    ev = run.events
    host = ev[(ev["stream"] < 0) & (ev["kind"] != "memory")]
    names = ev["name"].astype(str).to_numpy()
    mismatched = 0
    for row in host.itertuples():
        key = (row.tid, row.start_ns, row.start_ns + row.dur_ns, str(row.name))
        expected = paddle_profile.tree_parents.get(key, "missing")
        got = names[row.parent] if row.parent >= 0 else None
        mismatched += expected != got
    assert mismatched == 0


def test_operator_inner_stages_hang_under_their_operator(paddle_profile):
    ev = perfkit_core.load(paddle_profile.runs[0]).events
    inner = ev[ev["kind"] == "operator_inner"]
    assert len(inner) > 0
    parents = inner["parent"].to_numpy()
    parent_kind = ev["kind"].to_numpy()[parents]
    under_op = parent_kind == "operator"
    # Paddle itself records a few stages straight under a span (e.g. `full` inside `backward`).
    assert under_op.mean() > 0.5
    names = ev["name"].astype(str).to_numpy()
    for child, parent in zip(
        inner["name"].astype(str)[under_op], names[parents[under_op]], strict=True
    ):
        assert child.split(" ")[0].rstrip("_") in parent or parent.startswith("Global_"), (
            child,
            parent,
        )


def test_json_export_loads_to_the_same_tables(paddle_profile):
    direct = perfkit_core.load(paddle_profile.runs[0])
    from_json = perfkit_core.load(paddle_profile.json_export)
    assert from_json.meta["accounting"]["rows"] == len(direct.events)
    for view in ("operator", "user", "model_spans"):
        a = direct.summary(view).set_index("name").sort_index()
        b = from_json.summary(view).set_index("name").sort_index()
        assert (a["calls"] == b["calls"]).all(), view
        np.testing.assert_allclose(
            a["cpu_total_ns"], b["cpu_total_ns"], rtol=1e-6, atol=1, err_msg=view
        )
    acc = from_json.meta["accounting"]
    assert (
        acc["rows"] + acc["flow_events"] + acc["metadata_events"] + acc["empty_events"]
        == acc["events_in_file"]
    )


def _sorted_rows(events):
    """The event table as plain values in a fixed row order (the walk's order may differ)."""
    plain = events.astype({c: object for c in events.columns if events[c].dtype == "category"})
    keys = ["start_ns", "dur_ns", "tid", "name", "kind"]
    return plain.sort_values(keys, kind="stable").reset_index(drop=True)


def test_pb_export_is_the_run_from_the_tree_row_for_row(paddle_profile):
    """perfkit's own .pb reader rebuilds Paddle's result tree: the run read from the protobuf
    export equals, in every column and row, the run converted from the live tree in the
    callback (operators, memory events, the dygraph kernel-launch spans that Paddle 3.3's own
    .pb reader rejects), and so does its metadata. A CPU profile holds no device work and
    Paddle 3.3 records no shapes there: the next test covers those fields."""
    direct = perfkit_core.load(paddle_profile.runs[0])
    from_pb = perfkit_core.load(paddle_profile.pb_export)
    assert len(from_pb.events) == len(direct.events) > 100
    a, b = _sorted_rows(direct.events), _sorted_rows(from_pb.events)
    assert list(a.columns) == list(b.columns)
    for column in a.columns:
        assert a[column].equals(b[column]), column
    kinds = set(b["kind"])
    assert {"operator", "memory", "step", "operator_inner"} <= kinds
    for key in ("threads", "devices"):
        assert from_pb.meta[key] == direct.meta[key], key
    for key in ("cpu_utilization", "span_index", "profiler_result_version"):
        assert from_pb.meta["extra"][key] == direct.meta["extra"][key], key
    assert from_pb.meta["source"] == str(paddle_profile.pb_export)


def _gpu_shaped_pb(path):
    """A protobuf export with what a CUDA profile holds and a CPU one does not: a runtime call
    with the kernel, memcpy and an empty (non-kernel) device node it launched, an operator's
    shapes, dtypes and call stack, a GPU memory event and a device's properties."""
    from perfkit_paddle.pb_schema import node_trees_class

    m = node_trees_class()(version="1.0.2", span_indx=0)
    m.extra_info.add(key="7", value="MainThread")
    m.device_property.add(
        id=0, name="A100", total_global_memory=40 << 30, compute_major=8, compute_minor=0,
        sm_count=108,
    )  # fmt: skip
    tree = m.thread_trees.add(thread_id=7)

    def host(i, parent, name, kind, start, end):
        node = tree.host_nodes.add(id=i, parentid=parent)
        node.host_trace_event.SetInParent()
        e = node.host_trace_event
        e.name, e.type, e.start_ns, e.end_ns, e.process_id, e.thread_id = (
            name, kind, start, end, 1, 7,
        )  # fmt: skip
        return node

    host(0, -1, "Thread 7", 0, 0, 0)
    host(1, 0, "ProfileStep#3", 2, 1_000, 90_000)
    op = host(2, 1, "matmul", 0, 2_000, 50_000)
    sup = op.op_supplement_nodes.add().op_supplement_event
    sup.input_shapes.key.extend(["X", "Y"])
    sup.input_shapes.shape_vecs.add().shapes.add().size.extend([16, 32])
    sup.input_shapes.shape_vecs.add().shapes.add().size.extend([32, 8])
    sup.dtypes.key.extend(["X", "Y"])
    sup.dtypes.dtype_vecs.add().dtype.append("float32")
    sup.dtypes.dtype_vecs.add().dtype.append("float32")
    sup.callstack = "train.py:10"
    rt = op.runtime_nodes.add()
    r = rt.runtime_trace_event
    r.name, r.start_ns, r.end_ns, r.process_id, r.thread_id, r.correlation_id = (
        "cudaLaunchKernel", 3_000, 4_000, 1, 7, 42,
    )  # fmt: skip
    k = rt.device_nodes.add().device_event
    k.name, k.type, k.start_ns, k.end_ns, k.device_id, k.stream_id, k.correlation_id = (
        "gemm_kernel", 4, 10_000, 30_000, 0, 7, 42,
    )  # fmt: skip
    info = k.kernel_info
    info.grid_x, info.grid_y, info.grid_z, info.block_x, info.block_y, info.block_z = (
        2, 3, 1, 128, 1, 1,
    )  # fmt: skip
    info.dynamic_shared_memory, info.static_shared_memory = 1024, 512
    info.registers_per_thread, info.occupancy = 64, 0.5
    c = rt.device_nodes.add().device_event
    c.name, c.type, c.start_ns, c.end_ns, c.device_id, c.stream_id, c.correlation_id = (
        "Memcpy HtoD", 5, 31_000, 33_000, 0, 7, 42,
    )  # fmt: skip
    c.memcpy_info.num_bytes = 4096
    rt.device_nodes.add()  # a device node Paddle's writer leaves empty
    mem = op.mem_nodes.add().mem_event
    mem.timestamp_ns, mem.type, mem.process_id, mem.thread_id = 2_500, 0, 1, 7
    mem.increase_bytes, mem.place, mem.addr = 2048, "Place(gpu:0)", 0x7F00_0000_1000
    mem.current_allocated, mem.current_reserved = 8192, 16384
    path.write_bytes(m.SerializeToString())
    return path


def test_pb_reader_reads_device_work_shapes_and_memory(tmp_path):
    from perfkit_core.errors import TraceWarning

    path = _gpu_shaped_pb(tmp_path / "gpu.paddle_trace.pb")
    with pytest.warns(TraceWarning, match="skipped 1 events"):
        run = perfkit_core.load(path)
    ev = run.events.set_index(run.events["name"].astype(str))
    assert run.meta["accounting"]["skipped"] == {
        "device events Paddle's writer left empty (not a kernel, memcpy or memset)": 1
    }
    assert run.meta["devices"] == [
        {
            "type": "gpu",
            "index": 0,
            "name": "A100",
            "total_memory_bytes": 40 << 30,
            "compute_capability": "8.0",
            "sm_count": 108,
        }
    ]
    assert run.meta["threads"] == {"7": "MainThread"}
    kernel, copy, launch = ev.loc["gemm_kernel"], ev.loc["Memcpy HtoD"], ev.loc["cudaLaunchKernel"]
    assert (kernel["kind"], kernel["grid"], kernel["block"]) == ("kernel", "2,3,1", "128,1,1")
    assert (kernel["shared_memory"], kernel["registers"], kernel["occupancy_pct"]) == (
        1536.0, 64.0, 50.0,
    )  # fmt: skip
    assert (kernel["start_ns"], kernel["dur_ns"], kernel["stream"]) == (10_000, 20_000, 7)
    assert (copy["kind"], copy["bytes"]) == ("memcpy", 4096.0)
    # The runtime call and the device work it launched share one correlation.
    assert launch["kind"] == "runtime"
    assert kernel["correlation"] == copy["correlation"] == launch["correlation"] == 42
    op = ev.loc["matmul"]
    assert op["input_shapes"] == '{"X":[[16,32]],"Y":[[32,8]]}'
    assert op["input_dtypes"] == '{"X":["float32"],"Y":["float32"]}'
    assert op["stack"] == "train.py:10"
    memory = run.events[run.events["kind"] == "memory"].iloc[0]
    assert (memory["device_type"], memory["device_index"], memory["bytes"]) == ("gpu", 0, 2048.0)
    assert (memory["allocated_bytes"], memory["reserved_bytes"]) == (8192.0, 16384.0)
    assert memory["address"] == 0x7F00_0000_1000
    assert ev.loc["ProfileStep#3", "step"] == 3


def test_pb_reader_refuses_an_inconsistent_tree(tmp_path):
    from perfkit_paddle.pb_schema import node_trees_class

    path = _gpu_shaped_pb(tmp_path / "gpu.paddle_trace.pb")
    m = node_trees_class()()
    m.ParseFromString(path.read_bytes())
    m.thread_trees[0].host_nodes[2].parentid = 5  # not an earlier node
    bad = tmp_path / "loop.paddle_trace.pb"
    bad.write_bytes(m.SerializeToString())
    with pytest.raises(TraceError, match=r"loop\.paddle_trace\.pb: .*host node 2 names parent 5"):
        perfkit_core.load(bad)


def test_pb_reader_needs_no_paddle(paddle_profile):
    """A .paddle_trace.pb is read with protobuf alone: in a process where paddle cannot be
    imported, the export loads to the same number of events."""
    code = (
        "import sys; sys.modules['paddle'] = None\n"
        "import perfkit_core\n"
        f"run = perfkit_core.load({str(paddle_profile.pb_export)!r})\n"
        "assert 'paddle' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print(len(run.events))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == len(perfkit_core.load(paddle_profile.runs[0]).events)


def test_pb_export_cut_short_is_one_line_naming_the_file(paddle_profile, tmp_path):
    from perfkit_paddle.pb import export_is_whole

    data = paddle_profile.pb_export.read_bytes()
    assert export_is_whole(paddle_profile.pb_export)
    for keep in (1, 7, len(data) // 3, len(data) - 1):
        cut = tmp_path / f"cut{keep}.paddle_trace.pb"
        cut.write_bytes(data[:keep])
        assert not export_is_whole(cut), keep
        with pytest.raises(TraceError) as info:
            perfkit_core.load(cut)
        assert str(cut) in str(info.value) and "\n" not in str(info.value)


def test_handler_chains_with_export_chrome_tracing(tmp_path):
    from paddle.profiler import export_chrome_tracing

    from tests.paddle_profiles import record

    prof = record(
        tmp_path / "runs",
        steps=2,
        blocks=1,
        chain=[export_chrome_tracing(str(tmp_path / "native"))],
    )
    exported = list((tmp_path / "native").glob("*.json"))
    assert len(prof.runs) == 1 and len(exported) == 1
    assert (
        perfkit_core.load(exported[0]).summary("operator")["calls"].sum()
        == perfkit_core.load(prof.runs[0]).summary("operator")["calls"].sum()
    )


def test_handler_never_raises_and_keeps_paddles_export(tmp_path, monkeypatch):
    import perfkit_paddle.result as result_mod
    from tests.paddle_profiles import record

    def broken(*args, **kwargs):
        raise RuntimeError("conversion exploded")

    monkeypatch.setattr(result_mod, "run_from_result", broken)
    from perfkit_paddle.demo import train_mlp

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs, handler = train_mlp(tmp_path, steps=2, blocks=1, width=16, background=False)
    assert runs == []
    ((kept, reason),) = handler.failures
    assert kept.name == "trace.paddle_trace.pb" and kept.is_file()
    assert "conversion exploded" in reason
    ours = [w for w in caught if "perfkit" in str(w.message)]
    assert len(ours) == 1 and str(kept) in str(ours[0].message)
    monkeypatch.undo()
    assert perfkit_core.load(kept).framework == "paddle"  # nothing recorded is lost
    del record


def test_default_handler_has_the_profile_on_disk_when_the_callback_returns(tmp_path):
    """Paddle's export is written in the callback (its writer holds the interpreter lock, so a
    thread would stall training anyway): when the handler returns, its run folder holds the
    whole export or the saved run, so a process killed right after keeps the profile."""
    from perfkit_paddle.demo import train_mlp
    from perfkit_paddle.pb import export_is_whole

    seen: list[tuple[str, bool, bool]] = []

    def after_perfkit(prof):
        (folder,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
        trace = folder / "trace.paddle_trace.pb"
        seen.append((folder.name, export_is_whole(trace), (folder / "meta.json").is_file()))

    runs, handler = train_mlp(tmp_path / "runs", steps=2, blocks=1, width=16, chain=[after_perfkit])
    assert handler.failures == [] and len(runs) == 1
    ((name, exported, saved),) = seen
    assert name == runs[0].name and (exported or saved)
    assert not (runs[0] / "trace.paddle_trace.pb").exists()  # removed once converted


def test_background_run_equals_the_run_from_the_tree(tmp_path):
    """The default handler converts Paddle's export in the helper process; the same loop with
    ``background=False`` converts the result tree in the callback. The same operators and calls
    on the training thread, the same rank and span metadata."""
    from perfkit_paddle.demo import train_mlp

    bg_runs, bg = train_mlp(tmp_path / "bg", steps=3, blocks=2, width=16)
    sync_runs, sync = train_mlp(tmp_path / "sync", steps=3, blocks=2, width=16, background=False)
    assert bg.failures == sync.failures == []
    a, b = perfkit_core.load(bg_runs[0]), perfkit_core.load(sync_runs[0])
    assert not (bg_runs[0] / "trace.paddle_trace.pb").exists()  # removed once saved
    assert not (sync_runs[0] / "trace.paddle_trace.pb").exists()
    for key in ("framework", "rank", "world_size", "ranks"):
        assert a.meta[key] == b.meta[key], key
    for key in ("worker_name", "profiler_result_version", "pid"):
        assert a.meta["extra"][key] == b.meta["extra"][key], key
    assert isinstance(a.meta["extra"]["span_index"], int)  # Paddle numbers spans per process
    assert a.meta["extra"]["profiler_result_version"] is not None
    # The training thread's work is the same in both loops; how much of the DataLoader's
    # prefetching (slice, stack on its own thread) falls in the window is not.
    calls_a, calls_b = _training_thread_calls(a), _training_thread_calls(b)
    assert len(calls_a) > 10 and calls_a.equals(calls_b.loc[calls_a.index])
    assert set(calls_a.index) == set(calls_b.index)
    ops_a = a.summary("operator").set_index("name")
    assert (ops_a.loc[calls_a.index, "calls"] >= calls_a).all()
    assert len(a.meta["steps"]) == len(b.meta["steps"]) == 3


def _training_thread_calls(run):
    """Operator calls per name on the thread that ran the steps, from the raw events."""
    ev = run.events
    step_threads = set(ev.loc[ev["kind"] == "step", "tid"])
    ops = ev[(ev["kind"] == "operator") & ev["tid"].isin(step_threads)]
    return ops["name"].astype(str).value_counts().sort_index()


def test_background_handler_keeps_the_launchers_rank(tmp_path, monkeypatch):
    from perfkit_paddle.demo import train_mlp

    monkeypatch.setenv("PADDLE_TRAINER_ID", "3")
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "4")
    runs, handler = train_mlp(tmp_path, steps=2, blocks=1, width=16, keep_trace=True)
    assert handler.failures == []
    run = perfkit_core.load(runs[0])
    assert run.meta["rank"] == 3 and run.meta["world_size"] == 4 and run.meta["ranks"] == [3]
    assert (run.events["rank"] == 3).all()
    assert (runs[0] / "trace.paddle_trace.pb").is_file()  # keep_trace


BAD = {
    "truncated.paddle_trace.json": (
        b'{"schemaVersion": "1.0.2", "traceEvents": [ {"name": "ProfileStep#1[1 ms]", "ph": "X"',
        "truncated",
    ),
    "foreign.paddle_trace.json": (
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::add",
                        "ts": 1,
                        "dur": 1,
                        "pid": 1,
                        "tid": 1,
                    }
                ]
            }
        ).encode(),
        "not a Paddle trace",
    ),
    "nosteps.paddle_trace.json": (
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "Operator",
                        "name": "add dygraph[1.000 us]",
                        "ts": 1,
                        "dur": 1,
                        "pid": 1,
                        "tid": "1(C++)",
                    },
                    {},
                ]
            }
        ).encode(),
        "no ProfileStep",
    ),
    "empty.paddle_trace.json": (b"", "empty"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_paddle_files(tmp_path, name, capsys):
    data, reason = BAD[name]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(TraceError, match=re.escape(reason)) as info:
        perfkit_core.load(path)
    assert str(path) in str(info.value)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err


def test_every_tracer_event_type_is_mapped():
    from paddle.profiler import TracerEventType

    from perfkit_paddle.kinds import TYPE_KINDS, classify

    for member in TracerEventType.__members__:
        assert member in TYPE_KINDS, member
    assert classify("SomeFutureType", "x") == "other"
    assert classify("Kernel", "ncclKernel_AllReduce") == "communication"
    assert classify("Free", "[memory]") == "memory"


def test_pb_reader_numbers_event_types_as_paddle_does():
    """The protobuf export stores event types as numbers: perfkit's table of their names is
    Paddle's own enum, number for number."""
    from paddle.base.core import TracerMemEventType
    from paddle.profiler import TracerEventType

    from perfkit_paddle.pb_schema import EVENT_TYPES, MEMORY_EVENT_TYPES

    assert {name: int(m.value) for name, m in TracerEventType.__members__.items()} == {
        name: number for number, name in enumerate(EVENT_TYPES)
    }
    assert {name: int(m.value) for name, m in TracerMemEventType.__members__.items()} == {
        name: number for number, name in enumerate(MEMORY_EVENT_TYPES)
    }


def test_annotate_records_a_paddle_span(tmp_path):
    import paddle.profiler as profiler

    from perfkit_paddle.handler import on_trace_ready

    handler = on_trace_ready(tmp_path)
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(0, 2), on_trace_ready=handler
    )
    prof.start()
    for _ in range(2):
        with perfkit_core.annotate("shared_block"):
            paddle.randn([4, 4]).sum()
        prof.step()
    prof.stop()
    user = perfkit_core.load(handler.runs[0]).summary("user").set_index("name")
    assert user.loc["shared_block", "calls"] == 2


def test_overview_by_category_matches_paddles_time_ranges(paddle_profile):
    run = perfkit_core.load(paddle_profile.runs[0])
    view = run.summary("overview", by="category").set_index("name")
    theirs = paddle_profile.cpu_range_sums
    steps = len(run.meta["steps"])
    assert view.loc["step", "cpu_per_step_ns"] * steps == pytest.approx(
        theirs["ProfileStep"], rel=0.01
    )
    checked = 0
    for name in view.index:
        if name == "step" or name not in theirs:
            continue
        # Paddle merges the whole profile; perfkit clips to the steps, which hold every event here.
        total = view.loc[name, "cpu_per_step_ns"] * steps
        assert total == pytest.approx(theirs[name], rel=0.01), name
        calls = view.loc[name, "calls_per_step"] * steps
        assert calls == pytest.approx(paddle_profile.call_times[name]), name
        checked += 1
    assert checked >= 5


def test_op_detail_matches_paddles_operator_inners(paddle_profile):
    table = perfkit_core.load(paddle_profile.runs[0]).summary("operator", op_detail=True)
    detail = table[table["level"] == 1]
    items = paddle_profile.statistic.event_summary.items
    expected = {
        (op, name): (inner.call, inner.cpu_time)
        for op, item in items.items()
        for name, inner in item.operator_inners.items()
    }
    got = {(r.detail_of, r.name): (r.calls, r.cpu_total_ns) for r in detail.itertuples()}
    assert set(got) == set(expected)
    for key, (calls, total) in expected.items():
        assert got[key][0] == calls, key
        assert got[key][1] == pytest.approx(total, rel=0.01), key
    # Each detail row sits right under its operator.
    ops = table["name"].where(table["level"] == 0).ffill()
    assert (ops[table["level"] == 1] == table.loc[table["level"] == 1, "detail_of"]).all()


def test_json_export_keeps_nanosecond_starts(paddle_profile):
    run_dir = paddle_profile.runs[0]
    direct = perfkit_core.load(run_dir).events
    from_json = perfkit_core.load(paddle_profile.json_export).events
    host = (direct["stream"] < 0) & (direct["kind"] != "memory")
    a = direct.loc[host, ["start_ns", "dur_ns"]].sort_values(["start_ns", "dur_ns"]).to_numpy()
    host_json = (from_json["stream"] < 0) & (from_json["kind"] != "memory")
    b = (
        from_json.loc[host_json, ["start_ns", "dur_ns"]]
        .sort_values(["start_ns", "dur_ns"])
        .to_numpy()
    )
    # Durations are exact; starts are recovered to within a few ns (the profiler's own start
    # is only known as the latest lower bound over all events).
    np.testing.assert_array_equal(a[:, 1], b[:, 1])
    assert np.abs(a[:, 0] - b[:, 0]).max() <= 20
    # Memory events carry whole microseconds only, exactly.
    mem = from_json.loc[from_json["kind"] == "memory", "start_ns"].to_numpy()
    assert (mem % 1000 == 0).all()


def test_folder_of_paddle_exports_is_numbered_by_file_name(paddle_profile, tmp_path):
    src = paddle_profile.json_export
    for i in range(2):
        (tmp_path / f"worker{i}.paddle_trace.json").write_bytes(src.read_bytes())
    run = perfkit_core.load(tmp_path)
    assert run.meta["ranks"] == [0, 1]
    per_rank = run.events.groupby("rank").size().tolist()
    assert per_rank[0] == per_rank[1] == len(perfkit_core.load(src).events)


def test_device_view_reports_cpu_utilization(paddle_profile):
    run = perfkit_core.load(paddle_profile.runs[0])
    device = run.summary("device").set_index("name")
    recorded = run.meta["extra"]["cpu_utilization"]
    # Paddle's CPU(System): all cores' busy time over busy and idle time, a percentage of
    # all cores; its CPU(Process): process CPU time over elapsed time, 100% per core.
    system = device.loc["CPU (system, recorded)", "system_pct"]
    assert system == pytest.approx(100 * recorded["system_cpu_utilization"])
    process = device.loc["CPU (process, recorded)", "cores_busy"]
    if recorded["process_cpu_utilization"] == 0:
        assert math.isnan(process)  # Paddle's 0.00 on CPU is not a measurement
        assert "not measured" in run.summary("device").attrs["note"]
    else:
        assert process == pytest.approx(recorded["process_cpu_utilization"])
    busy = device.loc["CPU (host threads busy)", "cores_busy"]
    assert 0.5 < busy <= 2.0  # the training thread is busy most of each step
    # No CPU row claims a share of the step: a sum over threads or cores is not one.
    cpu_rows = device[device.index.str.startswith("CPU")]
    assert cpu_rows["utilization_pct"].isna().all()


LOADER_SAMPLES = """
import sys
import numpy as np
import paddle

paddle.set_device("cpu")
rng = np.random.default_rng(0)
inputs = rng.standard_normal((256, 8)).astype("float32")
labels = rng.integers(0, 4, (256,)).astype("int64")
if sys.argv[1] == "tensor":
    dataset = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
else:
    class Rows(paddle.io.Dataset):
        def __len__(self):
            return len(inputs)

        def __getitem__(self, i):
            return inputs[i], labels[i]

    dataset = Rows()
model = paddle.nn.Linear(8, 4)
optimizer = paddle.optimizer.Adam(parameters=model.parameters())


def train(x, y):
    loss = paddle.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()


for _ in range(3):  # training runs before the workers start, as in a loop being remedied
    train(paddle.to_tensor(inputs[:32]), paddle.to_tensor(labels[:32]))
loader = paddle.io.DataLoader(dataset, batch_size=32, num_workers=1)
batches = 0
for x, y in loader:
    assert isinstance(x, paddle.Tensor)
    train(x, y)
    batches += 1
print("batches", batches, flush=True)
"""


def _loader_samples(samples: str) -> subprocess.CompletedProcess[str]:
    """``LOADER_SAMPLES`` run in a fresh interpreter with ``samples`` (numpy or tensor)."""
    return subprocess.run(
        [sys.executable, "-c", LOADER_SAMPLES, samples],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_loader_remedy_trains_with_numpy_samples():
    """The input-pipeline remedy tells Paddle users to have the Dataset return numpy arrays,
    not paddle Tensors: with a worker, after training has run, a Dataset of numpy rows trains
    every batch, and the loop still gets Tensors."""
    from perfkit_paddle.remedies import remedy

    text = remedy(type("F", (), {"rule": "input-pipeline", "evidence": {}})())
    assert "return numpy arrays, not paddle Tensors" in text
    numpy_rows = _loader_samples("numpy")
    assert numpy_rows.returncode == 0, numpy_rows.stderr[-2000:]
    assert "batches 8" in numpy_rows.stdout


def test_the_loader_remedys_warning_about_tensor_samples_holds():
    """Why the remedy warns: Paddle's workers can crash on samples that are paddle Tensors
    once training has run (a segmentation fault in the worker). The crash is intermittent: 5
    runs of 6 crashed on a quiet 2-core machine, and none of three beside a CI run. So the
    tensor loop gets three tries; a crash must be the segmentation fault, and three loops that
    trained skip the test, saying so (a Paddle release that fixes the crash skips it every
    time, and the warning should then go)."""
    for _ in range(3):
        tensors = _loader_samples("tensor")
        if tensors.returncode != 0:
            break
    if tensors.returncode == 0:
        assert "batches 8" in tensors.stdout
        pytest.skip("the tensor samples trained in three tries: the crash is intermittent")
    assert "batches" not in tensors.stdout
    assert "segmentation fault" in (tensors.stdout + tensors.stderr).lower()
