"""`estimate`: one request shape on one deployment, stage by stage (E4-E7, E12, E13).

A static batch of `batch` identical requests of `input_tokens` in and `output_tokens` out:
- TTFT = queue + tokenize + prefill + network (E5; queue is 0 for a lone batch, the simulator
  models it). The prefill step also samples the first token.
- decode: `output_tokens − 1` steps at batch `batch`, the context growing from
  input_tokens + 1; TPOT is the mean step time (the vLLM definition (e2e − ttft)/(out − 1)).
  Step time is piecewise linear in context, so it is sampled at up to 17 evenly spaced
  positions and averaged with the trapezoid rule.
- E2E = TTFT + (output_tokens − 1)·TPOT; output_tokens_per_s = batch·output_tokens / E2E.
- energy: prefill energy is charged to input tokens, decode energy to output tokens (separate
  accounting, E13); `joules_per_token_all_in` charges everything to output tokens, as
  ML.ENERGY's J/token does.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.energy import EnergyPrices, joules_to_kwh_per_million
from tokenprobe.cost.host import DEFAULT_API_SERVER_PROCESSES, HostModel, host_stage
from tokenprobe.cost.io import kv_swap_stage, load_stage
from tokenprobe.cost.memory import DEFAULT_BUDGET, MemoryBudget, MemoryReport, memory_report
from tokenprobe.cost.network import network_stage
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.specdecode import SpecDecode, spec_step, verify_shape
from tokenprobe.cost.step import OpCost, StepCost, op_costs, step_cost
from tokenprobe.cost.stepcomm import comm_breakdown
from tokenprobe.cost.sweep import decode_step_time_grid
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import HostSpec, get_host
from tokenprobe.units import MEGA, SECONDS_PER_HOUR

CURVE_POINTS = 17
MAX_SEARCH_BATCH = 1 << 16
# Limits on one request shape: far above any real one, so they refuse only nonsense before it
# reaches the arithmetic (a 10^300-token prompt overflows FLOP counts to inf). The longest
# context window published is 10M tokens (Llama 4 Scout); a GPU holds thousands of sequences.
MAX_CONTEXT_TOKENS = 1 << 24  # per request, for input_tokens and output_tokens each
MAX_BATCH = 1_000_000


@dataclass(frozen=True)
class Workload:
    input_tokens: int
    output_tokens: int
    batch: int = 1

    def __post_init__(self) -> None:
        limits = {
            "input_tokens": MAX_CONTEXT_TOKENS,
            "output_tokens": MAX_CONTEXT_TOKENS,
            "batch": MAX_BATCH,
        }
        for name, hi in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
                raise ConfigError(name, value, f"an integer in [1, {hi:,}]")


@dataclass(frozen=True)
class StageReport:
    """One stage (prefill, or decode averaged over the output) on one GPU."""

    time_s: float
    flop: float
    hbm_bytes: float
    bound: str
    shares: dict[str, float]
    power_w: float
    energy_j: float
    ops: list[OpCost] = field(repr=False)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flop / self.hbm_bytes if self.hbm_bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s,
            "flop": self.flop,
            "hbm_bytes": self.hbm_bytes,
            "arithmetic_intensity_flop_per_byte": self.arithmetic_intensity,
            "bound": self.bound,
            "shares": self.shares,
            "power_w": self.power_w,
            "energy_j": self.energy_j,
            "ops": [
                {
                    "name": o.name,
                    "layers": o.layers,
                    "flop": o.flop,
                    "hbm_bytes": o.hbm_bytes,
                    "time_s": o.time_s,
                    "bound": o.bound,
                    "arithmetic_intensity_flop_per_byte": o.arithmetic_intensity,
                }
                for o in self.ops
            ],
        }


def _stage(
    dep: Deployment,
    shape: BatchShape,
    cost: StepCost,
    time_s: float,
    energy_j: float,
    power_w: float | None = None,
) -> StageReport:
    """A stage from one representative step; `power_w` overrides the step's (decode: the mean
    over the output)."""
    return StageReport(
        time_s=time_s,
        flop=cost.flop,
        hbm_bytes=cost.hbm_bytes,
        bound=cost.bound,
        shares=cost.shares(),
        power_w=cost.power_w if power_w is None else power_w,
        energy_j=energy_j,
        ops=op_costs(dep, shape, cost.clock_fraction),
    )


@dataclass(frozen=True)
class Estimate:
    deployment: Deployment
    workload: Workload
    ttft_breakdown_s: dict[str, float]
    prefill: StageReport
    decode: StageReport | None
    tpot_curve: list[tuple[int, float]]
    tpot_s: float
    memory: MemoryReport
    compute_bound_batch: int | None
    prices: EnergyPrices
    throughput_by_batch: list[tuple[int, float, float]] = field(default_factory=list)
    outside_gpu: dict[str, Any] = field(default_factory=dict)  # host, network, loading, kv_swap
    spec_decode: SpecDecode | None = None

    @property
    def ttft_s(self) -> float:
        return sum(self.ttft_breakdown_s.values())

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + (self.workload.output_tokens - 1) * self.tpot_s

    @property
    def output_tokens_per_s(self) -> float:
        w = self.workload
        return w.batch * w.output_tokens / self.e2e_s

    def energy(self) -> dict[str, float | None]:
        """Energy per token on the basis `prices` names (cost.energy.EnergyPrices): GPU energy,
        plus the host's base power over each stage's time, x PUE; and the static share, the
        part paid whatever the load (the GPUs' idle power and the host's base)."""
        w, p = self.workload, self.prices
        decode_j = self.decode.energy_j if self.decode else 0.0
        decode_s = (w.output_tokens - 1) * self.tpot_s if self.decode else 0.0
        pre_j = p.energy_j(self.prefill.energy_j, self.prefill.time_s)
        dec_j = p.energy_j(decode_j, decode_s)
        j_in = pre_j / (w.batch * w.input_tokens)
        j_out = dec_j / (w.batch * (w.output_tokens - 1)) if self.decode else 0.0
        all_in = (pre_j + dec_j) / (w.batch * w.output_tokens)
        idle_w = self.deployment.gpu.idle_w * self.deployment.num_gpus
        static_j = p.static_j(idle_w, self.prefill.time_s + decode_s)
        out: dict[str, float | None] = {
            "joules_per_input_token": j_in,
            "joules_per_output_token": j_out,
            "joules_per_token_all_in": all_in,
            "kwh_per_million_input_tokens": joules_to_kwh_per_million(j_in),
            "kwh_per_million_output_tokens": joules_to_kwh_per_million(j_out),
            "kwh_per_million_tokens_all_in": joules_to_kwh_per_million(all_in),
            "energy_per_request_j": (pre_j + dec_j) / w.batch,
            "facility_factor": p.facility_factor,
            "host_base_w": p.host_base_w,
            "static_share": static_j / (pre_j + dec_j) if pre_j + dec_j > 0 else 0.0,
            "static_kwh_per_million_output_tokens": joules_to_kwh_per_million(
                static_j / (w.batch * w.output_tokens)
            ),
        }
        price = self.prices.electricity_usd_per_kwh
        out["usd_electricity_per_million_output_tokens"] = (
            None if price is None else joules_to_kwh_per_million(all_in) * price
        )
        gpu_hour = self.prices.gpu_hour_usd
        out["usd_gpu_time_per_million_output_tokens"] = (
            None
            if gpu_hour is None
            else self.deployment.num_gpus
            * gpu_hour
            / SECONDS_PER_HOUR
            / self.output_tokens_per_s
            * MEGA
        )
        return out

    def communication(self) -> dict[str, Any]:
        """Per-step GPU-GPU traffic of prefill and of a mid-output decode step, split into the
        part on the scale-up link (`intra_domain_s`) and on the scale-out NICs (`inter_node_s`),
        the topology it ran on, and the pipeline bubble of one batch going through pp stages
        without micro-batches ((pp − 1)/pp of each GPU's time idle; GPipe, Huang et al.
        arXiv:1811.06965)."""
        d, w = self.deployment, self.workload
        mid_ctx = w.input_tokens + w.output_tokens // 2
        topo = d.gpu.topology
        return {
            "link": d.gpu.link.kind,
            "link_bytes_per_s": d.gpu.link.bytes_per_s,
            "nodes": d.nodes,
            "gpus_per_node": d.gpus_per_node,
            "scale_up_domain_gpus": d.domain_gpus,
            "crosses_domains": d.crosses_domains,
            "nic_bytes_per_s": None if topo is None else topo.nic_bytes_per_s,
            "nic_latency_s": None if topo is None else topo.nic_latency_s,
            "prefill": comm_breakdown(d, BatchShape.prefill(w.input_tokens, w.batch)),
            "decode_step": comm_breakdown(d, BatchShape.decode(w.batch, mid_ctx)),
            "pipeline_bubble_fraction": (d.pp - 1) / d.pp,
        }

    def to_dict(self) -> dict[str, Any]:
        d, w, m = self.deployment, self.workload, self.deployment.model
        return {
            "model": m.name,
            "gpu": d.gpu.name,
            "num_gpus": d.num_gpus,
            "tp": d.tp,
            "pp": d.pp,
            "expert_parallel": d.expert_parallel,
            "attention_dp": d.attention_dp,
            "weight_dtype": d.weight_dtype.name,
            "act_dtype": d.act_dtype.name,
            "compute_dtype": d.compute_dtype,
            "kv_dtype": d.kv_dtype.name,
            "input_tokens": w.input_tokens,
            "output_tokens": w.output_tokens,
            "batch": w.batch,
            "params_total": m.params_total,
            "params_active": m.params_active,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "e2e_s": self.e2e_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "decode_tokens_per_s": w.batch / self.tpot_s if self.decode else None,
            "ttft_breakdown_s": self.ttft_breakdown_s,
            "prefill": self.prefill.to_dict(),
            "decode": None
            if self.decode is None
            else {
                **self.decode.to_dict(),
                "tpot_s_by_context": [[c, t] for c, t in self.tpot_curve],
                "compute_bound_batch": self.compute_bound_batch,
                "throughput_by_batch": [
                    {"batch": b, "step_s": t, "output_tokens_per_s": r}
                    for b, t, r in self.throughput_by_batch
                ],
            },
            "spec_decode": None
            if self.spec_decode is None
            else {
                "method": self.spec_decode.method,
                "draft_tokens": self.spec_decode.draft_tokens,
                "acceptance": self.spec_decode.acceptance,
                "tokens_per_step": self.spec_decode.tokens_per_step,
            },
            "communication": self.communication(),
            "memory": self.memory.to_dict(),
            **self.outside_gpu,
            "energy": {**self.energy(), "energy_basis": self.prices.basis},
            "efficiency": {k: getattr(d.efficiency, k) for k in d.efficiency.__slots__},
        }


def _decode_positions(input_tokens: int, output_tokens: int) -> list[int]:
    """Contexts (tokens attended, the new one included) of the output_tokens − 1 decode steps."""
    first, last = input_tokens + 1, input_tokens + output_tokens - 1
    n = min(CURVE_POINTS, last - first + 1)
    if n == 1:
        return [first]
    return sorted({round(first + (last - first) * i / (n - 1)) for i in range(n)})


def _mean_trapezoid(points: list[tuple[int, float]]) -> float:
    if len(points) == 1:
        return points[0][1]
    area = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in itertools.pairwise(points))
    return area / (points[-1][0] - points[0][0])


def decode_step(dep: Deployment, batch: int, context_tokens: int) -> StepCost:
    return step_cost(dep, BatchShape.decode(batch, context_tokens))


def compute_bound_batch(dep: Deployment, context_tokens: int) -> int | None:
    """Smallest decode batch at which the weight matmuls (every operator but attention) turn
    compute-bound, by bisection; None if not reached by 65,536 sequences.

    This is the roofline ridge point of decode: weights are read once per step whatever the
    batch, so FLOP per byte grows with it. Attention over the KV cache does not share reads
    between sequences (about 1 FLOP per KV byte for GQA), so at long contexts the whole step
    can stay memory-bound at any batch; the stage table shows that separately.
    """

    def is_compute(b: int) -> bool:
        ops = [
            o for o in op_costs(dep, BatchShape.decode(b, context_tokens)) if o.name != "attention"
        ]
        return sum(o.compute_s for o in ops) > sum(o.memory_s for o in ops)

    if not is_compute(MAX_SEARCH_BATCH):
        return None
    lo, hi = 1, MAX_SEARCH_BATCH
    while lo < hi:
        mid = (lo + hi) // 2
        if is_compute(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def throughput_by_batch(
    dep: Deployment, context_tokens: int, max_batch: int
) -> list[tuple[int, float, float]]:
    """Decode step time and output tokens/s at batch 1, 2, 4, ... up to `max_batch` (the KV
    limit), at one context length: how batching shares the weight reads (E6)."""
    batches = [1 << i for i in range(max(1, max_batch).bit_length())]
    if batches[-1] != max_batch and max_batch > 1:
        batches.append(max_batch)
    times = decode_step_time_grid(
        dep, np.array(batches, dtype=np.float64), np.array([float(context_tokens)])
    )[:, 0]
    return [(b, float(t), b / float(t)) for b, t in zip(batches, times, strict=True)]


def outside_gpu_stages(
    dep: Deployment,
    w: Workload,
    host: HostModel,
    host_spec: HostSpec,
    e2e_s: float,
    api_server_processes: int = DEFAULT_API_SERVER_PROCESSES,
) -> dict[str, Any]:
    """Host CPU (E8), network (E9), model loading (E10) and KV swap (E11) for this workload;
    the host is the bound when the GPUs finish requests faster than its API-server processes
    can serve them (cost/host.py: one core per process)."""
    host_part = host_stage(
        host,
        host_spec.cpu_cores,
        w.input_tokens,
        w.output_tokens,
        dep.model.name,
        api_server_processes=api_server_processes,
        cpu_core_speed=host_spec.cpu_core_speed,
        num_gpus=dep.num_gpus,
    )
    gpu_rps = w.batch / e2e_s
    host_part["gpu_requests_per_s"] = gpu_rps
    host_part["bound"] = "cpu" if gpu_rps > host_part["max_requests_per_s"] else "gpu"
    host_part["host"] = host_spec.name
    return {
        "host": host_part,
        "network": network_stage(
            w.input_tokens, w.output_tokens, dep.model.name, host_spec.nic_bytes_per_s, host.tls
        ),
        "loading": load_stage(dep, host_spec, host.storage_bytes_per_s, host.engine_init_s),
        "kv_swap": kv_swap_stage(dep, w.input_tokens + w.output_tokens),
    }


def estimate_deployment(
    dep: Deployment,
    workload: Workload,
    *,
    host: HostModel | None = None,
    host_spec: HostSpec | None = None,
    budget: MemoryBudget = DEFAULT_BUDGET,
    prices: EnergyPrices | None = None,
    find_compute_bound: bool = True,
    api_server_processes: int = DEFAULT_API_SERVER_PROCESSES,
    spec: SpecDecode | None = None,
) -> Estimate:
    w, host = workload, host or HostModel()
    host_spec = host_spec or get_host("default")
    pre_shape = BatchShape.prefill(w.input_tokens, w.batch)
    pre = step_cost(dep, pre_shape)
    prefill = _stage(dep, pre_shape, pre, pre.time_s, pre.energy_j)
    ttft = {
        "queue_s": 0.0,
        "tokenize_s": host.tokenize_s(w.input_tokens) / host_spec.cpu_core_speed,
        "frontend_s": dep.efficiency.request_overhead_s,
        "prefill_s": pre.time_s,
        "network_s": host.network_s(),
    }
    decode, curve, tpot = None, [], 0.0
    if w.output_tokens > 1:
        # per emitted token: a decode step, or with speculative decoding a verification pass
        # and its drafts over the tokens a step emits (cost/specdecode.py)
        costs = [
            (c, decode_step(dep, w.batch, c) if spec is None else spec_step(dep, w.batch, c, spec))
            for c in _decode_positions(w.input_tokens, w.output_tokens)
        ]
        curve = [(c, s.time_s) for c, s in costs]
        tpot = _mean_trapezoid(curve)
        mean_power = _mean_trapezoid([(c, s.power_w * s.time_s) for c, s in costs]) / tpot
        mid_ctx, mid = costs[len(costs) // 2]
        decode_j = mean_power * tpot * dep.num_gpus * (w.output_tokens - 1)
        shape = (
            BatchShape.decode(w.batch, mid_ctx)
            if spec is None
            else verify_shape(w.batch, mid_ctx, spec.draft_tokens)
        )
        decode = _stage(dep, shape, mid, tpot, decode_j, power_w=mean_power)
    context = w.input_tokens + w.output_tokens
    cb = (
        compute_bound_batch(dep, w.input_tokens + w.output_tokens // 2)
        if find_compute_bound
        else None
    )
    memory = memory_report(dep, context, budget, batch=w.batch)
    e2e_s = sum(ttft.values()) + (w.output_tokens - 1) * tpot
    outside = (
        outside_gpu_stages(dep, w, host, host_spec, e2e_s, api_server_processes)
        if find_compute_bound
        else {}
    )
    return Estimate(
        deployment=dep,
        workload=w,
        ttft_breakdown_s=ttft,
        prefill=prefill,
        decode=decode,
        tpot_curve=curve,
        tpot_s=tpot,
        memory=memory,
        compute_bound_batch=cb,
        prices=prices or EnergyPrices(),
        throughput_by_batch=throughput_by_batch(
            dep, w.input_tokens + w.output_tokens // 2, min(memory.max_concurrent_requests, 4096)
        )
        if find_compute_bound and w.output_tokens > 1
        else [],
        outside_gpu=outside,
        spec_decode=spec,
    )
