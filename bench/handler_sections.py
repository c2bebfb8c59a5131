"""Diagnostic: what runs between ``on_trace_ready`` being called and the training step
resuming, timed in perf_counter sections, beside torch's own ``tensorboard_trace_handler``.

Trains the 12-block MLP of ``_workload.py`` (batch 64, Adam, ``record_shapes=True``) for four
profiler cycles of 50 recorded steps and times, per cycle, perfkit's whole callback and its
parts (the disk and queue check, the run folder, torch's export, the export's completeness
check, the metadata, the model description, queueing the conversion, the schedule hook, the
hold message to the helper), then the wait for the queued conversions at the end; with
``tb``, the whole of ``tensorboard_trace_handler``'s call instead.

Run: ``python bench/handler_sections.py [THREADS] [perfkit|tb]`` (default 2 perfkit). No
target: it says where a callback's time goes.
"""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from _workload import BATCH_SIZE, BLOCKS, CLASSES, WIDTH, build_model

STEPS, CYCLES = 50, 4


def main() -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    which = sys.argv[2] if len(sys.argv) > 2 else "perfkit"
    torch.set_num_threads(threads)
    times: dict[str, list[float]] = {}

    def timed(owner: Any, name: str, label: str | None = None) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def section(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                times.setdefault(label or name, []).append((time.perf_counter() - began) * 1e3)

        setattr(owner, name, section)

    work = Path(tempfile.mkdtemp(prefix="sections-"))
    if which == "perfkit":
        import perfkit_torch
        from perfkit_core.capture import background
        from perfkit_torch import handler as torch_handler
        from perfkit_torch import modules

        for name in ("make_room", "claim_run_dir", "export_is_complete", "run_metadata"):
            timed(torch_handler, name)
        timed(modules, "describe_modules")
        timed(modules.ModuleSpans, "follow")
        timed(background.BackgroundConverter, "exporting")
        for name in ("_export_native", "_convert_export"):
            timed(torch_handler.TraceHandler, name)
        timed(torch_handler.TraceHandler, "__call__", "whole call")
        handler: Any = perfkit_torch.on_trace_ready(work / "runs")
    else:
        native = tensorboard_trace_handler(str(work / "tb"))

        def handler(prof: Any) -> None:
            began = time.perf_counter()
            native(prof)
            times.setdefault("whole call", []).append((time.perf_counter() - began) * 1e3)

    model = build_model()
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(BATCH_SIZE, WIDTH), torch.randint(0, CLASSES, (BATCH_SIZE,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=1, warmup=1, active=STEPS, repeat=CYCLES),
            on_trace_ready=handler,
        ) as prof:
            for _ in range((STEPS + 2) * CYCLES):
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
                prof.step()
    print(f"{which}, {threads} thread(s), {BLOCKS}-block MLP, {CYCLES} cycles of {STEPS} steps")
    if which == "perfkit":
        began = time.perf_counter()
        saved = len(handler.runs)
        print(
            f"  end wait for queued conversions: {time.perf_counter() - began:.3f} s ({saved} runs)"
        )
    for name, values in sorted(times.items()):
        cells = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {name:<22} median {statistics.median(values):9.2f} ms  (each: {cells})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
