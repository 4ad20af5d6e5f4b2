"""`tokenprobe simulate`: a workload through a simulated vLLM-like server, as tables or JSON."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.text import Text

from tokenprobe.calibrate import load_profile
from tokenprobe.cli.app import app, guarded, print_json
from tokenprobe.cli.app import console as stdout_console
from tokenprobe.cli.dataset_workload import (
    DATASET_HELP,
    MAX_INPUT_HELP,
    MAX_OUTPUT_HELP,
    TOKENIZER_URL_HELP,
    dataset_workload,
)
from tokenprobe.cli.estimate import KV_DTYPE_HELP, PROFILE_HELP
from tokenprobe.cli.render import Col, print_table, progress, prose
from tokenprobe.cost import make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import get_gpu
from tokenprobe.records import prepare_run_folder
from tokenprobe.sim import (
    ENGINES,
    SCENARIOS,
    ProgressFn,
    Scenario,
    ScenarioPart,
    SchedulerConfig,
    SimResult,
    engine_defaults,
    get_scenario,
    simulate,
)
from tokenprobe.units import fmt_s
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
        )


_T = TypeVar("_T")


def _given(flag: _T | None, default: _T) -> _T:
    """The flag when given (0 included, which SchedulerConfig then refuses), else the default."""
    return default if flag is None else flag


@app.command("simulate")
def simulate_cmd(
    model: Annotated[str, typer.Option(help="Catalog name, HF id or config path")] = "",
    gpu: Annotated[str, typer.Option(help="GPU name from `tokenprobe gpus`")] = "",
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree")] = 1,
    weight_dtype: Annotated[str, typer.Option(help="bf16 fp16 fp8 int8 int4 ...")] = "bf16",
    kv_dtype: Annotated[str | None, typer.Option(help=KV_DTYPE_HELP)] = None,
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
        str,
        typer.Option(
            help=f"Whose defaults the server starts from: {', '.join(ENGINES)} (batch limits, "
            "KV sizing, capacity policy; the flags below override them)"
        ),
    ] = "vllm",
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
            "free after the engine loads)"
        ),
    ] = None,
    slo_ttft_s: Annotated[float | None, typer.Option(help="TTFT SLO for goodput (s)")] = None,
    slo_tpot_s: Annotated[float | None, typer.Option(help="TPOT SLO for goodput (s)")] = None,
    profile: Annotated[str | None, typer.Option(help=PROFILE_HELP)] = None,
    out: Annotated[Path | None, typer.Option(help="Write the run folder here")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON only")] = False,
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
    )
    if scenario is not None:
        sc = guarded(lambda: get_scenario(scenario))
        results = guarded(lambda: _run_scenario(sc, seed, flags, scheduler))
        _emit_scenario(sc, results, json_out, out)
        return

    def run(progress: ProgressFn | None) -> SimResult:
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
        dep = None
        if profile is not None:
            p = load_profile(profile)
            dep = make_deployment(
                model, gpu, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                efficiency=p.efficiency, power=p.power,
            )  # fmt: skip
        return simulate(
            model,
            gpu,
            tp=tp,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            deployment=dep,
            workload=wl,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            rate_per_s=rate,
            burstiness=burstiness,
            concurrency=concurrency,
            offline=offline,
            num_requests=num_requests,
            seed=seed,
            scheduler=scheduler,
            config=flags.config(engine_defaults(engine, get_gpu(gpu), tp)),
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            progress=progress,
            profile=profile,
            engine=engine,
        )

    show_bar = not json_out and num_requests >= PROGRESS_MIN_REQUESTS
    result = guarded(lambda: _with_progress(run, show_bar))
    data = result.to_dict()
    if out is not None:
        result.write(out)
    if json_out:
        print_json(data)
        return
    render_simulation(data)
    if out is not None:
        prose(f"run folder written to {out}", markup=False)


def _with_progress(run: Any, show: bool) -> SimResult:
    with progress("simulating", enabled=show) as report:
        result: SimResult = run(report)
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
    _scenario_table(parts)
    for p in parts:
        stdout_console.print()
        prose(Text(p["label"], style="bold"))
        render_simulation(p["result"])


SCENARIO_COLUMNS = (
    Col("part"),
    *(
        Col(h, kind="num", justify="right")
        for h in ("tokens/s", "seed tokens/s", "avg W", "seed W", "kWh/M", "seed kWh/M")
    ),
)


def _scenario_table(parts: list[dict[str, Any]]) -> None:
    rows = []
    for p in parts:
        r, s, e = p["result"], p["seed_reference"] or {}, p["result"]["energy"]
        rows.append(
            [
                p["label"],
                _num(r["output_tokens_per_s"], 0),
                _num(s.get("output_tokens_per_s"), 0),
                _num(e["average_power_w"], 0),
                _num(s.get("average_power_w"), 0),
                _num(e["kwh_per_million_tokens_all_in"], 3),
                _num(s.get("kwh_per_million_tokens"), 2),
            ]
        )
    print_table(
        "Simulated vs seed (GPU power only; kWh per million output tokens, all-in)",
        SCENARIO_COLUMNS,
        rows,
    )


def _num(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _lat(stats: dict[str, float | None]) -> list[str]:
    return [
        "-" if stats[k] is None else fmt_s(stats[k] or 0.0) for k in ("mean", "p50", "p90", "p99")
    ]


LATENCY_COLUMNS = (
    Col("metric", kind="name"),
    *(Col(h, kind="num", justify="right") for h in ("mean", "p50", "p90", "p99")),
)
PAIR_COLUMNS = (Col("metric"), Col("value", kind="num", justify="right"))


def render_simulation(d: dict[str, Any]) -> None:
    """Human tables for a simulation's dict (the same data as --json)."""
    c = d["config"]
    prose(
        f"{c.get('model', '?')} on {c.get('num_gpus', '?')}x {c.get('gpu', '?')}, "
        f"scheduler {c['scheduler']['name']}, workload {c['workload']['name']} "
        f"({c['workload']['num_requests']} requests, {c['workload']['arrival']['kind']})",
        markup=False,
    )
    print_table(
        "Latency",
        LATENCY_COLUMNS,
        [
            [key.removesuffix("_s").upper(), *_lat(d[key])]
            for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_s")
        ],
    )
    e, kv = d["energy"], d["kv"]
    rows = [
        ("completed / failed", f"{d['completed']} / {d['failed']}"),
        *([("  errors", str(d["errors"]))] if d["errors"] else []),
        ("duration", fmt_s(d["duration_s"])),
        ("requests/s", _num(d["requests_per_s"], 2)),
        ("output tokens/s", _num(d["output_tokens_per_s"], 1)),
        ("total tokens/s", _num(d["total_tokens_per_s"], 1)),
        ("goodput requests/s", _num(d["goodput_requests_per_s"], 2)),
        ("KV blocks peak / capacity", f"{kv['peak_blocks_used']:,} / {kv['capacity_blocks']:,}"),
        ("preemptions / rejected", f"{d['preemptions']} / {d['rejected']}"),
        ("GPU busy", _num(100 * (d["busy_fraction"] or 0.0), 1) + " %"),
        ("energy total (idle)", f"{e['total_j']:,.0f} J ({e['idle_j']:,.0f} J)"),
        ("average power (all GPUs)", _num(e["average_power_w"], 0) + " W"),
        (
            "J per input / output token",
            f"{_num(e['joules_per_input_token'], 4)} / {_num(e['joules_per_output_token'], 4)}",
        ),
        ("kWh per million output tokens (all-in)", _num(e["kwh_per_million_tokens_all_in"], 3)),
    ]
    print_table("Throughput, KV cache and energy", PAIR_COLUMNS, rows)
