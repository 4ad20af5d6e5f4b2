"""The typer application and the one place errors become a line on stderr and an exit code.

Exit codes: 0 success, 1 runtime failure (a TokenprobeError that is not bad input),
2 usage error (ConfigError: bad flag value, unknown model or GPU, unreadable file).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from tokenprobe.errors import ConfigError, TokenprobeError

app = typer.Typer(
    name="tokenprobe",
    help="What one LLM token really costs the hardware: estimate, simulate, measure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

T = TypeVar("T")


def guarded(fn: Callable[[], T]) -> T:
    """Run `fn`; turn a TokenprobeError into one line on stderr and exit 2 (input) or 1."""
    try:
        return fn()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except TokenprobeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None


def print_json(data: dict[str, Any]) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
