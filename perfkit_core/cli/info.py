"""``perfkit info`` (the installed adapters, plugins and views) and ``perfkit demo`` (a small
training loop profiled in every installed framework, with its reports)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("info")
def info_command() -> None:
    """List the installed adapters (and how to add a missing one), other plugins and views."""
    from perfkit_core.plugins import get_plugin_manager
    from perfkit_core.plugins.known import adapter_status
    from perfkit_core.plugins.manager import adapter_distributions
    from perfkit_core.views import registered_views

    pm = get_plugin_manager()
    distributions = adapter_distributions()
    click.echo("Adapters:")
    for line in adapter_status(pm, distributions):
        click.echo(f"  {line}")
    others = [n for n, _ in pm.list_name_plugin() if n not in distributions and _ is not None]
    click.echo("Plugins:")
    for name in others:
        click.echo(f"  {name}")
    click.echo("Views:")
    for name, spec in sorted(registered_views().items()):
        click.echo(f"  {name}: {spec.description}")


@click.command("demo")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, readable=False),
    default=Path("perfkit_demo"),
    show_default=True,
)
@click.option("--steps", type=int, default=20, show_default=True)
def demo_command(out_dir: Path, steps: int) -> None:
    """Profile a small training loop in every installed framework and write the report."""
    from perfkit_core.plugins import get_plugin_manager
    from perfkit_core.report.demo import write_demo_reports

    results = get_plugin_manager().hook.perfkit_demo(directory=out_dir, steps=steps)
    runs = [Path(p) for result in results if result for p in result]
    if not runs:
        raise click.ClickException(
            "no framework is installed: install torch or paddlepaddle, and its perfkit adapter"
        )
    for text in write_demo_reports(runs, out_dir):
        click.echo(text)
    click.echo(f"browse the runs and their comparison: perfkit serve {out_dir}")
