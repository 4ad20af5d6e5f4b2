"""The typer application and the one place errors become a line on stderr and an exit code.

Exit codes: 0 success, 1 runtime failure (a TokenprobeError that is not bad input),
2 usage error (ConfigError: bad flag value, unknown model or GPU, unreadable file).

One name per concept across commands (`--weight-dtype`, `--gpu`, `--gpu-hour-usd`,
`--slo-ttft-s`, ...). Names that earlier versions documented stay accepted as hidden aliases
(`ALIASES`), rewritten before click parses the command line, so `--help` lists one name each.
Every float option is checked finite where it enters (click's FLOAT accepts "nan" and "inf").
"""

from __future__ import annotations

import errno
import json
import math
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from tokenprobe.errors import ConfigError, TokenprobeError

# command -> {old flag: canonical flag}; each old flag was documented in an earlier README
ALIASES: dict[str, dict[str, str]] = {
    "compare": {
        "--gpus": "--gpu",
        "--dtypes": "--weight-dtype",
        "--weight-dtypes": "--weight-dtype",
        "--kv-dtypes": "--kv-dtype",
    },
    "plan": {
        "--gpus": "--gpu",
        "--dtypes": "--weight-dtype",
        "--slo-ttft-p90": "--slo-ttft-s",
        "--slo-tpot-p90": "--slo-tpot-s",
        "--price-per-gpu-hour": "--gpu-hour-usd",
        "--request-rate": "--rate",
        "--num-prompts": "--num-requests",
    },
    "profile": {"--dtype": "--weight-dtype"},
    "estimate": {"--server-overhead": "--server-overhead-fraction"},
    "simulate": {"--request-rate": "--rate", "--num-prompts": "--num-requests"},
    "report": {"--request-rate": "--rate", "--num-prompts": "--num-requests"},
    # vllm bench serve, GuideLLM (--max-requests, --max-seconds) and AIPerf (--request-count)
    "bench": {
        "--request-rate": "--rate",
        "--num-prompts": "--num-requests",
        "--max-requests": "--num-requests",
        "--request-count": "--num-requests",
        "--max-seconds": "--duration-s",
    },
}


def rewrite_aliases(command: str, args: list[str]) -> list[str]:
    """`--old VALUE` / `--old=VALUE` -> the canonical flag; anything after `--` stays as is."""
    table = ALIASES.get(command, {})
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, sep, value = arg.partition("=")
        out.append(table[name] + sep + value if name in table else arg)
    return out


def _check_finite(cmd: Any, values: dict[str, Any]) -> None:
    for param in cmd.params:
        value = values.get(param.name or "")
        for v in value if isinstance(value, list | tuple) else [value]:
            if isinstance(v, float) and not math.isfinite(v):
                flag = max(getattr(param, "opts", None) or [param.name or "?"], key=len)
                raise ConfigError(flag.lstrip("-").replace("-", "_"), v, "a finite number")


class Commands(TyperGroup):
    """The sub-commands, with hidden flag aliases and a finite check on every float option."""

    # Any: typer vendors its own click (typer._click) in recent versions, the real one before
    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None and name is not None:
            rest = rewrite_aliases(name, rest)
            callback = cmd.callback
            if callback is not None and not getattr(callback, "_finite_checked", False):
                cmd.callback = _finite_first(cmd, callback)
        return name, cmd, rest


def _finite_first(cmd: Any, callback: Callable[..., Any]) -> Callable[..., Any]:
    """The command, guarded as a whole: finite numbers first, then any TokenprobeError or OS
    error (an `--out` that is a file, unwritable, on a full disk) as one line and its code."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        guarded(lambda: _check_finite(cmd, kwargs))
        return guarded(lambda: callback(*args, **kwargs))

    wrapped._finite_checked = True  # type: ignore[attr-defined]
    return wrapped


def _version() -> str:
    try:
        return version("tokenprobe")
    except PackageNotFoundError:  # run from a source tree without an install
        return "unknown"


app = typer.Typer(
    name="tokenprobe",
    cls=Commands,
    help="What one LLM token really costs the hardware: estimate, simulate, measure.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
# soft_wrap: an error is one line whatever the terminal's width (a path is never broken)
err_console = Console(stderr=True, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"tokenprobe {_version()}\n")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print tokenprobe's version and exit.",
    ),
) -> None:
    """What one LLM token really costs the hardware: estimate, simulate, measure."""


T = TypeVar("T")


def guarded(fn: Callable[[], T]) -> T:
    """Run `fn`; turn a TokenprobeError into one line on stderr and exit 2 (input) or 1."""
    try:
        return fn()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    except TokenprobeError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    except OSError as exc:
        err_console.print(f"[bold red]error:[/] {escape(os_error_line(exc))}", highlight=False)
        raise typer.Exit(1 if exc.errno in RUNTIME_ERRNOS else 2) from None


# a full disk, a lost connection or a quota is the machine's state now, not the user's input
RUNTIME_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EPIPE, errno.ECONNRESET}


def os_error_line(exc: OSError) -> str:
    """`file='PATH': REASON`, the shape of a SchemaError, from an OS error."""
    reason = {
        errno.EEXIST: "exists and is not a folder",
        errno.ENOTDIR: "a part of the path is a file, not a folder",
    }.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    if exc.filename is None:
        return reason
    return f"file={str(exc.filename)!r}: {reason[0].lower()}{reason[1:]}"


def print_json(data: dict[str, Any]) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
