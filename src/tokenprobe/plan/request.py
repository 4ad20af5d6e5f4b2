"""What a plan is asked: the model, the request rate and distribution, the SLOs, the candidates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EFFICIENCY,
    DEFAULT_POWER,
    Deployment,
    Efficiency,
    EpComm,
    PowerModel,
    SpecDecode,
    dp_layout,
    make_deployment,
)
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.hardware import get_gpu
from tokenprobe.model import get_model
from tokenprobe.plan.candidate import ALL_SPLITS, Candidate, parse_split
from tokenprobe.precision import get_dtype
from tokenprobe.sim import DEFAULT_ENGINE
from tokenprobe.workload import MAX_REQUESTS, LengthDist

SIM_REQUESTS = 300
# GPUs `--disaggregate all` splits over when --max-gpus is not given: one HGX / DGX server
DEFAULT_SPLIT_GPUS = 8


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
    # GPUs per server of every candidate that does not set its own (`plan --gpus-per-node`),
    # else each GPU's catalog topology: a TP group larger than a server's scale-up domain is
    # priced over the NICs
    gpus_per_node: int | None = None
    # the requests' shared prefix (a workload file's shared_prefix_tokens / prefix_groups)
    shared_prefix_tokens: int = 0
    prefix_groups: int = 1
    max_gpus: int | None = None  # the most GPUs one deployment (fleet) may use
    spec_acceptance: float | None = None  # per-token acceptance for every spec-decode method
    # the engine whose data-parallel ranks plan simulates (their padding and dispatch: the
    # preset's, sim/engines.py): the profile's (`plan --profile`), else vLLM, whose scheduler
    # defaults plan's SchedulerConfig keeps
    engine: str = DEFAULT_ENGINE

    def deployment(self, c: Candidate) -> Deployment:
        limit_w = None
        if c.power_limit_fraction < 1.0:
            limit_w = c.power_limit_fraction * get_gpu(c.gpu).tdp_w
        layout: dict[str, Any] = {"tp": c.tp, **dp_layout(c.dp, c.dp > 1, c.tp)}
        if c.dp > 1:
            layout["ep_comm"] = EpComm(backend=c.ep_backend, overlap=c.two_batch_overlap)
        return make_deployment(
            self.model, c.gpu, weight_dtype=c.weight_dtype,
            efficiency=self.efficiency, power=self.power, power_limit_w=limit_w,
            gpus_per_node=c.gpus_per_node if c.gpus_per_node is not None else self.gpus_per_node,
            **layout,
        )  # fmt: skip

    def spec(self, c: Candidate) -> SpecDecode | None:
        return (
            None if c.spec_decode is None else SpecDecode.parse(c.spec_decode, self.spec_acceptance)
        )

    @property
    def max_gpus_or_default(self) -> int:
        return self.max_gpus if self.max_gpus is not None else DEFAULT_SPLIT_GPUS

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
        if self.max_gpus is not None and (isinstance(self.max_gpus, bool) or self.max_gpus < 1):
            raise ConfigError("max_gpus", self.max_gpus, "a positive number of GPUs")
        if self.spec_acceptance is not None:
            finite("spec_acceptance", self.spec_acceptance, lo=0.0, hi=1.0)
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
            if c.dp_unsupported:
                field, value = ("disaggregate", c.disaggregate) if c.disaggregate else (
                    "spec_decode", c.spec_decode)  # fmt: skip
                raise ConfigError(field, value, f"not with dp {c.dp} (search them apart)")
            if c.gpus_per_node is not None and c.gpus_per_node < 1:
                raise ConfigError("gpus_per_node", c.gpus_per_node, "a positive integer")
            finite("power_limit_fraction", c.power_limit_fraction, lo=0.1, hi=1.0)
            if c.disaggregate not in (None, ALL_SPLITS):
                parse_split(c.disaggregate)
            self.spec(c)  # METHOD:K with an acceptance, else ConfigError("spec_decode"...)


def longest(dist: LengthDist) -> int:
    """The longest length a request draws (a lognormal/normal: mean + 3 sigma)."""
    if dist.kind == "fixed":
        return dist.value
    if dist.kind == "uniform":
        return dist.high
    if dist.kind == "empirical":
        return max(dist.values)
    return int(dist.mean + 3 * max(dist.std, dist.sigma * dist.mean))


def typical(dist: LengthDist) -> int:
    """The median length (uniform: the middle; lognormal/normal: the mean)."""
    if dist.kind == "fixed":
        return dist.value
    if dist.kind == "uniform":
        return (dist.low + dist.high) // 2
    if dist.kind == "empirical":
        return sorted(dist.values)[len(dist.values) // 2]
    return max(1, int(dist.mean))
