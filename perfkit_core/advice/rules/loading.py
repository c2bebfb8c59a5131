"""The input-pipeline rule: the time the step spends loading data in the training process, and
what loader workers would save of it (the model: ``advice.loader``)."""

from __future__ import annotations

from perfkit_core.advice.basis import (
    OUTLIER_STEP_TIMES_MEDIAN,
    recorded_events_per_step,
    step_basis,
    timed_phase,
    typical_mean_step,
)
from perfkit_core.advice.engine import Context, Finding
from perfkit_core.advice.loader import (
    LOADER_BATCH_SOURCES,
    LOADER_HANDOVER_BY_FRAMEWORK,
    LOADER_RECEIVE_SOURCES,
    LOADING_OP_SHARE,
    MODEL_COST,
    RECEIVE_TIMED,
    THREAD_OP_NS,
    THREAD_OP_SOURCES,
    handover_exceeds_loading,
    handover_ns,
    loader_saving,
    remedied_sides,
    run_loader_batch_cost,
    run_loader_receive_cost,
    run_slowdowns,
    run_thread_op_cost,
    shared_turn_saving,
    slowdown_factors,
    slowdown_text,
    thread_split,
)
from perfkit_core.advice.loader_cores import free_cores
from perfkit_core.advice.loader_workers import (
    more_workers_estimate,
    multi_process_loader,
    timed_workers,
    untimed_workers_estimate,
    waiting_loader_workers,
    waiting_workers_text,
)
from perfkit_core.advice.rules.cpu import loading_thread_ops_per_step, training_ops_per_step
from perfkit_core.advice.text import duration_text, per_step_text, unprofiled_per_step_text
from perfkit_core.capture.machine_costs import finite_number
from perfkit_core.capture.step_timer import DATA_CPU, TRAINING_CPU
from perfkit_core.comparison.overhead import step_timer_times
from perfkit_core.events import links
from perfkit_core.events.schema import str_values

#: input-pipeline: data loading takes at least this share of step time.
INPUT_PIPELINE_MIN_PCT = 5.0


def rule_input_pipeline(ctx: Context) -> Finding | None:
    """Loading data takes at least INPUT_PIPELINE_MIN_PCT of the step: the training thread's
    waits for data (without the profiler, the step timer's ``data`` phase, which torch's and
    Paddle's adapters time; else the ``data`` phase of the model view), or, when the adapter
    timed the batches a thread of the training process loaded beside the training thread
    (the step timer's ``loading`` phase) and they took longer, that loading, as share of the
    step without the profiler. Paddle's single-process DataLoader loads in such a thread, which its
    profiler does not record; the thread holds the GIL while the Dataset's Python runs, so its
    loading adds to the step although the training thread hardly waits.

    Saving: ``loader_saving``: with loading moved to background workers on the cores training
    leaves free (``loader_cores``: the cores the training process left while the steps ran,
    fewer where the machine's idle time shows other work took some, plus the share of a core
    a loading thread kept busy, which the workers take over), the step becomes the longer of
    the rest of the step plus receiving a batch and the loading plus sending the batch, spread
    over the workers (handing a batch over costs the worker ``run_loader_batch_cost``: what the
    step timer timed on the machine that trained, else the model's cost; receiving it costs
    the training step ``run_loader_receive_cost``: what the step timer timed on the machine
    that trained beside a busy step, where the adapter can time it, else as much), and
    beside a worker, the rest of the step and the loading each take as many times as long as
    the step timer timed the framework's ops and a Dataset's Python work to take beside each
    other on two cores of that machine (``run_slowdowns``: a free core that is the other
    hyperthread of the training core's physical core runs both slower), else as long as
    alone. The loading
    per step is, by preference, the step timer's: the training
    thread's time getting its batches (``data``) or a loader thread's (``loading``) in the
    steps timed without the profiler, the same steps as the step's own time; else the profiled
    waits less the profiler's cost (``advice.basis``). The rest of the step is the step without
    the profiler less the loading. Beside a loading thread whose training thread's CPU time
    the step timer also timed (``training_cpu``), the mean step without the profiler is taken
    apart by ``thread_split``: the training thread alone takes its CPU time less what each of its
    ops cost it beside the loading thread (handing the GIL over and back: the step timer's
    ``thread_op_ns``, timed on the machine that trained, else ``THREAD_OP_NS``), the loading
    thread its CPU time less ``LOADING_OP_SHARE`` of that, and what is left of the step (the
    training thread's waits, or less than nothing where the threads ran at once) goes with the
    thread. Where the step timer also timed the training thread's CPU time over its batches
    (``data_cpu``: torch's loader without workers), a Dataset that spends part of each batch
    waiting is given more workers than free cores (``waiting_loader_workers``: their waits
    overlap), and the saving is stated for that count. The remedy of a CPU-only run leaves
    out pinned memory and non-blocking copies, which only help a GPU.

    With no whole core free on a machine other work keeps busy, a training process that loads
    its batches itself (a loading thread whose CPU time the step timer timed beside the
    training thread's, or its training thread between its steps' work) is promised one
    worker's turn (``shared_turn_saving``): the scheduler shares the cores among the busy
    processes, and the worker is one more, with a turn as long as the training process's.
    """
    model = ctx.run.summary("model").set_index("name")
    if not ctx.step_ns:
        return None
    loading = float(model.loc["data", "per_step_ns"]) if "data" in model.index else 0.0
    basis = step_basis(ctx)
    timed = timed_phase(ctx, "data", mean=True)
    if timed is not None:
        data, data_from = timed, "timed"
    else:  # the profiled waits, less the profiler's cost of the events recorded in them
        ev = ctx.run.events
        spans = str_values(ev["kind"]) == "dataloader"
        inside = spans | links.has_ancestor(ev["parent"].to_numpy(), spans)
        data, data_from = basis.corrected(loading, recorded_events_per_step(ctx, inside)), "waits"
    thread = timed_phase(ctx, "loading", mean=True)
    threaded = thread is not None and thread > data
    if threaded:
        data, data_from = float(thread or 0.0), "thread"
    # the share of the step the saving is taken from: timed without the profiler where the step
    # timer timed it (a busy machine can stretch the unprofiled waits while the profiled ones
    # stay short), else the profiled waits of the profiled step
    unprofiled_share = data_from != "waits"
    share = 100.0 * (data / basis.step_ns if unprofiled_share else loading / ctx.step_ns)
    if share < INPUT_PIPELINE_MIN_PCT:
        return None
    steps = ctx.run.summary("steps")
    worst = steps.sort_values("data_ns", ascending=False).head(3)
    waited = int(model.loc["data", "steps"]) if "data" in model.index else 0
    # what workers take out of the step: the loading, and the rest of the step that stays
    training_cpu = timed_phase(ctx, TRAINING_CPU, mean=True) if threaded else None
    split = training_cpu is not None and training_cpu > 0
    ops = training_ops_per_step(ctx) if split else 0.0
    loading_ops = loading_thread_ops_per_step(ctx) if split else 0.0
    step_ns = basis.step_ns
    handing, loading_handing, capped, outliers = 0.0, 0.0, False, 0
    op_ns, op_from = THREAD_OP_NS, MODEL_COST
    if split:
        # two threads of one process sharing the GIL and the cores: each op of the training
        # thread hands the GIL over and back, which costs both threads CPU time. The loading
        # and the training CPU are means over the timed steps (a loading thread fills its
        # queue in bursts: some steps wait, the next do not), so the step they take apart is
        # the mean step too.
        _, unprofiled = step_timer_times(ctx.run)
        step_ns, outliers = typical_mean_step(unprofiled, basis.step_ns)
        op_ns, op_from = run_thread_op_cost(ctx.run)
        cpu = float(training_cpu or 0.0)
        load, rest, contention = thread_split(step_ns, data, cpu, ops, op_ns)
        handing, loading_handing = handover_ns(data, cpu, ops, op_ns)
        # the hand-overs at that cost would come to all of the loading thread's CPU: the
        # split caps the training thread's at it, and says so
        capped = handover_exceeds_loading(data, ops, op_ns)
    else:
        load, contention = data, 0.0
        rest = max(basis.step_ns - load, 0.0)
    # a loading thread's CPU moves to the workers with the loading: its core is theirs too
    free = free_cores(ctx.run, data / basis.step_ns if threaded else 0.0)
    _, workers, cores = free
    batch_ns, batch_from = run_loader_batch_cost(ctx.run)
    receive_ns, receive_from = run_loader_receive_cost(ctx.run, batch_ns)
    slowdowns, slowdown_from = run_slowdowns(ctx.run)
    slow_rest, slow_load = slowdowns
    timer = ctx.run.meta.get("step_timer") or {}
    process_cores = finite_number(timer.get("process_cores"))
    usable_cores = finite_number(timer.get("usable_cores"))
    multi_process_run = multi_process_loader(ctx.run)
    # the training thread loaded its batches itself and the step timer timed its CPU time over
    # them (torch's loader without workers): a Dataset that waits gets workers beyond the free
    # cores, whose waits overlap
    load_cpu = (
        timed_phase(ctx, DATA_CPU, mean=True)
        if data_from == "timed" and not multi_process_run
        else None
    )
    waiting = 0
    if load_cpu is not None and workers >= 1:
        all_cores = float(usable_cores) if usable_cores else workers + 1.0
        waiting = waiting_loader_workers(
            load, load_cpu, rest, int(workers), all_cores, batch_ns, receive_ns, slowdowns
        ) - int(workers)
    saving = loader_saving(
        load, rest, workers + waiting, batch_ns, contention, receive_ns, slowdowns
    )
    # no whole core free, but the loading thread's CPU timed beside the training thread's: on
    # a machine other work keeps busy, a worker process gets a turn on the cores of its own
    busy = (
        workers <= 0
        and process_cores is not None
        and usable_cores is not None
        and 0 < process_cores < usable_cores
    )
    # the training thread loads its own batches between its steps' work (torch's
    # single-process loader): its step is the loading and the rest one after the other, in the
    # turn it had, so the same turn model applies to those wall times (CPU time at the turn)
    inline = busy and not threaded and not multi_process_run
    turns = busy and (split or inline)
    if turns:
        saving = shared_turn_saving(
            step_ns,
            step_ns if inline else data + float(training_cpu or 0.0),
            load,
            rest,
            float(process_cores or 0.0),
            float(usable_cores or 0.0),
            batch_ns,
            receive_ns,
            slowdowns,
        )
    # beside the step timer's figures, the profiled ones say which step they are of
    details = [
        ("While profiled, the" if unprofiled_share else "The")
        + " training thread waited for data "
        + per_step_text(
            loading, ctx.step_ns, of="the profiled step" if unprofiled_share else "the step"
        )
        + f", in {waited} of {ctx.steps} steps."
    ]
    if data_from == "timed":
        details.append(
            f"Without the profiler, the training thread spent "
            f"{unprofiled_per_step_text(data, basis.step_ns)} getting its batches (timed per "
            "batch by the step timer)"
            + (
                f", {duration_text(min(load_cpu, data))} of it on its CPU: the Dataset "
                "computed for that long and waited the rest (for reads, a sleep, or a core)."
                if load_cpu is not None
                else "."
            )
        )
    if threaded:
        details.insert(
            0,
            f"Without the profiler, loading batches in the training process took "
            f"{unprofiled_per_step_text(data, basis.step_ns)}, timed per batch as the CPU "
            "time of the thread that loaded it (the profiler does not record that thread). "
            "The thread takes the CPU and the GIL from training.",
        )
    if threaded and timed is not None:
        details.insert(
            1,
            f"Without the profiler, the training thread waited "
            f"{unprofiled_per_step_text(timed, basis.step_ns)} for its batches (timed per batch "
            "by the step timer).",
        )
    if split:
        details.insert(
            1,
            f"The training thread's own CPU time was {duration_text(training_cpu or 0.0)} per "
            f"step, in {ops:.0f} ops. Beside each other both threads' CPU times grow, and each "
            "op hands the GIL to the loading thread and back."
            + (
                f" The loading thread recorded {loading_ops:.0f} framework ops of its own per "
                "step (its Dataset's and the batch's), not counted among them."
                if loading_ops
                else ""
            ),
        )
    details += [
        f"Step {int(r.step)}: waiting for data {duration_text(r.data_ns)} of "
        f"{duration_text(r.dur_ns)}."
        for r in worst.itertuples()
    ]
    multi_process = not threaded and multi_process_run
    had = timed_workers(ctx.run) if multi_process else None
    untimed = multi_process and had is None
    more_evidence: dict[str, object] = {}
    if multi_process:  # workers load already: the waits are what is left to take away
        rest, load = max(basis.step_ns - data, 0.0), 0.0
        receive_ns = min(receive_ns, data)  # the waits for batches hold receiving them
    if untimed:  # workers no step timer timed: how many, and their cost, are not known
        timer = ctx.run.meta.get("step_timer") or {}
        saving, how, more_evidence = untimed_workers_estimate(
            data,
            receive_ns,
            LOADER_RECEIVE_SOURCES[receive_from],
            free if timer.get("cpu_count") is not None else None,
        )
    elif had is not None:  # the run's loader had workers: what more of them would save
        saving, how, more_evidence = more_workers_estimate(
            basis.step_ns,
            rest,
            *had,
            free,
            receive_ns,
            LOADER_RECEIVE_SOURCES[receive_from] + ", at most the waits, which hold it",
        )
    elif turns and inline:
        kept, spread = remedied_sides(load, rest, 1.0, batch_ns, receive_ns, slowdowns)
        turn, usable = float(process_cores or 0.0), float(usable_cores or 0.0)
        longer = "the rest of the step" if kept >= spread else "the loading"
        how = (
            f"With 1 loader worker the step would take about "
            f"{duration_text(step_ns - saving)}, against {duration_text(step_ns)} now (the "
            f"step without the profiler). No core is free for it ({cores}), but the training "
            f"process had {turn:.2f} of the {usable:.0f} cores while other work kept the rest "
            "busy, and its training thread loaded each batch itself, between its steps' work, "
            f"in that turn: {duration_text(load)} of loading and {duration_text(rest)} of the "
            "rest per step. A worker is a process with a turn of its own, as long as the "
            f"training process's, which shrinks to {turn * usable / (usable + turn):.2f} cores "
            f"({usable:.0f} / ({usable:.0f} + {turn:.2f}) of its turn now): the training "
            f"thread keeps {duration_text(kept)} per step (the rest of the step and receiving "
            f"a batch), the worker {duration_text(spread)} (the loading and sending the batch) "
            f"beside it, and the step takes {longer}, the longer of the two, at that turn. "
            "Free a core and the worker saves more."
        )
    elif turns:
        kept, spread = remedied_sides(load, rest, 1.0, batch_ns, receive_ns, slowdowns)
        turn, usable = float(process_cores or 0.0), float(usable_cores or 0.0)
        how = (
            f"With 1 loader worker the step would take about "
            f"{duration_text(step_ns - saving)}, against {duration_text(step_ns)} now (the mean "
            f"step without the profiler). No core is free for it ({cores}), but the training "
            f"process had {turn:.2f} of the {usable:.0f} cores while other work "
            f"kept the rest busy, and both its threads ran "
            f"{duration_text(data + float(training_cpu or 0.0))} of CPU per step in that turn, "
            "the loading between the training thread's ops. A worker is a process with a turn "
            f"of its own, as long as the training process's, which shrinks to "
            f"{turn * usable / (usable + turn):.2f} cores: the "
            f"training thread keeps {duration_text(kept)} of CPU per step (the rest of the "
            f"step and receiving a batch), the worker {duration_text(spread)} (the loading and "
            "sending the batch) beside it, and the step takes the longer of the two at that "
            "turn. Free a core and the worker saves more."
        )
    elif workers <= 0:
        how = (
            f"No core is free for loader workers ({cores}): a worker would take CPU from the "
            "training process, so no saving is expected until cores are freed."
        )
    else:
        total = workers + waiting
        kept, spread = remedied_sides(load, rest, total, batch_ns, receive_ns, slowdowns)
        bound = "the rest of the step" if spread <= kept else "loading"
        now = load + rest + contention
        now_of = (
            "the mean step without the profiler"
            if split
            else "the step without the profiler"
            if basis.name == "unprofiled"
            else "the profiled step"
        )
        # the outcome first; how each term was found follows
        lead = (
            f"With {total:.0f} loader worker{'' if round(total) == 1 else 's'} the step "
            "would take about "
            f"{duration_text(max(spread, kept))}, against {duration_text(now)} now ({now_of})"
            + (
                f", so workers are not expected to pay here: {bound} bounds it. "
                if max(spread, kept) >= now
                else f": {bound} bounds it. "
            )
        )
        rest_x, load_x = slowdown_factors(slowdowns, slowdown_from)  # those it applied
        at_most = ", at most the loading thread's CPU time" if capped else ""
        left = (
            f"those two and {duration_text(contention)} more: the training thread's waits for "
            "the GIL and for batches, which go with the loading thread"
            if contention >= 0
            else f"{duration_text(-contention)} shorter than those two added: the threads ran "
            "at once on two cores for that long"
        )
        parts = (
            f"Alone, the training thread would take its CPU time less the "
            f"{duration_text(handing)} of handing the GIL over and back ({ops:.0f} ops at "
            f"{duration_text(op_ns)}, {THREAD_OP_SOURCES[op_from]}{at_most}) and the loading "
            f"thread its CPU time less {duration_text(loading_handing)} ("
            f"{LOADING_OP_SHARE:g} times that, its share of each hand-over): "
            f"{duration_text(load)} of loading, "
            f"{duration_text(rest)} of training. The mean step without the profiler "
            f"({duration_text(step_ns)}"
            + (
                f", leaving out {outliers} step(s) over {OUTLIER_STEP_TIMES_MEDIAN:g} times the "
                "median, which waited for something else"
                if outliers
                else ""
            )
            + f") is {left}. "
            if split
            else ""
        )
        where = f"in {ctx.framework or 'this framework'}'s loader" + (
            LOADER_HANDOVER_BY_FRAMEWORK.get(ctx.framework, "")
        )
        receiving = (
            f"Handing a batch over costs each side {duration_text(batch_ns)} {where} "
            f"({LOADER_BATCH_SOURCES[batch_from]})."
            if receive_from != RECEIVE_TIMED
            else f"Handing a batch over costs the worker {duration_text(batch_ns)} {where} "
            f"({LOADER_BATCH_SOURCES[batch_from]}), and receiving it adds "
            f"{duration_text(receive_ns)} to the training step "
            f"({LOADER_RECEIVE_SOURCES[receive_from]})."
        )
        sides = (
            (
                f"The workers take the {workers:.1f} free core(s) ({cores}); the step becomes "
                if not waiting
                else waiting_workers_text(int(workers), waiting, cores, load, load_cpu or 0.0)
            )
            + f"the longer of the rest of the step plus receiving the batch from a worker "
            f"({duration_text(rest)}{rest_x} + {duration_text(receive_ns)}) and the loading "
            f"plus sending the batch, spread over the workers (({duration_text(load)}{load_x} "
            f"+ {duration_text(batch_ns)}) / {total:.1f} = {duration_text(spread)}). "
            f"{receiving} "
            f"{slowdown_text(slowdowns, slowdown_from, ctx.framework)}"
            + ("" if waiting else " Each worker needs a core of its own.")
        )
        how = lead + parts + sides
    if capped:
        how += (
            f" At {duration_text(op_ns)} an op, handing the GIL over would cost the training "
            f"thread {duration_text(ops * op_ns)} per step, at least the loading thread's "
            f"whole CPU time ({duration_text(data)}): the model cannot tell that thread's "
            "loading from its hand-overs (a loading thread that runs framework ops of its own, "
            "a Dataset of tensors sliced per sample, hands the GIL over at each), so it takes "
            "the hand-overs to cost the training thread as much CPU time as the loading thread "
            "ran, and the saving rests on the training thread's CPU time and waits."
        )
    # the share's step: the profiled one (the headline's) unless the step timer timed it
    of = " without the profiler" if unprofiled_share else ""
    title = (
        f"Loading data in the training process takes {share:.1f}% of each step{of}"
        if threaded
        else f"Waiting for data takes {share:.1f}% of each step{of}"
    )
    return Finding(
        id="input-pipeline",
        title=title,
        severity="",
        saving_ns=saving,
        details=details,
        estimate=f"{how} {basis.text()}",
        cites={"phases": [f"step {int(r.step)}" for r in worst.itertuples()]},
        evidence={
            "data_per_step_ns": loading,
            "data_unprofiled_per_step_ns": data,
            "data_from": data_from,
            "loading_per_step_ns": load,
            "training_cpu_per_step_ns": training_cpu,
            "rest_per_step_ns": rest,
            "contention_per_step_ns": contention,
            "training_ops_per_step": ops,
            # the hand-overs at that cost an op reached the loading thread's CPU time
            "handovers_capped": capped,
            "free_cores": workers,
            "loader_batch_ns": batch_ns,
            "loader_batch_from": batch_from,
            "loader_receive_ns": receive_ns,
            "loader_receive_from": receive_from,
            # beside a worker: the rest of the step's and the loading's times as long as alone
            "training_slowdown": slow_rest,
            "loading_slowdown": slow_load,
            "slowdown_from": slowdown_from,
            # the step the loading, the rest and the contention add up to
            "loader_step_ns": step_ns,
            # steps timed without the profiler left out of it (over OUTLIER_STEP_TIMES_MEDIAN x median)
            "outlier_steps": outliers,
            "data_pct": share,
            "steps_waiting": waited,
            "has_device": ctx.has_device,
            "basis": basis.name,
            "basis_step_ns": basis.step_ns,
            "worst_steps": [
                {"step": int(r.step), "data_ns": float(r.data_ns), "dur_ns": int(r.dur_ns)}
                for r in worst.itertuples()
            ],
            # beside a loading thread: each training op's cost the split took, and where it
            # was found (THREAD_OP_SOURCES)
            # and the ops the loading thread recorded, left out of the training thread's
            **(
                {
                    "thread_op_ns": op_ns,
                    "thread_op_from": op_from,
                    "loading_thread_ops_per_step": loading_ops,
                }
                if split
                else {}
            ),
            # no core free: the saving of one worker taking a turn on the busy cores
            **({"turn_process_cores": process_cores} if turns else {}),
            # the training thread's CPU time over its batches (``data_cpu``), and the workers
            # prescribed beyond the free cores for a Dataset that waits
            **(
                {"loading_cpu_per_step_ns": load_cpu, "loader_waiting_workers": float(waiting)}
                if load_cpu is not None
                else {}
            ),
            # a loader that had workers: how many, and what they took (``loader_workers``), or
            # that no step timer timed them (``loader_workers_untimed``)
            **more_evidence,
        },
    )
