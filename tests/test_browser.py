"""What a reader sees: full-page screenshots of real reports in headless Chromium at 1400 px.

Each report is laid out by Chromium twice: once to read what the page's script measured (the
share of each table's width its name column gets, how many labels each chart drew, the page's
height), then to take a screenshot of the whole page at that height. Set ``PERFKIT_SCREENSHOTS``
to a folder to keep the screenshots for a look.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_reports import CHROMIUM_FLAGS, chromium, dump_dom

from conftest import shared_trace
from perfkit_core.cli import main

Image = pytest.importorskip("PIL.Image", reason="Pillow is in the test extra")

WIDTH = 1400
#: Tables whose first column holds names (ops, kernels, annotations, families).
NAME_TABLES = {"model", "family", "operator", "user", "kernel", "ops", "memcpy"}
MIN_NAME_SHARE = 0.25
#: The comparison's matched-ops table also lists each run's native ops in two wrapping text
#: columns (ten columns in all): there the name column gets at least this share, enough for its
#: canonical names ("host time between ops (backward)") on one line at 1400 px.
MIN_NAME_SHARE_OF = {"ops": 0.15}


@pytest.fixture(scope="module")
def framework_runs(tmp_path_factory):
    """One real CPU run of the demo model in torch and one in paddle (skipped when missing)."""
    base = tmp_path_factory.mktemp("runs")
    runs: dict[str, Path] = {}
    try:
        import torch_profiles

        runs["torch"] = torch_profiles.record(base / "torch", steps=4).runs[0]
    except ImportError:
        pass
    try:
        import paddle_profiles

        runs["paddle"] = paddle_profiles.record(base / "paddle", steps=4).runs[0]
    except ImportError:
        pass
    return runs


def report_of(kind: str, runs: dict[str, Path], out: Path) -> Path:
    """Write the HTML page a user would open for ``kind``; skip when its input is missing."""
    if kind == "comparison":
        if not {"torch", "paddle"} <= set(runs):
            pytest.skip("the comparison needs both torch and paddle installed")
        args = ["compare", str(runs["torch"]), str(runs["paddle"])]
    elif kind == "gpu-trace":
        args = ["report", str(shared_trace("resnet_nw0"))]
    else:
        if kind not in runs:
            pytest.skip(f"{kind} is not installed")
        args = ["report", str(runs[kind])]
    assert main([*args, "--format", "html", "-o", str(out)]) == 0
    return out


def screenshot(html: Path, height: int, tmp_path: Path) -> Path:
    """Return a PNG of the whole page: the window is as tall as the laid-out page."""
    png = tmp_path / f"{html.stem}.png"
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'shot-profile'}",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{height}",
            f"--screenshot={png}",
            html.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and png.exists(), proc.stderr[-2000:]
    keep = os.environ.get("PERFKIT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    return png


def content_bottom(png: Path) -> int:
    """Return the lowest pixel row that is not page background."""
    from PIL import ImageChops

    image = Image.open(png).convert("RGB")
    background = Image.new("RGB", image.size, image.getpixel((image.width - 1, image.height - 1)))
    box = ImageChops.difference(image, background).getbbox()
    assert box, f"{png.name} is blank"
    return box[3]


@pytest.mark.parametrize("kind", ["torch", "paddle", "gpu-trace", "comparison"])
def test_full_page_is_readable(kind, framework_runs, tmp_path):
    html = report_of(kind, framework_runs, tmp_path / f"{kind}.html")
    dom = dump_dom(html, tmp_path)

    shares = {
        name: float(share)
        for name, share in re.findall(
            r'<table class="data" id="table-([a-z_-]+)"[^>]*data-name-share="([0-9.]+)"', dom
        )
    }
    named = {name: share for name, share in shares.items() if name in NAME_TABLES}
    assert named, f"no name table laid out in the {kind} page: {sorted(shares)}"
    narrow = {
        name: share
        for name, share in named.items()
        if share < MIN_NAME_SHARE_OF.get(name, MIN_NAME_SHARE)
    }
    assert not narrow, f"name columns narrower than their share of the table: {narrow}"

    charts = re.findall(
        r'<canvas id="(chart-[a-z-]+)"[^>]*data-type="(\w+)" data-labels="(\d+)" '
        r'data-labels-drawn="(\d+)"',
        dom,
    )
    bars = [(chart, int(n), int(d)) for chart, kind_, n, d in charts if kind_ == "bar"]
    assert bars, f"no bar chart drawn in the {kind} page: {charts}"
    # Bar charts are categories: every bar has its label (a time axis may skip some).
    skipped = {chart: (drawn, total) for chart, total, drawn in bars if drawn < total}
    assert not skipped, f"bar charts that skip labels (drawn, total): {skipped}"

    height = int(re.search(r'data-page-height="(\d+)"', dom).group(1))
    png = screenshot(html, height, tmp_path)
    image = Image.open(png)
    assert image.size == (WIDTH, height)
    # The whole page is in the picture: its last content (the last table) is near the bottom.
    assert content_bottom(png) > height - 200, (content_bottom(png), height)
