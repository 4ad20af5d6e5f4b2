"""How `simulate` prints a run: the summary tables of one replica, a fleet, disaggregated
workers and data-parallel ranks, and a scenario's table (cli/simulate.py runs them)."""

from __future__ import annotations

from typing import Any

from tokenprobe.cli.energy_rows import basis_rows
from tokenprobe.cli.fleet_options import render_data_parallel, render_dp_groups
from tokenprobe.cli.frontend_tables import (
    PAIR_COLUMNS,
    frontend_table,
    window_table,
)
from tokenprobe.cli.frontend_tables import ms as _ms
from tokenprobe.cli.frontend_tables import num as _num
from tokenprobe.cli.render import Col, print_table, prose
from tokenprobe.cli.spec_options import spec_summary_line
from tokenprobe.units import GIGA, fmt_s

SCENARIO_COLUMNS = (
    Col("part"),
    *(
        Col(h, kind="num", justify="right")
        for h in ("tokens/s", "seed tokens/s", "avg W", "seed W", "kWh/M", "seed kWh/M")
    ),
)


def scenario_table(parts: list[dict[str, Any]]) -> None:
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


def _lat(stats: dict[str, float | None]) -> list[str]:
    return [
        "-" if stats[k] is None else fmt_s(stats[k] or 0.0) for k in ("mean", "p50", "p90", "p99")
    ]


LATENCY_COLUMNS = (
    Col("metric", kind="name"),
    *(Col(h, kind="num", justify="right") for h in ("mean", "p50", "p90", "p99")),
)


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
        (
            "KV blocks peak / capacity" + (f" (per {kv['per']})" if kv.get("per") else ""),
            f"{kv['peak_blocks_used']:,} / {kv['capacity_blocks']:,}",
        ),
        ("preemptions / rejected", f"{d['preemptions']} / {d['rejected']}"),
        ("GPU busy", _num(100 * (d["busy_fraction"] or 0.0), 1) + " %"),
        ("GPU energy total (idle)", f"{e['total_j']:,.0f} J ({e['idle_j']:,.0f} J)"),
        ("GPU average power (all GPUs)", _num(e["average_power_w"], 0) + " W"),
        (
            "GPU J per input / output token",
            f"{_num(e['joules_per_input_token'], 4)} / {_num(e['joules_per_output_token'], 4)}",
        ),
        ("GPU kWh per million output tokens (all-in)", _num(e["kwh_per_million_tokens_all_in"], 3)),
        *basis_rows(e),
    ]
    print_table("Throughput, KV cache and energy", PAIR_COLUMNS, rows)
    if "spec_decode" in d:
        prose(spec_summary_line(d["spec_decode"]), markup=False)
    if "frontend" in d:
        frontend_table(d["frontend"])
    if "batch_window" in d:
        window_table(d["batch_window"])
    if d.get("data_parallel"):
        render_data_parallel(d)
    elif d.get("dp_groups"):
        render_dp_groups(d)
    elif d.get("per_replica"):
        _render_workers(
            d["per_replica"], f"{d['replicas']} replicas behind the {d['router']} router"
        )
        _render_imbalance("across replicas", d["imbalance"])
    if d.get("disaggregate"):
        _render_disaggregated(d)


REPLICA_COLUMNS = (
    Col("#", justify="right"),
    Col("completed", justify="right"),
    Col("req/s", justify="right"),
    Col("TTFT p50 ms", justify="right"),
    Col("TTFT p99 ms", justify="right"),
    Col("TPOT p50 ms", justify="right"),
    Col("GPU busy %", justify="right"),
)


def _render_workers(workers: list[dict[str, Any]], title: str) -> None:
    """One row per replica or worker."""
    rows = [
        [
            str(r["replica"]),
            str(r["completed"]),
            _num(r["requests_per_s"], 2),
            _ms(r["ttft_p50_s"], 1),
            _ms(r["ttft_p99_s"], 1),
            _ms(r["tpot_p50_s"], 2),
            _num(100 * (r["busy_fraction"] or 0.0), 1),
        ]
        for r in workers
    ]
    print_table(title, REPLICA_COLUMNS, rows)


def _render_imbalance(where: str, imb: dict[str, float | None]) -> None:
    prose(
        f"imbalance (max / mean {where}): requests {_num(imb['requests_max_over_mean'], 3)}, "
        f"GPU busy time {_num(imb['busy_max_over_mean'], 3)}",
        markup=False,
    )


def _render_disaggregated(d: dict[str, Any]) -> None:
    """Prefill and decode workers (a worker's TTFT is its own: the prefill's, or the decode
    worker's from the KV's arrival) and the KV transfers."""
    _render_workers(d["per_prefill_worker"], f"{d['disaggregate']}: prefill workers")
    _render_imbalance("across prefill workers", d["imbalance"]["prefill"])
    _render_workers(d["per_decode_worker"], f"{d['disaggregate']}: decode workers")
    _render_imbalance("across decode workers", d["imbalance"]["decode"])
    kv, link, blocks = (
        d["kv_transfer"],
        d["kv_transfer"]["link"],
        d["kv_capacity_blocks_per_worker"],
    )
    prose(
        f"workers: prefill tp {d['prefill_tp']} ({blocks['prefill']:,} KV blocks each), decode tp "
        f"{d['decode_tp']} ({blocks['decode']:,}); the KV moves over {link['links']} x "
        f"{link['link']}, {link['bytes_per_s'] / GIGA:,.0f} GB/s",
        markup=False,
    )
    prose(
        f"KV transfers: {kv['transfers']:,}, mean {_ms(kv['mean_s'], 2)} ms, p99 "
        f"{_ms(kv['p99_s'], 2)} ms (waiting for the link {_ms(kv['link_wait_mean_s'], 2)} ms "
        f"on average); recomputed on a decode worker: {kv['recomputed_on_decode']}",
        markup=False,
    )
