"""Does perfkit place each op where it really stands against a GPU's limits?

A few ops whose FLOPs and bytes are known by hand run on a CUDA GPU, each once per step:

- ``mm bf16``: ``A @ B``, ``MM`` x ``MM`` bf16 (compute-bound, tensor cores);
- ``mm tf32``: the same in float32 with ``torch.backends.cuda.matmul.allow_tf32 = True``;
- ``mm fp32``: ``SMALL_MM`` x ``SMALL_MM`` float32 with TF32 off (the plain fp32 roof);
- ``add``: ``x + y`` of ``ADD`` float32 elements (memory-bound: two reads, one write);
- ``conv bf16``: a 3x3 convolution, ``CONV`` (N, C, H, W) bf16 input, ``CONV[1]`` filters.

The steps are profiled (CPU and CUDA) with perfkit's torch handler, and each call in them is
timed by hand with a pair of CUDA events around it: the GPU is first kept busy by a sleep
kernel, so the start event fires only once the call's own kernels are queued behind it and the
pair times the call's kernels, not the host's work before them (cuDNN's, 10% of a
convolution's time on an H200). The FLOP rate and bandwidth follow from the hand counts.
perfkit's roofline view of the run (by op and input shapes) is printed beside the hand
figures: its FLOPs and bytes per call, its device time per call, the precision it read off the
kernels, the achieved rate, the datasheet peak it measured against, its share of the roofline
and what it says bounds the op. A CHECK line per op says whether perfkit's FLOPs equal the
hand count, its time per call is within 10% of the events' on the same calls, and its
precision is the one the op ran in. For context, each op is also timed ``CALLS_PER_EVENT``
calls back to back between two events (the median of ``--reps``): kept busy that long, the
tensor cores ran products 12% to 13% slower on an H200 than the single calls of a step.
Exit status 1 when a CHECK fails.

    python bench/bench_roofline_gpu.py            # needs a CUDA GPU
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The side of the square bf16 and TF32 matmuls, the fp32 one's, the add's elements and the
#: convolution's input (N, C, H, W) and filters (K, C, 3, 3).
MM = 8192
SMALL_MM = 4096
ADD = 1 << 28
CONV = (64, 256, 56, 56)
#: The names the roofline view may give a matrix product and a convolution (the op it counts).
MATMUL = ("aten::mm", "aten::matmul")
CONVOLUTION = ("aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution")
#: Calls timed back to back between two CUDA events.
CALLS_PER_EVENT = 10
#: A CHECK passes when perfkit's device time per call is within this share of the events'.
TIME_TOLERANCE = 0.10
#: GPU clock cycles of the sleep kernel queued before each timed call in the profiled steps:
#: about 1 ms, longer than the host's work before any of the ops' kernels.
SLEEP_CYCLES = 2_000_000


@dataclass
class Op:
    """One op of the step: its label, what the roofline view may call it (one of ``names``,
    and ``precision``), its FLOPs and bytes by hand, and the call that runs it."""

    label: str
    names: tuple[str, ...]
    precision: str
    flops: float
    bytes: float
    run: Any
    tf32: bool = False


def ops() -> list[Op]:
    """The ops, their inputs made on the GPU now."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape: int, dtype: Any = torch.float32) -> Any:
        return torch.randn(*shape, device="cuda", generator=g).to(dtype)

    a16, b16 = rand(MM, MM, dtype=torch.bfloat16), rand(MM, MM, dtype=torch.bfloat16)
    a32, b32 = rand(MM, MM), rand(MM, MM)
    s32, t32 = rand(SMALL_MM, SMALL_MM), rand(SMALL_MM, SMALL_MM)
    x, y = rand(ADD), rand(ADD)
    n, c, h, w = CONV
    image = rand(n, c, h, w, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    weight = rand(c, c, 3, 3, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    conv_flops = 2.0 * n * c * h * w * c * 9  # stride 1, padding 1: output H x W, K = C
    conv_bytes = 2.0 * (n * c * h * w * 2 + c * c * 9)
    return [
        Op("mm bf16", MATMUL, "bf16 tensor", 2.0 * MM**3, 3.0 * MM * MM * 2, lambda: a16 @ b16),
        Op(
            "mm tf32",
            MATMUL,
            "tf32 tensor",
            2.0 * MM**3,
            3.0 * MM * MM * 4,
            lambda: a32 @ b32,
            True,
        ),
        Op("mm fp32", MATMUL, "fp32", 2.0 * SMALL_MM**3, 3.0 * SMALL_MM**2 * 4, lambda: s32 @ t32),
        Op("add", ("aten::add",), "fp32", float(ADD), 3.0 * ADD * 4, lambda: x + y),
        Op(
            "conv bf16",
            CONVOLUTION,
            "bf16 tensor",
            conv_flops,
            conv_bytes,
            lambda: torch.nn.functional.conv2d(image, weight, padding=1),
        ),
    ]


def call(op: Op) -> Any:
    """Run ``op`` once with TF32 as it asks."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = op.tf32
    return op.run()


def event_ms(op: Op, reps: int) -> float:
    """The time of one call of ``op`` on the GPU, by CUDA events: the median over ``reps`` of
    CALLS_PER_EVENT calls back to back between two events, after 3 warm-ups. Back to back, the
    GPU runs the calls without waiting for the host between them, as in a step; one call alone
    between two events also times the host's work before its kernel starts (cuDNN's, 10% of a
    convolution's time on an H200)."""
    import torch

    for _ in range(3):
        call(op)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS_PER_EVENT):
            call(op)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / CALLS_PER_EVENT)
    return statistics.median(times)


def timed_call(op: Op) -> tuple[Any, Any]:
    """Run ``op`` once between two CUDA events, the GPU kept busy by a sleep kernel while the
    host queues the call, so that the events time the call's kernels alone; the events."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = op.tf32
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(SLEEP_CYCLES)
    start.record()
    op.run()
    end.record()
    return start, end


def profile(the_ops: list[Op], directory: Path, steps: int) -> tuple[Any, dict[str, float]]:
    """Profile ``steps`` steps of every op once with perfkit's torch handler, each call timed
    by its own CUDA events (``timed_call``); the loaded run and, per op, the median of its
    events' times over the profiled steps (ms)."""
    import torch
    from torch.profiler import ProfilerActivity, schedule
    from torch.profiler import profile as torch_profile

    import perfkit_core
    from perfkit_torch.handler import on_trace_ready

    handler = on_trace_ready(directory, worker_name="roofline", background=False)
    timed: dict[str, list[float]] = {}
    with torch_profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
        on_trace_ready=handler,
        record_shapes=True,
    ) as prof:
        for step in range(steps + 2):
            pairs = {op.label: timed_call(op) for op in the_ops}
            torch.cuda.synchronize()
            if step >= 2:  # the schedule's wait and warm-up steps are not recorded
                for label, (start, end) in pairs.items():
                    timed.setdefault(label, []).append(start.elapsed_time(end))
            prof.step()
    if not handler.runs:
        raise RuntimeError(f"the handler saved no run ({handler.failures})")
    medians = {label: statistics.median(times) for label, times in timed.items()}
    return perfkit_core.load(handler.runs[0]), medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20, help="back-to-back timings per op (median)")
    parser.add_argument("--steps", type=int, default=9, help="profiled steps (the events' median)")
    parser.add_argument("--keep", type=Path, help="copy the profiled run into this folder")
    args = parser.parse_args()
    import pandas as pd
    import torch

    from perfkit_core.views.costmodel.peaks import run_peaks
    from perfkit_core.views.roofline import roofline_view

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    print(
        f"{props.name}, compute capability {props.major}.{props.minor}, "
        f"{props.total_memory / 2**30:.0f} GiB; torch {torch.__version__}"
    )
    the_ops = ops()
    back_to_back = {op.label: event_ms(op, args.reps) for op in the_ops}
    with tempfile.TemporaryDirectory() as tmp:
        run, measured = profile(the_ops, Path(tmp), args.steps)
        if args.keep is not None:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
    peaks = run_peaks(run)
    print(f"peaks: {peaks.device if peaks else 'none'} ({peaks.source if peaks else '-'})")
    view = roofline_view(run, by="shape")
    print(view.attrs.get("note", ""))
    shown = [
        "name",
        "input_shapes",
        "precision",
        "calls_per_step",
        "time_ns",
        "gflops",
        "moved_bytes",
        "achieved_tflops_per_s",
        "achieved_tb_per_s",
        "peak_tflops_per_s",
        "roofline_pct",
        "bound",
    ]
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(view[[c for c in shown if c in view.columns]].head(20).to_string())
    failed = 0
    print()
    for op in the_ops:
        ms = measured[op.label]
        rate = op.flops / (ms / 1e3) / 1e12
        bandwidth = op.bytes / (ms / 1e3) / 1e12
        peak = peaks.ceiling(op.precision) if peaks else float("nan")
        print(
            f"{op.label:<10} by hand: {ms:8.3f} ms/call, {op.flops / 1e9:9.1f} GFLOP, "
            f"{op.bytes / 1e6:8.1f} MB, {rate:7.1f} TFLOP/s ({100 * rate / peak:5.1f}% of the "
            f"{op.precision} peak {peak:g}), {bandwidth:6.2f} TB/s; events in the profiled "
            f"steps ({CALLS_PER_EVENT} back to back: {back_to_back[op.label]:.3f} ms/call)"
        )
        rows = view[view["name"].isin(op.names)]
        if rows.empty:
            print(f"  CHECK FAIL: no roofline row {' or '.join(op.names)}")
            failed += 1
            continue
        # This op's row: of its precision where there is one, the FLOPs per call nearest the
        # count (the bf16 and TF32 products have the same shapes).
        if (rows["precision"] == op.precision).any():
            rows = rows[rows["precision"] == op.precision]
        per_call = rows["gflops"] * 1e9 / rows["calls_per_step"]
        row = rows.loc[(per_call - op.flops).abs().idxmin()]
        calls = float(row["calls_per_step"])
        per_call_ms = float(row["time_ns"]) / calls / 1e6
        gflop_call = float(row["gflops"]) / calls
        moved_call = float(row["moved_bytes"]) / calls
        print(
            f"{'':<10} perfkit: {per_call_ms:8.3f} ms/call, {gflop_call:9.1f} GFLOP, "
            f"{moved_call / 1e6:8.1f} MB, {float(row['achieved_tflops_per_s']):7.1f} TFLOP/s "
            f"against {float(row['peak_tflops_per_s']):g}, {float(row['achieved_tb_per_s']):6.2f} "
            f"TB/s, roofline {float(row['roofline_pct']):5.1f}%, {row['bound']}-bound, "
            f"{row['precision']} ({calls:g} calls/step, inputs {row['input_shapes']})"
        )
        flops_ok = abs(gflop_call * 1e9 - op.flops) <= 1e-6 * op.flops
        time_ok = abs(per_call_ms - ms) <= TIME_TOLERANCE * ms
        precision_ok = row["precision"] == op.precision
        ok = flops_ok and time_ok and precision_ok
        failed += not ok
        print(
            f"  CHECK {'PASS' if ok else 'FAIL'}: FLOPs {'equal' if flops_ok else 'differ'}; "
            f"time per call {100 * (per_call_ms / ms - 1):+.1f}% of the events'; precision "
            f"{row['precision']}{'' if precision_ok else f', not {op.precision}'}"
        )
    print(f"\n{'PASS' if not failed else 'FAIL'}: {len(the_ops) - failed} of {len(the_ops)} ops")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
