"""The one reader of user files, and the one check on numbers entering from outside.

Every path a user names (config.json, a GPU or host TOML, a profile, a workload, a dataset, a run
folder's files, a CSV or Prometheus capture) is read here, so every OS error (missing, a
directory, unreadable, a FIFO that would block), every decoding error (binary, not UTF-8) and
every parse error (JSON, TOML) becomes one `SchemaError` naming the file and what is wrong,
never a traceback. Sizes are bounded (`MAX_FILE_BYTES`) so a stray multi-GiB file is refused
instead of read into memory.

`finite()` is the check every number from a user, a file or a server goes through where it
enters: NaN and ±inf are refused with the field named (Python's float() accepts "nan" and
"inf", and json.loads accepts NaN/Infinity, so neither the CLI parser nor the JSON reader
stops them).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.units import MiB

MAX_FILE_BYTES = 512 * MiB  # no input tokenprobe reads is near this; larger is a wrong file


def _describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file; SchemaError for anything that is not one or cannot be read."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise SchemaError(str(p), f"cannot read it: {_describe(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SchemaError(str(p), "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise SchemaError(str(p), "is not a regular file (a FIFO, socket or device)")
    if st.st_size > max_bytes:
        raise SchemaError(str(p), f"is {st.st_size:,} bytes; at most {max_bytes:,} are read")
    try:
        with p.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise SchemaError(str(p), f"cannot read it: {_describe(exc)}") from None
    if len(data) > max_bytes:
        raise SchemaError(str(p), f"is over {max_bytes:,} bytes; at most that many are read")
    return data


def read_text(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A UTF-8 text file (a BOM is dropped); SchemaError if it is binary or not UTF-8."""
    data = read_bytes(path, max_bytes=max_bytes)
    if b"\x00" in data:
        raise SchemaError(str(path), "is a binary file (it holds NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SchemaError(
            str(path), f"is not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})"
        ) from None


def names_a_file(path: str | os.PathLike[str]) -> bool:
    """True when something (a dangling link too) is at `path`; False where there is nothing or
    the OS cannot say: Path.exists() and is_file() raise for a name over 255 bytes
    (ENAMETOOLONG), which is what a long model or GPU name typed on a command line is."""
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in the name
        return False


def check_out_file(path: str | os.PathLike[str], field: str = "out") -> None:
    """Refuse an output file path before a long job, not after it (calibrate fits for minutes),
    and never block on it: a folder or a FIFO is refused; else the file is really opened for
    appending, then removed if this made it (os.access says yes to root everywhere, /proc too)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(field, str(p), "is a folder; give a file path")
    existed = names_a_file(p)
    if existed and not p.is_file():  # opening a FIFO for writing blocks until a reader comes
        raise ConfigError(field, str(p), "is not a regular file")
    try:
        with p.open("a"):
            pass
    except OSError as exc:
        raise ConfigError(field, str(p), f"cannot be written: {_describe(exc)}") from None
    if not existed:
        p.unlink(missing_ok=True)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _infinity_only(name: str) -> float:
    """Python's json writes float('inf') as Infinity, so configs saved by transformers carry it
    where a bound is open (NemotronHConfig's time_step_limit default (0.0, inf)); NaN is never
    a legitimate value and stays refused."""
    if name == "NaN":
        return _reject_constant(name)
    return math.inf if name == "Infinity" else -math.inf


def parse_json(text: str, source: str, *, infinity: bool = False) -> Any:
    """JSON text to Python objects; SchemaError naming `source`. NaN is refused, and so are
    Infinity/-Infinity unless `infinity` (Hugging Face configs, whose readers check every value
    they use with `finite` or an integer check, so an infinite one is refused where it matters)."""
    try:
        return json.loads(text, parse_constant=_infinity_only if infinity else _reject_constant)
    except RecursionError:
        raise SchemaError(source, "is nested too deeply to be JSON tokenprobe reads") from None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise SchemaError(source, f"is not valid JSON: {exc}") from None


def read_json(path: str | os.PathLike[str], *, infinity: bool = False) -> Any:
    return parse_json(read_text(path), str(path), infinity=infinity)


def parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    # a plain ValueError too: tomllib lets int()'s "Exceeds the limit (4300 digits)" through
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise SchemaError(source, f"is not valid TOML: {exc}") from None
    except RecursionError:
        raise SchemaError(source, "is nested too deeply to be TOML tokenprobe reads") from None


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    return parse_toml(read_text(path), str(path))


def finite(
    field: str,
    value: object,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
) -> float:
    """`value` as a finite float within [lo, hi] (or (lo, hi] with `lo_open`), else ConfigError.

    Booleans are refused (True is an int in Python, never a quantity a user meant); numpy
    scalars are numbers like any other (`numbers.Real`).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise ConfigError(field, value, "a number")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(field, value, "a number") from None
    if not math.isfinite(x):
        raise ConfigError(field, value, "a finite number (not NaN or infinity)")
    if lo is not None and (x <= lo if lo_open else x < lo):
        raise ConfigError(field, value, f"must be {'>' if lo_open else '>='} {lo:g}")
    if hi is not None and x > hi:
        raise ConfigError(field, value, f"must be <= {hi:g}")
    return x


__all__ = [
    "MAX_FILE_BYTES",
    "check_out_file",
    "finite",
    "names_a_file",
    "parse_json",
    "parse_toml",
    "read_bytes",
    "read_json",
    "read_text",
    "read_toml",
]
