"""``perfkit peaks``: this machine's peak FLOP rates and memory bandwidth, measured once and
kept in the user's cache folder for the roofline of CPU runs, and the GPUs' datasheet peaks."""

from __future__ import annotations

import click


@click.command("peaks")
@click.option("--measure", is_flag=True, help="Measure again, even when a measurement is cached.")
@click.option(
    "--devices", is_flag=True, help="List the GPUs' datasheet peaks (with their sources) instead."
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0.1, max=60),
    default=2.0,
    show_default=True,
    help="About how long the measurement runs.",
)
def peaks_command(measure: bool, devices: bool, seconds: float) -> None:
    """Print this machine's peak TFLOP/s (float32, float64) and memory bandwidth (TB/s),
    measured with numpy the first time (or with --measure) and cached for the roofline of CPU
    runs recorded here; or, with --devices, the GPU peaks perfkit knows."""
    from perfkit_core.errors import printable
    from perfkit_core.views.costmodel.peaks import (
        DEVICE_PEAKS,
        PRECISIONS,
        cache_path,
        measure_peaks,
        read_measured,
        save_measured,
    )

    if devices:
        for entry in DEVICE_PEAKS:
            figures = ", ".join(
                f"{p} {entry.tflops[p]:g}" for p in PRECISIONS if entry.tflops.get(p)
            )
            click.echo(
                f"{entry.name}: {figures} TFLOP/s; {entry.bandwidth_tbps:g} TB/s ({entry.source})"
            )
        return
    record = None if measure else read_measured()
    if record is None:
        record = measure_peaks(seconds)
        path = save_measured(record)
        click.echo(f"measured; saved to {printable(str(path))}", err=True)
    else:
        click.echo(
            f"cached in {printable(str(cache_path()))} (--measure to measure again)", err=True
        )
    rates = ", ".join(f"{k} {v:.3f}" for k, v in record["tflops"].items())
    click.echo(
        f"{record['cpu']} ({record['cores']} cores) on {record['host']}, {record['measured_at']}: "
        f"{rates} TFLOP/s; memory bandwidth {record['bandwidth_tbps']:.4f} TB/s ({record['how']})"
    )
