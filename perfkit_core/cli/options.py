"""Options several ``perfkit`` commands share: where a job runs, and the peaks the roofline
measures ops against; and the operator view's grouping and filter."""

from __future__ import annotations

import click

from perfkit_core.views.operators import GROUP_BY, OPTION_HELP

#: Where a job of several ranks runs (``report`` and ``advise``).
#: The unit of the times a report or comparison prints (``report``, ``compare``).
TIME_UNIT_OPTION = click.option(
    "--time-unit", type=click.Choice(["s", "ms", "us", "ns"]), default="ms", show_default=True
)
#: What form a report or comparison is written in (``report``, ``compare``).
REPORT_FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
)
#: Whether every recorded step counts (``report``, ``compare``, ``advise``): by default the
#: leading warm-up steps are left out of every step average (``perfkit_core.events.steady``).
ALL_STEPS_OPTION = click.option(
    "--all-steps",
    is_flag=True,
    default=False,
    help="Count every recorded step: do not leave leading warm-up steps (over 5x the median of "
    "the steps after them) out of the averages.",
)
#: Each finding whole (``advise``, ``report``): how its saving was estimated, every evidence
#: sentence and the remedy's notes, not only its short form.
EXPLAIN_OPTION = click.option(
    "--explain",
    is_flag=True,
    default=False,
    help="Print each finding whole: how its saving was estimated, all its evidence and the "
    "remedy's notes (by default each finding is a few lines).",
)
JOB_OPTIONS = (
    click.option(
        "--scheduler",
        envvar="DASK_SCHEDULER_ADDRESS",
        default=None,
        metavar="ADDRESS",
        help="Dask scheduler to analyse a job on (default: $DASK_SCHEDULER_ADDRESS, else a "
        "local cluster started and closed here).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        help="Worker processes of the local cluster (default: one per core, at most one per "
        "rank, as memory allows).",
    ),
)

#: ``advise --measure``: replays of the findings on this machine.
MEASURE_OPTION = click.option(
    "--measure",
    is_flag=True,
    help="Replay what can be replayed of each finding (the optimizer over the recorded "
    "parameter shapes) with and without its remedy on this machine, and use the measured saving.",
)

#: The device's peaks for the roofline and MFU views (``report``), replacing its datasheet's
#: or this machine's measured ones (``perfkit peaks``).
PEAK_OPTIONS = (
    click.option(
        "--peak-tflops",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Peak TFLOP/s to measure every op against (default: the GPU's datasheet peak of "
        "the op's precision, or on a CPU run this machine's from `perfkit peaks`).",
    ),
    click.option(
        "--peak-bandwidth",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Peak memory bandwidth in TB/s (default: the GPU's datasheet figure, or this "
        "machine's from `perfkit peaks`).",
    ),
)

#: The operator and user views' rows by type or by full name, and a regular-expression filter
#: over names and full names (``report``).
OPERATOR_OPTIONS = (
    click.option(
        "--group-by", type=click.Choice(GROUP_BY), default="type", help=OPTION_HELP["group_by"]
    ),
    click.option("--filter", default=None, help=OPTION_HELP["filter"]),
)


def comparison_views(views: str) -> list[str]:
    """The table names of ``compare --views`` (comma-separated); a usage error names the first
    unknown one."""
    from perfkit_core.report.comparison_model import REPORT_VIEWS

    names = [v.strip() for v in views.split(",") if v.strip()]
    unknown = [v for v in names if v not in REPORT_VIEWS]
    if unknown:
        raise click.UsageError(
            f"unknown comparison view {unknown[0]!r}; known: {', '.join(REPORT_VIEWS)}"
        )
    return names


#: The layers view's tree: depth, sibling order, one step, the weights under their layers
#: (``report``; ``--filter`` is shared with the operator view).
LAYER_OPTIONS = (
    click.option(
        "--max-depth",
        type=click.IntRange(min=1),
        default=None,
        help="layers view: show layers down to this depth (1: the outermost layers).",
    ),
    click.option(
        "--order-by",
        default=None,
        metavar="COLUMN",
        help="layers view: order each layer's children by this column, largest first, or by a "
        "figure's total (calls, host, gpu, flops, params, bytes, memory; default: call order); code view: "
        "order the functions by it (default: host_with_children_ns).",
    ),
    click.option(
        "--step",
        type=int,
        default=None,
        help="layers and code views: this step alone (default: the mean over the steps).",
    ),
    click.option(
        "--params",
        is_flag=True,
        help="layers view: list each weight with its shape under its layer.",
    ),
    click.option(
        "--select",
        default=None,
        metavar="FIGURES",
        help="layers view: only these figures, comma-separated: calls, host, gpu, flops, "
        "params, bytes, memory (default: all).",
    ),
)
