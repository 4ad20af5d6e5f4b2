"""`tokenprobe.simulate(...)`: a workload through a simulated vLLM-like server on a deployment.

Step times and energies come from the cost model (`tokenprobe.cost.step_cost`); the KV capacity
from its memory model (`kv_capacity_tokens` at `gpu_memory_utilization`), in blocks of
`block_size` tokens.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import numpy as np

from tokenprobe.cost import (
    DEFAULT_API_SERVER_PROCESSES,
    BatchShape,
    Deployment,
    HostModel,
    MemoryBudget,
    SpecDecode,
    Split,
    check_processes,
    host_base_power_w,
    idle_power_w,
    kv_capacity_tokens,
    make_deployment,
    state_blocks_per_seq,
    step_time_energy,
)
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import HostSpec, get_host
from tokenprobe.records import RunConfig
from tokenprobe.sim.base import SchedulerConfig, StepPlan
from tokenprobe.sim.cluster import ClusterResult, run_cluster
from tokenprobe.sim.disagg import DisaggResult, run_disaggregated
from tokenprobe.sim.dpep import DpEpResult, run_dpep
from tokenprobe.sim.dpep_fleet import DpFleetResult, run_dpep_fleet
from tokenprobe.sim.engine import Engine, ProgressFn, StepFn
from tokenprobe.sim.engines import pads_ranks, rank_router_for, vllm_defaults
from tokenprobe.sim.frontend import Frontend
from tokenprobe.sim.gpu_gap import GapFn, cost_gap_fn
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.pd_handoff import check_handoff, handoff_for
from tokenprobe.sim.result import SimResult, build_records, trace_stride
from tokenprobe.sim.runconfig import deployment_config, with_spec
from tokenprobe.sim.schedulers import SCHEDULERS
from tokenprobe.sim.sglang_overlap import config_step_fn
from tokenprobe.sim.specdecode import SpecRun, spec_scheduler
from tokenprobe.sim.state import Ledger
from tokenprobe.sim.stepcache import DecodeMemo, StepMemo
from tokenprobe.workload import Workload, workload_dict
from tokenprobe.workload import build_workload as build_workload  # sim re-exports it

DEFAULT_TRACE_REQUESTS = 2_000


def cost_step_fn(dep: Deployment) -> StepFn:
    """The cost model as the engine's step function: (time_s, energy_j of all GPUs)."""

    def step(plan: StepPlan) -> tuple[float, float]:
        # a plan has BatchShape's fields and properties (and counts >= 0 by construction): the
        # cost model reads it as it is, without a BatchShape built and checked per step
        return step_time_energy(dep, cast(BatchShape, plan))

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
    frontend: Frontend | None = None,
    gap_fn: GapFn | None = None,
    spec: SpecRun | None = None,
) -> SimResult:
    """The simulator without the cost model: any step function and KV pool (tests use this).
    `frontend_s`: each request's latency through the serving front end (engine.py); `frontend`:
    the API-server processes as a resource instead (sim/frontend.py); `gap_fn`: each step's CPU
    slice, not GPU-busy (sim/gpu_gap.py); `spec`: speculative decoding (sim/specdecode.py: its
    scheduler and the step function around `step_fn`)."""
    if scheduler not in SCHEDULERS:
        raise ConfigError("scheduler", scheduler, f"one of {', '.join(SCHEDULERS)}")
    ledger = Ledger()
    spec_sched = None
    if spec is None:
        sched = SCHEDULERS[scheduler](config, pool, ledger)
    else:
        spec_sched, step_fn = spec_scheduler(spec, scheduler, config, pool, ledger, step_fn, seed)
        sched = spec_sched
    engine = Engine(sched, ledger, step_fn, idle_w, progress, frontend_s, frontend, gap_fn)
    requests = workload.generate(np.random.default_rng(seed))
    if spec_sched is not None:  # it keeps every token's step only for the traced requests
        spec_sched.trace_stride = trace_stride(len(requests), trace_requests)
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
        records=build_records(result, trace_requests, pool.prefix_caching),
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        spec_decode=None if spec_sched is None else spec_sched.summary(),
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
    api_server_processes: int | None = None,
    host: str | HostSpec | None = None,
    host_model: HostModel | None = None,
    engine_in_api_server: bool = False,
    host_power: bool = False,
    spec_decode: SpecDecode | None = None,
) -> SimResult:
    """Simulate a workload on `model` served from `gpu` (x `tp`) by a vLLM-like server.

    Give either `workload` or the flag form (input/output tokens + exactly one of rate_per_s,
    concurrency, offline). `deployment` overrides model/gpu/tp/dtypes (e.g. with a power limit).
    `result.to_dict()` equals `tokenprobe simulate --json`. Decode-only steps are priced through
    `DecodeMemo` (sim/stepcache.py) unless `exact_steps`. `profile` and `engine` name the cost
    profile `deployment` was priced with and the engine preset `config` came from; the run's
    config (`records.RunConfig`) keeps them beside everything that prices the deployment.

    `api_server_processes` (vLLM's `--api-server-count`) and/or `host` (a catalog name, a host
    TOML file or a HostSpec: its `cpu_core_speed`) put the serving front end in as a resource
    (sim/frontend.py; costs from `host_model`, default `HostModel()`); with neither, the front end
    is the fixed latency `Efficiency.request_overhead_s`, as the profiles were fitted.
    `engine_in_api_server`: the engine loop runs in the one API-server process (vLLM V0; the
    GPU waits while that process serves HTTP and streams: sim/frontend.py). `host_power`: the
    host's base power (hosts.toml `base_power_w`) joins the energy, on the basis "GPU + host"
    (sim/energy_basis.py). `spec_decode`: each decode step verifies its k drafts
    (sim/specdecode.py); the run config records it.

    `simulate_fleet` runs several copies of the deployment: replicas behind a router, or
    prefill and decode workers.
    """
    slos = (slo_ttft_s, slo_tpot_s)
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
    run_config = _run_config(dep, workload, config, scheduler, profile, engine, seed, slos)
    if spec_decode is not None:
        run_config = replace(run_config, deployment=with_spec(run_config.deployment, spec_decode))
    base_fn = config_step_fn(dep, config, cost_step_fn(dep))  # sim/sglang_overlap.py
    step_fn = base_fn if exact_steps else StepMemo(base_fn)
    state = state_blocks_per_seq(dep, config.block_size)  # a hybrid's recurrent state
    pool = BlockPool(capacity_blocks(dep, config), config.block_size, config.prefix_caching, state)
    frontend = None
    if api_server_processes is not None or host is not None or engine_in_api_server:
        frontend, front_cfg = make_frontend(
            dep, api_server_processes, host, host_model, engine_in_api_server
        )
        run_config = replace(run_config, extra={**run_config.extra, "frontend": front_cfg})
    if host_power:
        spec = host if isinstance(host, HostSpec) else get_host(host or "default")
        base_w = host_base_power_w(spec, dep.num_gpus)
        run_config = replace(run_config, extra={**run_config.extra, "host_base_w": base_w})
    return run_workload(
        workload,
        step_fn,
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
        frontend=frontend,
        gap_fn=cost_gap_fn(dep),
        spec=None if spec_decode is None else SpecRun.of(dep, spec_decode, memo=not exact_steps),
    )


def _run_config(
    dep: Deployment,
    workload: Workload,
    config: SchedulerConfig,
    scheduler: str,
    profile: str | None,
    engine: str | None,
    seed: int,
    slos: tuple[float | None, float | None],
) -> RunConfig:
    deployment_cfg = deployment_config(
        dep, profile=profile, engine=engine, scheduler=scheduler, config=config
    )
    return RunConfig(
        source="simulated",
        deployment=deployment_cfg,
        workload=workload_dict(workload),
        slo_ttft_s=slos[0],
        slo_tpot_s=slos[1],
        seed=seed,
        extra={"num_gpus": dep.num_gpus, "kv_bytes_per_token": dep.kv_bytes_per_token},
    )


def simulate_fleet(
    deployment: Deployment,
    workload: Workload,
    *,
    replicas: int = 1,
    router: str = "round-robin",
    disaggregate: str | None = None,
    kv_link_bytes_per_s: float | None = None,
    prefill_tp: int | None = None,
    decode_tp: int | None = None,
    dp: int = 1,
    config: SchedulerConfig | None = None,
    scheduler: str = "continuous",
    seed: int = 0,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    trace_requests: int = DEFAULT_TRACE_REQUESTS,
    profile: str | None = None,
    engine: str | None = None,
    spec_decode: SpecDecode | None = None,
    api_server_processes: int | None = None,
    host: str | HostSpec | None = None,
    host_model: HostModel | None = None,
    engine_in_api_server: bool = False,
    pd_handoff: str | None = None,
    prefill_deployment: Deployment | None = None,
    prefill_config: SchedulerConfig | None = None,
) -> ClusterResult | DisaggResult | DpEpResult | DpFleetResult:
    """Several copies of `deployment`, each simulated as `simulate` simulates one: `replicas`
    data-parallel replicas behind `router` (sim/cluster.py), or with `disaggregate` ("1p3d")
    prefill and decode workers with the KV sent between them (sim/disagg.py), each side with
    its own tensor parallelism (`prefill_tp`, `decode_tp`: default the deployment's); or, with `dp`
    > 1 and an attention-DP deployment over `dp` GPUs, its attention ranks behind `router`,
    stepping together through their shared MoE layers (sim/dpep.py), and with `replicas` > 1
    too, that many such groups behind `router` (sim/dpep_fleet.py). `to_dict()` is
    `simulate --replicas / --disaggregate / --dp --json`. `spec_decode`: every replica, or
    every decode worker, decodes speculatively (not with `dp`: ranks step together, and a
    rank's drafts would be another rank's wait). `api_server_processes`, `host`, `host_model`,
    `engine_in_api_server`: each replica is a server of its own with that front end, as
    `simulate` has it (replicas only: a disaggregated or DP deployment's front end is not
    simulated yet). `pd_handoff`: with `disaggregate`, "sglang" or "proxy" (sim/pd_handoff.py;
    default SGLang's own for an SGLang `engine`, else the proxy's). With `disaggregate`, an
    attention-DP `deployment` (and `dp` 1) is each decode worker: one engine whose step is the
    cost model's attention-DP step, its ranks balanced (sim/disagg.py); `prefill_deployment`
    and `prefill_config`: the prefill workers' own parallelism and scheduler flags (SGLang PD
    and Dynamo start each side with its own; default the decode side's, `prefill_tp`)."""
    if disaggregate is None and pd_handoff is not None:
        raise ConfigError("pd_handoff", pd_handoff, "--pd-handoff with --disaggregate")
    if disaggregate is None and (
        prefill_tp is not None
        or decode_tp is not None
        or prefill_deployment is not None
        or prefill_config is not None
    ):
        raise ConfigError(
            "prefill_tp", prefill_tp, "--prefill-tp / --decode-tp with --disaggregate"
        )
    if disaggregate is not None and decode_tp is not None:  # the run's config: the decode side's
        deployment = worker_deployment(deployment, decode_tp, "decode_tp")
    if config is None:
        config, engine = vllm_defaults(deployment.gpu), engine or "vllm"
    run_config = _run_config(
        deployment, workload, config, scheduler, profile, engine, seed, (slo_ttft_s, slo_tpot_s)
    )
    frontend_fn = None
    if api_server_processes is not None or host is not None or engine_in_api_server:
        if disaggregate is not None or dp > 1 or deployment.attention_dp:
            field, value = ("disaggregate", disaggregate) if disaggregate else ("dp", dp)
            raise ConfigError(field, value, "a front end is simulated per replica only (yet)")
        front_cfg = make_frontend(
            deployment, api_server_processes, host, host_model, engine_in_api_server
        )[1]
        run_config = replace(run_config, extra={**run_config.extra, "frontend": front_cfg})

        def frontend_fn() -> Frontend:  # one per replica: each is its own server
            return make_frontend(
                deployment, api_server_processes, host, host_model, engine_in_api_server
            )[0]

    # a disaggregated worker's attention-DP ranks step as one balanced engine (docstring)
    gang = dp > 1 or (deployment.attention_dp and disaggregate is None)
    spec = None
    if spec_decode is not None:
        if gang:
            raise ConfigError("spec_decode", spec_decode.label(), "not with --dp (yet)")
        run_config = replace(run_config, deployment=with_spec(run_config.deployment, spec_decode))
        spec = SpecRun.of(deployment, spec_decode)
    common: dict[str, Any] = dict(
        scheduler=scheduler,
        seed=seed,
        trace_requests=trace_requests,
        meta=run_config.to_dict(),
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
    )
    step_fn = StepMemo(config_step_fn(deployment, config, cost_step_fn(deployment)))
    blocks = capacity_blocks(deployment, config)
    if gang:
        if disaggregate is not None:
            raise ConfigError("dp", dp, "--dp without --disaggregate")
        if replicas != 1:  # a fleet of DP groups (sim/dpep_fleet.py)
            return run_dpep_fleet(
                workload, step_fn, deployment, config, blocks, groups=replicas, ranks=dp,
                router=router, rank_router=rank_router_for(engine), padded=pads_ranks(engine),
                frontend_s=deployment.efficiency.request_overhead_s, **common,
            )  # fmt: skip
        return run_dpep(
            workload, step_fn, deployment, config, blocks, ranks=dp, router=router,
            frontend_s=deployment.efficiency.request_overhead_s, padded=pads_ranks(engine),
            **common,
        )  # fmt: skip
    if disaggregate is not None:
        if replicas != 1 or router != "round-robin":
            raise ConfigError("replicas", replicas, "either --replicas or --disaggregate")
        split = Split.parse(disaggregate)
        prefill = None
        p_config = config  # the prefill side's flags, in the decode side's blocks
        if prefill_config is not None:
            p_config = replace(prefill_config, block_size=config.block_size)
        own_tp = prefill_tp is not None and prefill_tp != deployment.tp
        if prefill_deployment is not None or own_tp:
            p_dep = prefill_deployment or worker_deployment(
                deployment, prefill_tp or deployment.tp, "prefill_tp"
            )
            p_fn = DecodeMemo(config_step_fn(p_dep, p_config, cost_step_fn(p_dep)))
            prefill = (p_dep, p_fn, capacity_blocks(p_dep, p_config))
        elif p_config is not config:
            p_fn = DecodeMemo(config_step_fn(deployment, p_config, cost_step_fn(deployment)))
            prefill = (deployment, p_fn, capacity_blocks(deployment, p_config))
        return run_disaggregated(
            workload, step_fn, deployment, config, blocks, split=split,
            kv_link_bytes_per_s=kv_link_bytes_per_s, prefill=prefill, spec_run=spec,
            prefill_config=prefill_config,
            handoff=check_handoff(pd_handoff) if pd_handoff else handoff_for(engine),
            frontend_s=deployment.efficiency.request_overhead_s, **common,
        )  # fmt: skip
    return run_cluster(
        workload, step_fn, deployment, config, blocks, replicas=replicas, router=router,
        frontend_s=deployment.efficiency.request_overhead_s, spec_run=spec,
        frontend_fn=frontend_fn, **common,
    )  # fmt: skip


def worker_deployment(dep: Deployment, tp: int, field: str) -> Deployment:
    """`dep` with its own tensor parallelism (a prefill or decode worker's `--prefill-tp` /
    `--decode-tp`), on the fewest servers that hold it; a bad degree is named by `field`."""
    if tp == dep.tp:
        return dep
    try:
        return replace(dep, tp=tp, nodes=None)
    except ConfigError as err:
        raise ConfigError(
            field, tp, f"a tensor-parallel degree {dep.model.name} allows ({err})"
        ) from None


def make_frontend(
    dep: Deployment,
    processes: int | None,
    host: str | HostSpec | None,
    host_model: HostModel | None,
    engine_in_api_server: bool = False,
) -> tuple[Frontend, dict[str, Any]]:
    """The front end of `processes` API servers on `host`'s cores, and what the run records."""
    spec = host if isinstance(host, HostSpec) else get_host(host or "default")
    model = host_model or HostModel()
    n = check_processes(DEFAULT_API_SERVER_PROCESSES if processes is None else processes)
    front = Frontend.from_host(
        model,
        n,
        dep.model.name,
        cpu_core_speed=spec.cpu_core_speed,
        latency_s=dep.efficiency.request_overhead_s,
        shares_engine=engine_in_api_server,
    )
    cfg = {
        "engine_in_api_server": engine_in_api_server,
        "api_server_processes": n,
        "host": spec.name,
        "cpu_core_speed": spec.cpu_core_speed,
        "token_cpu_s": front.token_s,
    }
    return front, cfg
