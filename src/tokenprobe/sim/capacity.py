"""How much load one replica sustains under latency SLOs, and how many GPUs a rate needs.

`max_rate_per_s` bisects the Poisson arrival rate: a rate is sustainable when the simulated p90
TTFT and p90 TPOT meet the SLOs (each only if given) and the server keeps up: p90 queue time under
`max_queue_s` (overload shows as a queue that grows with every request). The upper bracket is the
replica's offline (saturated) throughput.
`gpus_needed` = ceil(rate / sustainable rate per replica) x GPUs per replica (data-parallel
replicas). Seed 003's example: raising the max output from 256 to 1024 tokens at the same rate
and TPOT SLO can turn 1 GPU into 3 (requirement P1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenprobe.cost import Deployment, SpecDecode
from tokenprobe.errors import ConfigError
from tokenprobe.sim.api import simulate, simulate_fleet
from tokenprobe.sim.base import SchedulerConfig
from tokenprobe.sim.engines import rank_router_for
from tokenprobe.workload import Arrival, LengthDist, Workload

MAX_QUEUE_S = 1.0


@dataclass(frozen=True, slots=True)
class Capacity:
    """The sustainable rate of one replica and what it was judged on."""

    max_rate_per_s: float
    saturated_rate_per_s: float
    ttft_p90_s: float | None
    tpot_p90_s: float | None
    num_gpus: int


def _workload(
    rate: float | None,
    input_len: LengthDist,
    output_len: LengthDist,
    n: int,
    prefix: tuple[int, int] = (0, 1),
) -> Workload:
    arrival = Arrival("offline") if rate is None else Arrival("poisson", rate_per_s=rate)
    return Workload(
        arrival, input_len, output_len, num_requests=n, shared_prefix_tokens=prefix[0],
        prefix_groups=prefix[1],
    )  # fmt: skip


def max_rate_per_s(
    dep: Deployment,
    input_len: LengthDist,
    output_len: LengthDist,
    *,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    config: SchedulerConfig | None = None,
    num_requests: int = 400,
    iterations: int = 10,
    seed: int = 0,
    max_queue_s: float = MAX_QUEUE_S,
    prefix: tuple[int, int] = (0, 1),
    spec_decode: SpecDecode | None = None,
    dp: int = 1,
    engine: str | None = None,
) -> Capacity:
    """Bisect the highest Poisson rate one replica sustains (module docstring). `prefix`:
    (shared prefix tokens, prefix groups) of the requests; `spec_decode` as for `simulate`;
    `dp` > 1: an attention-DP deployment's ranks, simulated stepping together
    (`simulate_fleet(dp=...)`, sim/dpep.py), dispatched to and padded as `engine` does (its
    preset: sim/engines.py `rank_router_for`, `pads_ranks`; None: round-robin, unpadded)."""
    if slo_ttft_s is None and slo_tpot_s is None:
        raise ConfigError("slo", None, "give slo_ttft_s and/or slo_tpot_s")
    config = config or SchedulerConfig()

    def run(rate: float | None) -> dict[str, object]:
        wl = _workload(rate, input_len, output_len, num_requests, prefix)
        if dp > 1:
            router = rank_router_for(engine) if engine else "round-robin"
            return simulate_fleet(
                dep, wl, dp=dp, router=router, config=config, seed=seed, engine=engine
            ).to_dict()
        return simulate(
            deployment=dep, workload=wl, config=config, seed=seed, spec_decode=spec_decode
        ).to_dict()

    saturated = float(run(None)["requests_per_s"] or 0.0)  # type: ignore[arg-type]
    lo, hi, best = 0.0, saturated, None
    for _ in range(iterations):
        mid = (lo + hi) / 2
        d = run(mid)
        ok = meets_slos(d, max_queue_s, slo_ttft_s, slo_tpot_s)
        lo, hi = (mid, hi) if ok else (lo, mid)
        if ok:
            best = d
    ttft = _p90(best, "ttft_s")
    tpot = _p90(best, "tpot_s")
    return Capacity(lo, saturated, ttft, tpot, dep.num_gpus)


def _p90(d: dict[str, object] | None, key: str) -> float | None:
    if d is None:
        return None
    stats = d[key]
    assert isinstance(stats, dict)
    value = stats["p90"]
    return None if value is None else float(value)


def meets_slos(
    d: dict[str, object], max_queue_s: float, slo_ttft_s: float | None, slo_tpot_s: float | None
) -> bool:
    """A simulation's `to_dict()` (one replica or a fleet) keeps up (p90 queue within
    `max_queue_s`) and meets the p90 SLOs that are given."""
    queue = _p90(d, "queue_s")
    if queue is None or queue > max_queue_s:
        return False
    ttft, tpot = _p90(d, "ttft_s"), _p90(d, "tpot_s")
    if slo_ttft_s is not None and (ttft is None or ttft > slo_ttft_s):
        return False
    return not (slo_tpot_s is not None and tpot is not None and tpot > slo_tpot_s)


def gpus_needed(rate_per_s: float, capacity: Capacity) -> int | None:
    """GPUs for `rate_per_s` with data-parallel replicas; None when no rate meets the SLOs."""
    if capacity.max_rate_per_s <= 0:
        return None
    return math.ceil(rate_per_s / capacity.max_rate_per_s) * capacity.num_gpus
