"""Length distributions (token counts >= 1) and empirical length files."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import read_text
from tokenprobe.workload.checks import (
    LENGTH_KINDS,
    MAX_LENGTH_TOKENS,
    MAX_LOGNORMAL_SIGMA,
    MAX_REQUESTS,
    MAX_TRACE_BYTES,
    is_count,
    nonnegative,
    positive,
)


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A distribution of token counts (integers >= 1); see the module docstring for the kinds."""

    kind: str = "fixed"
    value: int = 0
    low: int = 0
    high: int = 0
    mean: float = 0.0
    std: float = 0.0
    sigma: float = 0.0
    values: tuple[int, ...] = ()
    name: str = "tokens"

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ConfigError(f"{self.name}.kind", self.kind, f"one of {', '.join(LENGTH_KINDS)}")
        _LENGTH_CHECKS[self.kind](self)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` token counts (int64, each >= 1)."""
        raw = _LENGTH_SAMPLERS[self.kind](self, rng, n)
        # clipped before the cast: a float beyond int64 would wrap to a negative count
        counts: np.ndarray = np.clip(np.rint(raw), 1, MAX_LENGTH_TOKENS).astype(np.int64)
        return counts

    @property
    def expected(self) -> float:
        """The distribution's mean (tokens), before rounding and clipping."""
        return {
            "fixed": float(self.value),
            "uniform": (self.low + self.high) / 2,
            "normal": self.mean,
            "lognormal": self.mean,
            "empirical": float(np.mean(self.values)) if self.values else 0.0,
        }[self.kind]


_TOKENS = f"an integer in [1, {MAX_LENGTH_TOKENS}] (2^24)"


def _check_fixed(d: LengthDist) -> None:
    if not is_count(d.value, 1, MAX_LENGTH_TOKENS):
        raise ConfigError(d.name, d.value, f"a token count must be {_TOKENS}")


def _check_uniform(d: LengthDist) -> None:
    for key in ("low", "high"):
        if not is_count(getattr(d, key), 1, MAX_LENGTH_TOKENS):
            raise ConfigError(f"{d.name}.{key}", getattr(d, key), _TOKENS)
    if not d.low <= d.high:
        raise ConfigError(f"{d.name}.low/high", (d.low, d.high), "need 1 <= low <= high")


def _check_normal(d: LengthDist) -> None:
    positive(f"{d.name}.mean", d.mean, MAX_LENGTH_TOKENS)
    nonnegative(f"{d.name}.std", d.std, MAX_LENGTH_TOKENS)


def _check_lognormal(d: LengthDist) -> None:
    positive(f"{d.name}.mean", d.mean, MAX_LENGTH_TOKENS)
    nonnegative(f"{d.name}.sigma", d.sigma, MAX_LOGNORMAL_SIGMA)


def _check_empirical(d: LengthDist) -> None:
    values = d.values
    if not isinstance(values, tuple) or not values or len(values) > MAX_REQUESTS:
        shown = values[:5] if isinstance(values, tuple | list) else values
        raise ConfigError(f"{d.name}.values", shown, f"a list of 1 to {MAX_REQUESTS} counts")
    bad = next((v for v in values if not is_count(v, 1, MAX_LENGTH_TOKENS)), None)
    if bad is not None:
        raise ConfigError(f"{d.name}.values", bad, f"each value {_TOKENS}")


_LENGTH_CHECKS: dict[str, Callable[[LengthDist], None]] = {
    "fixed": _check_fixed,
    "uniform": _check_uniform,
    "normal": _check_normal,
    "lognormal": _check_lognormal,
    "empirical": _check_empirical,
}
_LENGTH_SAMPLERS: dict[str, Callable[[LengthDist, np.random.Generator, int], np.ndarray]] = {
    "fixed": lambda d, _rng, n: np.full(n, d.value),
    "uniform": lambda d, rng, n: rng.integers(d.low, d.high, size=n, endpoint=True),
    "normal": lambda d, rng, n: rng.normal(d.mean, d.std, size=n),
    "lognormal": lambda d, rng, n: rng.lognormal(math.log(d.mean) - d.sigma**2 / 2, d.sigma, n),
    "empirical": lambda d, rng, n: rng.choice(np.asarray(d.values), size=n),
}


def fixed(tokens: int, name: str = "tokens") -> LengthDist:
    return LengthDist("fixed", value=tokens, name=name)


def read_lengths_file(path: str | Path, name: str = "tokens") -> LengthDist:
    """An empirical distribution from a file of one integer per line (blank and # lines skipped)."""
    p = Path(path)
    lines = read_text(p, max_bytes=MAX_TRACE_BYTES).splitlines()
    values: list[int] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            value = int(text)
        except ValueError:
            raise SchemaError(f"{p}:{number}", f"{text[:40]!r} is not an integer") from None
        if not 1 <= value <= MAX_LENGTH_TOKENS:
            raise SchemaError(f"{p}:{number}", f"{name}={value}: {_TOKENS}")
        values.append(value)
    if not values:
        raise SchemaError(str(p), f"holds no {name} count")
    if len(values) > MAX_REQUESTS:
        raise SchemaError(str(p), f"holds {len(values):,} counts; at most {MAX_REQUESTS:,}")
    return LengthDist("empirical", values=tuple(values), name=name)
