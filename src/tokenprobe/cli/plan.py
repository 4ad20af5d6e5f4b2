"""`tokenprobe plan`: the cheapest deployments that meet latency SLOs for a request rate (P1)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.text import Text

from tokenprobe.calibrate import load_profile
from tokenprobe.cli.app import app, guarded, print_json
from tokenprobe.cli.deployment_options import (
    InputTokensOption,
    JsonOption,
    ModelOption,
    OutputTokensOption,
)
from tokenprobe.cli.estimate import PROFILE_HELP, parse_overrides
from tokenprobe.cli.render import Col, print_names, print_table, progress, prose
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.plan import (
    Plan,
    PlanRequest,
    candidates,
    deployment_groups,
    ep_layouts,
    fixed_lengths,
    plan,
    spec_modes,
)
from tokenprobe.sim import DEFAULT_ENGINE, engine_ep_comm, is_engine
from tokenprobe.units import fmt_s
from tokenprobe.workload import load_workload

DEFAULT_GPUS = "h100-sxm,h200,a100-sxm-80gb,l40s,b200"


def _split(text: str, field: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ConfigError(field, text, "a comma-separated list")
    return items


def _ints(text: str, field: str) -> list[int]:
    try:
        return [int(t) for t in _split(text, field)]
    except ValueError:
        raise ConfigError(field, text, "comma-separated integers, e.g. 1,2,4") from None


def _fractions(text: str, field: str) -> list[float]:
    return [finite(field, x, lo=0.1, hi=1.0) for x in _split(text, field)]


def _switches(text: str, field: str) -> list[bool]:
    """`off,on` -> [False, True]."""
    values = {"off": False, "on": True, "false": False, "true": True}
    out = []
    for t in _split(text, field):
        if t.lower() not in values:
            raise ConfigError(field, t, "off and/or on, comma-separated")
        out.append(values[t.lower()])
    return out


def parse_prices(text: str | None) -> dict[str, float]:
    """`h100-sxm=2.5,a100-sxm-80gb=1.6` -> {gpu: USD per GPU-hour}."""
    if not text:
        return {}
    items = _split(text, "gpu_hour_usd")
    return parse_overrides(items, "gpu_hour_usd", example="h100-sxm=2.5")


@app.command("plan")
def plan_cmd(
    model: ModelOption,
    rate: Annotated[float, typer.Option(help="Requests per second to serve (Poisson)")],
    slo_ttft_p90: Annotated[
        float | None,
        typer.Option("--slo-ttft-s", help="TTFT bound in s, met by the p90 of simulated requests"),
    ] = None,
    slo_tpot_p90: Annotated[
        float | None,
        typer.Option("--slo-tpot-s", help="TPOT bound in s, met by the p90 of simulated requests"),
    ] = None,
    input_tokens: InputTokensOption = 1024,
    output_tokens: OutputTokensOption = 256,
    workload: Annotated[
        str | None, typer.Option(help="Workload TOML/JSON: its length distributions are used")
    ] = None,
    gpus: Annotated[str, typer.Option("--gpu", help="GPU name(s), comma-separated")] = DEFAULT_GPUS,
    dtypes: Annotated[
        str, typer.Option("--weight-dtype", help="Weight dtype(s), comma-separated")
    ] = "bf16,fp8",
    tp: Annotated[str, typer.Option(help="Comma-separated TP degrees")] = "1,2,4,8",
    gpus_per_node: Annotated[
        str | None,
        typer.Option(help="GPUs per server to search, e.g. 4,8 (default: each GPU's catalog's)"),
    ] = None,
    router: Annotated[
        str,
        typer.Option(help="Routers of a fleet of replicas: round-robin,least-loaded,prefix-aware"),
    ] = "round-robin",
    disaggregate: Annotated[
        str,
        typer.Option(help="agg (replicas), PpDd prefill/decode splits, all (every split)"),
    ] = "agg",
    spec_decode: Annotated[
        str,
        typer.Option(help="Speculative decoding to search: none, mtp:K, eagle:K, ngram:K"),
    ] = "none",
    spec_acceptance: Annotated[
        float | None,
        typer.Option(help="Per-token draft acceptance (default: mtp 0.85; eagle/ngram need it)"),
    ] = None,
    dp: Annotated[
        str,
        typer.Option(
            "--dp",
            help="Attention-DP ranks of --tp GPUs each to search, experts over all dp x tp GPUs "
            "(MoE models; vLLM --data-parallel-size with --enable-expert-parallel), e.g. 1,8",
        ),
    ] = "1",
    moe_a2a_backend: Annotated[
        str,
        typer.Option(
            "--moe-a2a-backend",
            help="With --dp > 1: EP exchanges to search, all-to-all (NCCL), allgather and/or "
            "deepep (default: the engine's, vLLM's allgather or --profile's engine's)",
        ),
    ] = "",
    two_batch_overlap: Annotated[
        str,
        typer.Option(
            "--two-batch-overlap",
            help="With --dp > 1: off and/or on (SGLang two-batch overlap, vLLM --enable-dbo)",
        ),
    ] = "off",
    max_gpus: Annotated[
        int | None,
        typer.Option(help="Most GPUs a deployment may use (--disaggregate all: default 8)"),
    ] = None,
    max_num_seqs: Annotated[
        str,
        typer.Option(help="Engine batch caps to search, comma-separated (vLLM's on a <70 GiB GPU)"),
    ] = "256",
    power_limit_fractions: Annotated[
        str,
        typer.Option(help="GPU power caps to search, fractions of TDP, e.g. 0.7,0.85,1"),
    ] = "1",
    price_per_gpu_hour: Annotated[
        str | None,
        typer.Option("--gpu-hour-usd", help="USD per GPU-hour by GPU, e.g. h100-sxm=2.5,h200=3.5"),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Processes (default: one per core)")] = None,
    ray: Annotated[
        str | None,
        typer.Option(help="Run candidates on a Ray cluster at ADDRESS ('local' starts one)"),
    ] = None,
    num_requests: Annotated[
        int,
        typer.Option(help="Requests per simulated candidate (300: p90s decide feasibility)"),
    ] = 300,
    profile: Annotated[
        str | None,
        typer.Option(help=PROFILE_HELP),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Search GPU x dtype x TP x topology x spec decode x attention DP with its EP back end x
    serving mode (replicas behind a router, or P:D disaggregated), judge each fleet with the
    simulator, print the cheapest that meet the SLOs (or the nearest miss)."""

    def build() -> PlanRequest:
        p = load_profile(profile) if profile is not None else None
        # the engine whose DP ranks are simulated (their padding, dispatch, default exchange)
        engine = p.engine if p is not None and is_engine(p.engine) else DEFAULT_ENGINE
        backends = _split(moe_a2a_backend, "moe_a2a_backend") if moe_a2a_backend else [
            engine_ep_comm(engine).backend
        ]  # fmt: skip
        prefix = (0, 1)
        if workload is not None:
            wl = load_workload(workload)
            in_len, out_len = wl.input_len, wl.output_len
            prefix = (wl.shared_prefix_tokens, wl.prefix_groups)
        else:
            in_len, out_len = fixed_lengths(input_tokens, output_tokens)
        per_node: list[int | None] = [None]
        if gpus_per_node is not None:
            per_node = list(_ints(gpus_per_node, "gpus_per_node"))
        if spec_acceptance is not None:
            finite("spec_acceptance", spec_acceptance, lo=0.0, hi=1.0)
        cands = candidates(
            _split(gpus, "gpu"), _split(dtypes, "weight_dtype"), _ints(tp, "tp"),
            _ints(max_num_seqs, "max_num_seqs"),
            _fractions(power_limit_fractions, "power_limit_fractions"),
            modes=_split(disaggregate, "disaggregate"), router_list=_split(router, "router"),
            specs=spec_modes(_split(spec_decode, "spec_decode"), spec_acceptance),
            gpus_per_node=per_node,
            layouts=ep_layouts(
                _ints(dp, "dp"), backends,
                _switches(two_batch_overlap, "two_batch_overlap"),
            ),
        )  # fmt: skip
        req = PlanRequest(
            model, rate, in_len, out_len, slo_ttft_p90, slo_tpot_p90, cands,
            prices_per_gpu_hour=parse_prices(price_per_gpu_hour), num_requests=num_requests,
            shared_prefix_tokens=prefix[0], prefix_groups=prefix[1], max_gpus=max_gpus,
            spec_acceptance=spec_acceptance,
        )  # fmt: skip
        if p is None:
            return req
        return replace(req, efficiency=p.efficiency, power=p.power, engine=engine)

    req = guarded(build)
    total = len(deployment_groups(req.candidates))
    with progress("simulating deployments", total=total, enabled=not json_out) as report:
        result = guarded(lambda: plan(req, workers=workers, ray_address=ray, progress=report))
    if json_out:
        print_json(result.to_dict())
        return
    render_plan(result)


PLAN_COLUMNS = (
    Col("deployment", kind="name"),
    Col("GPUs", kind="num", justify="right"),
    Col("req/s per replica", "req/s", kind="num", justify="right", drop=2),
    Col("mode", kind="name"),
    Col("fleet", kind="name"),
    Col("router", kind="name", drop=4),
    Col("spec", kind="name", drop=4),
    Col("nodes", kind="num", justify="right", drop=5),
    Col("NIC %", kind="num", justify="right", drop=5),
    Col("p90 TTFT", kind="num", justify="right"),
    Col("p90 TPOT", kind="num", justify="right"),
    Col("tok/s/GPU", "tok/s GPU", kind="num", justify="right"),
    Col("kWh/M out", kind="num", justify="right", drop=1),
)
PRICE_COLUMNS = (
    Col("$/h", kind="num", justify="right"),
    Col("$/M in", kind="num", justify="right", drop=3),
    Col("$/M out", kind="num", justify="right"),
)
PLAN_ROWS_SHOWN = 15


def _plan_row(o: dict[str, Any], priced: bool) -> list[str]:
    rate = f"{o['rate_per_replica']:.2f}" if o["rate_per_replica"] else "-"
    nic = "-" if o["nic_share"] is None else f"{100 * o['nic_share']:.0f}"
    row = [o["deployment"], str(o["gpus"]), rate, o["mode"], o["fleet"], o["router"] or "-",
           o["spec_decode"] or "-", str(o["nodes"]), nic,
           fmt_s(o["ttft_p90_s"]), fmt_s(o["tpot_p90_s"]),
           f"{o['output_tokens_per_s_per_gpu']:.0f}",
           f"{o['kwh_per_million_output_tokens']:.3f}"]  # fmt: skip
    if priced:
        row += [f"{o['cost_per_hour']:.2f}", f"{o['usd_per_million_input_tokens']:.3f}",
                f"{o['usd_per_million_output_tokens']:.3f}"]  # fmt: skip
    return row


def render_plan(p: Plan) -> None:
    d: dict[str, Any] = p.to_dict()
    if not d["feasible"]:
        prose(Text(d["message"], style="bold red"))
        miss = d["nearest_miss"]
        if miss:
            print_names("nearest miss:", [miss["candidate"]])
            prose(f"  {miss['reason']} (x{miss['miss']:.2f} of the SLO)", markup=False)
        return
    priced = d["feasible"][0]["cost_per_hour"] is not None
    print_table(
        f"Deployments for {d['rate_per_s']} requests/s of {d['model']}, cheapest first",
        PLAN_COLUMNS + (PRICE_COLUMNS if priced else ()),
        [_plan_row(o, priced) for o in d["feasible"][:PLAN_ROWS_SHOWN]],
    )
    print_names("Pareto front (tokens/s per GPU vs interactivity):", d["pareto"])
    prose(
        f"{d['candidates']} candidates, {d['simulated_candidates']} judged by simulation "
        f"({d['simulations']} runs), {len(d['rejected'])} ruled out (see --json for why).",
        markup=False,
    )
