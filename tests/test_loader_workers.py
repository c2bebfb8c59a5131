"""A run whose loader already had worker processes: the step timer times them as the training
process's children, the free cores leave their cores out, and the input-pipeline finding
states what more workers would save from their CPU time per step."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfkit_core.advice.loader_cores import loader_cores, remedy_workers
from perfkit_core.advice.loader_workers import (
    MAX_WORKERS_PER_CORE,
    MIN_FREE_CORE,
    WORKER_PACE_SHARE,
    WorkerFigures,
    more_workers,
    waiting_loader_workers,
)
from perfkit_core.capture.cpu_clocks import child_pids, children_cpu_ns, process_cpu_ns

LINUX_CHILDREN = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()
needs_children = pytest.mark.skipif(
    not LINUX_CHILDREN, reason="the kernel lists no child processes here"
)

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def _ticks_cpu_s(pid: int) -> float:
    """``pid``'s CPU time (s) as ``/proc/<pid>/stat`` counts it, in clock ticks: the other way
    of reading what its CPU clock says."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_class() -> None:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


@needs_children
def test_children_cpu_is_read_from_their_own_clocks_and_idle_class_ones_left_out():
    busy = subprocess.Popen([sys.executable, "-c", SPIN])
    idle = subprocess.Popen([sys.executable, "-c", SPIN], preexec_fn=_idle_class)
    try:
        time.sleep(0.3)
        listed = child_pids()
        assert listed is not None and busy.pid in listed
        # the idle-class child gives way to any other process: it takes no core from one
        assert idle.pid not in listed
        first, ticks_first = children_cpu_ns(listed), _ticks_cpu_s(busy.pid)
        time.sleep(0.5)
        second, ticks_second = children_cpu_ns(listed), _ticks_cpu_s(busy.pid)
        assert first is not None and second is not None
        ran = (second[busy.pid] - first[busy.pid]) / 1e9
        # the clock ticks count the same CPU time, a tick or two off at each end
        tick = 1 / os.sysconf("SC_CLK_TCK")
        assert ran == pytest.approx(ticks_second - ticks_first, abs=4 * tick)
        assert 0 < ran <= 0.5 + 4 * tick  # no more than the wall time between the readings
    finally:
        for child in (busy, idle):
            child.kill()
            child.wait()
    # an ended child has no clock: its time is left out, and it is no longer listed
    assert process_cpu_ns(busy.pid) is None
    assert busy.pid not in (children_cpu_ns(listed) or {})
    assert busy.pid not in (child_pids() or [])
    assert children_cpu_ns(None) is None
    # this process's own clock is its CPU time
    assert process_cpu_ns(os.getpid()) == pytest.approx(time.process_time_ns(), rel=0.05)


@needs_children
def test_the_step_timer_times_the_child_processes_beside_its_steps():
    """Over steps without the profiler, the timer counts the CPU time of the child processes
    that ran (a loader's workers) apart from the training process's own: what a spinning
    child's CPU clock moved over the steps, over their wall time (the clock itself is checked
    against the clock ticks above; this checks the timer's windows add up to it)."""
    import perfkit_core

    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.3)
        timer = perfkit_core.step_timer(None, warmup=2)  # the phase timers install meanwhile
        for step in range(52):
            if step == 2:  # right before the first kept step, whose start reads the clocks
                cpu_start, wall_start = process_cpu_ns(child.pid), time.perf_counter_ns()
            with timer.step():
                time.sleep(0.02)
        timer.close()
        cpu_end, wall_end = process_cpu_ns(child.pid), time.perf_counter_ns()
    finally:
        child.kill()
        child.wait()
    assert cpu_start is not None and cpu_end is not None
    record = timer.record()
    assert record["children_ran"] == 1
    # the windows span the steps, a little less than the wall time around them
    spun = (cpu_end - cpu_start) / (wall_end - wall_start)
    assert record["children_cores"] == pytest.approx(spun, abs=0.05)
    assert record["process_cores"] < 0.5  # the steps slept: the child's core is not theirs


@pytest.mark.parametrize(
    ("step", "rest", "workers_cpu", "process_cpu", "had", "more", "cores", "expected"),
    [
        # one worker made a batch every 6.5 ms step, 6 ms of it on a CPU: two make one every
        # 3.25 ms, longer than their CPU spread over two cores (3 ms); the rest (2 + receiving
        # 0) is shorter, and 6 + 1 ms of CPU on 3 cores take 2.3 ms
        (6.5, 2.0, 6.0, 1.0, 1, 1, 2.0, 6.5 - 3.25),
        # ... on the 1.5 cores the workers kept busy or found free: 6 / 1.5 = 4 ms
        (6.5, 2.0, 6.0, 1.0, 1, 1, 1.5, 6.5 - 4.0),
        # ... where the training process's CPU is 4 ms a step: 6 + 4 ms on the 3 cores the
        # two processes may use take 3.3 ms, longer than the workers' 3.25 ms
        (6.5, 2.0, 6.0, 4.0, 1, 1, 2.0, 6.5 - 10.0 / 3.0),
        # a worker that waited 3 of its 9 ms a batch (for its reads) waits beside another
        (9.0, 2.0, 6.0, 1.0, 1, 1, 2.0, 9.0 - 4.5),
        # a worker that mostly waited: two more make a batch every 10 / 3 ms, on little CPU
        (10.0, 2.5, 1.0, 0.5, 1, 2, 3.0, 10.0 - 10.0 / 3.0),
        # the rest of the step bounds it with more workers
        (6.0, 5.0, 6.0, 1.0, 1, 2, 3.0, 6.0 - 5.0),
        # ... at the step less its waits (0.5 ms), however fast the workers
        (3.0, 2.5, 2.0, 1.0, 1, 1, 2.0, 0.5),
        # the workers kept up: the step did not wait, nothing to save
        (3.0, 3.0, 2.0, 1.0, 1, 1, 2.0, 0.0),
        # workers that kept every core they may use busy: more on no more cores save nothing
        (6.0, 2.0, 9.6, 1.0, 2, 1, 1.6, 0.0),
        # no core free, or no workers counted
        (6.0, 2.0, 6.0, 1.0, 1, 0, 1.0, 0.0),
        (6.0, 2.0, 6.0, 1.0, 0, 1, 1.0, 0.0),
    ],
)
def test_more_workers_save_what_their_pace_bounded(
    step, rest, workers_cpu, process_cpu, had, more, cores, expected
):
    # the training process and the workers may use a core besides the workers' cores
    figures = WorkerFigures(step, rest, 0.0, workers_cpu, process_cpu, had, cores, cores + 1.0)
    assert figures.saving(more) == pytest.approx(expected)


def _fewest_workers(figures: WorkerFigures, left: float) -> int:
    """The total workers ``workers_to_add`` should reach, counted up one at a time: from a
    worker per free core, add one while the workers' batch time spread over them is longer
    than WORKER_PACE_SHARE of the step with a batch always ready (the rest plus receiving,
    or both processes' CPU over their cores) and than their CPU spread over their cores, up
    to MAX_WORKERS_PER_CORE per core."""
    total = figures.had + more_workers(left)
    cap = max(int(MAX_WORKERS_PER_CORE * figures.all_cores), total)
    ready = max(
        figures.rest_ns + figures.receive_ns,
        (figures.process_cpu_ns + figures.workers_cpu_ns) / figures.all_cores,
    )

    def target(n: int) -> float:
        return max(WORKER_PACE_SHARE * ready, figures.workers_cpu_ns / min(n, figures.worker_cores))

    while total < cap and figures.step_ns * figures.had / total > target(total):
        total += 1
    return total


@pytest.mark.parametrize(
    ("step", "rest", "receive", "workers_cpu", "had", "left", "expected_more", "beyond"),
    [
        # a worker that computes its batches all the time: one per free core, no more (their
        # CPU bounds them)
        (6.5, 2.0, 0.0, 6.5, 1, 1.0, 1, 0),
        # ... but for 0.5 ms of its 6.5: a third worker brings their batch time spread over
        # them (3.25 ms) under their CPU over their cores (6 / 1.92 = 3.12 ms)
        (6.5, 2.0, 0.0, 6.0, 1, 1.0, 2, 1),
        # a worker asleep for most of its 11 ms batch: 3 + 0.6 ms bound the step with a batch
        # always ready; at 3/4 of that (2.7 ms) 5 workers in all (11 / 4 = 2.75 is slower),
        # 2 more than a worker per free core
        (11.0, 3.0, 0.6, 1.0, 1, 1.6, 4, 2),
        # ... a rest of 0.5 ms: the two processes' CPU (2.2 + 0.3 ms) over their 2.23 cores
        # bounds the step at 1.12 ms, for which 14 workers would be needed at 3/4 of it; at
        # most 4 per core, 8 in all
        (11.0, 0.5, 0.0, 0.3, 1, 2.0, 7, 5),
        # no core free: none, waiting or not
        (11.0, 3.0, 0.6, 1.0, 1, 0.1, 0, 0),
        # the workers kept up (the step did not wait): a worker per free core, no more
        (3.0, 3.0, 0.0, 1.0, 1, 1.0, 1, 0),
    ],
)
def test_workers_that_wait_on_their_reads_get_as_many_as_take_the_step_down(
    step, rest, receive, workers_cpu, had, left, expected_more, beyond
):
    busy = workers_cpu / step
    figures = WorkerFigures(
        step, rest, receive, workers_cpu, 0.2 * step, had, busy + left, 0.2 + busy + left
    )
    more, waiting = figures.workers_to_add(left)
    assert (more, waiting) == (expected_more, beyond)
    if more:
        assert had + more == _fewest_workers(figures, left)
        assert waiting == had + more - (had + more_workers(left))
    # a count below it saves no more, and with a pace to spare none above it saves more
    if waiting:
        assert figures.saving(more - 1) <= figures.saving(more)
        capped = had + more >= MAX_WORKERS_PER_CORE * figures.all_cores - 1
        assert capped or figures.saving(more + 1) == pytest.approx(figures.saving(more))


def test_the_remedy_names_the_workers_beyond_the_free_cores():
    text = remedy_workers({"free_cores": 3.0, "loader_workers": 1, "loader_waiting_workers": 1.0})
    assert text is not None and text[0] == 4
    assert "the 1 the run had, 2 for the free core(s) and 1 besides" in text[1]
    assert "spend part of each batch waiting" in text[1]
    assert "needs a core of its own" not in text[1]


def _finding_with_a_free_core(run: Any, fed_by: str) -> Any:
    """The input-pipeline finding of ``run``, whose step waited on ``fed_by``: the test fails
    without one, and is skipped where other work took the cores (no worker to add)."""
    found = [f for f in run.advise() if f.rule == "input-pipeline"]
    assert found, f"a step that waits on {fed_by} is bound by loading"
    if found[0].evidence["free_cores"] < 1:
        pytest.skip("other work took the cores: no worker to add")
    return found[0]


def _fewest_inline_workers(
    load: float, cpu: float, kept: float, free: int, all_cores: float, batch: float
) -> int:
    """``waiting_loader_workers`` counted another way: from a worker per free core, add one at a
    time while a worker's batch time spread over them is slower than ``WORKER_PACE_SHARE`` of
    the rest of the step plus receiving a batch, the free cores could keep one more computing,
    and the per-core cap allows it."""
    n = free
    while (load + batch) / n > WORKER_PACE_SHARE * kept:
        if (n + 1) * (cpu + batch) > free * (load + batch) + 1e-6:
            break
        if n + 1 > MAX_WORKERS_PER_CORE * all_cores:
            break
        n += 1
    return n


@pytest.mark.parametrize(
    ("load", "cpu", "rest", "free", "all_cores", "expected"),
    [
        # a Dataset that computes throughout: a worker per free core, however slow the loading
        (8.0, 8.0, 1.0, 1, 2.0, 1),
        (8.0, 7.5, 1.0, 2, 3.0, 2),
        # one that waits most of each batch: more, as many as bring the pace to 3/4 of the rest
        (4.0, 0.1, 0.5, 1, 2.0, 5),
        # ... no more than the free cores can keep computing: two workers' CPU fits the core
        # here (2 x (1.5 + 0.8) <= 4.0 + 0.8), a second one's does not there
        (4.0, 1.5, 0.5, 1, 2.0, 2),
        (4.0, 1.9, 0.5, 1, 2.0, 1),
        # ... nor than MAX_WORKERS_PER_CORE per core
        (40.0, 0.1, 0.5, 1, 2.0, 8),
        # a loading already well under the rest of the step: a worker per free core
        (1.0, 0.1, 3.0, 1, 2.0, 1),
        # no core free: none
        (4.0, 0.1, 0.5, 0, 1.0, 0),
    ],
)
def test_a_dataset_that_waits_gets_workers_beyond_the_free_cores(
    load, cpu, rest, free, all_cores, expected
):
    batch, receive = 0.8, 0.8
    count = waiting_loader_workers(load, cpu, rest, free, all_cores, batch, receive)
    assert count == expected
    if free:
        assert count == _fewest_inline_workers(load, cpu, rest + receive, free, all_cores, batch)


def test_the_remedy_names_the_workers_beyond_the_free_cores_of_a_loader_without_workers():
    text = remedy_workers({"free_cores": 1.0, "loader_waiting_workers": 4.0})
    assert text is not None and text[0] == 5
    assert "(5 workers: 1 for the free core(s) and 4 besides" in text[1]
    assert "needs a core of its own" not in text[1]
    # a Dataset that computes: a worker per free core, as before
    text = remedy_workers({"free_cores": 1.0, "loader_waiting_workers": 0.0})
    assert text is not None and text[0] == 1 and "needs a core of its own" in text[1]


def test_the_combined_saving_and_the_measure_use_the_prescribed_count():
    """The combined saving's simulation and ``--measure`` take the workers a finding's saving
    was stated for from ``loader_figures``: a worker per free core and the ``loader_waiting_workers``
    besides; ``--measure``'s sentence names both."""
    from perfkit_core.advice.loader import loader_figures, loader_saving, measured_loader_estimate

    evidence = {
        "loading_per_step_ns": 8e6,
        "rest_per_step_ns": 1e6,
        "free_cores": 1.0,
        "loader_waiting_workers": 4.0,
    }
    assert loader_figures(evidence) == (8e6, 1e6, 5.0)
    assert loader_figures({**evidence, "loader_waiting_workers": 0.0}) == (8e6, 1e6, 1.0)
    # no core free: the waiting workers are not added to nothing
    assert loader_figures({**evidence, "free_cores": 0.0})[2] == 0.0
    saving = loader_saving(8e6, 1e6, 5.0, 0.8e6)
    text = measured_loader_estimate(0.8e6, 0.8e6, 8e6, 1e6, 5.0, saving, waiting=4)
    assert "With 5 workers (1 for the free core(s) and 4 besides, for a Dataset that waits)" in text
    assert "(8.000 + 0.800) / 5.0 ms" in text
    text = measured_loader_estimate(0.8e6, 0.8e6, 8e6, 1e6, 1.0, saving)
    assert "With 1.0 free core(s), the step becomes" in text


def test_a_loader_without_workers_whose_dataset_waits_is_given_workers_for_its_waits(tmp_path):
    """A real torch loop whose DataLoader has no workers, its Dataset asleep through most of
    each batch (as reads from a slow disk are): the step timer times the training thread's CPU
    time while it took its batches (``data_cpu``) beside their wall time (``data``), so the
    rule sees the waits and prescribes workers beyond the free cores. The count is recounted
    one worker at a time from the step timer's record, and the saving from the model with that
    count; without the ``data_cpu`` phase the same run is given a worker per free core."""
    from torch_profiles import waiting_inline_run

    import perfkit_core
    from perfkit_core.advice.loader import loader_saving
    from perfkit_core.advice.text import duration_text

    folder, record = waiting_inline_run(tmp_path)
    phases = record["phases"]
    data = sum(phases["data"]["unprofiled_ns"]) / len(phases["data"]["unprofiled_ns"])
    cpu = sum(phases["data_cpu"]["unprofiled_ns"]) / len(phases["data_cpu"]["unprofiled_ns"])
    # the Dataset slept through most of its loading, and the step's wall time counts the
    # loading's wall time once, not its CPU time besides
    assert 0 < cpu < 0.5 * data
    run = perfkit_core.load(folder)
    finding = _finding_with_a_free_core(run, "a Dataset the training thread loads asleep")
    ev = finding.evidence
    assert ev["loading_per_step_ns"] == pytest.approx(data)
    assert ev["loading_cpu_per_step_ns"] == pytest.approx(cpu)
    assert any(f", {duration_text(cpu)} of it on its CPU: the Dataset" in d for d in finding.details)
    free = int(ev["free_cores"])
    usable = record["usable_cores"]
    batch, receive = ev["loader_batch_ns"], ev["loader_receive_ns"]
    slow_rest, slow_load = ev["training_slowdown"], ev["loading_slowdown"]
    kept = ev["rest_per_step_ns"] * slow_rest + receive
    total = _fewest_inline_workers(
        data * slow_load, cpu * slow_load, kept, free, usable, batch
    )
    assert total == free + ev["loader_waiting_workers"]
    assert total > free, "workers that sleep most of each batch overlap beyond the free cores"
    want = loader_saving(
        data, ev["rest_per_step_ns"], total, batch, 0.0, receive, (slow_rest, slow_load)
    )
    assert finding.saving_ns == pytest.approx(want)
    waiting = total - free
    assert f"num_workers={total}," in finding.remedy
    assert f"{free} for the free core(s) and {waiting} besides" in finding.remedy
    assert f"{total} workers: one for each of the {free} free core(s)" in finding.estimate
    assert (
        f"The Dataset spent {duration_text(data - cpu)} of its {duration_text(data)} per step "
        f"waiting (for reads, a sleep), not on a CPU (its CPU time, {duration_text(cpu)},"
    ) in finding.estimate
    assert "needs a core of its own" not in finding.estimate
    # the same run without the training thread's CPU time over its batches: a worker per core
    del run.meta["step_timer"]["phases"]["data_cpu"]
    before = next(f for f in run.advise() if f.rule == "input-pipeline")
    assert "loader_waiting_workers" not in before.evidence
    assert f"num_workers={free}," in before.remedy
    assert before.saving_ns < finding.saving_ns


def test_a_worker_more_for_each_whole_or_partial_core_left():
    assert more_workers(MIN_FREE_CORE - 0.01) == 0
    assert more_workers(MIN_FREE_CORE) == 1
    assert [more_workers(c) for c in (0.49, 1.0, 1.01, 2.5)] == [1, 1, 2, 3]


def test_the_free_cores_leave_out_the_cores_the_runs_workers_kept_busy():
    record = {
        "cpu_count": 4,
        "usable_cores": 4.0,
        "process_cores": 1.0,
        "children_cores": 1.4,
        "children_ran": 2,
        "idle_cores": 1.55,
        "idle_resolution_cores": 0.05,
    }
    free, how = loader_cores(SimpleNamespace(meta={"step_timer": record}))
    assert free == 2.0  # 4 - 1.0 - 1.4 = 1.6 cores, to the nearest whole core
    assert "4 cores less the 1.00 the training process kept busy and the 1.40 its 2 child" in how
    assert "(such as loader workers) kept busy" in how
    assert "shows no other work taking them" in how
    # fewer idle than that, beyond the ticks' error: other work took the rest
    free, how = loader_cores(SimpleNamespace(meta={"step_timer": {**record, "idle_cores": 1.2}}))
    assert (
        free == 1.0
        and "other work took 0.40 of the 1.60 the training process and its children" in how
    )


def test_the_remedy_adds_workers_to_those_the_run_had():
    more = remedy_workers({"free_cores": 2.0, "loader_workers": 3})
    assert more is not None and more[0] == 5 and "the 3 the run had, and 2 for the free" in more[1]
    none = remedy_workers({"free_cores": 0.0, "loader_workers": 3})
    assert none is not None and none[0] == 3 and "more than the 3 worker(s) the run had" in none[1]
    # a count that is no whole number of 1 or more is not the run's workers
    for had in (0, True, 1.5, None):
        assert remedy_workers({"free_cores": 2.0, "loader_workers": had}) == (
            2,
            "(2 worker(s): the free core(s) the saving was estimated for; each worker needs a "
            "core of its own.)",
        )


@needs_children
def test_a_paddle_loader_with_a_worker_is_advised_from_the_workers_cpu(tmp_path):
    """A real Paddle loop fed by one DataLoader worker: the step timer times the worker as a
    child process, and the input-pipeline finding (where it fires) states the free cores
    without the worker's core and the saving of more workers from the worker's CPU per step,
    recomputed here from the record."""
    pytest.importorskip("paddle")
    from paddle_profiles import slow_loader_run

    import perfkit_core
    from perfkit_core.advice.loader_cores import IDLE_RESOLUTION_CORES

    folder, record = slow_loader_run(tmp_path, 1)
    assert record["children_ran"] >= 1 and record["children_cores"] > 0
    run = perfkit_core.load(folder)
    found = [f for f in run.advise() if f.rule == "input-pipeline"]
    if not found:
        pytest.skip("the worker kept up: no input-pipeline finding to check")
    ev = found[0].evidence
    assert ev["loader_workers"] == record["children_ran"]
    assert ev["loader_workers_cores"] == record["children_cores"]
    left = record["usable_cores"] - record["process_cores"] - record["children_cores"]
    idle, resolution = record["idle_cores"], record["idle_resolution_cores"]
    if resolution <= IDLE_RESOLUTION_CORES and idle < left - resolution:
        left = idle
    assert ev["loader_free_cores"] == pytest.approx(max(left, 0.0))
    step = ev["basis_step_ns"]
    waits = ev["data_unprofiled_per_step_ns"]
    assert ev["loader_workers_cpu_per_step_ns"] == pytest.approx(record["children_cores"] * step)
    assert ev["loader_receive_ns"] <= waits  # the waits hold receiving a batch
    # the workers may use the cores they kept busy and those left, unrounded, and with the
    # training process, the cores it kept busy as well
    limit = record["children_cores"] + max(left, 0.0)
    assert ev["loader_workers_core_limit"] == pytest.approx(limit)
    assert ev["loader_machine_cores"] == pytest.approx(record["process_cores"] + limit)
    assert ev["loader_process_cpu_per_step_ns"] == pytest.approx(record["process_cores"] * step)
    figures = WorkerFigures(
        step,
        step - waits,
        ev["loader_receive_ns"],
        record["children_cores"] * step,
        record["process_cores"] * step,
        record["children_ran"],
        limit,
        record["process_cores"] + limit,
    )
    # a worker more for each whole or partial core left (at least MIN_FREE_CORE of one), and
    # more while the worker's waits bound the step
    if more_workers(max(left, 0.0)):
        assert ev["free_cores"] == _fewest_workers(figures, max(left, 0.0)) - figures.had
    else:
        assert ev["free_cores"] == 0.0
    assert found[0].saving_ns == pytest.approx(figures.saving(ev["free_cores"]))
    assert "The run's loader already loaded in worker processes" in found[0].estimate
    workers = record["children_ran"] + int(ev["free_cores"])
    assert f"num_workers={workers}," in found[0].remedy


@needs_children
def test_a_worker_that_waits_on_its_reads_is_promised_what_another_worker_takes_off(tmp_path):
    """A real torch loop fed by one DataLoader worker whose Dataset sleeps through most of each
    batch (as reads from a slow disk do): the worker made a batch every step, little of it on
    a CPU, and a second worker waits beside it. The saving is recomputed here from the step
    timer's record: the step less the longest of the rest of the step plus receiving a batch,
    the worker's batch time (the step) spread over the workers, their CPU over the cores they
    may use, and both processes' CPU over theirs. Spreading only the workers' CPU promised
    nothing here, where a second worker halves the step."""
    from torch_profiles import waiting_worker_run

    import perfkit_core
    from perfkit_core.advice.text import duration_text

    folder, record = waiting_worker_run(tmp_path)
    assert record["children_ran"] == 1
    run = perfkit_core.load(folder)
    finding = _finding_with_a_free_core(run, "a sleeping worker")
    ev = finding.evidence
    step = ev["basis_step_ns"]
    had, more = record["children_ran"], ev["free_cores"]
    workers_cpu = record["children_cores"] * step
    process_cpu = record["process_cores"] * step
    limit = ev["loader_workers_core_limit"]
    # the worker slept through most of its batch: its CPU is under half the step
    assert workers_cpu < 0.5 * step
    assert ev["loader_worker_batch_ns"] == pytest.approx(step * had)
    rest = step - ev["data_unprofiled_per_step_ns"]
    total = had + more
    after = max(
        rest + ev["loader_receive_ns"],
        step * had / total,
        workers_cpu / min(total, limit),
        (process_cpu + workers_cpu) / ev["loader_machine_cores"],
    )
    assert finding.saving_ns == pytest.approx(max(step - after, 0.0))
    # the count: a worker per free core, and more while the worker's waits bound the step
    figures = WorkerFigures(
        step,
        rest,
        ev["loader_receive_ns"],
        workers_cpu,
        process_cpu,
        had,
        limit,
        ev["loader_machine_cores"],
    )
    assert total == _fewest_workers(figures, ev["loader_free_cores"])
    assert ev["loader_waiting_workers"] == total - had - more_workers(ev["loader_free_cores"])
    assert f"num_workers={int(total)}," in finding.remedy
    if ev["loader_waiting_workers"]:
        waiting = int(ev["loader_waiting_workers"])
        assert f" and {waiting} besides, since a worker spends part of each batch" in (
            finding.estimate
        )
        assert f"and {waiting} besides, since the workers spend" in finding.remedy
    assert finding.saving_ns > 0.25 * step
    assert f"made one every {duration_text(step * had)}" in finding.estimate
    assert "not expected to pay" not in finding.estimate


@needs_children
def test_more_workers_are_followed_by_their_count(tmp_path):
    """A run whose loader had one worker, followed by one with two: the setting the remedy
    changes is the count of workers the step timer timed, so ``perfkit compare`` reads the
    finding as acted on whatever share of the waits went (they fall by less than half where
    the added worker shares a core)."""
    pytest.importorskip("paddle")
    from paddle_profiles import slow_loader_run

    import perfkit_core
    from perfkit_core.advice.followup import follow_up
    from perfkit_core.advice.remedy_state import loader_mode

    one, one_record = slow_loader_run(tmp_path / "one", 1, name="one")
    two, two_record = slow_loader_run(tmp_path / "two", 2, name="two")
    before, after = perfkit_core.load(one), perfkit_core.load(two)
    assert loader_mode(before) == f"{one_record['children_ran']} worker process" + (
        "es" if one_record["children_ran"] != 1 else ""
    )
    assert two_record["children_ran"] == 2
    assert loader_mode(after) == "2 worker processes"
    rows, _ = follow_up(before, after)
    row = next((r for r in rows if r.rule == "input-pipeline"), None)
    if row is None:
        pytest.skip("one worker kept up: no input-pipeline finding to follow")
    assert row.state_before == loader_mode(before) and row.state_after == "2 worker processes"
    assert row.acted_on


def _loader_remedy(framework: str, **fixed):
    """The input-pipeline remedy text of ``framework``'s adapter, as a function of the
    finding's evidence (``fixed`` added to each)."""
    if framework == "torch":
        from perfkit_torch.remedies import remedy
    else:
        from perfkit_paddle.remedies import remedy

    def text(**evidence) -> str:
        return remedy(SimpleNamespace(rule="input-pipeline", evidence={**evidence, **fixed}))

    return text


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_the_remedy_of_a_run_with_workers_says_to_add_them(framework):
    """The loader remedy of a run whose loader had workers opens with adding workers, not with
    loading in worker processes, and prescribes the run's count and the added ones."""
    text = _loader_remedy(framework)
    more = text(free_cores=2.0, loader_workers=3, has_device=False)
    assert more.startswith("Give the loader more worker processes (it has 3), so a batch")
    assert "num_workers=5," in more and "the 3 the run had, and 2 for the free" in more
    none = text(free_cores=0.0, loader_workers=3, has_device=False)
    assert "num_workers=3," in none and "No core was free for more than the 3" in none
    fresh = text(free_cores=1.0, has_device=False)
    assert fresh.startswith("Load batches in worker processes")


class _SlowSamples:
    """A map-style Dataset whose samples cost CPU (a numpy transform repeated), enough that one
    loader worker cannot keep up with a tiny model's steps."""

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, index: int):
        import numpy as np

        x = np.full(256, float(index % 7), dtype=np.float32)
        for _ in range(60):
            x = np.tanh(x * 1.0001 + 0.1)
        return x[:16].copy(), index % 4


def _torch_worker_run_without_timer(directory: Path) -> Path:
    """A tiny torch model fed by ``_SlowSamples`` through one DataLoader worker, profiled by
    perfkit's handler with no step timer: the run says its loader had workers (the
    multi-process iterator's spans) but not how many, or what a batch cost them."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from perfkit_torch.handler import on_trace_ready

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(_SlowSamples(), batch_size=8, num_workers=1)
    batches = iter(loader)
    handler = on_trace_ready(directory, worker_name="workers", background=False)
    try:
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=6, repeat=1),
            on_trace_ready=handler,
        ) as prof:
            for _ in range(8):
                x, y = next(batches)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
                prof.step()
    finally:
        batches._shutdown_workers()
    assert handler.runs, handler.failures
    return Path(handler.runs[0])


def test_a_loader_with_untimed_workers_is_promised_at_most_its_waits(tmp_path):
    """A real torch loop fed by one worker, recorded without a step timer: the finding does not
    model loading moved out of the training process (it already was), but promises at most the
    waits for batches less receiving one, recomputed here from the raw events; the remedy adds
    to the user's workers, whose count the run does not hold, and ``--measure`` keeps the
    bound (there is no hand-over to replay)."""
    import numpy as np

    import perfkit_core
    from perfkit_core.advice.loader import loader_figures
    from perfkit_core.advice.loader_cores import UNTIMED_KEY
    from perfkit_core.advice.text import duration_text
    from perfkit_core.events.schema import str_values

    run = perfkit_core.load(_torch_worker_run_without_timer(tmp_path))
    found = [f for f in run.advise() if f.rule == "input-pipeline"]
    if not found:
        pytest.skip("the worker kept up: no input-pipeline finding to check")
    finding = found[0]
    ev = finding.evidence
    assert ev[UNTIMED_KEY] is True and "loader_workers" not in ev
    # the waits: the multi-process iterator's spans in the profiled steps, per step
    events = run.events
    kinds = str_values(events["kind"])
    names = str_values(events["name"])
    spans = (kinds == "dataloader") & (events["step"].to_numpy() >= 0)
    assert all("MultiProcess" in str(n) for n in names[spans])
    steps = len(np.unique(events["step"].to_numpy()[kinds == "step"]))
    waits = float(events["dur_ns"].to_numpy()[spans].sum()) / steps
    assert ev["data_unprofiled_per_step_ns"] == pytest.approx(waits, rel=0.02)
    receive = ev["loader_receive_ns"]  # the figure the text states: at most the waits
    assert receive <= ev["data_unprofiled_per_step_ns"]
    assert f"less receiving one ({duration_text(receive)}" in finding.estimate
    assert finding.saving_ns == pytest.approx(ev["data_unprofiled_per_step_ns"] - receive)
    assert finding.estimate.startswith("At most ")
    assert "does not say how many" in finding.estimate
    assert ev["free_cores"] == 1.0 and "loader_free_cores" not in ev  # no timer: one more
    assert finding.remedy.startswith(
        "Give the loader more worker processes (the run does not say how many it has)"
    )
    assert "num_workers=num_workers + 1," in finding.remedy
    assert "1 more, where a core is free for it" in finding.remedy
    assert loader_figures(ev) is None  # no in-process model to replay or combine
    measured = next(f for f in run.advise(measure=True) if f.rule == "input-pipeline")
    assert measured.saving_ns == pytest.approx(finding.saving_ns)


def test_untimed_workers_get_a_worker_per_core_a_timer_found_free():
    """Where a step timer timed the machine but not the workers (started by another thread),
    the workers to add follow its free cores, and under ``MIN_FREE_CORE`` there is no
    saving; with no timer, one worker more and the bound."""
    from perfkit_core.advice.loader_cores import UNTIMED_KEY
    from perfkit_core.advice.loader_workers import untimed_workers_estimate

    saving, text, ev = untimed_workers_estimate(4e6, 1e6, "timed", (1.6, 2.0, "2 cores less 0.4"))
    assert saving == pytest.approx(3e6) and ev["free_cores"] == 2.0
    assert ev["loader_free_cores"] == 1.6 and ev[UNTIMED_KEY] is True
    assert "1.60 core(s) were free (2 cores less 0.4)" in text
    saving, text, ev = untimed_workers_estimate(4e6, 1e6, "timed", (0.1, 0.0, "2 cores less 1.9"))
    assert saving == 0.0 and ev["free_cores"] == 0.0 and "No core is free" in text
    # receiving a batch is at most the waits, which hold it
    saving, _, ev = untimed_workers_estimate(1e6, 3e6, "timed", None)
    assert saving == 0.0 and ev["free_cores"] == 1.0 and "loader_free_cores" not in ev


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_the_remedy_of_untimed_workers_adds_to_the_users_count(framework):
    text = _loader_remedy(framework, loader_workers_untimed=True)
    found = text(free_cores=2.0, loader_free_cores=1.7, has_device=False)
    assert found.startswith("Give the loader more worker processes (the run does not say")
    assert "num_workers=num_workers + 2," in found and "2 more for the free core(s)" in found
    none = text(free_cores=0.0, loader_free_cores=0.1, has_device=False)
    assert "num_workers=num_workers," in none and "No core was free for more" in none
