"""The breakdown view: each step's time split exclusively into Kernel, Memcpy, Memset,
Communication, Runtime, DataLoader, CPU Exec and Other, as the TensorBoard profiler's overview
splits it, so the parts add up to the step."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events.intervals import (
    Intervals,
    intersect_intervals,
    merge_intervals,
    overlap_per_window,
    step_spans,
    step_window,
    subtract_intervals,
)
from perfkit_core.events.schema import CodedColumn, coded
from perfkit_core.views.common import no_step_note, view_frame

if TYPE_CHECKING:
    import pandas as pd

    from perfkit_core.events.run import Run

#: The parts of a step in the order they claim time: (name, column, what counts).
#: Each part takes the step time no earlier part took; ``Other`` is the rest.
BREAKDOWN_PARTS: tuple[tuple[str, str, str], ...] = (
    ("Kernel", "kernel_ns", "device kernels other than communication"),
    ("Memcpy", "memcpy_ns", "device copies"),
    ("Memset", "memset_ns", "device memory sets"),
    ("Communication", "communication_ns", "communication kernels and host-side collectives"),
    ("Runtime", "runtime_ns", "runtime and driver calls on the host"),
    ("DataLoader", "dataloader_ns", "fetching batches on the host"),
    (
        "CPU Exec",
        "cpu_exec_ns",
        "host operators, user spans, phase spans and Python calls",
    ),
)
OTHER = ("Other", "other_ns", "step time none of the above covers")

#: Event kinds (host side unless said) that make up each part.
_DEVICE_PARTS = {"Kernel": ("kernel",), "Memcpy": ("memcpy",), "Memset": ("memset",)}
_HOST_PARTS = {
    "Runtime": ("runtime",),
    "DataLoader": ("dataloader",),
    "CPU Exec": (
        "operator",
        "operator_inner",
        "forward",
        "backward",
        "optimizer",
        "user",
        "python",
    ),
}


def breakdown_view(run: Run, *, rank: int | None = None, per_step: bool = False) -> pd.DataFrame:
    """The step time split exclusively by what ran, in the TensorBoard profiler's order.

    Within each step (stretched over the device work it launched, ``step_spans``), every
    instant goes to the first part of Kernel, Memcpy, Memset, Communication, Runtime,
    DataLoader, CPU Exec that was running then, on any stream or host thread; what none covers
    is Other. So the parts add up to the step. Default: one row per part, ``time_ns`` the mean
    per step (per rank and step) and ``ratio_pct`` its share of the mean step. ``per_step``:
    one row per step, a column per part (``kernel_ns`` ... ``other_ns``) and ``step_ns``.

    Parts as the TensorBoard profiler's overview defines them, with perfkit's event kinds:
    Kernel = device kernels other than communication; Communication = communication kernels
    and host-side collectives (gloo, NCCL calls); CPU Exec = host operators, user spans, phase
    spans and Python calls. Events of kind ``other`` (native categories perfkit does not know)
    count in Other, as the plugin leaves categories it does not know out.
    """
    ev = run.events
    kind = coded(ev["kind"])
    start = ev["start_ns"].to_numpy()
    end = start + ev["dur_ns"].to_numpy()
    on_device = ev["stream"].to_numpy() >= 0
    ranks = ev["rank"].to_numpy()
    window, has_steps = step_window(run, rank)
    spans = step_spans(run, rank)
    if has_steps:
        pieces = list(
            zip(
                spans["rank"].tolist(),
                spans["step"].tolist(),
                spans["start_ns"].tolist(),
                spans["end_ns"].tolist(),
                strict=True,
            )
        )
    else:
        pieces = [
            (-1 if rank is None else rank, -1, int(s), int(e))
            for s, e in zip(window[0].tolist(), window[1].tolist(), strict=True)
        ]
    names = [p[0] for p in BREAKDOWN_PARTS] + [OTHER[0]]
    columns = [p[1] for p in BREAKDOWN_PARTS] + [OTHER[1]]
    step_rows: list[dict[str, Any]] = []
    for r in sorted({p[0] for p in pieces}):
        in_rank = np.ones(len(ev), dtype=bool) if r < 0 else ranks == r
        mine = [p for p in pieces if p[0] == r]
        slots = merge_intervals(
            np.array([p[2] for p in mine], dtype=np.int64),
            np.array([p[3] for p in mine], dtype=np.int64),
        )
        taken: dict[str, Intervals] = {}
        for name in names[:-1]:
            sel = in_rank & _part_rows(name, kind, on_device)
            part = intersect_intervals(slots, merge_intervals(start[sel], end[sel]))
            taken[name] = part
            slots = subtract_intervals(slots, part)
        taken[OTHER[0]] = slots
        per_part = {
            name: overlap_per_window(
                taken[name],
                np.array([p[2] for p in mine], dtype=np.int64),
                np.array([p[3] for p in mine], dtype=np.int64),
            ).tolist()
            for name in names
        }
        for i, (_, number, s0, e0) in enumerate(mine):
            row: dict[str, Any] = {
                "name": f"step {number}" if has_steps else "profiled span",
                "rank": r if r >= 0 else int(ranks.min()) if len(ranks) else 0,
                "step": number,
            }
            for name, column in zip(names, columns, strict=True):
                row[column] = per_part[name][i]
            row["step_ns"] = e0 - s0
            step_rows.append(row)
    note = no_step_note(has_steps)
    if per_step:
        return view_frame(step_rows, ["name", "rank", "step", *columns, "step_ns"], note)
    n = len(step_rows)
    mean_step = sum(r["step_ns"] for r in step_rows) / n if n else math.nan
    rows = []
    for name, column in zip(names, columns, strict=True):
        mean = sum(r[column] for r in step_rows) / n if n else math.nan
        rows.append(
            {
                "name": name,
                "time_ns": mean,
                "ratio_pct": 100.0 * mean / mean_step if n and mean_step else math.nan,
            }
        )
    frame = view_frame(
        rows,
        ["name", "time_ns", "ratio_pct"],
        "; ".join(
            n
            for n in (
                note,
                "exclusive: each instant counts once, for the first part running then, so "
                "data loading or host work that overlaps a kernel counts as Kernel here (the "
                "model view's phases count all of the step's time waiting for data)",
            )
            if n
        ),
    )
    frame.attrs["labels"] = {"time_ns": "Exclusive time per step", "ratio_pct": "% of step"}
    return frame


def _part_rows(name: str, kind: CodedColumn, on_device: np.ndarray) -> np.ndarray:
    """Rows of the event table that make up part ``name``."""
    if name in _DEVICE_PARTS:
        return on_device & kind.among(*_DEVICE_PARTS[name])
    if name == "Communication":
        return kind.among("communication")
    return ~on_device & kind.among(*_HOST_PARTS[name])
