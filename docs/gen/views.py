"""Every view perfkit's own packages register: options (from the signatures), the
``perfkit report`` flag reaching each option (from ``perfkit_core.cli``), and the columns each
view returns on a synthetic run (``synthetic.py``), described by ``view_text.py``."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from functools import cache
from typing import Any

import pandas as pd

from gen import generator, synthetic
from gen.markdown import DocsError, blocks, code, codes, table
from gen.view_text import (
    DEVICE_COLUMN_SUFFIXES,
    FIXED_ROW_VIEWS,
    NOT_DEVICE_COLUMNS,
    OPTION_MEANINGS,
    UNIT_TEXT,
    VIEW_COLUMNS,
    VIEW_VARIANTS,
)
from perfkit_core import cli
from perfkit_core.report.format import column_label, column_unit, header_label
from perfkit_core.views import ViewSpec, phases, registered_views, steps
from perfkit_core.views.anatomy import attribution, step_time
from perfkit_core.views.operators import host_event_table
from perfkit_core.views.registry import view_options

#: perfkit's own packages: the views they register are documented (a third party's are not).
OWN_PACKAGES = (
    "perfkit_core",
    "perfkit_torch",
    "perfkit_paddle",
    "perfkit_xla",
    "perfkit_mindspore",
)


def own_views() -> dict[str, ViewSpec]:
    """The registered views perfkit's own packages provide, in registration order."""
    return {
        name: spec
        for name, spec in registered_views().items()
        if spec.function.__module__.split(".")[0] in OWN_PACKAGES
    }


def view_parameters(spec: ViewSpec) -> list[inspect.Parameter]:
    """The options a view takes: its keyword parameters, plus ``host_event_table``'s for a view
    that passes ``**options`` on (as ``perfkit report`` assumes too)."""
    params = list(inspect.signature(spec.function).parameters.values())[1:]
    out = [p for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        taken = {p.name for p in out}
        extra = inspect.signature(host_event_table).parameters.values()
        out += [p for p in extra if p.kind is p.KEYWORD_ONLY and p.name not in taken]
    return out


@cache
def cli_view_options() -> dict[str, str]:
    """Options ``perfkit report`` hands to the views: view option -> command-line flag, read
    from the ``requested`` dict in ``perfkit_core.cli.report`` so a new one is found."""
    callback = cli.report.callback
    tree = ast.parse(textwrap.dedent(inspect.getsource(callback)))
    keys: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "requested" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    if not keys:
        raise DocsError("no `requested = {...}` in perfkit_core.cli.report any more")
    flags = {p.name: p for p in cli.report.params}
    missing = [key for key in keys if key not in flags]
    if missing:
        raise DocsError(f"report options {missing} have no command-line flag")
    return {key: max(flags[key].opts, key=len) for key in keys}


def _cli_sample(key: str) -> Any:
    """A value of the ``perfkit report`` option ``key`` other than its default."""
    param = next(p for p in cli.report.params if p.name == key)
    if getattr(param, "is_flag", False):
        return True
    choices = getattr(param.type, "choices", None)
    if choices:
        return next(c for c in choices if c != param.default)
    return (param.default or 0) + 1


def cli_flags_for(view: str) -> dict[str, str]:
    """View option -> the ``perfkit report`` flag that sets it, for ``view``."""
    flags = cli_view_options()
    passed = view_options(view, {key: _cli_sample(key) for key in flags})
    return {key: flags[key] for key in passed}


@cache
def computed(name: str) -> tuple[tuple[str, pd.DataFrame], ...]:
    """The view on the synthetic run: (options text, table) with its defaults, then with each
    variant of ``VIEW_VARIANTS``."""
    spec = own_views()[name]
    run = synthetic.default_run()
    params = {p.name: p.default for p in view_parameters(spec)}
    variants = VIEW_VARIANTS.get(name, ())
    keys = sorted({k for v in variants for k in v if k in params})
    out = [(", ".join(f"{k}={params[k]!r}" for k in keys), spec.function(run))]
    out += [
        (", ".join(f"{k}={v!r}" for k, v in o.items()), spec.function(run, **o)) for o in variants
    ]
    return tuple(out)


def generic_column(column: str) -> str:
    """``gpu:0_peak_allocated_bytes`` -> ``<device>_peak_allocated_bytes``; others unchanged."""
    if column in NOT_DEVICE_COLUMNS:
        return column
    for suffix in DEVICE_COLUMN_SUFFIXES:
        if column.endswith(suffix) and column != suffix.lstrip("_"):
            return "<device>" + suffix
    return column


def column_rows(name: str) -> list[list[str]]:
    """One row per column the view can have: column, unit, report header, meaning."""
    shapes = [
        (label, [generic_column(c) for c in frame.columns]) for label, frame in computed(name)
    ]
    order: list[str] = []
    for _label, columns in shapes:
        order += [c for c in columns if c not in order]
    # Header labels the view states (``frame.attrs["labels"]``), device columns generic.
    stated: dict[str, str] = {}
    for _label, frame in computed(name):
        for column, text in (frame.attrs.get("labels") or {}).items():
            generic = generic_column(column)
            device = column[: len(column) - len(generic) + len("<device>")]
            stated.setdefault(generic, text.replace(device, "<device>", 1) if device else text)
    meanings = VIEW_COLUMNS.get(name, {})
    stale = set(meanings) - set(order)
    if stale:
        raise DocsError(f"view_text.VIEW_COLUMNS[{name!r}] describes {sorted(stale)}, not computed")
    rows = []
    for column in order:
        if column not in meanings:
            raise DocsError(f"view {name!r} returns {column!r}; describe it in view_text.py")
        meaning = meanings[column]
        present = [label for label, columns in shapes if column in columns]
        if len(present) < len(shapes) and "(only with" not in meaning:
            meaning += " (only with " + "; ".join(code(p) for p in present) + ")"
        unit = column_unit(column)
        header = header_label(stated.get(column) or column_label(column), unit, "ms")
        rows.append([code(column), "" if unit == "text" else unit, header, meaning])
    return rows


def option_rows(name: str, spec: ViewSpec) -> list[list[str]]:
    """One row per option of a view: option, default, command line, what it does."""
    flags = cli_flags_for(name)
    rows = []
    for p in view_parameters(spec):
        meaning = OPTION_MEANINGS.get((name, p.name)) or OPTION_MEANINGS.get(p.name)
        if meaning is None:
            raise DocsError(
                f"option {p.name!r} of view {name!r} is not in view_text.OPTION_MEANINGS"
            )
        if p.name in flags:
            flag = code(flags[p.name])
        elif p.name == "top":
            flag = "`--top` (the report cuts ranked tables itself)"
        else:
            flag = "Python only"
        default = "" if p.default is p.empty else code(repr(p.default))
        rows.append([code(p.name), default, flag, meaning])
    return rows


def call_text(name: str, spec: ViewSpec) -> str:
    """``run.summary("name", option=default, ...)``, strings in double quotes as ruff writes."""
    args = [json.dumps(name)] + [
        f"{p.name}={json.dumps(p.default) if isinstance(p.default, str) else repr(p.default)}"
        for p in view_parameters(spec)
    ]
    one_line = f"run.summary({', '.join(args)})"
    if len(one_line) <= 88:
        return one_line
    return "run.summary(\n" + "".join(f"    {a},\n" for a in args) + ")"


@generator("views.overview")
def overview(page: str = "") -> str:
    """A table of the views, each linking to its section of ``page`` (default: this page)."""
    rows = [
        [
            f"[`{name}`]({page}#{name})",
            spec.description,
            codes(p.name for p in view_parameters(spec)),
        ]
        for name, spec in own_views().items()
    ]
    return table(["view", "what it shows", "options"], rows)


@generator("views.view", covers=lambda: own_views())
def view(name: str) -> str:
    """The reference of one view: description, call, docstring, options, columns, fixed rows."""
    views = own_views()
    if name not in views:
        raise DocsError(f"no view {name!r}; perfkit's views are {sorted(views)}")
    spec = views[name]
    doc = inspect.getdoc(spec.function) or ""
    parts = [f"*{spec.description}*", f"```python\n{call_text(name, spec)}\n```", doc]
    if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(spec.function).parameters.values()):
        parts.append(
            "The table is built by `perfkit_core.views.operators.host_event_table`:\n\n"
            + (inspect.getdoc(host_event_table) or "")
        )
    parts += [
        "**Options**",
        table(["option", "default", "perfkit report", "what it does"], option_rows(name, spec)),
        "**Columns**",
        table(["column", "unit", "report header", "meaning"], column_rows(name)),
    ]
    if name in FIXED_ROW_VIEWS:
        results = computed(name)
        shown = [str(r) for r in results[0][1]["name"]]
        text = "Rows: " + codes(shown) + "."
        for label, frame in results[1:]:
            extra = [str(r) for r in frame["name"] if str(r) not in shown]
            if extra:
                text += f" With {code(label)}, also " + codes(extra) + "."
        parts.append(text)
    return blocks(*parts)


@generator("views.units")
def units() -> str:
    """The unit conventions, with the columns of every view each one covers."""
    columns: set[str] = set()
    for name in own_views():
        for _label, frame in computed(name):
            columns |= {generic_column(c) for c in frame.columns}
    by_unit: dict[str, list[str]] = {}
    for column in sorted(columns):
        by_unit.setdefault(column_unit(column), []).append(column)
    unknown = set(by_unit) - set(UNIT_TEXT) - {"text"}
    if unknown:
        raise DocsError(f"columns of unit {sorted(unknown)} appeared; describe it in UNIT_TEXT")
    rows = [
        [unit, meaning, report, codes(by_unit.get(unit, []))]
        for unit, (meaning, report) in UNIT_TEXT.items()
    ]
    return table(["unit", "meaning", "in the text report", "columns"], rows)


@generator("views.cli")
def cli_options() -> str:
    """Which ``perfkit report`` flag reaches which view."""
    views = own_views()
    rows = []
    for key, flag in cli_view_options().items():
        takers = [name for name in views if key in cli_flags_for(name)]
        rows.append([code(flag), code(key), codes(takers) or "none"])
    return table(["perfkit report", "view option", "views that take it"], rows)


@generator("views.python_only_options")
def python_only_options() -> str:
    """The view options no ``perfkit report`` flag sets, as code spans."""
    flags = cli_view_options()
    found: list[str] = []
    for spec in own_views().values():
        for p in view_parameters(spec):
            if p.name not in flags and p.name != "top" and p.name not in found:
                found.append(p.name)
    return codes(found)


@generator("views.phase_rules")
def phase_rules() -> str:
    """The phases of a step, from ``perfkit_core.views.anatomy.attribution``'s docstring, after checking
    that they add up to the step on a synthetic run."""
    run = synthetic.default_run()
    times = step_time.phase_times(run)
    if (
        not times.empty
        and (times[list(step_time.PHASE_COLUMNS)].sum(axis=1) - times["step_ns"]).abs().max() > 1
    ):
        raise DocsError("the phases of a step no longer add up to the step")
    doc = inspect.getdoc(attribution) or ""
    part = doc.split("Phases, one definition for every framework:", 1)[1].split("\n\n", 2)[1]
    return part


@generator("views.model_phases")
def model_phases() -> str:
    """The model_spans view's phase rows, after checking the phase rules on synthetic runs."""
    frame = phases.model_spans_view(synthetic.default_run()).set_index("name")
    note = str(frame.attrs.get("note", ""))
    if not note.startswith("forward derived") or int(frame.loc["forward", "calls"]) == 0:
        raise DocsError("the model view no longer derives the forward phase of torch runs")
    older = [e for e in synthetic.STEP if not e[1].startswith("autograd::engine")]
    older_frame = phases.model_spans_view(synthetic.build(3, older)).set_index("name")
    if int(older_frame.loc["backward", "calls"]) != 3:
        raise DocsError("operators named *Backward no longer count as backward in older traces")
    rows = [[code(label), code(kind)] for label, kind in phases.MODEL_PHASES]
    return table(["row", "event kind"], rows)


@generator("views.derived_forward_rule")
def derived_forward_rule() -> str:
    """The rule deriving torch's forward phase, from its docstring."""
    doc = inspect.getdoc(phases._derived_forward) or ""
    return doc.split("\n\n", 1)[1] if "\n\n" in doc else doc


@generator("views.model_note")
def model_note() -> str:
    """The note the model view gives a torch run, as code."""
    return code(phases.model_spans_view(synthetic.default_run()).attrs.get("note", ""))


@generator("views.warmup_notes")
def warmup_notes() -> str:
    """The benchmark view's note by default and with one warm-up step, on a 3-step run."""
    run = synthetic.build(3)
    default = str(steps.benchmark_view(run).attrs.get("note", ""))
    warm = str(steps.benchmark_view(run, warmup=1).attrs.get("note", ""))
    if "warm-up" in default or "warm-up" not in warm:
        raise DocsError("the benchmark view's warm-up rule changed; update the views page")
    return f"{code(default)} by default and {code(warm)} with `warmup=1`"
