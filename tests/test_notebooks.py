"""Runs and comparisons in Jupyter: a real notebook (nbformat) that loads a real torch run and
compares it with a real Paddle run, executed with ``jupyter nbconvert --execute --to html`` and
opened in headless Chromium: the report parts are inline, as tall as their content (no frame,
no inner vertical scrollbar), styled by rules scoped to their own element, with no script.
Set ``PERFKIT_SCREENSHOTS`` to a folder to keep the full-page screenshot for a look."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_reports import CHROMIUM_FLAGS, chromium

import perfkit_core
from perfkit_core.report.html import FRAGMENT_SCOPE, scoped_style
from perfkit_core.report.notebook import comparison_html, run_html

nbformat = pytest.importorskip("nbformat", reason="nbformat is in the test extra")
pytest.importorskip("nbconvert", reason="nbconvert is in the test extra")
pytest.importorskip("ipykernel", reason="ipykernel is in the test extra")

WIDTH = 1100
#: Measures what a reader sees, once the page is laid out: for each notebook fragment, its
#: height and scroll height, and those of every ancestor up to the page, whether any of its
#: parts is clipped by an ancestor, and the scripts, frames and style rules inside it.
MEASURE = """
<script>
window.addEventListener('load', () => {
  const out = [];
  document.querySelectorAll('div.perfkit-nb').forEach((nb) => {
    const boxes = [];
    for (let el = nb; el && el !== document.body; el = el.parentElement) {
      const style = getComputedStyle(el);
      boxes.push({tag: el.tagName, cls: el.className, scroll: el.scrollHeight,
                  client: el.clientHeight, overflowY: style.overflowY,
                  maxHeight: style.maxHeight});
    }
    const rules = [];
    nb.querySelectorAll('style').forEach((s) => {
      for (const rule of s.sheet.cssRules) rules.push(rule.selectorText || rule.cssText);
    });
    const parts = Array.from(nb.querySelectorAll('h1, h2, .headline, .finding, .verdict, table'));
    let clipped = 0;
    parts.forEach((part) => {
      const r = part.getBoundingClientRect();
      if (r.height === 0) { clipped++; return; }
      for (let el = part.parentElement; el && el !== document.body; el = el.parentElement) {
        const oy = getComputedStyle(el).overflowY;
        if (oy !== 'visible') {
          const c = el.getBoundingClientRect();
          if (r.bottom > c.bottom + 1 || r.top < c.top - 1) { clipped++; break; }
        }
      }
    });
    out.push({title: (nb.querySelector('h1') || {}).textContent, boxes, rules,
              parts: parts.length, clipped, scripts: nb.querySelectorAll('script').length,
              iframes: nb.querySelectorAll('iframe').length,
              text: nb.innerText.length});
  });
  document.body.dataset.perfkit = JSON.stringify(out);
  document.body.dataset.pageHeight = document.documentElement.scrollHeight;
  document.body.dataset.iframes = document.querySelectorAll('iframe').length;
});
</script>
"""


def _chromium(html: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args,
         html.resolve().as_uri()],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.fixture(scope="module")
def executed(torch_profile, paddle_profile, tmp_path_factory):
    """The notebook executed by ``jupyter nbconvert --execute --to html``: its HTML page."""
    folder = tmp_path_factory.mktemp("notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            f"import perfkit_core\nrun = perfkit_core.load({str(torch_profile.runs[0])!r})\nrun"
        ),
        nbformat.v4.new_code_cell(
            f"paddle_run = perfkit_core.load({str(paddle_profile.runs[0])!r})\n"
            "perfkit_core.compare(run, paddle_run, labels=['torch', 'paddle'])"
        ),
        nbformat.v4.new_code_cell("perfkit_core.readable(run.summary('operator')).head()"),
    ]
    path = folder / "perfkit.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--execute", "--to", "html", path.name],
        cwd=folder, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder / "perfkit.html"


def test_notebook_shows_the_whole_report_without_an_inner_scrollbar(
    executed, torch_profile, tmp_path
):
    page = executed.read_text()
    assert "<iframe" not in page
    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = _chromium(measured, tmp_path, f"--window-size={WIDTH},1000", "--dump-dom").stdout
    found = re.search(r'data-perfkit="([^"]*)"', dom)
    assert found, "the measuring script did not run"
    fragments = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    titles = [f["title"] for f in fragments]
    assert len(fragments) == 2, titles
    assert titles[0] == f"{torch_profile.runs[0].name} — perfkit report"
    assert titles[1] == "torch vs paddle — perfkit comparison"
    for fragment in fragments:
        assert fragment["scripts"] == 0 and fragment["iframes"] == 0
        assert fragment["parts"] >= 5 and fragment["clipped"] == 0, fragment
        for box in fragment["boxes"]:
            # Nothing between the report and the page scrolls vertically or is capped.
            assert box["scroll"] <= box["client"] + 1, box
            assert box["maxHeight"] == "none", box
        assert fragment["rules"] and all(r.startswith(FRAGMENT_SCOPE) for r in fragment["rules"])
    height = int(re.search(r'data-page-height="(\d+)"', dom).group(1))
    assert height > 3000  # the whole report is laid out in the page, not in a 900 px frame
    png = tmp_path / "notebook.png"
    _chromium(
        measured, tmp_path, "--hide-scrollbars", f"--window-size={WIDTH},{height}",
        f"--screenshot={png}",
    )  # fmt: skip
    assert png.stat().st_size > 10_000
    keep = os.environ.get("PERFKIT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)


def test_the_fragment_touches_nothing_outside_itself(torch_profile, paddle_profile):
    """The HTML a notebook shows: one scoped element, its style's every rule inside it, no
    script, no page-level markup; the report's figures are the report model's."""
    run = perfkit_core.load(torch_profile.runs[0])
    comparison = perfkit_core.compare(run, perfkit_core.load(paddle_profile.runs[0]))
    for html in (run_html(run), comparison_html(comparison)):
        assert html.startswith('<div class="perfkit-nb"><style>') and html.endswith("</div>")
        for tag in ("<script", "<iframe", "<html", "<body", "<head", "<link", "@import"):
            assert tag not in html
    assert "Step time (mean)" in run_html(run)
    rules = re.findall(r"([^{}]+)\{[^{}]*\}", scoped_style())
    selectors = [s.strip() for rule in rules for s in rule.split(",")]
    assert selectors and all(s.startswith(FRAGMENT_SCOPE) for s in selectors)


def test_ipython_shows_runs_and_comparisons_as_their_reports(torch_profile, paddle_profile):
    """Importing perfkit_core inside IPython registers the HTML formatters (by class name: the
    run and comparison layers import nothing of the report layer)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        perfkit_core.load_ipython_extension(shell)
        run = perfkit_core.load(torch_profile.runs[0])
        comparison = perfkit_core.compare(run, perfkit_core.load(paddle_profile.runs[0]))
        data, _ = shell.display_formatter.format(run)
        assert data["text/html"] == run_html(run)
        data, _ = shell.display_formatter.format(comparison)
        assert "perfkit comparison" in data["text/html"]
    finally:
        InteractiveShell.clear_instance()


def test_readable_writes_times_in_ms_and_leaves_the_view_alone(torch_profile):
    run = perfkit_core.load(torch_profile.runs[0])
    ops = run.summary("operator")
    shown = perfkit_core.readable(ops)
    assert ops["cpu_total_ns"].dtype.kind == "i"  # the view keeps its ns
    assert list(shown.columns[:2]) == ["Name", "Calls"] and "CPU total (ms)" in shown.columns
    assert (shown["CPU total (ms)"] == (ops["cpu_total_ns"] / 1e6).round(3)).all()
    assert shown.attrs["columns"]["CPU total (ms)"] == "cpu_total_ns"
    assert not any(c.startswith("GPU") for c in shown.columns)  # no GPU time on a CPU run
    us = perfkit_core.readable(ops, unit="us")
    assert (us["CPU self (us)"] == (ops["cpu_self_ns"] / 1e3).round(3)).all()
    memory = perfkit_core.readable(run.summary("memory"))
    assert "Allocated per step (KiB)" in memory.columns
    with pytest.raises(ValueError, match="unit must be one of"):
        perfkit_core.readable(ops, unit="min")


def test_runs_and_comparisons_name_no_report_module():
    """The notebook view reaches runs and comparisons from the report layer: neither the run
    module nor the comparison package names the report layer, not even as a string for a late
    import (``importlib.import_module("perfkit_core.report...")``)."""
    root = Path(perfkit_core.__file__).parent
    sources = [root / "events" / "run.py", *sorted((root / "comparison").glob("*.py"))]
    naming = [p.name for p in sources if "perfkit_core.report" in p.read_text()]
    assert not naming
