"""The torch handler on real CPU training runs, and the operator/user views against torch's own
``key_averages()`` of the same profiled cycle."""

from __future__ import annotations

import json
import os
import warnings
from collections import defaultdict

import numpy as np
import pytest

import perfkit_core

torch = pytest.importorskip("torch")


def test_handler_saves_one_run_per_cycle(torch_profile):
    assert len(torch_profile.runs) == 1
    run_dir = torch_profile.runs[0]
    assert (run_dir / "events.parquet").is_file() and (run_dir / "meta.json").is_file()
    run = perfkit_core.load(run_dir)
    assert run.framework == "torch"
    assert run.meta["framework_version"] == torch.__version__
    assert run.meta["steps"] == [2, 3, 4, 5]
    assert run.meta["schema_version"] == perfkit_core.SCHEMA_VERSION


def test_saved_run_equals_a_fresh_load_of_the_native_trace(torch_profile):
    saved = perfkit_core.load(torch_profile.runs[0])
    fresh = perfkit_core.load(torch_profile.trace)
    assert len(saved.events) == len(fresh.events)
    for column in saved.events.columns:
        a, b = saved.events[column], fresh.events[column]
        if str(a.dtype) == "category":
            assert a.astype(str).tolist() == b.astype(str).tolist(), column
        else:
            np.testing.assert_array_equal(a.to_numpy(), b.to_numpy(), err_msg=column)


def _torch_totals(averages):
    out = {}
    for evt in averages:
        out[evt.key] = (evt.count, evt.cpu_time_total * 1000.0)  # us -> ns
    return out


def test_operator_counts_and_cpu_totals_match_key_averages(torch_profile):
    run = perfkit_core.load(torch_profile.runs[0])
    ops = run.summary("operator")
    theirs = _torch_totals(torch_profile.key_averages)
    assert len(ops) > 20
    for row in ops.itertuples():
        assert row.name in theirs, row.name
        count, total_ns = theirs[row.name]
        assert row.calls == count, row.name
        assert row.cpu_total_ns == pytest.approx(total_ns, rel=0.01, abs=1000), row.name
    # Every aten op torch saw is in the table.
    assert {k for k in theirs if k.startswith("aten::")} <= set(ops["name"])


def test_user_view_matches_key_averages(torch_profile):
    run = perfkit_core.load(torch_profile.runs[0])
    user = run.summary("user").set_index("name")
    theirs = _torch_totals(torch_profile.key_averages)
    for name in ("forward_and_loss", "backward"):
        assert user.loc[name, "calls"] == theirs[name][0] == 4
        assert user.loc[name, "cpu_total_ns"] == pytest.approx(theirs[name][1], rel=0.01)


def test_self_time_is_never_negative_and_recomputes_from_raw_events(torch_profile):
    run = perfkit_core.load(torch_profile.runs[0])
    ops = run.summary("operator")
    assert (ops["cpu_self_ns"] >= 0).all()
    assert (ops["cpu_self_ns"] <= ops["cpu_total_ns"]).all()
    # Recompute self time from the raw chrome events with a per-thread stack walk.
    raw = json.loads(torch_profile.trace.read_text())["traceEvents"]
    base = json.loads(torch_profile.trace.read_text()).get("baseTimeNanoseconds", 0)
    spans = [e for e in raw if e.get("ph") == "X" and e.get("cat") not in ("Trace",)]
    by_thread = defaultdict(list)
    for e in spans:
        s = round(e["ts"] * 1000) + base
        by_thread[e["tid"]].append((s, s + round(e["dur"] * 1000), e["name"], e.get("cat")))
    self_by_name: dict[str, int] = defaultdict(int)
    for items in by_thread.values():
        items.sort(key=lambda x: (x[0], -(x[1] - x[0])))
        stack: list[list] = []
        records = []
        for s, t, name, cat in items:
            while stack and not (stack[-1][1] >= t and stack[-1][1] > s):
                stack.pop()
            rec = [s, t, name, cat, t - s]
            if stack:
                stack[-1][4] -= t - s
            stack.append(rec)
            records.append(rec)
        for _s, _t, name, cat, self_ns in records:
            if cat == "cpu_op":
                self_by_name[name] += max(self_ns, 0)
    mine = ops.set_index("name")["cpu_self_ns"]
    for name, value in mine.items():
        assert value == pytest.approx(self_by_name[name], abs=1), name


def test_group_by_input_shape_matches_key_averages(torch_profile):
    run = perfkit_core.load(torch_profile.runs[0])
    ops = run.summary("operator", group_by_input_shape=True)
    theirs = defaultdict(int)
    for evt in torch_profile.key_averages_by_shape:
        theirs[(evt.key, str(evt.input_shapes))] += evt.count
    addmm = ops[ops["name"] == "aten::addmm"]
    assert len(addmm) >= 2  # hidden layers and the output layer differ in shape
    for row in addmm.itertuples():
        key = ("aten::addmm", row.input_shapes.replace(" ", ""))
        match = {
            k: v
            for k, v in theirs.items()
            if k[0] == "aten::addmm" and k[1].replace(" ", "") == key[1]
        }
        assert sum(match.values()) == row.calls, row.input_shapes
    assert (
        ops.groupby("name")["calls"].sum().to_dict()
        == run.summary("operator").set_index("name")["calls"].to_dict()
    )


def test_group_by_stack_uses_python_frames(tmp_path):
    from tests.torch_profiles import record

    prof = record(tmp_path, steps=2, blocks=1, with_stack=True)
    run = perfkit_core.load(prof.runs[0])
    ops = run.summary("operator", group_by_stack_n=3)
    assert (ops["stack"].str.len() > 0).any()
    assert ops["stack"].str.count("\n").max() <= 2
    assert (
        ops.groupby("name")["calls"].sum().to_dict()
        == run.summary("operator").set_index("name")["calls"].to_dict()
    )


def test_handler_never_raises_and_keeps_the_native_trace(tmp_path, monkeypatch):
    import perfkit_torch.kineto as kineto

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(kineto, "load_kineto", broken)
    import perfkit_torch.handler as handler_mod

    calls = []
    handler = handler_mod.on_trace_ready(
        tmp_path, worker_name="w", chain=[lambda p: calls.append(p.step_num)], background=False
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from torch.profiler import ProfilerActivity, profile, schedule

        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
            on_trace_ready=handler,
        ) as prof:
            for _ in range(4):
                torch.randn(8, 8) @ torch.randn(8, 8)
                prof.step()
    ours = [w for w in caught if "perfkit" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "disk on fire" in str(ours[0].message)
    assert handler.runs == []
    assert len(handler.failures) == 2
    for kept, _reason in handler.failures:
        assert kept.is_file() and kept.stat().st_size > 0
        assert str(kept) in str(ours[0].message) or kept.parent != handler.failures[0][0].parent
    assert str(handler.failures[0][0]) in str(ours[0].message)
    assert len(calls) == 2  # chained handlers still run


def test_handler_does_not_call_events_or_key_averages(tmp_path, monkeypatch):
    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_torch

    def forbidden(self, *a, **k):
        raise AssertionError("the handler must not call this")

    monkeypatch.setattr(profile, "events", forbidden)
    monkeypatch.setattr(profile, "key_averages", forbidden)
    handler = perfkit_torch.on_trace_ready(tmp_path)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(2):
            torch.relu(torch.randn(4, 4))
            prof.step()
    assert not handler.failures
    assert len(handler.runs) == 1
    assert not (handler.runs[0] / "trace.pt.trace.json").exists()  # removed once saved


def test_handler_chains_with_tensorboard_handler(tmp_path):
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    import perfkit_torch

    tb_dir = tmp_path / "tb"
    handler = perfkit_torch.on_trace_ready(
        tmp_path / "runs", chain=[tensorboard_trace_handler(str(tb_dir))]
    )
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(4):
            torch.relu(torch.randn(4, 4))
            prof.step()
    assert len(handler.runs) == 2
    assert len(list(tb_dir.glob("*.pt.trace.json"))) == 2
    assert len({p.name for p in handler.runs}) == 2


def test_failing_chained_handler_is_contained(tmp_path):
    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_torch

    def broken(prof):
        raise ValueError("user handler bug")

    handler = perfkit_torch.on_trace_ready(tmp_path, chain=[broken])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
            on_trace_ready=handler,
        ) as prof:
            for _ in range(2):
                torch.relu(torch.randn(4, 4))
                prof.step()
    assert len(handler.runs) == 1
    assert any("user handler bug" in str(w.message) for w in caught)


def test_background_conversion_failure_is_reported_and_trace_kept(tmp_path):
    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_torch

    def truncate(prof):
        # Runs after the export and before the conversion: damage the exported trace.
        path = tmp_path / "copy.json"
        prof.export_chrome_trace(str(path))
        data = path.read_bytes()
        (next(tmp_path.glob("w.step*")) / "trace.pt.trace.json").write_bytes(data[: len(data) // 2])

    handler = perfkit_torch.on_trace_ready(tmp_path, worker_name="w", chain=[truncate])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
            on_trace_ready=handler,
        ) as prof:
            for _ in range(2):
                torch.relu(torch.randn(4, 4))
                prof.step()
        assert handler.wait(timeout=120)
    assert handler.runs == []
    ((kept, reason),) = handler.failures
    assert kept.name == "trace.pt.trace.json" and kept.is_file()
    assert "truncated" in reason
    assert any("truncated" in str(w.message) for w in caught)


def test_synchronous_and_background_runs_are_equal(tmp_path):
    from tests.torch_profiles import record

    a = perfkit_core.load(record(tmp_path / "bg", steps=2, blocks=1).runs[0])
    b_prof = record(tmp_path / "sync", steps=2, blocks=1, background=False)
    b = perfkit_core.load(b_prof.runs[0])
    assert a.meta["framework_version"] == b.meta["framework_version"] == torch.__version__
    assert a.meta["extra"]["worker_name"] == b.meta["extra"]["worker_name"] == "torch_mlp"
    assert set(a.events["name"].astype(str)) == set(b.events["name"].astype(str))


def test_the_fallback_folder_stops_growing_at_its_limit(tmp_path, monkeypatch):
    """With the run folder unusable, cycles go to <temp dir>/perfkit_unsaved, but only while it
    holds less than ``FALLBACK_MAX_BYTES``: past it a cycle is recorded as not kept, with the
    reason, and nothing more is written there (it grew without limit before)."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile, schedule

    import perfkit_torch
    from perfkit_core.capture import FALLBACK_MAX_BYTES, fallback_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    blocker = tmp_path / "a_file"
    blocker.write_text("x")  # the run folder would be under a file: it cannot be made

    def one_cycle():
        handler = perfkit_torch.on_trace_ready(blocker / "runs", worker_name="w")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(
                activities=[ProfilerActivity.CPU],
                schedule=schedule(wait=0, warmup=0, active=1, repeat=1),
                on_trace_ready=handler,
            ) as prof:
                torch.relu(torch.randn(4, 4))
                prof.step()
        return handler.failures

    [(kept, reason)] = one_cycle()
    assert kept.parent.parent == fallback_dir() and kept.is_file(), reason
    full = fallback_dir() / "old.bin"
    with open(full, "wb") as fh:
        fh.truncate(FALLBACK_MAX_BYTES)  # sparse: counts as held, takes no disk
    before = sorted(p.name for p in fallback_dir().iterdir())
    [(kept, reason)] = one_cycle()
    assert kept == blocker / "runs"  # nothing kept
    assert "not kept in the fallback folder" in reason and "already holds" in reason, reason
    assert sorted(p.name for p in fallback_dir().iterdir()) == before


def test_the_helper_starts_with_the_handler_not_in_its_first_callback(tmp_path):
    """A background handler starts the conversion helper when it is made (before training);
    ``background=False`` starts none."""
    import perfkit_torch
    from perfkit_core.capture import background

    shared = background.shared_converter()
    shared.close(timeout=60)  # a helper another test left running
    perfkit_torch.on_trace_ready(tmp_path / "sync", background=False)
    assert background.shared_converter().helper_pid is None
    perfkit_torch.on_trace_ready(tmp_path / "bg")
    pid = background.shared_converter().helper_pid
    assert pid is not None
    os.kill(pid, 0)  # running
