"""The step timer's phase timers (``perfkit_phase_timers``): the optimizer step timed as the
program runs, in torch and Paddle. The optimizer rule's use of that time is tested on a real
run in tests/test_advice_savings.py."""

from __future__ import annotations

import time

import pytest

import perfkit_core
from perfkit_core.capture.step_timer import StepTimer


def _timed_steps(step, optimizer_step, steps: int = 12) -> tuple[StepTimer, list[int]]:
    """Run ``steps`` steps under a step timer; around each optimizer step, a clock of the
    test's own. Returns (the timer, the test's optimizer times in ns)."""
    timer = perfkit_core.step_timer(None, warmup=0)
    outside: list[int] = []
    for _ in range(steps):
        with timer.step():
            step()
            start = time.perf_counter_ns()
            optimizer_step()
            outside.append(time.perf_counter_ns() - start)
    return timer, outside


def _check_against_outside_clock(timer: StepTimer, outside: list[int]) -> None:
    record = timer.record()
    kept = record["unknown_ns"] or record["unprofiled_ns"]
    timed = (
        record["phases"]["optimizer"]["unknown_ns"]
        or record["phases"]["optimizer"]["unprofiled_ns"]
    )
    assert len(timed) == len(kept) == len(outside)
    for inner, outer, step_ns in zip(timed, outside, kept, strict=True):
        # the hook's clock runs inside the test's clock, which runs inside the step's
        assert 0 < inner <= outer <= step_ns


def test_torch_optimizer_steps_are_timed_and_the_hooks_removed():
    torch = pytest.importorskip("torch")
    from torch.optim import optimizer as torch_optimizer

    hooks_before = len(torch_optimizer._global_optimizer_pre_hooks)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)])
    optimizer = torch.optim.Adam(model.parameters(), foreach=False)

    def step() -> None:
        model(torch.randn(4, 16)).sum().backward()

    timer, outside = _timed_steps(step, optimizer.step)
    _check_against_outside_clock(timer, outside)
    timer.close()
    before = timer.record()["phases"]["optimizer"]
    optimizer.step()  # outside any step and after close: not counted anywhere
    assert timer.record()["phases"]["optimizer"] == before
    assert len(torch_optimizer._global_optimizer_pre_hooks) == hooks_before


def test_paddle_optimizer_steps_are_timed_and_the_wrappers_removed():
    paddle = pytest.importorskip("paddle")
    model = paddle.nn.Sequential(*[paddle.nn.Linear(16, 16) for _ in range(6)])
    optimizer = paddle.optimizer.Adam(parameters=model.parameters())
    original = paddle.optimizer.Adam.step

    def step() -> None:
        model(paddle.randn([4, 16])).sum().backward()

    # called through the instance: the timer wraps the class's step when the first step starts
    timer, outside = _timed_steps(step, lambda: optimizer.step())
    _check_against_outside_clock(timer, outside)
    timer.close()
    assert paddle.optimizer.Adam.step is original


def test_a_phase_first_seen_late_lines_up_with_the_steps():
    timer = perfkit_core.step_timer(None, warmup=1)
    for i in range(4):
        with timer.step():
            if i >= 2:
                timer._on_phase("optimizer", 5)
    timer._on_phase("optimizer", 7)  # outside a step: ignored
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"  # torch imported: unprofiled
    assert record["phases"]["optimizer"][key] == [0, 5, 5]
    assert len(record[key]) == 3


def test_a_closed_timer_and_its_profiler_go_with_their_last_reference():
    """A timer that timed steps, once closed, holds no reference cycle: it, and the profiler
    it was given, are freed with their last reference, not at the garbage collector's next
    run (Paddle creates no second Profiler while one lives). The steps' times, and a step
    raising out of its block, are kept as before."""
    import gc
    import weakref

    class Profiler:
        """A profiler object no adapter knows."""

    profiler = Profiler()
    timer = perfkit_core.step_timer(profiler, warmup=0)
    for _ in range(3):
        with timer.step():
            pass
    with pytest.raises(ZeroDivisionError), timer.step():
        1 / 0  # noqa: B018
    assert len(timer.unknown_ns) == 4
    timer.close()
    gone = weakref.ref(timer), weakref.ref(profiler)
    collecting = gc.isenabled()
    gc.disable()
    try:
        del timer, profiler
        assert [ref() for ref in gone] == [None, None]
    finally:
        if collecting:
            gc.enable()


def _check_batches_timed(batches, restored) -> None:
    """Run steps that each take a batch from ``batches`` under a step timer: each batch's
    ``data`` time lies inside the test's clock around ``next()``, which lies inside the step;
    once the timer is closed, its wrapper is gone (``restored()``) and a batch counts nowhere."""
    timer, outside = _timed_steps(lambda: None, lambda: next(batches))
    record = timer.record()
    kept = record["unknown_ns"] or record["unprofiled_ns"]
    timed = record["phases"]["data"]["unknown_ns"] or record["phases"]["data"]["unprofiled_ns"]
    assert len(timed) == len(kept) == len(outside)
    for inner, outer, step_ns in zip(timed, outside, kept, strict=True):
        assert 0 < inner <= outer <= step_ns
    timer.close()
    assert restored()
    next(batches)  # after close: not counted anywhere
    assert timer.record()["phases"]["data"] == record["phases"]["data"]


def test_torch_dataloader_batches_are_timed_and_the_wrapper_removed():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, dataloader

    class Squares:
        def __len__(self) -> int:
            return 1000

        def __getitem__(self, index: int):
            return torch.full((4,), float(index * index))

    original = dataloader._BaseDataLoaderIter.__next__
    batches = iter(DataLoader(Squares(), batch_size=8))  # made before the timer: still timed
    _check_batches_timed(batches, lambda: dataloader._BaseDataLoaderIter.__next__ is original)


@pytest.mark.parametrize("workers", [0, 1])
def test_paddle_dataloader_batches_are_timed_and_the_wrapper_removed(workers):
    """Both of Paddle's DataLoader iterators (its loading thread's, and its workers') have
    their ``__next__`` timed: the training thread's wall time getting each batch."""
    paddle = pytest.importorskip("paddle")
    import numpy as np
    from paddle.io.dataloader import dataloader_iter

    class Squares(paddle.io.Dataset):
        def __len__(self) -> int:
            return 1000

        def __getitem__(self, index: int):
            return np.full((4,), float(index * index), dtype="float32")

    kind = "_DataLoaderIterMultiProcess" if workers else "_DataLoaderIterSingleProcess"
    original = getattr(dataloader_iter, kind).__next__
    batches = iter(paddle.io.DataLoader(Squares(), batch_size=8, num_workers=workers))
    assert type(batches).__name__ == kind
    _check_batches_timed(batches, lambda: getattr(dataloader_iter, kind).__next__ is original)


def _slow_batches(sample_s: float, batch_size: int):
    """An iterator over a torch DataLoader (no workers) whose samples each take ``sample_s``
    seconds to load."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    class Slow:
        def __len__(self) -> int:
            return 1000

        def __getitem__(self, index: int):
            time.sleep(sample_s)
            return torch.full((4,), float(index))

    return iter(DataLoader(Slow(), batch_size=batch_size))


def test_a_batch_taken_before_the_step_belongs_to_it():
    """The loop of the docs (``for x, y in loader: with timer.step(): ...``) takes each batch
    between two steps: its loading is the next step's ``data`` phase and part of that step's
    wall time, as the profiler's step counts it. The wrapper's clock runs inside the test's
    clock around ``next()``; the step is the batch's wait plus the block, inside the test's
    clock around both; the block's own work (a 2 ms sleep) is not taken for loading."""
    batches = _slow_batches(0.0005, 4)  # 2 ms of loading a batch
    timer = perfkit_core.step_timer(None, warmup=0)
    with timer.step():  # installs the timers: the batches after it are timed
        next(batches)
    fetch_clock: list[int] = []
    block_clock: list[int] = []
    whole_clock: list[int] = []
    for _ in range(6):
        outer = time.perf_counter_ns()
        next(batches)
        fetched = time.perf_counter_ns()
        with timer.step():
            time.sleep(0.002)
        end = time.perf_counter_ns()
        fetch_clock.append(fetched - outer)
        whole_clock.append(end - outer)
        block_clock.append(end - fetched)
    timer.close()
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    data = record["phases"]["data"][key][1:]
    steps = record[key][1:]
    assert len(data) == len(steps) == 6
    for loaded, fetch, step_ns, whole, block in zip(
        data, fetch_clock, steps, whole_clock, block_clock, strict=True
    ):
        assert 1_500_000 < loaded <= fetch
        assert loaded + 2_000_000 <= step_ns <= whole
        assert step_ns - loaded <= block  # the block's time, the batch's apart
    next(batches)  # after close: not counted anywhere
    assert timer.record()["phases"]["data"] == record["phases"]["data"]


def _busy_batches(sample_s: float, sleep_s: float, batch_size: int):
    """An iterator over a torch DataLoader (no workers) whose samples each compute for
    ``sample_s`` seconds of this thread's CPU time, then sleep ``sleep_s``."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    class Busy:
        def __len__(self) -> int:
            return 1000

        def __getitem__(self, index: int):
            end = time.thread_time() + sample_s
            while time.thread_time() < end:
                pass
            time.sleep(sleep_s)
            return torch.full((4,), float(index))

    return iter(DataLoader(Busy(), batch_size=batch_size))


def test_the_training_threads_cpu_time_over_a_batch_is_kept_beside_its_wall_time():
    """Without workers the training thread runs the Dataset itself: the ``data_cpu`` phase
    holds its CPU time over each batch, read here from the thread's own CPU clock around
    ``next()``, and the ``data`` phase the wall time, which includes the Dataset's sleep. The
    step's wall time counts the batch once: the CPU time is within the wall time, not added
    to it."""
    batches = _busy_batches(0.0005, 0.0005, 4)  # 2 ms of CPU and 2 ms asleep a batch
    timer = perfkit_core.step_timer(None, warmup=0)
    with timer.step():  # installs the timers: the batches after it are timed
        next(batches)
    cpu_clock: list[int] = []
    whole_clock: list[int] = []
    for _ in range(5):
        outer = time.perf_counter_ns()
        cpu_before = time.thread_time_ns()
        next(batches)
        cpu_clock.append(time.thread_time_ns() - cpu_before)
        with timer.step():
            time.sleep(0.001)
        whole_clock.append(time.perf_counter_ns() - outer)
    timer.close()
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    data = record["phases"]["data"][key][1:]
    data_cpu = record["phases"]["data_cpu"][key][1:]
    steps = record[key][1:]
    assert len(data_cpu) == len(data) == len(steps) == 5
    for cpu, thread_cpu, loaded, step_ns, whole in zip(
        data_cpu, cpu_clock, data, steps, whole_clock, strict=True
    ):
        assert 1_800_000 < cpu <= thread_cpu  # the Dataset's 2 ms of CPU, inside the test's
        assert cpu + 1_800_000 < loaded  # ... and its 2 ms asleep besides, in the wall time
        assert loaded + 1_000_000 <= step_ns <= whole  # the batch counted once


def test_only_the_last_batch_before_a_step_is_the_steps():
    """An evaluation loop between two steps takes many batches: only the last batch taken
    before the step counts in it (the loop's own), not the evaluation's loading."""
    batches = _slow_batches(0.002, 1)  # 2 ms a batch
    evaluation = _slow_batches(0.002, 5)  # 10 ms a batch
    timer = perfkit_core.step_timer(None, warmup=0)
    with timer.step():
        pass
    for _ in range(3):
        next(evaluation)
    fetch = time.perf_counter_ns()
    next(batches)
    fetched = time.perf_counter_ns()
    with timer.step():
        pass
    end = time.perf_counter_ns()
    timer.close()
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    loaded = record["phases"]["data"][key][1]
    # the training batch, inside the test's clock around its next() that leaves out the
    # evaluation's 30 ms; the step inside the clock from that next() to the step's end
    assert 1_500_000 < loaded <= fetched - fetch
    assert record[key][1] <= end - fetch


def test_a_batch_another_thread_takes_between_steps_is_not_the_steps():
    """Only the thread that runs the steps hands its batch to the next step: a loader read by
    another thread between two steps adds nothing to them."""
    torch = pytest.importorskip("torch")
    import threading

    from torch.utils.data import DataLoader

    batches = iter(DataLoader(torch.randn(1000, 4), batch_size=8))
    timer = perfkit_core.step_timer(None, warmup=0)
    with timer.step():
        pass
    reader = threading.Thread(target=lambda: [next(batches) for _ in range(5)])
    reader.start()
    reader.join()
    with timer.step():
        pass
    timer.close()
    record = timer.record()
    assert all(ns == 0 for ns in record["phases"].get("data", {}).get("unknown_ns", [0]))


def test_torch_forward_and_backward_are_timed_and_the_wrapper_removed():
    """The backward phase is the wall time of ``loss.backward()`` (inside a clock of the
    test's own around it); the forward phase runs from the batch's arrival (a DataLoader's
    ``__next__`` returning) to the backward call, around the test's clock of the model's call."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    original = torch.autograd.backward
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)])
    batches = iter(DataLoader(torch.randn(1000, 16), batch_size=8))
    timer = perfkit_core.step_timer(None, warmup=0)
    forward_clock: list[int] = []
    backward_clock: list[int] = []
    for _ in range(10):
        with timer.step():
            x = next(batches)
            start = time.perf_counter_ns()
            loss = model(x).sum()
            middle = time.perf_counter_ns()
            loss.backward()
            forward_clock.append(middle - start)
            backward_clock.append(time.perf_counter_ns() - middle)
            model.zero_grad()
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    forward = record["phases"]["forward"][key]
    backward = record["phases"]["backward"][key]
    for fwd, outer_fwd, bwd, outer_bwd, step_ns in zip(
        forward, forward_clock, backward, backward_clock, record[key], strict=True
    ):
        # the test's clock around the model runs inside the forward phase; the wrapper's
        # clock around backward runs inside the test's; both inside the step
        assert 0 < outer_fwd <= fwd
        assert 0 < bwd <= outer_bwd
        assert fwd + bwd <= step_ns
    timer.close()
    assert torch.autograd.backward is original
    model(next(batches)).sum().backward()  # after close: not counted anywhere
    assert timer.record()["phases"]["backward"] == record["phases"]["backward"]


def test_torch_forward_without_a_dataloader_runs_from_the_last_optimizer_step():
    """A loop that makes its batches itself: the forward phase starts where the previous
    optimizer step ended, so the first step (no optimizer step before it) has none."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = perfkit_core.step_timer(None, warmup=0)
    for _ in range(5):
        with timer.step():
            model(torch.randn(4, 16)).sum().backward()
            optimizer.step()
    timer.close()
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    forward = record["phases"]["forward"][key]
    assert forward[0] == 0 and all(t > 0 for t in forward[1:])


def test_torch_forward_counts_nothing_from_before_its_step():
    """The forward phase runs from the last optimizer step, which the step before ran: what
    runs between two steps (here a 20 ms sleep, the loop's own code, ``zero_grad``) belongs to
    neither, so the phases of a step never add up to more than the step, and the forward holds
    the model's call (the test's clock around it)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    timer = perfkit_core.step_timer(None, warmup=0)
    model_clock: list[int] = []
    step_clock: list[int] = []  # the test's clock around each step, the sleep outside it
    for _ in range(6):
        outer = time.perf_counter_ns()
        with timer.step():
            start = time.perf_counter_ns()
            loss = model(torch.randn(4, 16)).sum()
            model_clock.append(time.perf_counter_ns() - start)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        step_clock.append(time.perf_counter_ns() - outer)
        time.sleep(0.02)  # between the steps
    timer.close()
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    phases = record["phases"]
    for i, step_ns in enumerate(record[key]):
        forward = phases["forward"][key][i]
        inside = forward + phases["backward"][key][i] + phases["optimizer"][key][i]
        assert inside <= step_ns <= step_clock[i]
        if i:  # the first step has no optimizer step before it
            assert 0 < model_clock[i] <= forward


def test_the_training_threads_cpu_time_is_kept_per_step():
    """The timer keeps the CPU time of the thread that ran each step (``training_cpu``), in the
    lists that line up with the steps: a step that sleeps spends almost none of its wall time
    on the CPU, one that computes spends it there, and CPU time never exceeds the wall time of
    a single thread's step."""
    import time

    timer = perfkit_core.step_timer(None, warmup=0)
    with timer.step():
        time.sleep(0.05)
    with timer.step():
        end = time.thread_time_ns() + 30_000_000
        while time.thread_time_ns() < end:
            pass
    record = timer.record()
    key = "unknown_ns" if record["unknown_ns"] else "unprofiled_ns"
    walls, cpus = record[key], record["phases"]["training_cpu"][key]
    assert len(cpus) == len(walls) == 2
    # two clocks (the thread's CPU clock inside the monotonic one's span): a tick apart at most
    assert all(0 <= cpu <= wall + 1_000_000 for cpu, wall in zip(cpus, walls, strict=True))
    assert cpus[0] < 0.5 * walls[0]  # asleep: its wall time went by off the CPU
    assert cpus[1] >= 30_000_000  # it ran until its thread had used 30 ms of CPU
