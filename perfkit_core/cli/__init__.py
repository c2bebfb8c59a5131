"""The ``perfkit`` command line. Bad input prints one line and exits 2, never a traceback.

The commands are here; options several commands share are in ``perfkit_core.cli.options``,
``perfkit peaks`` in ``perfkit_core.cli.peaks``, ``perfkit export`` in ``perfkit_core.cli.export``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click

from perfkit_core.advice.engine import UnknownRuleError
from perfkit_core.cli.export import export_command
from perfkit_core.cli.info import demo_command, info_command
from perfkit_core.cli.options import (
    ALL_STEPS_OPTION,
    EXPLAIN_OPTION,
    JOB_OPTIONS,
    LAYER_OPTIONS,
    MEASURE_OPTION,
    OPERATOR_OPTIONS,
    PEAK_OPTIONS,
    REPORT_FORMAT_OPTION,
    TIME_UNIT_OPTION,
)
from perfkit_core.cli.peaks import peaks_command
from perfkit_core.cli.serve import serve_command
from perfkit_core.errors import (
    OptionError,
    TraceError,
    UnknownViewError,
    printable,
    show_warning,
    writing,
)
from perfkit_core.report import render
from perfkit_core.report.comparison_model import DEFAULT_COMPARISON_VIEWS, REPORT_VIEWS
from perfkit_core.report.model import DEFAULT_VIEWS
from perfkit_core.views.operators import SORT_KEYS

#: Paths are checked by the commands themselves, which name the file and the reason in one
#: line (click's own checks print a usage message instead).
_PATH = click.Path(path_type=Path, readable=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfkit", prog_name="perfkit")
def cli() -> None:
    """Unified summaries of PyTorch and PaddlePaddle profiler traces."""


cli.add_command(peaks_command)
cli.add_command(info_command)
cli.add_command(demo_command)
cli.add_command(export_command)
cli.add_command(serve_command)


@cli.command()
@click.argument("path", type=_PATH)
@click.option(
    "--views",
    default=",".join(DEFAULT_VIEWS),
    show_default=True,
    help="Comma-separated views to show (those with no rows are left out).",
)
@TIME_UNIT_OPTION
@click.option("--top", type=int, default=30, show_default=True, help="Rows per table (0: all).")
@click.option(
    "--sort-by",
    type=click.Choice([*SORT_KEYS, "name"]),
    default="cpu_total",
    show_default=True,
    help="Sort key of the operator and user tables.",
)
@click.option(
    "--rank",
    type=int,
    default=None,
    help="Only this rank of a job (default: every rank, combined as each table says).",
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
@OPERATOR_OPTIONS[0]
@OPERATOR_OPTIONS[1]
@LAYER_OPTIONS[0]
@LAYER_OPTIONS[1]
@LAYER_OPTIONS[2]
@LAYER_OPTIONS[3]
@LAYER_OPTIONS[4]
@REPORT_FORMAT_OPTION
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="Samples per step, for throughput in samples/s (default: steps/s).",
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
@JOB_OPTIONS[0]
@JOB_OPTIONS[1]
@PEAK_OPTIONS[0]
@PEAK_OPTIONS[1]
@click.option(
    "--save",
    "save_to",
    type=click.Path(path_type=Path),
    default=None,
    help="Also save the run there (a job: a Parquet dataset partitioned by rank).",
)
@ALL_STEPS_OPTION
@EXPLAIN_OPTION
@click.pass_context
def report(
    ctx: click.Context,
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
    group_by: str,
    filter: str | None,
    max_depth: int | None,
    order_by: str | None,
    step: int | None,
    params: bool,
    select: str | None,
    fmt: str,
    batch_size: int | None,
    with_advice: bool,
    output: Path | None,
    scheduler: str | None,
    workers: int | None,
    peak_tflops: float | None,
    peak_bandwidth: float | None,
    save_to: Path | None,
    all_steps: bool,
    explain: bool,
) -> int:
    """Print the summaries of the run, trace or job at PATH.

    A job (a folder of per-rank traces, or a saved job) is analysed rank by rank on Dask: on
    the scheduler given by --scheduler or DASK_SCHEDULER_ADDRESS, else on a local cluster of
    worker processes started and closed here.
    """
    from perfkit_core.jobs import DEFAULT_JOB_VIEWS, is_job
    from perfkit_core.report.documents import report_of, report_source, view_options_of

    job = is_job(path) and rank is None
    if job and ctx.get_parameter_source("views") is click.core.ParameterSource.DEFAULT:
        views = ",".join(DEFAULT_JOB_VIEWS)
    names = [v.strip() for v in views.split(",") if v.strip()]
    requested = {
        "sort_by": sort_by,
        "rank": rank,
        "group_by_input_shape": group_by_input_shape,
        "group_by_stack_n": group_by_stack_n,
        "by_thread": by_thread,
        "op_detail": op_detail,
        "peak_tflops": peak_tflops,
        "peak_bandwidth": peak_bandwidth,
        "group_by": group_by,
        "filter": filter,
        "max_depth": max_depth,
        "order_by": order_by,
        "step": step,
        "params": params,
        "select": select,
    }
    source = report_source(
        path,
        names,
        view_options_of(names, requested),
        rank=rank,
        advice=with_advice,
        scheduler=scheduler,
        workers=workers,
        save_to=save_to,
        notify=_notify,
    )
    report_model, _ = report_of(
        path,
        names,
        requested=requested,
        time_unit=time_unit,
        top=top,
        advice=with_advice,
        batch_size=batch_size,
        steady=not all_steps,
        source=source,
    )
    _emit(render(report_model, fmt, explain=explain), output)
    return 2 if getattr(source, "missing_ranks", None) else 0  # a job's ranks left out


def _notify(line: str) -> None:
    click.echo(f"perfkit: {line}", err=True)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    from perfkit_core.events.atomic import write_bytes

    with writing(output):
        write_bytes(output, text.encode())
    click.echo(f"wrote {printable(str(output))}", err=True)


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
@MEASURE_OPTION
@JOB_OPTIONS[0]
@JOB_OPTIONS[1]
@ALL_STEPS_OPTION
@EXPLAIN_OPTION
def advise(
    path: Path,
    fmt: str,
    rules: str | None,
    output: Path | None,
    measure: bool,
    scheduler: str | None,
    workers: int | None,
    all_steps: bool,
    explain: bool,
) -> int:
    """Print what to change, most valuable first: each finding in a few lines (its saving and
    how sure it is, the evidence that carries it, the remedy); --explain prints it whole."""
    from perfkit_core.advice.engine import advice_note
    from perfkit_core.events.loading import load
    from perfkit_core.jobs import analyse_job, is_job
    from perfkit_core.report.finding_summary import finding_json
    from perfkit_core.report.json import dumps
    from perfkit_core.report.text import render_findings

    chosen = [r.strip() for r in rules.split(",")] if rules else None
    note = None
    job = None
    if is_job(path):
        if measure:
            raise OptionError(f"{path}: --measure replays one run's work; give it one rank's trace")
        job = analyse_job(
            path, (), rules=chosen, scheduler=scheduler, workers=workers, notify=_notify
        )
        findings = job.advise(rules=chosen)
    else:
        run = load(path)
        findings = run.advise(rules=chosen, measure=measure, steady=not all_steps)
        note = advice_note(run, steady=not all_steps)
    text = (
        dumps([finding_json(f) for f in findings])
        if fmt == "json"
        else render_findings(findings, note=note, explain=explain)
    )
    _emit(text, output)
    return 2 if job is not None and job.missing_ranks else 0


@cli.command("compare")
@click.argument("paths", nargs=-1, required=True, type=_PATH)
@click.option(
    "--labels", default=None, help="Comma-separated names for the runs (default: file names)."
)
@click.option(
    "--batch-sizes", default=None, help="Comma-separated batch size of each run (for --per sample)."
)
@click.option("--per", type=click.Choice(["step", "sample"]), default="step", show_default=True)
@click.option(
    "--views",
    default=",".join(DEFAULT_COMPARISON_VIEWS),
    show_default=True,
    help=f"Comma-separated tables: {', '.join(REPORT_VIEWS)}.",
)
@click.option(
    "--top",
    type=int,
    default=20,
    show_default=True,
    help="Rows of the ranked tables; the rest are summed into one row (0: all).",
)
@click.option(
    "--op-map",
    "op_map",
    type=_PATH,
    default=None,
    help="TOML (or YAML) file adding or overriding canonical-op mappings.",
)
@TIME_UNIT_OPTION
@REPORT_FORMAT_OPTION
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
@ALL_STEPS_OPTION
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
    op_map: Path | None,
    all_steps: bool,
) -> int:
    """Compare runs or traces side by side: which is faster, by how much, and why (the first
    run is the baseline); optionally gate on a regression."""
    from perfkit_core.cli.options import comparison_views
    from perfkit_core.comparison import compare
    from perfkit_core.report.comparison_model import build_comparison_report

    if len(paths) < 2:
        raise click.UsageError("compare needs at least two runs or traces")
    names = comparison_views(views)
    try:
        sizes = (
            [int(x) if x.strip() else None for x in batch_sizes.split(",")] if batch_sizes else None
        )
    except ValueError:
        raise click.UsageError(
            f"--batch-sizes must be whole numbers separated by commas, not {batch_sizes!r}"
        ) from None
    if sizes and any(size is not None and size <= 0 for size in sizes):
        raise click.UsageError(f"--batch-sizes must be positive, not {batch_sizes!r}")
    if per == "sample" and (not sizes or len(sizes) != len(paths) or None in sizes):
        raise click.UsageError("--per sample needs --batch-sizes with one size per run")
    try:
        comparison = compare(
            *paths,
            labels=labels.split(",") if labels else None,
            batch_sizes=sizes,
            per=per,
            op_map=op_map,
            steady=not all_steps,
        )
        gate = comparison.gate(fail_pct, metric) if fail_pct is not None else None
        model = build_comparison_report(
            comparison, names, time_unit=time_unit, top=top or None, gate=gate
        )
    except (ValueError, KeyError) as exc:
        raise click.UsageError(str(exc).strip("'\"")) from None
    _emit(render(model, fmt), output)
    if gate is not None:
        # The text report on standard output ends with the gate's line already; elsewhere (a
        # file, JSON, HTML) CI logs still get it once, on standard error.
        if output is not None or fmt != "text":
            click.echo(gate.message, err=True)
        return 1 if gate.regressed else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (2 with one line on stderr for bad input)."""
    from perfkit_core.progress import enable_for_cli

    enable_for_cli()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            result = cli.main(args=argv, prog_name="perfkit", standalone_mode=False)
    except (TraceError, UnknownViewError, OptionError, UnknownRuleError) as exc:
        click.echo(f"perfkit: error: {printable(str(exc))}", err=True)
        return 2
    except OSError as exc:  # a file the checks before reading it did not reach: still one line
        where = f"{printable(str(exc.filename))}: " if exc.filename is not None else ""
        click.echo(f"perfkit: error: {where}{exc.strerror or exc}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("perfkit: aborted", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return result if isinstance(result, int) else 0


def console_main() -> None:
    """Entry point of the ``perfkit`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
