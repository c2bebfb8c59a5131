"""The input-pipeline finding of a training process that loads its batches itself (in a thread
of its own, Paddle's single-process loader, or in the training thread, torch's) on a machine
whose cores other work keeps busy: one worker gets a turn on the cores as long as the training
process's (``advice.loader.shared_turn_saving``)."""

from __future__ import annotations

import json

import pytest

from perfkit_core.advice.loader import shared_turn_saving


def _on_cores(folder, meta, idle_cores: float, process_cores: float):
    """The input-pipeline finding of the saved run in ``folder`` (its metadata ``meta``), its
    step timer's record set to a 2-core machine with ``idle_cores`` idle and
    ``process_cores`` of them the training process's, no child process, idle time read to
    0.01 of a core."""
    import perfkit_core

    meta["step_timer"].update(
        idle_cores=idle_cores,
        process_cores=process_cores,
        usable_cores=2.0,
        children_cores=0.0,
        idle_resolution_cores=0.01,
    )
    (folder / "meta.json").write_text(json.dumps(meta))
    return next(f for f in perfkit_core.load(folder).advise() if f.id == "input-pipeline")


def test_a_worker_takes_the_loading_out_of_the_training_processs_turn():
    """Both threads ran 24 ms of CPU in a 60 ms step on 0.4 of 2 busy cores: one worker
    leaves the training thread its 12 ms of the rest and loads its 12 ms beside it, at a turn
    of 0.4 * 2 / 2.4 cores: 60 * 12 / 24 * 2.4 / 2 = 36 ms, 24 ms saved."""
    saving = shared_turn_saving(60e6, 24e6, 12e6, 12e6, 0.4, 2.0, batch_ns=0.0, receive_ns=0.0)
    assert saving == pytest.approx(24e6)
    # the hand-over's cost goes to each side; the longer side bounds the step
    saving = shared_turn_saving(60e6, 24e6, 12e6, 8e6, 0.4, 2.0, batch_ns=3e6, receive_ns=1e6)
    assert saving == pytest.approx(60e6 - 60e6 * 15e6 / 24e6 * 1.2)
    # a loading thread too cheap to move: no saving, never a negative one
    assert shared_turn_saving(60e6, 24e6, 1e6, 23e6, 0.4, 2.0, batch_ns=0.0) == 0.0
    assert shared_turn_saving(60e6, 0.0, 12e6, 12e6, 0.4, 2.0) == 0.0


@pytest.mark.parametrize("idle_cores", [0.0, 1.0])
def test_a_busy_machine_still_gets_a_promise_for_a_worker(tmp_path, idle_cores):
    """A real Paddle run loading in its DataLoader's thread (its training thread's waits for
    batches set to half its loading thread's CPU time), its step timer's cores set to a busy
    machine (no core idle; the training process had the share of the cores its threads'
    CPU time over the step gives): the finding promises one worker's turn, recomputed here from
    its figures; with a core idle it promises that core's worker as before, without the turn."""
    pytest.importorskip("paddle")
    from paddle_profiles import slow_loader_run

    import perfkit_core

    folder, _ = slow_loader_run(tmp_path, 0)
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    # the training thread waited for its batches half as long as its loading thread loaded
    # them (it ran its ops beside the loading; a busy machine can make the waits the longer)
    phases = meta["step_timer"]["phases"]
    phases["data"]["unprofiled_ns"] = [v / 2 for v in phases["loading"]["unprofiled_ns"]]
    meta_path.write_text(json.dumps(meta))
    finding = next(f for f in perfkit_core.load(folder).advise() if f.id == "input-pipeline")
    ev = finding.evidence
    # a loading thread busy for half the step or more would itself round to a whole core for a
    # worker (its core moves to the worker): the turn is for a thread that keeps less busy, so
    # its loading is scaled to 0.3 of the step where this machine made it slower than that
    thread_share = ev["data_unprofiled_per_step_ns"] / ev["basis_step_ns"]
    if thread_share > 0.3:
        scale = 0.3 / thread_share
        for phase in ("loading", "data"):
            phases[phase]["unprofiled_ns"] = [v * scale for v in phases[phase]["unprofiled_ns"]]
        meta_path.write_text(json.dumps(meta))
        finding = next(f for f in perfkit_core.load(folder).advise() if f.id == "input-pipeline")
        ev = finding.evidence
    assert ev["data_from"] == "thread" and ev["training_cpu_per_step_ns"] > 0
    cpu = ev["data_unprofiled_per_step_ns"] + ev["training_cpu_per_step_ns"]
    share = min(cpu / ev["loader_step_ns"], 1.0)
    finding = _on_cores(folder, meta, idle_cores, share)
    ev = finding.evidence
    if idle_cores:
        assert ev["free_cores"] >= 1 and "turn_process_cores" not in ev
        return
    assert ev["free_cores"] == 0 and ev["turn_process_cores"] == pytest.approx(share)
    kept = ev["rest_per_step_ns"] * ev["training_slowdown"] + ev["loader_receive_ns"]
    spread = ev["loading_per_step_ns"] * ev["loading_slowdown"] + ev["loader_batch_ns"]
    step = ev["loader_step_ns"]
    after = step * max(kept, spread) / cpu * (2.0 + share) / 2.0
    assert finding.saving_ns == pytest.approx(max(step - after, 0.0))
    assert finding.estimate.startswith("With 1 loader worker the step would take about")
    assert f"had {share:.2f} of the 2 cores" in finding.estimate


def test_a_training_thread_that_loads_its_own_batches_gets_a_workers_turn(tmp_path):
    """A real torch run whose training thread loads its batches itself (a single-process
    DataLoader), its step timer's cores set to a busy machine (no core idle, the training
    process with 0.3 of the 2 cores): one worker takes the loading out of the training
    thread's turn, and the step becomes the longer of the rest and the loading at the turn one
    more busy process leaves it, recomputed here from the finding's figures; the remedy is one
    worker, said to be for that turn. With a core idle: that core's worker, as before."""
    pytest.importorskip("torch")
    from torch_profiles import slow_loader_run

    # a step long enough beside a batch's hand-over (1.5 to 3 ms each way on a 2-core x86
    # machine) for a worker to pay on a turn: about 9 to 30 ms of loading and 4 to 13 ms of
    # the rest, as the machine's pace goes
    folder, _ = slow_loader_run(tmp_path, width=512, hidden=1, batch_size=96)
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    # The machine's own figures are set, as its cores are below: its slowdowns beside a worker
    # and a batch's hand-over (a test run beside others measured them up to 1.4x larger, and
    # the worker then pays nothing), and the loading at half of the step where this machine
    # made it more (a loading of 2/3 of the step or more pays, after the hand-over and the
    # turn, about what it saves): what the finding does with them is what is tested.
    timer = meta["step_timer"]
    timer.update(training_slowdown=1.1, loading_slowdown=1.2, loader_batch_ns=1.5e6)
    data = timer["phases"]["data"]
    loading = sorted(data["unprofiled_ns"])[len(data["unprofiled_ns"]) // 2]
    step = sorted(timer["unprofiled_ns"])[len(timer["unprofiled_ns"]) // 2]
    assert loading > 0.4 * step, "the loading is no longer most of this run's step"
    # the finding takes the loading's mean against the median step: set to half of it (a
    # busy machine's few long or short loads moved the mean to 36% once, and the worker
    # then paid nothing on the turn)
    scale = 0.5 * step / (sum(data["unprofiled_ns"]) / len(data["unprofiled_ns"]))
    for key in ("unprofiled_ns", "profiled_ns"):
        data[key] = [v * scale for v in data[key]]
    for idle_cores in (1.0, 0.0):
        finding = _on_cores(folder, meta, idle_cores, 0.3)
        ev = finding.evidence
        assert ev["data_from"] == "timed" and ev["training_cpu_per_step_ns"] is None
        if idle_cores:
            assert ev["free_cores"] >= 1 and "turn_process_cores" not in ev
            continue
        assert ev["free_cores"] == 0 and ev["turn_process_cores"] == pytest.approx(0.3)
        assert (ev["training_slowdown"], ev["loading_slowdown"]) == pytest.approx((1.1, 1.2))
        assert ev["loader_batch_ns"] == pytest.approx(1.5e6)
        kept = ev["rest_per_step_ns"] * ev["training_slowdown"] + ev["loader_receive_ns"]
        spread = ev["loading_per_step_ns"] * ev["loading_slowdown"] + ev["loader_batch_ns"]
        step = ev["basis_step_ns"]
        assert ev["loading_per_step_ns"] + ev["rest_per_step_ns"] == pytest.approx(step)
        after = max(kept, spread) * (2.0 + 0.3) / 2.0
        assert step > after  # the worker pays, even on the busy cores
        assert finding.saving_ns == pytest.approx(step - after)
        assert finding.estimate.startswith("With 1 loader worker the step would take about")
        assert "its training thread loaded each batch itself" in finding.estimate
        assert "had 0.30 of the 2 cores" in finding.estimate
        remedy = "\n".join(str(x) for x in (finding.remedy, getattr(finding, "remedy_code", "")))
        assert "a worker process gets a turn on them of its own" in remedy
