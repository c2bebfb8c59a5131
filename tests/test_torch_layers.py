"""Layer spans in torch runs: perfkit's handler records every ``nn.Module`` call while its
profiler records (``perfkit_torch.modules``), named and nested as the modules are, counted as
torch's own ``key_averages`` counts them, and leaves ``Module.__call__`` alone once the
profiler is done."""

from __future__ import annotations

import gc
import itertools
import json
import warnings
from collections import Counter
from pathlib import Path

import pytest

import perfkit_core
from perfkit_core.views.anatomy.structure import structure

torch = pytest.importorskip("torch")

from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

import perfkit_torch  # noqa: E402
from perfkit_torch import modules  # noqa: E402


@pytest.fixture(autouse=True)
def _no_spans_left_armed():
    """Every test starts and ends with perfkit's wrapper of ``Module.__call__`` off."""
    for spans in list(modules._armed):
        spans.remove()
    yield
    leftover = list(modules._armed)
    for spans in leftover:
        spans.remove()
    assert not leftover, "a test left module spans armed"
    assert not modules.installed()
    assert torch.nn.Module.__call__ is torch.nn.Module._wrapped_call_impl


def _model(blocks: int = 2) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(8, 2))


def _step(model: torch.nn.Module) -> None:
    model(torch.randn(4, 8)).sum().backward()


class CallCounter:
    """Counts module calls with a global hook of the test's own: the other way to count."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self.pre)

    def pre(self, module, args) -> None:
        self.calls[type(module).__name__] += 1

    def remove(self) -> None:
        self.handle.remove()


def _module_spans(run, *, in_steps: bool = True) -> Counter[str]:
    """Module spans per type (in the run's steps, unless ``in_steps`` is False; ``nn.Module:
    Linear_0`` counts as Linear)."""
    ev = run.events
    names = ev["name"].astype(str)
    chosen = names.str.startswith("nn.Module: ")
    if in_steps:
        chosen &= (ev["step"] >= 0).to_numpy()
    spans = names[chosen]
    return Counter(spans.str.slice(len("nn.Module: ")).str.replace(r"_\d+$", "", regex=True))


def test_handler_records_every_module_call_as_torch_counts_it(tmp_path):
    from perfkit_torch.demo import train_mlp

    captured = {}

    def capture(prof) -> None:
        captured["averages"] = {e.key: e.count for e in prof.key_averages()}

    counter = CallCounter()
    try:
        runs, handler = train_mlp(
            tmp_path, steps=3, blocks=2, width=8, batch_size=4, background=False, chain=[capture]
        )
    finally:
        counter.remove()
    assert not handler.failures
    run = perfkit_core.load(runs[0])
    spans = _module_spans(run)
    # 5 profiled steps were counted (wait, warm-up, 3 recorded): 3 of 5 of every module call.
    assert spans == Counter({k: v * 3 // 5 for k, v in counter.calls.items()})
    assert spans == {"Sequential": 3, "Linear": 9, "LayerNorm": 6, "ReLU": 6}
    # torch's own key_averages of the same cycle counts the same spans.
    theirs = {k: v for k, v in captured["averages"].items() if k.startswith("nn.Module: ")}
    ours = Counter(str(n) for n in run.events["name"] if str(n).startswith("nn.Module: "))
    assert dict(ours) == theirs
    # Nested as the modules are, and layers, not user spans.
    keys = set(structure(run).layer_key.values())
    assert "sequential[1]/linear[3]" in keys and "sequential[1]/layernorm[2]" in keys
    assert not any(n.startswith("nn.Module") for n in run.summary("user")["name"])
    assert set(run.events.loc[run.events["name"].astype(str).isin(theirs), "kind"]) == {"user"}
    assert not modules.installed()


def test_layers_false_records_no_module_span_and_leaves_module_call_alone(tmp_path):
    original = torch.nn.Module.__call__
    model = _model()
    handler = perfkit_torch.on_trace_ready(tmp_path, background=False, layers=False)
    assert not modules.installed()
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(4):
            assert torch.nn.Module.__call__ is original
            _step(model)
            prof.step()
    (run_dir,) = handler.runs
    assert _module_spans(perfkit_core.load(run_dir)) == Counter()


def test_spans_are_armed_only_for_the_schedules_warmup_and_recording_steps(tmp_path):
    """Armed from the handler's creation through the first cycle, then only in the warm-up
    and recording steps; none once the schedule is done."""
    model = _model()
    handler = perfkit_torch.on_trace_ready(tmp_path, background=False)
    installed = []
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=2, warmup=1, active=2, repeat=2),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(12):
            installed.append(modules.installed())
            _step(model)
            prof.step()
    assert installed == [True] * 5 + [False, False, True, True, True] + [False, False]
    assert not modules.installed()
    first, second = (perfkit_core.load(r) for r in handler.runs)
    assert set(structure(first).layer_key.values()) == set(structure(second).layer_key.values())
    assert (
        _module_spans(first)
        == _module_spans(second)
        == {"Sequential": 2, "Linear": 6, "LayerNorm": 4, "ReLU": 4}
    )


def test_without_a_schedule_spans_are_disarmed_once_the_profiler_stops(tmp_path):
    model = _model()
    handler = perfkit_torch.on_trace_ready(tmp_path, background=False)
    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler) as prof:
        for _ in range(2):
            _step(model)
            prof.step()
    # The handler ran at the profiler's stop; the next module call finds it stopped.
    _step(model)
    assert not modules.installed()
    run = perfkit_core.load(handler.runs[0])  # no schedule: torch records no step spans
    assert _module_spans(run, in_steps=False) == {
        "Sequential": 2,
        "Linear": 6,
        "LayerNorm": 4,
        "ReLU": 4,
    }


def test_a_handler_never_used_disarms_when_collected(tmp_path):
    handler = perfkit_torch.on_trace_ready(tmp_path)
    assert modules.installed()
    del handler
    gc.collect()
    assert not modules.installed()


def test_a_handler_collected_inside_perfkits_bookkeeping_does_not_deadlock(tmp_path):
    """The garbage collector can collect a handler while the same thread is inside
    ``modules._set`` (holding its lock): the handler's finalizer must not wait for that lock.
    Run in a child process, so that a deadlock fails the test instead of hanging the suite;
    there a handler is collected by ``gc.collect()`` with the lock held, as when an allocation
    inside ``_set`` triggers a collection."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import gc
        from perfkit_torch import modules
        from perfkit_torch.handler import on_trace_ready

        handler = on_trace_ready({str(tmp_path)!r}, worker_name="gc")
        spans = handler._module_spans
        gc.disable()
        with modules._lock:  # as inside _set
            del handler
            gc.collect()  # the finalizer runs here, in the thread holding the lock
        assert spans.removed and spans in modules._armed  # disarmed by the next _set
        other = modules.ModuleSpans()
        other.arm(True)
        other.remove()
        assert spans not in modules._armed and not modules.installed()
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_record_modules_serves_a_plain_profiler_and_never_doubles_the_handlers(tmp_path):
    model = _model(blocks=1)
    trace = tmp_path / "plain.json"
    with perfkit_torch.record_modules(), profile(activities=[ProfilerActivity.CPU]) as prof:
        _step(model)
    assert not modules.installed()
    prof.export_chrome_trace(str(trace))
    run = perfkit_core.load(trace)
    assert {"sequential[1]", "sequential[1]/linear[2]"} <= set(structure(run).layer_key.values())
    # The handler and the per-model form of record_modules together: still one span per call.
    spans = perfkit_torch.record_modules(model)
    handler = perfkit_torch.on_trace_ready(tmp_path / "runs", background=False)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
        on_trace_ready=handler,
    ) as prof:
        for _ in range(3):
            _step(model)
            prof.step()
    spans.remove()
    assert _module_spans(perfkit_core.load(handler.runs[0])) == {
        "Sequential": 2,
        "Linear": 4,
        "LayerNorm": 2,
        "ReLU": 2,
    }


def test_with_stack_keeps_one_layer_per_module_call(tmp_path):
    """torch's Python tracer records the module calls too; the layers are the same."""
    from perfkit_torch.demo import train_mlp

    keys = []
    for with_stack in (False, True):
        runs, _ = train_mlp(
            tmp_path / str(with_stack),
            steps=2,
            blocks=1,
            width=8,
            batch_size=4,
            background=False,
            with_stack=with_stack,
        )
        run = perfkit_core.load(runs[0])
        kinds = set(
            run.events.loc[run.events["name"].astype(str).str.startswith("nn.Module: "), "kind"]
        )
        assert kinds == ({"user", "python"} if with_stack else {"user"})
        keys.append(set(structure(run).layer_key.values()))
    assert (
        keys[0]
        == keys[1]
        == {
            "sequential[1]",
            "sequential[1]/linear[1]",
            "sequential[1]/linear[2]",
            "sequential[1]/layernorm[1]",
            "sequential[1]/relu[1]",
        }
    )


class Failing(torch.nn.Module):
    def forward(self, x):
        raise ValueError("bad input")


def test_a_forward_that_raises_closes_its_spans_and_keeps_its_error(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), Failing())
    trace = tmp_path / "raised.json"
    with perfkit_torch.record_modules(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with pytest.raises(ValueError, match="bad input"):
            model(torch.randn(2, 8))
        model[0](torch.randn(2, 8))
    prof.export_chrome_trace(str(trace))
    events = json.loads(Path(trace).read_text())["traceEvents"]
    spans = [e for e in events if str(e.get("name", "")).startswith("nn.Module: ")]
    assert sorted(e["name"] for e in spans) == [
        "nn.Module: Failing_0",
        "nn.Module: Linear_0",
        "nn.Module: Linear_0",
        "nn.Module: Sequential_0",
    ]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in spans)


def test_spans_are_named_alike_in_every_cycle_and_model(tmp_path):
    """Ordinals count again from 0 whenever the wrapper is installed anew."""
    names = []
    for i in range(2):
        model = _model(blocks=1)
        trace = tmp_path / f"{i}.json"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with perfkit_torch.record_modules(), profile(activities=[ProfilerActivity.CPU]) as p:
                _step(model)
        p.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
        names.append(sorted(e["name"] for e in events if e["name"].startswith("nn.Module: ")))
    assert names[0] == names[1]
    assert "nn.Module: Linear_1" in names[0] and "nn.Module: Linear_2" not in names[0]


def test_a_wrapper_another_library_adds_later_survives_disarming():
    model = _model(blocks=1)
    calls = []
    spans = perfkit_torch.record_modules()
    ours = torch.nn.Module.__call__
    assert ours is modules._call

    def theirs(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return ours(self, *args, **kwargs)

    torch.nn.Module.__call__ = theirs
    try:
        spans.remove()
        assert torch.nn.Module.__call__ is theirs
        _step(model)
        assert calls.count("Linear") == 2
    finally:
        torch.nn.Module.__call__ = modules._original


def test_torch_compile_traces_through_the_wrapper(tmp_path):
    """Dynamo inlines the wrapped call: a full graph, the same result, the caller's span."""
    model = _model(blocks=1)
    x = torch.randn(4, 8)
    expected = model(x)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    trace = tmp_path / "compiled.json"
    with perfkit_torch.record_modules(), profile(activities=[ProfilerActivity.CPU]) as prof:
        got = compiled(x)
    torch.testing.assert_close(got, expected)
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    names = [e["name"] for e in events if e["name"].startswith("nn.Module: ")]
    assert names == ["nn.Module: OptimizedModule_0"]


def test_each_cycle_names_modules_from_zero_while_another_request_keeps_the_wrapper(tmp_path):
    """Ordinals count from 0 in every cycle, also when another armed request (here a
    ``record_modules()`` left on) kept the wrapper installed between two handlers' cycles, so
    one model's layer spans are named alike in both runs."""
    import perfkit_core
    import perfkit_torch
    from tests.torch_profiles import record

    with perfkit_torch.record_modules():
        first = perfkit_core.load(record(tmp_path / "a", steps=2, blocks=1).runs[0])
        second = perfkit_core.load(record(tmp_path / "b", steps=2, blocks=1).runs[0])
    names = [
        {n for n in run.events["name"].astype(str) if n.startswith("nn.Module: ")}
        for run in (first, second)
    ]
    assert names[0] and names[0] == names[1]
    assert "nn.Module: Sequential_0" in names[0]


class _Recursive(torch.nn.Module):
    """Calls itself ``depth`` times inside its own call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, depth: int = 2) -> torch.Tensor:
        x = self.fc(x)
        return self(x, depth - 1) if depth else x


def test_a_module_inside_its_own_call_gets_a_span_per_call(tmp_path):
    """The span a module's calls reuse is open during its own call: a call made inside it (a
    recursive module) records a span of its own, nested, and the calls after it record too."""
    model = _Recursive()
    x = torch.randn(4, 8)
    trace = tmp_path / "recursive.json"
    with perfkit_torch.record_modules(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
        model(x, 0)
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == "nn.Module: _Recursive_0"
    )
    assert len(spans) == 4  # three nested calls, then one more
    for outer, inner in itertools.pairwise(spans[:3]):
        assert outer[0] <= inner[0] and inner[1] <= outer[1]
    assert spans[3][0] >= spans[0][1]
    fc = [e for e in events if e["name"] == "nn.Module: Linear_0"]
    assert len(fc) == 4


def test_every_cycle_saves_the_model_description(tmp_path):
    """Each profiled cycle's run describes the modules it recorded (``meta["model"]``), the
    later cycles as the first, with the same layers."""
    model = _model(blocks=1)
    handler = perfkit_torch.on_trace_ready(tmp_path, background=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=2, repeat=3),
            on_trace_ready=handler,
        ) as prof:
            for _ in range(12):
                _step(model)
                prof.step()
    described = [json.loads((run / "meta.json").read_text()).get("model") for run in handler.runs]
    assert len(described) == 3 and described[0] is not None
    assert described[1:] == described[:1] * 2
