"""The memory views recomputed from the raw memory events (json.load of the trace), and
against torch's and Paddle's own memory figures of the same profile."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.events.intervals import step_spans
from perfkit_core.views.allocations import OUTSIDE_OPS, pair_events
from tests.peer_definitions import ns, tb_steps

V100 = "resnet_nw0"


def load_trace(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        data = json.load(fh)
    return data["traceEvents"] if isinstance(data, dict) else data


def raw_memory(events: list[dict]) -> list[dict]:
    """The Kineto memory events in time order, each with its device, op (the innermost
    enclosing host op on its thread that is not a ProfilerStep, by a sweep over the thread's
    ops in time order) and whether a ProfilerStep span holds it."""
    ops = defaultdict(list)
    steps = []
    for e in events:
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() not in (
            "operator",
            "cpu_op",
            "user_annotation",
            "python_function",
        ):
            continue
        if str(e["name"]).startswith("ProfilerStep#"):
            number = int(str(e["name"]).split("#")[1])
            steps.append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), number))
            continue
        ops[(int(e["pid"]), int(e["tid"]))].append((ns(e["ts"]), -ns(e["dur"]), e["name"]))
    mem = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: float(e["ts"]))
    out = []
    for thread, spans in ops.items():
        spans.sort()
        mine = [m for m in mem if (int(m["pid"]), int(m["tid"])) == thread]
        stack: list[tuple[int, str]] = []  # (end, name) of the ops open, innermost last
        i = 0
        for m in mine:
            t = ns(m["ts"])
            while i < len(spans) and spans[i][0] <= t:
                while stack and stack[-1][0] <= spans[i][0]:
                    stack.pop()
                stack.append((spans[i][0] - spans[i][1], spans[i][2]))
                i += 1
            while stack and stack[-1][0] <= t:
                stack.pop()
            m["_op"] = stack[-1][1] if stack else OUTSIDE_OPS
    for m in mem:
        a = m["args"]
        t = ns(m["ts"])
        out.append(
            {
                "ts": t,
                "device": "cpu" if a["Device Type"] == 0 else f"gpu:{a['Device Id']}",
                "bytes": float(a["Bytes"]),
                "addr": a.get("Addr"),
                "total": a.get("Total Allocated"),
                "op": m.get("_op", OUTSIDE_OPS),
                "step": next((n for s, e, n in steps if s <= t <= e), -1),
            }
        )
    return out


def reference_pairing(mem: list[dict], *, by_address: bool) -> list[bool]:
    """Per event: an allocation freed later. By address (a dict of held addresses), or by size
    (a stack of held allocations per size, the latest freed first)."""
    freed = [False] * len(mem)
    held: dict = {}
    stacks: dict = defaultdict(list)
    for i, m in enumerate(mem):
        if by_address:
            key = (m["device"], m["addr"])
            if m["bytes"] > 0:
                held[key] = i
            elif key in held:
                freed[held.pop(key)] = True
        else:
            key = (m["device"], abs(m["bytes"]))
            if m["bytes"] > 0:
                stacks[key].append(i)
            elif stacks[key]:
                freed[stacks[key].pop()] = True
    return freed


def test_pairing_agrees_with_a_plain_reference():
    """Random sequences of allocations and frees on two devices, some with addresses: the bulk
    pairing (sorts and cumulative sums) gives what one walk over the events gives."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(0, 40))
        device = rng.choice(["cpu", "gpu:0"], n).astype(object)
        nbytes = rng.choice([1.0, 2.0, 3.0], n) * rng.choice([1, -1], n)
        nbytes[rng.random(n) < 0.05] = np.nan  # totals only
        address = np.where(rng.random(n) < 0.5, rng.integers(0, 4, n), -1)
        freed, paired, _ = pair_events(device, nbytes, address)
        held: dict = {}
        stacks: dict = defaultdict(list)
        want_freed, want_paired = np.zeros(n, bool), np.zeros(n, bool)
        for i in range(n):
            if not abs(nbytes[i]) > 0:
                continue
            by_addr = address[i] >= 0
            key = (device[i], address[i]) if by_addr else (device[i], abs(nbytes[i]))
            if nbytes[i] > 0:
                if by_addr:
                    held[key] = i
                else:
                    stacks[key].append(i)
                continue
            j = held.pop(key, None) if by_addr else (stacks[key].pop() if stacks[key] else None)
            if j is not None:
                want_freed[j] = want_paired[i] = True
        assert (freed == want_freed).all() and (paired == want_paired).all()


@pytest.fixture(scope="module")
def v100():
    path = shared_trace(V100)
    return perfkit_core.load(path), raw_memory(load_trace(path))


def test_v100_memory_by_op_recomputed_from_raw(v100):
    """The V100 trace records no addresses: frees pair with the latest held allocation of the
    same size. aten::empty allocates 5.3 GiB per step, all of it freed later by other ops (it
    read as a +31.7 GiB leak with 0 frees); no ProfilerStep rows."""
    run, mem = v100
    table = run.summary("memory")
    steps = 6
    freed = reference_pairing(mem, by_address=False)
    want = defaultdict(Counter)
    for m, f in zip(mem, freed, strict=True):
        key = (m["op"], m["device"])
        if m["bytes"] > 0:
            want[key]["held_bytes"] += m["bytes"] * (not f)
        if m["step"] < 0:
            continue
        if m["bytes"] > 0:
            want[key]["allocations"] += 1
            want[key]["allocated_bytes"] += m["bytes"]
            want[key]["freed_later_bytes"] += m["bytes"] * f
        else:
            want[key]["frees"] += 1
            want[key]["freed_bytes"] -= m["bytes"]
    got = table.set_index(["name", "device"])
    assert set(got.index) == set(want)
    for key, figures in want.items():
        for column, value in figures.items():
            per_step = 1 if column == "held_bytes" else steps
            assert got.loc[key, column] * per_step == pytest.approx(value), (key, column)
    assert not table["name"].str.startswith("ProfilerStep").any()
    empty = got.loc[("aten::empty", "gpu:0")]
    assert empty["allocated_bytes"] == pytest.approx(empty["freed_later_bytes"])
    assert empty["held_bytes"] == 0 and empty["allocated_bytes"] > 5 * 2**30
    note = table.attrs["note"]
    assert "no addresses" in note and "over the 6 steps" in note
    assert "gpu:0: no allocator totals recorded; peak 2.6 GiB above the profile's start" in note


def test_v100_memory_peaks_by_device_and_step_from_raw(v100):
    """Without allocator totals, the peak is the highest running sum of allocations less frees
    from the start of the profile: per device, and per step."""
    run, mem = v100
    level: Counter = Counter()
    peak: Counter = Counter()
    step_peak: dict = defaultdict(float)
    for m in mem:
        level[m["device"]] += m["bytes"]
        peak[m["device"]] = max(peak[m["device"]], level[m["device"]])
        if m["step"] >= 0:
            key = (f"step {m['step']}", m["device"])
            step_peak[key] = max(step_peak[key], level[m["device"]])
    by_device = run.summary("memory", by="device").set_index("name")
    assert dict(by_device["peak_above_start_bytes"]) == pytest.approx(dict(peak))
    assert by_device["peak_allocated_bytes"].isna().all()
    by_step = run.summary("memory", by="step").set_index(["name", "device"])
    assert dict(by_step["peak_above_start_bytes"]) == pytest.approx(dict(step_peak))
    assert len(by_step) == 12  # 6 steps, 2 devices
    counts = Counter((f"step {m['step']}", m["device"]) for m in mem if m["bytes"] > 0)
    assert dict(by_step["allocations"]) == {k: counts[k] for k in by_step.index}


def test_v100_memory_timeline_is_drawn_and_recomputed_from_raw(v100):
    """The memory timeline was empty on the V100 trace (no allocator totals): it now shows each
    device's level above the profile's start, slice by slice, with the level carried into
    slices that have no event, in slices that line up with the steps."""
    run, mem = v100
    timeline = run.summary("memory_timeline")
    assert len(timeline) == 24 and timeline["name"].iloc[0] == "step 5 (1/4)"
    origin = run.summary("device_timeline")  # the same slices
    assert (timeline["offset_ns"] == origin["offset_ns"]).all()
    spans = step_spans(run)
    first = int(spans["start_ns"][0])
    for device in ("cpu", "gpu:0"):
        mine = [m for m in mem if m["device"] == device]
        times = np.array([m["ts"] for m in mine])
        levels = np.cumsum([m["bytes"] for m in mine])
        column = timeline[f"{device}_peak_above_start_bytes"].to_numpy()
        for k, (offset, dur) in enumerate(
            zip(timeline["offset_ns"], timeline["dur_ns"], strict=True)
        ):
            a, b = first + offset, first + offset + dur
            inside = levels[(times >= a) & (times < b)]
            carried = levels[times < a][-1] if (times < a).any() else 0.0
            assert column[k] == pytest.approx(max([carried, *inside])), (device, k)


def test_device_timeline_slices_line_up_with_the_steps(v100):
    """The V100 steps (about 176 ms) are each cut into 4 slices: every step starts a slice, the
    slices of a step add up to it, and each busy share is recomputed from the raw device
    events clipped to the slice."""
    run, _ = v100
    events = [e for e in load_trace(shared_trace(V100)) if e.get("ph") == "X" and "dur" in e]
    steps = tb_steps(events)
    timeline = run.summary("device_timeline")
    assert len(timeline) == 4 * len(steps)
    first = steps[0][0]
    starts = first + timeline["offset_ns"].to_numpy()
    ends = starts + timeline["dur_ns"].to_numpy()
    for k, (s0, e0) in enumerate(steps):
        assert starts[4 * k] == s0 and ends[4 * k + 3] == e0
        assert list(timeline["name"][4 * k : 4 * k + 4]) == [
            f"step {k + 5} ({j}/4)" for j in range(1, 5)
        ]
    device = sorted(
        (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        for e in events
        if str(e.get("cat", "")).lower() in ("kernel", "memcpy", "memset")
    )
    busy = timeline["gpu:0_busy_pct"].to_numpy()
    for k, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        covered, reach = 0, a
        for s, e in device:
            s, e = max(s, reach), min(e, b)
            if e > s:
                covered += e - s
                reach = e
        assert busy[k] == pytest.approx(100.0 * covered / (b - a)), k
    assert timeline.attrs["labels"]["gpu:0_busy_pct"] == "gpu:0 busy (% of the slice)"


def test_torch_memory_matches_key_averages(torch_profile):
    """torch's key_averages of the same cycle: each op's self memory usage (bytes allocated
    less freed inside the op itself) is what the op allocated less what it freed; torch puts
    the memory of no op on ProfilerStep*, perfkit on '(outside any op)'."""
    run = perfkit_core.load(torch_profile.runs[0])
    steps = len(run.meta["steps"])
    table = run.summary("memory")
    assert table["device"].eq("cpu").all() and "by address" in table.attrs["note"]
    ours: Counter = Counter()
    for row in table.itertuples():
        name = "ProfilerStep*" if row.name == OUTSIDE_OPS else row.name
        ours[name] += (row.allocated_bytes - row.freed_bytes) * steps
    theirs = {e.key: e.self_cpu_memory_usage for e in torch_profile.key_averages}
    for name, value in theirs.items():
        assert ours.get(name, 0) == pytest.approx(value, abs=0.5), name
    assert set(ours) <= set(theirs)


def test_torch_pairing_by_address_and_peaks_from_raw(torch_profile):
    """A current torch trace records addresses and the allocator's totals: frees pair by
    address (as a walk over the raw events pairs them), the peak is the highest
    ``Total Allocated``; without the addresses, pairing by size holds the same bytes per
    device, and the bytes it could put on another op are said."""
    run = perfkit_core.load(torch_profile.runs[0])
    mem = raw_memory(load_trace(torch_profile.trace))
    assert all(m["addr"] is not None for m in mem)
    freed = reference_pairing(mem, by_address=True)
    held = Counter()
    for m, f in zip(mem, freed, strict=True):
        if m["bytes"] > 0 and not f:
            held[m["op"]] += m["bytes"]
    table = run.summary("memory").set_index("name")
    assert {k: v for k, v in table["held_bytes"].items() if v} == dict(+held)
    by_device = run.summary("memory", by="device").set_index("name")
    assert by_device.loc["cpu", "peak_allocated_bytes"] == max(m["total"] for m in mem)
    assert by_device.loc["cpu", "held_bytes"] == sum(held.values())
    # The same events without addresses.
    events = run.events.copy()
    events["address"] = -1
    blind = perfkit_core.Run(events, run.meta)
    blind_table = blind.summary("memory").set_index("name")
    assert blind_table["held_bytes"].sum() == sum(held.values())
    moved = (blind_table["held_bytes"] - table["held_bytes"]).abs().sum() / 2
    assert "no addresses" in blind_table.attrs["note"]
    from perfkit_core.views.allocations import allocations

    assert allocations(blind).ambiguous_bytes >= moved


def test_paddle_memory_matches_paddle_summary(paddle_profile):
    """Paddle's own memory summary of the same profile: for a kernel-launch node (Paddle counts
    its own memory events), the allocation and free counts and sizes are the op's rows. Paddle's
    peak is the allocator's peak since the process started (``peak_allocated``), so perfkit's
    peak over the profile (the highest ``current_allocated``) is at most that."""
    run = perfkit_core.load(paddle_profile.runs[0])
    steps = len(run.meta["steps"])
    table = run.summary("memory")
    assert "by address" in table.attrs["note"]
    items = paddle_profile.statistic.memory_summary.allocated_items
    (place,) = items
    launches = table[table["name"].str.endswith("kernel launch")]
    assert len(launches) >= 5
    for row in launches.itertuples():
        item = items[place][row.name]
        assert row.allocations * steps == item.allocation_count, row.name
        assert row.allocated_bytes * steps == item.allocation_size, row.name
        assert row.frees * steps == item.free_count, row.name
        assert row.freed_bytes * steps == item.free_size, row.name
    by_device = run.summary("memory", by="device").set_index("name")
    peak = paddle_profile.statistic.memory_summary.peak_allocation_values[place]
    ev = run.events[run.events["kind"] == "memory"]
    assert by_device.loc["cpu", "peak_allocated_bytes"] == ev["allocated_bytes"].max() <= peak


def test_paddle_reserved_pool_events_are_not_allocations(paddle_profile, tmp_path):
    """Paddle's ReservedAllocate/ReservedFree events change the allocator's reserved total
    only: they are memory events without bytes, and the memory view counts no allocation."""
    data = json.loads(Path(paddle_profile.json_export).read_text())
    allocate = next(e for e in data["traceEvents"] if e.get("cat") == "Allocate")
    before = perfkit_core.load(paddle_profile.json_export).summary("memory", by="device")
    reserved = json.loads(json.dumps(allocate))
    reserved["cat"] = "ReservedAllocate"
    reserved["args"]["increase_bytes"] = 1 << 20
    reserved["args"]["current_reserved"] = allocate["args"]["current_reserved"] + (1 << 20)
    data["traceEvents"].append(reserved)
    path = tmp_path / "reserved.paddle_trace.json"
    path.write_text(json.dumps(data))
    run = perfkit_core.load(path)
    row = run.events[run.events["category"] == "ReservedAllocate"].iloc[0]
    assert row["kind"] == "memory" and np.isnan(row["bytes"])
    after = run.summary("memory", by="device")
    assert (after["allocations"] == before["allocations"]).all()
    assert after["peak_reserved_bytes"].iloc[0] == reserved["args"]["current_reserved"]


def test_v100_report_memory_table_reads_per_step_with_units(v100, tmp_path):
    """The report's memory table: per-step labels, byte cells with units, the peak in its
    note, no ProfilerStep rows; and the memory timeline is there."""
    from perfkit_core.report import build_report, render

    run, _ = v100
    report = build_report(run, ["memory", "memory_timeline"], advice=False)
    memory = report.table("memory")
    labels = [c.label for c in memory.columns]
    assert labels[:4] == ["Name", "Device", "Allocations per step", "Allocated per step"]
    assert "Held at the end of the profile" in labels
    assert not any(str(r[0]).startswith("ProfilerStep") for r in memory.rows)
    text = render(report, "text")
    assert "5.3 GiB" in text and "peak 2.6 GiB above the profile's start" in text
    assert report.table("memory_timeline").rows
    assert any(c.id == "chart-memory-timeline" for c in report.charts)


def test_a_jobs_memory_timeline_takes_the_highest_rank_per_slice(v100):
    """Ranks line up by slice number; each cell is the highest of the ranks' devices of a
    type, for either kind of column (allocator totals or the level above the start)."""
    from perfkit_core.views.multirank.combined import MemoryTimelineCombiner

    run, _ = v100
    frame = run.summary("memory_timeline")
    lower = frame.copy()
    lower["gpu:0_peak_above_start_bytes"] /= 2
    combiner = MemoryTimelineCombiner({})
    combiner.add(0, lower)
    combiner.add(1, frame)
    job = combiner.result()
    assert list(job["name"]) == list(frame["name"])
    assert (job["gpu_peak_above_start_bytes"] == frame["gpu:0_peak_above_start_bytes"]).all()
    assert (job["cpu_peak_above_start_bytes"] == frame["cpu_peak_above_start_bytes"]).all()
