"""What to change, in PaddlePaddle code, for each advice rule (``perfkit_remedy``).

AMP advice follows the GPU's compute capability (bfloat16 from 8.0, float16 with a GradScaler on
7.x)."""

from __future__ import annotations

from typing import Any

_AMP_BF16 = (
    "This GPU (compute capability {cc}) runs bfloat16 on tensor cores:\n"
    "    with paddle.amp.auto_cast(level='O1', dtype='bfloat16'):\n"
    "        loss = model(x)"
)
_AMP_FP16 = (
    "This GPU (compute capability {cc}) runs float16 on tensor cores (it has no bfloat16):\n"
    "    scaler = paddle.amp.GradScaler(init_loss_scaling=1024)\n"
    "    with paddle.amp.auto_cast(level='O1', dtype='float16'):\n"
    "        loss = model(x)\n"
    "    scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()"
)

#: Paddle's loader workers can crash on samples that are paddle Tensors (a segmentation fault
#: in the worker; ``paddle.io.TensorDataset`` over tensors is one such Dataset) once the
#: training process has run ops: seen with paddle 3.3 on the CPU in 5 runs of 6 on a quiet
#: machine and less often on a busy one (tests/test_paddle.py checks it).
_LOADER = (
    "Load batches in worker processes so loading overlaps the step:\n"
    "    loader = paddle.io.DataLoader(dataset, batch_size=..., num_workers={workers},\n"
    "                                  use_shared_memory=True, prefetch_factor=2,\n"
    "                                  persistent_workers=True)\n"
    "Have the Dataset return numpy arrays, not paddle Tensors (paddle.io.TensorDataset\n"
    "over tensors returns Tensors): Paddle's workers can crash on Tensor samples\n"
    "once training has run; the DataLoader still hands the loop Tensors.{cores}"
)


def loader_remedy(evidence: dict[str, Any]) -> str:
    """The loader remedy with as many workers as the finding's saving was estimated for, and
    why (``remedy_workers``); 4 when the finding does not count free cores."""
    from perfkit_core.advice import remedy_lead, remedy_workers

    workers, why = remedy_workers(evidence) or (4, "")
    text = _LOADER.format(workers=workers, cores=f"\n{why}" if why else "")
    return remedy_lead(text, evidence)


REMEDIES: dict[str, str] = {
    "input-pipeline": _LOADER.format(workers=4, cores=""),
    "placement": (
        "Run the ops that only feed host logic on the CPU so their results need no copy back:\n"
        "static graph:\n"
        "    with paddle.static.device_guard('cpu'):\n"
        "        step_var = paddle.increment(step_var)  # control flow, shape arithmetic\n"
        "dygraph: create those tensors on the host, paddle.to_tensor(v, place=paddle.CPUPlace()),\n"
        "and call .numpy() / .item() only when logging (every N steps)."
    ),
    "cpu-bound-op": (
        "Look at the op's host-side implementation (its infer_meta and kernel launch stages in\n"
        "perfkit report --op-detail), or convert the model with paddle.jit.to_static to cut\n"
        "per-op host work."
    ),
    "launch-bound": (
        "Launch fewer, larger kernels: convert with paddle.jit.to_static so ops fuse, capture the\n"
        "step with paddle.device.cuda.graphs.CUDAGraph, raise the batch size."
    ),
    "low-gpu-utilization": (
        "Give the GPU more work per step: larger batches, DataLoader workers, no .numpy() in the\n"
        "step, paddle.jit.to_static for many small ops."
    ),
    "communication": (
        "Overlap communication with backward: paddle.DataParallel(model, comm_buffer_size=25,\n"
        "last_comm_buffer_size=1); with fleet, strategy.fuse_all_reduce_ops = True."
    ),
    "amp": (
        "Run matmuls and convolutions in reduced precision on tensor cores. On compute capability\n"
        "8.0 or newer (A100, H100): paddle.amp.auto_cast(level='O1', dtype='bfloat16'); on 7.x\n"
        "(V100, T4): dtype='float16' with scaler = paddle.amp.GradScaler()."
    ),
    "memory-pressure": (
        "Lower peak memory: smaller batch or gradient accumulation, recompute\n"
        "(paddle.distributed.fleet.utils.recompute), and check paddle.device.cuda.max_memory_reserved()."
    ),
    "pageable-memcpy": (
        "Copy from pinned memory, asynchronously: tensor.pin_memory() (or create the tensor on\n"
        "paddle.CUDAPinnedPlace()), then x.cuda(blocking=False)."
    ),
    "optimizer": (
        "Use the multi-tensor implementation of your optimizer, which updates all parameters in\n"
        "a few ops instead of a loop over them: keep its class and arguments and add\n"
        "use_multi_tensor=True (paddle.optimizer.Adam and Momentum have it)."
    ),
    "tensor-cores-unused": (
        "Run matmuls and convolutions in reduced precision on tensor cores with automatic mixed\n"
        "precision:\n"
        "    with paddle.amp.auto_cast(dtype='bfloat16'):   # 'float16' with a GradScaler on 7.x\n"
        "        loss = model(x)"
    ),
    "gemm-alignment": (
        "Pad the sizes these GEMMs multiply to multiples of 8: hidden and feature sizes,\n"
        "channels, vocabulary, and under AMP the batch times sequence length."
    ),
    "small-gemms": (
        "Batch the small matrix products: one paddle.bmm (or paddle.matmul on stacked tensors)\n"
        "instead of a loop of matmuls, or a larger batch; a static graph\n"
        "(paddle.jit.to_static) cuts the launch overhead around them."
    ),
    "unfused-elementwise": (
        "Convert the model to a static graph with the CINN compiler, which fuses chains of\n"
        "elementwise ops into one kernel:\n"
        "    model = paddle.jit.to_static(model, backend='CINN')"
    ),
    "small-ops": (
        "Convert the model to a static graph so runs of tiny ops are fused and Python dispatch\n"
        "leaves the step:\n"
        "    model = paddle.jit.to_static(model)"
    ),
    "python-overhead": (
        "Convert the model to a static graph so its Python runs once, at conversion, instead\n"
        "of every step:\n"
        "    model = paddle.jit.to_static(model)\n"
        "and move per-step bookkeeping (loss.item(), metric lists, logging) out of the loop or\n"
        "do it every N steps."
    ),
    "straggler": (
        "Look at what the slow rank does differently in the phase named. Data loading: more\n"
        "DataLoader workers on that host (paddle.io.DataLoader(..., num_workers=4)) or its data\n"
        "on faster storage. A slower device: check its clocks and throttling (nvidia-smi -q -d\n"
        "PERFORMANCE,CLOCK). Uneven work: the same number of equal batches on every rank:\n"
        "    sampler = paddle.io.DistributedBatchSampler(dataset, batch_size=..., drop_last=True)"
    ),
    "load-imbalance": (
        "Give every rank the same work per step, so none waits in the collectives:\n"
        "    sampler = paddle.io.DistributedBatchSampler(dataset, batch_size=..., drop_last=True)\n"
        "with batches of equal size and length (pad or bucket by length), and pipeline stages\n"
        "balanced by measured time rather than by layer count."
    ),
    "exposed-communication": (
        "Overlap communication with backward: paddle.DataParallel(model, comm_buffer_size=25,\n"
        "last_comm_buffer_size=1); with fleet, strategy.fuse_all_reduce_ops = True."
    ),
}


#: Paddle optimizers with a multi-tensor implementation (``use_multi_tensor=True``).
MULTI_TENSOR_OPTIMIZERS = ("Adam", "Momentum")


def optimizer_remedy(cls: str | None) -> str:
    """The optimizer remedy for the class the trace names (``Adam``), keeping the class and its
    arguments so the training math stays the same."""
    if not cls:
        return REMEDIES["optimizer"]
    if cls in MULTI_TENSOR_OPTIMIZERS:
        return (
            f"Use {cls}'s multi-tensor implementation, which updates all parameters in a few ops\n"
            "instead of a loop over them; keep the class and your arguments, and add\n"
            "use_multi_tensor=True:\n"
            f"    optimizer = paddle.optimizer.{cls}(learning_rate=..., parameters=model.parameters(),\n"
            f"{' ' * len(f'    optimizer = paddle.optimizer.{cls}(')}use_multi_tensor=True)"
        )
    return (
        f"Paddle's {cls} has no multi-tensor implementation (only Adam and Momentum have one,\n"
        "use_multi_tensor=True), so no drop-in change keeps its update rule. Switching to one of\n"
        "them changes the training math (Adam's weight_decay is L2 regularisation, not AdamW's\n"
        "decoupled decay): compare the loss curves before adopting it."
    )


def remedy(finding: Any) -> str | None:
    """The paddle remedy for ``finding`` (by its rule), naming the ops it found where useful."""
    rule = getattr(finding, "rule", "")
    evidence = getattr(finding, "evidence", {}) or {}
    if rule == "optimizer":
        return optimizer_remedy(evidence.get("optimizer_class"))
    if rule == "input-pipeline":
        return loader_remedy(evidence)
    cc = (getattr(finding, "evidence", {}) or {}).get("compute_capability")
    if rule == "amp" and cc is not None:
        return (_AMP_BF16 if float(cc) >= 8.0 else _AMP_FP16).format(cc=f"{float(cc):.1f}")
    text = REMEDIES.get(rule)
    if text and finding.rule == "placement":
        ops = ", ".join(o["op"] for o in finding.evidence.get("ops", [])[:3])
        text = f"Ops to look at: {ops}.\n{text}" if ops else text
    return text
