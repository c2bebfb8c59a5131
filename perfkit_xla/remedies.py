"""What to change, in JAX or TensorFlow code, for each advice rule (``perfkit_remedy``)."""

from __future__ import annotations

from typing import Any

JAX_REMEDIES: dict[str, str] = {
    "pageable-memcpy": (
        "Put batches on the device ahead of the step instead of copying NumPy arrays inside\n"
        "it: batch = jax.device_put(batch) one step ahead (jax.device_put is asynchronous),\n"
        "or let the input pipeline prefetch to the device."
    ),
    "input-pipeline": (
        "Prepare batches ahead of the step, off the training thread, and put them on the device\n"
        "before they are needed (tf.data or grain with prefetch, then\n"
        "jax.device_put(batch) one step ahead); keep NumPy conversion out of the step."
    ),
    "placement": (
        "Stop reading device values on the host every step: keep losses as jax.Arrays and call\n"
        "float(loss) / np.asarray(x) / .block_until_ready() only when logging (every N steps);\n"
        "use jnp.where / lax.cond instead of Python control flow on array values."
    ),
    "cpu-bound-op": (
        "Move the host work into the jitted step: wrap the whole training step in jax.jit (with\n"
        "donate_argnums for the state), so that one compiled program runs per step."
    ),
    "launch-bound": (
        "Dispatch fewer, larger programs: jit the whole step rather than its pieces, scan over\n"
        "micro-steps with jax.lax.scan, and raise the batch size."
    ),
    "low-gpu-utilization": (
        "Give the device more work per step and remove host stalls: larger batches, batches\n"
        "prefetched to the device, no float(loss) in the step, the whole step under jax.jit."
    ),
    "communication": (
        "Overlap collectives with compute: shard with jax.sharding (NamedSharding) and let XLA\n"
        "schedule them (XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true on GPU); reduce\n"
        "gradients in bf16 where accuracy allows."
    ),
    "exposed-communication": (
        "Overlap collectives with compute: XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true\n"
        "(GPU), fewer and larger collectives (combine thresholds), gradients reduced in bf16."
    ),
    "amp": (
        "Compute in bfloat16 and keep the parameters in float32: cast inputs and weights with\n"
        "x.astype(jnp.bfloat16) inside the step (or jmp / flax's dtype=jnp.bfloat16), and set\n"
        "jax.config.update('jax_default_matmul_precision', 'tensorfloat32') for fp32 matmuls."
    ),
    "memory-pressure": (
        "Lower peak memory: donate the training state (jax.jit(step, donate_argnums=0)),\n"
        "rematerialize activations with jax.checkpoint, or use a smaller batch with gradient\n"
        "accumulation."
    ),
    "optimizer": (
        "Update every parameter in the same jitted step (optax's update and apply_updates inside\n"
        "jax.jit), so that XLA fuses the update into a few kernels."
    ),
    "small-ops": (
        "jit the whole step, so that runs of tiny ops become a few fused XLA ops and Python\n"
        "dispatch leaves the step:\n"
        "    train_step = jax.jit(train_step, donate_argnums=0)\n"
        "If the ops are already those of one compiled step (XLA op names such as fusion.3),\n"
        "each does little work: raise the batch size, or scan several steps in one program\n"
        "(jax.lax.scan) so the per-op cost is paid once for more work."
    ),
    "python-overhead": (
        "jit the whole step (Python runs once, at tracing) and move per-step bookkeeping\n"
        "(float(loss), metric lists, logging) out of the loop or do it every N steps."
    ),
    "straggler": (
        "Look at what the slow host does differently in the phase named: its input pipeline,\n"
        "its device's clocks, or uneven batches (give every process the same number of equal\n"
        "batches)."
    ),
    "load-imbalance": (
        "Give every device the same work per step: equal, padded batches per process, and\n"
        "shardings that split the arrays evenly."
    ),
    "tensor-cores-unused": (
        "Let fp32 matmuls run on tensor cores:\n"
        "    jax.config.update('jax_default_matmul_precision', 'tensorfloat32')\n"
        "or compute in bfloat16 (x.astype(jnp.bfloat16), flax's dtype=jnp.bfloat16)."
    ),
    "gemm-alignment": (
        "Pad the sizes these dots multiply to multiples of 8 (feature and hidden sizes,\n"
        "vocabulary, batch times sequence length); XLA then picks aligned tensor-core kernels."
    ),
    "small-gemms": (
        "Batch the small dots into fewer, larger ones (jax.vmap or a batched jnp.einsum instead of\n"
        "a Python loop), or raise the batch size."
    ),
    "unfused-elementwise": (
        "jit the whole step so that XLA fuses the chain: jax.jit(train_step); ops left unfused\n"
        "inside one program are at XLA's fusion limits (check XLA_FLAGS=--xla_dump_to)."
    ),
}

TF_REMEDIES: dict[str, str] = {
    "pageable-memcpy": (
        "Prefetch batches to the GPU so copies overlap the step:\n"
        "    dataset = dataset.apply(tf.data.experimental.prefetch_to_device('/gpu:0'))"
    ),
    "input-pipeline": (
        "Overlap input with training: build the input with tf.data and\n"
        "    dataset = dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)"
    ),
    "placement": (
        "Stop reading tensors on the host every step: keep the loss as a tensor and call\n"
        ".numpy() / float() only when logging; use tf.where / tf.cond instead of Python control\n"
        "flow on tensor values inside tf.function."
    ),
    "cpu-bound-op": (
        "Run the step as one graph: decorate it with @tf.function(jit_compile=True), so that XLA\n"
        "compiles it into a few fused ops."
    ),
    "launch-bound": (
        "Run fewer, larger ops: @tf.function(jit_compile=True) on the train step, Keras\n"
        "model.compile(..., steps_per_execution=N, jit_compile=True), a larger batch."
    ),
    "low-gpu-utilization": (
        "Give the GPU more work per step: larger batches, tf.data prefetching,\n"
        "model.compile(..., jit_compile=True, steps_per_execution=N)."
    ),
    "communication": (
        "Overlap gradient all-reduce with backward: tf.distribute.MirroredStrategy with\n"
        "cross_device_ops=tf.distribute.NcclAllReduce(num_packs=...), and fewer, larger tensors."
    ),
    "exposed-communication": (
        "Overlap gradient all-reduce with backward: tf.distribute.MirroredStrategy with NCCL and\n"
        "gradient packing (num_packs), or compress gradients to fp16."
    ),
    "amp": (
        "Use mixed precision:\n"
        "    tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')  # or 'mixed_float16'"
    ),
    "memory-pressure": (
        "Lower peak memory: a smaller batch, tf.recompute_grad on large blocks, and\n"
        "tf.config.experimental.set_memory_growth(gpu, True) to see the real need."
    ),
    "optimizer": (
        "Compile the update with the step: @tf.function(jit_compile=True), or Keras\n"
        "model.compile(..., jit_compile=True)."
    ),
    "small-ops": (
        "Fuse small ops with XLA: @tf.function(jit_compile=True) on the train step, or\n"
        "model.compile(..., jit_compile=True)."
    ),
    "python-overhead": (
        "Run the step inside tf.function (Python runs once, at tracing), and log every N steps."
    ),
    "straggler": (
        "Look at what the slow worker does differently in the phase named: its tf.data\n"
        "pipeline, its device's clocks, or uneven shards (dataset.shard with equal batches)."
    ),
    "load-imbalance": (
        "Give every replica the same work per step: dataset.shard with equal, padded batches."
    ),
    "tensor-cores-unused": (
        "Let fp32 matmuls run on tensor cores: tf.config.experimental.enable_tensor_float_32_execution(True),\n"
        "or use mixed precision: tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')."
    ),
    "gemm-alignment": (
        "Pad the sizes these matmuls multiply to multiples of 8 (units of Dense layers,\n"
        "vocabulary, batch size)."
    ),
    "small-gemms": (
        "Batch the small matmuls (tf.linalg.matmul on stacked tensors, tf.vectorized_map), or\n"
        "raise the batch size; @tf.function(jit_compile=True) cuts the launches around them."
    ),
    "unfused-elementwise": (
        "Compile the step with XLA so that chains of elementwise ops fuse:\n"
        "    @tf.function(jit_compile=True)"
    ),
}


def remedy(finding: Any, framework: str) -> str | None:
    """The JAX or TensorFlow remedy for ``finding`` (by its rule), or None when the rule has
    none here, or the run is neither JAX's nor TensorFlow's."""
    table = {"jax": JAX_REMEDIES, "tensorflow": TF_REMEDIES}.get(framework, {})
    return table.get(getattr(finding, "rule", ""))
