"""Every built-in advice rule: its docstring, the threshold constants it uses (values and
``#:`` comments read from its module), and its remedies in each framework; plus the fields of
``Finding`` and ``Context``. The ordering and severity rules the pages state are checked on the
synthetic run while the pages are built."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import types
from collections.abc import Callable
from functools import cache
from typing import Any

from gen import generator, synthetic
from gen.markdown import DocsError, blocks, code, constant_comment, table
from perfkit_core.advice import GENERIC_REMEDIES, Context, Finding, advise, combine
from perfkit_core.advice.rules import BUILTIN_RULES
from perfkit_mindspore import remedies as mindspore_remedies
from perfkit_paddle import remedies as paddle_remedies
from perfkit_torch import remedies as torch_remedies
from perfkit_xla import remedies as xla_remedies

#: What each field of a Finding holds.
FINDING_FIELDS: dict[str, str] = {
    "id": "what was found: the rule id, or the rule id and a detail (`cpu-bound-op:aten::empty`, "
    "one finding per op)",
    "title": "one line saying what was found, with the key figure",
    "severity": "`high`, `medium` or `low`; computed from the saving (below) when the rule "
    "leaves it empty",
    "saving_ns": "estimated time the change would save at best, in ns per step (never negative)",
    "evidence": "the figures behind the finding (times in ns, per step where the key says "
    "`_per_step_ns`; shares in percent); perfkit adds `step_time_ns` (the mean step) and `steps`",
    "remedy": "what to change, with code in the run's framework",
    "rule": "the id the rule was registered under (filled in by perfkit)",
    "details": "the evidence for people: sentences with units (`Step 7: data loading 73.4 ms "
    "of 176.9 ms.`); reports show these, the JSON keeps `evidence` too",
    "estimate": "how `saving_ns` was estimated, in one sentence",
    "cites": 'rows of views the finding is about, by view (`{"operator": ["aten::item"]}`); '
    "HTML reports link to them",
    "remedy_key": "findings with the same non-empty key prescribe one remedy and are merged into "
    "one finding, their savings added (rules claim separate time)",
    "acts_on": "`host` or `device`: what the saving shortens; the headline's combined saving "
    "adds savings of one kind and combines the two kinds as shares of the step left",
    "within_error": "`true` when the estimate says its saving is within its model's error (a "
    "compile estimate whose compiled step costs about what the eager one does): the remedy may "
    "save nothing, and the headline's \"Change first\" passes over the finding",
    "saves_time": "`false` for a finding about a risk rather than time (`memory-pressure`, "
    "saving 0 by design); a finding that saves time but promises 0 shows its remedy as not "
    "expected to pay here",
    "remedy_heading": "the heading the reports give `remedy` where the rule words one itself "
    "(`amp` on a step the host paces says what to shorten first); empty for the reports' own",
}

#: What each field of the Context a rule receives holds.
CONTEXT_FIELDS: dict[str, str] = {
    "run": "the `Run`: read `run.events`, `run.meta` and `run.summary(...)`",
    "step_ns": "the mean step, in ns per step (each step stretched over the device work it "
    "launched); every share of the step divides by it",
    "steps": "number of step spans (0 without steps: such runs get no advice)",
    "total_ns": "the steps' time together, in ns (`step_ns * steps`)",
    "has_device": "whether the run recorded any device event",
    "framework": "`torch` or `paddle`",
    "devices": 'the run\'s devices (`Run.meta["devices"]`): name, memory, compute capability, '
    "SM count; `context.compute_capability` is the lowest capability among them",
}

SEVERITY_CONSTANTS = ("SEVERITY_HIGH_PCT", "SEVERITY_MEDIUM_PCT")


def rule_ids() -> list[str]:
    return [rule_id for rule_id, _f, _d in BUILTIN_RULES]


def module_constants(module: types.ModuleType) -> dict[str, float]:
    """The numeric upper-case constants assigned at the top of ``module``, in source order."""
    out: dict[str, float] = {}
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.isupper() and target.id[0] != "_":
                value = getattr(module, target.id)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out[target.id] = value
    return out


def rule_constants(function: Callable[..., Any]) -> dict[str, float]:
    """The thresholds a rule uses: constants of its module named in its code or docstring."""
    known = module_constants(inspect.getmodule(function))
    source = textwrap.dedent(inspect.getsource(function))
    used = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
    used |= set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", inspect.getdoc(function) or ""))
    return {name: value for name, value in known.items() if name in used}


def constant_value(name: str, value: float) -> str:
    """A threshold's value with its unit, read from its name."""
    if name.endswith("_PCT"):
        return f"{value:g}%"
    if name.endswith("_NS"):
        return f"{value:,} ns ({value / 1000:g} µs)"
    if name.endswith("SPEEDUP"):
        return f"{value:g}×"
    if name.endswith("_COMPUTE_CAPABILITY"):
        return f"compute capability {value:.1f}"
    if name.endswith("_PER_STEP"):
        return f"{value:g} per step"
    if name.endswith("_PERCENTILE"):
        return f"the {value:g}th percentile"
    if name.endswith("_ELEMENTS"):
        return f"{value:g} elements"
    if name.endswith("_OPS"):
        return f"{value:g} ops"
    if name.endswith("_TIMES_MEDIAN"):
        return f"{value:g} times the median"
    raise DocsError(f"no unit known for the advice constant {name}; name it *_PCT, *_NS, ...")


def mark_constants(text: str, names: list[str]) -> str:
    """``text`` with the constants it names set in code spans."""
    if not names:
        return text
    pattern = re.compile(
        r"(?<![`\w])("
        + "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
        + r")(?![`\w])"
    )
    return pattern.sub(r"`\1`", text)


@cache
def checked() -> None:
    """Check the facts the advice pages state, once per build."""
    ids = set(rule_ids())
    tables = {
        "perfkit_torch.remedies.REMEDIES": set(torch_remedies.REMEDIES),
        "perfkit_paddle.remedies.REMEDIES": set(paddle_remedies.REMEDIES),
        "perfkit_xla.remedies.JAX_REMEDIES": set(xla_remedies.JAX_REMEDIES),
        "perfkit_xla.remedies.TF_REMEDIES": set(xla_remedies.TF_REMEDIES),
        "perfkit_mindspore.remedies.REMEDIES": set(mindspore_remedies.REMEDIES),
        "perfkit_core.advice.GENERIC_REMEDIES": set(GENERIC_REMEDIES),
    }
    for where, keys in tables.items():
        if keys != ids:
            raise DocsError(f"{where} covers {sorted(keys ^ ids)} differently from BUILTIN_RULES")
    modules = {inspect.getmodule(f) for _r, f, _d in BUILTIN_RULES}
    used = {c for _r, f, _d in BUILTIN_RULES for c in rule_constants(f)}
    for module in modules:
        unused = set(module_constants(module)) - used
        if unused:
            raise DocsError(f"no rule names {sorted(unused)} of {module.__name__} (undocumented)")
    run = synthetic.default_run()
    findings = advise(run, rules=sorted(ids))
    keys = [(-f.saving_ns, f.id) for f in findings]
    if not findings or keys != sorted(keys):
        raise DocsError("findings are no longer ordered by saving, then id")
    pressed = advise(synthetic.build(device_memory=2 * 2**20), rules=["memory-pressure"])
    if [(f.severity, f.saving_ns) for f in pressed] != [("medium", 0.0)]:
        raise DocsError("memory-pressure no longer warns at medium severity with no saving")
    high, medium = combine.SEVERITY_HIGH_PCT, combine.SEVERITY_MEDIUM_PCT
    for share, expected in ((high, "high"), (medium, "medium"), (medium / 2, "low")):
        if combine.severity(share * 1000.0, 100_000) != expected:
            raise DocsError(f"a saving of {share}% of step time is no longer {expected!r}")


@generator("advice.overview")
def overview(page: str = "") -> str:
    """A table of the rules, each linking to its section of ``page`` (default: this page)."""
    checked()
    rows = [
        [
            f"[`{rule_id}`]({page}#{rule_id})",
            description,
            ", ".join(f"{code(c)} = {constant_value(c, v)}" for c, v in rule_constants(f).items()),
        ]
        for rule_id, f, description in BUILTIN_RULES
    ]
    return table(["rule", "looks for", "thresholds"], rows)


@generator("advice.rule", covers=rule_ids)
def rule(rule_id: str) -> str:
    """One rule: what it looks for, its docstring, its thresholds and its remedies."""
    checked()
    found = {r: (f, d) for r, f, d in BUILTIN_RULES}
    if rule_id not in found:
        raise DocsError(f"no built-in rule {rule_id!r}; the rules are {rule_ids()}")
    function, description = found[rule_id]
    constants = rule_constants(function)
    module = inspect.getmodule(function)
    names = list(constants)
    rows = []
    for name, value in constants.items():
        meaning = constant_comment(module, name)
        if not meaning:
            raise DocsError(f"{module.__name__}.{name} has no `#:` comment")
        rows.append([code(name), constant_value(name, value), mark_constants(meaning, names)])
    return blocks(
        f"*{description}* (`{function.__module__}.{function.__name__}`)",
        mark_constants(inspect.getdoc(function) or "", names),
        table(["threshold", "value", "meaning"], rows) if rows else "",
        "**What to change.** PyTorch (`perfkit_torch.remedies`):",
        f"```text\n{torch_remedies.REMEDIES[rule_id].rstrip()}\n```",
        "PaddlePaddle (`perfkit_paddle.remedies`):",
        f"```text\n{paddle_remedies.REMEDIES[rule_id].rstrip()}\n```",
        "JAX (`perfkit_xla.remedies`):",
        f"```text\n{xla_remedies.JAX_REMEDIES[rule_id].rstrip()}\n```",
        "TensorFlow (`perfkit_xla.remedies`):",
        f"```text\n{xla_remedies.TF_REMEDIES[rule_id].rstrip()}\n```",
        "MindSpore (`perfkit_mindspore.remedies`):",
        f"```text\n{mindspore_remedies.REMEDIES[rule_id].rstrip()}\n```",
        f"Any other framework: {GENERIC_REMEDIES[rule_id]}",
    )


def fields_table(cls: type, meanings: dict[str, str]) -> str:
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    if set(names) != set(meanings):
        raise DocsError(f"{cls.__name__} has the fields {names}; update docs/gen/advice.py")
    rows = []
    for f in fields:
        ftype = f.type if isinstance(f.type, str) else inspect.formatannotation(f.type)
        if f.default is not dataclasses.MISSING:
            default = code(repr(f.default))
        elif f.default_factory is not dataclasses.MISSING:
            default = code(repr(f.default_factory()))
        else:
            default = "required"
        rows.append([code(f.name), code(ftype), default, meanings[f.name]])
    return table(["field", "type", "default", "holds"], rows)


@generator("advice.finding_fields")
def finding_fields() -> str:
    return fields_table(Finding, FINDING_FIELDS)


@generator("advice.context_fields")
def context_fields() -> str:
    return fields_table(Context, CONTEXT_FIELDS)
