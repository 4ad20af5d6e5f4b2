"""`tokenprobe estimate`: the analytical cost of one request shape, as tables or JSON."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from tokenprobe.calibrate import Profile, load_profile, select_profile
from tokenprobe.cli.app import app, guarded, print_json
from tokenprobe.cli.deployment_options import (
    BatchOption,
    GpuOption,
    GpusPerNodeOption,
    InputTokensOption,
    JsonOption,
    KvDtypeOption,
    ModelOption,
    NodesOption,
    NumGpusOption,
    OutputTokensOption,
    PpOption,
    TpOption,
    WeightDtypeOption,
)
from tokenprobe.cli.ep_options import (
    A2aBackendOption,
    DeepepModeOption,
    EplbOption,
    OverlapOption,
    RedundantOption,
    ep_comm_option,
)
from tokenprobe.cli.fleet_options import render_kv_transfer_stage
from tokenprobe.cli.render import Col, print_side_by_side, print_table, prose
from tokenprobe.cli.spec_options import SpecAcceptanceOption, SpecDecodeOption, spec_of
from tokenprobe.cost import (
    DEFAULT_API_SERVER_PROCESSES,
    DEFAULT_ENGINE_INIT_S,
    Efficiency,
    Estimate,
    estimate,
    gpu_generation,
)
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.hardware import get_gpu
from tokenprobe.report import memory_rows
from tokenprobe.sim import engine_ep_comm
from tokenprobe.units import GIGA, fmt_s, fmt_si

PROFILE_HELP = (
    "Calibrated engine profile: vllm, vllm-2024, vllm-2025h1, vllm-rocm, vllm-blackwell, sglang, "
    "sglang-2025h1, tensorrt-llm or a TOML (default: the --engine's profile for the GPU)"
)
ENGINE_PROFILE_HELP = (
    "Engine (or engine era: sglang-2025h1 = SGLang 0.4, vllm-2025h1 = vLLM 0.7-0.9) whose "
    "shipped profile prices the run on this GPU's vendor and generation (vllm on mi300x: "
    "vllm-rocm, on b200: vllm-blackwell); "
    "--profile overrides"
)


def engine_profile(engine: str | None, profile: str | None, gpu: str) -> Profile | None:
    """--profile when given, else the shipped profile of --engine for the GPU's vendor
    and generation (`calibrate.select_profile`), else None (the model's default parameters)."""
    if profile is not None:
        return load_profile(profile)
    if engine is None:
        return None
    spec = get_gpu(gpu)
    return select_profile(engine, spec.vendor, gpu_generation(spec))


def parse_overrides(items: list[str], field: str, example: str = "memory=0.85") -> dict[str, float]:
    """`key=value` pairs from a repeated option into floats; ConfigError naming the bad one."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError(item)
            out[key.strip()] = finite(f"{field}.{key.strip()}", value.strip())
        except ConfigError:
            raise
        except ValueError:
            raise ConfigError(field, item, f"key=number, e.g. {example}") from None
    return out


@app.command("estimate")
def estimate_cmd(
    model: ModelOption,
    gpu: GpuOption,
    input_tokens: InputTokensOption = 1024,
    output_tokens: OutputTokensOption = 256,
    batch: BatchOption = 1,
    num_gpus: NumGpusOption = None,
    tp: TpOption = None,
    pp: PpOption = 1,
    nodes: NodesOption = None,
    gpus_per_node: GpusPerNodeOption = None,
    disaggregate: Annotated[
        str | None,
        typer.Option(
            help="Prefill and decode on workers of this deployment, e.g. 1p1d: the "
            "prompts' KV moved between them, a stage of its own"
        ),
    ] = None,
    spec_decode: SpecDecodeOption = None,
    spec_acceptance: SpecAcceptanceOption = None,
    expert_parallel: Annotated[
        bool, typer.Option(help="Spread MoE experts over the TP GPUs")
    ] = False,
    attention_dp: Annotated[
        bool,
        typer.Option(help="With --expert-parallel: attention data-parallel (vLLM DP + EP)"),
    ] = False,
    moe_a2a_backend: A2aBackendOption = "",
    deepep_mode: DeepepModeOption = "auto",
    two_batch_overlap: OverlapOption = False,
    ep_redundant_experts: RedundantOption = 0,
    enable_eplb: EplbOption = False,
    weight_dtype: WeightDtypeOption = "bf16",
    act_dtype: Annotated[
        str | None, typer.Option(help="Activation dtype (default: by weights)")
    ] = None,
    kv_dtype: KvDtypeOption = None,
    power_limit_w: Annotated[float | None, typer.Option(help="GPU power cap in W")] = None,
    gpu_memory_utilization: Annotated[
        float, typer.Option(help="HBM fraction for the engine")
    ] = 0.9,
    pue: Annotated[float, typer.Option(help="Facility power usage effectiveness")] = 1.0,
    server_overhead: Annotated[
        float,
        typer.Option(
            "--server-overhead-fraction",
            help="Host power that rises with the GPUs' (fans, PSU losses) as a fraction of GPU "
            "power, on top of --host-power's fixed base",
        ),
    ] = 0.0,
    host_power: Annotated[
        bool,
        typer.Option(
            help="Add the host's base power (CPUs, DRAM, NICs, fans: hosts.toml base_power_w) "
            "to every energy line: the basis becomes GPU + host"
        ),
    ] = False,
    electricity_usd_per_kwh: Annotated[
        float | None, typer.Option(help="Electricity price, USD per kWh")
    ] = None,
    gpu_hour_usd: Annotated[float | None, typer.Option(help="Price of one GPU-hour")] = None,
    host: Annotated[
        str, typer.Option(help="Host: catalog name or TOML file (CPU, DRAM, NVMe, NIC)")
    ] = "default",
    tls: Annotated[bool, typer.Option(help="Clients connect over TLS")] = False,
    api_server_processes: Annotated[
        int,
        typer.Option(
            help="API-server processes (vLLM --api-server-count): each parses, tokenizes and "
            "streams on one core, so the host saturates at processes / CPU s per request"
        ),
    ] = DEFAULT_API_SERVER_PROCESSES,
    tokenizer_tokens_per_s: Annotated[
        float | None,
        typer.Option(help="Measured tokenizer speed per core (benchmarks/host_costs.py)"),
    ] = None,
    storage_gb_per_s: Annotated[
        float | None,
        typer.Option(help="Checkpoint storage read speed, GB/s (default: the host's NVMe)"),
    ] = None,
    engine_init_s: Annotated[
        float,
        typer.Option(help="Engine start-up after loading (CUDA graphs, compile), s"),
    ] = DEFAULT_ENGINE_INIT_S,
    cpu_offload_gb: Annotated[
        float, typer.Option(help="Weights per GPU kept in host memory, GB (vLLM --cpu-offload-gb)")
    ] = 0.0,
    profile: Annotated[
        str | None,
        typer.Option(help=PROFILE_HELP),
    ] = None,
    engine: Annotated[str | None, typer.Option(help=ENGINE_PROFILE_HELP)] = None,
    efficiency: Annotated[
        list[str] | None,
        typer.Option(help="Override an efficiency parameter, e.g. --efficiency memory=0.85"),
    ] = None,
    ops: Annotated[bool, typer.Option(help="Also print every operator")] = False,
    json_out: JsonOption = False,
) -> None:
    """Estimate TTFT, TPOT, throughput, memory and energy of one request shape."""

    def run() -> Estimate:
        overrides = parse_overrides(efficiency or [], "efficiency")
        eff: dict[str, float] | Efficiency = overrides
        power = None
        p = engine_profile(engine, profile, gpu)
        if p is not None:
            eff, power = p.efficiency.with_overrides(overrides), p.power
        return estimate(
            model,
            gpu,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            batch=batch,
            tp=tp,
            pp=pp,
            num_gpus=num_gpus,
            expert_parallel=expert_parallel,
            attention_dp=attention_dp,
            ep_comm=ep_comm_option(
                moe_a2a_backend,
                deepep_mode,
                two_batch_overlap,
                ep_redundant_experts,
                enable_eplb,
                # under attention DP (the only layout with an exchange), the profile's engine's
                engine_ep_comm(p.engine if p is not None and attention_dp else None),
            ),
            weight_dtype=weight_dtype,
            act_dtype=act_dtype,
            kv_dtype=kv_dtype,
            efficiency=eff,
            power=power,
            power_limit_w=power_limit_w,
            gpu_memory_utilization=gpu_memory_utilization,
            pue=pue,
            server_overhead_fraction=server_overhead,
            host_power=host_power,
            electricity_usd_per_kwh=electricity_usd_per_kwh,
            gpu_hour_usd=gpu_hour_usd,
            host=host,
            tls=tls,
            tokenizer_tokens_per_s=tokenizer_tokens_per_s,
            cpu_offload_bytes=cpu_offload_gb * GIGA,
            storage_bytes_per_s=None if storage_gb_per_s is None else storage_gb_per_s * GIGA,
            engine_init_s=engine_init_s,
            api_server_processes=api_server_processes,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            disaggregate=disaggregate,
            spec_decode=spec_of(spec_decode, spec_acceptance),
        )

    result = guarded(run)
    data = result.to_dict()
    if json_out:
        print_json(data)
        return
    render_estimate(data, show_ops=ops)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def render_estimate(d: dict[str, Any], show_ops: bool = False) -> None:
    """Human tables for an estimate's dict (the same data as --json)."""
    c = d["communication"]
    # the servers only where the replica spans more than one (one server says nothing new)
    where = (
        f"; {c['nodes']} servers x {c['gpus_per_node']} GPUs, scale-up domain "
        f"{c['scale_up_domain_gpus']}"
        if c["nodes"] > 1
        else ""
    )
    title = (
        f"{d['model']} on {d['num_gpus']}x {d['gpu']} (tp={d['tp']}, pp={d['pp']}{where}), "
        f"weights {d['weight_dtype']}, compute {d['compute_dtype']}, KV {d['kv_dtype']}; "
        f"{d['batch']} x ({d['input_tokens']} in, {d['output_tokens']} out)"
    )
    prose(Text(title, style="bold"))
    prose(
        f"params: {d['params_total'] / GIGA:.2f} B total, "
        f"{d['params_active'] / GIGA:.2f} B active per token",
        markup=False,
    )
    _summary_table(d)
    _stage_table(d)
    if "stages" in d:
        render_kv_transfer_stage(d["stages"]["kv_transfer"])
    _memory_table(d["memory"])
    _energy_table(d["energy"])
    if "host" in d:
        _outside_table(d)
    if show_ops:
        for stage in ("prefill", "decode"):
            if d[stage]:
                _ops_table(stage, d[stage]["ops"])


def _pairs(title: str, rows: list[tuple[str, str]], first: str = "metric") -> None:
    """A two-column table: a label (prose) and its value (a figure, kept whole)."""
    print_table(title, (Col(first), Col("value", kind="num", justify="right")), rows)


def _summary_table(d: dict[str, Any]) -> None:
    rows = [("TTFT", fmt_s(d["ttft_s"]))]
    rows += [(f"  {k.removesuffix('_s')}", fmt_s(v)) for k, v in d["ttft_breakdown_s"].items()]
    rows.append(("TPOT (mean over output)", fmt_s(d["tpot_s"])))
    if d.get("spec_decode"):
        sd = d["spec_decode"]
        rows.append(
            (
                f"  speculative {sd['method']}:{sd['draft_tokens']} "
                f"(acceptance {sd['acceptance']:g})",
                f"{sd['tokens_per_step']:.2f} tokens/step",
            )
        )
    if d["decode"]:
        curve = d["decode"]["tpot_s_by_context"]
        rows.append(
            (
                f"  at context {curve[0][0]} -> {curve[-1][0]}",
                f"{fmt_s(curve[0][1])} -> {fmt_s(curve[-1][1])}",
            )
        )
        cb = d["decode"]["compute_bound_batch"]
        rows.append(("decode turns compute-bound at batch", "never" if cb is None else str(cb)))
    rows.append(("E2E", fmt_s(d["e2e_s"])))
    rows.append(("output tokens/s (batch, end to end)", f"{d['output_tokens_per_s']:.1f}"))
    _pairs("Latency and throughput", rows)


def _stage_table(d: dict[str, Any]) -> None:
    stages = [(n, d[n]) for n in ("prefill", "decode") if d[n]]
    rows: list[tuple[str, Any]] = [
        ("time", lambda s: fmt_s(s["time_s"])),
        ("FLOP", lambda s: fmt_si(s["flop"], "FLOP")),
        ("HBM bytes", lambda s: fmt_si(s["hbm_bytes"], "B")),
        ("FLOP per byte", lambda s: f"{s['arithmetic_intensity_flop_per_byte']:.1f}"),
        ("bound", lambda s: str(s["bound"])),
        ("  compute share", lambda s: _pct(s["shares"]["compute"])),
        ("  memory share", lambda s: _pct(s["shares"]["memory"])),
        ("  communication share", lambda s: _pct(s["shares"]["communication"])),
        ("  overhead share", lambda s: _pct(s["shares"]["overhead"])),
        ("power per GPU", lambda s: f"{s['power_w']:.0f} W"),
    ]
    # the communication of each stage (decode: the same mid-output step), by where it runs
    comm = {"prefill": d["communication"]["prefill"], "decode": d["communication"]["decode_step"]}
    links = [
        ("GPU-GPU time, scale-up link", "intra_domain_s"),
        ("GPU-GPU time, over the NICs", "inter_node_s"),
    ]
    print_side_by_side(
        "Where the time goes, per stage (per GPU; decode = one step, mid-output)",
        [name for name, _ in stages],
        [(label, [fmt(s) for _, s in stages]) for label, fmt in rows]
        + [(label, [fmt_s(comm[name][key]) for name, _ in stages]) for label, key in links],
    )


def _memory_table(m: dict[str, Any]) -> None:
    rows = memory_rows(m)
    pairs = [(label, value) for label, value in rows[:-1]]  # the verdict goes last
    pairs.append(("KV capacity", f"{m['kv_capacity_tokens']:,} tokens"))
    pairs.append(
        (
            f"max concurrent requests at {m['context_tokens']} tokens",
            f"{m['max_concurrent_requests']:,}",
        )
    )
    pairs.append((rows[-1][0], rows[-1][1]))
    _pairs("Memory per GPU" + ("" if m["fits"] else " — DOES NOT FIT"), pairs, "item")


def _energy_table(e: dict[str, Any]) -> None:
    title = f"Energy, every line on one basis: {e['energy_basis']}"
    rows = [
        ("J per input token (prefill)", f"{e['joules_per_input_token']:.4f}"),
        ("J per output token (decode)", f"{e['joules_per_output_token']:.4f}"),
        ("J per output token, prefill + decode", f"{e['joules_per_token_all_in']:.4f}"),
        ("kWh per million output tokens (decode)", f"{e['kwh_per_million_output_tokens']:.4f}"),
        ("kWh per million input tokens (prefill)", f"{e['kwh_per_million_input_tokens']:.4f}"),
        (
            "static share (GPU idle" + (" + host base)" if e["host_base_w"] else ")"),
            f"{100 * e['static_share']:.1f} %",
        ),
        (
            "  static kWh per million output tokens",
            f"{e['static_kwh_per_million_output_tokens']:.4f}",
        ),
    ]
    for key, label in (
        ("usd_electricity_per_million_output_tokens", "$ electricity / M out, prefill + decode"),
        ("usd_gpu_time_per_million_output_tokens", "$ GPU time / M out"),
    ):
        if e[key] is not None:
            rows.append((label, f"{e[key]:.4f}"))
    _pairs(title, rows)


def _outside_table(d: dict[str, Any]) -> None:
    h, n, ld, kv = d["host"], d["network"], d["loading"], d["kv_swap"]
    rows = [
        ("CPU per request (HTTP, JSON, template, tokenize, stream)", fmt_s(h["cpu_s_per_request"])),
        (
            f"host saturates at ({h['api_server_processes_on_own_cores']} API-server process(es))",
            f"{h['max_requests_per_s']:,.0f} requests/s",
        ),
        ("GPUs complete", f"{h['gpu_requests_per_s']:,.3g} requests/s"),
        ("  so the bound is", str(h["bound"])),
        ("network per streamed token", fmt_si(n["wire_bytes_per_output_token"], "B")),
        (
            "request / response",
            f"{fmt_si(n['request_bytes'], 'B')} / {fmt_si(n['response_bytes'], 'B')}",
        ),
        (
            "cold start (read + copy to GPU + init)",
            f"{ld['cold_start_s']:.1f} s "
            f"({ld['storage_read_s']:.1f} + {ld['host_to_gpu_s']:.1f} + "
            f"{ld['engine_init_s']:.0f})",
        ),
        (
            "KV of one request: swap in vs recompute",
            f"{fmt_s(kv['swap_in_s'])} vs {fmt_s(kv['recompute_s'])}",
        ),
        ("  cheaper", str(kv["cheaper"])),
    ]
    _pairs(f"Outside the GPU (host {h['host']}, {h['cpu_cores']:.0f} cores)", rows, "item")


OPS_COLUMNS = (
    Col("op", kind="name"),
    Col("time", kind="num", justify="right"),
    Col("FLOP", kind="num", justify="right"),
    Col("bytes", kind="num", justify="right"),
    Col("FLOP/B", kind="num", justify="right", drop=1),
    Col("bound", kind="name"),
)


def _ops_table(stage: str, ops: list[dict[str, Any]]) -> None:
    rows = [
        [
            o["name"],
            fmt_s(o["time_s"]),
            fmt_si(o["flop"], "FLOP"),
            fmt_si(o["hbm_bytes"], "B"),
            f"{o['arithmetic_intensity_flop_per_byte']:.1f}",
            o["bound"],
        ]
        for o in sorted(ops, key=lambda o: -float(o["time_s"]))
    ]
    print_table(f"Operators, {stage} (per GPU, all layers)", OPS_COLUMNS, rows)
