"""Benchmark: what perfkit's layer spans add to a torch training step, against plain
``torch.profiler`` recording the same steps.

Target: on the demo models, a step recorded by ``torch.profiler`` with perfkit's layer spans
(``perfkit_torch.on_trace_ready(...)``, ``layers=True``, the default: every ``nn.Module`` call
recorded as an ``nn.Module: Type_k`` span) takes at most 3% longer than the same step recorded
by ``torch.profiler`` alone ("added" <= 3%: the median difference in CPU time within pairs of
blocks of steps, over the plainly profiled step).

What is measured: the models of ``perfkit demo`` (``perfkit_torch.demo``: a 4-block MLP, width
64, batch 32, Adam, ``record_shapes=True``) and of ``examples/compare_frameworks.py``
(``perfkit_torch.demo_models``: the CNN, transformer and LSTM) and HF transformers' GPT-2 tiny
(``GPT2LMHeadModel``: 2 blocks, 64 wide, 2 heads, a 512-token vocabulary, batch 8 of 32
tokens, SGD), trained on the CPU with one
intra-op thread, as both demos train them. Each model runs in a fresh subprocess, in
``--repeat`` rounds. A round runs about ``--steps`` timed steps per mode without a profiler,
then as many under one ``torch.profiler`` session, in pairs of blocks of ten steps: one block
without perfkit's wrapper of ``Module.__call__`` (``perfkit_torch.modules``) and one with it,
in random order, the wrapper installed and removed between blocks, outside the timing. The
first three steps of a block are not timed: installing or removing the wrapper makes the
interpreter rebuild its caches for module calls, which training pays once per profiler
cycle, not once per step. Each step is timed from its start to the end of its
``prof.step()``, in CPU time of the training thread (what the work costs, whatever else the
shared machine runs; wall time is printed beside it); a block's figure is the median of its
steps. A mode's step time is the median of its blocks over all rounds; ``added`` is the median
over all pairs of the difference within a pair, over the plain step time (a pair shares the
machine's state, so the differences hold less of its noise). Modes:

* ``unprofiled``: no profiler.
* ``armed, not recording``: no profiler, perfkit's wrapper installed (what a step pays
  between the handler's creation and its profiler's first recorded step; after the first
  cycle the handler installs it only for the schedule's warm-up and recording steps).
* ``torch.profiler``: recording every step (``activities=[CPU]``), ``on_trace_ready`` unused.
* ``torch.profiler + layer spans``: the same, with perfkit's wrapper installed, as the
  handler has it in its profiler's recording steps.

Columns: ``calls``, module calls per step (counted by a global hook of the benchmark's own);
``added``, the layer spans' cost in % of the plainly profiled step; ``estimated``, the same
from another measurement: ``calls`` x the added cost of one module call (the fastest of many
passes through a chain of 200 ``nn.Identity`` modules, recording, with and without the
wrapper) over the plainly profiled step. The export at a cycle's end is not measured here
(``bench_handler.py`` and ``bench_training_overhead.py`` measure the handler's export and
conversion).

Run: ``python bench/bench_layer_spans.py [--models mlp,cnn,transformer,lstm,gpt2] [--steps N]
[--repeat K]``. Exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

MODELS = ("mlp", "cnn", "transformer", "lstm", "gpt2")
MODES = ("unprofiled", "armed", "profiled", "spans")
LABELS = {
    "unprofiled": "unprofiled",
    "armed": "armed, not recording",
    "profiled": "torch.profiler",
    "spans": "torch.profiler + layer spans",
}
TARGET_RATIO = 1.03
#: Steps per block of one mode, and how many of them are not timed: installing or removing the
#: wrapper changes ``nn.Module``'s type, so the interpreter rebuilds its caches for module calls
#: in the next steps (in training that happens once per profiler cycle, not once per step).
BLOCK = 10
SETTLE = 3


def _model(name: str) -> tuple[Any, Any, Any, Any, bool]:
    """(module, optimizer, inputs, targets, record_shapes) of one demo model's training."""
    import numpy as np
    import torch

    if name == "mlp":  # perfkit_torch.demo.train_mlp's model, batch and profiler options
        torch.manual_seed(0)
        layers: list[Any] = []
        for _ in range(4):
            layers += [torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.ReLU()]
        module = torch.nn.Sequential(*layers, torch.nn.Linear(64, 10))
        optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
        rng = np.random.default_rng(0)
        x = torch.from_numpy(rng.standard_normal((32, 64)).astype("float32"))
        y = torch.from_numpy(rng.integers(0, 10, (32,)).astype("int64"))
        return module, optimizer, x, y, True
    if name == "gpt2":  # HF GPT-2 tiny: 2 blocks, 64 wide, 2 heads, SGD
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        config = GPT2Config(
            n_layer=2, n_embd=64, n_head=2, vocab_size=512, n_positions=64, use_cache=False
        )
        module = GPT2LMHeadModel(config)
        optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
        ids = torch.randint(
            0, config.vocab_size, (8, 32), generator=torch.Generator().manual_seed(0)
        )
        return module, optimizer, ids, ids, False
    from perfkit_torch.demo_models import MODELS as SIZES
    from perfkit_torch.demo_models import build

    torch.manual_seed(0)
    module, optimizer, make_data = build(name)
    x, y = make_data(SIZES[name]["batch"])
    return module, optimizer, x, y, False


def run_model(name: str, steps: int, repeat: int) -> dict[str, Any]:
    """Time every mode on model ``name`` in this process; return the per-round medians (s)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from perfkit_torch.modules import record_modules

    torch.set_num_threads(1)
    module, optimizer, x, y, record_shapes = _model(name)
    loss_fn = torch.nn.CrossEntropyLoss()
    calls = [0]

    def count(mod: Any, args: Any) -> None:
        calls[0] += 1

    def step() -> None:
        with torch.profiler.record_function("forward"):
            out = module(x)
            out = getattr(out, "logits", out)  # a transformers model's output holds them
            loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        with torch.profiler.record_function("backward"):
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    def alternate(prof: Any | None) -> dict[str, list[float]]:
        """Pairs of blocks of ``BLOCK`` steps, one block without the wrapper installed and one
        with it, in random order; per block, the median CPU time and wall time (ns) of its steps
        after the first ``SETTLE``, by mode, pairs in order."""
        import random
        import time

        off, on = ("profiled", "spans") if prof is not None else ("unprofiled", "armed")
        out: dict[str, list[float]] = {f"{m}{k}": [] for m in (off, on) for k in ("", "_wall")}
        for _ in range(max(1, steps // (BLOCK - SETTLE))):
            for mode in random.sample((off, on), 2):
                spans = record_modules() if mode == on else None
                cpus, walls = [], []
                for i in range(BLOCK):
                    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
                    step()
                    if prof is not None:
                        prof.step()
                    cpu, wall = time.thread_time_ns() - cpu, time.perf_counter_ns() - wall
                    if i >= SETTLE:
                        cpus.append(cpu)
                        walls.append(wall)
                if spans is not None:
                    spans.remove()
                out[mode].append(statistics.median(cpus))
                out[f"{mode}_wall"].append(statistics.median(walls))
        return out

    def per_call_ns() -> dict[str, float]:
        """Added time per module call (ns, thread CPU time, the fastest of many passes through a
        chain of 200 ``nn.Identity`` modules), with the wrapper installed, while not recording
        and while recording."""
        import time

        chain = torch.nn.Sequential(*[torch.nn.Identity() for _ in range(200)])
        found: dict[tuple[bool, bool], float] = {}
        for recording in (False, True):
            for armed in (False, True):
                spans = record_modules() if armed else None
                with profile(activities=[ProfilerActivity.CPU]) if recording else _null():
                    best = min(
                        _cpu_ns(time, lambda: chain(x)) for _ in range(20 if recording else 200)
                    )
                if spans is not None:
                    spans.remove()
                found[(recording, armed)] = best / 201  # the chain and its 200 modules
        return {
            "armed": found[(False, True)] - found[(False, False)],
            "spans": found[(True, True)] - found[(True, False)],
        }

    # Module calls per step, counted by a hook of the benchmark's own.
    from torch.nn.modules.module import register_module_forward_pre_hook

    handle = register_module_forward_pre_hook(count)
    step()
    handle.remove()
    rounds: dict[str, list[float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeat):
            for recording in (False, True):
                if recording:
                    with profile(
                        activities=[ProfilerActivity.CPU], record_shapes=record_shapes
                    ) as prof:
                        times = alternate(prof)
                else:
                    times = alternate(None)
                for key, values in times.items():
                    rounds.setdefault(key, []).extend(v / 1e9 for v in values)
        cost = per_call_ns()
    return {"model": name, "rounds": rounds, "module_calls": calls[0], "per_call_ns": cost}


def _cpu_ns(time: Any, work: Any) -> int:
    """Thread CPU time (ns) of one ``work()``."""
    began = time.thread_time_ns()
    work()
    return int(time.thread_time_ns() - began)


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_model(args.child, args.steps, args.repeat)))
        return 0
    load_before = os.getloadavg()
    results = []
    for name in args.models.split(","):
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                *("--child", name, "--steps", str(args.steps), "--repeat", str(args.repeat)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    load_after = os.getloadavg()
    print(
        f"step time (ms): the median of {args.repeat} x {args.steps} steps per mode, in CPU time "
        f"of the training thread (wall time in brackets), one intra-op thread; % added: median "
        f"difference within pairs of blocks of steps; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} cores"
    )
    widths = (12, 6, 17, 26, 17, 26, 8, 10)
    heads = (
        "model",
        "calls",
        LABELS["unprofiled"],
        LABELS["armed"],
        LABELS["profiled"],
        LABELS["spans"],
        "added",
        "estimated",
    )
    print(
        "  ".join(
            h.rjust(w) if i else h.ljust(w)
            for i, (h, w) in enumerate(zip(heads, widths, strict=True))
        )
    )
    failed = False
    for res in results:
        rounds = res["rounds"]
        best = {k: statistics.median(v) for k, v in rounds.items()}

        def paired(off: str, on: str, rounds: dict[str, list[float]] = rounds) -> float:
            diffs = [b - a for a, b in zip(rounds[off], rounds[on], strict=True)]
            return 100 * statistics.median(diffs) / statistics.median(rounds[off])

        added = paired("profiled", "spans")
        calls = res["module_calls"]
        estimated = 100 * calls * res["per_call_ns"]["spans"] / 1e9 / best["profiled"]
        armed = paired("unprofiled", "armed")

        def cell(mode: str, best: dict[str, float] = best) -> str:
            return f"{best[mode] * 1e3:.3f} ({best[mode + '_wall'] * 1e3:.3f})"

        cells = (
            res["model"],
            str(calls),
            cell("unprofiled"),
            f"{cell('armed')} {armed:+.1f}%",
            cell("profiled"),
            f"{cell('spans')} {added:+.1f}%",
            f"{added:+.1f}%",
            f"{estimated:+.1f}%",
        )
        verdict = "PASS" if added <= 100 * (TARGET_RATIO - 1) else "FAIL"
        failed |= verdict == "FAIL"
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + f"  {verdict} (target: added <= {100 * (TARGET_RATIO - 1):.0f}%)"
        )
    cost = results[0]["per_call_ns"]
    print(
        f"per module call (chain of nn.Identity, {results[0]['model']}'s process): "
        f"{cost['spans'] / 1e3:.2f} us recording with layer spans, {cost['armed'] / 1e3:.2f} us "
        "with the wrapper installed while not recording"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
