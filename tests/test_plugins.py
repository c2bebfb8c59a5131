"""The plugin system: hook specs, the manager factory, blocking, broken plugins, discovery."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import json
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

import pluggy
import pytest

import perfkit_core
from perfkit_core.plugins import framework_hook, hookimpl, hookspecs
from perfkit_core.plugins import manager as plugins

HOOKS = [
    name
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if name.startswith("perfkit_")
]
#: Where each hook is exercised by a test (a meta-test checks the list is complete).
TESTED_BY = {
    "perfkit_claim_trace": "test_claim_trace_hook_dispatches_to_first_claimant",
    "perfkit_claim_folder": "test_claim_folder_hook_reads_a_folder_as_one_run",
    "perfkit_register_views": "test_register_views_hook_adds_a_view",
    "perfkit_framework_info": "test_framework_info_hook",
    "perfkit_demo": "test_demo_hook_is_collected",
    "perfkit_annotation": "test_annotation_hook_opens_every_span",
    "perfkit_register_advisors": "test_register_advisors_hook_adds_a_rule",
    "perfkit_remedy": "test_remedy_hook_gives_framework_code",
    "perfkit_op_family": "test_op_family_hook_maps_names",
    "perfkit_trace_rank": "test_trace_rank_hook_picks_the_file_of_a_rank",
    "perfkit_canonical_op": "test_canonical_op_hook_lines_up_frameworks",
    "perfkit_profiler_recording": "test_profiler_recording_hook_tells_profiled_steps",
    "perfkit_op_cost": "test_op_cost_hook_gives_a_custom_ops_formula",
    "perfkit_layer_spans_fix": "test_layer_spans_fix_hook_names_each_frameworks_way",
    "perfkit_measure_saving": "test_measure_saving_hook_is_the_adapters",
    "perfkit_phase_timers": "test_phase_timers_hook_is_the_adapters",
    "perfkit_loader_batch_ns": "test_loader_batch_ns_hook_is_the_runs_adapters",
    "perfkit_loader_receive_ns": "test_loader_receive_ns_hook_is_the_runs_adapters",
    "perfkit_eager_pass_ns": "test_eager_pass_ns_hook_is_the_runs_adapters",
    "perfkit_corun_slowdowns": "test_corun_slowdowns_hook_is_the_runs_adapters",
    "perfkit_thread_op_ns": "test_thread_op_ns_hook_is_the_runs_adapters",
    "perfkit_loading_thread": "test_loading_thread_hook_is_the_runs_adapters",
}


def test_every_hook_is_documented_prefixed_and_tested():
    assert HOOKS, "no hooks found"
    for name in HOOKS:
        fn = getattr(hookspecs, name)
        doc = inspect.getdoc(fn) or ""
        assert "Called" in doc and ("returns" in doc.lower()), name
        assert name in TESTED_BY, f"{name} has no test listed"
        assert TESTED_BY[name] in globals(), TESTED_BY[name]


def test_claim_trace_is_firstresult():
    assert hookspecs.perfkit_claim_trace.perfkit_spec["firstresult"] is True
    assert not hookspecs.perfkit_register_views.perfkit_spec.get("firstresult")


def test_factory_registers_builtins_and_entry_points():
    pm = plugins.make_plugin_manager()
    names = set(plugins.plugin_names(pm))
    assert "perfkit_core.views.builtin" in names
    assert {"torch", "paddle"} <= names


def test_disable_env_blocks_named_plugins(monkeypatch, traces_dir):
    monkeypatch.setenv("PERFKIT_DISABLE_PLUGINS", "torch, paddle")
    plugins.reset_plugin_manager()
    pm = plugins.get_plugin_manager()
    names = set(plugins.plugin_names(pm))
    assert "torch" not in names and "paddle" not in names
    with pytest.raises(perfkit_core.TraceError, match=r"its adapter \(torch\) is disabled"):
        perfkit_core.load(traces_dir / "torch-cpu" / "rank_non_gpu.json.gz")


class FakeEntryPoint:
    def __init__(self, name, target, loader):
        self.name, self.value, self._loader = name, target, loader

    def load(self):
        return self._loader()


def test_broken_plugin_is_reported_once_and_skipped(monkeypatch):
    def explode():
        raise ImportError("missing dependency frobnicate")

    monkeypatch.setattr(
        plugins, "_entry_points", lambda: [FakeEntryPoint("broken", "broken_pkg.plugin", explode)]
    )
    monkeypatch.setattr(plugins, "_reported_failures", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pm1 = plugins.make_plugin_manager()
        pm2 = plugins.make_plugin_manager()
    messages = [str(w.message) for w in caught if "broken" in str(w.message)]
    assert len(messages) == 1
    assert "frobnicate" in messages[0] and "skipped" in messages[0]
    assert not pm1.has_plugin("broken") and not pm2.has_plugin("broken")
    assert pm1.has_plugin("perfkit_core.views.builtin")


def test_misspelled_hook_is_caught_by_check_pending(monkeypatch):
    module = types.ModuleType("typo_plugin")

    @hookimpl
    def perfkit_register_veiws(register):  # misspelled on purpose
        pass

    module.perfkit_register_veiws = perfkit_register_veiws
    monkeypatch.setattr(
        plugins, "_entry_points", lambda: [FakeEntryPoint("typo", "typo_plugin", lambda: module)]
    )
    with pytest.raises(pluggy.PluginValidationError):
        plugins.make_plugin_manager()


def test_entry_point_discovery_without_installing(monkeypatch, tmp_path):
    module = types.ModuleType("extra_views")

    @hookimpl
    def perfkit_register_views(register):
        register(
            "calls_only",
            lambda run, **_: run.summary("operator")[["name", "calls"]],
            "calls per op",
        )

    module.perfkit_register_views = perfkit_register_views
    real = plugins._entry_points
    monkeypatch.setattr(
        plugins,
        "_entry_points",
        lambda: [*real(), FakeEntryPoint("extra", "extra_views", lambda: module)],
    )
    plugins.reset_plugin_manager()
    from perfkit_core.views import registered_views

    assert "calls_only" in registered_views()


def test_register_views_hook_adds_a_view(tmp_path):
    class OnePlugin:
        @hookimpl
        def perfkit_register_views(self, register):
            register(
                "kinds",
                lambda run, **_: (
                    run.events["kind"].value_counts().rename_axis("name").reset_index(name="events")
                ),
                "events per kind",
            )

    pm = plugins.get_plugin_manager()
    plugin = OnePlugin()
    pm.register(plugin, name="one-test-plugin")
    try:
        # The registry notices the new plugin by itself: nothing to clear.
        run = perfkit_core.load(_tiny_trace(tmp_path))
        table = run.summary("kinds")
        assert table.set_index("name").loc["operator", "events"] == 2
    finally:
        pm.unregister(plugin)
    with pytest.raises(KeyError):
        run.summary("kinds")


def _tiny_trace(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "traceEvents": [
                    # Two steps: advice needs at least two.
                    *(
                        {
                            "ph": "X",
                            "cat": "user_annotation",
                            "name": f"ProfilerStep#{i}",
                            "pid": 1,
                            "tid": 1,
                            "ts": 10 * i,
                            "dur": 10,
                        }
                        for i in range(2)
                    ),
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::mm",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1,
                        "dur": 5,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::add",
                        "pid": 1,
                        "tid": 1,
                        "ts": 2,
                        "dur": 1,
                    },
                ],
            }
        )
    )
    return path


def test_claim_trace_hook_dispatches_to_first_claimant(tmp_path):
    seen = []

    class Claimer:
        @hookimpl(tryfirst=True)
        def perfkit_claim_trace(self, path, head):
            seen.append(head[:1])
            if path.suffix == ".mine":
                from perfkit_core.events.build import finish_events, make_run

                return lambda p: make_run(
                    finish_events(
                        {"kind": ["user"], "name": ["x"], "start_ns": [0], "dur_ns": [10]}, 1
                    ),
                    {"framework": "custom", "source": str(p)},
                )
            return None

    pm = plugins.get_plugin_manager()
    plugin = Claimer()
    pm.register(plugin, name="claimer")
    try:
        mine = tmp_path / "a.mine"
        mine.write_text("anything")
        run = perfkit_core.load(mine)
        assert run.framework == "custom" and len(run.events) == 1
        # Files it declines still reach the torch adapter.
        assert perfkit_core.load(_tiny_trace(tmp_path)).framework == "torch"
        assert seen == [b"a", b"{"]
    finally:
        pm.unregister(plugin)


def test_claim_folder_hook_reads_a_folder_as_one_run(tmp_path):
    from perfkit_core.jobs import is_job

    class FolderClaimer:
        @hookimpl
        def perfkit_claim_folder(self, path):
            if not (path / "profile.mine").is_file():
                return None
            from perfkit_core.events import finish_events, make_run

            return lambda p: make_run(
                finish_events(
                    {"kind": ["user"], "name": ["x"], "start_ns": [0], "dur_ns": [10]}, 1
                ),
                {"framework": "custom", "source": str(p)},
            )

    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "profile.mine").write_text("anything")
    # Two trace files beside it: unclaimed, the folder would be a job of two ranks.
    _tiny_trace(folder)
    (folder / "copy.json").write_bytes((folder / "tiny.json").read_bytes())
    assert is_job(folder)
    pm = plugins.get_plugin_manager()
    plugin = FolderClaimer()
    pm.register(plugin, name="folder_claimer")
    try:
        run = perfkit_core.load(folder)
        assert run.framework == "custom" and run.meta["source"] == str(folder)
        assert not is_job(folder)
        # A folder it declines is read as before, as a job of per-rank traces.
        (folder / "profile.mine").unlink()
        assert is_job(folder)
    finally:
        pm.unregister(plugin)


def test_framework_info_hook():
    infos = {i["framework"]: i for i in plugins.framework_infos()}
    assert set(infos) >= {"torch", "paddle"}
    for info in infos.values():
        assert info["installed"] == (info["version"] is not None)


def test_demo_hook_is_collected(tmp_path):
    class FakeDemo:
        @hookimpl
        def perfkit_demo(self, directory, steps):
            return [directory / f"fake{steps}"]

    pm = plugins.make_plugin_manager(disabled={"torch", "paddle"})
    pm.register(FakeDemo(), name="fake-demo")
    results = pm.hook.perfkit_demo(directory=tmp_path, steps=3)
    assert [tmp_path / "fake3"] in results


def test_import_perfkit_core_needs_no_framework():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "sys.modules['paddle'] = None\n"
        "import perfkit_core, perfkit_torch, perfkit_paddle\n"
        "assert 'pandas' not in sys.modules, 'pandas imported eagerly'\n"
        "print(perfkit_core.SCHEMA_VERSION)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == perfkit_core.SCHEMA_VERSION


def test_loading_a_trace_needs_no_framework(traces_dir):
    import subprocess
    import sys

    path = traces_dir / "torch-cpu" / "rank_non_gpu.json.gz"
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "import perfkit_core\n"
        f"run = perfkit_core.load({str(path)!r})\n"
        "print(len(run.events))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 2000


def test_annotation_hook_opens_every_span():
    entered = []

    class Span:
        def __init__(self, tag, name):
            self.tag, self.name = tag, name

        def __enter__(self):
            entered.append(("enter", self.tag, self.name))

        def __exit__(self, *exc):
            entered.append(("exit", self.tag, self.name))

    class Two:
        @hookimpl
        def perfkit_annotation(self, name):
            return Span("two", name)

    class Absent:
        @hookimpl
        def perfkit_annotation(self, name):
            return None

    pm = plugins.get_plugin_manager()
    two, absent = Two(), Absent()
    pm.register(two, name="two")
    pm.register(absent, name="absent")
    try:

        @perfkit_core.annotate("decorated")
        def work():
            entered.append(("body",))

        work()
        with perfkit_core.annotate("block"):
            pass
    finally:
        pm.unregister(two)
        pm.unregister(absent)
    assert [e for e in entered if e[0] != "body" and e[1] == "two"] == [
        ("enter", "two", "decorated"),
        ("exit", "two", "decorated"),
        ("enter", "two", "block"),
        ("exit", "two", "block"),
    ]
    assert ("body",) in entered


def test_register_advisors_hook_adds_a_rule(tmp_path):
    from perfkit_core.advice import Finding

    class OneRule:
        @hookimpl
        def perfkit_register_advisors(self, register):
            def too_many_adds(ctx):
                adds = int((ctx.run.events["name"] == "aten::add").sum())
                if adds:
                    return Finding(
                        id="too-many-adds",
                        title=f"{adds} adds",
                        severity="low",
                        saving_ns=0.0,
                        evidence={"adds": adds},
                    )
                return None

            register("too-many-adds", too_many_adds, "counts adds")

    pm = plugins.get_plugin_manager()
    plugin = OneRule()
    pm.register(plugin, name="one-rule")
    try:
        findings = perfkit_core.load(_tiny_trace(tmp_path)).advise()
        # The built-in rules may find something in the tiny trace too (python-overhead does).
        mine = [f for f in findings if f.rule == "too-many-adds"]
        assert [f.id for f in mine] == ["too-many-adds"]
        assert mine[0].evidence["adds"] == 1
    finally:
        pm.unregister(plugin)
    after = perfkit_core.load(_tiny_trace(tmp_path)).advise()
    assert "too-many-adds" not in {f.rule for f in after}


def test_remedy_hook_gives_framework_code():
    from perfkit_core.advice import Finding

    pm = plugins.get_plugin_manager()
    finding = Finding(id="amp", title="t", severity="high", saving_ns=1.0, rule="amp")
    torch_text = framework_hook("perfkit_remedy", "torch", pm)(finding=finding, framework="torch")
    paddle_text = framework_hook("perfkit_remedy", "paddle", pm)(
        finding=finding, framework="paddle"
    )
    assert "torch.autocast" in torch_text
    assert "paddle.amp.auto_cast" in paddle_text
    assert framework_hook("perfkit_remedy", "mxnet", pm)(finding=finding, framework="mxnet") is None


def test_phase_timers_hook_is_the_adapters():
    """Each adapter whose framework the program imported times its optimizer steps and hands
    back a remover; after removing, no step is timed (real optimizers, both frameworks:
    tests/test_phase_timers.py)."""
    pm = plugins.get_plugin_manager()
    seen: list[tuple[str, int]] = []
    removers = [r for r in pm.hook.perfkit_phase_timers(on_phase=lambda *a: seen.append(a)) if r]
    expected = sum(1 for name in ("torch", "paddle") if name in sys.modules)
    assert len(removers) == expected
    if "torch" in sys.modules:
        import torch

        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
        optimizer.step()
        assert seen and seen[-1][0] == "optimizer" and seen[-1][1] > 0
    for remove in removers:
        remove()
    count = len(seen)
    if "torch" in sys.modules:
        optimizer.step()
    assert len(seen) == count


def _answering(hook: str, answer: object) -> object:
    """A plugin whose ``hook`` (a hook taking ``framework``) answers ``answer`` for the
    framework "odd", raising it when it is an exception, and nothing for the others."""

    def implementation(self, framework):
        if isinstance(answer, Exception):
            raise answer
        return answer if framework == "odd" else None

    return type("Odd", (), {hook: hookimpl(tryfirst=True)(implementation)})()


def _only_paddle_answers(hook: str) -> None:
    """Paddle's adapter answers ``hook`` with a number of 0 or more (where paddle is imported),
    torch's and an unknown framework's with nothing."""
    pm = plugins.get_plugin_manager()
    if "paddle" in sys.modules:
        assert framework_hook(hook, "paddle", pm)(framework="paddle") >= 0
    for framework in ("torch", "no such framework"):
        assert framework_hook(hook, framework, pm)(framework=framework) is None


def test_loader_batch_ns_hook_is_the_runs_adapters():
    """The adapter of the run's framework times its DataLoader's hand-over on this machine; a
    plugin's answer that is not a positive number, or one that raises, is not used (a real run:
    tests/test_advice_savings.py)."""
    from perfkit_core.capture.machine_costs import loader_batch_ns

    pm = plugins.get_plugin_manager()
    if "torch" in sys.modules:
        assert framework_hook("perfkit_loader_batch_ns", "torch", pm)(framework="torch") > 0
    assert (
        framework_hook("perfkit_loader_batch_ns", "no such framework", pm)(
            framework="no such framework"
        )
        is None
    )

    for answer, expected in (
        (250_000, 250_000.0),
        (float("nan"), None),
        (-1.0, None),
        (True, None),
        ("1 ms", None),
        (RuntimeError("no worker"), None),
    ):
        plugin = _answering("perfkit_loader_batch_ns", answer)
        pm.register(plugin, name="odd-loader")
        try:
            assert loader_batch_ns("odd") == expected, answer
        finally:
            pm.unregister(plugin)


def test_loader_receive_ns_hook_is_the_runs_adapters():
    """Paddle's adapter times what receiving a worker's batch adds to a busy step on this
    machine; torch's answers nothing (its training process pays the hand-over itself); a
    plugin's answer that is not a number of 0 or more, or one that raises, is not used (a real
    run: tests/test_advice_savings.py)."""
    from perfkit_core.capture.machine_costs import loader_costs_here, loader_receive_ns

    _only_paddle_answers("perfkit_loader_receive_ns")
    pm = plugins.get_plugin_manager()

    for answer, expected in (
        (900_000, 900_000.0),
        (0, 0.0),
        (float("inf"), None),
        (-1.0, None),
        (False, None),
        ("1 ms", None),
        (RuntimeError("no worker"), None),
    ):
        plugin = _answering("perfkit_loader_receive_ns", answer)
        pm.register(plugin, name="odd-receive")
        try:
            assert loader_receive_ns("odd") == expected, answer
            # the record keeps only what was timed
            costs = loader_costs_here("odd")
            assert costs.get("loader_receive_ns") == expected and "loader_batch_ns" not in costs
        finally:
            pm.unregister(plugin)


def test_thread_op_ns_hook_is_the_runs_adapters():
    """Paddle's adapter times what each training op costs beside its single-process
    DataLoader's loading thread on this machine; torch's answers nothing (its loader has no
    such thread); a plugin's answer that is not a number of 0 or more, or one that raises, is
    not used, and the record asks for it only where a thread loaded (a real run:
    tests/test_advice_savings.py)."""
    from perfkit_core.capture.machine_costs import loader_costs_here, thread_op_ns

    _only_paddle_answers("perfkit_thread_op_ns")
    pm = plugins.get_plugin_manager()

    for answer, expected in (
        (21_000, 21_000.0),
        (0, 0.0),
        (float("nan"), None),
        (-1.0, None),
        (True, None),
        ("20 us", None),
        (RuntimeError("no thread"), None),
    ):
        plugin = _answering("perfkit_thread_op_ns", answer)
        pm.register(plugin, name="odd-thread-op")
        try:
            assert thread_op_ns("odd") == expected, answer
            # the record keeps only what was timed, and only where a thread loaded
            assert loader_costs_here("odd", thread=True).get("thread_op_ns") == expected
            assert "thread_op_ns" not in loader_costs_here("odd")
        finally:
            pm.unregister(plugin)


def test_loading_thread_hook_is_the_runs_adapters():
    """Paddle's adapter names its DataLoader's loading threads (``Dataloader_<id>``); torch's
    names none; a plugin's answer for its framework marks the thread, and an answer that is
    not True, or one that raises, leaves it a training thread (a real run:
    tests/test_loading_threads.py)."""
    from perfkit_core.advice.rules.cpu import loading_threads

    pm = plugins.get_plugin_manager()
    threads = {"7": "MainThread", "8": "Dataloader_140312", "9": "worker"}
    if importlib.util.find_spec("perfkit_paddle") is not None:
        paddle_run = types.SimpleNamespace(meta={"framework": "paddle", "threads": threads})
        assert loading_threads(paddle_run) == [8]  # type: ignore[arg-type]
    torch_run = types.SimpleNamespace(meta={"framework": "torch", "threads": threads})
    assert loading_threads(torch_run) == []  # type: ignore[arg-type]
    odd = types.SimpleNamespace(meta={"framework": "odd", "threads": threads})
    for answer, expected in (
        (True, [7, 8, 9]),
        (False, []),
        ("yes", []),
        (RuntimeError("no names"), []),
    ):
        plugin = _answering("perfkit_loading_thread", answer)
        pm.register(plugin, name="odd-loading-thread")
        try:
            assert loading_threads(odd) == expected, answer  # type: ignore[arg-type]
        finally:
            pm.unregister(plugin)


def test_corun_slowdowns_hook_is_the_runs_adapters():
    """The adapter of the run's framework times how much its ops and a loader's Python slow
    each other on two cores here (two numbers of at least 1, the second process gone after);
    a plugin's answer that is not two finite numbers of at least 1, or one that raises, is not
    used (a real run: tests/test_advice_savings.py)."""
    import multiprocessing

    from perfkit_core.capture.machine_costs import corun_slowdowns, loader_costs_here

    pm = plugins.get_plugin_manager()
    for framework in ("torch", "paddle"):
        if framework in sys.modules:
            children = set(multiprocessing.active_children())
            training, loading = framework_hook("perfkit_corun_slowdowns", framework, pm)(
                framework=framework
            )
            assert training >= 1.0 and loading >= 1.0, framework
            assert set(multiprocessing.active_children()) <= children
    assert (
        framework_hook("perfkit_corun_slowdowns", "no such framework", pm)(
            framework="no such framework"
        )
        is None
    )

    for answer, expected in (
        ((1.3, 1.75), {"training_slowdown": 1.3, "loading_slowdown": 1.75}),
        ([1, 1], {"training_slowdown": 1.0, "loading_slowdown": 1.0}),
        ((0.9, 1.2), {}),
        ((1.2, float("nan")), {}),
        ((True, 1.2), {}),
        ((1.2,), {}),
        ((1.2, 1.3, 1.4), {}),
        ("1.2, 1.3", {}),
        (1.2, {}),
        (RuntimeError("no second process"), {}),
    ):
        plugin = _answering("perfkit_corun_slowdowns", answer)
        pm.register(plugin, name="odd-corun")
        try:
            assert corun_slowdowns("odd") == expected, answer
            # the record keeps only what was timed
            costs = loader_costs_here("odd")
            assert {k: v for k, v in costs.items() if k.endswith("slowdown")} == expected
        finally:
            pm.unregister(plugin)


def test_eager_pass_ns_hook_is_the_runs_adapters():
    """torch's adapter times an eager forward and backward of a tiny model on this machine;
    Paddle's answers nothing (no compile model); a plugin's answer that is not a positive
    number, or one that raises, is not used (a real run: tests/test_advice_compile.py)."""
    from perfkit_core.capture.machine_costs import eager_pass_ns

    pm = plugins.get_plugin_manager()
    if "torch" in sys.modules:
        assert framework_hook("perfkit_eager_pass_ns", "torch", pm)(framework="torch") > 0
    assert framework_hook("perfkit_eager_pass_ns", "paddle", pm)(framework="paddle") is None
    assert (
        framework_hook("perfkit_eager_pass_ns", "no such framework", pm)(
            framework="no such framework"
        )
        is None
    )

    for answer, expected in (
        (150_000, 150_000.0),
        (0, None),
        (float("nan"), None),
        (-1.0, None),
        (True, None),
        ("1 ms", None),
        (RuntimeError("no torch"), None),
    ):
        plugin = _answering("perfkit_eager_pass_ns", answer)
        pm.register(plugin, name="odd-eager")
        try:
            assert eager_pass_ns("odd") == expected, answer
        finally:
            pm.unregister(plugin)


def test_measure_saving_hook_is_the_adapters():
    """The torch adapter replays an optimizer finding's recorded parameter shapes; other
    frameworks and rules get None (a real run: tests/test_advice_savings.py)."""
    from perfkit_core.advice import Finding

    pm = plugins.get_plugin_manager()
    evidence = {"optimizer_class": "SGD", "parameter_shapes": [[8, 8], [8]]}
    finding = Finding(
        id="optimizer", title="t", severity="", saving_ns=1.0, rule="optimizer", evidence=evidence
    )
    if importlib.util.find_spec("torch") is not None:
        result = framework_hook("perfkit_measure_saving", "torch", pm)(
            finding=finding, framework="torch"
        )
        assert result["evidence"]["replay_option"] == "fused=True"
        assert result["saving_ns"] == max(
            result["evidence"]["replay_loop_ns"] - result["evidence"]["replay_remedy_ns"], 0.0
        )
    assert (
        framework_hook("perfkit_measure_saving", "mxnet", pm)(finding=finding, framework="mxnet")
        is None
    )
    finding.rule = "amp"
    assert (
        framework_hook("perfkit_measure_saving", "torch", pm)(finding=finding, framework="torch")
        is None
    )


def test_layer_spans_fix_hook_names_each_frameworks_way():
    pm = plugins.get_plugin_manager()
    torch_text = framework_hook("perfkit_layer_spans_fix", "torch", pm)(framework="torch")
    assert "perfkit_torch.on_trace_ready" in torch_text and "layers=False" in torch_text
    assert "paddle.nn.Layer" in framework_hook("perfkit_layer_spans_fix", "paddle", pm)(
        framework="paddle"
    )
    assert framework_hook("perfkit_layer_spans_fix", "mxnet", pm)(framework="mxnet") is None

    class Mx:
        @hookimpl
        def perfkit_layer_spans_fix(self, framework):
            return "wrap each block in mx.profiler.scope" if framework == "mxnet" else None

    plugin = Mx()
    pm.register(plugin)
    try:
        assert framework_hook("perfkit_layer_spans_fix", "mxnet", pm)(framework="mxnet").startswith(
            "wrap each block"
        )
    finally:
        pm.unregister(plugin)


def test_op_family_hook_maps_names():
    pm = plugins.get_plugin_manager()
    assert (
        framework_hook("perfkit_op_family", "torch", pm)(name="aten::addmm", framework="torch")
        == "matmul"
    )
    assert (
        framework_hook("perfkit_op_family", "torch", pm)(name="AddmmBackward0", framework="torch")
        == "matmul"
    )
    assert (
        framework_hook("perfkit_op_family", "paddle", pm)(name="matmul dygraph", framework="paddle")
        == "matmul"
    )
    assert (
        framework_hook("perfkit_op_family", "paddle", pm)(
            name="Global_MatmulGradNode", framework="paddle"
        )
        == "matmul"
    )
    assert (
        framework_hook("perfkit_op_family", "paddle", pm)(
            name="cross_entropy_with_softmax dygraph", framework="paddle"
        )
        == "loss"
    )
    assert (
        framework_hook("perfkit_op_family", "mxnet", pm)(name="aten::add", framework="mxnet")
        is None
    )


def test_trace_rank_hook_picks_the_file_of_a_rank(tmp_path, traces_dir):
    from perfkit_core.events.loading import read_head
    from perfkit_core.jobs.job import load_job_rank

    a100 = traces_dir / "torch-gpu" / "a100_8gpu_rank3.json.gz"
    pm = plugins.get_plugin_manager()
    assert pm.hook.perfkit_trace_rank(path=a100, head=read_head(a100)) == 3
    job = tmp_path / "job"
    job.mkdir()
    (job / "a.json.gz").symlink_to(a100)
    tiny = _tiny_trace(tmp_path)
    (job / "b.json").symlink_to(tiny)
    # The tiny trace records no rank: it is numbered by its place in the folder (1).
    assert load_job_rank(job, 1).meta["source"].endswith("b.json")

    class Ranker:
        @hookimpl(tryfirst=True)
        def perfkit_trace_rank(self, path, head):
            return 7 if path.name == "b.json" else None

    plugin = Ranker()
    pm.register(plugin, name="ranker-test-plugin")
    try:
        assert pm.hook.perfkit_trace_rank(path=job / "b.json", head=read_head(tiny)) == 7
        assert load_job_rank(job, 3).meta["rank"] == 3
        assert load_job_rank(job, 7).meta["source"].endswith("b.json")
    finally:
        pm.unregister(plugin)


def test_canonical_op_hook_lines_up_frameworks():
    from perfkit_core.views import Resolver

    pm = plugins.get_plugin_manager()
    same = [
        ("aten::max_pool2d", "torch", "pool2d pybind_imperative_func", "paddle", "pool"),
        ("MaxPool2DWithIndicesBackward0", "torch", "Global_Pool2dGradNode", "paddle", "pool"),
        ("aten::lstm", "torch", "rnn pybind_imperative_func", "paddle", "rnn"),
        ("MkldnnRnnLayerBackward0", "torch", "Global_RnnGradNode", "paddle", "rnn"),
        (
            "aten::cross_entropy_loss",
            "torch",
            "cross_entropy_with_softmax dygraph",
            "paddle",
            "cross_entropy",
        ),
    ]
    for torch_name, _, paddle_name, _, canonical in same:
        assert (
            framework_hook("perfkit_canonical_op", "torch", pm)(name=torch_name, framework="torch")
            == canonical
        )
        assert (
            framework_hook("perfkit_canonical_op", "paddle", pm)(
                name=paddle_name, framework="paddle"
            )
            == canonical
        )
    # Names already canonical once undecorated are left to the core; other frameworks to others.
    assert (
        framework_hook("perfkit_canonical_op", "torch", pm)(name="aten::relu", framework="torch")
        is None
    )
    assert (
        framework_hook("perfkit_canonical_op", "jax", pm)(name="aten::max_pool2d", framework="jax")
        is None
    )
    assert Resolver("torch").op("aten::addmm") == Resolver("paddle").op("matmul dygraph", "linear")
    # A bias add inside a conv layer counts as the conv; outside, as an add.
    assert Resolver("paddle").op("add dygraph", "conv2d") == "conv"
    assert Resolver("paddle").op("add dygraph") == "add"

    class Custom:
        @hookimpl(tryfirst=True)
        def perfkit_canonical_op(self, name, framework):
            return "attention" if name == "my_fused_attn" else None

    plugin = Custom()
    pm.register(plugin, name="custom-canonical")
    try:
        resolver = Resolver("torch")
        assert resolver.op("my_fused_attn") == "attention"
        assert resolver.family("attention") == "attention"
        assert resolver.op("aten::max_pool2d") == "pool"
    finally:
        pm.unregister(plugin)


def test_profiler_recording_hook_tells_profiled_steps():
    torch = pytest.importorskip("torch")
    from torch.profiler import profile, schedule

    import perfkit_core

    pm = plugins.get_plugin_manager()
    assert True not in pm.hook.perfkit_profiler_recording(profiler=None)
    prof = profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1))
    timer = perfkit_core.step_timer(prof, warmup=0)
    with prof:
        for _ in range(5):
            with timer.step():
                torch.ones(4).sum()
            prof.step()
    # Step 0 waits, step 1 warms up (recording starts at its end), steps 2-3 record, step 4
    # comes after the profiler's one cycle.
    assert len(timer.profiled_ns) == 2 and len(timer.unprofiled_ns) == 3
    assert not timer.unknown_ns

    class Elsewhere:
        """A profiler object no adapter knows: no answer, so its steps are unknown."""

    other = perfkit_core.step_timer(Elsewhere(), warmup=0)
    with other.step():
        pass
    assert other.unknown_ns and not other.profiled_ns and not other.unprofiled_ns


def test_step_timer_asks_the_adapters_registered_when_it_starts_timing():
    """The step timer calls the adapters' ``perfkit_profiler_recording`` directly each step:
    those registered when it starts timing (its first step, the first after ``close``) are
    asked, a plugin that raises makes the step neither profiled nor unprofiled without
    reaching the loop, and a plugin that wraps the hook sees every step (the timer then asks
    through the plugin manager)."""
    import perfkit_core

    pm = plugins.get_plugin_manager()
    marker = object()  # a profiler no installed adapter knows

    class Says:
        def __init__(self, answer: object) -> None:
            self.answer = answer

        @hookimpl
        def perfkit_profiler_recording(self, profiler):
            if profiler is not marker:
                return None
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    @contextlib.contextmanager
    def registered(*added: object) -> Iterator[None]:
        for i, plugin in enumerate(added):
            pm.register(plugin, name=f"recording-test-{i}")
        try:
            yield
        finally:
            for plugin in added:
                pm.unregister(plugin)

    def steps(timer: Any, count: int) -> Any:
        for _ in range(count):
            with timer.step():
                pass
        return timer

    timer = steps(perfkit_core.step_timer(marker, warmup=0), 1)
    assert len(timer.unknown_ns) == 1  # no adapter knows it
    with registered(Says(True)):
        steps(timer, 1)
        assert len(timer.unknown_ns) == 2 and not timer.profiled_ns  # not yet asked
        timer.close()
        steps(timer, 1)
        assert len(timer.profiled_ns) == 1  # asked from the first step after close
    timer.close()
    with registered(Says(RuntimeError("no state"))):
        failing = steps(perfkit_core.step_timer(marker, warmup=0), 2)
        assert failing.recording() is None
        failing.close()
    assert len(failing.unknown_ns) == 2 and not failing.profiled_ns

    seen: list[object] = []

    class Wraps:
        @hookimpl(hookwrapper=True)
        def perfkit_profiler_recording(self, profiler):
            seen.append(profiler)
            yield

    with registered(Says(False), Wraps()):
        wrapped = steps(perfkit_core.step_timer(marker, warmup=0), 3)
        wrapped.close()
    assert seen == [marker] * 3 and len(wrapped.unprofiled_ns) == 3


def test_paddle_profiler_recording_hook_tells_started_closed_steps_apart():
    """A Paddle Profiler's steps: before ``start()`` and after ``stop()`` unprofiled, recorded
    ones profiled, and the closed and ready steps between neither (a started Profiler records
    each layer's forward even then, which slows them)."""
    paddle = pytest.importorskip("paddle")
    import paddle.profiler as profiler

    import perfkit_core

    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(2, 4), on_trace_ready=lambda p: None
    )
    timer = perfkit_core.step_timer(prof, warmup=0)
    layer = paddle.nn.Linear(4, 4)
    x = paddle.ones([2, 4])

    def step() -> None:
        with timer.step():
            layer(x).sum().backward()

    for _ in range(3):
        step()  # before start
    prof.start()
    for _ in range(5):  # closed, ready, two recorded, closed again
        step()
        prof.step()
    with contextlib.redirect_stdout(io.StringIO()):
        prof.stop()
    for _ in range(2):
        step()  # after stop
    timer.close()
    assert len(timer.profiled_ns) == 2
    assert len(timer.unknown_ns) == 3
    assert len(timer.unprofiled_ns) == 5


def test_op_cost_hook_gives_a_custom_ops_formula(tmp_path):
    """A plugin gives the FLOPs and bytes of an op no adapter knows (a custom kernel), and,
    asked first (``tryfirst``), replaces an adapter's formula; unregistered, both are gone."""
    from perfkit_core.views import OpCost, gemm_cost

    def op(name, ts, dims):
        return {
            "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 4,
            "args": {"Input Dims": dims, "Input type": ["float"] * len(dims)},
        }  # fmt: skip

    path = tmp_path / "custom.json"
    steps = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
         "ts": 10 * i, "dur": 10}
        for i in range(2)
    ]  # fmt: skip
    ops = [op("mylib::fused_gelu", 10 * i + 1, [[8, 64]]) for i in range(2)]
    ops += [op("aten::mm", 10 * i + 5, [[8, 64], [64, 4]]) for i in range(2)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": steps + ops}))

    class CustomKernels:
        @hookimpl(tryfirst=True)
        def perfkit_op_cost(self, call, framework):
            if call.name == "mylib::fused_gelu":
                (shape,) = call.inputs.shapes
                return OpCost(8.0 * shape[0] * shape[1], 8.0 * shape[0] * shape[1], "elementwise")
            if call.name == "aten::mm":  # count the bias this library adds
                a, b = call.inputs.tensor(0), call.inputs.tensor(1)
                cost = gemm_cost(a[0], b[1], a[1], "float")
                return OpCost(cost.flops + a[0] * b[1], cost.bytes, "gemm", "fp32", cost.gemm)
            return None

    pm = plugins.get_plugin_manager()
    plugin = CustomKernels()
    pm.register(plugin, name="custom-kernels")
    try:
        view = perfkit_core.load(path).summary("roofline").set_index("name")
        assert view.loc["mylib::fused_gelu", "gflops"] * 1e9 == 8 * 8 * 64
        assert view.loc["aten::mm", "gflops"] * 1e9 == 2 * 8 * 4 * 64 + 8 * 4
    finally:
        pm.unregister(plugin)
    view = perfkit_core.load(path).summary("roofline").set_index("name")
    assert "mylib::fused_gelu" not in view.index
    assert view.loc["aten::mm", "gflops"] * 1e9 == 2 * 8 * 4 * 64


def test_a_framework_hook_reaches_its_adapters_and_the_plugins_that_name_none():
    """An adapter's hook answers only for the frameworks it names; a plugin that names none
    (a third-party adapter testing ``framework`` itself) is still asked."""
    from perfkit_core.advice import Finding
    from perfkit_core.plugins import framework_hook, get_plugin_manager

    pm = get_plugin_manager()
    finding = Finding(id="optimizer", title="", severity="low", saving_ns=0.0, rule="optimizer")
    torch_text = framework_hook("perfkit_remedy", "torch", pm)(finding=finding, framework="torch")
    assert "fused=True" in torch_text
    # the torch adapter no longer tests the argument: only the dispatch keeps it out
    assert (
        framework_hook("perfkit_remedy", "jax", pm)(finding=finding, framework="jax") != torch_text
    )

    class ThirdParty:
        @hookimpl
        def perfkit_remedy(self, finding, framework):
            return "mx.fuse()" if framework == "mxnet" else None

    plugin = ThirdParty()
    pm.register(plugin)
    try:
        assert (
            framework_hook("perfkit_remedy", "mxnet", pm)(finding=finding, framework="mxnet")
            == "mx.fuse()"
        )
        assert (
            framework_hook("perfkit_remedy", "torch", pm)(finding=finding, framework="torch")
            == torch_text
        )
    finally:
        pm.unregister(plugin)
