"""`tokenprobe serve`: the local web app (calculator, what-if panel, run browser)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenprobe.cli.app import app, console, err_console

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port")] = 8080,
    runs_dir: Annotated[
        Path, typer.Option(help="Folder of run folders for the run browser")
    ] = Path("runs"),
) -> None:
    """Serve the calculator and run browser at http://HOST:PORT/ until Ctrl-C."""
    from tokenprobe.web import serve

    if runs_dir.exists() and not runs_dir.is_dir():
        err_console.print(f"[bold red]error:[/] runs_dir={str(runs_dir)!r}: is not a folder")
        raise typer.Exit(2)
    if host not in LOOPBACK:
        err_console.print(
            f"[yellow]warning:[/] binding {host}: anyone who can reach it can use the app"
        )
    console.print(f"tokenprobe: http://{host}:{port}/  (runs from {runs_dir.resolve()})")
    serve(host=host, port=port, runs_dir=runs_dir)
