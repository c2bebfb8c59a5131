"""A small synthetic torch-like GPU run, built through ``perfkit_core.events`` as an adapter
builds one. The view reference computes every view on it to list the columns each returns, so
the column tables come from what the code returns, not from what someone typed."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from perfkit_core.events import COLUMNS, Run, finish_events, make_run

_SGEMM = {"grid": "4,2,1", "block": "256,1,1", "registers": 57.0, "shared_memory": 16384.0}
_MM_FLOPS = 2.0 * 64 * 128 * 256
STEP_NS = 1_000_000

#: One step: (kind, name, category, start in the step (ns), duration (ns), other columns).
#: ``corr`` is the correlation id within the step; events with a ``stream`` ran on GPU 0,
#: memory events record GPU 0 memory (unless they say otherwise), everything else ran on host
#: thread 1.
STEP: tuple[tuple[str, str, str, int, int, dict[str, Any]], ...] = (
    ("step", "ProfilerStep#{step}", "user_annotation", 0, 1_000_000, {}),
    (
        "dataloader",
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "user_annotation",
        10_000,
        100_000,
        {},
    ),
    ("operator", "aten::copy_", "cpu_op", 120_000, 25_000, {}),
    # Host memory as torch before 1.10 records it: no address, no allocator totals.
    (
        "memory",
        "[memory]",
        "cpu_instant_event",
        121_000,
        0,
        {"bytes": 4096.0, "device_type": "cpu", "device_index": -1},
    ),
    (
        "memory",
        "[memory]",
        "cpu_instant_event",
        144_000,
        0,
        {"bytes": -4096.0, "device_type": "cpu", "device_index": -1},
    ),
    ("runtime", "cudaMemcpyAsync", "cuda_runtime", 125_000, 15_000, {"corr": 2}),
    (
        "memcpy",
        "Memcpy HtoD (Pageable -> Device)",
        "gpu_memcpy",
        130_000,
        12_000,
        {"corr": 2, "stream": 7, "bytes": float(1 << 20)},
    ),
    ("operator", "aten::linear", "cpu_op", 150_000, 250_000, {"input_shapes": "[[64, 128]]"}),
    ("operator", "aten::addmm", "cpu_op", 160_000, 230_000, {"flops": _MM_FLOPS}),
    (
        "memory",
        "[memory]",
        "cpu_instant_event",
        170_000,
        0,
        {
            "bytes": 65536.0,
            "allocated_bytes": 1048576.0,
            "reserved_bytes": 2097152.0,
            "address": 0x7F00_0001_0000,
        },
    ),
    ("runtime", "cudaLaunchKernel", "cuda_runtime", 200_000, 10_000, {"corr": 1}),
    (
        "kernel",
        "volta_sgemm_128x64_nn",
        "kernel",
        220_000,
        160_000,
        {"corr": 1, "stream": 7, "occupancy_pct": 25.0, **_SGEMM},
    ),
    ("user", "compute_loss", "user_annotation", 400_000, 40_000, {}),
    (
        "backward",
        "autograd::engine::evaluate_function: AddmmBackward0",
        "cpu_op",
        450_000,
        250_000,
        {},
    ),
    ("operator", "AddmmBackward0", "cpu_op", 455_000, 240_000, {}),
    ("operator", "aten::mm", "cpu_op", 460_000, 230_000, {"flops": _MM_FLOPS}),
    ("runtime", "cudaLaunchKernel", "cuda_runtime", 470_000, 10_000, {"corr": 3}),
    (
        "kernel",
        "volta_sgemm_128x64_nt",
        "kernel",
        485_000,
        195_000,
        {"corr": 3, "stream": 7, "occupancy_pct": 25.0, **_SGEMM},
    ),
    ("communication", "nccl:all_reduce", "cpu_op", 705_000, 15_000, {}),
    ("runtime", "cudaLaunchKernel", "cuda_runtime", 706_000, 6_000, {"corr": 4}),
    (
        "communication",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
        "kernel",
        715_000,
        85_000,
        {"corr": 4, "stream": 20, "grid": "2,1,1", "block": "544,1,1"},
    ),
    ("optimizer", "Optimizer.step#SGD.step", "user_annotation", 750_000, 100_000, {}),
    ("operator", "aten::add_", "cpu_op", 760_000, 80_000, {}),
    ("runtime", "cudaLaunchKernel", "cuda_runtime", 770_000, 5_000, {"corr": 5}),
    (
        "kernel",
        "vectorized_elementwise_kernel",
        "kernel",
        780_000,
        10_000,
        {"corr": 5, "stream": 7, "grid": "64,1,1", "block": "128,1,1"},
    ),
    ("operator", "aten::zero_", "cpu_op", 860_000, 10_000, {}),
    ("runtime", "cudaMemsetAsync", "cuda_runtime", 862_000, 4_000, {"corr": 6}),
    (
        "memset",
        "Memset (Device)",
        "gpu_memset",
        866_000,
        1_000,
        {"corr": 6, "stream": 7, "bytes": 4096.0},
    ),
    (
        "memory",
        "[memory]",
        "cpu_instant_event",
        880_000,
        0,
        {
            "bytes": -65536.0,
            "allocated_bytes": 983040.0,
            "reserved_bytes": 2097152.0,
            "address": 0x7F00_0001_0000,
        },
    ),
)


def rows(steps: int, template: Sequence[tuple[Any, ...]] = STEP) -> list[dict[str, Any]]:
    """``steps`` repeats of ``template``, one dict per event."""
    out = []
    for step in range(1, steps + 1):
        offset = step * STEP_NS
        for kind, name, category, start, dur, extra in template:
            row = {
                "kind": kind,
                "name": name.format(step=step),
                "category": category,
                "start_ns": offset + start,
                "dur_ns": dur,
                "framework": "torch",
            }
            other = dict(extra)
            if "corr" in other:
                row["correlation"] = 100 * step + other.pop("corr")
            if "stream" in other:
                row |= {"pid": -1, "tid": -1, "device_type": "gpu", "device_index": 0}
            elif kind == "memory":
                row |= {"pid": 100, "tid": 1, "device_type": "gpu", "device_index": 0}
            else:
                row |= {"pid": 100, "tid": 1, "device_type": "cpu"}
            if kind == "step":
                row["step"] = step
            out.append(row | other)
    return out


def build(
    steps: int = 3,
    template: Sequence[tuple[Any, ...]] = STEP,
    device_memory: int = 16 * 2**30,
) -> Run:
    """A run of ``steps`` 1 ms steps: data loading, a host-to-device copy, a forward op and its
    kernel, a user span, a backward op and its kernel, an all-reduce, an optimizer step, a
    memset, an allocation and a free; on a GPU with ``device_memory`` bytes."""
    events = rows(steps, template)
    columns: dict[str, Any] = {}
    for col in COLUMNS:
        if col.name == "parent" or all(col.name not in r for r in events):
            continue
        values = [r.get(col.name) for r in events]
        if col.dtype == "category":
            columns[col.name] = ["" if v is None else v for v in values]
        else:
            filled = [col.missing if v is None else v for v in values]
            columns[col.name] = np.asarray(filled, dtype=col.dtype)
    devices = [{"index": 0, "name": "Synthetic GPU", "total_memory_bytes": device_memory}]
    return make_run(finish_events(columns, len(events)), {"framework": "torch", "devices": devices})


@cache
def default_run() -> Run:
    """The run every view and rule of the reference pages is computed on (built once)."""
    return build()
