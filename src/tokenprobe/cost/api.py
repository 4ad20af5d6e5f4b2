"""`estimate(...)`: the one-call Python API behind `tokenprobe estimate` (U2)."""

from __future__ import annotations

from dataclasses import replace

from tokenprobe.cost.deployment import MAX_GPUS, make_deployment
from tokenprobe.cost.efficiency import DEFAULT_EFFICIENCY, Efficiency
from tokenprobe.cost.energy import EnergyPrices, PowerModel, host_base_power_w
from tokenprobe.cost.epcomm import EpComm
from tokenprobe.cost.estimate import Estimate, Workload, estimate_deployment
from tokenprobe.cost.host import (
    DEFAULT_API_SERVER_PROCESSES,
    DEFAULT_ENGINE_INIT_S,
    HostModel,
    check_processes,
)
from tokenprobe.cost.kvtransfer import Split, kv_transfer_stage
from tokenprobe.cost.memory import MemoryBudget
from tokenprobe.cost.specdecode import SpecDecode
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import GpuSpec, get_host
from tokenprobe.model import ModelSpec


def _check_degree(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GPUS:
        raise ConfigError(name, value, f"an integer in [1, {MAX_GPUS:,}]")


def resolve_parallelism(num_gpus: int | None, tp: int | None, pp: int) -> int:
    """The tensor-parallel degree from --num-gpus and/or --tp (num_gpus = tp x pp)."""
    _check_degree("pp", pp)
    for name, value in (("num_gpus", num_gpus), ("tp", tp)):
        if value is not None:
            _check_degree(name, value)
    if tp is None:
        if num_gpus is None:
            return 1
        if num_gpus % pp:
            raise ConfigError("num_gpus", num_gpus, f"a multiple of pp={pp}")
        return num_gpus // pp
    if num_gpus is not None and num_gpus != tp * pp:
        raise ConfigError("num_gpus", num_gpus, f"must equal tp x pp = {tp * pp}")
    return tp


def _check_kinds(
    model: object, gpu: object, names: dict[str, object], efficiency: object, power: object
) -> None:
    """Python callers can pass anything: refuse a wrong kind of value by name, not by traceback
    (the numbers are checked by the objects they build: Workload, Deployment, EnergyPrices...)."""
    if not isinstance(model, str | ModelSpec):
        raise ConfigError("model", model, "a catalog name, HF id, config path or ModelSpec")
    if not isinstance(gpu, str | GpuSpec):
        raise ConfigError("gpu", gpu, "a GPU name or GpuSpec")
    for name, value in names.items():
        optional = name in ("act_dtype", "kv_dtype")
        if not (isinstance(value, str) or (optional and value is None)):
            raise ConfigError(name, value, "a name (a string)")
    if efficiency is not None and not isinstance(efficiency, dict | Efficiency):
        raise ConfigError("efficiency", efficiency, "a dict of overrides or an Efficiency")
    if power is not None and not isinstance(power, PowerModel):
        raise ConfigError("power", power, "a PowerModel")


def estimate(
    model: str | ModelSpec,
    gpu: str | GpuSpec,
    *,
    input_tokens: int,
    output_tokens: int,
    batch: int = 1,
    tp: int | None = None,
    pp: int = 1,
    num_gpus: int | None = None,
    expert_parallel: bool = False,
    attention_dp: bool = False,
    weight_dtype: str = "bf16",
    act_dtype: str | None = None,
    kv_dtype: str | None = None,
    efficiency: dict[str, float] | Efficiency | None = None,
    power: PowerModel | None = None,
    power_limit_w: float | None = None,
    gpu_memory_utilization: float = 0.9,
    pue: float = 1.0,
    server_overhead_fraction: float = 0.0,
    electricity_usd_per_kwh: float | None = None,
    gpu_hour_usd: float | None = None,
    tokenizer_tokens_per_s: float | None = None,
    network_rtt_s: float = 0.0,
    host: str = "default",
    tls: bool = False,
    cpu_offload_bytes: float = 0.0,
    storage_bytes_per_s: float | None = None,
    engine_init_s: float = DEFAULT_ENGINE_INIT_S,
    api_server_processes: int = DEFAULT_API_SERVER_PROCESSES,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    spec_decode: SpecDecode | None = None,
    host_power: bool = False,
    disaggregate: str | None = None,
    ep_comm: EpComm | None = None,
) -> Estimate:
    """Estimate one static batch of identical requests; `.to_dict()` is `--json`'s output.

    `efficiency` is either overrides of the defaults ({"memory": 0.85}) or a whole Efficiency
    (e.g. a calibrated profile's: `tokenprobe.calibrate.load_profile("vllm").efficiency`), and
    `power` the profile's PowerModel. `nodes` / `gpus_per_node` place the tp x pp GPUs on
    servers (default: the GPU's catalog topology, the fewest servers that hold them).
    `spec_decode` prices decode with speculative decoding (cost/specdecode.py). `host_power`
    adds the host's base power (hosts.toml `base_power_w`) to every energy figure, the basis
    becoming "GPU + host" (cost.energy.EnergyPrices). `disaggregate` ("1p1d"): prefill and
    decode on workers of this deployment, the prompts' KV moved between them as a stage of its
    own (`stages.kv_transfer`, cost/kvtransfer.py), added to TTFT. `ep_comm`: the MoE layers'
    EP back end under attention DP (cost/epcomm.py; default the plain all-to-all)."""
    names = {"weight_dtype": weight_dtype, "act_dtype": act_dtype, "kv_dtype": kv_dtype}
    _check_kinds(model, gpu, {**names, "host": host}, efficiency, power)
    workload = Workload(input_tokens=input_tokens, output_tokens=output_tokens, batch=batch)
    dep = make_deployment(
        model,
        gpu,
        tp=resolve_parallelism(num_gpus, tp, pp),
        pp=pp,
        expert_parallel=expert_parallel,
        attention_dp=attention_dp,
        weight_dtype=weight_dtype,
        act_dtype=act_dtype,
        kv_dtype=kv_dtype,
        efficiency=efficiency
        if isinstance(efficiency, Efficiency)
        else DEFAULT_EFFICIENCY.with_overrides(efficiency or {}),
        power=power,
        power_limit_w=power_limit_w,
        cpu_offload_bytes=cpu_offload_bytes,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        ep_comm=ep_comm,
    )
    host_model = HostModel(
        network_rtt_s=network_rtt_s,
        tls=tls,
        storage_bytes_per_s=storage_bytes_per_s,
        engine_init_s=engine_init_s,
    )
    if tokenizer_tokens_per_s is not None:
        host_model = replace(host_model, tokenizer_tokens_per_s=tokenizer_tokens_per_s)
    host_spec = get_host(host)
    base_w = host_base_power_w(host_spec, dep.num_gpus) if host_power else 0.0
    split = None if disaggregate is None else Split.parse(disaggregate)
    est = estimate_deployment(
        dep,
        workload,
        host=host_model,
        host_spec=host_spec,
        api_server_processes=check_processes(api_server_processes),
        budget=MemoryBudget(gpu_memory_utilization=gpu_memory_utilization),
        spec=spec_decode,
        prices=EnergyPrices(
            pue=pue,
            server_overhead_fraction=server_overhead_fraction,
            electricity_usd_per_kwh=electricity_usd_per_kwh,
            gpu_hour_usd=gpu_hour_usd,
            host_base_w=base_w,
        ),
    )
    if split is None:
        return est
    stage = kv_transfer_stage(dep, dep, input_tokens, batch, split)
    return replace(
        est,
        ttft_breakdown_s={**est.ttft_breakdown_s, "kv_transfer_s": stage["time_s"]},
        outside_gpu={**est.outside_gpu, "stages": {"kv_transfer": stage}},
    )
