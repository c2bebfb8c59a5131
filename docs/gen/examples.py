"""Output of the example plugins in ``examples/``, computed while the pages are built: the
plugin is registered on its own plugin manager, run on the synthetic run, and dropped."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

from gen import generator, synthetic
from gen.markdown import DocsError
from perfkit_core.advice import advise
from perfkit_core.events import Run
from perfkit_core.plugins import make_plugin_manager

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> types.ModuleType:
    """Import ``examples/<name>.py`` under its own name, without touching ``sys.path``."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    if spec is None or spec.loader is None:
        raise DocsError(f"examples/{name}.py cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_slow_step_run() -> Run:
    """The synthetic run with 4 steps, the last one twice as long (its others phase grows)."""
    base = synthetic.build(steps=4)
    events = base.events.copy()
    last = events.index[events["kind"] == "step"][-1]
    events.loc[last, "dur_ns"] *= 2
    return Run(events, base.meta)


@generator("examples.rule_finding")
def rule_finding() -> str:
    """The finding ``examples/plugin_rule.py`` gives on the synthetic run with one slow step,
    as JSON."""
    plugin = load_example("plugin_rule")
    pm = make_plugin_manager()
    pm.register(plugin, name="slow_steps")
    pm.check_pending()
    findings = advise(one_slow_step_run(), rules=[plugin.RULE_ID], pm=pm)
    if len(findings) != 1 or findings[0].remedy != plugin.REMEDIES["torch"]:
        raise DocsError(f"examples/plugin_rule.py gave {findings!r} on the synthetic run")
    return f"```json\n{json.dumps(findings[0].to_dict(), indent=1)}\n```"
