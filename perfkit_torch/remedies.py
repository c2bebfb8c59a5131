"""What to change, in PyTorch code, for each advice rule (``perfkit_remedy``)."""

from __future__ import annotations

from typing import Any

REMEDIES: dict[str, str] = {
    "input-pipeline": (
        "Load batches in worker processes, pinned, and prefetched, so loading overlaps the step:\n"
        "    loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers=4,\n"
        "                                         pin_memory=True, prefetch_factor=2,\n"
        "                                         persistent_workers=True)\n"
        "and copy with batch = batch.to(device, non_blocking=True)."
    ),
    "placement": (
        "Stop reading device values on the host every step: keep scalars such as losses as\n"
        "tensors and call .item() / .cpu() / .tolist() only when logging (every N steps);\n"
        "avoid Python control flow on device tensors (use torch.where); keep tensors that only\n"
        "feed host logic on the CPU (create them with device='cpu')."
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
        "bucket_cap_mb=25, gradient_as_bucket_view=True); avoid extra collectives in the step;\n"
        "consider torch.distributed.algorithms.ddp_comm_hooks (fp16 compression)."
    ),
    "amp": (
        "Run matmuls and convolutions in reduced precision on tensor cores:\n"
        "    with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n"
        "        loss = model(x)\n"
        "(with float16 use torch.amp.GradScaler); torch.backends.cuda.matmul.allow_tf32 = True."
    ),
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
}


def remedy(finding: Any) -> str | None:
    """The torch remedy for ``finding`` (by its rule), naming the ops it found where useful."""
    text = REMEDIES.get(getattr(finding, "rule", ""))
    if text and finding.rule == "placement":
        ops = ", ".join(o["op"] for o in finding.evidence.get("ops", [])[:3])
        text = f"Ops to look at: {ops}.\n{text}" if ops else text
    return text
