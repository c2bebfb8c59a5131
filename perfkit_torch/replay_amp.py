"""The ``amp`` finding's replay (``perfkit advise --measure``) on this machine's GPU: the GEMMs
of the shapes the run recorded, in fp32 as they ran and in the precision the remedy proposes
(the replay gives each shape's speed-up, the run each shape's time), and the host time
autocast adds per cast. The casts' device time and the host's own time stay as the model has
them (``perfkit_core.advice.amp.replayed_amp_saving``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

#: Timed rounds per shape and precision (the median is kept), and calls per round.
AMP_REPLAY_ROUNDS = 5
AMP_REPLAY_CALLS = 10
#: Shapes whose fp32 operands and product would take more device memory than this are not
#: replayed; the others' speed-up stands for them.
AMP_REPLAY_MAX_BYTES = 4 * 2**30


def _sync(device: str) -> Any:
    """The device's synchronize (CUDA), or None on the CPU, for ``steps_in_turn``."""
    import torch

    return torch.cuda.synchronize if device.startswith("cuda") else None


def gemm_speedups(
    shapes: list[list[float]],
    device: str,
    low: str,
    *,
    rounds: int = AMP_REPLAY_ROUNDS,
    calls: int = AMP_REPLAY_CALLS,
) -> list[tuple[list[float], float, float]]:
    """``(shape, fp32 ns per call, ns per call in low)`` for each ``[m, n, k, ...]`` of
    ``shapes`` that fits AMP_REPLAY_MAX_BYTES: an (m x k) by (k x n) product on ``device``, in
    float32 without TF32 (as a run whose products the profiler read as fp32 ran them) and in
    ``low`` (``bfloat16`` or ``float16``) on operands already cast, the two timed in turn,
    ``rounds`` rounds of ``calls`` calls each (medians)."""
    import torch

    from perfkit_core.advice import steps_in_turn

    dtype = getattr(torch, low)
    saved = torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    out = []
    try:
        for shape in shapes:
            m, n, k = (int(v) for v in shape[:3])
            if 4 * (m * k + k * n + m * n) > AMP_REPLAY_MAX_BYTES:
                continue
            a = torch.randn(m, k, device=device)
            b = torch.randn(k, n, device=device)
            a_low, b_low = a.to(dtype), b.to(dtype)
            variants: dict[str, Callable[[], Any]] = {
                "fp32": partial(torch.matmul, a, b),
                "low": partial(torch.matmul, a_low, b_low),
            }
            # two warm-up calls each: the library picks its kernels
            timed = steps_in_turn(
                variants, calls=calls, rounds=rounds, warmup=2, sync=_sync(device)
            )
            out.append((shape, timed["fp32"], timed["low"]))
            del a, b, a_low, b_low
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.set_float32_matmul_precision(saved[1])
    return out


#: The cast replay's model: this many Linear(CAST_REPLAY_WIDTH, CAST_REPLAY_WIDTH) layers on a
#: batch of CAST_REPLAY_BATCH rows, small enough that the host paces its steps; steps per
#: round, rounds (the median is kept).
CAST_REPLAY_LAYERS = 8
CAST_REPLAY_WIDTH = 16
CAST_REPLAY_BATCH = 4
CAST_REPLAY_STEPS = 20


def cast_host_ns(
    device: str,
    low: str,
    *,
    rounds: int = AMP_REPLAY_ROUNDS,
    steps: int = CAST_REPLAY_STEPS,
) -> float:
    """The host time autocast adds per cast on ``device``, forward and backward, counted as
    the amp model counts them (``perfkit_core.advice.amp``: two per floating input of a
    forward matrix op recorded in fp32): a small MLP, whose steps its host paces, trained in
    fp32 and under autocast to ``low`` in turn (``rounds`` rounds of ``steps`` steps, the
    device synchronised at the end of each), its step's difference over its counted casts; 0
    when autocast made it no slower."""
    import torch

    from perfkit_core.advice import steps_in_turn

    dtype = getattr(torch, low)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    layers = [
        torch.nn.Linear(CAST_REPLAY_WIDTH, CAST_REPLAY_WIDTH) for _ in range(CAST_REPLAY_LAYERS)
    ]
    model = torch.nn.Sequential(*layers).to(device)
    x = torch.randn(CAST_REPLAY_BATCH, CAST_REPLAY_WIDTH, device=device)

    def fp32() -> None:
        model(x).sum().backward()

    def autocast() -> None:
        with torch.autocast(device_type, dtype=dtype):
            y = model(x)
        y.float().sum().backward()

    timed = steps_in_turn(
        {"fp32": fp32, "autocast": autocast},
        calls=steps,
        rounds=rounds,
        warmup=3,
        sync=_sync(device),
    )
    # each layer's input, weight and bias are floating inputs of a matrix op, and the model
    # counts a cast forward and one backward for each
    counted = 2 * 3 * CAST_REPLAY_LAYERS
    added = timed["autocast"] - timed["fp32"]
    return max(added, 0.0) / counted


def measure_amp(finding: Any, device: str | None = None) -> dict[str, Any] | None:
    """The amp finding's saving with its GEMMs' speed-up replayed (``gemm_speedups``) on
    ``device``: by default this machine's CUDA GPU, only when it is the GPU the run recorded
    (another GPU's speed-up would not be the run's). None without a GPU, recorded GEMM shapes
    or a shape that fits."""
    import torch

    from perfkit_core.advice import replayed_amp_saving

    evidence = finding.evidence
    shapes = evidence.get("gemm_shapes") or []
    if not shapes or not evidence.get("gemm_costed_per_step_ns"):
        return None
    if device is None:
        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name()
        if evidence.get("devices") and name not in evidence["devices"]:
            return None
        device = "cuda"
    else:
        name = device
    low = "bfloat16" if str(evidence.get("target_precision", "")).startswith("bf16") else "float16"
    try:
        timed = gemm_speedups(shapes, device, low)
        cast_ns = cast_host_ns(device, low)
    except (RuntimeError, ValueError):  # out of memory, a dtype the device lacks
        return None
    if not timed:
        return None
    # the replay gives each shape's speed-up, the run its recorded time
    recorded = sum(float(shape[4]) for shape, _, _ in timed)
    after = sum(float(shape[4]) * low_ns / fp32_ns for shape, fp32_ns, low_ns in timed)
    if recorded <= 0 or after <= 0:
        return None
    speedup = recorded / after
    parts = replayed_amp_saving(evidence, speedup, cast_ns)
    short = "bf16" if low == "bfloat16" else "fp16"
    return {
        "saving_ns": parts["saving_ns"],
        "estimate": (
            f"Replayed on {name}: the {len(timed)} recorded GEMM shapes ran at {speedup:.2f}x "
            f"their fp32 speed in {short} (weighted by their recorded time), so the matrix ops "
            f"would take {parts['matrix_ops_after_per_step_ns'] / 1e6:.3f} ms per step. Each "
            f"cast autocast adds cost the host {cast_ns / 1e3:.1f} us there (a small MLP's step "
            f"in fp32 and under autocast), {parts['cast_host_per_step_ns'] / 1e6:.3f} ms per "
            f"step for this run's {float(evidence.get('casts_per_step', 0)):.0f} casts. The "
            f"rest as modelled: {finding.estimate}"
        ),
        "evidence": {
            "measured": "replay",
            "speedup": parts["speedup"],
            "speedup_from": "replay",
            "matrix_ops_after_per_step_ns": parts["matrix_ops_after_per_step_ns"],
            "gpu_bound_step_ns": parts["gpu_bound_step_ns"],
            "cast_host_per_step_ns": parts["cast_host_per_step_ns"],
            "host_bound_step_ns": parts["host_bound_step_ns"],
            "replay_cast_host_ns": cast_ns,
            "replay_gemm_speedup": speedup,
            "replay_device": name,
            "replay_gemms": [[*shape[:3], fp32_ns, low_ns] for shape, fp32_ns, low_ns in timed],
        },
    }
