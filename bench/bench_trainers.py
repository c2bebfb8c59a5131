"""Benchmark: what perfkit's trainer integrations add to a training step, against each trainer's
own way of profiling.

Target: ``perfkit_torch.lightning.PerfkitProfiler`` adds no more to ``lightning.Trainer.fit``
than Lightning's own ``PyTorchProfiler``, and ``perfkit_torch.transformers.PerfkitCallback`` no
more to ``transformers.Trainer.train`` than torch's profiler with torch's
``tensorboard_trace_handler`` in a ``TrainerCallback`` written the same way (started one step
before the window to warm up, ``prof.step()`` at each optimizer step's end, stopped at the
window's end): perfkit's added time / theirs <= 1.00, the median of paired rounds.

What is measured: the 12-block MLP of ``_workload.py`` (batch 64, Adam), trained for
``--steps`` optimizer steps, with a window of ``--window`` steps from step 6 profiled
(``record_shapes=True`` for all). The figure of a mode is the wall time of the whole
``fit``/``train`` call and of the program's end after it, to its exit (``_exit.py``), as a
user's program pays them: Lightning's profilers print their summary at the end of ``fit``
(perfkit's headline waits for the conversion of the run); after the HF Trainer's ``train`` the
program exits, and perfkit's helper finishes the conversions still queued after it (its time
after the exit is printed beside, and the next mode starts once it is done and the runs are
counted). What a mode adds is its time less the unprofiled run's of the same round, per
profiled step.

Each mode runs in a fresh subprocess (no helper, cache or allocator state carries over); a
round runs the three modes of a trainer (unprofiled, perfkit, the trainer's own) in an order
that rotates from round to round, and ``--repeat`` rounds are run, trainers interleaved. Printed
per trainer: the median added ms per profiled step of each profiler with its 95% interval, and
the ratio perfkit / theirs (the ratio of the medians of the paired added times) with its 95%
bootstrap interval over rounds (``perfkit compare``'s confidence, resamples and seed).

Run: ``python bench/bench_trainers.py [--steps N] [--window W] [--repeat K]
[--trainer lightning|transformers|both]``. Exits 1 on FAIL, 2 when inconclusive (the trainer's
own profiler added nothing measurable: other work on the machine outweighed it).
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

MODES = ("unprofiled", "perfkit", "native")
TRAINERS = ("lightning", "transformers")
NATIVE = {
    "lightning": "Lightning's PyTorchProfiler",
    "transformers": "torch.profiler + tensorboard_trace_handler callback",
}
START_STEP = 6
TARGET_RATIO = 1.0


def _data(steps: int) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    n = steps * BATCH_SIZE
    return torch.randn(n, WIDTH), torch.randint(0, CLASSES, (n,))


def run_lightning(mode: str, steps: int, window: int, work: Path) -> dict[str, Any]:
    """Fit the MLP with ``lightning.Trainer`` under ``mode``; its time (s) and what was saved."""
    import lightning
    import torch
    from lightning.pytorch.loggers import CSVLogger

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = build_model()

        def forward(self, x: Any) -> Any:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    stop = START_STEP + window - 1
    profiler: Any = None
    if mode == "perfkit":
        from perfkit_torch.lightning import PerfkitProfiler

        profiler = PerfkitProfiler(work / "runs", start_step=START_STEP, stop_step=stop)
    elif mode == "native":
        from lightning.pytorch.profilers import PyTorchProfiler

        profiler = PyTorchProfiler(
            dirpath=work / "native",
            filename="profile",
            schedule=torch.profiler.schedule(wait=START_STEP - 2, warmup=1, active=window),
            record_shapes=True,
        )
    x, y = _data(steps)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=BATCH_SIZE
    )
    trainer = lightning.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=1,
        logger=CSVLogger(work / "logs"),
        profiler=profiler,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    module = Module()
    began = time.perf_counter()
    trainer.fit(module, loader)  # perfkit's headline at its end waits for the run
    elapsed = time.perf_counter() - began
    loop_ended(helper_pid() if mode == "perfkit" else None)
    saved = _native_saved(work / "native") if mode == "native" else 0
    return {"fit_s": elapsed, "saved": saved, "steps": trainer.global_step}


def _native_saved(folder: Path) -> int:
    return len(list(folder.glob("*.pt.trace.json*"))) if folder.is_dir() else 0


def run_transformers(mode: str, steps: int, window: int, work: Path) -> dict[str, Any]:
    """Train the MLP with ``transformers.Trainer`` under ``mode``; its time (s) and what was
    saved."""
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = build_model()

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class NativeCallback(TrainerCallback):  # type: ignore[misc]
        """torch's profiler with torch's own handler, started and stepped as perfkit's is."""

        def __init__(self) -> None:
            self.prof: Any = None

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.prof is None and state.global_step == START_STEP - 2:
                from torch.profiler import profile, schedule, tensorboard_trace_handler

                self.prof = profile(
                    schedule=schedule(wait=0, warmup=1, active=window, repeat=1),
                    on_trace_ready=tensorboard_trace_handler(str(work / "native")),
                    record_shapes=True,
                )
                self.prof.start()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.prof is not None:
                self.prof.step()
                if state.global_step >= START_STEP + window - 1:
                    self.prof.stop()
                    self.prof = None

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.prof is not None:
                self.prof.stop()
                self.prof = None

    callbacks: list[Any] = []
    if mode == "perfkit":
        from perfkit_torch.transformers import PerfkitCallback

        callbacks = [
            PerfkitCallback(work / "runs", start_step=START_STEP, stop_step=START_STEP + window - 1)
        ]
    elif mode == "native":
        callbacks = [NativeCallback()]
    x, y = _data(steps)
    data = [{"x": x[i], "labels": y[i]} for i in range(len(x))]
    args = TrainingArguments(
        output_dir=str(work / "hf_out"),
        max_steps=steps,
        per_device_train_batch_size=BATCH_SIZE,
        learning_rate=1e-3,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=Classifier(), args=args, train_dataset=data, callbacks=callbacks)
    began = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - began
    loop_ended(helper_pid() if mode == "perfkit" else None)
    saved = _native_saved(work / "native") if mode == "native" else 0
    return {"fit_s": elapsed, "saved": saved, "steps": trainer.state.global_step}


def child(args: argparse.Namespace) -> int:
    run = run_lightning if args.trainer == "lightning" else run_transformers
    with quiet_stderr():
        result = run(args.mode, args.steps, args.window, Path(args.work))
    print("RESULT " + json.dumps(result), flush=True)
    return 0  # perfkit's queued conversions are left to its helper, as in a user's program


def ratio_interval(mine: list[float], theirs: list[float]) -> tuple[float, float, float]:
    """(ratio, low, high): median(mine) / median(theirs) of paired rounds and its percentile
    bootstrap interval over rounds, with ``perfkit compare``'s confidence, resamples and seed."""
    import numpy as np

    from perfkit_core.comparison.statistics import CONFIDENCE, RESAMPLES, SEED

    a, b = np.asarray(mine, dtype=float), np.asarray(theirs, dtype=float)
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(a), size=(RESAMPLES, len(a)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.median(a[picks], axis=1) / np.median(b[picks], axis=1)
    tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
    low, high = np.nanpercentile(ratios, [tail, 100.0 - tail])
    return float(np.median(a) / np.median(b)), float(low), float(high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps (default 40)")
    parser.add_argument("--window", type=int, default=20, help="profiled steps (default 20)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--trainer", choices=[*TRAINERS, "both"], default="both", help="(default both)"
    )
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        return child(args)
    trainers = TRAINERS if args.trainer == "both" else (args.trainer,)
    here = Path(__file__).resolve().parent
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        t: {m: [] for m in MODES} for t in trainers
    }
    print(
        f"{args.repeat} round(s); each: {args.steps} optimizer steps of the 12-block MLP, steps "
        f"{START_STEP} to {START_STEP + args.window - 1} profiled",
        flush=True,
    )
    for rnd in range(max(args.repeat, 1)):
        for trainer in trainers:
            order = MODES[rnd % len(MODES) :] + MODES[: rnd % len(MODES)]
            for mode in order:
                command = [
                    sys.executable,
                    str(here / "bench_trainers.py"),
                    "--mode",
                    mode,
                    "--trainer",
                    trainer,
                    "--steps",
                    str(args.steps),
                    "--window",
                    str(args.window),
                ]
                result = run_to_exit(command, here, "trainers-")
                if result is None:
                    return 1
                # the program's end, from fit's return to its exit (every mode pays one)
                result["fit_s"] += result["exit_s"]
                if mode == "perfkit":
                    result["saved"] = result["runs"][0]
                results[trainer][mode].append(result)
                print(
                    f"  round {rnd + 1}: {trainer:<12} {mode:<10} {result['fit_s']:7.3f} s"
                    f"  saved {result['saved']}  exit {result['exit_s']:.3f} s"
                    f"  helper after exit {result['helper_after_s']:.3f} s",
                    flush=True,
                )
    from bench_advice import median_interval  # the house's interval of a median

    print(
        f"\nload average now {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; added = the "
        "mode's time less the unprofiled run's of the same round, per profiled step; "
        "intervals: 95%"
    )
    failed = inconclusive = False
    for trainer in trainers:
        got = results[trainer]
        base = [r["fit_s"] for r in got["unprofiled"]]
        added = {
            m: [(r["fit_s"] - b) / args.window * 1e3 for r, b in zip(got[m], base, strict=True)]
            for m in ("perfkit", "native")
        }
        for m, label in (("perfkit", "perfkit"), ("native", NATIVE[trainer])):
            mid, low, high = median_interval(added[m])
            print(
                f"  {trainer:<12} {label:<52} adds {mid:8.3f} ms a step [{low:.3f}, {high:.3f}]"
                f"  saved {[r['saved'] for r in got[m]]}"
            )
        if statistics.median(added["native"]) <= 0:
            print(f"  {trainer}: INCONCLUSIVE: the trainer's own profiler added nothing measurable")
            inconclusive = True
            continue
        ratio, low, high = ratio_interval(added["perfkit"], added["native"])
        saved = all(r["saved"] == 1 for r in got["perfkit"])
        passed = ratio <= TARGET_RATIO and saved
        print(
            f"  {trainer}: perfkit / {NATIVE[trainer]}: {ratio:.2f}x [{low:.2f}, {high:.2f}] "
            f"(target <= {TARGET_RATIO:.2f}); one run saved every round: {saved}: "
            f"{'PASS' if passed else 'FAIL'}"
        )
        if low <= TARGET_RATIO <= high:
            print(
                f"  {trainer}: the interval holds 1.00: the two are not told apart on this machine"
            )
        failed |= not passed
    return 1 if failed else 2 if inconclusive else 0


if __name__ == "__main__":
    sys.exit(main())
