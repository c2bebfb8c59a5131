"""Whether a finding's remedy was applied, read from the runs themselves: the setting the
remedy changes, as each run recorded it.

- ``input-pipeline`` (loader workers): the DataLoader's iterator, from the data-loading spans'
  names: ``single-process`` (torch's ``_SingleProcessDataLoaderIter``, Paddle's
  ``_DataLoaderIterSingleProcess``) or ``worker processes`` (``_MultiProcessingDataLoaderIter``,
  ``_DataLoaderIterMultiProcess``), counted (``2 worker processes``) where the step timer timed
  them as child processes, so that a run asked for more workers shows whether it got them.
- ``optimizer`` (a fused or multi-tensor optimizer): the optimizer's implementation,
  ``for-loop``, ``foreach`` or ``fused`` (``rules.optimizer.optimizer_class``), in Paddle's
  words for a Paddle run (``PADDLE_IMPLEMENTATIONS``: its option is ``use_multi_tensor``).
- ``compile`` (``torch.compile``): ``compiled`` when the run recorded ops of compiled code
  (``compiled.COMPILED_PREFIXES``), else ``eager``.
- ``launch-bound`` (CUDA graphs): ``CUDA graphs`` when the run replayed graphs
  (``cudaGraphLaunch``), else ``eager``; None for a run without device work.
- ``amp`` (mixed precision): ``tensor cores`` when a kernel of the run ran on them (the
  kernel view's ``tensor_cores``), else ``fp32``; None for a run without kernels.

``perfkit compare`` reads the state in both runs: a remedy whose setting changed was acted on,
one whose setting did not was not, whatever its time did (another change can shrink it: a
Paddle loader moved to workers frees the GIL, and the optimizer loop it held back gets
faster). A run that recorded no such spans has no state (None), and the follow-up falls back
to the finding's measured time; so does a BEFORE already in a remedied state
(``REMEDIED``): its remedy is more of the same (more loader workers), which the setting does
not show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfkit_core.advice.compiled import COMPILED_PREFIXES
from perfkit_core.advice.engine import make_context
from perfkit_core.advice.loader_workers import multi_process_names, timed_workers
from perfkit_core.advice.rules.cpu import outermost_ops
from perfkit_core.advice.rules.optimizer import optimizer_class
from perfkit_core.events.facts import has_device
from perfkit_core.views.common import names_of_kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from perfkit_core.events.run import Run

SINGLE_PROCESS = "single-process"
WORKER_PROCESSES = "worker processes"
CUDA_GRAPHS = "CUDA graphs"
TENSOR_CORES = "tensor cores"


def loader_mode(run: Run) -> str | None:
    """``worker processes`` when any data-loading span is a multi-process iterator's (``N
    worker processes`` where the step timer timed them, ``loader_workers.timed_workers``: a
    finding of such a run asks for more, and their count shows whether it got them),
    ``single-process`` when one is a single-process iterator's, else None."""
    names = names_of_kind(run, "dataloader")
    if multi_process_names(names):
        had = timed_workers(run)
        if had is None:
            return WORKER_PROCESSES
        return f"{had[0]} worker process{'' if had[0] == 1 else 'es'}"
    if any("SingleProcess" in n for n in names):
        return SINGLE_PROCESS
    return None


#: The optimizer's implementations in the words of a Paddle user, whose optimizers take
#: ``use_multi_tensor`` where torch's take ``foreach``.
PADDLE_IMPLEMENTATIONS = {"for-loop": "per-parameter loop", "foreach": "use_multi_tensor"}


def optimizer_implementation(run: Run) -> str | None:
    """The optimizer's implementation (``for-loop``, ``foreach``, ``fused``; a Paddle run's in
    ``PADDLE_IMPLEMENTATIONS``'s words); None when the run recorded no optimizer step."""
    if not names_of_kind(run, "optimizer"):
        return None
    _, in_optimizer, _ = outermost_ops(make_context(run))
    implementation = optimizer_class(run, in_optimizer)[1]
    if run.framework == "paddle":
        return PADDLE_IMPLEMENTATIONS.get(implementation, implementation)
    return implementation


def compile_state(run: Run) -> str | None:
    """``compiled`` when the run recorded ops of compiled code, else ``eager``; None for a run
    with no events."""
    names = run.events["name"].unique()
    if not len(names):
        return None
    compiled = any(str(n).startswith(COMPILED_PREFIXES) for n in names)
    return "compiled" if compiled else "eager"


def graph_state(run: Run) -> str | None:
    """``CUDA graphs`` when the run launched graphs (``cudaGraphLaunch``), else ``eager``; None
    for a run without device work."""
    if not has_device(run):
        return None
    launched = any("GraphLaunch" in n for n in names_of_kind(run, "runtime"))
    return CUDA_GRAPHS if launched else "eager"


def precision_state(run: Run) -> str | None:
    """``tensor cores`` when a kernel of the run ran on tensor (or matrix) cores, else
    ``fp32``; None for a run without kernels."""
    import pandas as pd

    from perfkit_core.views.kernels import tensor_core_kernels

    names = names_of_kind(run, "kernel")
    if not names:
        return None
    on_tensor_cores = bool(tensor_core_kernels(pd.Series(sorted(names))).any())
    return TENSOR_CORES if on_tensor_cores else "fp32"


#: States that are a remedy already: a finding of a run in one of them asks for more of it.
REMEDIED = frozenset({WORKER_PROCESSES, "fused", "compiled", CUDA_GRAPHS, TENSOR_CORES})

#: The state each remedy changes, by the finding's remedy key (else its id).
STATES: dict[str, Callable[[Run], str | None]] = {
    "input-pipeline": loader_mode,
    "optimizer": optimizer_implementation,
    "compile": compile_state,
    "launch-bound": graph_state,
    "amp": precision_state,
}


def remedy_state(run: Run, finding: Any) -> str | None:
    """The setting ``finding``'s remedy changes, as ``run`` recorded it (read once per run and
    remedy); None when perfkit reads no such setting for the finding or the run recorded
    none."""
    remedy = getattr(finding, "remedy_key", "") or finding.id
    reader = STATES.get(remedy)
    if reader is None:
        return None
    key = f"advice_remedy_state:{remedy}"
    if key not in run.cache:
        run.cache.put(key, reader(run))
    found: str | None = run.cache.get(key)
    return found


def remedy_states(before: Run, after: Run, finding: Any) -> tuple[str | None, str | None]:
    """(the setting in BEFORE, in AFTER) when they tell whether ``finding``'s remedy was
    applied; (None, None) when either run recorded none or BEFORE's is a remedy already."""
    first = remedy_state(before, finding)
    if first is None or first in REMEDIED:
        return None, None
    second = remedy_state(after, finding)
    return (None, None) if second is None else (first, second)
