"""The five distributions: they build, none requires a framework wheel, and an adapter
installed alone in a fresh environment works (and names the adapter a foreign trace needs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import shared_trace

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {
    "perfkit": REPO,
    "perfkit-torch": REPO / "perfkit_torch",
    "perfkit-paddle": REPO / "perfkit_paddle",
    "perfkit-xla": REPO / "perfkit_xla",
    "perfkit-mindspore": REPO / "perfkit_mindspore",
}
#: Distributions an adapter must never require: each would replace (or duplicate) the user's
#: own framework build.
FRAMEWORK_WHEELS = {
    "torch",
    "paddlepaddle",
    "paddlepaddle-gpu",
    "tensorflow",
    "tensorflow-cpu",
    "jax",
    "jaxlib",
    "mindspore",
    "mindspore-gpu",
    "mindspore-ascend",
}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            *map(str, DISTRIBUTIONS.values()),
        ],
        check=True,
        capture_output=True,
    )
    found = {p.name.split("-")[0].replace("_", "-"): p for p in out.glob("*.whl")}
    assert set(found) == set(DISTRIBUTIONS), found
    return found


def metadata(wheel: Path) -> tuple[list[str], str]:
    """(Requires-Dist lines, entry_points.txt) of a wheel."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        eps = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
        entry_points = zf.read(eps).decode() if eps else ""
    requires = [
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    return requires, entry_points


def requirement_name(line: str) -> str:
    import re

    return re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower()


def test_no_distribution_requires_a_framework(wheels: dict[str, Path]) -> None:
    for name, wheel in wheels.items():
        requires, _ = metadata(wheel)
        assert not {requirement_name(r) for r in requires} & FRAMEWORK_WHEELS, (name, requires)


def test_adapters_depend_on_perfkit_and_register_their_entry_point(wheels: dict[str, Path]) -> None:
    for name, plugin in (
        ("perfkit-torch", "torch = perfkit_torch.plugin"),
        ("perfkit-paddle", "paddle = perfkit_paddle.plugin"),
        ("perfkit-xla", "xla = perfkit_xla.plugin"),
        ("perfkit-mindspore", "mindspore = perfkit_mindspore.plugin"),
    ):
        requires, entry_points = metadata(wheels[name])
        assert "perfkit" in {requirement_name(r) for r in requires}
        assert "[perfkit]" in entry_points and plugin in entry_points
    _, core_entry_points = metadata(wheels["perfkit"])
    assert "[perfkit]" not in core_entry_points  # the core registers no adapter
    with zipfile.ZipFile(wheels["perfkit"]) as zf:
        assert "perfkit_core/report/assets/chart.umd.min.js" in zf.namelist()


def _paddle_trace(path: Path) -> Path:
    events = [
        {
            "name": "ProfileStep#0[1.000 ms]",
            "cat": "ProfileStep",
            "ph": "X",
            "pid": 1,
            "tid": "7(Python)",
            "ts": 10,
            "dur": 1000,
            "args": {"start_time": "0.000 us", "end_time": "1000.000 us"},
        },
        {},
    ]
    path.write_text(json.dumps({"traceEvents": events, "ExtraInfo": {}}))
    return path


def test_torch_adapter_alone_in_a_fresh_environment(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    """perfkit + perfkit-torch only: a torch trace reports; a Paddle trace gets one line naming
    the adapter to install; perfkit info says how to add it."""
    trace = shared_trace("rank_non_gpu")
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_CONSTRAINT"))
    }
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            str(wheels["perfkit"]),
            str(wheels["perfkit-torch"]),
        ],
        capture_output=True,
        text=True,
        env=environ,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    perfkit = [str(python), "-m", "perfkit_core"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*perfkit, *args],
            capture_output=True,
            text=True,
            env=environ,
            cwd=tmp_path,
            timeout=300,
        )

    report = run("report", str(trace), "--views", "operator")
    assert report.returncode == 0, report.stderr
    assert "Operator Summary" in report.stdout

    paddle = run("report", str(_paddle_trace(tmp_path / "x.paddle_trace.json")))
    assert paddle.returncode == 2
    assert len(paddle.stderr.strip().splitlines()) == 1, paddle.stderr
    assert "perfkit-paddle adapter is not installed" in paddle.stderr
    assert "pip install perfkit-paddle" in paddle.stderr

    xplane = REPO / "tests" / "data" / "xla" / "jax_mlp" / "plugins" / "profile" / "run"
    xla = run("report", str(xplane / "mlp.xplane.pb"))
    assert xla.returncode == 2
    assert len(xla.stderr.strip().splitlines()) == 1, xla.stderr
    assert "perfkit-xla adapter is not installed" in xla.stderr
    # The trace viewer's JSON beside it is not taken for a torch trace.
    viewer = run("report", str(xplane / "mlp.trace.json.gz"))
    assert viewer.returncode == 2 and "perfkit-xla adapter is not installed" in viewer.stderr

    info = run("info")
    assert info.returncode == 0, info.stderr
    assert "torch (perfkit-torch 0.2.0)" in info.stdout
    assert "paddle: not installed" in info.stdout and "pip install ./perfkit_paddle" in info.stdout
    pip_list = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        env=environ,
    )
    installed = {p["name"].lower() for p in json.loads(pip_list.stdout)}
    assert not installed & FRAMEWORK_WHEELS, installed & FRAMEWORK_WHEELS


@pytest.mark.parametrize(
    ("adapter", "framework", "wanted"),
    [
        ("perfkit_torch", "torch", "install your torch build first"),
        ("perfkit_paddle", "paddle", "pip install paddlepaddle"),
    ],
)
def test_handler_without_its_framework_says_what_to_install(
    adapter: str, framework: str, wanted: str
) -> None:
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"import {adapter}\n"
        "try:\n"
        f"    {adapter}.on_trace_ready\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 1 and wanted in out.stdout, out.stdout
