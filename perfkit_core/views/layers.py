"""The model as a tree of its layers, as tfprof's scope view shows it: one row per layer with its
calls, host and device time, model FLOPs and parameters, each *own* (the layer's alone) and
*with children* (the layer and every layer inside it), per step.

The layers are the layer spans of ``structure`` (torch module calls, Paddle layer forward events,
MindSpore cells): a row per layer key (the path of layer types from the outermost layer of the
step, each with its call ordinal among same-typed siblings), so one layer called twice in a step
is two rows, as the comparison lines them up. Where the adapter recorded the model
(``meta["model"]``, see ``perfkit_core.views.model_description``), a layer is named as the
user named it (``hidden1``) and carries its parameters.

What each figure counts, per step (the mean over the run's steps, or one step with ``step``):

- host time: the slices of ``attribution.step_slices`` in the forward and backward phases, by
  their layer. A backward op counts in the layer of the forward op it differentiates (the
  slices' layer: the ``forward_op`` link, else reverse order per op type), and host time inside a
  layer's span between its ops counts in that layer. The forward and backward time outside
  every layer (the loss, the autograd engine between layers) is the ``(no layer)`` row, so the
  layers' own times and ``(no layer)`` add up to the forward and backward phases of the
  ``model`` view.
- device time: the kernels launched in the forward and backward phases
  (``step_time.launched_kernels``), in the layer of their launching op, attributed the same
  way; with ``(no layer)`` they add up to the model view's GPU time of those phases.
- model FLOPs: the FLOPs of the matrix ops (``MODEL_KINDS``: GEMMs, convolutions, attention,
  recurrent layers; forward and backward) of the roofline model, in the layer of the op; with
  ``(no layer)`` they add up to the ``mfu`` view's model FLOPs per step.
- memory allocated: the bytes of the allocations (memory events, torch ``profile_memory=True``)
  made in the forward and backward phases, in the layer of the op that made them.
- parameters: the layer's own weights (those of the module or layer itself, and of sub-modules
  that were never called, like the members of a module list), counted once when shared.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.errors import OptionError
from perfkit_core.views.anatomy.layer_accounting import (
    allocated_by_layer,
    ancestors,
    descriptions_by_key,
    first_described,
    key_names,
    layer_of_rows,
    layers_running,
    per_key,
)

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: The row of the forward and backward time, device time and FLOPs outside every layer.
NO_LAYER = "(no layer)"
#: The note of a run that recorded no steps: the tree's figures are per step.
NO_STEPS_NOTE = (
    "no steps were recorded, and the layers' calls, times, FLOPs and memory are per step "
    "(call prof.step() once per training step)"
)
#: The note of a run whose adapter recorded no model.
NO_PARAMS_NOTE = "parameters not recorded (the adapter saw no model: see the model view guide)"
#: Phases whose time the tree holds.
TREE_PHASES = ("forward", "backward")
#: Figures with an own and a with-children column: (own key, with-children key).
PAIRED = (
    ("host_own_ns", "host_with_children_ns"),
    ("gpu_own_ns", "gpu_with_children_ns"),
    ("model_gflops_own", "model_gflops_with_children"),
    ("params_own", "params_with_children"),
    ("params_own_bytes", "params_with_children_bytes"),
    ("allocated_own_bytes", "allocated_with_children_bytes"),
)
LABELS = {
    "name": "Layer",
    "path": "Path",
    "depth": "Depth",
    "calls_per_step": "Calls per step",
    "host_own_ns": "Host time per step, own",
    "host_with_children_ns": "Host time per step, with children",
    "gpu_own_ns": "GPU time per step, own",
    "gpu_with_children_ns": "GPU time per step, with children",
    "model_gflops_own": "Model GFLOP per step, own",
    "model_gflops_with_children": "Model GFLOP per step, with children",
    "params_own": "Parameters, own",
    "params_with_children": "Parameters, with children",
    "params_own_bytes": "Parameter bytes, own",
    "params_with_children_bytes": "Parameter bytes, with children",
    "allocated_own_bytes": "Memory allocated per step, own",
    "allocated_with_children_bytes": "Memory allocated per step, with children",
    "shape": "Shape",
    "dtype": "Dtype",
}
COLUMNS = (
    "name",
    "path",
    "depth",
    "level",
    "calls_per_step",
    *(k for pair in PAIRED for k in pair),
)


def layers_view(
    run: Run,
    *,
    max_depth: int | None = None,
    order_by: str | None = None,
    filter: str | None = None,
    step: int | None = None,
    params: bool = False,
    select: str | None = None,
) -> pd.DataFrame:
    """The layer tree of ``run``, one row per layer in tree order (each under its parent), then
    the ``(no layer)`` row.

    Columns: ``name`` (the layer as the user named it where the model was recorded, else its
    type with its ordinal), ``path`` (its layer key: ``mlp/linear[2]``), ``depth`` (1 for the
    outermost layers), ``level`` (indentation: ``depth - 1``), ``calls_per_step``, and per step,
    own and with children (``PAIRED``): host time (ns), device time (ns, ``gpu_*``; NaN on runs
    without device work), model GFLOP, parameters (count) and their bytes (NaN where the run
    recorded no model; the note says so once), memory allocated (bytes; NaN without memory
    events). With ``params``, each layer's weights follow it
    as rows of their own, one level deeper (``name`` the weight's, ``shape``, ``dtype``).

    ``max_depth`` keeps layers of depth up to it; ``order_by`` orders siblings by a column,
    largest first, or by a figure's total (``calls``, ``host``, ``gpu``, ``flops``, ``params``,
    ``bytes``: ``params`` is ``params_with_children``; default: the order of their first call);
    ``filter`` (a regular expression, case-insensitive) keeps the layers whose name or path it
    matches or that ran an op whose type it matches (``layers_running``), with their
    enclosing layers, each with all its figures; ``step`` takes that
    step alone instead of the mean over the steps; ``select`` (comma-separated figures:
    ``calls``, ``host``, ``gpu``, ``flops``, ``params``, ``bytes``, ``memory``) keeps those figures' columns
    beside ``name``, ``path`` and ``depth``."""
    import pandas as pd

    from perfkit_core.views.anatomy.attribution import step_slices
    from perfkit_core.views.anatomy.step_time import launched_kernels, phase_times
    from perfkit_core.views.anatomy.structure import structure
    from perfkit_core.views.costmodel.opcost import MODEL_KINDS
    from perfkit_core.views.roofline import op_table

    # A figure's name orders by its total, as tfprof's ``-order_by params`` does.
    order_by = {k: v[-1] for k, v in ORDER_ALIASES.items()}.get(order_by or "", order_by)
    if order_by is not None and order_by not in COLUMNS:
        known = ", ".join([*ORDER_ALIASES, *(c for c in COLUMNS if c != "level")])
        raise OptionError(f"cannot order layers by {order_by!r}; columns: {known}")
    pattern = None
    if filter:
        try:
            pattern = re.compile(filter, re.IGNORECASE)
        except re.error as exc:
            raise OptionError(f"--filter {filter!r} is not a regular expression ({exc})") from exc
    st = structure(run)
    times = phase_times(run)
    steps_seen = sorted(set(times["step"].astype(int).tolist())) if len(times) else []
    if step is not None:
        if step not in steps_seen:
            shown = ", ".join(map(str, steps_seen)) or "none"
            raise OptionError(f"step {step} is not in the run (its steps: {shown})")
        wanted = [step]
    else:
        wanted = steps_seen
    n_steps = max(len(wanted), 1)

    # Layer rows in the steps taken, their keys and first call.
    step_numbers = run.events["step"].to_numpy()
    # A layer span counts in the step it ran in, on the step's thread or a thread that runs
    # the step's ops (TensorFlow's executor): by its step number.
    layer_rows = np.flatnonzero(st.is_layer & (step_numbers >= 0))
    layer_rows = layer_rows[np.isin(step_numbers[layer_rows], wanted)]
    keys_of_rows = np.array([st.layer_key.get(int(r), "") for r in layer_rows], dtype=object)
    # Spans of one call (``layer_call``: cut by the executor) count once.
    distinct_calls = {
        (int(step_numbers[r]), key, st.layer_call.get(int(r), int(r)))
        for r, key in zip(layer_rows.tolist(), keys_of_rows.tolist(), strict=True)
    }
    calls = per_key(
        np.array([key for _, key, _ in distinct_calls], dtype=object), np.ones(len(distinct_calls))
    )
    first: dict[str, int] = {}
    for key, start in zip(keys_of_rows.tolist(), st.start[layer_rows].tolist(), strict=True):
        first[key] = min(first.get(key, start), start)

    slices = step_slices(run)
    slices = slices[slices["phase"].isin(TREE_PHASES) & slices["step"].isin(wanted)]
    host_own = per_key(
        np.asarray(slices["layer"].astype(str).to_numpy(), dtype=object),
        slices["ns"].to_numpy(),
    )

    has_gpu = "gpu_step_ns" in times.columns
    gpu_own: dict[str, float] = {}
    if has_gpu:
        kernels = launched_kernels(run)
        kernels = kernels[kernels["phase"].isin(TREE_PHASES) & kernels["step"].isin(wanted)]
        krows = kernels["unit"].to_numpy().astype(np.int64)
        klayer = layer_of_rows(run, krows)
        kkeys = np.array([st.layer_key.get(int(r), "") for r in klayer.tolist()], dtype=object)
        gpu_own = per_key(kkeys, kernels["ns"].to_numpy())

    ops = op_table(run, None)
    ops = ops[np.isin(ops["kind"].to_numpy(), MODEL_KINDS)]
    if len(times):
        ops = ops[ops["step"].isin(wanted)]
    orow = ops["row"].to_numpy().astype(np.int64)
    olayer = layer_of_rows(run, orow)
    okeys = np.array([st.layer_key.get(int(r), "") for r in olayer.tolist()], dtype=object)
    flops_own = per_key(okeys, ops["flops"].to_numpy())
    memory_own = allocated_by_layer(run, slices)

    has_steps = bool(steps_seen)
    if has_steps:
        found = set(calls) | {
            k for k in (*host_own, *gpu_own, *flops_own, *(memory_own or {})) if k
        }
    # Without steps there is nothing per step to show; without layer spans (XLA's profilers
    # record none) nothing per layer: the tree is the recorded model's layers and parameters.
    untimed = not has_steps or not found
    if untimed:
        found = set(first_described(run))
    keys = sorted({up for k in found for up in ancestors(k)})
    names = key_names(run, keys)
    described = descriptions_by_key(run, keys)
    param_own: dict[str, float] = {}
    byte_own: dict[str, float] = {}
    if described is not None:
        for key, d in described.items():
            if not d.name and untimed and d.type:
                names[key] = d.type  # the model: its ordinal over the run says nothing
            if d.name:
                parts = d.name.split(".")
                # A list's member is named with its list: ``blocks.0``.
                cut = 2 if len(parts) > 1 and parts[-1].isdigit() else 1
                names[key] = ".".join(parts[-cut:])
                if names[key].isdigit() and d.type:  # a Sequential's member: ``0 (Linear)``
                    names[key] = f"{names[key]} ({d.type})"
            param_own[key] = float(sum(p.count for p in d.params))
            byte_own[key] = float(sum(p.bytes for p in d.params))

    own_columns = {
        "host_own_ns": host_own,
        "gpu_own_ns": gpu_own,
        "model_gflops_own": {k: v / 1e9 for k, v in flops_own.items()},
        "params_own": param_own,
        "params_own_bytes": byte_own,
        "allocated_own_bytes": memory_own or {},
    }
    rows: dict[str, dict[str, Any]] = {}
    for key in keys:
        row: dict[str, Any] = {
            "name": names.get(key, key),
            "path": key,
            "depth": key.count("/") + 1,
            "level": key.count("/"),
            "calls_per_step": calls.get(key, 0.0) / n_steps,
        }
        for own, total in PAIRED:
            values = own_columns[own]
            per_step = not own.startswith("params")
            value = values.get(key, 0.0)
            row[own] = value / n_steps if per_step else value
            row[total] = 0.0
        rows[key] = row
    for key in keys:
        for up in ancestors(key):
            if up not in rows:
                continue
            for own, total in PAIRED:
                rows[up][total] += rows[key][own]
    # Top-level: a key's ancestors are all in ``rows`` (a layer's parent is a layer).
    children: dict[str, list[str]] = {}
    for key in keys:
        parent = key.rsplit("/", 1)[0] if "/" in key else ""
        children.setdefault(parent, []).append(key)
    if pattern is not None:
        by_op = layers_running(run, wanted, pattern)
        keep = {
            up
            for key in keys
            if pattern.search(key) or pattern.search(str(rows[key]["name"])) or key in by_op
            for up in ancestors(key)
        }
    else:
        keep = set(keys)

    def sort_key(key: str) -> tuple[float, int]:
        if order_by in (None, "name", "path"):
            if order_by is None:
                return (0.0, first.get(key, 0))
            return (0.0, 0)
        value = rows[key].get(order_by)
        number = float(value) if value is not None and not _nan(value) else -math.inf
        return (-number, first.get(key, 0))

    ordered: list[dict[str, Any]] = []

    def visit(parent: str) -> None:
        kids = children.get(parent, [])
        if order_by in ("name", "path"):
            kids = sorted(kids, key=lambda k: str(rows[k][order_by]))
        else:
            kids = sorted(kids, key=sort_key)
        for key in kids:
            if key not in keep:
                continue
            if max_depth is None or rows[key]["depth"] <= max_depth:
                ordered.append(rows[key])
                deeper = max_depth is None or rows[key]["depth"] < max_depth
                if params and deeper and described is not None and key in described:
                    for p in described[key].params:
                        ordered.append(
                            {
                                "name": p.name,
                                "path": f"{key}/{p.name}",
                                "depth": rows[key]["depth"] + 1,
                                "level": rows[key]["level"] + 1,
                                "params_own": float(p.count),
                                "params_with_children": float(p.count),
                                "params_own_bytes": float(p.bytes),
                                "params_with_children_bytes": float(p.bytes),
                                "shape": "x".join(map(str, p.shape)) or "scalar",
                                "dtype": p.dtype,
                            }
                        )
                visit(key)

    visit("")
    no_layer: dict[str, Any] = {"name": NO_LAYER, "path": "", "depth": 1, "level": 0}
    for own, total in PAIRED:
        if own.startswith("params"):
            continue
        value = own_columns[own].get("", 0.0) / n_steps
        no_layer[own] = value
        no_layer[total] = value
    columns = list(COLUMNS)
    if params:
        columns += ["shape", "dtype"]
    frame = pd.DataFrame([*ordered, no_layer] if has_steps else ordered, columns=columns)
    for column in columns:
        if column.startswith("params"):
            frame[column] = frame[column].astype(float)
    if described is None:
        for column in columns:
            if column.startswith("params"):
                frame[column] = math.nan
    if not has_gpu:
        for column in ("gpu_own_ns", "gpu_with_children_ns"):
            frame[column] = math.nan
    # No op has a FLOP count (TensorFlow's ops, a trace without input shapes): unknown, not 0.
    has_flops = bool(np.isfinite(ops["flops"].to_numpy(dtype=float)).any()) if len(ops) else False
    if not has_flops:
        for column in ("model_gflops_own", "model_gflops_with_children"):
            frame[column] = math.nan
    if memory_own is None or not has_steps:
        for column in ("allocated_own_bytes", "allocated_with_children_bytes"):
            frame[column] = math.nan
    if untimed:
        # Measured figures of layers no span recorded are unknown, not zero; (no layer) keeps
        # every op's.
        layer_row = frame["name"] != NO_LAYER
        measured = [p for p in PAIRED if not p[0].startswith("params")]
        for column in ("calls_per_step", *(k for pair in measured for k in pair)):
            frame.loc[layer_row, column] = math.nan
    frame["depth"] = frame["depth"].astype(int)
    frame["level"] = frame["level"].astype(int)
    notes = []
    if not has_steps:
        notes.append(
            NO_STEPS_NOTE
            + (
                ": the tree shows the recorded model's layers and their parameters"
                if keys
                else "; the run recorded no model either, so there is no tree to show"
            )
        )
    elif not keys:
        notes.append("no layers were recorded: every op is outside a layer")
    elif untimed:
        notes.append(
            "no layer spans were recorded, so every op's time is in (no layer): the tree shows "
            "the recorded model's layers and their parameters"
        )
    if described is None and has_steps:
        notes.append(NO_PARAMS_NOTE)
    if not has_flops and has_steps:
        notes.append(
            "model FLOPs unknown: no op of the run has a FLOP count (the roofline model needs "
            "the ops' input shapes)"
        )
    if has_steps:
        notes.append(
            "own time and FLOPs of the layers plus (no layer) add up to the forward and "
            "backward phases; a backward op counts in the layer of the forward op it "
            "differentiates" + (f"; step {step} alone" if step is not None else "")
        )
    if pattern is not None:
        notes.append(
            f"layers whose name or path matches {filter!r} or that ran an op of a matching "
            "type, with the layers around them; each with all its figures"
        )
    if select:
        frame = frame[_selected(frame, select)]
    frame.attrs["note"] = "; ".join(notes)
    frame.attrs["labels"] = dict(LABELS)
    frame.attrs["paired"] = [list(p) for p in PAIRED]
    if frame.empty:
        frame.attrs["explain_empty"] = True  # the report says why, never an empty nothing
    return frame


#: Figures ``order_by`` may name, ordering by their last column here (the total).
ORDER_ALIASES = {
    "calls": ("calls_per_step",),
    "host": ("host_own_ns", "host_with_children_ns"),
    "gpu": ("gpu_own_ns", "gpu_with_children_ns"),
    "flops": ("model_gflops_own", "model_gflops_with_children"),
    "params": ("params_own", "params_with_children"),
    "bytes": ("params_own_bytes", "params_with_children_bytes"),
    "memory": ("allocated_own_bytes", "allocated_with_children_bytes"),
}
#: What ``select`` may name, and the columns each keeps.
SELECTABLE = {
    "calls": ("calls_per_step",),
    "host": ("host_own_ns", "host_with_children_ns"),
    "gpu": ("gpu_own_ns", "gpu_with_children_ns"),
    "flops": ("model_gflops_own", "model_gflops_with_children"),
    "params": ("params_own", "params_with_children", "shape", "dtype"),
    "bytes": ("params_own_bytes", "params_with_children_bytes"),
    "memory": ("allocated_own_bytes", "allocated_with_children_bytes"),
}


def _selected(frame: pd.DataFrame, select: str) -> list[str]:
    """The columns of ``frame`` that ``select`` keeps (see ``layers_view``)."""
    names = [x.strip() for x in select.split(",") if x.strip()]
    unknown = [x for x in names if x not in SELECTABLE]
    if unknown:
        raise OptionError(
            f"cannot select {', '.join(map(repr, unknown))}; figures: {', '.join(SELECTABLE)}"
        )
    wanted = {c for x in names for c in SELECTABLE[x]}
    return [c for c in frame.columns if c in ("name", "path", "depth", "level") or c in wanted]


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
