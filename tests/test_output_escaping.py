"""Names that break output formats: script markers on the comparison page, newlines and ``;``
in folded stacks."""

from __future__ import annotations

import json
import re
import shutil
import warnings

import pytest

import perfkit_core
from conftest import shared_trace
from perfkit_core.cli import main
from perfkit_core.errors import TraceWarning
from perfkit_core.report.export import folded_stacks

HOSTILE = "<!--<script>"


def test_comparison_page_keeps_script_markers_out_of_its_script(tmp_path):
    """Labels and file names holding ``<!--<script>`` and ``</script>``: the page's script holds
    neither marker (the HTML parser would end or swallow it, and sorting, search and charts would
    stop), and the chart data still reads back the exact labels."""
    folder = tmp_path / HOSTILE
    folder.mkdir()
    trace = folder / f"b{HOSTILE}.pt.trace.json.gz"
    shutil.copy(shared_trace("gloo_rank34"), trace)
    labels = [f"base{HOSTILE}", "new</script><!--"]
    out = tmp_path / "page.html"
    code = main(
        [
            "compare",
            str(shared_trace("gloo_rank34")),
            str(trace),
            "--labels",
            ",".join(labels),
            "--format",
            "html",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    page = out.read_text()
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    assert len(scripts) == 2  # Chart.js, then the page's own script with the chart data
    for script in scripts:
        assert "<!--" not in script and "<script" not in script.lower()
    call = scripts[-1].rsplit("perfkitCharts(", 1)[1].rstrip().removesuffix(");")
    specs = json.loads(call)  # \u003c reads back as "<"
    text = json.dumps(specs, ensure_ascii=False)
    # The difference chart's legend names the later run ("longer in <label>"), intact.
    assert f"longer in {labels[-1]}" in text
    # Outside the script the labels are text, escaped.
    assert "base&lt;!--&lt;script&gt;" in page
    assert "new&lt;/script&gt;&lt;!--" in page


def test_folded_stacks_keep_one_line_per_stack_whatever_the_names(tmp_path):
    run = perfkit_core.load(shared_trace("rank_non_gpu"))
    clean = folded_stacks(run)
    names = run.events["name"].cat.categories
    # Put a line break, a tab and the frame separator into some names.
    renamed = {n: (f"{n}\nsecond;line\t" if i % 3 == 0 else n) for i, n in enumerate(names)}
    run.events["name"] = run.events["name"].cat.rename_categories(renamed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = folded_stacks(run)
    said = [w for w in caught if issubclass(w.category, TraceWarning)]
    assert len(said) == 1 and "';'" in str(said[0].message)
    assert len(lines) == len(clean)
    for line, before in zip(lines, clean, strict=True):
        assert "\n" not in line and "\t" not in line
        stack, count = line.rsplit(" ", 1)
        before_stack, before_count = before.rsplit(" ", 1)
        assert count == before_count
        # As many frames as before: no ';' of a name became a frame separator.
        assert stack.count(";") == before_stack.count(";")
    out = tmp_path / "stacks.folded"
    out.write_text("\n".join(lines) + "\n")
    assert len(out.read_text().splitlines()) == len(clean)


@pytest.mark.parametrize("name", ["a;b", "a\nb", "a\r\nb", "a\x00b"])
def test_folded_frame_substitutions(name):
    from perfkit_core.report.export import _FOLDED_UNSAFE, _folded_substitute

    frame = _FOLDED_UNSAFE.sub(_folded_substitute, name)
    assert ";" not in frame and not any(ord(c) < 32 for c in frame)
    assert frame.startswith("a") and frame.endswith("b")


#: What a name must not do to the terminal a report is read on: clear the screen, retitle the
#: window, hide a link behind text, ring the bell, overwrite the line.
TERMINAL_CONTROL = ["\x1b[2J", "\x1b]0;owned\x07", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\r"]


def test_text_output_escapes_control_characters_in_names(tmp_path, capsys):
    """Every name of a real GPU trace given a terminal control sequence: the text report (headline,
    header, advice, tables), ``advise`` and ``compare`` print it escaped (``\\x1b[2J``), and
    nothing they print holds a control character but the line breaks."""
    original = shared_trace("v100_rank1")
    run = perfkit_core.load(original)
    names = run.events["name"].cat.categories
    hostile = {n: f"{TERMINAL_CONTROL[i % 4]}{n}" for i, n in enumerate(names)}
    run.events["name"] = run.events["name"].cat.rename_categories(hostile)
    run.meta["source"] = f"{run.meta['source']}\x1b[2J"
    saved = run.save(tmp_path / "hostile")
    for argv in (
        ["report", str(saved), "--op-detail"],
        ["advise", str(saved)],
        ["compare", str(original), str(saved)],
    ):
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        assert "\\x1b[2J" in out, argv
        controls = {c for c in out if not c.isprintable() and c != "\n"}
        assert not controls, (argv, controls)
