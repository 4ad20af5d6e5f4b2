"""Arrival processes: the one home of arrival times for the simulator and the load generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tokenprobe.errors import ConfigError
from tokenprobe.workload.checks import (
    ARRIVAL_KINDS,
    BURSTINESS_RANGE,
    MAX_REQUESTS,
    RATE_RANGE_PER_S,
    in_range,
    is_count,
)
from tokenprobe.workload.request import RequestSpec


@dataclass(frozen=True, slots=True)
class Arrival:
    """How requests arrive; see the module docstring for the kinds and their parameters."""

    kind: str = "poisson"
    rate_per_s: float = 0.0
    burstiness: float = 1.0
    concurrency: int = 0
    trace: tuple[RequestSpec, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ARRIVAL_KINDS:
            raise ConfigError("arrival.kind", self.kind, f"one of {', '.join(ARRIVAL_KINDS)}")
        if self.kind in ("poisson", "gamma", "constant"):
            in_range("rate_per_s", self.rate_per_s, *RATE_RANGE_PER_S)
        if self.kind == "gamma":
            in_range("burstiness", self.burstiness, *BURSTINESS_RANGE)
        if self.kind == "closed" and not is_count(self.concurrency, 1, MAX_REQUESTS):
            raise ConfigError("concurrency", self.concurrency, f"an integer in [1, {MAX_REQUESTS}]")
        if self.kind == "trace" and not self.trace:
            raise ConfigError("arrival.trace", "()", "a trace with at least one request")
        if len(self.trace) > MAX_REQUESTS:
            raise ConfigError("arrival.trace", len(self.trace), f"at most {MAX_REQUESTS} requests")

    @property
    def closed_loop(self) -> bool:
        return self.kind == "closed"


def _gaps_gamma(a: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.gamma(shape=a.burstiness, scale=1.0 / (a.rate_per_s * a.burstiness), size=n)


ARRIVALS: dict[str, Callable[[Arrival, np.random.Generator, int], np.ndarray]] = {
    "poisson": lambda a, rng, n: rng.exponential(1.0 / a.rate_per_s, size=n),
    "gamma": _gaps_gamma,
    "constant": lambda a, _rng, n: np.full(n, 1.0 / a.rate_per_s),
    "offline": lambda _a, _rng, n: np.zeros(n),
    "closed": lambda _a, _rng, n: np.zeros(n),
}
"""Gap generators: n inter-arrival gaps (s); arrival i = sum of the first i gaps (first at 0)."""


def arrival_times_s(arrival: Arrival, rng: np.random.Generator, n: int) -> np.ndarray:
    gaps = ARRIVALS[arrival.kind](arrival, rng, n)
    return np.concatenate(([0.0], np.cumsum(gaps[:-1]))) if n else np.zeros(0)
