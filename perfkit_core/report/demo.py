"""The demo's reports: each demo run's text and HTML report, and the comparison of torch with
each other framework that ran, written next to the runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from perfkit_core.comparison import compare
from perfkit_core.events.atomic import write_bytes
from perfkit_core.events.loading import load
from perfkit_core.report import render
from perfkit_core.report.comparison_model import build_comparison_report
from perfkit_core.report.model import build_report


def write_demo_reports(runs: list[Path], out_dir: Path) -> Iterator[str]:
    """Write ``report.txt`` and ``report.html`` into each run folder, and ``comparison.txt`` /
    ``comparison.html`` into ``out_dir`` when a torch and a paddle run are among ``runs``
    (``comparison_torch_jax.*`` / ``comparison_torch_tensorflow.*`` /
    ``comparison_torch_mindspore.*`` for a JAX, TF or MindSpore run);
    yield what to print as each is written (the text report, then where the files are)."""
    frameworks = {}
    for run_dir in runs:
        run = load(run_dir)
        frameworks[run.framework] = run
        model = build_report(run, top=15)
        text = render(model, "text")
        report_path = run_dir / "report.txt"
        html_path = run_dir / "report.html"
        write_bytes(report_path, text.encode())
        write_bytes(html_path, render(model, "html").encode())
        yield text
        yield f"run saved in {run_dir}; report in {report_path} and {html_path}\n"
    for other in ("paddle", "jax", "tensorflow", "mindspore"):
        if not {"torch", other} <= set(frameworks):
            continue
        comparison = compare(frameworks["torch"], frameworks[other], labels=["torch", other])
        pair = build_comparison_report(comparison)
        text = render(pair, "text")
        # torch against paddle keeps its historical name; other pairs are named after both.
        stem = "comparison" if other == "paddle" else f"comparison_torch_{other}"
        write_bytes(out_dir / f"{stem}.txt", text.encode())
        write_bytes(out_dir / f"{stem}.html", render(pair, "html").encode())
        yield text
        yield (
            f"torch and {other} compared in {out_dir / f'{stem}.txt'} and "
            f"{out_dir / f'{stem}.html'}"
        )
