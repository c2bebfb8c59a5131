"""What the step timer's ``save`` times on the machine that trained, through the adapters'
hooks, beside the step times: the loader's costs (handing a batch over, receiving one, each
training op beside a loading thread, the two cores' slowdowns) and an eager pass of a tiny
model, with the keys the timer's record keeps them under. The advice reads them back from a
saved run (``perfkit_core.advice.loader``, ``perfkit_core.advice.compiled``)."""

from __future__ import annotations

import math

#: Key of the timer's record in a saved run's metadata.
META_KEY = "step_timer"

#: Key, in the timer's record, of what handing a batch from a loader worker over cost on the
#: machine that trained (ns; ``StepTimer.save``).
LOADER_BATCH_KEY = "loader_batch_ns"

#: Key, in the timer's record, of what receiving a batch from a loader worker added to a busy
#: training step on the machine that trained (ns; ``StepTimer.save``).
LOADER_RECEIVE_KEY = "loader_receive_ns"

#: Key, in the timer's record, of what each op of the training thread cost its CPU time beside
#: a loading thread of the training process on the machine that trained (ns per op;
#: ``StepTimer.save``, where the steps loaded in such a thread): the input-pipeline advice
#: takes a loading thread's step apart with it (``perfkit_core.advice.loader.thread_split``).
THREAD_OP_KEY = "thread_op_ns"

#: Keys, in the timer's record, of how many times as long the framework's ops and a loader's
#: Python work each took beside the other on two cores of the machine that trained as alone
#: (``StepTimer.save``): where the free core shares the training core's hardware, workers save
#: less (``perfkit_core.advice.corun``).
TRAINING_SLOWDOWN_KEY = "training_slowdown"
LOADING_SLOWDOWN_KEY = "loading_slowdown"

#: Key, in the timer's record, of what an eager forward and backward of a tiny model took on
#: the machine that trained (ns; ``StepTimer.save``): the compile advice scales the costs a
#: compiled graph adds per call and per fused kernel by it.
EAGER_PASS_KEY = "eager_pass_ns"


def loader_batch_ns(framework: str) -> float | None:
    """What handing a batch from a loader worker over costs in ``framework``'s DataLoader on
    this machine now (ns), as its adapter times it (``perfkit_loader_batch_ns``); None when no
    adapter could, or what it gave is not a positive number."""
    number = _timed_cost("perfkit_loader_batch_ns", framework)
    return number if number is not None and number > 0 else None


def loader_receive_ns(framework: str) -> float | None:
    """What receiving a batch from a loader worker adds to a busy training step in
    ``framework``'s DataLoader on this machine now (ns), as its adapter times it
    (``perfkit_loader_receive_ns``); None when no adapter could, or what it gave is not a
    number of 0 or more."""
    number = _timed_cost("perfkit_loader_receive_ns", framework)
    return number if number is not None and number >= 0 else None


def eager_pass_ns(framework: str) -> float | None:
    """What an eager forward and backward of a tiny model takes in ``framework`` on this
    machine now (ns), as its adapter times it (``perfkit_eager_pass_ns``); None when no
    adapter could, or what it gave is not a positive number."""
    number = _timed_cost("perfkit_eager_pass_ns", framework)
    return number if number is not None and number > 0 else None


def corun_slowdowns(framework: str) -> dict[str, float]:
    """How many times as long ``framework``'s ops and a loader's Python work each take beside
    the other on two cores of this machine now as alone, as its adapter times them
    (``perfkit_corun_slowdowns``), under their record keys (``training_slowdown``,
    ``loading_slowdown``); empty when no adapter could, or it gave anything but two finite
    numbers of at least 1."""
    from perfkit_core.plugins import framework_hook

    try:
        found = framework_hook("perfkit_corun_slowdowns", framework)(framework=framework)
    except Exception:  # timing a cost must never lose the step times
        return {}
    if not isinstance(found, (tuple, list)) or len(found) != 2:
        return {}
    pair = slowdown_pair(*found)
    return {} if pair is None else {TRAINING_SLOWDOWN_KEY: pair[0], LOADING_SLOWDOWN_KEY: pair[1]}


def slowdown_pair(training: object, loading: object) -> tuple[float, float] | None:
    """(training, loading) as floats when both are finite numbers of at least 1 (not bools),
    else None: the only slowdowns a record, a plugin or a finding's evidence may give."""
    pair = finite_number(training), finite_number(loading)
    if pair[0] is None or pair[1] is None or min(pair[0], pair[1]) < 1.0:
        return None
    return pair[0], pair[1]


def thread_op_ns(framework: str) -> float | None:
    """What each op of the training thread costs its CPU time beside a loading thread of the
    training process in ``framework`` on this machine now (ns), as its adapter times it
    (``perfkit_thread_op_ns``); None when no adapter could, or what it gave is not a number of
    0 or more."""
    number = _timed_cost("perfkit_thread_op_ns", framework)
    return number if number is not None and number >= 0 else None


def loader_costs_here(framework: str, thread: bool = False) -> dict[str, float]:
    """The loader costs of ``framework`` timed on this machine now, under their record keys
    (``loader_batch_ns``, ``loader_receive_ns``, ``training_slowdown``,
    ``loading_slowdown``, and with ``thread``, where the steps loaded in a thread of the
    training process, ``thread_op_ns``), leaving out those no adapter could time."""
    costs = {
        LOADER_BATCH_KEY: loader_batch_ns(framework),
        LOADER_RECEIVE_KEY: loader_receive_ns(framework),
        **({THREAD_OP_KEY: thread_op_ns(framework)} if thread else {}),
    }
    timed = {key: value for key, value in costs.items() if value is not None}
    return timed | corun_slowdowns(framework)


def _timed_cost(hook: str, framework: str) -> float | None:
    """What the adapters' ``hook`` (a ``firstresult`` hook taking ``framework``) gave, as a
    finite number; None for no answer, an error or anything else."""
    from perfkit_core.plugins import framework_hook

    try:
        found = framework_hook(hook, framework)(framework=framework)
    except Exception:  # timing a cost must never lose the step times
        return None
    return finite_number(found)


def finite_number(value: object) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None: for
    figures read back from a run's metadata or from a plugin, which may hold anything."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
