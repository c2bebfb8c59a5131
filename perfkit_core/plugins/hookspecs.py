"""Every hook perfkit calls, in one place.

A plugin is a module or object with functions marked ``@perfkit_core.hookimpl`` whose names are
the hook names below. perfkit's own adapters (``perfkit_torch``, ``perfkit_paddle``) are plugins
registered through the entry-point group ``perfkit``; third-party plugins register the same way.
Runtime types are imported only for type checking, so this module can never join an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from perfkit_core.events.run import Run
    from perfkit_core.views.costmodel.opcost import OpCall, OpCost

PROJECT_NAME = "perfkit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: A loader a plugin hands back for a file it claims: called with the path, returns a ``Run``.
TraceLoader = Callable[[Path], "Run"]
#: What ``perfkit_register_views`` receives: ``register(name, function, description[, across])``.
ViewRegistrar = Callable[..., None]


@hookspec(firstresult=True)
def perfkit_claim_trace(path: Path, head: bytes) -> TraceLoader | None:
    """Claim a trace file that this plugin can read.

    Called by ``perfkit_core.load()`` for every file that is not a saved run, once per file,
    until a plugin claims it.

    :param path: the file to be read.
    :param head: the file's first 64 KiB, already decompressed when the file is gzip; may be
        shorter for small files, and empty for an empty file.
    :returns: a callable ``loader(path) -> Run`` when this plugin reads the file, else ``None``.
        The loader raises ``perfkit_core.TraceError`` naming the file for bad input.

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_claim_folder(path: Path) -> TraceLoader | None:
    """Claim a folder that this plugin reads as one run (a framework's log folder).

    Called by ``perfkit_core.load()`` for every folder that is not a saved run, before the
    folder is read as a job of per-rank trace files, until a plugin claims it. Added for
    ``perfkit-xla``: TensorFlow and JAX write a profile as a log folder
    (``LOG_DIR/plugins/profile/<run>/<host>.xplane.pb``, with the trace viewer's
    ``<host>.trace.json.gz`` beside it), which is one run, not a folder of ranks.

    :param path: the folder.
    :returns: a callable ``loader(path) -> Run`` when this plugin reads the folder, else
        ``None``. The loader raises ``perfkit_core.TraceError`` naming the folder or file for
        bad input. Must be cheap when it returns ``None``: list the folder, read no trace.

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_trace_rank(path: Path, head: bytes) -> int | None:
    """Say which rank of a distributed job a trace file holds, without loading it.

    Called by ``perfkit report JOB --rank R`` for each trace file of a folder of per-rank
    traces, to load only the file of rank R.

    :param path: the trace file.
    :param head: the file's first 64 KiB, already decompressed when the file is gzip.
    :returns: the rank the trace records when this plugin reads such files and the head says
        it, else ``None`` (a file no plugin answers for is numbered by its place in the folder,
        as when its rank is not recorded).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec
def perfkit_register_views(register: ViewRegistrar) -> None:
    """Add summary views, the tables ``Run.summary(view)`` returns.

    Called the first time a view is looked up through a plugin manager, and again after a
    plugin was registered or unregistered on it, for every plugin of that manager (built-ins
    first).

    :param register: call ``register(name, function, description)`` for each view. ``function``
        is called as ``function(run, **options)`` and returns a ``pandas.DataFrame`` whose key
        column is ``name`` and whose other columns are snake_case with the unit in the name
        (``cpu_total_ns``). A later registration of the same name replaces an earlier one, so a
        plugin can override a built-in view. An optional fourth argument says how the view
        combines the ranks of a job (``perfkit_core.views.multirank.across``): a ``MeanRule``,
        ``"concat"`` (the default: one block of rows per rank, with a ``rank`` column),
        ``"native"`` (the function reads every rank itself), or a callable taking the view's
        options and returning a ``Combiner``. Each rank's table is computed by calling
        ``function`` on a one-rank run.
    :returns: nothing; results are ignored. Every plugin's implementation is called.
    """


@hookspec
def perfkit_framework_info() -> dict[str, Any] | None:
    """Describe the framework this plugin adapts, for ``perfkit info`` and ``perfkit demo``.

    Called each time the installed adapters are listed. Must not import the framework at
    module import time; may import it inside the function.

    :returns: ``{"framework": name, "installed": bool, "version": str | None}`` or ``None`` for
        plugins that adapt no framework. Results of all plugins are collected into a list.
    """


#: How many steps a ``perfkit_demo`` loop runs, and its step timer times, without the profiler
#: for each profiled step. Twenty unprofiled steps of about 2 ms are some 40 ms, within one slow
#: spell of a shared VM: on a 2-core machine, four runs of the demo's Paddle loop with 20 put its
#: loader finding at 9%, 27%, 48% and 40% of the step, and nine with 200 at 19% to 34% but for
#: one (45%). Ten per profiled step: 200 beside the demo's 20 profiled, about 0.4 s of Paddle's.
DEMO_TIMED_PER_PROFILED = 10


@hookspec
def perfkit_demo(directory: Path, steps: int) -> list[Path] | None:
    """Profile a small training loop with this plugin's framework, on the CPU.

    Called by ``perfkit demo`` once per plugin. The loop runs under the framework's own profiler
    with the plugin's ``on_trace_ready`` handler and saves its runs under ``directory``.

    :param directory: folder for this plugin's runs (created by the plugin as needed).
    :param steps: number of training steps to profile (a few more may run as warm-up). A loop
        timed by ``perfkit_core.step_timer`` runs ``DEMO_TIMED_PER_PROFILED`` times as many
        without the profiler, so that its advice is stated on the step without the profiler.
    :returns: the saved run folders, or ``None`` when the framework is not installed. Results
        of all plugins are collected into a list.
    """


@hookspec
def perfkit_annotation(name: str) -> AbstractContextManager[Any] | None:
    """Open a named span through this plugin's framework (``perfkit_core.annotate``).

    Called each time an ``annotate(name)`` block or decorated function is entered. Must not
    import its framework: a plugin whose framework the program has not imported returns
    ``None``.

    :param name: the span's name, as the user gave it.
    :returns: an unentered context manager that records the span in the framework's profiler
        (``torch.profiler.record_function``, ``paddle.profiler.RecordEvent``), or ``None``.
        Results of all plugins are collected; perfkit enters them all.
    """


@hookspec
def perfkit_register_advisors(register: Callable[[str, Callable[..., Any], str], None]) -> None:
    """Add advice rules, run by ``Run.advise()`` and ``perfkit advise``.

    Called the first time advice is asked for through a plugin manager, and again after a
    plugin was registered or unregistered on it, for every plugin of that manager (built-ins
    first).

    :param register: call ``register(rule_id, function, description)`` for each rule.
        ``function(context)`` receives a ``perfkit_core.advice.Context`` (``run``, ``step_ns``,
        ``steps``, ``has_device``, ``framework``) and returns a ``Finding``, a list of them, or
        ``None``. A rule must read only ``context.run.events`` / ``.meta`` and its views, and
        must not claim a ``saving_ns`` larger than the time it is based on. A later
        registration of the same id replaces an earlier one.
    :returns: nothing; results are ignored. Every plugin's implementation is called.
    """


@hookspec(firstresult=True)
def perfkit_remedy(finding: Any, framework: str) -> str | None:
    """Say what to change for a finding, with code in the run's own framework.

    Called once per finding by ``Run.advise()``, after the rules ran.

    :param finding: the ``perfkit_core.advice.Finding`` (``rule``, ``id``, ``evidence``).
    :param framework: the run's framework (``run.framework``: ``torch``, ``paddle``, ``jax``,
        ``tensorflow``, or another adapter's name).
    :returns: the remedy text (may hold code lines) when this plugin adapts ``framework`` and
        knows the rule, else ``None``; perfkit then falls back to a framework-neutral sentence.

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_measure_saving(finding: Any, framework: str) -> dict[str, Any] | None:
    """Measure a finding's saving on this machine by replaying its hot part with and without
    the remedy (``perfkit advise --measure``, ``run.advise(measure=True)``).

    Called once per finding, after its remedy was set, only when measuring was asked for.

    :param finding: the ``perfkit_core.advice.Finding`` (``rule``, ``evidence``: what the trace
        recorded, e.g. the optimizer's class and parameter shapes).
    :param framework: the run's framework.
    :returns: ``{"saving_ns": ns per step, "estimate": one sentence saying what was replayed,
        "evidence": {...}}``, and ``"within_error": True`` when the measured saving is within
        the estimate's error (the finding's ``within_error``), when this plugin adapts
        ``framework`` and can replay the rule's case from what the finding recorded, else
        ``None`` (the finding keeps its modelled estimate).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_op_family(name: str, framework: str) -> str | None:
    """Map an op name to its family, for ops no canonical-op table knows.

    Called by ``perfkit_core.views.costmodel.canonical.Resolver.family`` (the ``family`` view and
    ``perfkit_core.compare``) once per distinct canonical op of each run whose family neither
    the user's op map nor ``CANONICAL_FAMILIES`` gives; the name is usually the op's canonical
    name (``perfkit_canonical_op``), or its native name without decorations.

    :param name: the op's canonical name, or a native op name (``aten::addmm``,
        ``matmul dygraph``, ...).
    :param framework: the run's framework (``torch``, ``paddle``, ``jax``, ``tensorflow``, ...).
    :returns: one of ``perfkit_core.views.families.FAMILIES`` when this plugin adapts ``framework``
        and knows the name, else ``None`` (perfkit then applies its framework-neutral rules).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_loading_thread(name: str, framework: str) -> bool | None:
    """Say whether a host thread of the training process loads data for the training thread.

    Called by the advice (``perfkit_core.advice.rules.cpu.outermost_ops``) once per named
    thread of a run (``Run.meta["threads"]``): the framework ops such a thread records (a
    Dataset that slices tensors per sample, the batch's collation) are loading, not the
    training thread's ops, so the ops per step that the CPU, optimizer and input-pipeline
    findings count leave them out.

    :param name: the thread's name as the trace gives it (Paddle's single-process loader runs
        in a thread it names ``Dataloader_<id>``).
    :param framework: the run's framework (``torch``, ``paddle``, ...).
    :returns: True or False when this plugin adapts ``framework`` and knows its loader's
        threads, else ``None`` (the thread is taken for one that trains).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_canonical_op(name: str, framework: str) -> str | None:
    """Map a native op name to its canonical op, the name the same work has in every framework,
    so that ``perfkit_core.compare`` lines a torch run and a paddle run up op by op.

    Called by the comparison's attribution (``perfkit_core.views.costmodel.canonical.Resolver``) once per
    distinct op name of each run, after the user's op map and the enclosing layer's type
    (``LAYER_OPS``) had no answer. Gradient ops are asked too (``AddmmBackward0``,
    ``Global_MatmulGradNode``); a gradient op that can be paired with its forward op takes the
    forward op's canonical op instead.

    :param name: the op name as recorded (``aten::addmm``, ``conv2d pybind_imperative_func``,
        ``Global_Conv2dGradNodeFinal``); torch's autograd nodes come without their
        ``autograd::engine::evaluate_function:`` prefix.
    :param framework: the run's framework (``torch``, ``paddle``, ``jax``, ``tensorflow``, ...).
    :returns: a lower-case canonical op (``linear``, ``conv``, ``pool``, ``rnn``, ``reshape``,
        ...; see ``perfkit_core.views.costmodel.canonical.CANONICAL_FAMILIES``) for its forward and
        backward alike, when this plugin adapts ``framework`` and knows the name, else ``None``
        (perfkit then uses the name without decorations).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_op_cost(call: OpCall, framework: str) -> OpCost | None:
    """Give the performance model of an op: the FLOPs and bytes of one call, from its recorded
    input shapes, dtypes and values (the ``roofline`` and ``mfu`` views, and the advice and
    comparison built on them).

    Called by ``perfkit_core.views.costs.run_costs`` once per distinct call of each run: per
    distinct op name, recorded inputs, enclosing op and paired op. Adapters answer for their
    framework's ops (``perfkit_torch`` for ``aten::`` ops and autograd nodes,
    ``perfkit_paddle``, ``perfkit_xla``); a plugin gives a formula for any other op, such as a
    custom kernel, by answering for its name (mark the implementation ``tryfirst=True`` to be
    asked before the adapters and so replace their formula).

    :param call: a ``perfkit_core.views.OpCall``: ``name`` (as recorded), ``inputs`` (a
        ``perfkit_core.views.Inputs``: ``shapes``, ``dtypes``, ``values``; ``tensor(i)`` is the
        shape of input ``i``), ``parent`` (the ``OpCall`` of the op it runs inside, or None)
        and ``paired`` (for a gradient op, the forward op it differentiates; for a forward
        op, its gradient op; or None).
    :param framework: the run's framework (``torch``, ``paddle``, ``jax``, ``tensorflow``, ...).
    :returns: a ``perfkit_core.views.OpCost`` (``flops`` in FLOP, ``bytes`` in B, ``kind``,
        ``precision``, ...; the formulas of ``perfkit_core.views``, such as ``gemm_cost``,
        build one) when this plugin knows the op, else ``None`` (the op is then not modelled
        and its time counts as not modelled).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec
def perfkit_profiler_recording(profiler: Any) -> bool | None:
    """Say whether a framework profiler is recording now, for ``perfkit_core.step_timer``.

    Called at the start of every step the timer times, directly (not through the plugin
    manager) where no plugin wraps this hook: the plugins registered when the timer starts
    timing (its first step, and the first after each ``close``) are the ones asked. Must be
    cheap, and must not import its framework: a plugin whose framework the program has not
    imported returns ``None``. A plugin that raises makes the step neither profiled nor
    unprofiled; the error does not reach the training loop.

    :param profiler: the profiler object the user gave ``step_timer`` (``torch.profiler.profile``,
        ``paddle.profiler.Profiler``), or ``None`` when none was given.
    :returns: ``True`` when ``profiler`` is this plugin's framework's profiler (or, for
        ``None``, when this plugin can see its framework's profiler) and it is recording events
        now, ``False`` when it is not recording, ``None`` when this plugin cannot tell or when
        the profiler, not recording, still slows the steps (a started Paddle Profiler that its
        scheduler keeps closed): the timer then counts the step as neither profiled nor
        unprofiled. Results of all plugins are collected; a step is profiled when any says
        ``True``.
    """


@hookspec
def perfkit_phase_timers(on_phase: Callable[[str, int], None]) -> Callable[[], None] | None:
    """Time phases of the training step as they run, with or without the profiler, so advice
    can state a phase's time as the unprofiled program spends it instead of correcting the
    profiled time for the profiler's cost.

    Called by ``perfkit_core.step_timer`` when its first step starts, once per plugin.

    :param on_phase: call it with (phase, ns) each time a phase this plugin can see ends:
        ``optimizer`` for one optimizer step's wall time in ns; ``data`` for the wall time the
        training thread spent getting one batch (loading it, or waiting for a loader worker),
        and ``data_cpu`` for that thread's CPU time over the same batch (a loader without
        workers runs its Dataset there: the two tell its waits from its computing; it is
        within ``data``'s wall time and adds nothing to the step's); ``loading`` for one batch
        loaded in the training process by a thread of its own, as that thread's CPU time (its
        waits for the GIL are not loading); ``backward`` for one backward pass's wall time and
        ``forward`` for the training thread's time before it (from its batch to the backward
        call: the model's forward and the loss). Any thread may call it, and it never raises.
        The timer adds up the calls inside each timed step; of the calls between two steps it
        keeps the last ``data`` and ``data_cpu`` calls of the thread running the steps, for
        the step after it (the batch that step trains on), and ignores the rest. The timer
        itself keeps ``training_cpu``, the CPU time of the thread that ran each step.
    :returns: a function that removes this plugin's timers (the timer calls it when it saves
        or closes), or ``None`` when this plugin's framework is not imported or has no phase
        it can time.

    Every plugin's implementation is called.
    """


@hookspec(firstresult=True)
def perfkit_loader_batch_ns(framework: str) -> float | None:
    """Time what handing one batch from a loader worker to this process costs in
    ``framework``'s DataLoader on this machine now (ns per batch), for the input-pipeline
    advice of a run trained here.

    Called by ``perfkit_core.step_timer``'s ``save`` when the timed steps loaded data in the
    training process (a ``data`` or ``loading`` phase), once per framework: the machine that
    trained is the one whose cost the advice needs, and the run's trace cannot tell it. It may
    take about a second (a worker process starts). The step timer takes an exception (a worker
    that cannot start here) for no answer, and keeps the step times.

    :param framework: the saved run's framework (``meta["framework"]``).
    :returns: ns per batch, or ``None`` when ``framework`` is not this plugin's, the program
        has not imported it, or no worker could start.
    """


@hookspec(firstresult=True)
def perfkit_loader_receive_ns(framework: str) -> float | None:
    """Time what receiving one batch from a loader worker adds to a busy training step in
    ``framework``'s DataLoader on this machine now (ns of wall time per batch), for the
    input-pipeline advice of a run trained here, where it is not the hand-over's own cost
    (``perfkit_loader_batch_ns``): a DataLoader that receives batches in threads of the
    training process (Paddle's reader thread) costs a training thread whose ops hand the GIL
    over more than it costs an idle one.

    Called by ``perfkit_core.step_timer``'s ``save`` when the timed steps loaded data in the
    training process (a ``data`` or ``loading`` phase), once per framework, after
    ``perfkit_loader_batch_ns``. It may take a few seconds (a worker process starts). The step
    timer takes an exception for no answer, and keeps the step times.

    :param framework: the saved run's framework (``meta["framework"]``).
    :returns: ns per batch (0 or more), or ``None`` when ``framework`` is not this plugin's,
        the program has not imported it, no worker could start, or receiving costs the
        training process what the hand-over costs the worker (the advice then takes that).

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_thread_op_ns(framework: str) -> float | None:
    """Time what each op of a training thread costs its CPU time when a loading thread of the
    same process runs beside it in ``framework`` on this machine now (ns per op: handing the
    GIL over and back), for the input-pipeline advice of a run trained here whose
    single-process DataLoader loaded in a thread: the advice takes that step apart with it.

    Called by ``perfkit_core.step_timer``'s ``save`` when a thread of the training process
    loaded the timed steps' batches (a ``loading`` phase), once per framework, after
    ``perfkit_loader_batch_ns``. It may take a few seconds. The step timer takes an
    exception for no answer, and keeps the step times.

    :param framework: the saved run's framework (``meta["framework"]``).
    :returns: ns per op (0 or more), or ``None`` when ``framework`` is not this plugin's or
        the program has not imported it.

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_corun_slowdowns(framework: str) -> tuple[float, float] | None:
    """Time how much a loader worker on a free core slows the work beside it on this machine
    now, for the input-pipeline advice of a run trained here: where two cores share one
    physical core's hardware (a virtual machine's two hyperthreads), the training step and a
    worker's loading each run slower at once than alone, and workers save less than the idle
    core promises.

    Called by ``perfkit_core.step_timer``'s ``save`` when the timed steps loaded data in the
    training process (a ``data`` or ``loading`` phase), once per framework, after
    ``perfkit_loader_batch_ns``. An adapter answers with
    ``perfkit_core.advice.corun.corun_slowdowns`` given a unit of its framework's ops on one
    intra-op thread; it takes about half a second (a second interpreter starts). The step
    timer takes an exception, or anything but two finite numbers of at least 1, for no answer,
    and keeps the step times.

    :param framework: the saved run's framework (``meta["framework"]``).
    :returns: (how many times as long the framework's ops take beside a second process's
        Python loading work as alone, how many times as long that loading work takes beside
        them), or ``None`` when ``framework`` is not this plugin's, the program has not
        imported it, or no second process could start.

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_eager_pass_ns(framework: str) -> float | None:
    """Time one eager forward and backward of a tiny model in ``framework`` on this machine
    now (ns), for the compile advice of a run trained here: its ops are so small that the
    time is the CPU's cost of dispatching them, of autograd's bookkeeping and of Python, which
    a compiled graph's call and its fused kernels pay too, so the advice scales those costs
    by it.

    Called by ``perfkit_core.step_timer``'s ``save`` once per framework. It may take about
    50 ms, and must leave the program's random state, threads and grad mode as they were. The
    step timer takes an exception for no answer, and keeps the step times.

    :param framework: the saved run's framework (``meta["framework"]``).
    :returns: ns per forward and backward, or ``None`` when ``framework`` is not this
        plugin's, the program has not imported it, or the framework has no compile model.

    Stops at the first non-None result (``firstresult``).
    """


@hookspec(firstresult=True)
def perfkit_layer_spans_fix(framework: str) -> str | None:
    """Say how a run of ``framework`` gets layer spans, for a comparison whose other runs have them.

    Called by ``perfkit compare`` (``perfkit_core.comparison.attribution.missing_layers_line``)
    when a run has no layer span while another run has: the comparison then lines layers up by
    phase only and prints this advice beside its layer table and verdict.

    :param framework: the run's framework (``run.framework``).
    :returns: a short clause naming the call or option that records layer spans, when this
        plugin adapts ``framework``, else ``None``; perfkit then says so in neutral words.

    Stops at the first non-None result (``firstresult``).
    """
