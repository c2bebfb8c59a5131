"""The input pipeline's model: what loader workers save, on the cores a machine leaves free
and at what cost per batch. The input-pipeline rule states its saving with it, the combined
saving of every finding simulates the loader with it, and the adapters' replays feed it what
they measured."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: What handing one batch from a loader worker to the training process costs each side (ns):
#: the worker puts the batch in shared memory and sends it, the training process receives and
#: maps it. Measured by the replay of ``perfkit advise --measure``
#: (``perfkit_torch.replay.loader_batch_ns``: one worker, batches of features and labels, two
#: tensors of 4 KiB) on a 2-core x86 KVM machine with torch 2.13 and its default
#: file-descriptor sharing: 1.7 to 2.3 ms per batch over repeated replays. A machine with
#: cheaper system calls pays less; ``--measure`` measures it there. Traces record no batch
#: sizes (torch records no shapes of the tensor lists its collate stacks).
LOADER_BATCH_NS = 2_300_000.0


def loader_cores(run: Run, thread_cores: float = 0.0) -> tuple[float, str]:
    """(the cores loader workers can use, how that was found), rounded to whole cores (a core
    at least half idle counts as free: the remedy prescribes whole workers), at least 0:

    - the cores the machine left idle while the run's steps ran without the profiler (the step
      timer's ``idle_cores``: the machine's idle CPU time over those steps);
    - else the cores less the 1-minute load average when the run was saved (the step timer's
      ``cpu_count`` and ``load_average``, the training process included). That average lags:
      a run saved a few seconds after training started, on a machine idle before, shows the
      machine idle;
    - else this machine's cores less one for the training process, at least 1.

    ``thread_cores``: the cores a loading thread of the training process keeps busy beside
    training (Paddle's single-process DataLoader: its CPU time per step over the step), which
    workers take over; added to the first two."""
    record = run.meta.get("step_timer") or {}
    cores, load = record.get("cpu_count"), record.get("load_average")
    idle = record.get("idle_cores")
    thread = max(float(thread_cores), 0.0) if math.isfinite(thread_cores) else 0.0
    by_thread = (
        f" and the {thread:.1f} core the loading thread keeps busy, which workers take over"
        if thread > 0
        else ""
    )

    def whole(free: float) -> float:  # with the thread's share, to the nearest whole core
        return float(math.floor(max(free, 0.0) + thread + 0.5))

    if isinstance(idle, (int, float)) and not isinstance(idle, bool) and math.isfinite(idle):
        return whole(float(idle)), (
            f"{idle:.1f} cores idle on the run's machine while its steps ran without the "
            f"profiler{by_thread}, rounded to whole cores"
        )
    if isinstance(cores, int) and cores > 0 and isinstance(load, (int, float)) and load >= 0:
        return whole(float(cores) - float(load)), (
            f"{cores} cores less a load average of {load:.1f} on the run's machine, the training "
            f"process included{by_thread}, rounded to whole cores"
        )
    cores = os.cpu_count() or 1
    return float(max(cores - 1, 1)), f"{cores} cores on this machine, one left to training"


def loader_saving(
    data_ns: float, rest_ns: float, workers: float, batch_ns: float = LOADER_BATCH_NS
) -> float:
    """The step time (ns) that ``workers`` loader workers save when the training process now
    spends ``data_ns`` per step loading and ``rest_ns`` on the rest of the step: handing a
    batch over costs each side ``batch_ns``, so the step becomes the longer of the rest plus
    receiving the batch and the loading plus sending it, spread over the workers. It assumes
    each worker has a core of its own (on a machine whose cores are busy, the workers slow the
    training process instead)."""
    if workers <= 0:
        return 0.0  # no core free: a worker only takes CPU from the training process
    after = max(rest_ns + batch_ns, (data_ns + batch_ns) / workers)
    return max(data_ns + rest_ns - after, 0.0)
