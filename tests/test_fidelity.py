"""Fidelity: perfkit's figures side by side with the native tools' and the peer analyzers'
definitions, on the real traces in ../shared/traces and on small synthetic traces written in the
layout each writer uses (ROCm, MTIA, gloo, torchdata, Paddle's result tree).

Each test recomputes a figure the way the peer defines it (from the raw JSON, from torch's own
``key_averages``, from Paddle's tree) and checks that perfkit agrees.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import TRACES

pytest.importorskip("perfkit_torch")


def write_trace(path: Path, events: list[dict[str, Any]], **fields: Any) -> Path:
    """Write a Kineto chrome trace holding ``events`` (and top-level ``fields``) at ``path``."""
    trace = {"schemaVersion": 1, "traceEvents": events, **fields}
    path.write_text(json.dumps(trace))
    return path


def peer_traces(*words: str) -> list[Path]:
    """Real traces under ../shared/traces whose file name holds one of ``words`` (the ROCm and
    MTIA traces that peers publish, where present); skips the test when there is none."""
    if not TRACES.is_dir():
        pytest.skip(f"shared traces folder {TRACES} not found")
    found = [
        p
        for p in sorted(TRACES.rglob("*.json*"))
        if any(w in p.name.lower() for w in words) and p.is_file()
    ]
    if not found:
        pytest.skip(f"no real trace named like {words} under {TRACES}")
    return found


def raw_trace(path: Path) -> dict[str, Any]:
    """A (gzip) JSON trace as the JSON holds it."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def raw_events(path: Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a (gzip) JSON trace, as the JSON holds them."""
    return raw_trace(path)["traceEvents"]


def x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1, **args: Any):
    """One complete (``X``) event."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


# ---------------------------------------------------------------------------------------------
# 1. ROCm writes ids as text ("0x0")


def rocm_events() -> list[dict[str, Any]]:
    """A training step as ROCm 6's Kineto writer records it: HIP runtime calls whose
    ``stream`` is hex text, kernels and a copy on device 2 linked by ``correlation``."""
    return [
        x("user_annotation", "ProfilerStep#1", 0, 1000, **{"External id": 1}),
        x("cpu_op", "aten::copy_", 10, 200, **{"External id": 8}),
        x(
            "cuda_runtime",
            "hipMemcpyWithStream",
            20,
            60,
            **{"External id": 8, "stream": "0x0", "correlation": 117, "size": "2560"},
        ),
        x(
            "gpu_memcpy",
            "Memcpy HtoD (Host -> Device)",
            40,
            22,
            pid=2,
            tid=0,
            **{"External id": 8, "device": 2, "stream": 0, "correlation": 117},
        ),
        x("cpu_op", "aten::add", 300, 100, **{"External id": 9}),
        x(
            "cuda_runtime",
            "hipLaunchKernel",
            310,
            30,
            **{"External id": 9, "stream": "0x0", "correlation": "0x76"},
        ),
        x(
            "kernel",
            "elementwise_kernel",
            400,
            50,
            pid=2,
            tid=0,
            **{"External id": 9, "device": "0x2", "stream": "0", "correlation": 118},
        ),
    ]


def test_rocm_hex_ids_are_read(tmp_path):
    from perfkit_core import load
    from perfkit_core.events.links import launcher_rows

    run = load(write_trace(tmp_path / "rocm.json", rocm_events()))
    ev = run.events
    kernel = ev[ev["kind"] == "kernel"].iloc[0]
    assert (kernel["stream"], kernel["device_index"], kernel["correlation"]) == (0, 2, 118)
    launch = ev[ev["name"] == "hipLaunchKernel"].iloc[0]
    assert launch["correlation"] == 0x76 == 118
    # Both device events reach the HIP call that launched them.
    launcher = launcher_rows(ev)
    names = ev["name"].astype(str).to_numpy()
    device = np.flatnonzero(ev["stream"].to_numpy() >= 0)
    assert sorted(names[launcher[device]]) == ["hipLaunchKernel", "hipMemcpyWithStream"]
    gpu = run.summary("device").set_index("name")
    assert gpu.loc["GPU 2", "busy_per_step_ns"] == 22_000 + 50_000  # one step (no steps)


def test_id_text_that_is_no_number_is_named(tmp_path):
    from perfkit_core import TraceError, load

    events = rocm_events()
    events[6]["args"]["stream"] = "default"
    path = write_trace(tmp_path / "bad.json", events)
    with pytest.raises(TraceError, match=r"bad\.json.*'stream'.*'default'.*not an integer"):
        load(path)


def test_real_rocm_trace_shows_device_work():
    for path in peer_traces("mi250", "rocm", "amd"):
        from perfkit_core import load

        run = load(path)
        raw = raw_events(path)
        device_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
        want = sum(e.get("dur", 0) for e in raw if e.get("cat") in device_cats)
        ev = run.events
        on_device = ev["kind"].isin(["kernel", "memcpy", "memset", "communication"]).to_numpy()
        assert ev["dur_ns"].to_numpy()[on_device].sum() == pytest.approx(want * 1000, rel=1e-6)


# ---------------------------------------------------------------------------------------------
# 7. torchdata's DataPipe spans are data loading


def datapipe_events() -> list[dict[str, Any]]:
    """Two steps whose batches come from torchdata DataPipes iterated directly: nested
    ``enumerate(DataPipe)#...`` spans (the outer pipe pulls from the inner one)."""
    events = []
    for i, t0 in enumerate((0, 1000)):
        events += [
            x("user_annotation", f"ProfilerStep#{i + 1}", t0, 900),
            x("user_annotation", "enumerate(DataPipe)#BatcherIterDataPipe", t0 + 10, 300),
            x("user_annotation", "enumerate(DataPipe)#MapperIterDataPipe", t0 + 20, 200),
            x("cpu_op", "aten::stack", t0 + 250, 40),
            x("cpu_op", "aten::mm", t0 + 400, 300),
        ]
    return events


def test_datapipe_spans_are_data_loading(tmp_path):
    from perfkit_core import load

    run = load(write_trace(tmp_path / "datapipe.json", datapipe_events()))
    ev = run.events
    pipes = ev["name"].astype(str).str.startswith("enumerate(DataPipe)#").to_numpy()
    assert set(ev["kind"].to_numpy()[pipes]) == {"dataloader"}
    # The TensorBoard profiler's DataLoader role: the union of the DataPipe spans per step.
    steps = run.summary("steps")
    assert steps["data_ns"].tolist() == [300_000, 300_000]
    model = run.summary("model_spans").set_index("name")
    assert model.loc["dataloader", "calls"] == 2  # outermost spans only
    assert model.loc["dataloader", "cpu_total_ns"] == 600_000


# ---------------------------------------------------------------------------------------------
# 4. Host computation without ProfilerSteps keeps top-level operators


def cpu_rank_events(*, steps: bool) -> list[dict[str, Any]]:
    """A CPU-only rank: operators on the main thread (two top-level ones, one with a child)
    and a gloo all-reduce on the communication thread overlapping both."""
    events = [
        x("cpu_op", "aten::mm", 100, 300, tid=1),
        x("cpu_op", "aten::add", 500, 100, tid=1),
        x("cpu_op", "aten::empty", 510, 10, tid=1),
        x("cpu_op", "gloo:all_reduce", 350, 200, tid=2),
    ]
    if steps:
        events.append(x("user_annotation", "ProfilerStep#3", 50, 600, tid=1))
    return events


@pytest.mark.parametrize("steps", [False, True])
def test_host_computation_counts_top_level_operators(tmp_path, steps):
    from perfkit_core import load
    from perfkit_core.views.multirank.ranks import rank_figures

    run = load(write_trace(tmp_path / "cpu.json", cpu_rank_events(steps=steps)))
    dist = run.summary("distributed").set_index("name")
    # Computation: the merged operators outside collectives, [100, 400] and [500, 600] us;
    # communication [350, 550]; they overlap on [350, 400] and [500, 550].
    assert dist.loc["computation", "per_step_ns"] == 400_000
    assert dist.loc["communication", "per_step_ns"] == 200_000
    assert dist.loc["overlap", "per_step_ns"] == 100_000
    assert (dist["side"] == "cpu").all()
    figures = rank_figures(run)
    assert figures["compute_ns"] == 400_000
    assert figures["exposed_communication_ns"] == 100_000


# ---------------------------------------------------------------------------------------------
# 3. Collectives that run on the host count as communication, on GPU ranks too


def gloo_gpu_rank_events() -> list[dict[str, Any]]:
    """A GPU rank that trains with kernels, all-reduces a metric with gloo on the host, and runs
    one NCCL collective (whose host span only launches a kernel) plus a stream wait."""

    def kernel(name, ts, dur, stream, corr):
        return x(
            "kernel", name, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr
        )

    return [
        x("user_annotation", "ProfilerStep#1", 0, 1000),
        x("cpu_op", "aten::mm", 100, 100),
        x("cuda_runtime", "cudaLaunchKernel", 110, 10, correlation=1),
        kernel("volta_sgemm_128x64_nn", 150, 300, 7, 1),
        x("cpu_op", "record_param_comms", 300, 300),
        x("cpu_op", "gloo:all_reduce", 310, 280),
        x("cpu_op", "record_param_comms", 700, 20),
        x("cuda_runtime", "cudaLaunchKernel", 705, 10, correlation=2),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 720, 180, 20, 2),
        x("cpu_op", "record_param_comms", 750, 10),
        x("cuda_runtime", "cudaStreamWaitEvent", 752, 3),
    ]


def test_gloo_collectives_count_on_a_gpu_rank(tmp_path):
    from perfkit_core import load
    from perfkit_core.views.multirank.ranks import rank_figures

    run = load(write_trace(tmp_path / "gloo_gpu.json", gloo_gpu_rank_events()))
    dist = run.summary("distributed").set_index("name")
    # Communication: the gloo all-reduce on the host [300, 600] and the NCCL kernel
    # [720, 900] (not the NCCL launch span, not the stream wait); computation: the sgemm
    # kernel [150, 450]; they overlap on [300, 450].
    assert dist.loc["communication", "per_step_ns"] == 480_000
    assert dist.loc["computation", "per_step_ns"] == 300_000
    assert dist.loc["overlap", "per_step_ns"] == 150_000
    figures = rank_figures(run)
    assert figures["communication_ns"] == 480_000
    assert figures["exposed_communication_ns"] == 330_000


def test_real_gloo_rank_communication_is_its_collectives():
    from conftest import shared_trace
    from perfkit_core import load
    from perfkit_core.events.intervals import clip_to, length

    path = shared_trace("gloo_rank34")
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    step = next(e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#"))
    gloo = [e for e in raw if str(e.get("name", "")).startswith("gloo:")]
    base = raw_trace(path).get("baseTimeNanoseconds", 0)

    def ns(us):
        return np.asarray(np.round(np.asarray(us, dtype=np.float64) * 1000), dtype=np.int64) + base

    window = (ns([step["ts"]]), ns([step["ts"] + step["dur"]]))
    starts = ns([e["ts"] for e in gloo])
    ends = ns([e["ts"] + e["dur"] for e in gloo])
    want = length(clip_to(starts, ends, window))
    dist = load(path).summary("distributed").set_index("name")
    assert want > 0
    assert dist.loc["communication", "per_step_ns"] == pytest.approx(want, abs=len(gloo))


# ---------------------------------------------------------------------------------------------
# 2. MTIA's on-device events are device work


def mtia_events() -> list[dict[str, Any]]:
    """A step on an MTIA device as Kineto writes it: ``mtia_runtime`` calls on the host,
    ``mtia_ccp_events`` on device 9 (a kernel, a DMA copy, a queue wait)."""

    def ccp(name, ts, dur, **args):
        return x("mtia_ccp_events", name, ts, dur, pid=9, tid=801, **args)

    return [
        x("user_annotation", "ProfilerStep#1", 0, 1000),
        x("cpu_op", "aten::mm", 100, 200),
        x(
            "mtia_runtime",
            "runFunction - job_prep_and_submit_for_execution",
            120,
            50,
            correlation=77,
        ),
        ccp("fc-dtype_Float", 200, 400, stream=3, correlation=77, column=0, row=0),
        ccp("dma_request", 650, 100, stream=3, direction="DEVICE_TO_HOST", size=16, sqid=1),
        ccp("event_wait", 760, 200, stream=3, wait_on_stream=4),
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "MTIA 9"}},
    ]


def test_mtia_device_events_are_device_work(tmp_path):
    from perfkit_core import load

    run = load(write_trace(tmp_path / "mtia.json", mtia_events()))
    kernels = run.summary("kernel").set_index("name")
    assert kernels.loc["fc-dtype_Float", "gpu_total_ns"] == 400_000
    device = run.summary("device").set_index("name")
    # HTA's memory pattern: MTIA DMA requests are copies; the queue wait keeps nothing busy.
    assert device.loc["MTIA 9", "busy_per_step_ns"] == 400_000 + 100_000  # one step
    overview = run.summary("overview").set_index("name")
    assert overview.loc["kernel", "gpu_per_step_ns"] == 400_000
    assert overview.loc["memcpy", "gpu_per_step_ns"] == 100_000
    ops = run.summary("operator").set_index("name")
    assert ops.loc["aten::mm", "gpu_total_ns"] == 400_000


def test_real_mtia_trace_shows_device_work():
    from perfkit_core import load

    for path in peer_traces("mtia"):
        raw = [e for e in raw_events(path) if e.get("cat") == "mtia_ccp_events"]
        want = sum(
            e.get("dur", 0)
            for e in raw
            if not e["name"].startswith("dma") and e["name"] not in ("event_record", "event_wait")
        )
        kernels = load(path).summary("kernel")
        assert want > 0
        assert kernels["gpu_total_ns"].sum() == pytest.approx(want * 1000, rel=1e-6)


# ---------------------------------------------------------------------------------------------
# 6. An operator that re-enters itself counts once, as in torch's key_averages


def torch_tree_calls(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The host events torch's ``EventList`` keeps, by name, after its own rules: events nest
    per thread by time (``_populate_cpu_children``), memory instants, Python frames and the
    names ``_filter_name`` drops are no nodes, and a child with its parent's name that is the
    parent's only child is removed (``_remove_dup_nodes``)."""
    skipped = {"[memory]", "aten::is_leaf", "aten::output_nr", "aten::_version"}
    nodes = [
        dict(e, children=[], parent=None)
        for e in events
        if e.get("ph") == "X"
        and e.get("cat", "").lower()
        not in (
            "python_function",
            "trace",
            "kernel",
            "memcpy",
            "memset",
            "gpu_memcpy",
            "gpu_memset",
        )
        and e.get("name") not in skipped
        and not str(e.get("name", "")).startswith("profiler::_record_function")
    ]
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for node in nodes:
        by_thread.setdefault((node["pid"], node["tid"]), []).append(node)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -(e["ts"] + e["dur"])))
        stack: list[dict[str, Any]] = []
        for node in thread:
            end = node["ts"] + node["dur"]
            while stack and (
                node["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]
                or end > stack[-1]["ts"] + stack[-1]["dur"]
            ):
                stack.pop()
            if stack:
                node["parent"] = stack[-1]
                stack[-1]["children"].append(node)
            stack.append(node)
    while True:
        removed = []
        for node in nodes:
            up = node["parent"]
            if up is not None and up["name"] == node["name"] and len(up["children"]) == 1:
                up["children"] = node["children"]
                for child in node["children"]:
                    child["parent"] = up
                removed.append(id(node))
        if not removed:
            break
        gone = set(removed)
        nodes = [n for n in nodes if id(n) not in gone]
    out: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        out.setdefault(node["name"], []).append(node)
    return out


def test_resnet_div_counts_once_like_torch():
    from conftest import shared_trace
    from perfkit_core import load

    path = shared_trace("resnet_nw0")
    raw = raw_events(path)
    peer = torch_tree_calls(raw)
    ops = load(path).summary("operator").set_index("name")
    assert ops.loc["aten::div", "calls"] == len(peer["aten::div"]) == 198
    mismatched = {
        name: (int(row["calls"]), len(peer.get(name, [])))
        for name, row in ops.iterrows()
        if int(row["calls"]) != len(peer.get(name, []))
    }
    assert not mismatched
    # Device time: the kernels the kept aten::div calls launched (through their runtime
    # descendants, linked by correlation), counted once.
    kernel_us = {
        e["args"]["correlation"]: e["dur"]
        for e in raw
        if e.get("cat", "").lower() == "kernel" and "correlation" in e.get("args", {})
    }

    def launched(node):
        own = kernel_us.get((node.get("args") or {}).get("correlation"), 0)
        return own + sum(launched(c) for c in node["children"])

    want = sum(launched(n) for n in peer["aten::div"]) * 1000
    assert ops.loc["aten::div", "gpu_total_ns"] == pytest.approx(want) == 144_000


def test_torch_cpu_operators_that_reenter_count_like_key_averages(tmp_path):
    torch = pytest.importorskip("torch")
    from perfkit_core import load

    x = torch.randn(8, 16)
    with torch.profiler.profile() as prof:
        for _ in range(3):
            x.var(0)  # aten::var -> aten::var
            x.mean()  # aten::mean -> aten::mean
            torch.where(x > 0, x, 0)  # aten::where -> (aten::where, ...): both kept
            torch.add(x, 1, alpha=2)
    trace = tmp_path / "reenter.json"
    prof.export_chrome_trace(str(trace))
    native = {e.key: e for e in prof.key_averages()}
    ops = load(trace).summary("operator").set_index("name")
    for name in ("aten::var", "aten::mean"):
        assert native[name].count == 3
        assert ops.loc[name, "calls"] == native[name].count
        assert ops.loc[name, "cpu_self_ns"] == pytest.approx(
            native[name].self_cpu_time_total * 1000, abs=1000 * 3
        )
    for name, row in ops.iterrows():
        if name in native:
            assert row["calls"] == native[name].count, name


# ---------------------------------------------------------------------------------------------
# 5. Launches reach their operator by External id and launch flows, not only by nesting


def cross_thread_events() -> list[dict[str, Any]]:
    """Operators on thread 1 whose launches run on thread 2 (tied by ``External id``), a kernel
    whose launch was not recorded, and a kernel tied to its launch by an ``ac2g`` flow only."""

    def kernel(name, ts, dur, ext, **args):
        return x(
            "kernel",
            name,
            ts,
            dur,
            pid=0,
            tid=7,
            device=0,
            stream=7,
            **{"External id": ext, **args},
        )

    return [
        x("user_annotation", "ProfilerStep#1", 0, 1000, tid=1, **{"External id": 1}),
        x("cpu_op", "aten::mm", 100, 200, tid=1, **{"External id": 5}),
        x(
            "cuda_runtime",
            "cudaLaunchKernel",
            150,
            10,
            tid=2,
            **{"External id": 5, "correlation": 50},
        ),
        kernel("sgemm", 200, 300, 5, correlation=50),
        x("cpu_op", "aten::relu", 400, 100, tid=1, **{"External id": 6}),
        kernel("relu_kernel", 520, 40, 6),  # its launch was not recorded
        x("cpu_op", "aten::add", 600, 100, tid=1, **{"External id": 7}),
        x("cuda_runtime", "cudaLaunchKernel", 610, 10, tid=1),  # no correlation arg
        {"ph": "s", "id": 70, "pid": 1, "tid": 1, "ts": 610, "cat": "ac2g", "name": "ac2g"},
        kernel("add_kernel", 650, 60, 7),
        {
            "ph": "f",
            "id": 70,
            "pid": 0,
            "tid": 7,
            "ts": 650,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
    ]


def test_launches_reach_their_operator_by_external_id_and_flows(tmp_path):
    from perfkit_core import load

    run = load(write_trace(tmp_path / "threads.json", cross_thread_events()))
    ops = run.summary("operator").set_index("name")
    # HTA's and the TensorBoard profiler's link: the kernel's External id / correlation.
    assert ops.loc["aten::mm", "gpu_total_ns"] == 300_000
    assert ops.loc["aten::mm", "gpu_self_ns"] == 300_000
    assert ops.loc["aten::relu", "gpu_total_ns"] == 40_000
    assert ops.loc["aten::add", "gpu_total_ns"] == 60_000
    ev = run.events
    add_kernel = ev[ev["name"] == "add_kernel"].iloc[0]
    assert add_kernel["correlation"] == 70
    assert run.meta["accounting"]["launch_flow_links"] == 2
    detail = run.summary("operator", op_detail=True)
    under_mm = detail[(detail["detail_of"] == "aten::mm") & (detail["level"] == 1)]
    assert "sgemm" in set(under_mm["name"])


def test_real_traces_device_time_per_operator_matches_external_ids():
    """On each real GPU trace, every kernel's time reaches the operator its External id names
    (where that operator is a host op), as HTA links them: the operators' self device time
    summed per name equals the kernels summed per owner name."""
    from conftest import GPU_TRACES, shared_trace
    from perfkit_core import load
    from perfkit_core.events.links import external_owner_rows, run_launchers

    for key in sorted(GPU_TRACES):
        run = load(shared_trace(key))
        ev = run.events
        owner = external_owner_rows(ev)
        launcher = run_launchers(run)
        kernels = np.flatnonzero((ev["stream"].to_numpy() >= 0) & (launcher >= 0))
        by_ext = owner[launcher[kernels]]
        linked = kernels[by_ext >= 0]
        if not len(linked):
            continue  # this writer's runtime ids are no operator's (older Kineto)
        from perfkit_core.events.links import device_time_by_launcher

        self_dev, _ = device_time_by_launcher(run)
        names = ev["name"].astype(str).to_numpy()
        dur = ev["dur_ns"].to_numpy()
        want: dict[str, float] = {}
        for k, o in zip(linked, owner[launcher[linked]], strict=True):
            want[names[o]] = want.get(names[o], 0) + dur[k]
        got: dict[str, float] = {}
        for o in np.unique(owner[launcher[linked]]):
            got[names[o]] = got.get(names[o], 0) + self_dev[o]
        assert got == pytest.approx(want)


# ---------------------------------------------------------------------------------------------
# 8. Paddle: device work reaches its operator through the result tree, ids of 0 included


def paddle_tree(correlation: int) -> dict[int, Any]:
    """A Paddle result tree (what ``ProfilerResult.get_data()`` returns: nodes with Paddle's
    fields) of one step: ``matmul`` launches a kernel and a copy through runtime calls, ``relu``
    holds its kernel directly, ``add`` launches a kernel whose runtime call carries another id
    than the kernel. Every id is ``correlation`` (0: as in Paddle's own statistics tests)."""
    from types import SimpleNamespace

    from paddle.profiler import TracerEventType as T

    def host(name, kind, start, end, children=(), runtime=(), device=(), corr=0):
        return SimpleNamespace(
            name=name,
            type=kind,
            start_ns=start,
            end_ns=end,
            process_id=1,
            thread_id=2,
            correlation_id=corr,
            children_node=list(children),
            runtime_node=list(runtime),
            device_node=list(device),
            mem_node=[],
            input_shapes={},
            dtypes={},
            callstack="",
            attributes={},
            op_id=0,
        )

    def dev(name, kind, start, end, corr=correlation):
        return SimpleNamespace(
            name=name,
            type=kind,
            start_ns=start,
            end_ns=end,
            stream_id=7,
            device_id=0,
            context_id=0,
            correlation_id=corr,
            num_bytes=64,
            grid_x=1,
            grid_y=1,
            grid_z=1,
            block_x=32,
            block_y=1,
            block_z=1,
            registers_per_thread=16,
            shared_memory=0,
            blocks_per_sm=1.0,
            warps_per_sm=1.0,
            occupancy=0.5,
            value=0,
        )

    launch = host(
        "cudaLaunchKernel",
        T.CudaRuntime,
        120,
        130,
        corr=correlation,
        device=[dev("gemm_kernel", T.Kernel, 200, 500)],
    )
    copy = host(
        "cudaMemcpyAsync",
        T.CudaRuntime,
        140,
        150,
        corr=correlation,
        device=[dev("Memcpy HtoD", T.Memcpy, 510, 530)],
    )
    matmul = host("matmul", T.Operator, 100, 300, runtime=[launch, copy])
    relu = host("relu", T.Operator, 320, 400, device=[dev("relu_kernel", T.Kernel, 540, 600)])
    odd = host(
        "cudaLaunchKernel",
        T.CudaRuntime,
        420,
        430,
        corr=correlation + 5,
        device=[dev("add_kernel", T.Kernel, 610, 650)],
    )
    add = host("add", T.Operator, 410, 460, runtime=[odd])
    forward = host("Forward", T.Forward, 60, 480, children=[matmul, relu, add])
    step = host("ProfileStep#0", T.ProfileStep, 50, 700, children=[forward])
    root = host("Root", T.UserDefined, 0, 10**9, children=[step])
    return {2: root}


@pytest.mark.parametrize("correlation", [0, 11])
def test_paddle_device_time_follows_the_result_tree(correlation):
    pytest.importorskip("paddle")
    from types import SimpleNamespace

    from paddle.profiler.profiler_statistic import StatisticData

    from perfkit_paddle.result import run_from_result

    trees = paddle_tree(correlation)
    result = SimpleNamespace(get_data=lambda: trees, get_extra_info=dict)
    run = run_from_result(result)
    ops = run.summary("operator").set_index("name")
    # Paddle's own figures of the same tree: device time per operator (kernels, copies, sets).
    theirs = StatisticData(trees, {}).event_summary.items
    for name in ("matmul", "relu", "add"):
        assert ops.loc[name, "gpu_total_ns"] == theirs[name].general_gpu_time, name
    assert ops.loc["matmul", "gpu_total_ns"] == 300 + 20
    assert ops.loc["relu", "gpu_self_ns"] == 60
    assert ops.loc["add", "gpu_total_ns"] == 40
    model = run.summary("model_spans").set_index("name")
    assert model.loc["forward", "gpu_total_ns"] == 400  # none left in "others"
    assert model.loc["others", "gpu_total_ns"] == 0
    phases = run.summary("model").set_index("name")
    steps = phases.loc["step", "steps"]
    assert phases.loc["forward", "gpu_per_step_ns"] * steps == 400
    assert phases.loc["other", "gpu_per_step_ns"] == 0


# ---------------------------------------------------------------------------------------------
# Every real trace loads, and keeps all its device work

#: Kineto categories of device work (kernels, copies, sets; MTIA's command processor), in
#: both spellings Kineto has used.
DEVICE_WORK_CATEGORIES = {
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "memcpy",
    "memset",
    "mtia_ccp_events",
}
#: Of those, events that keep no engine busy (MTIA queue ordering).
NOT_WORK_NAMES = {"event_record", "event_wait"}


def _real_traces() -> list[Any]:
    if not TRACES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{TRACES} not found"))]
    files = sorted(
        p for p in TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
    )
    return [pytest.param(p, id=str(p.relative_to(TRACES))) for p in files]


@pytest.mark.parametrize("path", _real_traces())
def test_every_real_trace_loads_with_all_its_device_work(path):
    from perfkit_core import load

    run = load(path)
    raw = raw_events(path)
    device = [
        e
        for e in raw
        if e.get("ph") == "X"
        and str(e.get("cat", "")).lower() in DEVICE_WORK_CATEGORIES
        and e.get("name") not in NOT_WORK_NAMES
    ]
    ev = run.events
    work = (ev["stream"].to_numpy() >= 0) & ev["kind"].isin(
        ["kernel", "communication", "memcpy", "memset"]
    ).to_numpy()
    assert int(work.sum()) == len(device)
    want_ns = sum(e.get("dur", 0) for e in device) * 1000
    assert ev["dur_ns"].to_numpy()[work].sum() == pytest.approx(want_ns, rel=1e-9, abs=len(device))
    accounting = run.meta["accounting"]
    assert (
        accounting["rows"]
        + accounting["flow_events"]
        + accounting["metadata_events"]
        + accounting.get("empty_events", 0)
        == accounting["events_in_file"]
        == len(raw)
    )
