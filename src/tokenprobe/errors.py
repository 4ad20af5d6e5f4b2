"""The exception tree of tokenprobe.

    TokenprobeError
    ├── ConfigError (also ValueError)   bad input: a field, its value and what is allowed
    │   ├── UnknownModelError           not in the catalog, not a config path; lists close names
    │   ├── UnknownHardwareError        not in the catalog; lists close names
    │   └── SchemaError                 a file that does not parse or has unknown/missing keys
    ├── TelemetryError                  NVML and other counters (carries the vendor code)
    └── ServerError                     a server that is not an OpenAI-compatible stream

The library raises these and never prints or exits; `cli.py` turns one into a single line and a
non-zero exit code.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TokenprobeError(Exception):
    """Root of every error tokenprobe raises on purpose."""


class ConfigError(TokenprobeError, ValueError):
    """Bad input: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r}: {allowed}")


def _closest(name: str, known: Iterable[str], n: int = 5) -> list[str]:
    return difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=n, cutoff=0.4)


class UnknownModelError(ConfigError):
    def __init__(self, name: str, known: Iterable[str]) -> None:
        close = _closest(name, known)
        hint = f"closest known: {', '.join(close)}" if close else "see `tokenprobe models`"
        super().__init__("model", name, f"not a catalog model, HF id or config path; {hint}")


class UnknownHardwareError(ConfigError):
    def __init__(self, name: str, known: Iterable[str]) -> None:
        close = _closest(name, known)
        hint = f"closest known: {', '.join(close)}" if close else "see `tokenprobe gpus`"
        super().__init__("gpu", name, f"not in the hardware catalog; {hint}")


class SchemaError(ConfigError):
    """A file that does not parse, or whose keys are unknown or missing."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__("file", path, problem)


class TelemetryError(TokenprobeError):
    def __init__(self, message: str, code: int | None = None) -> None:
        self.code = code
        super().__init__(message if code is None else f"{message} (code {code})")


class ServerError(TokenprobeError):
    """The server answered in a way no OpenAI-compatible streaming server would."""
