"""`tokenprobe whatif`: which upgrade helps this workload most, and the power-cap curve."""

from __future__ import annotations

from typing import Annotated, Any

import typer

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
from tokenprobe.cli.render import Col, print_table, prose
from tokenprobe.cost import Workload, make_deployment, resolve_parallelism
from tokenprobe.hardware import get_host
from tokenprobe.plan import METRICS, WhatIf, whatif
from tokenprobe.units import fmt_s


@app.command("whatif")
def whatif_cmd(
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
    weight_dtype: WeightDtypeOption = "bf16",
    kv_dtype: KvDtypeOption = None,
    host: Annotated[str, typer.Option(help="Host: catalog name or TOML file")] = "default",
    api_server_processes: Annotated[
        int, typer.Option(help="API-server processes today (vLLM --api-server-count)")
    ] = 1,
    uplift: Annotated[float, typer.Option(help="Upgrade size, 0.5 = +50 %")] = 0.5,
    target: Annotated[str, typer.Option(help=f"Metric to rank by: {', '.join(METRICS)}")] = (
        "capacity_output_tokens_per_s"
    ),
    json_out: JsonOption = False,
) -> None:
    """Upgrade each resource by --uplift, one at a time, and rank the upgrades."""

    def run() -> WhatIf:
        dep = make_deployment(
            model, gpu, tp=resolve_parallelism(num_gpus, tp, pp), pp=pp,
            weight_dtype=weight_dtype, kv_dtype=kv_dtype, nodes=nodes, gpus_per_node=gpus_per_node,
        )  # fmt: skip
        work = Workload(input_tokens, output_tokens, batch)
        return whatif(
            dep, work, uplift=uplift, target=target, host=get_host(host),
            api_server_processes=api_server_processes,
        )  # fmt: skip

    result = guarded(run).to_dict()
    if json_out:
        print_json(result)
        return
    _render(result)


# headers (full, short for a narrow terminal); --target takes the metric names themselves
HEADERS = {
    "ttft_s": ("TTFT", ""),
    "tpot_s": ("TPOT", ""),
    "capacity_output_tokens_per_s": ("capacity output tokens/s", "cap. tok/s"),
    "served_requests_per_s": ("served requests/s", "req/s"),
    "max_concurrent_requests": ("max concurrent requests", "max reqs"),
    "joules_per_output_token": ("J per output token", "J/tok"),
}
POWER_COLUMNS = (
    Col("cap", kind="num", justify="right"),
    Col("W", kind="num", justify="right"),
    Col("TTFT", kind="num", justify="right"),
    Col("TPOT", kind="num", justify="right"),
    Col("tokens/s", "tok/s", kind="num", justify="right"),
    Col("J/token", kind="num", justify="right"),
)


def _render(d: dict[str, Any]) -> None:
    cols = [Col("upgrade", kind="name")] + [
        Col(*HEADERS.get(m, (m, "")), kind="num", justify="right") for m in METRICS
    ]
    rows = [
        [
            row["resource"],
            *(f"{100 * d['upgrades'][row['resource']]['gain'][m]:+.1f}%" for m in METRICS),
        ]
        for row in d["ranking"]
    ]
    print_table(f"What +{100 * d['uplift']:.0f} % of each resource changes", cols, rows)
    best = d["ranking"][0]
    if best["gain"] > 0:
        prose(
            f"The upgrade that helps this workload most ({d['target']}) is "
            f"[bold]{best['resource']}[/] ({100 * best['gain']:+.1f} %)."
        )
    else:
        prose(f"No single +{100 * d['uplift']:.0f} % upgrade improves {d['target']}.", markup=False)
    print_table(
        "Power cap (fraction of TDP)",
        POWER_COLUMNS,
        [
            [
                f"{100 * r['cap_fraction_of_tdp']:.0f}%",
                f"{r['cap_w']:.0f}",
                fmt_s(r["ttft_s"]),
                fmt_s(r["tpot_s"]),
                f"{r['output_tokens_per_s']:.0f}",
                f"{r['joules_per_output_token']:.3f}",
            ]
            for r in d["power_cap"]
        ],
    )
