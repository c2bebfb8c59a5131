"""The loop the real-run helpers of the tests share (``paddle_profiles``, ``torch_profiles``):
a step run under a framework's profiler, then without it, all timed by perfkit's step timer."""

from __future__ import annotations

from typing import Any


def profile_and_time(prof: Any, step: Any, handler: Any, *, profiled_steps: int = 6) -> Any:
    """Run ``step`` ``profiled_steps`` times under ``prof`` (a torch or Paddle profiler whose
    ``on_trace_ready`` is ``handler``; its schedule decides which steps it records), then 8
    steps more or as many as take 4 of the step timer's idle windows, all timed by a step timer
    (its first two steps a warm-up: a loader thread starts filling its queue) saved into the
    handler's runs; return the timer, its wrappers removed whatever happens."""
    import time

    import perfkit_core
    from perfkit_core.capture.step_timer import IDLE_WINDOW_NS

    timer = perfkit_core.step_timer(prof, warmup=2)
    try:
        prof.start()
        for _ in range(profiled_steps):
            with timer.step():
                step()
            prof.step()
        prof.stop()
        # 8 steps at least, and enough of them to close a few of the step timer's windows on
        # the machine's idle time and child processes while they run (IDLE_WINDOW_NS each):
        # eight fast steps make one window of a few ms, which counts only where nothing
        # delayed the timer's last reading by a tenth of it
        start, timed = time.perf_counter_ns(), 0
        while timed < 8 or time.perf_counter_ns() - start < 4 * IDLE_WINDOW_NS:
            with timer.step():
                step()
            timed += 1
        timer.save(handler.runs)
    finally:
        timer.close()  # the fetchers and optimizers unwrapped whatever happened
    return timer
