"""HTML reports (checked in real headless Chromium when installed) and exports."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.cli import main

EVIL = "<img src=x onerror=alert(1)>"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=5000",
]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip(
            "headless Chromium is not installed (Debian package 'chromium'); the HTML is still checked statically"
        )
    return path


def dump_dom(html: Path, tmp_path: Path, query: str = "", width: int = 1400) -> str:
    """Return the page's DOM after its scripts ran in a window ``width`` px wide."""
    url = html.resolve().as_uri() + (f"?q={query}" if query else "")
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={width},1000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert (
        main(["report", str(shared_trace("resnet_nw0")), "--format", "html", "-o", str(out)]) == 0
    )
    return out


def test_report_is_self_contained_and_small(gpu_report):
    html = gpu_report.read_text()
    assert "<script src=" not in html and "<link" not in html  # everything inlined
    assert not re.search(
        r"https?://(?!www\.w3\.org)", html.split("</script>", 1)[1]
    )  # no network after Chart.js
    assert len(html) < 1_500_000
    for section in (
        "Advice",
        "Time per step by phase",
        "Time per step by op family",
        "Operator Summary",
        "Kernel Summary",
    ):
        assert section in html
    assert "input-pipeline" in html


def test_report_renders_in_chromium(gpu_report, tmp_path):
    dom = dump_dom(gpu_report, tmp_path)
    canvases = re.findall(r'<canvas id="(chart-[a-z-]+)"[^>]*data-rendered="1"', dom)
    assert {"chart-phases", "chart-family", "chart-device-timeline"} <= set(canvases)
    rows = re.search(r'<table class="data" id="table-operator"[^>]*data-shown="(\d+)"', dom)
    assert rows and int(rows.group(1)) > 10


def test_search_filters_a_table_in_chromium(gpu_report, tmp_path):
    dom = dump_dom(gpu_report, tmp_path, query="conv")
    shown = int(re.search(r'id="table-operator"[^>]*data-shown="(\d+)"', dom).group(1))
    body = dom.split('id="table-operator"', 1)[1].split("</table>", 1)[0]
    visible = [r for r in re.findall(r"<tr(?: style=\"\")?>(.*?)</tr>", body, re.S)]
    names = [re.sub("<[^>]+>", "", r.split("</td>", 1)[0]) for r in visible if "<td" in r]
    assert 0 < shown < 50
    assert all("conv" in n.lower() for n in names[:shown])


def evil_trace(tmp_path: Path) -> Path:
    path = tmp_path / "evil.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": "ProfilerStep#1",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 100,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": EVIL,
                        "pid": 1,
                        "tid": 1,
                        "ts": 1,
                        "dur": 50,
                    },
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "</script><script>alert(2)</script>",
                        "pid": 1,
                        "tid": 1,
                        "ts": 60,
                        "dur": 10,
                    },
                ]
            }
        )
    )
    return path


def test_markup_in_names_is_shown_as_text(tmp_path):
    out = tmp_path / "evil.html"
    assert main(["report", str(evil_trace(tmp_path)), "--format", "html", "-o", str(out)]) == 0
    # Names may wrap only where perfkit puts a <wbr>; without them the name is the escaped text.
    html = out.read_text().replace("<wbr>", "")
    assert EVIL not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script>alert(2)" not in html
    if shutil.which("chromium"):
        dom = dump_dom(out, tmp_path).replace("<wbr>", "")
        assert "<img" not in dom.split("<body", 1)[1]
        assert "&lt;img src=x onerror=alert(1)&gt;" in dom


def test_chrome_export_holds_every_complete_event(tmp_path):
    src = shared_trace("resnet_nw4")
    with gzip.open(src) as fh:
        raw = json.load(fh)["traceEvents"]
    out = tmp_path / "trace.json"
    assert main(["export", str(src), "--to", "chrome", "-o", str(out)]) == 0
    exported = json.loads(out.read_text())["traceEvents"]
    assert sum(1 for e in exported if e["ph"] == "X") == sum(1 for e in raw if e.get("ph") == "X")
    flows = [e for e in exported if e["ph"] in ("s", "f")]
    assert flows and sum(e["ph"] == "s" for e in flows) == sum(e["ph"] == "f" for e in flows)
    assert any(e["ph"] == "i" and e.get("cat") == "advice" for e in exported)
    names = {e["name"] for e in exported if e["ph"] == "X"}
    assert {e["name"] for e in raw if e.get("ph") == "X"} == names


def test_folded_export_lines(tmp_path):
    out = tmp_path / "stacks.folded"
    assert (
        main(["export", str(shared_trace("rank_non_gpu")), "--to", "folded", "-o", str(out)]) == 0
    )
    lines = out.read_text().splitlines()
    assert lines
    for line in lines:
        assert re.fullmatch(r"[^ ].*? \d+", line), line
    # Self time: the counts add up to the host events' self time (whole microseconds).
    total = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
    run = perfkit_core.load(shared_trace("rank_non_gpu"))
    from perfkit_core.views.operators import host_self_time

    host = (run.events["stream"] < 0).to_numpy() & (run.events["kind"] != "memory").to_numpy()
    assert total == pytest.approx(host_self_time(run)[host].sum() / 1000, rel=0.01)
    gpu = tmp_path / "gpu.folded"
    assert (
        main(
            [
                "export",
                str(shared_trace("resnet_nw4")),
                "--to",
                "folded",
                "--metric",
                "gpu",
                "-o",
                str(gpu),
            ]
        )
        == 0
    )
    assert any(";" in line for line in gpu.read_text().splitlines())


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_summary_exports(tmp_path, fmt):
    out = tmp_path / ("out.json" if fmt == "json" else "out")
    assert main(["export", str(shared_trace("resnet_nw4")), "--to", fmt, "-o", str(out)]) == 0
    run = perfkit_core.load(shared_trace("resnet_nw4"))
    ops = run.summary("operator")
    if fmt == "json":
        data = json.loads(out.read_text())
        assert len(data["operator"]) == len(ops) and "kernel" in data
    elif fmt == "csv":
        import pandas as pd

        back = pd.read_csv(out / "operator.csv")
        assert back["calls"].sum() == ops["calls"].sum()
    else:
        import pandas as pd

        back = pd.read_parquet(out / "kernel.parquet")
        assert back["gpu_total_ns"].sum() == run.summary("kernel")["gpu_total_ns"].sum()


def test_progress_is_silent_without_a_terminal(tmp_path):
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfkit_core",
            "report",
            str(shared_trace("resnet_nw4")),
            "--views",
            "model",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert "it/s" not in proc.stderr and "step/s" not in proc.stderr and "%|" not in proc.stderr


def test_progress_shows_on_a_terminal_after_a_second():
    import fcntl
    import os
    import select
    import struct
    import sys
    import termios

    code = (
        "import time\n"
        "from perfkit_core import progress\n"
        "progress.enable_for_cli()\n"
        "with progress.stage('crunching', total=2) as bar:\n"
        "    time.sleep(1.5); bar.update(1); time.sleep(0.3); bar.update(1)\n"
        "with progress.stage('quick', total=1) as bar:\n"
        "    bar.update(1)\n"
    )
    master, slave = os.openpty()
    fcntl.ioctl(
        slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0)
    )  # a 100-column terminal
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=slave, stdout=slave, stderr=slave, close_fds=True
    )
    os.close(slave)
    output = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif proc.poll() is not None:
            break
    proc.wait()
    os.close(master)
    text = output.decode(errors="replace")
    assert "crunching" in text and "2/2" in text
    assert "quick" not in text  # done within a second: no bar
