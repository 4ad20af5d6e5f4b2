"""`tokenprobe simulate`: a workload through a simulated vLLM-like server, as tables or JSON."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.text import Text

from tokenprobe.cli.app import app, guarded, print_json
from tokenprobe.cli.app import console as stdout_console
from tokenprobe.cli.dataset_workload import (
    DATASET_HELP,
    MAX_INPUT_HELP,
    MAX_OUTPUT_HELP,
    TOKENIZER_URL_HELP,
    dataset_workload,
)
from tokenprobe.cli.deployment_options import (
    GpuOption,
    GpusPerNodeOption,
    JsonOption,
    KvDtypeOption,
    ModelOption,
    NodesOption,
)
from tokenprobe.cli.engine_version_options import (
    EngineVersionOption,
    profile_engine,
    server_defaults,
)
from tokenprobe.cli.ep_options import (
    A2aBackendOption,
    DeepepModeOption,
    EplbOption,
    OverlapOption,
    RedundantOption,
    ep_comm_option,
)
from tokenprobe.cli.estimate import PROFILE_HELP, engine_profile
from tokenprobe.cli.fleet_options import (
    DecodeTpOption,
    DpOption,
    EnableEpOption,
    PrefillTpOption,
)
from tokenprobe.cli.frontend_tables import (
    batch_window_effect,
)
from tokenprobe.cli.pd_options import PdHandoffOption
from tokenprobe.cli.render import progress, prose
from tokenprobe.cli.sglang_options import (
    EnableMixedChunkOption,
    MaxPrefillTokensOption,
    ScheduleConservativenessOption,
)
from tokenprobe.cli.simulate_render import render_simulation, scenario_table
from tokenprobe.cli.spec_options import (
    SpecAcceptanceOption,
    SpecDecodeOption,
    spec_of,
)
from tokenprobe.cost import DEFAULT_EP_COMM, EpComm, dp_layout, make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.records import prepare_run_folder
from tokenprobe.sim import (
    DEFAULT_ENGINE,
    ENGINES,
    ROUTERS,
    SCENARIOS,
    ClusterResult,
    DisaggResult,
    DpEpResult,
    DpFleetResult,
    ProgressFn,
    Scenario,
    ScenarioPart,
    SchedulerConfig,
    SimResult,
    build_workload,
    engine_ep_comm,
    get_scenario,
    rank_router_for,
    simulate,
    simulate_fleet,
)
from tokenprobe.units import GIGA
from tokenprobe.workload import load_workload

PROGRESS_MIN_REQUESTS = 2000


@dataclass(frozen=True, slots=True)
class ServerFlags:
    """The server-setting flags; None / False means "keep the default or the scenario's"."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    no_chunked_prefill: bool = False
    prefix_caching: bool | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    capacity_policy: str | None = None
    memory_rule: str | None = None
    batch_window_s: float | None = None
    max_prefill_tokens: int | None = None
    schedule_conservativeness: float | None = None
    enable_mixed_chunk: bool = False

    def config(self, base: SchedulerConfig | None = None) -> SchedulerConfig:
        base = base or SchedulerConfig()
        return replace(
            base,
            max_num_seqs=_given(self.max_num_seqs, base.max_num_seqs),
            max_num_batched_tokens=_given(self.max_num_batched_tokens, base.max_num_batched_tokens),
            chunked_prefill=base.chunked_prefill and not self.no_chunked_prefill,
            block_size=_given(self.block_size, base.block_size),
            prefix_caching=(
                base.prefix_caching if self.prefix_caching is None else self.prefix_caching
            ),
            gpu_memory_utilization=_given(self.gpu_memory_utilization, base.gpu_memory_utilization),
            capacity_policy=self.capacity_policy or base.capacity_policy,
            memory_rule=self.memory_rule or base.memory_rule,
            batch_window_s=_given(self.batch_window_s, base.batch_window_s),
            max_prefill_tokens=_given(self.max_prefill_tokens, base.max_prefill_tokens),
            schedule_conservativeness=_given(
                self.schedule_conservativeness, base.schedule_conservativeness
            ),
            enable_mixed_chunk=base.enable_mixed_chunk or self.enable_mixed_chunk,
        )


_T = TypeVar("_T")


def _given(flag: _T | None, default: _T) -> _T:
    """The flag when given (0 included, which SchedulerConfig then refuses), else the default."""
    return default if flag is None else flag


@app.command("simulate")
def simulate_cmd(
    model: ModelOption = "",
    gpu: GpuOption = "",
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree")] = 1,
    nodes: NodesOption = None,
    gpus_per_node: GpusPerNodeOption = None,
    weight_dtype: Annotated[str, typer.Option(help="bf16 fp16 fp8 int8 int4 ...")] = "bf16",
    kv_dtype: KvDtypeOption = None,
    input_tokens: Annotated[int | None, typer.Option(help="Prompt tokens per request")] = None,
    output_tokens: Annotated[int | None, typer.Option(help="Output tokens per request")] = None,
    rate: Annotated[float | None, typer.Option(help="Open loop: requests/s")] = None,
    burstiness: Annotated[float, typer.Option(help="Gamma shape; 1 = Poisson")] = 1.0,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: users")] = None,
    offline: Annotated[bool, typer.Option(help="All requests at t = 0")] = False,
    num_requests: Annotated[int, typer.Option(help="Requests in the run")] = 100,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    scenario: Annotated[
        str | None, typer.Option(help=f"Named scenario: {', '.join(SCENARIOS)}")
    ] = None,
    workload: Annotated[Path | None, typer.Option(help="Workload TOML/JSON file")] = None,
    dataset: Annotated[Path | None, typer.Option(help=DATASET_HELP)] = None,
    max_input_tokens: Annotated[int | None, typer.Option(help=MAX_INPUT_HELP)] = None,
    max_output_tokens: Annotated[int | None, typer.Option(help=MAX_OUTPUT_HELP)] = None,
    tokenizer_url: Annotated[str | None, typer.Option(help=TOKENIZER_URL_HELP)] = None,
    scheduler: Annotated[str, typer.Option(help="continuous | static")] = "continuous",
    engine: Annotated[
        str | None,
        typer.Option(
            help=f"Whose defaults the server starts from: {', '.join(ENGINES)} (batch limits, "
            "KV sizing, capacity policy; the flags below override them), and whose shipped "
            "profile prices it on this GPU's vendor (vllm on mi300x: vllm-rocm; --profile "
            "overrides). Default: vLLM's scheduler with the model's default parameters"
        ),
    ] = None,
    engine_version: EngineVersionOption = None,
    max_num_seqs: Annotated[
        int | None, typer.Option(help="vLLM's default: 1024 on >= 70 GiB GPUs but A100, else 256")
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option(help="vLLM's default: 8192 on >= 70 GiB GPUs but A100, else 2048")
    ] = None,
    no_chunked_prefill: Annotated[
        bool, typer.Option("--no-chunked-prefill", help="Prefill each prompt in one step")
    ] = False,
    prefix_caching: Annotated[
        bool | None,
        typer.Option(
            "--prefix-caching/--no-prefix-caching",
            help="vLLM v1's default: on (shared prefixes and preempted requests' blocks are "
            "found again)",
        ),
    ] = None,
    block_size: Annotated[int | None, typer.Option(help="KV block tokens (16)")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="0.9")] = None,
    capacity_policy: Annotated[
        str | None,
        typer.Option(
            help="max_utilization (vLLM: KV as tokens arrive, preempt when short) | "
            "guaranteed_no_evict (TensorRT-LLM: KV for the whole request at admission)"
        ),
    ] = None,
    memory_rule: Annotated[
        str | None,
        typer.Option(
            help="How KV room is sized: vllm (fraction of HBM less weights and activations) | "
            "sglang (mem_fraction_static less weights) | tensorrt-llm (fraction of what is "
            "free after the engine loads) | vllm-0.7-mla, vllm-0.7.0-mla-as-mha (vLLM 0.7.x's "
            "and 0.7.0's MLA sizing)"
        ),
    ] = None,
    slo_ttft_s: Annotated[float | None, typer.Option(help="TTFT SLO for goodput (s)")] = None,
    slo_tpot_s: Annotated[float | None, typer.Option(help="TPOT SLO for goodput (s)")] = None,
    profile: Annotated[str | None, typer.Option(help=PROFILE_HELP)] = None,
    replicas: Annotated[
        int, typer.Option(help="Data-parallel replicas of the deployment behind --router")
    ] = 1,
    router: Annotated[
        str | None,
        typer.Option(
            help=f"How requests reach the replicas: {', '.join(ROUTERS)} (default round-robin; "
            "with --dp alone, how they reach its ranks: default the engine's DP dispatch, "
            "vLLM least-loaded, SGLang round-robin)"
        ),
    ] = None,
    disaggregate: Annotated[
        str | None,
        typer.Option(help="Prefill/decode workers, e.g. 1p3d (the KV moves between them)"),
    ] = None,
    prefill_tp: PrefillTpOption = None,
    decode_tp: DecodeTpOption = None,
    dp: DpOption = 1,
    enable_expert_parallel: EnableEpOption = False,
    moe_a2a_backend: A2aBackendOption = "",
    deepep_mode: DeepepModeOption = "auto",
    two_batch_overlap: OverlapOption = False,
    ep_redundant_experts: RedundantOption = 0,
    enable_eplb: EplbOption = False,
    kv_link_gb_per_s: Annotated[
        float | None,
        typer.Option(
            help="With --disaggregate: KV transfer GB/s (default: NVLink in one domain, "
            "else the NICs)"
        ),
    ] = None,
    pd_handoff: PdHandoffOption = None,
    api_server_processes: Annotated[
        int | None,
        typer.Option(
            help="Model the API server as a resource: this many single-threaded processes "
            "(vLLM --api-server-count, default 1) parse, tokenize and stream on the CPU "
            "(default: a fixed front-end latency)"
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Host whose cores run the API server: catalog name or host TOML file "
            "(implies --api-server-processes 1 unless given)"
        ),
    ] = None,
    host_power: Annotated[
        bool,
        typer.Option(
            help="Add the host's base power (CPUs, DRAM, NICs, fans: hosts.toml base_power_w, "
            "host from --host) to the energy: the basis becomes GPU + host"
        ),
    ] = False,
    engine_in_api_server: Annotated[
        bool,
        typer.Option(
            "--engine-in-api-server",
            help="The engine loop runs inside the one API-server process (vLLM V0): the GPU "
            "waits while that process parses and streams",
        ),
    ] = False,
    batch_window_s: Annotated[
        float | None,
        typer.Option(
            help="Hold admissions up to this long to gather a batch (seed 003 section 6.2); "
            "the summary compares it with no window"
        ),
    ] = None,
    max_prefill_tokens: MaxPrefillTokensOption = None,
    schedule_conservativeness: ScheduleConservativenessOption = None,
    enable_mixed_chunk: EnableMixedChunkOption = False,
    spec_decode: SpecDecodeOption = None,
    spec_acceptance: SpecAcceptanceOption = None,
    out: Annotated[Path | None, typer.Option(help="Write the run folder here")] = None,
    json_out: JsonOption = False,
) -> None:
    """Simulate serving a workload: latency percentiles, throughput, KV use, energy."""
    flags = ServerFlags(
        max_num_seqs,
        max_num_batched_tokens,
        no_chunked_prefill,
        prefix_caching,
        block_size,
        gpu_memory_utilization,
        capacity_policy,
        memory_rule,
        batch_window_s,
        max_prefill_tokens,
        schedule_conservativeness,
        enable_mixed_chunk,
    )
    spec = guarded(lambda: spec_of(spec_decode, spec_acceptance))
    if spec is not None and (scenario is not None or dp != 1):
        guarded(lambda: _no_spec_here(spec_decode))
    if scenario is not None:
        sc = guarded(lambda: get_scenario(scenario))
        results = guarded(lambda: _run_scenario(sc, seed, flags, scheduler))
        _emit_scenario(sc, results, json_out, out)
        return

    def run(
        progress: ProgressFn | None, window: ServerFlags = flags
    ) -> SimResult | ClusterResult | DisaggResult | DpEpResult | DpFleetResult:
        if out is not None:  # a file or unwritable path is refused before the simulation
            prepare_run_folder(out, overwrite=True)  # and an old run's files never mix in
        if not model or not gpu:
            raise ConfigError("model/gpu", (model, gpu), "both are needed (or use --scenario)")
        shape_flags = (input_tokens, output_tokens, rate, concurrency)
        if workload is not None and (offline or any(f is not None for f in shape_flags)):
            raise ConfigError(
                "workload", str(workload), "a workload file replaces the length/arrival flags"
            )
        if workload is not None and dataset is not None:
            raise ConfigError("dataset", str(dataset), "a workload file names its own [dataset]")
        wl = load_workload(workload) if workload is not None else None
        wl = dataset_workload(
            dataset, input_tokens=input_tokens, output_tokens=output_tokens,
            max_input_tokens=max_input_tokens, max_output_tokens=max_output_tokens,
            tokenizer_url=tokenizer_url, rate_per_s=rate, burstiness=burstiness,
            concurrency=concurrency, offline=offline, num_requests=num_requests,
        ) or wl  # fmt: skip
        wl = wl or build_workload(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            rate_per_s=rate,
            burstiness=burstiness,
            concurrency=concurrency,
            offline=offline,
            num_requests=num_requests,
        )
        # --profile, else --engine's shipped profile for the GPU's vendor, else the defaults
        p = engine_profile(profile_engine(engine, engine_version), profile, gpu)
        chosen = profile if profile is not None else (p.name if p is not None else None)
        layout: dict[str, Any] = {"tp": tp, **dp_layout(dp, enable_expert_parallel, tp)}
        dep = make_deployment(
            model, gpu, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
            efficiency=p.efficiency if p else None, power=p.power if p else None,
            nodes=nodes, gpus_per_node=gpus_per_node, **layout,
            ep_comm=ep_comm_option(moe_a2a_backend, deepep_mode, two_batch_overlap,
                                   ep_redundant_experts, enable_eplb,
                                   _engine_exchange(dp, engine, engine_version)),
        )  # fmt: skip
        common: dict[str, Any] = dict(
            config=window.config(server_defaults(engine or DEFAULT_ENGINE, dep, engine_version)),
            scheduler=scheduler,
            seed=seed,
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            profile=chosen,
            engine=engine or DEFAULT_ENGINE,
        )
        front_end: dict[str, Any] = dict(
            api_server_processes=api_server_processes,
            host=host,
            engine_in_api_server=engine_in_api_server,
            host_power=host_power,
        )
        fleet = (prefill_tp, decode_tp, disaggregate, pd_handoff)
        routed = router or _default_router(dp, replicas, engine)
        if replicas != 1 or routed != "round-robin" or dp != 1 or any(f is not None for f in fleet):
            # each replica is a server with its own front end; a disaggregated or DP
            # deployment's front end, and the host's power over a fleet, are not simulated yet
            only_one = any(f is not None for f in fleet) or dp != 1
            given = [
                (name, value)
                for name, value in (
                    ("api_server_processes", api_server_processes if only_one else None),
                    ("host", host if only_one else None),
                    ("engine_in_api_server", engine_in_api_server if only_one else None),
                    ("host_power", host_power),
                )
                if value
            ]
            if given:  # the first front-end or host flag given is the one named
                raise ConfigError(
                    *given[0],
                    "the host's power is simulated for one replica, the front end for one "
                    "replica or each of --replicas (not with --disaggregate or --dp yet)",
                )
            link = None
            if kv_link_gb_per_s is not None:
                link = finite("kv_link_gb_per_s", kv_link_gb_per_s, lo=1e-9, hi=1e6) * GIGA
            return simulate_fleet(
                dep, wl, replicas=replicas, router=routed, disaggregate=disaggregate,
                kv_link_bytes_per_s=link, prefill_tp=prefill_tp, decode_tp=decode_tp, dp=dp,
                spec_decode=spec, api_server_processes=api_server_processes, host=host,
                engine_in_api_server=engine_in_api_server, pd_handoff=pd_handoff, **common,
            )  # fmt: skip
        return simulate(
            deployment=dep, workload=wl, progress=progress, spec_decode=spec, **common, **front_end
        )

    show_bar = not json_out and num_requests >= PROGRESS_MIN_REQUESTS
    result = guarded(lambda: _with_progress(run, show_bar))
    data = result.to_dict()
    if batch_window_s:  # its effect: the same run without the window
        plain = guarded(lambda: run(None, replace(flags, batch_window_s=0.0))).to_dict()
        data["batch_window"] = batch_window_effect(batch_window_s, plain, data)
    if out is not None:
        result.write(out)
    if json_out:
        print_json(data)
        return
    render_simulation(data)
    if out is not None:
        prose(f"run folder written to {out}", markup=False)


def _default_router(dp: int, replicas: int, engine: str | None) -> str:
    """--router's default: round-robin over replicas; one DP group's ranks get the engine's own
    dispatch (`sim.rank_router_for`, as a fleet's groups do)."""
    if dp > 1 and replicas == 1:
        return rank_router_for(engine or DEFAULT_ENGINE)
    return "round-robin"


def _engine_exchange(dp: int, engine: str | None, engine_version: str | None) -> EpComm:
    """The MoE exchange without a back-end flag: the engine's under attention DP (`--dp` > 1,
    the only layout with one: cost/epexchange.py), else the plain default the API's
    deployments hold, so a run's config is the API's."""
    if dp <= 1:
        return DEFAULT_EP_COMM
    return engine_ep_comm(engine or DEFAULT_ENGINE, engine_version)


def _no_spec_here(spec_decode: str | None) -> None:
    raise ConfigError(
        "spec_decode",
        spec_decode,
        "not with --scenario or --dp (yet): one replica, --replicas or --disaggregate",
    )


def _with_progress(
    run: Any, show: bool
) -> SimResult | ClusterResult | DisaggResult | DpEpResult | DpFleetResult:
    with progress("simulating", enabled=show) as report:
        result: SimResult | ClusterResult | DisaggResult | DpEpResult | DpFleetResult = run(report)
    return result


def _run_scenario(
    sc: Scenario, seed: int, flags: ServerFlags, scheduler: str
) -> list[tuple[ScenarioPart, SimResult]]:
    out = []
    for part in sc.parts:
        result = simulate(
            sc.model,
            sc.gpu,
            tp=sc.tp,
            weight_dtype=sc.weight_dtype,
            workload=part.workload,
            config=flags.config(part.config),
            scheduler=scheduler,
            seed=seed,
        )
        out.append((part, result))
    return out


def _emit_scenario(
    sc: Scenario, results: list[tuple[ScenarioPart, SimResult]], json_out: bool, out: Path | None
) -> None:
    parts: list[dict[str, Any]] = []
    for i, (part, result) in enumerate(results):
        if out is not None:
            result.write(out if len(results) == 1 else out / f"part{i}-{part.workload.name}")
        seed = part.seed
        parts.append(
            {
                "label": part.label,
                "seed_reference": None
                if seed is None
                else {
                    "output_tokens_per_s": seed.output_tokens_per_s,
                    "kwh_per_million_tokens": seed.kwh_per_million_tokens,
                    "average_power_w": seed.average_power_w,
                    "source": seed.source,
                },
                "result": result.to_dict(),
            }
        )
    data: dict[str, Any] = {"scenario": sc.name, "description": sc.description, "parts": parts}
    if json_out:
        print_json({**parts[0]["result"], "scenario": sc.name} if len(parts) == 1 else data)
        return
    prose(
        Text(sc.name, style="bold")
        + f": {sc.description} ({sc.model}, {sc.weight_dtype}, {sc.gpu})"
    )
    scenario_table(parts)
    for p in parts:
        stdout_console.print()
        prose(Text(p["label"], style="bold"))
        render_simulation(p["result"])
