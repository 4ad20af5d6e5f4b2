"""Bounds and checks shared by every workload part (see the package docstring for the limits)."""

from __future__ import annotations

import math

from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.units import MiB

LENGTH_KINDS: tuple[str, ...] = ("fixed", "uniform", "normal", "lognormal", "empirical")
ARRIVAL_KINDS: tuple[str, ...] = ("poisson", "gamma", "constant", "offline", "closed", "trace")
MAX_REQUESTS = 10**7
MAX_LENGTH_TOKENS = 2**24
MAX_TRACE_BYTES = 128 * MiB
RATE_RANGE_PER_S = (1e-9, 1e9)
BURSTINESS_RANGE = (1e-6, 1e6)
MAX_LOGNORMAL_SIGMA = 10.0


def positive(name: str, value: object, hi: float = math.inf) -> None:
    finite(name, value, lo=0.0, lo_open=True, hi=None if math.isinf(hi) else hi)
    if isinstance(value, str):  # finite() reads "4" as 4; a spec's number is never text
        raise ConfigError(name, value, "a number, not text")


def nonnegative(name: str, value: object, hi: float = math.inf) -> None:
    finite(name, value, lo=0.0, hi=None if math.isinf(hi) else hi)
    if isinstance(value, str):
        raise ConfigError(name, value, "a number, not text")


def in_range(name: str, value: object, lo: float, hi: float) -> None:
    positive(name, value)
    finite(name, value, lo=lo, hi=hi)


def is_count(value: object, lo: int, hi: int) -> bool:
    """An int (not a bool) in [lo, hi]."""
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
