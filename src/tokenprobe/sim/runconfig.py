"""A run config's deployment as the cost model prices it, and back (records.RunConfig).

`deployment_config(dep, ...)` is what a run records of a `cost.Deployment` (every field that
changes its price: model, GPU, tp/pp/ep, dtypes, the efficiency and power model, the power
limit) plus the names of the profile and engine preset and the scheduler it ran;
`price_deployment(dc)` rebuilds the same Deployment from it, and `scheduler_of(dc, gpu)` the
same SchedulerConfig (the engine preset's defaults under the recorded settings). Both directions
live here, above cost and records, so that one edit covers writers and readers.
"""

from __future__ import annotations

from dataclasses import asdict, fields, replace
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EP_COMM,
    Deployment,
    Efficiency,
    EpComm,
    PowerModel,
    SpecDecode,
    make_deployment,
)
from tokenprobe.hardware import GpuSpec
from tokenprobe.records import DeploymentConfig
from tokenprobe.sim.base import SchedulerConfig
from tokenprobe.sim.engines import engine_defaults

DEFAULT_ENGINE = "vllm"


def deployment_config(
    dep: Deployment,
    *,
    served_model: str | None = None,
    profile: str | None = None,
    engine: str | None = None,
    scheduler: str | None = None,
    config: SchedulerConfig | None = None,
) -> DeploymentConfig:
    """What a run records of `dep` (module docstring). `served_model`: the model's name as the
    server knows it, when that is not the catalog name (then `catalog_model` is dep's)."""
    sched: dict[str, Any] = {}
    if config is not None:
        sched = {"name": scheduler or "continuous", **asdict(config)}
    return DeploymentConfig(
        model=served_model or dep.model.name,
        catalog_model=dep.model.name if served_model else None,
        gpu=dep.gpu.name,
        tp=dep.tp,
        pp=dep.pp,
        nodes=dep.nodes,
        gpus_per_node=dep.gpus_per_node,
        expert_parallel=dep.expert_parallel,
        attention_dp=dep.attention_dp,
        dp_ranks=dep.dp_ranks,
        weight_dtype=dep.weight_dtype.name,
        act_dtype=dep.act_dtype.name,
        kv_dtype=dep.kv_dtype.name,
        profile=profile,
        # the values, not only the profile's name: a reader prices what ran even after the
        # profile or the defaults change
        efficiency=asdict(dep.efficiency),
        power=asdict(dep.power),
        power_limit_w=dep.power_limit_w,
        engine=engine,
        scheduler=sched,
        ep_comm={} if dep.ep_comm == DEFAULT_EP_COMM else asdict(dep.ep_comm),
    )


def price_deployment(dc: DeploymentConfig) -> Deployment:
    """The Deployment `dc` describes; ConfigError / UnknownModelError / UnknownHardwareError
    when it names no catalog model or GPU or a value the cost model refuses."""
    return make_deployment(
        dc.catalog_name or "",
        dc.gpu or "",
        tp=dc.tp or 1,
        pp=dc.pp or 1,
        nodes=dc.nodes,
        gpus_per_node=dc.gpus_per_node,
        expert_parallel=dc.expert_parallel,
        attention_dp=dc.attention_dp,
        dp_ranks=dc.dp_ranks,
        weight_dtype=dc.weight_dtype or "bf16",
        act_dtype=dc.act_dtype,
        kv_dtype=dc.kv_dtype,
        efficiency=Efficiency(**dc.efficiency) if dc.efficiency else None,
        power=PowerModel.from_mapping(dc.power) if dc.power else None,
        power_limit_w=dc.power_limit_w,
        ep_comm=EpComm.from_mapping(dc.ep_comm) if dc.ep_comm else None,
    )


def scheduler_of(dc: DeploymentConfig, gpu: GpuSpec, engine: str | None = None) -> SchedulerConfig:
    """The engine preset's scheduler on `gpu` (`engine`, else the recorded one, else vLLM's)
    with the recorded settings on top (unknown keys, e.g. the scheduler's name, left out). The
    recorded settings are the recorded preset's: another engine gets its own preset alone."""
    preset = engine or dc.engine or DEFAULT_ENGINE
    known = {f.name for f in fields(SchedulerConfig)}
    same = dc.engine is None or preset == dc.engine
    settings = {k: v for k, v in dc.scheduler.items() if k in known and same}
    return engine_defaults(preset, gpu, dc.tp or 1, **settings)


def scheduler_name(dc: DeploymentConfig) -> str:
    name = dc.scheduler.get("name")
    return name if isinstance(name, str) else "continuous"


def with_spec(dc: DeploymentConfig, spec: SpecDecode) -> DeploymentConfig:
    """`dc` with speculative decoding recorded (`spec_decode_of` reads it back)."""
    return replace(
        dc, spec_decode=f"{spec.method}:{spec.draft_tokens}", spec_acceptance=spec.acceptance
    )


def spec_decode_of(dc: DeploymentConfig) -> SpecDecode | None:
    """The speculative decoding a run recorded (None: off); ConfigError on a bad value."""
    if dc.spec_decode is None:
        return None
    return SpecDecode.parse(dc.spec_decode, dc.spec_acceptance)
