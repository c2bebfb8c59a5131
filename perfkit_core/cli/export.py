"""``perfkit export``: a run as a Chrome trace, folded stacks, a pprof profile, or its summaries
as files."""

from __future__ import annotations

from pathlib import Path

import click

from perfkit_core.errors import printable, writing

#: Paths are checked by the command itself (see ``perfkit_core.cli``).
_PATH = click.Path(path_type=Path, readable=False)


@click.command("export")
@click.argument("path", type=_PATH)
@click.option(
    "--to",
    "to",
    type=click.Choice(["chrome", "folded", "pprof", "csv", "parquet", "json"]),
    required=True,
)
@click.option(
    "-o",
    "--output",
    type=_PATH,
    required=True,
    help="File (chrome, folded, pprof, json) or folder (csv, parquet).",
)
@click.option(
    "--metric",
    type=click.Choice(["cpu", "gpu"]),
    default="cpu",
    show_default=True,
    help="folded: self CPU time or device time.",
)
def export_command(path: Path, to: str, output: Path, metric: str) -> None:
    """Export a run: chrome trace, folded stacks, a pprof profile (Python functions, else the
    layer tree), or every summary as CSV/Parquet/JSON."""
    from perfkit_core.events.loading import load
    from perfkit_core.report.export import export

    run = load(path)
    with writing(output):
        written = export(run, to, output, metric=metric)
    for target in written:
        click.echo(f"wrote {printable(str(target))}", err=True)
