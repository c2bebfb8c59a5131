"""What to change, in MindSpore code, for each advice rule (``perfkit_remedy``)."""

from __future__ import annotations

from typing import Any

REMEDIES: dict[str, str] = {
    "tensor-cores-unused": (
        "Run matmuls and convolutions in float16 on tensor cores (Cube units on Ascend) with\n"
        "automatic mixed precision, which keeps a float32 copy of the weights and scales the loss:\n"
        "    net = mindspore.amp.auto_mixed_precision(net, amp_level='O2')\n"
        "or Model(net, loss_fn, optimizer, amp_level='O2') with Model.train."
    ),
    "gemm-alignment": (
        "Pad the sizes these GEMMs multiply to multiples of 8 (16 on Ascend): hidden and feature\n"
        "sizes, channels, vocabulary, and under mixed precision the batch times sequence length."
    ),
    "small-gemms": (
        "Batch the small matrix products: one mindspore.ops.bmm (or ops.matmul on stacked\n"
        "tensors) instead of a loop of matmuls, or a larger batch; compiling the step (GRAPH_MODE\n"
        "or @mindspore.jit) cuts the launch overhead around them."
    ),
    "unfused-elementwise": (
        "Compile the step with kernel fusion, which fuses chains of elementwise operators into\n"
        "one kernel: GRAPH_MODE (or @mindspore.jit) with\n"
        "    mindspore.set_context(jit_config={'jit_level': 'O1'})"
    ),
    "python-overhead": (
        "Run the step as a compiled graph, so Python runs once at compile time instead of every\n"
        "step: mindspore.set_context(mode=mindspore.GRAPH_MODE), or decorate the training step\n"
        "with @mindspore.jit in PyNative mode:\n"
        "    @mindspore.jit\n"
        "    def train_step(x, y):\n"
        "        loss, grads = grad_fn(x, y)\n"
        "        optimizer(grads)\n"
        "        return loss\n"
        "and read the loss on the host (loss.asnumpy()) only when logging."
    ),
    "small-ops": (
        "Compile the step so that runs of small operators fuse and per-op dispatch leaves the\n"
        "step: GRAPH_MODE or @mindspore.jit on the training step, with\n"
        "mindspore.set_context(jit_config={'jit_level': 'O1'}) (or O2) for kernel fusion; if the\n"
        "step is compiled already, raise the batch size so each operator does more work."
    ),
    "input-pipeline": (
        "Load and transform batches in parallel, ahead of the step:\n"
        "    dataset = dataset.map(operations=transforms, num_parallel_workers=8,\n"
        "                          python_multiprocessing=True).batch(32, num_parallel_workers=8)\n"
        "and, with Model.train, feed the device from a queue with dataset sink mode:\n"
        "    model.train(epochs, dataset, dataset_sink_mode=True, sink_size=100)"
    ),
    "optimizer": (
        "Use MindSpore's fused optimizer forms, which update each parameter with one kernel:\n"
        "nn.AdamWeightDecay (the AdamWeightDecay primitive), nn.Adam (Adam) or nn.Momentum\n"
        "(ApplyMomentum) instead of an update written from elementwise ops; run the optimizer\n"
        "inside the compiled step (GRAPH_MODE, or @mindspore.jit around grad and update), and\n"
        "keep parameters few and large so that the per-parameter kernels are few."
    ),
    "cpu-bound-op": (
        "Compile the step (GRAPH_MODE or @mindspore.jit) so the operator's host-side work runs\n"
        "once per graph, not per call; look at the operator's calls per step in\n"
        "perfkit report --group-by name to find where it comes from."
    ),
    "launch-bound": (
        "Launch fewer, larger kernels: GRAPH_MODE with jit_level 'O1'/'O2' (kernel fusion),\n"
        "dataset sink mode (model.train(..., dataset_sink_mode=True)) to run several steps per\n"
        "launch, a larger batch."
    ),
    "low-gpu-utilization": (
        "Give the device more work per step: larger batches, dataset sink mode with\n"
        "num_parallel_workers in the pipeline, GRAPH_MODE, no loss.asnumpy() every step."
    ),
    "placement": (
        "Keep values on the device: read tensors on the host (.asnumpy(), .item(), float())\n"
        "only when logging, every N steps, and use ops.select / ops.where instead of Python\n"
        "control flow on tensor values."
    ),
    "pageable-memcpy": (
        "Feed the device from MindSpore's data queue instead of copying NumPy arrays each step:\n"
        "model.train(..., dataset_sink_mode=True)."
    ),
    "amp": (
        "Run matmuls and convolutions in reduced precision:\n"
        "    model = Model(net, loss, optimizer, amp_level='O2')  # or mindspore.amp.auto_mixed_precision(net, 'O2')\n"
        "with a loss scale manager (mindspore.amp.DynamicLossScaleManager()) for float16."
    ),
    "memory-pressure": (
        "Lower peak memory: recompute activations (cell.recompute()), a smaller batch with\n"
        "gradient accumulation, or mindspore.set_context(memory_optimize_level='O1')."
    ),
    "communication": (
        "Overlap gradient all-reduce with backward and send fewer, larger messages:\n"
        "mindspore.set_auto_parallel_context(all_reduce_fusion_config=[...]) and\n"
        "comm_fusion={'allreduce': {'mode': 'auto'}}."
    ),
    "exposed-communication": (
        "Overlap communication with compute: enable communication fusion\n"
        "(set_auto_parallel_context(comm_fusion=...)) and gradient accumulation in GRAPH_MODE."
    ),
    "straggler": (
        "Look at what the slow rank does differently in the phase named: its dataset\n"
        "(num_parallel_workers, shards of equal size), its device, or uneven batches."
    ),
    "load-imbalance": (
        "Give every rank the same work per step: equal shards (DistributedSampler /\n"
        "dataset.shard with equal, padded batches)."
    ),
}


def remedy(finding: Any) -> str | None:
    """The MindSpore remedy for ``finding`` (by its rule), or None when the rule has none here."""
    return REMEDIES.get(getattr(finding, "rule", ""))
