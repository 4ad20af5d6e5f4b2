"""The fleet flags of `simulate` and `estimate` beyond replicas: data-parallel attention ranks
with expert parallelism (`--dp N --enable-expert-parallel`, vLLM's and SGLang's names kept as
aliases; with `--replicas`, a fleet of such groups), each disaggregated side's tensor
parallelism (`--prefill-tp`, `--decode-tp`), and the tables that show them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tokenprobe.cli.frontend_tables import ms as _ms
from tokenprobe.cli.frontend_tables import num as _num
from tokenprobe.cli.render import Col, print_table, prose
from tokenprobe.units import GIGA, fmt_s, fmt_si

DpOption = Annotated[
    int,
    typer.Option(
        "--dp",
        "--data-parallel-size",
        "--dp-size",
        help="Data-parallel attention ranks of a MoE model, --tp GPUs each, sharing its experts "
        "over all dp x tp GPUs (with --enable-expert-parallel: vLLM --data-parallel-size, "
        "SGLang --dp-size with --enable-dp-attention); every step waits for the slowest rank",
    ),
]
EnableEpOption = Annotated[
    bool,
    typer.Option(
        "--enable-expert-parallel",
        "--expert-parallel",
        help="The routed experts spread whole over the GPUs (vLLM's flag): with --dp over all "
        "the ranks' GPUs, else over the --tp GPUs",
    ),
]
PrefillTpOption = Annotated[
    int | None,
    typer.Option(help="With --disaggregate: the prefill workers' tensor parallelism (--tp)"),
]
DecodeTpOption = Annotated[
    int | None,
    typer.Option(help="With --disaggregate: the decode workers' tensor parallelism (--tp)"),
]


RANK_COLUMNS = tuple(
    Col(h, justify="right")
    for h in (
        "rank",
        "completed",
        "TTFT p50 ms",
        "TPOT p50 ms",
        "own work s",
        "waiting s",
        "waiting %",
        "dummy steps",
    )
)


def render_data_parallel(d: dict[str, Any]) -> None:
    """The ranks of `simulate --dp`: each one's requests, its own work, its waiting for the
    slowest rank and its dummy steps; the gang's steps and the shared MoE time."""
    dp = d["data_parallel"]
    rows = [
        [
            str(r["rank"]),
            str(rep["completed"]),
            _ms(rep["ttft_p50_s"], 1),
            _ms(rep["tpot_p50_s"], 2),
            _num(r["work_s"], 3),
            _num(r["wait_s"], 3),
            _num(100 * (r["wait_fraction"] or 0.0), 1),
            str(r["dummy_steps"]),
        ]
        for r, rep in zip(dp["per_rank"], d["per_replica"], strict=True)
    ]
    title = f"{dp['ranks']} attention ranks (expert parallel over {dp['expert_parallel_gpus']} "
    print_table(title + f"GPUs) behind the {d['router']} router", RANK_COLUMNS, rows)
    prose(
        f"{dp['gang_steps']:,} steps together over {fmt_s(dp['gang_busy_s'])}, of which "
        f"{fmt_s(dp['shared_moe_s'])} in the shared MoE layers ({dp.get('ep_backend')} "
        "exchange); the ranks waited for the slowest "
        f"{_num(100 * (dp['wait_fraction'] or 0.0), 1)} % of it; imbalance (max / mean): "
        f"requests {_num(d['imbalance']['requests_max_over_mean'], 3)}",
        markup=False,
    )


GROUP_COLUMNS = tuple(
    Col(h, justify="right")
    for h in (
        "group",
        "completed",
        "TTFT p50 ms",
        "TTFT p90 ms",
        "TPOT p50 ms",
        "ITL p90 ms",
        "output tok/s",
        "steps",
        "waiting %",
    )
)


def render_dp_groups(d: dict[str, Any]) -> None:
    """The groups of `simulate --replicas N --dp M`: each group's requests, latency
    percentiles, throughput and its ranks' waiting for the slowest; the routers and the fleet
    router's imbalance over the groups."""
    groups = d["dp_groups"]
    rows = [
        [
            str(g["group"]),
            str(g["completed"]),
            _ms(g["ttft_s"]["p50"], 1),
            _ms(g["ttft_s"]["p90"], 1),
            _ms(g["tpot_s"]["p50"], 2),
            _ms(g["itl_s"]["p90"], 2),
            _num(g["output_tokens_per_s"], 1),
            f"{g['data_parallel']['gang_steps']:,}",
            _num(100 * (g["data_parallel"]["wait_fraction"] or 0.0), 1),
        ]
        for g in groups["per_group"]
    ]
    title = f"{groups['groups']} DP groups of {groups['ranks_per_group']} attention ranks"
    print_table(title + f" behind the {d['router']} router", GROUP_COLUMNS, rows)
    prose(
        f"ranks within a group: {groups['rank_router']} dispatch; output tok/s over the "
        f"fleet's span (the groups add up to the fleet); imbalance over the groups "
        f"(max / mean requests): {_num(groups['requests_max_over_mean'], 3)}",
        markup=False,
    )


def render_kv_transfer_stage(stage: dict[str, Any]) -> None:
    """`estimate --disaggregate`: the KV transfer between the workers, a stage of its own."""
    rows = [
        ("workers", f"{stage['disaggregate']} (prefill tp {stage['prefill_tp']}, decode tp "
                    f"{stage['decode_tp']})"),
        ("link", f"{stage['link']} x {stage['links']}, "
                 f"{stage['bytes_per_s'] / GIGA:,.0f} GB/s, latency {fmt_s(stage['latency_s'])}"),
        ("KV bytes per request", fmt_si(stage["bytes_per_request"], "B")),
        ("time per request", fmt_s(stage["time_per_request_s"])),
        ("time for the batch (added to TTFT)", fmt_s(stage["time_s"])),
    ]  # fmt: skip
    print_table(
        "KV transfer, prefill -> decode worker",
        (Col("item"), Col("value", kind="num", justify="right")),
        rows,
    )
