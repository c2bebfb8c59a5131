"""The training step Paddle's input-pipeline replays time (``perfkit_paddle.replay``): what
each op costs beside a loading thread is the step's extra CPU time over its op count, so the
count the replay divides by must be the one a profile of that step records, the count the
model multiplies by in a run."""

from __future__ import annotations

import pytest


def test_the_replayed_step_records_the_ops_the_replay_divides_by(tmp_path):
    """The replay's step, profiled with perfkit's handler over four steps: its outermost ops
    per step, as the input-pipeline finding counts them in a run (``training_ops_per_step``),
    are ``THREAD_OPS``, the backward's and the Adam step's among them."""
    paddle = pytest.importorskip("paddle")
    import paddle.profiler as profiler

    import perfkit_core
    from perfkit_core.advice.engine import make_context
    from perfkit_core.advice.rules.cpu import training_ops_per_step
    from perfkit_paddle import replay
    from perfkit_paddle.handler import on_trace_ready

    paddle.set_device("cpu")
    train, ready = replay._training_step()
    handler = on_trace_ready(tmp_path, worker_name="replay", background=False)
    with profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 6), on_trace_ready=handler
    ) as prof:
        for _ in range(7):
            train(ready)
            prof.step()
    run = perfkit_core.load(handler.runs[0])
    context = make_context(run)
    assert context.steps == 4
    assert training_ops_per_step(context) == replay.THREAD_OPS
    # the ops of the backward and of the optimizer's step are among them
    names = {str(n) for n in run.events["name"].to_list()}
    assert any(n.endswith("GradNode") for n in names), sorted(names)
    assert any("adam" in n.lower() for n in names), sorted(names)
