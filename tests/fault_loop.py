"""A small real CPU training loop under a perfkit handler, for the fault-injection tests.

Run as ``python -m tests.fault_loop --framework torch|paddle --dir DIR [options]``: it trains a
4-block MLP for ``--cycles`` profiled cycles of ``--steps`` steps, with perfkit's handler as
``on_trace_ready``, waits for the handler, and prints ONE JSON line on stdout with what the
handler reports (``runs``, ``failures``, the perfkit warnings) and what is really on disk: whether
each run loads, its recorded pid, and the size and completeness of each kept native trace.
Everything is checked inside this process, because a test may run it in a mount namespace whose
filesystem (a small or read-only tmpfs) vanishes with it.

Faults it can inject itself: ``--chain-raises`` (a chained handler that raises at every cycle)
and ``--kill-helper-at N`` (SIGKILL the conversion helper from inside the Nth callback).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

BLOCKS = 4
WIDTH = 64
BATCH = 32

#: Set by a callback to press Ctrl-C in the training loop right after the current step.
INTERRUPT = {"now": False}


def after_step() -> None:
    """Ctrl-C, as a terminal sends it (SIGINT to the whole process group), when asked."""
    if INTERRUPT["now"]:
        INTERRUPT["now"] = False
        os.killpg(os.getpgrp(), signal.SIGINT)
        time.sleep(1)  # the KeyboardInterrupt arrives here


def torch_loop(args: argparse.Namespace, handler: Any) -> None:
    """Train with ``torch.profiler`` under ``schedule(wait=0, warmup=1, active=steps, repeat=cycles)``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(BLOCKS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.LayerNorm(WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = (args.steps + 1) * args.cycles
    with (
        warnings.catch_warnings(),
        profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=args.steps, repeat=args.cycles),
            on_trace_ready=handler,
        ) as prof,
    ):
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        for _ in range(total):
            x, y = torch.randn(BATCH, WIDTH), torch.randint(0, 10, (BATCH,))
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            prof.step()
            after_step()


def paddle_loop(args: argparse.Namespace, handler: Any) -> None:
    """Train with ``paddle.profiler`` under ``make_scheduler(closed=0, ready=1, record=steps,
    repeat=cycles)``."""
    import contextlib
    import io

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import paddle
        import paddle.profiler as profiler

    paddle.seed(0)
    paddle.set_device("cpu")
    layers: list[Any] = []
    for _ in range(BLOCKS):
        layers += [paddle.nn.Linear(WIDTH, WIDTH), paddle.nn.LayerNorm(WIDTH), paddle.nn.ReLU()]
    model = paddle.nn.Sequential(*layers, paddle.nn.Linear(WIDTH, 10))
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU],
        scheduler=profiler.make_scheduler(closed=0, ready=1, record=args.steps, repeat=args.cycles),
        on_trace_ready=handler,
        record_shapes=True,
    )
    prof.start()
    for _ in range((args.steps + 1) * args.cycles):
        x = paddle.randn([BATCH, WIDTH])
        y = paddle.randint(0, 10, [BATCH, 1])
        loss = paddle.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        prof.step()
        after_step()
    with contextlib.redirect_stdout(io.StringIO()):  # Paddle's "Perf Summary" table
        prof.stop()


def saved_or_exported(target: Path) -> list[Path]:
    """Run folders holding a saved run or a native export (the export renamed into place)."""
    return [
        p
        for p in target.glob("*")
        if (p / "meta.json").is_file() or any(p.glob("trace.*.json")) or any(p.glob("trace.*.pb"))
    ]


def describe_run(path: Path) -> dict[str, Any]:
    """Whether the saved run at ``path`` loads, and the pid and worker it records."""
    import perfkit_core

    try:
        run = perfkit_core.load(path)
    except Exception as exc:
        return {"path": str(path), "loads": False, "error": f"{type(exc).__name__}: {exc}"}
    extra = run.meta.get("extra") or {}
    return {
        "path": str(path),
        "loads": True,
        "rows": len(run.events),
        "pid": extra.get("pid"),
        "worker": extra.get("worker_name"),
        "has_meta": (path / "meta.json").is_file(),
    }


def describe_kept(path: Path) -> dict[str, Any]:
    """Size and completeness of a kept native trace, and whether perfkit loads it."""
    import perfkit_core
    from perfkit_core.capture.handlers import export_is_complete

    info: dict[str, Any] = {"path": str(path), "is_file": path.is_file()}
    if path.is_file():
        info["bytes"] = path.stat().st_size
        if path.suffix == ".pb":
            from perfkit_paddle.pb import export_is_whole

            info["complete"] = export_is_whole(path)
        else:
            info["complete"] = export_is_complete(path)
        try:
            info["rows"] = len(perfkit_core.load(path).events)
        except Exception as exc:
            info["load_error"] = f"{type(exc).__name__}: {exc}"
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", choices=("torch", "paddle"), required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--worker", default=None)
    parser.add_argument("--sync", action="store_true", help="background=False")
    parser.add_argument("--chain-raises", action="store_true")
    parser.add_argument("--kill-helper-at", type=int, default=0)
    parser.add_argument(
        "--sigkill-self-at",
        type=int,
        default=0,
        help="SIGKILL this process in the Nth callback, once its native export is on disk",
    )
    parser.add_argument(
        "--interrupt-at",
        type=int,
        default=0,
        help="SIGINT (Ctrl-C) this process in the Nth callback",
    )
    args = parser.parse_args(argv)

    if args.framework == "torch":
        from perfkit_torch import on_trace_ready

        loop = torch_loop
    else:
        from perfkit_paddle import on_trace_ready  # type: ignore[assignment]

        loop = paddle_loop
    cycle = 0
    killed: list[int] = []

    def chained(prof: Any) -> None:
        nonlocal cycle
        cycle += 1
        if args.kill_helper_at and cycle == args.kill_helper_at:
            from perfkit_core.capture import shared_converter

            converter = shared_converter()
            # Kill it while it converts a run when that happens within a minute (Paddle's first
            # export may still be on its way to the helper).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                job.started for job in list(converter._pending.values())
            ):
                time.sleep(0.005)
            if converter.helper_pid is not None:
                killed.append(converter.helper_pid)
                os.kill(converter.helper_pid, signal.SIGKILL)
        if args.sigkill_self_at and cycle == args.sigkill_self_at:
            # The run of this cycle is being saved by the helper: die mid-way.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(saved_or_exported(args.dir)) < cycle:
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGKILL)
        if args.interrupt_at and cycle == args.interrupt_at:
            INTERRUPT["now"] = True
        if args.chain_raises:
            raise RuntimeError(f"chained handler broke at cycle {cycle}")

    handler = on_trace_ready(
        args.dir, worker_name=args.worker, chain=[chained], background=not args.sync
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop(args, handler)
        handler.wait()
    runs = handler.runs
    failures = handler.failures
    report = {
        "pid": os.getpid(),
        "cycles": cycle,
        "killed": killed,
        "runs": [describe_run(p) for p in runs],
        "failures": [
            {"path": str(p), "reason": r, "kept": describe_kept(p) if p.is_file() else None}
            for p, r in failures
        ],
        "warnings": [str(w.message) for w in caught if "perfkit" in str(w.message)],
        "run_dirs_on_disk": sorted(
            str(p) for p in args.dir.glob("*") if p.is_dir() and (p / "meta.json").is_file()
        )
        if args.dir.is_dir()
        else [],
        "parquet_without_meta": sorted(
            str(p.parent)
            for p in args.dir.glob("*/events.parquet")
            if not (p.parent / "meta.json").is_file()
        )
        if args.dir.is_dir()
        else [],
    }
    print("FAULT_LOOP " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
