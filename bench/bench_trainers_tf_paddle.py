"""Benchmark: what perfkit's trainer callbacks add to a training step, against the framework's
own way of profiling the same steps from ``fit``.

Target: the step time a callback adds (its profiled program's time, ``fit`` and the program's
end to its exit, less the unprofiled one's, per step; ``_exit.py``) is at most 1.00x what
the framework's own integration adds, on the median of paired rounds:

* ``--framework paddle``: ``perfkit_paddle.hapi.PerfkitCallback`` against the same callback with
  Paddle's own handler, ``paddle.profiler.export_chrome_tracing(dir)``, as its
  ``on_trace_ready`` (the callback "written the same way": the same start, step marks and
  stop, only the handler differs).
* ``--framework keras``: ``perfkit_xla.keras.PerfkitCallback`` against Keras' ``TensorBoard``
  callback with ``profile_batch`` (``write_graph=False``, so that it does the profiling only).

What is measured: the 12-block MLP of ``_workload.py`` (``Linear(64, 64)`` + ``LayerNorm`` +
``ReLU`` per block, then ``Linear(64, 10)``; Keras: ``Dense`` + ``LayerNormalization``), Adam,
batch 64, ``fit`` for one epoch of ``--batches`` batches, profiling steps ``--window``
(Keras: after a 5-batch ``fit`` without callbacks that compiles the step, in every mode). Each
mode runs in a fresh subprocess (no helper, cache or allocator state carries over); a round
runs every mode once, in an order that rotates from round to round, so the modes of a round
share the machine's state. Per round, each profiled mode's added time is its loop less that
round's unprofiled loop; the ratio is perfkit's added time over the native one's. Printed: the
medians, the median ratio with its 95% bootstrap interval (``bench_advice.median_interval``,
the intervals ``perfkit compare`` uses), the time from ``fit``'s end to the program's exit,
and how long perfkit's helper went on converting after the exit (the next mode starts once it
is done and the runs are counted).

Run: ``python bench/bench_trainers_tf_paddle.py --framework paddle|keras [--batches N]
[--window A B] [--rounds K]`` in an environment with that framework (Keras: tensorflow, and tensorboard for its callback).
Exits 1 on FAIL, 2 when inconclusive (a profiled loop ran faster than the unprofiled one).
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
from _workload import BATCH_SIZE, BLOCKS, CLASSES, WIDTH, quiet_stderr

MODES = ("unprofiled", "native", "perfkit")
NATIVE = {
    "paddle": "the callback with export_chrome_tracing",
    "keras": "TensorBoard(profile_batch=...)",
}
TARGET_RATIO = 1.0
WARM_BATCHES = 5  # Keras: the compiling fit before the timed one


def _data(batches: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((batches * BATCH_SIZE, WIDTH)).astype("float32")
    y = rng.integers(0, CLASSES, (batches * BATCH_SIZE, 1)).astype("int64")
    return x, y


def paddle_fit(mode: str, batches: int, window: tuple[int, int], work: Path) -> dict[str, Any]:
    """One ``paddle.Model.fit`` in ``mode``: its loop time and the wait for queued work (s)."""
    import paddle

    from perfkit_paddle.hapi import PerfkitCallback

    paddle.seed(0)
    paddle.set_device("cpu")
    layers: list[Any] = []
    for _ in range(BLOCKS):
        layers += [paddle.nn.Linear(WIDTH, WIDTH), paddle.nn.LayerNorm(WIDTH), paddle.nn.ReLU()]
    network = paddle.nn.Sequential(*layers, paddle.nn.Linear(WIDTH, CLASSES))
    model = paddle.Model(network)
    model.prepare(
        paddle.optimizer.Adam(learning_rate=1e-3, parameters=network.parameters()),
        paddle.nn.CrossEntropyLoss(),
    )
    x, y = _data(batches)
    data = paddle.io.TensorDataset([paddle.to_tensor(x), paddle.to_tensor(y)])
    callbacks: list[Any] = []
    callback = None
    if mode != "unprofiled":
        callback = PerfkitCallback(work / "runs", profile_steps=window, record_shapes=True)
        if mode == "native":
            # The same callback, with Paddle's own handler in place of perfkit's.
            callback.handler = paddle.profiler.export_chrome_tracing(str(work / "native"))
            callback.background = False  # no conversion helper for Paddle's handler
        callbacks.append(callback)
    began = time.perf_counter()
    model.fit(data, batch_size=BATCH_SIZE, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    loop_s = time.perf_counter() - began
    loop_ended(helper_pid() if mode == "perfkit" else None)
    return {"loop_s": loop_s, "saved": _native_saved(mode, work), "batches": batches}


def keras_fit(mode: str, batches: int, window: tuple[int, int], work: Path) -> dict[str, Any]:
    """One Keras ``model.fit`` in ``mode``: its loop time and the wait for queued work (s)."""
    import keras

    from perfkit_xla.keras import PerfkitCallback

    keras.utils.set_random_seed(0)
    layers: list[Any] = [keras.Input((WIDTH,))]
    for _ in range(BLOCKS):
        layers += [
            keras.layers.Dense(WIDTH),
            keras.layers.LayerNormalization(),
            keras.layers.ReLU(),
        ]
    model = keras.Sequential([*layers, keras.layers.Dense(CLASSES)])
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x, y = _data(batches)
    # Keras traces and compiles its train step in the first batches of the first fit, which
    # takes seconds and varies by a second from run to run: more than either callback adds.
    # Every mode compiles it first in a short fit of its own, without callbacks, so the timed
    # fit (its callbacks' setup included) runs the compiled step as a user's later steps do.
    warm = WARM_BATCHES * BATCH_SIZE
    model.fit(x[:warm], y[:warm], batch_size=BATCH_SIZE, epochs=1, shuffle=False, verbose=0)
    callbacks: list[Any] = []
    callback = None
    if mode == "native":
        callbacks.append(
            keras.callbacks.TensorBoard(
                str(work / "native"), profile_batch=window, write_graph=False
            )
        )
    elif mode == "perfkit":
        callback = PerfkitCallback(work / "runs", profile_batch=window)
        callbacks.append(callback)
    began = time.perf_counter()
    model.fit(x, y, batch_size=BATCH_SIZE, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    loop_s = time.perf_counter() - began
    loop_ended(helper_pid() if mode == "perfkit" else None)
    return {"loop_s": loop_s, "saved": _native_saved(mode, work), "batches": batches}


def _native_saved(mode: str, work: Path) -> int:
    """The native mode's files (perfkit's runs are counted by the parent, after the exit)."""
    if mode == "native":
        return sum(1 for p in (work / "native").rglob("*") if p.is_file())
    return 0


def child(args: argparse.Namespace) -> int:
    fit = paddle_fit if args.framework == "paddle" else keras_fit
    with quiet_stderr():
        result = fit(args.mode, args.batches, tuple(args.window), Path(args.work))
    print("RESULT " + json.dumps(result), flush=True)
    return 0  # perfkit's queued conversions are left to its helper, as in a user's program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--framework", choices=sorted(NATIVE), required=True)
    parser.add_argument("--batches", type=int, default=60, help="batches of the one epoch")
    parser.add_argument(
        "--window", type=int, nargs=2, default=(11, 30), help="profiled steps (from 1)"
    )
    parser.add_argument("--rounds", type=int, default=7, help="rounds of all modes (default 7)")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        return child(args)

    from bench_advice import median_interval

    here = Path(__file__).resolve().parent
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    print(
        f"{args.framework}: {args.rounds} rounds of {len(MODES)} modes; each: fit of "
        f"{args.batches} batches, profiling steps {args.window[0]}-{args.window[1]}",
        flush=True,
    )
    for rnd in range(max(args.rounds, 1)):
        order = MODES[rnd % len(MODES) :] + MODES[: rnd % len(MODES)]
        for mode in order:
            command = [
                sys.executable,
                str(here / "bench_trainers_tf_paddle.py"),
                "--framework",
                args.framework,
                "--mode",
                mode,
                "--batches",
                str(args.batches),
                "--window",
                *map(str, args.window),
            ]
            result = run_to_exit(command, here, "trainers-")
            if result is None:
                return 1
            # the program's end, from fit's return to its exit (every mode pays one)
            result["finish_s"] = result["exit_s"]
            if mode == "perfkit":
                saved, unsaved = result["runs"]
                result["saved"] = -unsaved if unsaved else saved
            results[mode].append(result)
            print(
                f"  round {rnd + 1}: {mode:<10} loop {result['loop_s']:7.3f} s"
                f"  exit {result['finish_s']:6.3f} s  saved {result['saved']}"
                f"  helper after exit {result['helper_after_s']:.3f} s",
                flush=True,
            )

    def total(r: dict[str, Any]) -> float:
        return float(r["loop_s"] + r["finish_s"])

    steps = args.batches
    added = {
        m: [
            (total(r) - total(base)) / steps * 1e3
            for r, base in zip(results[m], results["unprofiled"], strict=True)
        ]
        for m in ("native", "perfkit")
    }
    # A round whose native fit ran no slower than its unprofiled one has no ratio (noise).
    ratios = [p / n for p, n in zip(added["perfkit"], added["native"], strict=True) if n > 0]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print()
    print(
        f"{steps} steps a fit; added = the fit's time and the program's end to its exit, less "
        f"the same round's unprofiled fit's, per step; load average now {load:.2f}"
    )
    base_ms = statistics.median(total(r) for r in results["unprofiled"]) / steps * 1e3
    print(f"  unprofiled step: {base_ms:.2f} ms (median)")
    for mode, label in (("native", NATIVE[args.framework]), ("perfkit", "perfkit's callback")):
        med, low, high = median_interval(added[mode])
        wait = statistics.median(r["finish_s"] for r in results[mode])
        after = statistics.median(r["helper_after_s"] for r in results[mode])
        in_fit = statistics.median(
            (r["loop_s"] - base["loop_s"]) / steps * 1e3
            for r, base in zip(results[mode], results["unprofiled"], strict=True)
        )
        print(
            f"  {label:<42} adds {med:7.3f} ms/step (95% {low:.3f} to {high:.3f});"
            f" inside fit {in_fit:.3f} ms/step, then {wait:.3f} s to the program's exit"
            f" (the helper went on {after:.3f} s after it)"
        )
    failures = [r["saved"] for r in results["perfkit"] if r["saved"] != 1]
    if min(statistics.median(added[m]) for m in added) <= 0 or len(ratios) * 2 <= len(
        added["native"]
    ):
        print(
            "INCONCLUSIVE: a profiled fit ran faster than the unprofiled one (the machine is "
            "too busy); rerun with more --rounds on a quieter machine"
        )
        return 2
    ratio, low, high = median_interval(ratios)
    passed = ratio <= TARGET_RATIO and not failures
    print(f"perfkit windows not saved as one run: {failures or 'none'}")
    print(
        f"target: perfkit's added time / {NATIVE[args.framework]}'s <= {TARGET_RATIO:.2f}: "
        f"{'PASS' if passed else 'FAIL'} (ratio {ratio:.2f}, 95% interval {low:.2f} to "
        f"{high:.2f}, over {len(ratios)} of {len(added['native'])} paired rounds; ratio of the "
        f"median added times {statistics.median(added['perfkit']) / statistics.median(added['native']):.2f})"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
