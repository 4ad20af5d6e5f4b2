"""`tokenprobe.simulate(...)`: a workload through a simulated vLLM-like server on a deployment.

Step times and energies come from the cost model (`tokenprobe.cost.step_cost`); the KV capacity
from its memory model (`kv_capacity_tokens` at `gpu_memory_utilization`), in blocks of
`block_size` tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenprobe.cost import (
    BatchShape,
    Deployment,
    MemoryBudget,
    idle_power_w,
    kv_capacity_tokens,
    make_deployment,
    step_cost,
)
from tokenprobe.errors import ConfigError
from tokenprobe.records import RunConfig
from tokenprobe.sim.base import SchedulerConfig, StepPlan
from tokenprobe.sim.engine import Engine, ProgressFn, StepFn
from tokenprobe.sim.engines import vllm_defaults
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult, build_records
from tokenprobe.sim.runconfig import deployment_config
from tokenprobe.sim.schedulers import SCHEDULERS
from tokenprobe.sim.state import Ledger
from tokenprobe.sim.stepcache import DecodeMemo
from tokenprobe.workload import Workload, workload_dict
from tokenprobe.workload import build_workload as build_workload  # sim re-exports it

DEFAULT_TRACE_REQUESTS = 2_000


def cost_step_fn(dep: Deployment) -> StepFn:
    """The cost model as the engine's step function: (time_s, energy_j of all GPUs)."""

    def step(plan: StepPlan) -> tuple[float, float]:
        shape = BatchShape(
            plan.prefill_tokens,
            plan.prefill_attn_pairs,
            plan.prefill_seqs,
            plan.decode_seqs,
            plan.decode_context_tokens,
        )
        cost = step_cost(dep, shape)
        return cost.time_s, cost.energy_j

    return step


def capacity_blocks(dep: Deployment, config: SchedulerConfig) -> int:
    """KV blocks of one replica; a ConfigError when the weights leave no room for KV."""
    budget = MemoryBudget(
        gpu_memory_utilization=config.gpu_memory_utilization,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_num_seqs=config.max_num_seqs,
        block_size=config.block_size,
        rule=config.memory_rule,
    )  # vLLM's profile run uses the server's own token and sequence limits
    tokens = kv_capacity_tokens(dep, budget=budget)
    blocks = tokens // config.block_size
    if blocks < 1:
        raise ConfigError(
            "gpu",
            dep.gpu.name,
            f"{dep.model.name} does not fit with room for KV cache at "
            f"gpu_memory_utilization={config.gpu_memory_utilization} (see `tokenprobe estimate`)",
        )
    return blocks


def run_workload(
    workload: Workload,
    step_fn: StepFn,
    pool: BlockPool,
    config: SchedulerConfig,
    *,
    idle_w: float,
    scheduler: str = "continuous",
    seed: int = 0,
    trace_requests: int = DEFAULT_TRACE_REQUESTS,
    progress: ProgressFn | None = None,
    meta: dict[str, Any] | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    frontend_s: float = 0.0,
) -> SimResult:
    """The simulator without the cost model: any step function and KV pool (tests use this).
    `frontend_s`: each request's latency through the serving front end (engine.py)."""
    if scheduler not in SCHEDULERS:
        raise ConfigError("scheduler", scheduler, f"one of {', '.join(SCHEDULERS)}")
    ledger = Ledger()
    sched = SCHEDULERS[scheduler](config, pool, ledger)
    engine = Engine(sched, ledger, step_fn, idle_w, progress, frontend_s)
    requests = workload.generate(np.random.default_rng(seed))
    concurrency = workload.arrival.concurrency if workload.arrival.closed_loop else None
    result = engine.run(requests, concurrency)
    cfg = {
        **(meta or {}),
        "workload": workload_dict(workload),
        "scheduler": {"name": scheduler, **_config_dict(config)},
        "seed": seed,
        "kv_capacity_blocks": pool.capacity_blocks,
        "idle_power_w": idle_w,
        "frontend_s": frontend_s,
    }
    return SimResult(
        config=cfg,
        engine=result,
        pool=pool,
        preemptions=sched.preemptions,
        records=build_records(result, trace_requests),
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
    )


def _config_dict(config: SchedulerConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in SchedulerConfig.__dataclass_fields__}


def simulate(
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    *,
    tp: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    workload: Workload | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    rate_per_s: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    offline: bool = False,
    num_requests: int = 100,
    seed: int = 0,
    scheduler: str = "continuous",
    config: SchedulerConfig | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    trace_requests: int = DEFAULT_TRACE_REQUESTS,
    progress: ProgressFn | None = None,
    deployment: Deployment | None = None,
    exact_steps: bool = False,
    profile: str | None = None,
    engine: str | None = None,
) -> SimResult:
    """Simulate a workload on `model` served from `gpu` (x `tp`) by a vLLM-like server.

    Give either `workload` or the flag form (input/output tokens + exactly one of rate_per_s,
    concurrency, offline). `deployment` overrides model/gpu/tp/dtypes (e.g. with a power limit).
    `result.to_dict()` equals `tokenprobe simulate --json`. Decode-only steps are priced through
    `DecodeMemo` (sim/stepcache.py) unless `exact_steps`. `profile` and `engine` name the cost
    profile `deployment` was priced with and the engine preset `config` came from; the run's
    config (`records.RunConfig`) keeps them beside everything that prices the deployment.
    """
    dep = deployment or make_deployment(
        model, gpu, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype
    )
    if workload is None:
        workload = build_workload(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            rate_per_s=rate_per_s,
            burstiness=burstiness,
            concurrency=concurrency,
            offline=offline,
            num_requests=num_requests,
        )
    if config is None:
        config, engine = vllm_defaults(dep.gpu), engine or "vllm"
    pool = BlockPool(capacity_blocks(dep, config), config.block_size, config.prefix_caching)
    deployment_cfg = deployment_config(
        dep, profile=profile, engine=engine, scheduler=scheduler, config=config
    )
    run_config = RunConfig(
        source="simulated",
        deployment=deployment_cfg,
        workload=workload_dict(workload),
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        seed=seed,
        extra={"num_gpus": dep.num_gpus, "kv_bytes_per_token": dep.kv_bytes_per_token},
    )
    return run_workload(
        workload,
        cost_step_fn(dep) if exact_steps else DecodeMemo(cost_step_fn(dep)),
        pool,
        config,
        idle_w=idle_power_w(dep),
        scheduler=scheduler,
        seed=seed,
        trace_requests=trace_requests,
        progress=progress,
        meta=run_config.to_dict(),
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        frontend_s=dep.efficiency.request_overhead_s,
    )
