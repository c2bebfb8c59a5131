"""The layer, backward and optimizer spans of a MindSpore run, from its operators' scopes.

MindSpore records no span per cell call on the CPU; its operators' full names say which cells
they ran in (``perfkit_mindspore.scopes``). Per step, on each thread, in time order:

- each run of consecutive forward operators inside one cell is a ``forward`` span named after
  the cell's type (``Dense``), nested as the cells are (``SequentialCell`` > ``Dense``), from
  its first operator's start to its last one's end: perfkit's layer spans, as Paddle's layer
  forward events are;
- each run of consecutive backward operators (``Gradients/...``) is a ``backward`` span named
  ``Gradients``;
- each run of consecutive optimizer operators is an ``optimizer`` span named after the
  optimizer (``Momentum``).

A backward operator under ``.../<cell>/Grad_X/`` is linked (``forward_op``) to that cell's
forward operator of type ``X`` in the same step, the most recent call before it.
"""

from __future__ import annotations

from collections import defaultdict

from perfkit_mindspore.rows import Rows
from perfkit_mindspore.scopes import Scope, parse

#: ``category`` of the spans perfkit adds from scopes.
SCOPE_CATEGORY = "cell scope"


def _scope_path(cells: tuple[tuple[str, str], ...]) -> str:
    return "/".join(f"{attr}-{cell}" for attr, cell in cells)


def add_scope_spans(rows: Rows, ops: list[int], step: int) -> None:
    """Add to ``rows`` the layer, backward and optimizer spans of the operator rows ``ops``
    (one step of one thread, in time order), and link backward operators to forward ones."""
    cols = rows.columns
    if not ops:
        return
    scopes: list[Scope] = [parse(cols["full_name"][r] or cols["name"][r]) for r in ops]
    pid, tid = cols["pid"][ops[0]], cols["tid"][ops[0]]

    def span(kind: str, name: str, full_name: str, members: list[int]) -> None:
        start = min(cols["start_ns"][r] for r in members)
        end = max(cols["start_ns"][r] + cols["dur_ns"][r] for r in members)
        rows.add(
            kind=kind,
            name=name,
            full_name=full_name,
            category=SCOPE_CATEGORY,
            start_ns=start,
            dur_ns=end - start,
            pid=pid,
            tid=tid,
            step=step,
        )

    # Layers: a stack of open cells, each with the operator rows inside it so far.
    open_cells: list[tuple[tuple[str, str], list[int]]] = []

    def close_to(depth: int) -> None:
        while len(open_cells) > depth:
            done = open_cells.pop()
            path = (*tuple(c for c, _ in open_cells), done[0])
            span("forward", done[0][1], _scope_path(path), done[1])
            if open_cells:
                open_cells[-1][1].extend(done[1])

    for r, scope in zip(ops, scopes, strict=True):
        cells = scope.cells if scope.phase == "forward" else ()
        common = 0
        while (
            common < len(open_cells)
            and common < len(cells)
            and open_cells[common][0] == cells[common]
        ):
            common += 1
        close_to(common)
        for cell in cells[common:]:
            open_cells.append((cell, []))
        if open_cells:
            open_cells[-1][1].append(r)
    close_to(0)

    # Backward and optimizer phases: runs of consecutive operators of the phase.
    run: list[int] = []
    run_phase = ""
    run_name = ""

    def flush() -> None:
        if run and run_phase == "backward":
            span("backward", "Gradients", "Gradients", run)
        elif run and run_phase == "optimizer":
            span("optimizer", run_name, f"optimizer-{run_name}", run)

    for r, scope in zip(ops, scopes, strict=True):
        name = scope.optimizer if scope.phase == "optimizer" else ""
        if scope.phase != run_phase or name != run_name:
            flush()
            run, run_phase, run_name = [], scope.phase, name
        run.append(r)
    flush()

    # Backward operators to the forward operator they differentiate.
    latest: dict[tuple[tuple[tuple[str, str], ...], str], int] = {}
    for r, scope in zip(ops, scopes, strict=True):
        if scope.phase == "forward" and scope.cells:
            latest[(scope.cells, scope.type)] = r
        elif scope.phase == "backward" and scope.grad_of:
            forward = latest.get((scope.cells, scope.grad_of))
            if forward is not None:
                cols["forward_op"][r] = forward


def add_all_scope_spans(rows: Rows, op_rows: list[int], steps: list[tuple[int, int, int]]) -> None:
    """``add_scope_spans`` for every step (``(number, start, end)``; the whole run as one
    group when there are none) and thread of the operator rows ``op_rows``."""
    cols = rows.columns
    groups: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    ordered = sorted(steps, key=lambda s: s[1])
    for r in sorted(op_rows, key=lambda r: (cols["start_ns"][r], -cols["dur_ns"][r])):
        start = cols["start_ns"][r]
        number = -1
        for n, begin, end in ordered:
            if begin <= start < end:
                number = n
                break
        if steps and number < 0:
            continue  # outside every step: no span holds it
        groups[(number, cols["pid"][r], cols["tid"][r])].append(r)
    for (number, _, _), members in groups.items():
        add_scope_spans(rows, members, number)
