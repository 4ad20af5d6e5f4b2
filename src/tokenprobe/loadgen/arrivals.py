"""Open-loop arrival times: gamma-distributed gaps, as vLLM's `--request-rate --burstiness`.

Gap ~ Gamma(shape=k, scale=1/(rate*k)): mean 1/rate for every k; k = 1 is a Poisson process
(exponential gaps, coefficient of variation 1); k < 1 burstier (CV = 1/sqrt(k)); k -> inf
regular. vLLM's `benchmarks/benchmark_serving.py` (`get_request`) samples the same way. The first
request is sent at t = 0; the generator is seeded, so a schedule replays exactly.
"""

from __future__ import annotations

import numpy as np

from tokenprobe.errors import ConfigError

MAX_ARRIVALS = 10_000_000


def gaps_s(
    rate_per_s: float, burstiness: float, count: int, rng: np.random.Generator
) -> np.ndarray:
    """`count` gaps (s) between successive arrivals."""
    if not rate_per_s > 0 or not burstiness > 0:
        raise ConfigError("rate_per_s/burstiness", (rate_per_s, burstiness), "both > 0")
    return rng.gamma(shape=burstiness, scale=1.0 / (rate_per_s * burstiness), size=count)


def arrival_times_s(
    rate_per_s: float,
    burstiness: float,
    rng: np.random.Generator,
    count: int | None = None,
    until_s: float | None = None,
) -> np.ndarray:
    """Send times (s from the run's start, first at 0): `count` of them, or all before `until_s`."""
    if (count is None) == (until_s is None):
        raise ConfigError("arrivals", (count, until_s), "give exactly one of count, until_s")
    if count is not None:
        gaps = gaps_s(rate_per_s, burstiness, max(count - 1, 0), rng)
        return np.concatenate(([0.0], np.cumsum(gaps)))
    assert until_s is not None
    expected = int(rate_per_s * until_s)
    times = np.concatenate(([0.0], np.cumsum(gaps_s(rate_per_s, burstiness, expected, rng))))
    while times[-1] < until_s and times.size < MAX_ARRIVALS:
        more = times[-1] + np.cumsum(gaps_s(rate_per_s, burstiness, expected // 4 + 16, rng))
        times = np.concatenate((times, more))
    return times[times < until_s]
