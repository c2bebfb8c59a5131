"""Compare runs: before and after a change, or one model in two frameworks, side by side.

``compare(*runs)`` returns a ``Comparison``. ``verdict()`` says which run is faster, by how much
(with a confidence interval) and what explains the difference; ``summary(view)`` tables have the
key column ``name`` and one column per run (its label): ``steps`` (step times and spread),
``totals`` (device, copy, communication and data-loading time), and the attribution tables that
add up to the step-time difference, ranked by their share of it: ``phases``, ``family`` (op
families), ``layers``, ``user`` (annotated spans) and ``ops`` (canonical ops, lined up across
frameworks); ``efficiency`` and ``layer_efficiency`` (achieved TFLOP/s, share of the peak and
of the roofline bound per canonical op or layer, and each run's MFU). Times are per step, or
per sample when batch sizes are given. ``gate(pct)`` is the
regression check CI uses. The first run is the baseline; differences are last minus first.

Every figure is taken over each run's steady steps (``events.steady``): leading warm-up steps
far above the rest (a compile, a first step that fills caches) are left out of the ratio, its
interval, the attribution tables and the gate, and the verdict names them with the ratio they
would have given; a slow step later in a run stays in and is named.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from perfkit_core.comparison.types import (
    ATTRIBUTION_VIEWS,
    RESERVED_COLUMNS,
    VIEWS,
    Comparison,
)
from perfkit_core.events.steady import steady_run
from perfkit_core.views.costmodel.canonical import OpMap

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

__all__ = ["ATTRIBUTION_VIEWS", "RESERVED_COLUMNS", "VIEWS", "Comparison", "compare"]

#: File name endings a default label leaves out.
TRACE_SUFFIXES = (
    ".pt.trace.json.gz",
    ".pt.trace.json",
    ".paddle_trace.json",
    ".paddle_trace.pb",
    ".xplane.pb",
    ".json.gz",
    ".json",
    ".gz",
)
_TOKENS = re.compile(r"[^_\-./\s]+")


def default_labels(inputs: tuple[Any, ...], runs: list[Run]) -> list[str]:
    """Short labels for the runs, from what differs between them: the parts of their file or
    folder names no other input shares (``resnet50_v100_num_workers_0.pt.trace.json.gz`` and
    ``..._4...`` read ``workers0`` and ``workers4``), else their frameworks when those differ
    (``torch``, ``paddle``), else ``run1``, ``run2``, ...; always unique."""
    from perfkit_core.events.run import Run

    names = []
    for i, item in enumerate(inputs):
        origin = getattr(item, "origin", None) if isinstance(item, Run) else item
        text = os.path.basename(os.fspath(origin).rstrip("/")) if origin else ""
        for suffix in TRACE_SUFFIXES:
            if text.endswith(suffix):
                text = text[: -len(suffix)]
                break
        names.append(text or f"run{i + 1}")
    tokens = [_TOKENS.findall(n) for n in names]
    common = set.intersection(*(set(t) for t in tokens)) if tokens else set()
    labels = []
    for own, name in zip(tokens, names, strict=True):
        parts = [t for t in own if t not in common]
        # A bare number reads better with the word before it (num_workers_0 -> workers0).
        if len(parts) == 1 and parts[0].isdigit():
            at = own.index(parts[0])
            parts = [own[at - 1] + parts[0]] if at > 0 else parts
        labels.append("_".join(parts) or name)
    frameworks = [r.framework for r in runs]
    if len(set(labels)) < len(labels) and len(set(frameworks)) == len(frameworks):
        labels = list(frameworks)
    if len(set(labels)) < len(labels) or set(labels) & RESERVED_COLUMNS:
        labels = [f"{i + 1}:{label}" for i, label in enumerate(labels)]
    return labels


def check_labels(labels: list[str]) -> list[str]:
    """Return ``labels`` stripped, or raise ValueError: labels must be non-empty, unique, and
    name no column a comparison table uses itself (``name``, ``delta_ns``, ...), nor another
    run's ``<label> calls`` / ``<label> ops`` column."""
    cleaned = [str(label).strip() for label in labels]
    if any(not label for label in cleaned):
        raise ValueError("a run label is empty")
    seen: set[str] = set()
    for label in cleaned:
        if label in seen:
            raise ValueError(f"run label {label!r} is given twice: labels must be unique")
        seen.add(label)
    for label in cleaned:
        if label in RESERVED_COLUMNS:
            raise ValueError(
                f"run label {label!r} is a column name of the comparison tables; choose another"
            )
        for other in cleaned:
            if label in (f"{other} calls", f"{other} ops"):
                raise ValueError(f"run label {label!r} clashes with run {other!r}'s columns")
    return cleaned


def compare(
    *runs: Any,
    labels: list[str] | None = None,
    batch_sizes: list[int | None] | None = None,
    per: str = "step",
    op_map: OpMap | str | os.PathLike[str] | None = None,
    steady: bool = True,
) -> Comparison:
    """Return a ``Comparison`` of ``runs`` (``Run`` objects or paths ``perfkit_core.load`` reads).

    The first run is the baseline. ``labels`` name the runs (default: the file or folder names;
    unique, see ``check_labels``); ``batch_sizes`` enables ``per="sample"`` normalization (times
    per sample instead of per step); ``op_map`` adds or overrides canonical-op mappings (an
    ``OpMap``, or a TOML/YAML file read by ``comparison.opmap.load_op_map``). With ``steady``
    (the default) each run's leading warm-up steps are left out (``events.steady``); without
    it every recorded step counts.
    """
    from perfkit_core.comparison.opmap import load_op_map
    from perfkit_core.events.loading import load
    from perfkit_core.events.run import Run

    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if per not in ("step", "sample"):
        raise ValueError("per must be 'step' or 'sample'")
    if op_map is not None and not isinstance(op_map, OpMap):
        op_map = load_op_map(op_map)
    loaded = [r if isinstance(r, Run) else load(r) for r in runs]
    if labels is None:
        labels = default_labels(runs, loaded)
    if len(labels) != len(loaded):
        raise ValueError(f"give one label per run: {len(labels)} labels for {len(loaded)} runs")
    labels = check_labels(list(labels))
    kept = [steady_run(r) for r in loaded] if steady else loaded
    comparison = Comparison(kept, labels, list(batch_sizes or []), per, op_map, whole_runs=loaded)
    if per == "sample":
        for i in range(len(loaded)):
            comparison.sample_scale(i)
    return comparison
