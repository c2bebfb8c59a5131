"""Runs whose loader already had worker processes: what more workers would save.

The input-pipeline model of ``advice.loader`` moves loading out of the training process. A run
whose DataLoader already loaded in worker processes (``_MultiProcessingDataLoaderIter``,
``_DataLoaderIterMultiProcess``) has nothing left to move: its training thread waits for
batches the workers have not made yet. The step timer times those workers as the training
process's child processes (``children_cores``, ``children_ran``), so their CPU time per step
is what making and sending a batch costs them. More workers, one per core left free, spread
that cost further, and the step becomes the longer of the rest of the step plus receiving a
batch and the workers' CPU per step over the workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfkit_core.advice.loader_cores import processes_text
from perfkit_core.advice.text import duration_text
from perfkit_core.capture.machine_costs import finite_number
from perfkit_core.views.common import names_of_kind

if TYPE_CHECKING:
    from perfkit_core.events.run import Run


def run_loader_workers(run: Run) -> tuple[int, float] | None:
    """(how many worker processes the run's loader had, the cores they kept busy while the
    steps ran without the profiler), where its data-loading spans are a multi-process
    iterator's and the step timer timed its child processes (``children_ran`` of 1 or more,
    ``children_cores`` over 0); else None."""
    if not any("MultiProcess" in name for name in names_of_kind(run, "dataloader")):
        return None
    record = run.meta.get("step_timer") or {}
    ran, cores = record.get("children_ran"), finite_number(record.get("children_cores"))
    if not isinstance(ran, int) or isinstance(ran, bool) or ran < 1:
        return None
    if cores is None or cores <= 0:
        return None
    return ran, cores


def more_workers_sides(
    rest_ns: float, workers_cpu_ns: float, workers: float, receive_ns: float
) -> tuple[float, float]:
    """(the rest of the step plus receiving a batch, the workers' CPU time per step spread over
    ``workers``), ns: the step with that many workers is the longer of the two."""
    return rest_ns + receive_ns, workers_cpu_ns / max(workers, 1.0)


def more_workers_saving(
    step_ns: float,
    rest_ns: float,
    workers_cpu_ns: float,
    had: float,
    more: float,
    receive_ns: float,
) -> float:
    """The step time (ns) that ``more`` workers save a step of ``step_ns`` whose ``had``
    workers spent ``workers_cpu_ns`` of CPU per step, and whose training thread's own work,
    all but its waits for batches, took ``rest_ns``: the longer of ``more_workers_sides`` with
    ``had`` workers (no more than the step) less the longer with ``had + more``. Waits the
    workers' pace does not explain (a step longer than both sides) stay: more workers do not
    make batches sooner where the workers kept up."""
    if more < 1 or had < 1:
        return 0.0
    now = min(max(more_workers_sides(rest_ns, workers_cpu_ns, had, receive_ns)), step_ns)
    after = max(more_workers_sides(rest_ns, workers_cpu_ns, had + more, receive_ns))
    return max(now - after, 0.0)


def more_workers_estimate(
    step_ns: float,
    rest_ns: float,
    had: int,
    busy_cores: float,
    more: float,
    cores_text: str,
    receive_ns: float,
    receive_from: str,
) -> tuple[float, str, dict[str, Any]]:
    """(the saving, ns per step; the estimate's text; the finding's evidence) of a run whose
    loader had ``had`` workers keeping ``busy_cores`` busy, a step of ``step_ns`` and ``rest_ns``
    of it besides the waits for batches, with ``more`` cores free (``cores_text``: how they
    were found) and receiving a batch costing the training step ``receive_ns`` (``receive_from``
    says where that figure came from)."""
    workers_cpu = busy_cores * step_ns
    saving = more_workers_saving(step_ns, rest_ns, workers_cpu, had, more, receive_ns)
    kept, spread_had = more_workers_sides(rest_ns, workers_cpu, had, receive_ns)
    ran = (
        f"The run's loader already loaded in worker processes: {processes_text(had)} of the "
        f"training process kept {busy_cores:.2f} cores busy while the steps ran without the "
        f"profiler, {duration_text(workers_cpu)} of CPU per step to make and send each batch. "
    )
    now = (
        f"With {had} worker{'' if had == 1 else 's'} a batch is made every "
        f"{duration_text(spread_had)}, and the rest "
        f"of the step plus receiving a batch takes {duration_text(rest_ns)} + "
        f"{duration_text(receive_ns)} ({receive_from}), against a step of "
        f"{duration_text(step_ns)} now. "
    )
    if more < 1:
        text = (
            f"{ran}{now}No core is free for more workers ({cores_text}): another worker "
            "would take CPU from the training process or the workers it has, so no saving is "
            "expected until cores are freed or the Dataset makes its batches with less CPU."
        )
    else:
        total = had + more
        _, spread = more_workers_sides(rest_ns, workers_cpu, total, receive_ns)
        after = max(kept, spread)
        bound = "the rest of the step" if spread <= kept else "loading"
        text = (
            f"{ran}{now}With {total:.0f} workers, {more:.0f} more for the free core(s) "
            f"({cores_text}), the step would take about {duration_text(after)}, the longer of "
            f"those {duration_text(kept)} and the workers' CPU per step spread over them "
            f"({duration_text(workers_cpu)} / {total:.0f} = {duration_text(spread)}): {bound} "
            "bounds it"
            + (", so more workers are not expected to pay here." if saving <= 0 else ".")
        )
    if step_ns > max(kept, spread_had) * 1.01:
        text += (
            f" The {duration_text(step_ns - max(kept, spread_had))} by which the step exceeds "
            "the longer of those two now is waiting the workers' pace does not explain, and "
            "stays."
        )
    evidence = {
        "loader_workers": had,
        "loader_workers_cores": busy_cores,
        "loader_workers_cpu_per_step_ns": workers_cpu,
    }
    return saving, text, evidence
