"""Shared pytest fixtures: the real traces in ../shared/traces and real torch CPU profiles."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
TRACES = Path(os.environ.get("PERFKIT_SHARED_TRACES", ROOT.parent / "shared" / "traces"))

GPU_TRACES = {
    "resnet_nw0": "torch-gpu/resnet50_v100_num_workers_0.pt.trace.json.gz",
    "resnet_nw4": "torch-gpu/resnet50_v100_num_workers_4.pt.trace.json.gz",
    "a100_rank3": "torch-gpu/a100_8gpu_rank3.json.gz",
    "v100_rank1": "torch-gpu/v100_2gpu_rank1.json.gz",
}
CPU_TRACES = {
    "rank_non_gpu": "torch-cpu/rank_non_gpu.json.gz",
    "gloo_rank34": "torch-cpu/gloo_cpu_only_rank34.pt.trace.json.gz",
}
ALL_TRACES = {**GPU_TRACES, **CPU_TRACES}


try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # the property-based tests skip
    pass
else:
    # tests/test_mutations.py: about a minute by default; `--hypothesis-profile=perfkit-long`
    # explores 25 times as many mutations. No example database is written into the checkout.
    _hypothesis_settings.register_profile("perfkit", max_examples=120, deadline=None, database=None)
    _hypothesis_settings.register_profile(
        "perfkit-long", max_examples=3000, deadline=None, database=None
    )
    _hypothesis_settings.load_profile("perfkit")


def shared_trace(key: str) -> Path:
    """Return the path of a real trace in ../shared/traces, or skip the test when it is absent."""
    path = TRACES / ALL_TRACES[key]
    if not path.is_file():
        pytest.skip(f"real trace {ALL_TRACES[key]} not found under {TRACES}")
    return path


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"shared traces folder {TRACES} not found")
    return TRACES


@pytest.fixture(autouse=True)
def _fresh_plugin_manager(monkeypatch: pytest.MonkeyPatch):
    """Every test starts with a plugin manager built from its own environment."""
    monkeypatch.delenv("PERFKIT_DISABLE_PLUGINS", raising=False)
    from perfkit_core.plugins import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()


@pytest.fixture(scope="session")
def torch_profile(tmp_path_factory: pytest.TempPathFactory):
    """A real torch CPU profile of a small MLP (4 steps), with torch's key_averages of it."""
    pytest.importorskip("torch")
    from tests.torch_profiles import record

    return record(tmp_path_factory.mktemp("torch_profile"), profile_memory=True)


@pytest.fixture(scope="session")
def paddle_profile(tmp_path_factory: pytest.TempPathFactory):
    """A real paddle CPU profile of a small MLP (4 steps), with Paddle's own statistics of it."""
    pytest.importorskip("paddle")
    from tests.paddle_profiles import record

    # In the callback: the run comes straight from Paddle's result tree, so its events can be
    # matched to the tree's nodes to the nanosecond (the default, background handler reads
    # Paddle's protobuf export back; tests/test_paddle.py compares the two, and Paddle's JSON
    # export, which the profile also holds).
    return record(
        tmp_path_factory.mktemp("paddle_profile"),
        profile_memory=True,
        keep_trace=True,
        background=False,
    )


#: The job ``a100_job_dir`` holds: ranks, the one made slow and by how much per step (ns).
JOB_RANKS = 4
JOB_SLOW_RANK = 2
JOB_SLOW_NS = 20e6


@pytest.fixture(scope="session")
def a100_job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job of ``JOB_RANKS`` ranks made from the real A100 rank (re-ranked, data loading
    jittered by up to 0.5 ms a step, rank ``JOB_SLOW_RANK`` slower by ``JOB_SLOW_NS`` a step):
    one ``rank{r}.json.gz`` per rank."""
    from tests.job_traces import make_job

    folder = tmp_path_factory.mktemp("a100_job")
    make_job(
        shared_trace("a100_rank3"),
        folder,
        JOB_RANKS,
        slow_rank=JOB_SLOW_RANK,
        slow_ns=JOB_SLOW_NS,
        jitter_ns=0.5e6,
    )
    return folder


#: The larger job of the end-to-end checks: ranks, and the one made slow.
JOB16_RANKS = 16
JOB16_SLOW_RANK = 5


@pytest.fixture(scope="session")
def a100_job16_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job of ``JOB16_RANKS`` ranks made like ``a100_job_dir``, rank ``JOB16_SLOW_RANK``
    slower by ``JOB_SLOW_NS`` a step (only ever analysed on Dask: never loaded whole)."""
    from tests.job_traces import make_job

    folder = tmp_path_factory.mktemp("a100_job16")
    make_job(
        shared_trace("a100_rank3"),
        folder,
        JOB16_RANKS,
        slow_rank=JOB16_SLOW_RANK,
        slow_ns=JOB_SLOW_NS,
        jitter_ns=0.5e6,
    )
    return folder


@pytest.fixture(scope="session")
def a100_job(a100_job_dir: Path):
    """The ``a100_job_dir`` job loaded in this process (a ``Run`` holding every rank)."""
    import perfkit_core

    return perfkit_core.load(a100_job_dir)


_TRAIN = """
import sys
from pathlib import Path
from perfkit_{fw}.demo_models import train
runs, _ = train(Path(sys.argv[1]), sys.argv[2], steps=10)
assert len(runs) == 1, runs
print(runs[0])
"""


@pytest.fixture(scope="session")
def model_pairs(tmp_path_factory: pytest.TempPathFactory):
    """``get(model)`` -> (torch run folder, paddle run folder): the same CNN, transformer or LSTM
    trained for 10 profiled steps in each framework on the CPU (``demo_models``), with step-timer
    times saved into each run; each pair is recorded once per session. Each framework trains in
    its own process: torch and paddle in one process slow each other's CPU threads."""
    import json
    import subprocess
    import sys

    import numpy as np

    pytest.importorskip("torch")
    pytest.importorskip("paddle")
    root = tmp_path_factory.mktemp("model_pairs")
    recorded: dict[str, tuple[Path, Path]] = {}

    def train(framework: str, model: str) -> Path:
        # A machine busy with other work preempts the training process for milliseconds at a
        # time, wherever it happens to be; such a recording measures the machine, not the model.
        # As timeit does, keep the fastest of up to three recordings (noise only adds time),
        # stopping early at one whose profiled steps vary by under 8%.
        best: tuple[float, Path] | None = None
        for attempt in range(3):
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _TRAIN.format(fw=framework),
                    str(root / f"{framework}{attempt}" / model),
                    model,
                ],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert out.returncode == 0, out.stderr[-2000:]
            run_dir = Path(out.stdout.strip().splitlines()[-1])
            times = json.loads((run_dir / "meta.json").read_text())["step_timer"]["profiled_ns"]
            if best is None or float(np.mean(times)) < best[0]:
                best = (float(np.mean(times)), run_dir)
            if float(np.std(times) / np.mean(times)) <= 0.08:
                break
        assert best is not None
        return best[1]

    def get(model: str) -> tuple[Path, Path]:
        if model not in recorded:
            recorded[model] = (train("torch", model), train("paddle", model))
        return recorded[model]

    return get


@pytest.fixture(scope="module")
def browser():
    """Real headless Chromium (Debian's package) driven by Playwright, one per test module."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("headless Chromium is not installed (Debian package 'chromium')")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is in the test extra")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()


def settle(root: Path) -> None:
    """Date every file under ``root`` a minute back: ``perfkit serve`` lists a trace written in
    the last seconds as in progress (``catalog.SETTLE_S``), and a fast machine asks within them."""
    old = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (old, old))
