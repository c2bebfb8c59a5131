"""perfkit-tensorboard: the real ``tensorboard`` over a folder of demo runs lists the perfkit tab
as active, serves ``perfkit serve``'s app under it, and the tab shows the runs and a run's
timeline in Chromium."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("tensorboard", reason="tensorboard is in the test extra")
pytest.importorskip("perfkit_tensorboard", reason="perfkit-tensorboard is installed by tox")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(logdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/data/plugins_listing", timeout=5).read()
            return proc, url
        except OSError:
            assert proc.poll() is None, "tensorboard exited"
            assert time.monotonic() < deadline, "tensorboard did not start"
            time.sleep(0.5)


def listing(url: str) -> dict:
    with urllib.request.urlopen(url + "/data/plugins_listing", timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def demo_logdir(tmp_path_factory) -> Path:
    import torch_profiles

    root = tmp_path_factory.mktemp("tb_logdir")
    torch_profiles.record(root / "torch", steps=4)
    return root


def test_the_tab_is_active_over_runs_and_shows_them(demo_logdir, tmp_path):
    proc, url = start(demo_logdir)
    try:
        plugin = listing(url)["perfkit"]
        assert plugin["enabled"] is True and plugin["tab_name"] == "perfkit"
        assert plugin["loading_mechanism"]["module_path"] == "/data/plugin/perfkit/index.js"
        with urllib.request.urlopen(url + "/data/plugin/perfkit/app/api/runs", timeout=120) as r:
            runs = [row["id"] for row in json.loads(r.read())["runs"]]
        expected = sorted(
            p.parent.relative_to(demo_logdir).as_posix() for p in demo_logdir.rglob("meta.json")
        )
        assert expected and set(expected) <= set(runs)
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if not chromium:
            pytest.skip("headless Chromium is not installed (Debian package 'chromium')")
        sync_api = pytest.importorskip("playwright.sync_api")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url + "/#perfkit")
            # TensorBoard's plugin frame holds the app's frame: the list of perfkit serve
            app = page.frame_locator("iframe").frame_locator("iframe")
            app.locator(f'tr[data-run="{expected[0]}"]').wait_for(timeout=120_000)
            shown = app.locator("tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)")
            assert set(expected) <= set(shown)
            # a run's pages and its timeline, through TensorBoard's route to the app
            app.locator(f'tr[data-run="{expected[0]}"] td.name a').click()
            app.locator('button[data-tab="timeline"]').click()
            app.locator('#timeline[data-ready="1"]').wait_for(timeout=120_000)
            assert app.locator(".tl-lane").count() >= 1
            assert app.locator("#tl-range").inner_text().endswith("s")
            if os.environ.get("PERFKIT_SCREENSHOTS"):
                page.screenshot(
                    path=str(Path(os.environ["PERFKIT_SCREENSHOTS"]) / "tensorboard.png")
                )
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # a log folder with neither perfkit runs nor traces does not get the tab
    empty = tmp_path / "scalars_only"
    empty.mkdir()
    (empty / "events.out.tfevents.1.host").write_bytes(b"")
    proc, url = start(empty)
    try:
        assert listing(url)["perfkit"]["enabled"] is False
    finally:
        proc.terminate()
        proc.wait(timeout=30)
