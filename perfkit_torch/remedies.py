"""What to change, in PyTorch code, for each advice rule (``perfkit_remedy``).

Remedies fit the run: AMP advice follows the GPU's compute capability (bf16 and TF32 from 8.0,
fp16 with a GradScaler on 7.x), and CPU-only runs get no pinned-memory or non-blocking-copy
advice, which only helps a GPU.
"""

from __future__ import annotations

from typing import Any

#: The sharing strategy the input-pipeline remedy sets, which the hand-over replays
#: (``perfkit_torch.replay.loader_batch_ns``) time: under torch's default,
#: ``file_descriptor``, the training process takes each tensor's file descriptor from a thread
#: of the worker that must take the worker's GIL, so a batch the worker has made waits while
#: its Dataset runs Python (``bench/bench_handover.py``).
REMEDY_SHARING_STRATEGY = "file_system"

_LOADER_GPU = (
    "Load batches in worker processes, pinned, and prefetched, so loading overlaps the step:\n"
    "    torch.multiprocessing.set_sharing_strategy('{strategy}')  # before the loader starts\n"
    "    loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers={workers},\n"
    "                                         pin_memory=True, prefetch_factor=2,\n"
    "                                         persistent_workers=True)\n"
    "and copy with batch = batch.to(device, non_blocking=True).\n{cores}\n{sharing}"
)
_LOADER_CPU = (
    "Load batches in worker processes, prefetched, so loading overlaps the step:\n"
    "    torch.multiprocessing.set_sharing_strategy('{strategy}')  # before the loader starts\n"
    "    loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers={workers},\n"
    "                                         prefetch_factor=2, persistent_workers=True)\n"
    "{cores}\n{sharing}"
)

#: Why the loader remedy sets the sharing strategy (``REMEDY_SHARING_STRATEGY``, which the
#: saving is estimated with).
_SHARING = (
    "(Under the default strategy, file_descriptor, the training process takes each batch's\n"
    "tensors from a thread of the worker that needs the worker's GIL, so a batch the worker\n"
    "has made waits while its Dataset runs Python; {strategy} hands it over by name. The\n"
    "saving is estimated for {strategy}. Its shared memory is freed by torch's\n"
    "torch_shm_manager even if a process dies.)"
)


#: What the loader remedy says of cores when the finding does not count them.
_SPARE_CORES = "(leave a core or two to the training process: torch.set_num_threads(...))."


def loader_remedy(evidence: dict[str, Any], text: str) -> str:
    """The loader remedy ``text`` with as many workers as the finding's saving was estimated
    for, and why (``remedy_workers``); 4, leaving the training process a core or two, when the
    finding does not count free cores."""
    from perfkit_core.advice import remedy_lead, remedy_workers

    workers, cores = remedy_workers(evidence) or (4, _SPARE_CORES)
    return remedy_lead(_loader_text(text, workers, cores), evidence)


def _loader_text(text: str, workers: int | str, cores: str) -> str:
    """A loader remedy ``text`` filled in: the workers, what it says of cores, and the sharing
    strategy with why."""
    sharing = _SHARING.format(strategy=REMEDY_SHARING_STRATEGY)
    return text.format(
        workers=workers, cores=cores, sharing=sharing, strategy=REMEDY_SHARING_STRATEGY
    )


_AMP_BF16 = (
    "This GPU (compute capability {cc}) runs bf16 and TF32 on tensor cores:\n"
    "    torch.backends.cuda.matmul.allow_tf32 = True   # fp32 matmuls on tensor cores\n"
    "    torch.backends.cudnn.allow_tf32 = True\n"
    "    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n"
    "        loss = model(x)"
)
_AMP_FP16 = (
    "This GPU (compute capability {cc}) runs fp16 on tensor cores (it has no bf16 or TF32):\n"
    "    scaler = torch.amp.GradScaler('cuda')\n"
    "    with torch.autocast(device_type='cuda', dtype=torch.float16):\n"
    "        loss = model(x)\n"
    "    scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()"
)
_AMP_UNKNOWN = (
    "Run matmuls and convolutions in reduced precision on tensor cores. On compute capability\n"
    "8.0 or newer (A100, H100): torch.autocast(device_type='cuda', dtype=torch.bfloat16) and\n"
    "torch.backends.cuda.matmul.allow_tf32 = True; on 7.x (V100, T4): dtype=torch.float16\n"
    "with torch.amp.GradScaler('cuda')."
)

REMEDIES: dict[str, str] = {
    "input-pipeline": _loader_text(_LOADER_GPU, 4, _SPARE_CORES),
    "placement": (
        "Stop reading device values on the host every step: keep scalars such as losses as\n"
        "tensors and call .item() / .cpu() / .tolist() only when logging (every N steps).\n"
        "(Also avoid Python control flow on device tensors (use torch.where), and keep tensors\n"
        "that only feed host logic on the CPU (create them with device='cpu').)"
    ),
    "cpu-bound-op": (
        "Find the host-side work in the op (record_function around its callers shows where it\n"
        "comes from); prefer a fused or device-side equivalent, or torch.compile the region:\n"
        "    model = torch.compile(model)"
    ),
    "launch-bound": (
        "Launch fewer, larger kernels: torch.compile(model, mode='reduce-overhead') (CUDA Graphs),\n"
        "or capture the step with torch.cuda.graph / torch.cuda.make_graphed_callables; fuse\n"
        "elementwise ops; raise the batch size."
    ),
    "low-gpu-utilization": (
        "Give the GPU more work per step and remove host stalls: larger batches, DataLoader\n"
        "workers with pin_memory=True, no .item() in the step, torch.compile for small ops."
    ),
    "communication": (
        "Overlap gradient communication with backward: DistributedDataParallel(model,\n"
        "bucket_cap_mb=25, gradient_as_bucket_view=True).\n"
        "(Also avoid extra collectives in the step, and consider\n"
        "torch.distributed.algorithms.ddp_comm_hooks (fp16 compression).)"
    ),
    "amp": _AMP_UNKNOWN,
    "memory-pressure": (
        "Lower peak memory: smaller batch or gradient accumulation, activation checkpointing\n"
        "(torch.utils.checkpoint), set_to_none=True in zero_grad, and check\n"
        "torch.cuda.memory_summary() for fragmentation."
    ),
    "pageable-memcpy": (
        "Copy from pinned memory, asynchronously:\n"
        "    DataLoader(..., pin_memory=True)  # or tensor.pin_memory()\n"
        "    x = x.to('cuda', non_blocking=True)"
    ),
    "optimizer": (
        "Use the fused (or multi-tensor) implementation of your optimizer, one kernel for all\n"
        "parameters instead of a loop over them: keep its class and arguments and add\n"
        "fused=True (Adam, AdamW, SGD, Adagrad) or foreach=True (the others)."
    ),
    "tensor-cores-unused": (
        "Let fp32 matmuls and convolutions run on tensor cores (TF32, from compute capability\n"
        "8.0), or run them in bf16 under autocast:\n"
        "    torch.backends.cuda.matmul.allow_tf32 = True   # or torch.set_float32_matmul_precision('high')\n"
        "    torch.backends.cudnn.allow_tf32 = True\n"
        "    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n"
        "        loss = model(x)"
    ),
    "gemm-alignment": (
        "Pad the sizes these GEMMs multiply to multiples of 8 (fp16/bf16; 4 for TF32): hidden\n"
        "and feature sizes, channels, vocabulary (e.g. 50257 -> 50304), and under autocast the\n"
        "batch times sequence length.\n"
        "(torch.nn.functional.pad the odd tensor once if needed.)"
    ),
    "small-gemms": (
        "Batch the small matrix products: one torch.bmm (or torch.matmul on stacked\n"
        "tensors) instead of a loop of mm calls, a larger batch, or capture the step in a CUDA\n"
        "graph so that launches stop dominating:\n"
        "    model = torch.compile(model, mode='reduce-overhead')"
    ),
    "unfused-elementwise": (
        "Compile the model, so chains of elementwise, normalisation and softmax ops become\n"
        "fused kernels that read and write each tensor once:\n"
        "    model = torch.compile(model)"
    ),
    "small-ops": (
        "Compile the model so that runs of tiny ops become a few fused kernels and Python\n"
        "dispatch leaves the step:\n"
        "    model = torch.compile(model)\n"
        "and keep per-step Python work (logging, metric bookkeeping) out of the hot loop."
    ),
    "python-overhead": (
        "Compile the model so its Python (module calls, hooks) is traced once instead of run\n"
        "every step:\n"
        "    model = torch.compile(model)\n"
        "and move per-step bookkeeping (loss.item(), metric lists, logging) out of the loop or\n"
        "do it every N steps."
    ),
    "straggler": (
        "Look at what the slow rank does differently in the phase named. Data loading: more\n"
        "DataLoader workers on that host (num_workers, persistent_workers=True) or its data on\n"
        "faster storage. A slower device: check its clocks and throttling (nvidia-smi -q -d\n"
        "PERFORMANCE,CLOCK). Uneven work: the same number of equal batches on every rank:\n"
        "    sampler = torch.utils.data.distributed.DistributedSampler(dataset, drop_last=True)"
    ),
    "load-imbalance": (
        "Give every rank the same work per step, so none waits in the collectives:\n"
        "    sampler = torch.utils.data.distributed.DistributedSampler(dataset, drop_last=True)\n"
        "with batches of equal size and length (pad or bucket by length), and pipeline or model\n"
        "shards balanced by measured time rather than by layer count."
    ),
    "exposed-communication": (
        "Overlap gradient communication with backward: DistributedDataParallel(model,\n"
        "bucket_cap_mb=25, gradient_as_bucket_view=True).\n"
        "(Also avoid extra collectives in the step, and consider\n"
        "torch.distributed.algorithms.ddp_comm_hooks (fp16 compression).)"
    ),
}


#: torch optimizers with a fused implementation (``fused=True``), on the CPU and CUDA.
FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD", "Adagrad")


def optimizer_remedy(cls: str | None, implementation: str | None) -> str:
    """The optimizer remedy for the class the trace names (``Adam``), keeping the class and its
    arguments so the training math stays the same."""
    if not cls:
        return REMEDIES["optimizer"]
    if cls in FUSED_OPTIMIZERS:
        return (
            f"Use {cls}'s fused implementation, one kernel for all parameters instead of a loop\n"
            "over them; keep the class and your arguments, and add fused=True:\n"
            f"    optimizer = torch.optim.{cls}(model.parameters(), ..., fused=True)"
        )
    if implementation == "foreach":
        return (
            f"{cls} already runs its multi-tensor (foreach) implementation and has no fused one;\n"
            "compiling the optimizer step fuses its updates:\n"
            "    optimizer.step = torch.compile(optimizer.step)"
        )
    return (
        f"Use {cls}'s multi-tensor implementation, which updates all parameters in a few ops\n"
        "instead of a loop over them; keep the class and your arguments, and add foreach=True:\n"
        f"    optimizer = torch.optim.{cls}(model.parameters(), ..., foreach=True)"
    )


def remedy(finding: Any) -> str | None:
    """The torch remedy for ``finding`` (by its rule), fitted to the run's hardware and naming
    the ops it found where useful."""
    rule = getattr(finding, "rule", "")
    evidence = getattr(finding, "evidence", {}) or {}
    if rule == "optimizer":
        return optimizer_remedy(evidence.get("optimizer_class"), evidence.get("implementation"))
    if rule == "input-pipeline":
        return loader_remedy(
            evidence, _LOADER_CPU if evidence.get("has_device") is False else _LOADER_GPU
        )
    if rule == "amp":
        cc = evidence.get("compute_capability")
        if cc is None:
            return _AMP_UNKNOWN
        return (_AMP_BF16 if float(cc) >= 8.0 else _AMP_FP16).format(cc=f"{float(cc):.1f}")
    text = REMEDIES.get(rule)
    if text and rule == "placement":
        ops = ", ".join(o["op"] for o in evidence.get("ops", [])[:3])
        text = f"Ops to look at: {ops}.\n{text}" if ops else text
    return text
