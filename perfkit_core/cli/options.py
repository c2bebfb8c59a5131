"""Options several ``perfkit`` commands share: where a job runs, and the peaks the roofline
measures ops against."""

from __future__ import annotations

import click

#: Where a job of several ranks runs (``report`` and ``advise``).
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
