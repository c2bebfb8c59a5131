"""The ``perfkit`` command line. Bad input prints one line and exits 2, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from perfkit_core.errors import OutputError, TraceError, TraceWarning, UnknownViewError, printable
from perfkit_core.report.model import DEFAULT_COMPARISON_VIEWS, DEFAULT_VIEWS
from perfkit_core.views.operators import SORT_KEYS

#: Paths are checked by the commands themselves, which name the file and the reason in one
#: line (click's own checks print a usage message instead).
_PATH = click.Path(path_type=Path, readable=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfkit", prog_name="perfkit")
def cli() -> None:
    """Unified summaries of PyTorch and PaddlePaddle profiler traces."""


@cli.command()
@click.argument("path", type=_PATH)
@click.option(
    "--views",
    default=",".join(DEFAULT_VIEWS),
    show_default=True,
    help="Comma-separated views to show (those with no rows are left out).",
)
@click.option(
    "--time-unit", type=click.Choice(["s", "ms", "us", "ns"]), default="ms", show_default=True
)
@click.option("--top", type=int, default=30, show_default=True, help="Rows per table (0: all).")
@click.option(
    "--sort-by",
    type=click.Choice([*SORT_KEYS, "name"]),
    default="cpu_total",
    show_default=True,
    help="Sort key of the operator and user tables.",
)
@click.option(
    "--rank", type=int, default=None, help="Only this rank (default: all ranks together)."
)
@click.option("--group-by-input-shape", is_flag=True, help="One row per operator and input shapes.")
@click.option(
    "--op-detail", is_flag=True, help="Show each operator's inner stages and kernels under it."
)
@click.option(
    "--by-thread", is_flag=True, help="One row per operator and thread instead of threads merged."
)
@click.option(
    "--group-by-stack-n",
    type=int,
    default=0,
    help="One row per operator and its top N stack frames.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
)
@click.option(
    "--advice/--no-advice",
    "with_advice",
    default=True,
    show_default=True,
    help="Put the advice findings before the tables.",
)
@click.option(
    "-o",
    "--output",
    type=_PATH,
    help="Write to this file instead of standard output.",
)
def report(
    path: Path,
    views: str,
    time_unit: str,
    top: int,
    sort_by: str,
    rank: int | None,
    group_by_input_shape: bool,
    op_detail: bool,
    by_thread: bool,
    group_by_stack_n: int,
    fmt: str,
    with_advice: bool,
    output: Path | None,
) -> None:
    """Print the summaries of the run or trace at PATH."""
    from perfkit_core.events.loading import load
    from perfkit_core.report.model import build_report
    from perfkit_core.views import get_view

    names = [v.strip() for v in views.split(",") if v.strip()]
    for name in names:
        get_view(name)
    run = load(path)
    requested = {
        "sort_by": sort_by,
        "rank": rank,
        "group_by_input_shape": group_by_input_shape,
        "group_by_stack_n": group_by_stack_n,
        "by_thread": by_thread,
        "op_detail": op_detail,
    }
    options = {name: _options_for(name, requested) for name in names}
    report_model = build_report(
        run, names, time_unit=time_unit, top=top or None, options=options, advice=with_advice
    )
    _emit(_render(report_model, fmt), output)


def _render(model: Any, fmt: str) -> str:
    from perfkit_core.report import render

    return render(model, fmt)


def _options_for(view: str, requested: dict[str, Any]) -> dict[str, Any]:
    """The report options ``view`` accepts (by its signature), leaving out unset ones."""
    import inspect

    from perfkit_core.views import get_view
    from perfkit_core.views.operators import host_event_table

    params = inspect.signature(get_view(view).function).parameters
    accepted = set(params)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        # operator and user pass their options on to host_event_table
        accepted |= set(inspect.signature(host_event_table).parameters)
    defaults = {"sort_by": "cpu_total", "rank": None, "group_by_stack_n": 0}
    return {
        key: value
        for key, value in requested.items()
        if key in accepted and value is not False and defaults.get(key, object()) != value
    }


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    from perfkit_core.events.atomic import write_bytes

    with writing(output):
        write_bytes(output, text.encode())
    click.echo(f"wrote {printable(str(output))}", err=True)


@contextlib.contextmanager
def writing(output: Path) -> Iterator[None]:
    """Turn an ``OSError`` raised while writing ``output`` into a one-line ``OutputError``
    naming ``output`` (and the part of the path at fault, when it is another)."""
    try:
        yield
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else None
        reason = exc.strerror or str(exc)
        if where and exc.errno in (errno.EEXIST, errno.ENOTDIR):
            blocker = next((p for p in [Path(where), *Path(where).parents] if p.is_file()), None)
            if blocker is not None:
                reason, where = f"{printable(str(blocker))} is a file, not a folder", None
        elif where and Path(where).name.startswith(".") and where.endswith(".tmp"):
            where = None  # the temporary file written beside the output
        if where and Path(where) != output and str(where) not in reason:
            reason = f"{reason} ({printable(where)})"
        raise OutputError(output, f"cannot write it: {reason}") from None


@cli.command()
@click.argument("path", type=_PATH)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--rules", default=None, help="Comma-separated rule ids to run (default: all).")
@click.option(
    "-o",
    "--output",
    type=_PATH,
    help="Write to this file instead of standard output.",
)
def advise(path: Path, fmt: str, rules: str | None, output: Path | None) -> None:
    """Print what to change, most valuable first, with the evidence and estimated saving."""
    from perfkit_core.events.loading import load
    from perfkit_core.report.json import dumps
    from perfkit_core.report.text import render_findings

    run = load(path)
    findings = run.advise(rules=[r.strip() for r in rules.split(",")] if rules else None)
    text = dumps([f.to_dict() for f in findings]) if fmt == "json" else render_findings(findings)
    _emit(text, output)


@cli.command("compare")
@click.argument("paths", nargs=-1, required=True, type=_PATH)
@click.option(
    "--labels", default=None, help="Comma-separated names for the runs (default: file names)."
)
@click.option(
    "--batch-sizes", default=None, help="Comma-separated batch size of each run (for --per sample)."
)
@click.option("--per", type=click.Choice(["step", "sample"]), default="step", show_default=True)
@click.option("--views", default=",".join(DEFAULT_COMPARISON_VIEWS), show_default=True)
@click.option(
    "--top", type=int, default=20, show_default=True, help="Rows of the ops table (0: all)."
)
@click.option(
    "--time-unit", type=click.Choice(["s", "ms", "us", "ns"]), default="ms", show_default=True
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on-regression",
    "fail_pct",
    type=float,
    default=None,
    help="Exit 1 when the last run is worse than the first by more than this percent (and than the noise).",
)
@click.option(
    "--metric",
    type=click.Choice(["step_time", "dataloader", "gpu_busy"]),
    default="step_time",
    show_default=True,
)
@click.option(
    "-o",
    "--output",
    type=_PATH,
    help="Write to this file instead of standard output.",
)
def compare_command(
    paths: tuple[Path, ...],
    labels: str | None,
    batch_sizes: str | None,
    per: str,
    views: str,
    top: int,
    time_unit: str,
    fmt: str,
    fail_pct: float | None,
    metric: str,
    output: Path | None,
) -> int:
    """Compare runs or traces side by side; optionally gate on a regression."""
    from perfkit_core.comparison import compare
    from perfkit_core.report.model import build_comparison_report

    if len(paths) < 2:
        raise click.UsageError("compare needs at least two runs or traces")
    names = [v.strip() for v in views.split(",") if v.strip()]
    sizes = [int(x) if x.strip() else None for x in batch_sizes.split(",")] if batch_sizes else None
    try:
        comparison = compare(
            *paths, labels=labels.split(",") if labels else None, batch_sizes=sizes, per=per
        )
        gate = comparison.gate(fail_pct, metric) if fail_pct is not None else None
        model = build_comparison_report(
            comparison, names, time_unit=time_unit, top=top or None, gate=gate
        )
    except (ValueError, KeyError) as exc:
        raise click.UsageError(str(exc).strip("'\"")) from None
    _emit(_render(model, fmt), output)
    if gate is not None:
        click.echo(gate.message, err=True)
        return 1 if gate.regressed else 0
    return 0


@cli.command("export")
@click.argument("path", type=_PATH)
@click.option(
    "--to", "to", type=click.Choice(["chrome", "folded", "csv", "parquet", "json"]), required=True
)
@click.option(
    "-o",
    "--output",
    type=_PATH,
    required=True,
    help="File (chrome, folded, json) or folder (csv, parquet).",
)
@click.option(
    "--metric",
    type=click.Choice(["cpu", "gpu"]),
    default="cpu",
    show_default=True,
    help="folded: self CPU time or device time.",
)
def export_command(path: Path, to: str, output: Path, metric: str) -> None:
    """Export a run: chrome trace, folded stacks, or every summary as CSV/Parquet/JSON."""
    from perfkit_core.events.loading import load
    from perfkit_core.report.export import export

    run = load(path)
    with writing(output):
        written = export(run, to, output, metric=metric)
    for target in written:
        click.echo(f"wrote {printable(str(target))}", err=True)


@cli.command()
def info() -> None:
    """List the installed adapters (and how to add a missing one), other plugins and views."""
    from perfkit_core.plugins import KNOWN_ADAPTERS, framework_infos, get_plugin_manager
    from perfkit_core.plugins.manager import adapter_distributions
    from perfkit_core.views import registered_views

    pm = get_plugin_manager()
    frameworks = {entry["framework"]: entry for entry in framework_infos(pm)}
    distributions = adapter_distributions()
    click.echo("Adapters:")
    for name, dist in sorted(distributions.items()):
        entry = frameworks.get(name)
        if pm.is_blocked(name):
            state = "disabled by PERFKIT_DISABLE_PLUGINS"
        elif entry is None:
            state = "adapts no framework"
        elif entry.get("installed"):
            state = f"{name} {entry.get('version')} installed"
        else:
            known = next((k for k in KNOWN_ADAPTERS if k.plugin == name), None)
            hint = f": {known.framework_install}" if known else ""
            state = f"{name} is not installed{hint}"
        click.echo(f"  {name} ({dist}): {state}")
    for known in KNOWN_ADAPTERS:
        if known.plugin not in distributions:
            click.echo(
                f"  {known.plugin}: not installed; to read {known.framework} profiles: {known.install}"
            )
    others = [n for n, _ in pm.list_name_plugin() if n not in distributions and _ is not None]
    click.echo("Plugins:")
    for name in others:
        click.echo(f"  {name}")
    click.echo("Views:")
    for name, spec in sorted(registered_views().items()):
        click.echo(f"  {name}: {spec.description}")


@cli.command()
@click.option(
    "--out",
    "out_dir",
    type=_PATH,
    default=Path("perfkit_demo"),
    show_default=True,
)
@click.option("--steps", type=int, default=20, show_default=True)
def demo(out_dir: Path, steps: int) -> None:
    """Profile a small training loop in every installed framework and write the report."""
    from perfkit_core.events.atomic import write_bytes
    from perfkit_core.events.loading import load
    from perfkit_core.plugins import get_plugin_manager
    from perfkit_core.report.model import build_comparison_report, build_report

    results = get_plugin_manager().hook.perfkit_demo(directory=out_dir, steps=steps)
    runs = [Path(p) for result in results if result for p in result]
    if not runs:
        raise click.ClickException(
            "no framework is installed: install torch or paddlepaddle, and its perfkit adapter"
        )
    loaded = []
    for run_dir in runs:
        run = load(run_dir)
        loaded.append(run)
        model = build_report(run, top=15)
        text = _render(model, "text")
        report_path = run_dir / "report.txt"
        write_bytes(report_path, text.encode())
        html_path = run_dir / "report.html"
        write_bytes(html_path, _render(model, "html").encode())
        click.echo(text)
        click.echo(f"run saved in {run_dir}; report in {report_path} and {html_path}\n")
    frameworks = {run.framework: run for run in loaded}
    if {"torch", "paddle"} <= set(frameworks):
        from perfkit_core.comparison import compare

        comparison = compare(frameworks["torch"], frameworks["paddle"], labels=["torch", "paddle"])
        pair = build_comparison_report(comparison, ("steps", "phases", "family"))
        text = _render(pair, "text")
        write_bytes(out_dir / "comparison.txt", text.encode())
        write_bytes(out_dir / "comparison.html", _render(pair, "html").encode())
        click.echo(text)
        click.echo(
            f"torch and paddle compared in {out_dir / 'comparison.txt'} and {out_dir / 'comparison.html'}"
        )


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (2 with one line on stderr for bad input)."""
    from perfkit_core.progress import enable_for_cli

    enable_for_cli()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            result = cli.main(args=argv, prog_name="perfkit", standalone_mode=False)
    except TraceError as exc:
        click.echo(f"perfkit: error: {exc}", err=True)
        return 2
    except UnknownViewError as exc:
        click.echo(f"perfkit: error: {exc}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("perfkit: aborted", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return result if isinstance(result, int) else 0


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """perfkit's own warnings as one line on stderr; others as Python shows them."""
    if issubclass(category, TraceWarning):
        click.echo(f"perfkit: warning: {printable(str(message))}", err=True)
    else:
        (file or sys.stderr).write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )


def console_main() -> None:
    """Entry point of the ``perfkit`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
