"""Where does the placement remedy's saving come from, and how far does it move with the host?

``bench_advice.py --device cuda`` checks the saving placement promises on the
``torch-gpu-placement`` scenario against what its remedy delivers. This script takes that
scenario's two loops (three ``.item()`` reads a step, and the remedy) and times each phase of
their steps on the host clock: in the profiled steps, in the step timer's unprofiled steps right
after them (the steps the replay is calibrated to), and in interleaved rounds without the
profiler (the rounds the bench measures the achieved saving in). Per session it prints the
promise (placement's saving on the profile of the loop with the reads), the rounds' saving
(the median over rounds of the paired differences, as the bench takes it) and, per phase, the
median time of each loop in each window. A phase that ends in a read holds the host until the
device has finished the work before it, so its time says how far the host ran ahead of the
device: the faster the host, the longer it waits there, and the more the remedy saves.

    python bench/placement_phases.py --sessions 4      # needs a CUDA GPU
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import advice_gpu
import bench_advice

#: The windows each loop's phases are timed in: the profiled steps, the step timer's steps after
#: them, the interleaved rounds.
WINDOWS = ("profiled", "after", "rounds")


def phase_medians(marks: list[list[int]]) -> tuple[float, list[float]]:
    """The median step and the median of each phase over the steps in ``marks`` (us)."""
    spans = [[b - a for a, b in itertools.pairwise(m)] for m in marks]
    phases = [statistics.median(s[i] for s in spans) / 1e3 for i in range(len(spans[0]))]
    return statistics.median(m[-1] - m[0] for m in marks) / 1e3, phases


def session(rounds: int, round_steps: int, steps: int, keep: Path | None) -> dict[str, Any]:
    """One session: both loops profiled (their steps' phases timed in and after the profile),
    placement's promise on the loop with the reads, then both timed in interleaved rounds."""
    import perfkit_core.advice.engine as engine

    out: dict[str, Any] = {"phases": {}}
    marks: dict[str, list[list[int]]] = {"reads": [], "remedy": []}
    scenarios = {v: advice_gpu.placement_scenario("cuda", marks[v]) for v in marks}
    with tempfile.TemporaryDirectory() as tmp:
        for variant, scenario in scenarios.items():
            applied = frozenset({"placement"} if variant == "remedy" else ())
            folder = keep / variant if keep else Path(tmp) / variant
            run = bench_advice.profile(scenario, folder, steps, applied=applied)
            # bench_advice.profile: 3 warm-up steps, the profiler's wait and warm-up steps, the
            # profiled steps, then the step timer's
            first = 5
            out["phases"][variant, "profiled"] = phase_medians(
                marks[variant][first : first + steps]
            )
            out["phases"][variant, "after"] = phase_medians(marks[variant][first + steps :])
            if variant == "reads":
                found = [f for f in engine.advise(run) if f.id == "placement"]
                out["promise_us"] = found[0].saving_ns / 1e3 if found else None
    loops = {
        "before": scenarios["reads"].build(frozenset()),
        "remedy": scenarios["remedy"].build(frozenset({"placement"})),
    }
    for m in marks.values():
        m.clear()
    times, _ = bench_advice.time_variants(loops, round_steps, rounds)
    out["achieved_us"] = times["saving:remedy"] / 1e3
    for variant in marks:
        out["phases"][variant, "rounds"] = phase_medians(marks[variant])
    return out


def table(result: dict[str, Any]) -> str:
    """Each loop's median step and phases (us) in each window."""
    names = ["step", *advice_gpu.PLACEMENT_PHASES]
    lines = [f"  {'loop, window':18s}" + "".join(f"{n:>12s}" for n in names)]
    for variant in ("reads", "remedy"):
        for window in WINDOWS:
            step, phases = result["phases"][variant, window]
            lines.append(
                f"  {variant + ', ' + window:18s}" + "".join(f"{v:12.1f}" for v in (step, *phases))
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3, help="sessions, one after another")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds per session")
    parser.add_argument("--round-steps", type=int, default=10, help="steps per timed round")
    parser.add_argument("--steps", type=int, default=8, help="profiled steps")
    parser.add_argument(
        "--batch",
        type=int,
        default=advice_gpu.PLACEMENT_BATCH,
        help="rows per batch (the scenario's PLACEMENT_BATCH by default)",
    )
    parser.add_argument("--keep", type=Path, help="keep each session's runs under this folder")
    args = parser.parse_args()
    advice_gpu.PLACEMENT_BATCH = args.batch
    import torch

    if not torch.cuda.is_available():
        print("placement_phases.py needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch {args.batch}")
    promised, achieved = [], []
    for k in range(1, args.sessions + 1):
        keep = args.keep / f"session{k}" if args.keep else None
        with bench_advice.quiet():
            result = session(args.rounds, args.round_steps, args.steps, keep)
        achieved.append(result["achieved_us"])
        if result["promise_us"] is None:
            promise = "placement did not fire"
        else:
            promised.append(result["promise_us"])
            promise = f"placement promised {result['promise_us']:.0f} us a step"
        print(
            f"session {k}: {promise}, the remedy saved {result['achieved_us']:.0f} us a step "
            f"(median over {args.rounds} rounds)"
        )
        print(table(result))
    print(
        f"medians over {args.sessions} sessions: promised "
        + (f"{statistics.median(promised):.0f} us" if promised else "nothing")
        + f", achieved {statistics.median(achieved):.0f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
