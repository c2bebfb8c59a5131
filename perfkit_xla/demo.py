"""A small training loop in JAX, the same MLP as ``perfkit_torch.demo`` (``perfkit demo``, the
test fixtures in ``tests/data/xla``).

The model and optimizer are written with ``jax.numpy`` only (no flax or optax), so the demo
needs nothing but ``jax``: ``blocks`` blocks of Linear + LayerNorm + ReLU of ``width`` features,
a Linear head to 10 classes, cross-entropy, Adam (lr 1e-3), one jitted step per batch (eight
batches of random data, made before training and reused in turn).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any


def mlp_training(
    *, blocks: int = 4, width: int = 64, batch_size: int = 32, seed: int = 0
) -> tuple[Callable[[], Any], Iterator[tuple[Any, Any]]]:
    """Return ``(step, batches)``: ``step()`` runs one jitted training step on the next batch of
    ``batches`` (random data) and returns the loss; the first call compiles."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(seed)
    params: list[dict[str, Any]] = []
    sizes = [(width, width)] * blocks + [(width, 10)]
    for i, (fan_in, fan_out) in enumerate(sizes):
        key, sub = jax.random.split(key)
        layer = {
            "w": jax.random.normal(sub, (fan_in, fan_out)) / jnp.sqrt(fan_in),
            "b": jnp.zeros(fan_out),
        }
        if i < blocks:
            layer["scale"] = jnp.ones(fan_out)
            layer["shift"] = jnp.zeros(fan_out)
        params.append(layer)

    def forward(params: list[dict[str, Any]], x: Any) -> Any:
        for layer in params[:-1]:
            x = x @ layer["w"] + layer["b"]
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            x = (x - mean) / jnp.sqrt(var + 1e-5) * layer["scale"] + layer["shift"]
            x = jax.nn.relu(x)
        return x @ params[-1]["w"] + params[-1]["b"]

    def loss_fn(params: list[dict[str, Any]], x: Any, y: Any) -> Any:
        logits = forward(params, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8

    @jax.jit
    def train_step(state: Any, x: Any, y: Any) -> Any:
        params, m, v, t = state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        mhat = jax.tree_util.tree_map(lambda m: m / (1 - b1**t), m)
        vhat = jax.tree_util.tree_map(lambda v: v / (1 - b2**t), v)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), params, mhat, vhat
        )
        return (params, m, v, t), loss

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = [(params, zeros, zeros, jnp.zeros((), jnp.float32))]

    def batches() -> Iterator[tuple[Any, Any]]:
        # Made before training, so that a profile holds the training steps only.
        kx, ky = jax.random.split(jax.random.PRNGKey(seed + 1))
        xs = jax.random.normal(kx, (8, batch_size, width))
        ys = jax.random.randint(ky, (8, batch_size), 0, 10)
        pairs = [(xs[i], ys[i]) for i in range(8)]
        jax.block_until_ready(pairs)
        while True:
            yield from pairs

    data = batches()

    def step() -> Any:
        x, y = next(data)
        state[0], loss = train_step(state[0], x, y)
        return loss

    return step, data


def run_steps(
    step: Callable[[], Any],
    steps: int,
    *,
    first: int = 0,
    annotate: bool = True,
    timer: Any = None,
) -> float:
    """Run ``steps`` training steps, each inside ``jax.profiler.StepTraceAnnotation("train",
    step_num=N)`` (N from ``first``), waiting for each to finish (and timed by ``timer``, a
    ``perfkit_core.step_timer``, when given); return the last loss."""
    import jax

    loss: Any = None
    for i in range(first, first + steps):
        span: AbstractContextManager[Any] = (
            jax.profiler.StepTraceAnnotation("train", step_num=i) if annotate else _null()
        )
        with timer.step() if timer is not None else _null(), span:
            loss = step()
            loss.block_until_ready()
    return float(loss) if loss is not None else float("nan")  # no step run: no loss


def _null() -> AbstractContextManager[Any]:
    import contextlib

    return contextlib.nullcontext()


def train_mlp(
    directory: Path, *, steps: int = 20, warmup: int = 2, timed_steps: int = 0
) -> tuple[list[Path], Any]:
    """Train the MLP for ``warmup`` unprofiled steps (the first compiles), then ``steps`` steps
    under ``perfkit_xla.profile``, saving one perfkit run under ``directory``. Returns (run
    folders, the profile session).

    With ``timed_steps``, that many more steps run after the warm-up, without the profiler,
    and ``perfkit_core.step_timer`` times them and the profiled ones and saves their times into
    the run, as ``perfkit_torch.demo.train_mlp`` does: a comparison with torch then states its
    ratio without either profiler's cost."""
    import perfkit_core
    from perfkit_xla.capture import profile

    step, _ = mlp_training()
    run_steps(step, warmup, annotate=False)
    timer = perfkit_core.step_timer(warmup=0) if timed_steps else None
    run_steps(step, timed_steps, annotate=False, timer=timer)
    with profile(directory, worker_name="jax_mlp", framework="jax") as session:  # a JAX model
        run_steps(step, steps, first=warmup, timer=timer)
    if timer is not None:
        timer.save(session.runs)
    return session.runs, session
