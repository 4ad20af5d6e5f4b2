"""Capacity planning from the request distribution under SLOs (P1).

Search GPU type x precision x TP (x max_num_seqs); for each candidate:
1. prune with the estimator (microseconds): the weights must fit with room for one request of the
   longest length, and a lone request's TTFT and TPOT must already meet the SLOs (a loaded
   server is never faster than an idle one);
2. bisect the highest Poisson rate one replica sustains with simulated p90 TTFT and p90 TPOT
   within the SLOs (`sim.capacity.max_rate_per_s`: the simulator, not token totals, because the
   same tokens in a different request mix need different hardware: seed 003);
3. replicas = ceil(rate / sustainable rate); GPUs = replicas x TP; cost = GPUs x price per
   GPU-hour (or the GPU count when no price is given).

Costs per million tokens split each replica's GPU-hours between input and output tokens by the
prefill and decode energy shares the simulation measured at the sustainable rate (prefill work
is charged to input tokens, decode work to output tokens, as the simulator's energy accounting
does). The Pareto front is over (output tokens/s per GPU at the sustainable rate, interactivity
= 1 / p90 TPOT). Candidates run in a process pool (one worker per core by default) or, for
searches that outgrow one machine, as Ray tasks on a cluster (`ray_address`).
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EFFICIENCY,
    DEFAULT_POWER,
    Deployment,
    Efficiency,
    PowerModel,
    estimate_deployment,
    make_deployment,
)
from tokenprobe.cost import Workload as StaticWorkload
from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.files import finite
from tokenprobe.hardware import get_gpu
from tokenprobe.model import get_model
from tokenprobe.precision import get_dtype
from tokenprobe.sim import SchedulerConfig, max_rate_per_s, simulate
from tokenprobe.units import MEGA, SECONDS_PER_HOUR
from tokenprobe.workload import MAX_REQUESTS, Arrival, LengthDist, Workload, fixed

SIM_REQUESTS = 300


@dataclass(frozen=True)
class Candidate:
    gpu: str
    weight_dtype: str
    tp: int
    max_num_seqs: int = 256
    # the GPUs' power limit as a fraction of TDP (`nvidia-smi -pl`, seed 003 section 5.1): a
    # lower cap lowers the clock, which slows compute-bound work and cuts energy per token
    power_limit_fraction: float = 1.0

    @property
    def label(self) -> str:
        label = f"{self.gpu} {self.weight_dtype} tp{self.tp} seqs{self.max_num_seqs}"
        if self.power_limit_fraction < 1.0:
            label += f" pl{100 * self.power_limit_fraction:.0f}%"
        return label


@dataclass(frozen=True)
class Outcome:
    """One candidate after pruning or simulation."""

    candidate: Candidate
    feasible: bool
    reason: str
    rate_per_replica: float = 0.0
    replicas: int = 0
    gpus: int = 0
    ttft_p90_s: float | None = None
    tpot_p90_s: float | None = None
    output_tokens_per_s_per_gpu: float = 0.0
    kwh_per_million_output_tokens: float | None = None
    kwh_per_million_input_tokens: float | None = None
    prefill_share: float = 0.0  # of the replica's energy, used to split costs
    miss: float = math.inf  # how far a lone request is from the SLOs (1 = just meets)
    cost_per_hour: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_output_tokens: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["candidate"] = self.candidate.label
        d["miss"] = None if math.isinf(self.miss) else self.miss
        return d


@dataclass(frozen=True)
class PlanRequest:
    model: str
    rate_per_s: float
    input_len: LengthDist
    output_len: LengthDist
    slo_ttft_p90_s: float | None
    slo_tpot_p90_s: float | None
    candidates: tuple[Candidate, ...]
    prices_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    num_requests: int = SIM_REQUESTS
    seed: int = 0
    # a calibrated engine profile's parameters (`plan --profile`), else the defaults
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    power: PowerModel = DEFAULT_POWER
    # GPUs per server of every candidate (`plan --gpus-per-node`), else each GPU's catalog
    # topology: a TP group larger than a server's scale-up domain is priced over the NICs
    gpus_per_node: int | None = None

    def deployment(self, c: Candidate) -> Deployment:
        limit_w = None
        if c.power_limit_fraction < 1.0:
            limit_w = c.power_limit_fraction * get_gpu(c.gpu).tdp_w
        return make_deployment(
            self.model, c.gpu, tp=c.tp, weight_dtype=c.weight_dtype,
            efficiency=self.efficiency, power=self.power, power_limit_w=limit_w,
            gpus_per_node=self.gpus_per_node,
        )  # fmt: skip

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:
            raise ConfigError("rate_per_s", self.rate_per_s, "a positive request rate")
        if self.slo_ttft_p90_s is None and self.slo_tpot_p90_s is None:
            raise ConfigError("slo", None, "give --slo-ttft-s and/or --slo-tpot-s")
        for name in ("slo_ttft_p90_s", "slo_tpot_p90_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(name, value, "a positive number of seconds")
        if not self.candidates:
            raise ConfigError("candidates", (), "at least one GPU x dtype x TP to try")
        if isinstance(self.num_requests, bool) or not 1 <= self.num_requests <= MAX_REQUESTS:
            raise ConfigError("num_requests", self.num_requests, f"in [1, {MAX_REQUESTS:,}]")
        self._check_names()
        missing = {c.gpu for c in self.candidates} - set(self.prices_per_gpu_hour)
        if self.prices_per_gpu_hour and missing:
            raise ConfigError("price_per_gpu_hour", sorted(missing), "a price for every GPU")

    def _check_names(self) -> None:
        """A name that does not exist is bad input (exit 2), not an infeasible candidate."""
        get_model(self.model)
        for c in self.candidates:
            get_gpu(c.gpu)
            get_dtype(c.weight_dtype, "weight_dtype")
            for name in ("tp", "max_num_seqs"):
                if getattr(c, name) < 1:
                    raise ConfigError(name, getattr(c, name), "a positive integer")
            finite("power_limit_fraction", c.power_limit_fraction, lo=0.1, hi=1.0)


def _longest(dist: LengthDist) -> int:
    if dist.kind == "fixed":
        return dist.value
    if dist.kind == "uniform":
        return dist.high
    if dist.kind == "empirical":
        return max(dist.values)
    return int(dist.mean + 3 * max(dist.std, dist.sigma * dist.mean))


def _typical(dist: LengthDist) -> int:
    if dist.kind == "fixed":
        return dist.value
    if dist.kind == "uniform":
        return (dist.low + dist.high) // 2
    if dist.kind == "empirical":
        return sorted(dist.values)[len(dist.values) // 2]
    return max(1, int(dist.mean))


def _prune(req: PlanRequest, c: Candidate) -> Outcome | None:
    """An Outcome when the estimator already rules the candidate out, else None."""
    try:
        dep = req.deployment(c)
    except TokenprobeError as exc:
        return Outcome(c, False, f"not runnable: {exc}")
    isl, osl = _longest(req.input_len), _longest(req.output_len)
    est = estimate_deployment(dep, StaticWorkload(isl, max(2, osl)), find_compute_bound=False)
    if not est.memory.fits:
        return Outcome(c, False, f"memory: {est.memory.reason}")
    ratios = []
    if req.slo_ttft_p90_s is not None:
        ratios.append(est.ttft_s / req.slo_ttft_p90_s)
    if req.slo_tpot_p90_s is not None:
        ratios.append(est.tpot_s / req.slo_tpot_p90_s)
    miss = max(ratios)
    if miss > 1:
        return Outcome(c, False, "even a lone request misses the SLOs", miss=miss)
    return None


def evaluate(req: PlanRequest, c: Candidate) -> Outcome:
    """Prune, then find the sustainable rate of one replica by simulation."""
    pruned = _prune(req, c)
    if pruned is not None:
        return pruned
    dep = req.deployment(c)
    config = SchedulerConfig(max_num_seqs=c.max_num_seqs)
    cap = max_rate_per_s(
        dep, req.input_len, req.output_len, slo_ttft_s=req.slo_ttft_p90_s,
        slo_tpot_s=req.slo_tpot_p90_s, config=config, num_requests=req.num_requests,
        seed=req.seed,
    )  # fmt: skip
    if cap.max_rate_per_s <= 0:
        return Outcome(c, False, "no load meets the SLOs in simulation", miss=1.0)
    replicas = math.ceil(req.rate_per_s / cap.max_rate_per_s)
    at_rate = simulate(
        deployment=dep,
        workload=Workload(Arrival("poisson", rate_per_s=cap.max_rate_per_s), req.input_len,
                          req.output_len, num_requests=req.num_requests),
        config=config, seed=req.seed,
    ).to_dict()  # fmt: skip
    energy = at_rate["energy"]
    total_j = (energy.get("prefill_j") or 0.0) + (energy.get("decode_j") or 0.0)
    share = (energy.get("prefill_j") or 0.0) / total_j if total_j else 0.0
    return Outcome(
        c, True, "meets the SLOs", rate_per_replica=cap.max_rate_per_s, replicas=replicas,
        gpus=replicas * dep.num_gpus, ttft_p90_s=cap.ttft_p90_s, tpot_p90_s=cap.tpot_p90_s,
        output_tokens_per_s_per_gpu=float(at_rate["output_tokens_per_s"] or 0.0) / dep.num_gpus,
        kwh_per_million_output_tokens=energy.get("kwh_per_million_output_tokens"),
        kwh_per_million_input_tokens=energy.get("kwh_per_million_input_tokens"),
        prefill_share=share, miss=1.0,
    )  # fmt: skip


def _priced(req: PlanRequest, o: Outcome) -> Outcome:
    if not o.feasible:
        return o
    price = req.prices_per_gpu_hour.get(o.candidate.gpu)
    if price is None:
        return o
    per_hour = o.gpus * price
    per_replica_s = per_hour / SECONDS_PER_HOUR / o.replicas
    in_tps = o.rate_per_replica * _typical(req.input_len)
    out_tps = o.rate_per_replica * _typical(req.output_len)
    return replace(
        o, cost_per_hour=per_hour,
        usd_per_million_input_tokens=per_replica_s * o.prefill_share / in_tps * MEGA,
        usd_per_million_output_tokens=per_replica_s * (1 - o.prefill_share) / out_tps * MEGA,
    )  # fmt: skip


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    outcomes: list[Outcome]

    @property
    def feasible(self) -> list[Outcome]:
        key: Callable[[Outcome], tuple[float, float]] = lambda o: (  # noqa: E731
            o.cost_per_hour if o.cost_per_hour is not None else float(o.gpus),
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
        }


def candidates(
    gpus: Iterable[str],
    dtypes: Iterable[str],
    tps: Iterable[int],
    max_num_seqs: Iterable[int],
    power_limit_fractions: Iterable[float] = (1.0,),
) -> tuple[Candidate, ...]:
    fractions = tuple(power_limit_fractions)
    return tuple(
        Candidate(g, d, t, s, f)
        for g in gpus for d in dtypes for t in tps for s in max_num_seqs for f in fractions
    )  # fmt: skip


def _evaluate_one(args: tuple[PlanRequest, Candidate]) -> Outcome:
    return evaluate(*args)


def plan(
    req: PlanRequest,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    ray_address: str | None = None,
) -> Plan:
    """Evaluate every candidate (a process pool when workers > 1, or a Ray cluster when
    `ray_address` is given: "local" starts one here) and rank the feasible ones."""
    todo: Sequence[Candidate] = req.candidates
    if ray_address is not None:
        results = _evaluate_on_ray(req, todo, ray_address, progress)
        return Plan(req, [_priced(req, o) for o in results])
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise ConfigError("workers", workers, "a positive number of processes")
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    results = []
    if n_workers <= 1 or len(todo) == 1:
        for i, c in enumerate(todo):
            results.append(evaluate(req, c))
            if progress:
                progress(i + 1, len(todo))
    else:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            for i, outcome in enumerate(pool.map(_evaluate_one, [(req, c) for c in todo])):
                results.append(outcome)
                if progress:
                    progress(i + 1, len(todo))
    return Plan(req, [_priced(req, o) for o in results])


def _evaluate_on_ray(
    req: PlanRequest,
    todo: Sequence[Candidate],
    address: str,
    progress: Callable[[int, int], None] | None,
) -> list[Outcome]:
    """One Ray task per candidate; the workers need tokenprobe installed (optional extra
    `tokenprobe[ray]` on every node)."""
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
    results: list[Outcome | None] = [None] * len(todo)
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
