"""Benchmark: what each way of saving torch profiles adds to a training loop's step time.

Target: perfkit's default handler (``perfkit_torch.on_trace_ready(dir)``: export in the
callback, conversion in the low-priority helper process on a core training leaves idle) adds no more
to the training loop than torch's own ``torch.profiler.tensorboard_trace_handler(dir)``
(perfkit's overhead / tensorboard's overhead <= 1.00, the median of paired rounds, each
program timed to its exit), with no failures.

What is measured: the torch CPU MLP of ``_workload.py`` (12 blocks, batch 64, Adam, a
``DataLoader``), trained for ``--cycles`` profiler cycles of ``--steps`` recorded steps
(``schedule(wait=1, warmup=1, active=steps, repeat=cycles)``, ``record_shapes=True``), then
``--tail`` more steps with the profiler stopped (the helper may still be converting then, and
its cost must show). The wall time of every step is taken from ``prof.step()`` to the next, so
a step's time includes any ``on_trace_ready`` call that ended it. The figure is the loop's
total time (first step to last) plus the program's end, from the loop's end to the program's
exit, as a user's program pays them (``_exit.py``: perfkit leaves conversions still queued at
exit to its helper, which finishes them after the program; every mode pays an exit); its
overhead is that total less the total of the same loop without a profiler in the same round,
per step. The helper's time after the exit is printed beside it, and the next mode starts only
once the helper is done and its runs are counted.

The verdict is paired: a round runs every mode once, one after the other (the order rotates
from round to round, so perfkit's default and the native handler take turns at running
first), and each round gives one ratio, perfkit default's overhead over the native handler's,
both against that round's unprofiled loop. A slow spell of the machine that lasts a round
lands on both sides of its ratio. The figure is the median of the rounds' ratios with its
95% bootstrap interval (``paired.median_interval``); PASS when the median is at most
``TARGET_RATIO`` (the interval says how sure: below the target at its upper end, the rounds
decide it).

Modes, each in a fresh subprocess (so no helper, cache or allocator state carries over), in
rounds whose order rotates, ``--repeat`` rounds:

* ``unprofiled``: the same loop, no profiler.
* ``profiler, no handler``: profiled, ``on_trace_ready`` does nothing (the cost of recording).
* ``tensorboard_trace_handler``: torch's own, writing ``*.pt.trace.json`` files.
* ``perfkit default``: ``on_trace_ready(dir)`` (background conversion).
* ``perfkit background=False``: conversion inside the callback.

Also printed per mode: the median step time of the recorded steps, the median step of the steps
that ended a cycle (the callback's own wait), the median of the tail steps, "exit s": from
the loop's end to the program's exit, part of the figure, and "helper after s": how long
perfkit's helper went on converting after the program exited (it converts on a core training
leaves idle, so with every core busy it converts the traces after the program).

``--framework paddle`` runs the same in Paddle: the same MLP, Adam, batch and ``DataLoader``,
``Profiler(scheduler=make_scheduler(closed=1, ready=1, record=steps, repeat=cycles),
record_shapes=True)``, against Paddle's own ``paddle.profiler.export_chrome_tracing(dir)``.

Run: ``python bench/bench_training_overhead.py [--framework torch|paddle] [--steps N]
[--cycles C] [--tail T] [--repeat K] [--threads N] [--modes m1,m2,...]`` (``--modes``: a subset
of the modes, ``unprofiled``, ``native`` and ``perfkit`` always among them). Exits 1 on FAIL, 2 when inconclusive (a profiled loop ran faster than the
unprofiled one: other work on the machine outweighed the profiler).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _exit import helper_pid, loop_ended, run_to_exit
from _workload import BATCH_SIZE, CLASSES, WIDTH, build_model, quiet_stderr

MODES = ("unprofiled", "no-handler", "native", "perfkit", "perfkit-sync")
LABELS = {
    "unprofiled": "unprofiled",
    "no-handler": "profiler, no handler",
    "perfkit": "perfkit default (background)",
    "perfkit-sync": "perfkit background=False",
}
#: Each framework's own handler, the "native" mode.
NATIVE = {"torch": "tensorboard_trace_handler", "paddle": "export_chrome_tracing"}
TARGET_RATIO = 1.0


def run_mode(
    mode: str, steps: int, cycles: int, tail: int, work: Path, threads: int = 0
) -> dict[str, Any]:
    """Train once in this process under ``mode``; return step times (s) and what was saved.
    ``threads`` > 0 sets torch's intra-op threads (0: torch's default, one per core)."""
    import warnings

    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    per_cycle = steps + 2
    total = per_cycle * cycles + tail
    inputs = torch.randn(total * BATCH_SIZE, WIDTH)
    labels = torch.randint(0, CLASSES, (total * BATCH_SIZE,))
    loader = DataLoader(TensorDataset(inputs, labels), batch_size=BATCH_SIZE, shuffle=False)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    handler: Any = None
    if mode == "native":
        handler = tensorboard_trace_handler(str(work / "tb"))
    elif mode in ("perfkit", "perfkit-sync"):
        import perfkit_torch

        handler = perfkit_torch.on_trace_ready(work / "runs", background=mode == "perfkit")
        # Start the helper and import what the handler needs before the clock starts.
        from perfkit_core.capture import shared_converter

        if mode == "perfkit":
            shared_converter()
        import perfkit_core  # noqa: F401
    elif mode == "no-handler":

        def handler(prof: Any) -> None:
            return None

    times: list[float] = []
    ends: list[int] = []

    def train(prof: Any | None) -> None:
        last = time.perf_counter()
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            if prof is not None:
                prof.step()
            now = time.perf_counter()
            times.append(now - last)
            last = now
            if prof is not None and i < per_cycle * cycles and (i + 1) % per_cycle == 0:
                ends.append(i)

    with warnings.catch_warnings(), quiet_stderr():
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        if mode == "unprofiled":
            train(None)
        else:
            with profile(
                activities=[ProfilerActivity.CPU],
                record_shapes=True,
                schedule=schedule(wait=1, warmup=1, active=steps, repeat=cycles),
                on_trace_ready=handler,
            ) as prof:
                train(prof)
    loop_ended(helper_pid() if mode == "perfkit" else None)
    saved = len(list((work / "tb").glob("*.pt.trace.json"))) if mode == "native" else 0
    # perfkit's runs are counted by the parent once the program and its helper are done
    return summarise(mode, times, ends, steps, cycles, tail, saved)


def run_paddle_mode(
    mode: str, steps: int, cycles: int, tail: int, work: Path, threads: int = 0
) -> dict[str, Any]:
    """The same loop in Paddle: the 12-block MLP, Adam, batch 64 from a ``paddle.io.DataLoader``,
    ``Profiler(scheduler=make_scheduler(closed=1, ready=1, record=steps, repeat=cycles),
    record_shapes=True)``; the native mode is ``paddle.profiler.export_chrome_tracing(dir)``.
    ``threads`` > 0 sets ``OMP_NUM_THREADS`` before Paddle is imported."""
    import contextlib
    import io
    import warnings

    if threads > 0:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import numpy as np
        import paddle
        import paddle.profiler as profiler

    paddle.seed(0)
    paddle.set_device("cpu")
    layers: list[Any] = []
    for _ in range(12):
        layers += [paddle.nn.Linear(WIDTH, WIDTH), paddle.nn.LayerNorm(WIDTH), paddle.nn.ReLU()]
    model = paddle.nn.Sequential(*layers, paddle.nn.Linear(WIDTH, CLASSES))
    optimizer = paddle.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    per_cycle = steps + 2
    total = per_cycle * cycles + tail
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((total * BATCH_SIZE, WIDTH)).astype("float32")
    labels = rng.integers(0, CLASSES, (total * BATCH_SIZE, 1)).astype("int64")
    dataset = paddle.io.TensorDataset([paddle.to_tensor(inputs), paddle.to_tensor(labels)])
    loader = paddle.io.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False, num_workers=0)
    handler: Any = None
    if mode == "native":
        handler = profiler.export_chrome_tracing(str(work / "native"))
    elif mode in ("perfkit", "perfkit-sync"):
        import perfkit_paddle

        handler = perfkit_paddle.on_trace_ready(work / "runs", background=mode == "perfkit")
        if mode == "perfkit":
            from perfkit_core.capture import shared_converter

            shared_converter()
        import perfkit_core  # noqa: F401
    elif mode == "no-handler":

        def handler(prof: Any) -> None:
            return None

    called = [0]

    def ready(prof: Any) -> None:
        called[0] += 1
        if handler is not None:
            handler(prof)

    times: list[float] = []
    ends: list[int] = []
    prof = None
    if mode != "unprofiled":
        prof = profiler.Profiler(
            targets=[profiler.ProfilerTarget.CPU],
            scheduler=profiler.make_scheduler(closed=1, ready=1, record=steps, repeat=cycles),
            on_trace_ready=ready,
            record_shapes=True,
        )
        prof.start()
    last = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        loss = paddle.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        before = called[0]
        if prof is not None:
            prof.step()
        now = time.perf_counter()
        times.append(now - last)
        last = now
        if called[0] != before:
            ends.append(i)
    if prof is not None:
        with contextlib.redirect_stdout(io.StringIO()):  # Paddle's "Perf Summary" table
            prof.stop()
    loop_ended(helper_pid() if mode == "perfkit" else None)
    saved = len(list((work / "native").glob("*.json"))) if mode == "native" else 0
    return summarise(mode, times, ends, steps, cycles, tail, saved)


def summarise(
    mode: str,
    times: list[float],
    ends: list[int],
    steps: int,
    cycles: int,
    tail: int,
    saved: int,
) -> dict[str, Any]:
    """The figures of one loop: its time, the medians of its recorded, callback and tail steps
    (seconds), and what was saved (the native handler's files; perfkit's runs are counted by
    the parent)."""
    per_cycle = steps + 2
    recorded = [
        t
        for c in range(cycles)
        for t in times[c * per_cycle + 2 : (c + 1) * per_cycle - 1]  # not the callback's step
    ]
    callback = [times[i] for i in ends]
    tail_steps = times[per_cycle * cycles :]
    return {
        "loop_s": sum(times),
        # the loop in parts, summed: where a mode's overhead goes
        "parts_s": {
            "recorded": sum(recorded),
            "callback": sum(callback),
            "tail": sum(tail_steps),
            "other": sum(times) - sum(recorded) - sum(callback) - sum(tail_steps),
        },
        "steps": len(times),
        "recorded_median_s": statistics.median(recorded) if mode != "unprofiled" else None,
        "callback_median_s": statistics.median([times[i] for i in ends]) if ends else None,
        "tail_median_s": statistics.median(times[per_cycle * cycles :]) if tail else None,
        "saved": saved,
    }


def child(args: argparse.Namespace) -> int:
    run = run_paddle_mode if args.framework == "paddle" else run_mode
    result = run(args.mode, args.steps, args.cycles, args.tail, Path(args.work), args.threads)
    print("RESULT " + json.dumps(result), flush=True)
    return 0  # perfkit's queued conversions are left to its helper, as in a user's program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=50, help="recorded steps per cycle")
    parser.add_argument("--cycles", type=int, default=4, help="profiler cycles (default 4)")
    parser.add_argument("--tail", type=int, default=100, help="unprofiled steps after them")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of all modes (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads (default: torch's, one a core)",
    )
    parser.add_argument(
        "--framework",
        choices=sorted(NATIVE),
        default="torch",
        help="whose training loop and handlers (default torch)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help="comma-separated subset of the modes (unprofiled, native and perfkit always run)",
    )
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        return child(args)

    wanted = set(args.modes.split(",")) | {"unprofiled", "native", "perfkit"}
    unknown = wanted - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    modes = tuple(m for m in MODES if m in wanted)
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    LABELS["native"] = NATIVE[args.framework]
    here = Path(__file__).resolve().parent
    print(
        f"{args.framework}: {args.repeat} round(s) of {len(modes)} modes; each: {args.cycles} cycles of "
        f"{args.steps} recorded steps (+2 unrecorded), then {args.tail} steps unprofiled",
        flush=True,
    )
    for rnd in range(max(args.repeat, 1)):
        order = modes[rnd % len(modes) :] + modes[: rnd % len(modes)]
        for mode in order:
            command = [
                sys.executable,
                str(here / "bench_training_overhead.py"),
                "--mode",
                mode,
                "--steps",
                str(args.steps),
                "--cycles",
                str(args.cycles),
                "--tail",
                str(args.tail),
                "--threads",
                str(args.threads),
                "--framework",
                args.framework,
            ]
            result = run_to_exit(command, here, "overhead-")
            if result is None:
                return 1
            # the program's end: from its loop's end to its exit (every mode pays one)
            result["finish_s"] = result["exit_s"]
            result["loop_s"] += result["exit_s"]
            if mode.startswith("perfkit"):
                result["saved"], result["failures"] = result["runs"]
            else:
                result["failures"] = 0
            results[mode].append(result)
            print(
                f"  round {rnd + 1}: {LABELS[mode]:<30} loop {result['loop_s']:7.3f} s"
                f"  saved {result['saved']}  exit {result['finish_s']:.3f} s"
                f"  helper after exit {result['helper_after_s']:.3f} s",
                flush=True,
            )

    def med(mode: str, key: str) -> float | None:
        values = [r[key] for r in results[mode] if r[key] is not None]
        return statistics.median(values) if values else None

    steps = results["unprofiled"][0]["steps"]
    base = med("unprofiled", "loop_s") or 0.0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print()
    print(
        f"{steps} steps a loop; medians over {args.repeat} round(s); overhead = loop time less "
        f"the unprofiled loop's, per step; load average now {load:.2f}"
    )
    print(
        f"  {'mode':<30} {'loop s':>8} {'overhead ms/step':>17} {'recorded ms':>12}"
        f" {'callback ms':>12} {'tail ms':>8} {'saved':>6} {'exit s':>7} {'helper after s':>15}"
    )
    overhead: dict[str, float] = {}
    for mode in modes:
        loop = med(mode, "loop_s") or 0.0
        overhead[mode] = (loop - base) / steps * 1e3
        cells = [
            f"{v * 1e3:12.2f}" if v is not None else f"{'-':>12}"
            for v in (med(mode, "recorded_median_s"), med(mode, "callback_median_s"))
        ]
        tail = med(mode, "tail_median_s")
        print(
            f"  {LABELS[mode]:<30} {loop:8.3f} {overhead[mode]:17.3f} {cells[0]} {cells[1]}"
            f" {(tail or 0) * 1e3:8.2f} {results[mode][0]['saved']:>6}"
            f" {med(mode, 'finish_s') or 0.0:7.2f} {med(mode, 'helper_after_s') or 0.0:15.2f}"
        )
    # Where perfkit's overhead beyond the native handler's goes: each part's paired difference
    # (perfkit less native, the same round), the median over rounds, in ms.
    parts = [*results["native"][0]["parts_s"], "exit"]

    def part(r: dict[str, Any], name: str) -> float:
        return float(r["finish_s"] if name == "exit" else r["parts_s"][name])

    print(
        "  perfkit default less the native handler, per part of the program (median of the "
        "rounds' differences, ms in all): "
        + ", ".join(
            f"{name} {statistics.median(part(p, name) - part(n, name) for p, n in zip(results['perfkit'], results['native'], strict=True)) * 1e3:+.0f}"
            for name in parts
        )
    )
    failures = sum(r["failures"] for m in modes if m.startswith("perfkit") for r in results[m])
    saved_ok = all(r["saved"] == args.cycles for r in results["perfkit"])
    print(f"perfkit failures: {failures}; every perfkit cycle saved: {saved_ok}")
    # Paired: each round's ratio, both overheads against that round's unprofiled loop.
    ratios = []
    for rnd in range(len(results["unprofiled"])):
        plain = results["unprofiled"][rnd]["loop_s"]
        native = results["native"][rnd]["loop_s"] - plain
        ours = results["perfkit"][rnd]["loop_s"] - plain
        if native > 0:
            ratios.append(ours / native)
    print(
        "per-round ratios, perfkit default's overhead / the native handler's: "
        + ", ".join(f"{r:.3f}" for r in ratios)
    )
    if (
        len(ratios) < len(results["unprofiled"])
        or min(overhead[m] for m in modes if m != "unprofiled") <= 0
    ):
        # A profiled loop faster than the unprofiled one: other work on the machine moved the
        # totals more than the profiler did, and no ratio of overheads means anything.
        print(
            "INCONCLUSIVE: a profiled loop ran faster than the unprofiled one (the machine is "
            "too busy); rerun with more --repeat on a quieter machine"
        )
        return 2
    from paired import median_interval

    ratio, low, high = median_interval(ratios)
    passed = ratio <= TARGET_RATIO and failures == 0 and saved_ok
    decided = high <= TARGET_RATIO or low > TARGET_RATIO
    sure = "the interval decides it" if decided else "the interval straddles the target"
    print(
        f"target: perfkit default's overhead / {NATIVE[args.framework]}'s <= {TARGET_RATIO:.2f}, "
        f"paired over {len(ratios)} rounds: {'PASS' if passed else 'FAIL'} (median ratio "
        f"{ratio:.3f}, 95% interval {low:.3f} to {high:.3f}: {sure}; medians "
        f"{overhead['perfkit']:.3f} against {overhead['native']:.3f} ms a step)"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
