"""What each column and option of perfkit's own views means: the words the code cannot give.

``views.py`` computes every view and fails the build when a view returns a column missing here,
or when a column described here is no longer returned, so these words cannot drift either.
"""

from __future__ import annotations

from gen.layer_text import CODE_COLUMNS, LAYERS_COLUMNS, LAYERS_OPTIONS

_HOST_COLUMNS: dict[str, str] = {
    "calls": "number of calls",
    "cpu_total_ns": "summed wall time of the calls on their host thread",
    "cpu_self_ns": "summed self time: each call's duration less the host events nested in it, "
    "never below 0",
    "cpu_avg_ns": "`cpu_total_ns` per call",
    "cpu_max_ns": "longest call",
    "cpu_min_ns": "shortest call",
    "gpu_total_ns": "device time of the work the calls launched, themselves and everything "
    "nested in them; NaN when the run recorded no device events",
    "gpu_self_ns": "device time of the work the calls launched directly",
    "gpu_avg_ns": "`gpu_total_ns` per call",
    "gpu_max_ns": "largest `gpu_total_ns` of one call",
    "gpu_min_ns": "smallest `gpu_total_ns` of one call",
    "flops": "summed floating-point operations, where the profiler recorded them (torch "
    "`with_flops=True`); NaN otherwise",
    "gflops_per_s": "`flops` over the GPU time (the CPU time when no GPU time was recorded), "
    "in 10⁹ FLOP per second; NaN without `flops`",
    "input_shapes": "input shapes as recorded (only with `group_by_input_shape`)",
    "stack": "top N frames of the recorded call stack, innermost first, newline-separated; the "
    "enclosing Python function events when no stack was recorded (only with "
    "`group_by_stack_n`)",
    "tid": "host thread id (only with `by_thread`)",
}

#: What every column of every view means (the unit comes from the column's name).
VIEW_COLUMNS: dict[str, dict[str, str]] = {
    "operator": {
        "name": "operator name, as the framework recorded it (`aten::addmm`, `matmul dygraph`; "
        "MindSpore's operator type, `MatMul`); with `group_by='name'`, the full name where "
        "the profiler records one (MindSpore's `Default/.../0-Dense/MatMul-op0`); with "
        "`op_detail`, also the name of a detail row",
        "side": "`device` when the calls launched device work, else `host` (MindInsight's "
        "operator side; only with `group_by='name'`)",
        **_HOST_COLUMNS,
        "calls_per_step": "`calls` over the run's step spans; NaN when it recorded none",
        "op_time_pct": "`cpu_self_ns` as a share of the self time of every operator of the run "
        "(before `filter` and `top`): MindInsight's share of operator time; self time, so "
        "nested operators count once and the shares add up to 100",
        "level": "0 for an operator row, 1 for a detail row under it (only with `op_detail`)",
        "detail_of": "the operator a detail row belongs to; empty for operator rows (only with "
        "`op_detail`)",
    },
    "user": {
        "name": "span name (`record_function`, `RecordEvent`, `perfkit_core.annotate`; torch's layer "
        "spans `nn.Module: Type_k` are layers and left out)",
        **_HOST_COLUMNS,
    },
    "model": {
        "name": "`step`, then the phases `data`, `forward`, `backward`, `optimizer`, `other` "
        "(rows below), which add up to the step",
        "steps": "steps in which the phase took time; for `step` the number of steps",
        "per_step_ns": "mean time per step, over all steps (a step without the phase counts 0)",
        "step_pct": "`per_step_ns` over the mean step",
        "min_per_step_ns": "the least time one step spent in the phase",
        "max_per_step_ns": "the most time one step spent in the phase",
        "gpu_per_step_ns": "kernel time (communication kernels included) launched while the step "
        "was in the phase, per step; for `step` all the steps launched; only with device events",
        "gpu_share_pct": "`gpu_per_step_ns` over the step's; only with device events",
    },
    "model_spans": {
        "name": "the phase (rows below)",
        "calls": "outermost events of the phase; for `step` the number of steps; 0 for `others`",
        "cpu_total_ns": "summed duration of those events; for `step` the merged step time; for "
        "`others` the step time no phase row accounts for",
        "cpu_avg_ns": "per call; NaN for `others`",
        "cpu_max_ns": "longest call; NaN for `others`",
        "cpu_min_ns": "shortest call; NaN for `others`",
        "cpu_ratio_pct": "share of the merged step time",
        "gpu_total_ns": "kernel time (communication kernels included) launched within the "
        "events; for `step` the kernels the steps launched; NaN without device events",
        "gpu_avg_ns": "per call",
        "gpu_max_ns": "largest of one call",
        "gpu_min_ns": "smallest of one call",
        "gpu_ratio_pct": "share of the kernel time the steps launched",
    },
    "phases": {
        "name": "`step <N>`",
        "step": "the step number",
        "step_ns": "the step's duration: its recorded span stretched over the device work it "
        "launched (`steps`' `dur_ns`)",
        "data_ns": "the step's time waiting for data (data-loading spans on the training thread)",
        "forward_ns": "the step before its first backward event, the loss included",
        "backward_ns": "from the step's first backward event to its last, time between autograd "
        "nodes included",
        "optimizer_ns": "optimizer spans (`step`, `zero_grad`) and optimizer ops",
        "other_ns": "the rest of the step after the backward window, and the device finishing "
        "work the step launched after its host span ended; the phases add up to `step_ns`",
    },
    "family": {
        "name": "`family (direction)`, such as `matmul (backward)`",
        "family": "the canonical op family, one of `perfkit_core.views.FAMILIES`, or `overhead` "
        "(host time between ops inside a span), `device tail` (the device finishing work after "
        "the host step) and `unattributed` (step time no event covers)",
        "direction": "`forward` or `backward` (the step's backward window: its first to last "
        "backward event); empty for data loading, the optimizer and `unattributed`",
        "per_step_ns": "wall time per step the step spent in the family's outermost ops (the "
        "slices of the step each op owns), so the families add up to the step",
        "step_pct": "`per_step_ns` over the mean step",
        "gpu_per_step_ns": "kernel time per step the family's ops launched (a kernel counts in "
        "its launching op's family); only with device events",
        "gpu_share_pct": "`gpu_per_step_ns` over the kernel time the steps launched; only with "
        "device events",
    },
    "overview": {
        "name": "`step`, then every kind present, in the order of `perfkit_core.KINDS`, memory "
        "instants left out; with `by='category'`: every native category present, sorted, "
        "except the categories of step spans and memory instants (in a torch run that leaves "
        "out `user_annotation`, the category `ProfilerStep#N` shares with data-loading, "
        "optimizer and `record_function` spans)",
        "calls_per_step": "events of the kind per step; 1 for `step`",
        "cpu_per_step_ns": "union of the kind's host intervals over all threads, clipped to the "
        "steps, per step; NaN when the kind has no host events",
        "cpu_ratio_pct": "`cpu_per_step_ns` over the mean step",
        "gpu_per_step_ns": "union of the kind's device intervals over all streams and devices, "
        "clipped to the steps, per step; NaN when it has no device events",
        "gpu_ratio_pct": "`gpu_per_step_ns` over the mean step",
    },
    "breakdown": {
        "name": "the part (`Kernel`, `Memcpy`, `Memset`, `Communication`, `Runtime`, "
        "`DataLoader`, `CPU Exec`, `Other`); with `per_step=True`, `step <N>`",
        "time_ns": "mean time per step the part took, no earlier part having taken it",
        "ratio_pct": "`time_ns` over the mean step; the parts add up to 100",
        "rank": "the rank",
        "step": "the step number",
        "kernel_ns": "device kernels other than communication",
        "memcpy_ns": "device copies not under a kernel",
        "memset_ns": "device memory sets not under a kernel or copy",
        "communication_ns": "communication kernels and host-side collectives not under the "
        "parts above",
        "runtime_ns": "runtime and driver calls on the host not under the parts above",
        "dataloader_ns": "data loading on the host not under the parts above",
        "cpu_exec_ns": "host operators, user spans, phase spans and Python calls not under "
        "the parts above",
        "other_ns": "the rest of the step",
        "step_ns": "the step, stretched over the device work it launched (`steps`' `dur_ns`); "
        "the parts add up to it",
    },
    "launches": {
        "name": "the innermost operator enclosing the launch calls; `(no operator)` for "
        "launches outside every operator",
        "launches": "device events (kernels, copies, sets) it launched whose launch call was "
        "recorded",
        "launch_delay_avg_ns": "mean launch delay: the event's start less the end of its "
        "launch call, 0 when it started before the call returned (HTA's launch delay)",
        "launch_delay_max_ns": "longest launch delay",
        "launch_delay_total_ns": "summed launch delay",
        "runtime_avg_ns": "mean duration of the launch calls on the host",
    },
    "queue": {
        "name": "`GPU <index> stream <id>` (`(rank <r>)` added in a run of several ranks)",
        "rank": "the rank",
        "device": "the device index",
        "stream": "the stream id",
        "launches": "device events on the stream whose launch call was recorded",
        "queue_max": "most events launched and not yet started at once",
        "queue_mean": "mean queue length over the changes of the series (HTA's summary mean)",
        "queue_time_mean": "mean queue length over time, first launch to last start",
        "empty_pct": "share of that time with nothing queued",
    },
    "idle": {
        "name": "`GPU <index> stream <id>` (`(rank <r>)` added in a run of several ranks)",
        "rank": "the rank",
        "device": "the device index",
        "stream": "the stream id",
        "events": "device events (kernels, copies, sets) on the stream",
        "idle_ns": "summed gaps between consecutive events on the stream",
        "host_wait_ns": "gaps where the host launched the next event only after the previous "
        "one had ended",
        "kernel_wait_ns": "other gaps shorter than `kernel_wait_threshold_ns`",
        "other_ns": "the remaining gaps",
    },
    "device": {
        "name": "`CPU (host threads busy)`; `CPU (process, recorded)` and `CPU (system, "
        "recorded)` where the profiler recorded them (Paddle); then `GPU <index>` for each "
        "device (`GPU <index> (rank <r>)` in a run of several ranks)",
        "utilization_pct": "GPU: `busy_per_step_ns` over the mean step; NaN for CPU rows (see "
        "`cores_busy`)",
        "busy_per_step_ns": "host: the time host threads spent inside recorded events, summed "
        "over threads, per step (so it can exceed the step); GPU: merged time it ran kernels, "
        "copies or sets (device-busy), per step; NaN for the recorded CPU rows",
        "kernel_utilization_pct": "GPU: `kernel_busy_per_step_ns` over the mean step (the "
        "TensorBoard profiler's GPU Utilization, over the steps rather than first to last "
        "step); NaN for CPU",
        "kernel_busy_per_step_ns": "GPU: merged time it ran kernels, communication kernels "
        "included, copies and sets left out (kernel-busy), per step; NaN for CPU",
        "occupancy_pct": "GPU: estimated achieved occupancy of its kernels weighted by their "
        "time within the steps (the TensorBoard profiler's Est. Achieved Occupancy); NaN for "
        "CPU and where not recorded",
        "sm_efficiency_pct": "GPU: estimated SM efficiency, the running kernels' blocks per SM "
        "(grid blocks over the device's SMs) summed and capped at 1, averaged over the steps "
        "(the TensorBoard profiler's Est. SM Efficiency); NaN for CPU and without launch shapes "
        "or SM count",
        "cores_busy": "CPU: the mean number of cores busy over the steps (1.0 = one core all "
        "the time): host threads inside recorded events, or the profiler's own process CPU "
        "figure (Paddle's CPU(Process) over 100%); NaN for GPUs",
        "system_pct": "the profiler's system-wide CPU figure (Paddle's CPU(System): all cores' "
        "busy time over their busy and idle time); NaN elsewhere",
        "step_ns": "the mean step of the device's rank (the steps stretched over their device "
        "work)",
    },
    "kernel": {
        "name": "kernel name as recorded",
        "operator": "the operator that launched the kernel, by its full name where recorded "
        "(`(no operator)` for launches outside every operator; only with `by_operator`)",
        "calls": "launches",
        "gpu_total_ns": "summed device time",
        "gpu_avg_ns": "per launch",
        "gpu_max_ns": "longest launch",
        "gpu_min_ns": "shortest launch",
        "gpu_ratio_pct": "share of all kernel time (communication kernels included)",
        "grid": "most common grid `x,y,z`",
        "block": "most common block `x,y,z`",
        "registers": "registers per thread (largest recorded)",
        "shared_memory_bytes": "shared memory per block (largest recorded)",
        "occupancy_pct": "estimated achieved occupancy of the calls, their mean weighted by "
        "duration (as the TensorBoard profiler and Nsight weigh it); calls without a figure "
        "left out; NaN when none recorded one",
        "tensor_cores": "whether the name marks a tensor-core kernel (below)",
    },
    "roofline": {
        "name": "op name as recorded (`aten::addmm`, `matmul dygraph`, `dot.4`); with "
        "`by='family'` the op family, with `by='layer'` the layer span (`(no layer)` outside "
        "layers)",
        "input_shapes": "input shapes as recorded (only with `by='shape'`)",
        "precision": "the precision the op's math ran in: the dtype's (`fp32`, `bf16`, ...), "
        "with ` tensor` when most of its device time ran on tensor-core kernels (`tf32 "
        "tensor`: fp32 on tensor cores); not with `by='family'` or `by='layer'`",
        "calls_per_step": "calls per step",
        "time_ns": "device time per step of everything the op launched (its host time on runs "
        "without device work)",
        "step_pct": "share of the mean step (`% of step`)",
        "gflops": "floating-point operations per step from the performance model, in 10⁹ FLOP "
        "(the profiler's own count for ops the model does not know)",
        "moved_bytes": "bytes read and written in device memory per step, from the model (each input "
        "read once, each output written once); NaN when unknown",
        "intensity_flop_per_byte": "arithmetic intensity: FLOPs over bytes",
        "achieved_tflops_per_s": "FLOPs over time, in 10¹² FLOP per second",
        "achieved_tb_per_s": "bytes over time, in 10¹² bytes per second",
        "peak_tflops_per_s": "the device's peak FLOP rate of the row's precision "
        "(`perfkit peaks --devices`; `--peak-tflops` when given); NaN for families and layers, "
        "which mix precisions, and without peaks",
        "peak_tb_per_s": "the device's peak memory bandwidth",
        "bound_time_ns": "time per step at the roofline: each call's larger of FLOPs over the "
        "peak FLOP rate and bytes over the peak bandwidth, summed",
        "roofline_pct": "`bound_time_ns` as a share of `time_ns` (`% of roofline bound`): "
        "100 runs at the roofline; equals the achieved FLOP rate as a share of the attainable "
        "rate at the op's intensity",
        "bound": "what bounds the op: `compute` (its FLOPs take longer at peak than its "
        "bytes), `memory`, or `latency` (a call's bound time under 5 us: launch and ramp-up "
        "set its time); for a group, the bound of most of its time",
        "headroom_ns": "time per step above the bound (`time_ns` - `bound_time_ns`, at least 0)",
    },
    "mfu": {
        "name": "`step N`, then `mean` (all steps' model FLOPs over their time); `profiled "
        "span` when no steps were recorded",
        "dur_ns": "the step's time, stretched over the device work it launched",
        "model_gflops": "the step's model FLOPs: GEMMs, convolutions, attention and recurrent "
        "layers, forward and backward, in 10⁹ FLOP",
        "achieved_tflops_per_s": "model FLOPs over the step's time",
        "peak_tflops_per_s": "the device's peak of the precision that carried most model FLOPs",
        "mfu_pct": "model FLOPs utilisation: the achieved rate as a share of that peak",
    },
    "layers": LAYERS_COLUMNS,
    "code": CODE_COLUMNS,
    "memcpy": {
        "name": "the row's operation, direction, host memory and launch joined "
        "(`Memcpy HtoD pageable async`)",
        "operation": "`memcpy` or `memset`",
        "direction": "`HtoD`, `DtoH`, `DtoD`, `PtoP`, ... as named by the event; empty for memsets",
        "host_memory": "`pageable` or `pinned` for the host side of a host copy, `device` for "
        "device copies; empty for memsets",
        "synchronous": "`async` when launched by an `...Async` runtime call, `sync` when by "
        "another one, empty when the launch was not recorded",
        "calls": "copies or sets",
        "gpu_total_ns": "summed device time",
        "gpu_avg_ns": "per call",
        "gpu_max_ns": "longest call",
        "gpu_min_ns": "shortest call",
        "bytes": "summed bytes; NaN when not recorded",
        "gb_per_s": "achieved bandwidth: `bytes` over `gpu_total_ns`",
    },
    "memory": {
        "name": "`by='op'`: the op that made the allocations and frees: the innermost host event "
        "enclosing them that is not a step span (`(outside any op)` for none); `by='device'`: "
        "the device; `by='step'`: `step <n>`",
        "device": "`gpu:0`, `cpu`, ... (with `by='op'` and `by='step'`)",
        "allocations": "allocation events per step (events inside the steps, over the number "
        "of steps; with `by='step'`: in that step)",
        "allocated_bytes": "bytes allocated per step (as `allocations`)",
        "freed_later_bytes": "of `allocated_bytes`, the bytes freed again before the profile "
        "ended, by this or any other op (only with `by='op'`)",
        "held_bytes": "bytes allocated during the profile (by the op, with `by='op'`) and not "
        "freed by its end; not per step (with `by='op'` and `by='device'`)",
        "frees": "free events per step, whoever allocated the memory (as `allocations`)",
        "freed_bytes": "bytes freed per step, whoever allocated them (as `allocations`)",
        "peak_allocated_bytes": "largest allocator total of allocated bytes after any event "
        "(of the profile, or of the step); NaN when the profiler recorded no totals (torch "
        "before 1.10) (with `by='device'` and `by='step'`)",
        "peak_reserved_bytes": "largest allocator total of reserved bytes after any event, as "
        "`peak_allocated_bytes`",
        "peak_above_start_bytes": "largest level of bytes allocated less freed since the start "
        "of the profile (of the profile, or of the step): the peak counted from the events "
        "alone, without the memory held before the profile started (with `by='device'` and "
        "`by='step'`)",
    },
    "memory_timeline": {
        "name": "the slice: `step 7 (2/4)` (the second of four slices of step 7), `step 7` "
        "with one slice per step; `12.5 ms` (its start) when no steps were recorded",
        "offset_ns": "start of the slice, from the start of the first slice",
        "dur_ns": "length of the slice",
        "slice": "number of the slice, from 0 (a job's ranks are lined up by it)",
        "<device>_peak_allocated_bytes": "one column per device (`gpu:0_peak_allocated_bytes`) "
        "whose memory events record the allocator's totals: the highest total of allocated "
        "bytes in the slice, the total it started with included (a total holds until the next "
        "event)",
        "<device>_peak_above_start_bytes": "one column per device (`gpu:0_peak_above_start_"
        "bytes`) whose memory events record no totals (torch before 1.10): the highest level "
        "of bytes allocated less freed since the start of the profile, in the slice",
    },
    "device_timeline": {
        "name": "the slice, as in `memory_timeline`",
        "offset_ns": "start of the slice, from the start of the first slice",
        "dur_ns": "length of the slice",
        "slice": "number of the slice, from 0",
        "<device>_busy_pct": "one column per device (`gpu:0_busy_pct`): the share of the slice "
        "the device ran kernels, copies or sets, overlaps merged (% of the slice)",
    },
    "distributed": {
        "name": "`step`, `communication`, `computation`, `overlap` per rank (with ` (rank <r>)` "
        "in a run of several ranks)",
        "rank": "the rank",
        "side": "`gpu` when the rank recorded device events (communication kernels against "
        "other kernels, copies and sets), `cpu` otherwise (collective ops against other "
        "operators)",
        "per_step_ns": "merged time within the rank's steps, per step",
        "ratio_pct": "`per_step_ns` over the rank's mean step",
    },
    "steps": {
        "name": "`step <N>`",
        "rank": "the rank",
        "step": "the step number",
        "offset_ns": "start of the step's recorded span, from the first event of the run",
        "dur_ns": "the step: its recorded span stretched over the device work it launched (the "
        "TensorBoard profiler's step time): from its host start, or the previous step's "
        "stretched end if later, to its host end, or the end of its last device event if "
        "later; on a run without device work, the recorded span",
        "host_dur_ns": "the step's span as recorded on the host",
        "data_ns": "the step's time waiting for data (the `model` view's `data` phase)",
        "gpu_busy_ns": "merged device time of the work launched in the step, never clipped at "
        "the step's end; NaN without device events; it can exceed `dur_ns` when it started "
        "on another stream while the previous step's work was still running",
    },
    "ranks": {
        "name": "the rank (`rank 3`)",
        "rank": "the rank's number",
        "steps": "profiled steps of the rank",
        "step_median_ns": "median step time",
        "step_spread_ns": "longest step less the shortest",
        "work_ns": "per step: step time less `wait_ns`, the time the rank worked rather than "
        "waited for other ranks (what the straggler rule compares)",
        "compute_ns": "per step: merged device time of kernels, copies and sets other than "
        "communication (host operators when no device events were recorded)",
        "communication_ns": "per step: merged device time of communication kernels",
        "exposed_communication_ns": "per step: communication not overlapped with compute",
        "wait_ns": "per step: time spent in collectives waiting for the last rank to arrive "
        "(see `collectives`); NaN with one rank",
        "data_ns": "per step: time waiting for data (the `model` view's `data` phase)",
        "gpu_busy_pct": "merged device time over the step time; NaN without device events",
        "kernels": "device kernels per step",
        "peak_memory_bytes": "highest allocated device memory; NaN when not recorded",
        "straggler": "True for a rank whose `work_ns` exceeds the median rank's by the "
        "straggler rule (median + k x scaled MAD, see the `straggler` advice rule)",
        "slow_phase": "for a straggler, the phase with the largest excess over the median "
        "rank (data loading, slower device, uneven work, communication, host); empty otherwise",
    },
    "collectives": {
        "name": "collective name as recorded (`nccl:all_reduce`)",
        "process_group": "process group the profiler names; empty when it names none",
        "bytes": "message size, from the profiler's record or the launching span's input "
        "shapes and dtypes; NaN when unknown",
        "ranks": "ranks that made the collective",
        "rank": 'the rank (only with `by="rank"`)',
        "calls": "calls per rank (mean over ranks)",
        "time_ns": "time in the calls per rank (mean over ranks)",
        "wait_ns": "of `time_ns`, the time waiting for the last rank to arrive",
        "transfer_ns": "`time_ns` less `wait_ns`",
        "wait_pct": "`wait_ns` over `time_ns`",
        "algbw_gb_per_s": "algorithm bandwidth: bytes over transfer time, in 10⁹ bytes per "
        "second; NaN when the size is unknown",
        "last_rank": "the rank the others waited for most often",
    },
    "benchmark": {
        "name": "`reader_cost`, `batch_cost`, `ips`, and `ips_samples` with `batch_size`",
        "avg": "mean over the kept steps, in the row's `unit`; for `ips` steps over total "
        "time, not the mean of per-step rates (the headline's throughput)",
        "max": "largest per-step value, in the row's `unit`",
        "min": "smallest per-step value, in the row's `unit`",
        "unit": "`ns` for `reader_cost` (the step's time waiting for data) and `batch_cost` "
        "(the step), shown in the page's time unit; `steps/s` or `samples/s` for the rates",
    },
}

#: Columns whose name holds a device: the pattern that finds them, and the generic name.
DEVICE_COLUMN_SUFFIXES: tuple[str, ...] = (
    "_peak_allocated_bytes",
    "_peak_above_start_bytes",
    "_busy_pct",
)
#: Columns that end like a per-device column but are one figure of their own.
NOT_DEVICE_COLUMNS: frozenset[str] = frozenset({"gpu_busy_pct"})

#: Options computed for each view besides its defaults, so options that add or change columns
#: (or rows) are documented with the columns they give.
VIEW_VARIANTS: dict[str, tuple[dict[str, object], ...]] = {
    "operator": (
        {"op_detail": True},
        {"group_by": "name"},
        {"group_by_input_shape": True},
        {"group_by_stack_n": 2},
        {"by_thread": True},
    ),
    "user": ({"group_by_input_shape": True}, {"group_by_stack_n": 2}, {"by_thread": True}),
    "overview": ({"by": "category"},),
    "kernel": ({"by_operator": True},),
    "breakdown": ({"per_step": True},),
    "memory": ({"by": "device"}, {"by": "step"}),
    "benchmark": ({"batch_size": 32},),
    "collectives": ({"by": "rank"},),
    "roofline": ({"by": "shape"}, {"by": "family"}, {"by": "layer"}),
    "layers": ({"params": True},),
}

#: Views whose rows are fixed names rather than one row per thing found; their rows are listed.
FIXED_ROW_VIEWS = ("model", "model_spans", "distributed", "benchmark", "breakdown")

#: What each view option does; ``(view, option)`` entries win over plain option names.
OPTION_MEANINGS: dict[object, str] = {
    "rank": "only this rank of a run of several ranks (default: all ranks)",
    "top": "keep the first N rows",
    "sort_by": "sort key (`perfkit_core.views.operators.SORT_KEYS`, or `name`)",
    "group_by_input_shape": "one row per name and input shapes",
    "group_by_stack_n": "one row per name and top N stack frames (0: off)",
    "by_thread": "one row per name and host thread instead of threads merged",
    "op_detail": "follow each operator row with its detail rows",
    "group_by": "`'type'`: one row per name (an operator's type); `'name'`: one row per full "
    "name where the profiler records one (MindSpore), with the side it ran on",
    "filter": "keep the events whose name or full name this regular expression matches "
    "(anywhere, case-insensitive), as MindInsight's operator search",
    ("kernel", "by_operator"): "one row per kernel and the operator that launched it "
    "(MindInsight's CUDA kernel activity)",
    ("breakdown", "per_step"): "one row per step with a column per part, instead of one row "
    "per part averaged over the steps",
    "kernel_wait_threshold_ns": "a gap shorter than this (ns) that the host did not cause is "
    "kernel wait (HTA's `consecutive_kernel_delay`)",
    ("overview", "by"): "`'kind'`: one row per event kind; `'category'`: one row per native "
    "category (Paddle's TracerEventType names, Kineto's `cat`)",
    ("memory", "by"): "`'op'`: one row per op and device; `'device'`: one row per device with "
    "its peaks; `'step'`: one row per step and device with the step's peaks",
    ("collectives", "by"): "`'collective'`: one row per collective, process group and size; "
    "`'rank'`: one row per collective and rank",
    "warmup": "steps left out at the start of each rank (default: see *Warm-up* below)",
    "batch_size": "samples per step; adds the `ips_samples` row",
    "slices": "about how many time slices: each step is cut into `round(slices / steps)` "
    "equal slices (at least one), so slices line up with the steps; without steps, the "
    "profile is cut into `slices` equal slices",
    ("roofline", "by"): "`'op'`: one row per op name and precision; `'shape'`: per op, input "
    "shapes and precision; `'family'`: per op family; `'layer'`: per layer span",
    "peak_tflops": "peak TFLOP/s to measure every op against, for every precision (default: "
    "the device's datasheet peaks, or this machine's from `perfkit peaks` on a CPU run)",
    "peak_bandwidth": "peak memory bandwidth in TB/s (default: as `peak_tflops`)",
    **LAYERS_OPTIONS,
}

#: What each unit a column name can give means, and how the text report writes it
#: (``perfkit_core.report.format.column_unit``).
UNIT_TEXT: dict[str, tuple[str, str]] = {
    "time": ("nanoseconds (int64 or float64)", "converted to `--time-unit` (ms by default)"),
    "pct": ("percent, 0 to 100", "two decimals, `(%)` in the header"),
    "bytes": ("bytes", "whole bytes"),
    "rate": (
        "per second: `gb_per_s` in 10⁹ bytes, `gflops_per_s` in 10⁹ floating-point "
        "operations, `tflops_per_s` in 10¹² floating-point operations, `tb_per_s` in 10¹² bytes",
        "headers `GB/s`, `GFLOP/s`, `TFLOP/s` and `TB/s`",
    ),
}
