"""``perfkit serve LOGDIR``: the training list and the runs' pages in a browser."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import click

#: The port tried first when none is given (TensorBoard's profiler plugin users know 6006).
DEFAULT_PORT = 6007


def free_port(host: str, preferred: int = DEFAULT_PORT) -> int:
    """``preferred`` when nothing listens on it at ``host``, else a free port the system picks."""
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise click.UsageError(f"no free port on {host}")


@click.command("serve")
@click.argument(
    "logdir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path(".")
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=int, default=None, help=f"Port (default: {DEFAULT_PORT}, or a free one)."
)
@click.option("--open", "open_browser", is_flag=True, help="Open the list in a browser.")
@click.option(
    "--workers",
    type=click.IntRange(1, 16),
    default=1,
    show_default=True,
    help="Runs analysed at a time in the background, for the list's figures.",
)
def serve_command(
    logdir: Path, host: str, port: int | None, open_browser: bool, workers: int
) -> int:
    """Serve the runs under LOGDIR: a training list (live, as training writes runs), each run's
    pages (overview, operators, kernels, memory, layers, roofline, input pipeline, distributed,
    code) and the diff of any two. Nothing outside LOGDIR is served, and nothing is written."""
    from werkzeug.serving import run_simple

    from perfkit_core.serve import create_app

    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(
            f"perfkit: warning: serving on {host}: anyone who can reach this address can read "
            "the runs under the folder",
            err=True,
        )
    port = port if port is not None else free_port(host)
    app = create_app(logdir, workers=workers)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    click.echo(f"perfkit: serving {logdir} at {url} (Ctrl+C stops)", err=True)
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    # werkzeug's threaded server, as TensorBoard serves its own pages; its banner and a line per
    # request would bury the one line above
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    run_simple(host, port, app, threaded=True, use_reloader=False, use_debugger=False)
    return 0
