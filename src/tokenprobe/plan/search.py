"""Capacity planning from the request distribution under SLOs (P1).

Search GPU type x precision x TP x batch cap x power cap x node topology x speculative decoding
x how it is served (aggregated replicas behind each router, or P:D disaggregated workers). Each
deployment is pruned by the cost model and then judged as a fleet by the simulator at the
requested rate (plan/fleet.py): not one replica multiplied by a count, so routing imbalance,
prefix locality and the prefill/decode split count (the same tokens in a different request mix
need different hardware: seed 003). GPUs = replicas (or workers) x TP; cost = GPUs x price per
GPU-hour (or the GPU count when no price is given).

Costs per million tokens split the fleet's GPU-hours at the requested rate between input and
output tokens by the prefill and decode energy shares the fleet's simulation measured (prefill
work is charged to input tokens, decode work to output tokens, as the simulator's energy
accounting does). Equal costs rank by the fleet's SLO headroom (its worst p90 over the SLO).
The Pareto front is over (output tokens/s per GPU, interactivity = 1 / p90 TPOT). Deployments
run in a process pool (one worker per core by default) or, for searches that outgrow one
machine, as Ray tasks on a cluster (`ray_address`).
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from tokenprobe.errors import ConfigError
from tokenprobe.plan.candidate import Candidate, Outcome
from tokenprobe.plan.fleet import evaluate_group
from tokenprobe.plan.request import PlanRequest, typical
from tokenprobe.units import MEGA, SECONDS_PER_HOUR
from tokenprobe.workload import LengthDist, fixed


def _priced(req: PlanRequest, o: Outcome) -> Outcome:
    """The fleet's $/h, and per million tokens at the requested rate (module docstring)."""
    if not o.feasible:
        return o
    price = req.prices_per_gpu_hour.get(o.candidate.gpu)
    if price is None:
        return o
    per_hour = o.gpus * price
    per_s = per_hour / SECONDS_PER_HOUR
    in_tps = req.rate_per_s * typical(req.input_len)
    out_tps = req.rate_per_s * typical(req.output_len)
    return replace(
        o, cost_per_hour=per_hour,
        usd_per_million_input_tokens=per_s * o.prefill_share / in_tps * MEGA,
        usd_per_million_output_tokens=per_s * (1 - o.prefill_share) / out_tps * MEGA,
    )  # fmt: skip


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    outcomes: list[Outcome]
    simulations: int = 0  # simulator runs the search spent

    @property
    def feasible(self) -> list[Outcome]:
        """Cheapest first; equal costs by SLO headroom (every fleet serves the same rate, so
        its tokens/s per GPU only follow its GPU count), then by tokens/s per GPU."""
        key: Callable[[Outcome], tuple[float, float, float]] = lambda o: (  # noqa: E731
            o.cost_per_hour if o.cost_per_hour is not None else float(o.gpus),
            o.slo_ratio if o.slo_ratio is not None else math.inf,
            -o.output_tokens_per_s_per_gpu,
        )
        return sorted((o for o in self.outcomes if o.feasible), key=key)

    @property
    def nearest_miss(self) -> Outcome | None:
        misses = [o for o in self.outcomes if not o.feasible and not math.isinf(o.miss)]
        return min(misses, key=lambda o: o.miss) if misses else None

    def pareto(self) -> list[Outcome]:
        """Feasible candidates not beaten on both tokens/s per GPU and 1 / p90 TPOT."""
        pts = [o for o in self.outcomes if o.feasible and o.tpot_p90_s]
        front = []
        for o in pts:
            assert o.tpot_p90_s is not None
            dominated = any(
                p.output_tokens_per_s_per_gpu >= o.output_tokens_per_s_per_gpu
                and p.tpot_p90_s is not None
                and p.tpot_p90_s <= o.tpot_p90_s
                and (p.output_tokens_per_s_per_gpu, p.tpot_p90_s)
                != (o.output_tokens_per_s_per_gpu, o.tpot_p90_s)
                for p in pts
            )
            if not dominated:
                front.append(o)
        return sorted(front, key=lambda o: -o.output_tokens_per_s_per_gpu)

    def to_dict(self) -> dict[str, Any]:
        best = self.feasible
        miss = self.nearest_miss
        return {
            "model": self.request.model,
            "rate_per_s": self.request.rate_per_s,
            "slo_ttft_p90_s": self.request.slo_ttft_p90_s,
            "slo_tpot_p90_s": self.request.slo_tpot_p90_s,
            "feasible": [o.to_dict() for o in best],
            "best": best[0].to_dict() if best else None,
            "message": None if best else "no deployment meets these SLOs",
            "nearest_miss": None if best or miss is None else miss.to_dict(),
            "pareto": [o.candidate.label for o in self.pareto()],
            "rejected": [o.to_dict() for o in self.outcomes if not o.feasible],
            "candidates": len(self.outcomes),
            "simulated_candidates": sum(o.simulated for o in self.outcomes),
            "simulations": self.simulations,
        }


def deployment_groups(cands: Sequence[Candidate]) -> list[list[Candidate]]:
    """Candidates that share one deployment and differ only in how it is served (router,
    disaggregation): judged together, so one replica's capacity is bisected once."""
    out: dict[Candidate, list[Candidate]] = {}
    for c in cands:
        out.setdefault(replace(c, router=None, disaggregate=None), []).append(c)
    return list(out.values())


def _evaluate_one(args: tuple[PlanRequest, list[Candidate]]) -> tuple[list[Outcome], int]:
    return evaluate_group(*args)


def plan(
    req: PlanRequest,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    ray_address: str | None = None,
) -> Plan:
    """Evaluate every deployment (a process pool when workers > 1, or a Ray cluster when
    `ray_address` is given: "local" starts one here) and rank the feasible candidates.
    `progress(done, total)` counts deployments (`deployment_groups`)."""
    todo = deployment_groups(req.candidates)
    if ray_address is not None:
        results = _evaluate_on_ray(req, todo, ray_address, progress)
        return _plan(req, results)
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise ConfigError("workers", workers, "a positive number of processes")
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    results = []
    if n_workers <= 1 or len(todo) == 1:
        for i, group in enumerate(todo):
            results.append(evaluate_group(req, group))
            if progress:
                progress(i + 1, len(todo))
    else:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            for i, outcome in enumerate(pool.map(_evaluate_one, [(req, g) for g in todo])):
                results.append(outcome)
                if progress:
                    progress(i + 1, len(todo))
    return _plan(req, results)


def _plan(req: PlanRequest, results: list[tuple[list[Outcome], int]]) -> Plan:
    outcomes = [_priced(req, o) for group, _ in results for o in group]
    return Plan(req, outcomes, sum(n for _, n in results))


def _evaluate_on_ray(
    req: PlanRequest,
    todo: Sequence[list[Candidate]],
    address: str,
    progress: Callable[[int, int], None] | None,
) -> list[tuple[list[Outcome], int]]:
    """One Ray task per deployment (`deployment_groups`); the workers need tokenprobe
    installed (optional extra `tokenprobe[ray]` on every node)."""
    try:
        ray: Any = importlib.import_module("ray")
    except ImportError:
        raise ConfigError("ray", address, "needs Ray: pip install 'tokenprobe[ray]'") from None
    if not ray.is_initialized():
        ray.init(
            address=None if address == "local" else address,
            include_dashboard=False,
            log_to_driver=False,
        )
    remote = ray.remote(_evaluate_one)
    index = {remote.remote((req, c)): i for i, c in enumerate(todo)}
    results: list[tuple[list[Outcome], int] | None] = [None] * len(todo)
    pending = list(index)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            results[index[ref]] = ray.get(ref)
        if progress:
            progress(len(todo) - len(pending), len(todo))
    return [o for o in results if o is not None]


def fixed_lengths(input_tokens: int, output_tokens: int) -> tuple[LengthDist, LengthDist]:
    return fixed(input_tokens, "input_tokens"), fixed(output_tokens, "output_tokens")
