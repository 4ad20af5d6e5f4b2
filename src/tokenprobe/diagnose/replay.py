"""The run replayed through the simulator (`diagnose RUN --predict`; issue 16 item 3): the same
arrivals and lengths on the deployment, profile and engine preset the run config names, and the
measured figures beside the simulated ones.

The load: every successful request of the run (a failed one was not served, so it is left out,
with a note) becomes one request of a trace workload (`workload.Arrival("trace")`, the
simulator's own trace replay): arriving at its `scheduled_s` with its `input_tokens` and
`output_tokens` (and the shared prompt prefix the recorded workload names). A closed-loop run
is replayed open at the times its requests were really scheduled, which is the load the server
saw. The server: the run config's deployment
(`RunConfig.deployment`, priced by `sim.price_deployment`: profile values and power limit
included), the engine preset `engine` (default: the config's engine, else the one the
server says it is, else vLLM) with the recorded scheduler settings on top, and the run's
seed, and the serving front end the run recorded (`config["frontend"]`: API-server processes,
core speed, engine in the API server; sim/frontend.py). A simulated run replayed this way
reproduces itself: that is what the replay is checked by.

Rows: TTFT, TPOT and ITL at p50/p90/p99, requests/s and output tokens/s, queueing (the
records' queue_s; the mean of requests waiting, from the server's /metrics or the simulator's
timeline, time-weighted), mean KV-cache use (the server's /metrics; the simulator's blocks in
use over capacity) and energy per output token (the energy join of the measurement, the
simulator's accounting; all energy / output tokens). A figure the run does not have is None.

Per request (`per_request`): the measured and the simulated TTFT and end-to-end time of the same
request (matched by request id), for the report's scatter: points off the diagonal show which
requests the model misses (the first ones of a burst, the long prompts, ...), which the
percentiles alone hide.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tokenprobe.diagnose.costview import deployment_of
from tokenprobe.diagnose.findings import Finding
from tokenprobe.energy_join import EnergyReport
from tokenprobe.errors import TokenprobeError
from tokenprobe.hardware import get_host
from tokenprobe.metrics import summarize
from tokenprobe.records import RequestRecord, Run, RunConfig
from tokenprobe.sim import (
    DEFAULT_ENGINE,
    ENGINES,
    SimResult,
    scheduler_name,
    scheduler_of,
    simulate,
    spec_decode_of,
)
from tokenprobe.workload import Arrival, RequestSpec, Workload

REPLAY_FACTOR = 2.0  # measured / simulated outside [1/2, 2]: a finding
MAX_TRACED = 20_000  # requests whose every token time the replay keeps (ITL)
# requests whose measured and simulated TTFT / end-to-end times the replay returns side by side
# (the report's scatter): every request up to this, evenly spaced ones beyond (a plotted
# scatter of more points tells no more and makes the report heavy)
MAX_PAIRED = 2_000
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "queue_s")
PERCENTILES = ("p50", "p90", "p99")


def replay_engine(rc: RunConfig, engine: str | None = None) -> tuple[str, str]:
    """(engine preset, where it came from): the one given, the config's, the one the server
    said it is (its model list's `owned_by`: "vllm", "sglang", "tensorrt_llm"), else vLLM's."""
    if engine is not None:
        return engine, "given"
    if rc.deployment.engine is not None:
        return rc.deployment.engine, "run config"
    said = (rc.server_engine or "").lower().replace("_", "-")
    named = next((e for e in ENGINES if said.startswith(e)), None)
    if named is not None:
        return named, "server"
    return DEFAULT_ENGINE, "default"


def _shared_prefix_tokens(rc: RunConfig) -> int:
    """The prompt prefix every request shares, as the recorded workload says (simulate's
    `shared_prefix_tokens`); 0 when it does not (bench sends fresh prompts)."""
    value = (rc.workload or {}).get("shared_prefix_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def recorded_frontend(run: Run) -> dict[str, Any]:
    """simulate()'s front-end arguments as the run recorded them (`config["frontend"]`), {} when
    it recorded none: the host as its core speed on the default host (a host file's name is not
    a catalog name), the process count and whether the engine ran in the API server."""
    front = run.config.get("frontend")
    if not isinstance(front, dict):
        return {}
    host = get_host("default")
    speed = front.get("cpu_core_speed")
    if isinstance(speed, int | float) and not isinstance(speed, bool) and speed > 0:
        host = dataclasses.replace(host, cpu_core_speed=float(speed))
    n = front.get("api_server_processes")
    return {
        "host": host,
        "api_server_processes": n if isinstance(n, int) and not isinstance(n, bool) else None,
        "engine_in_api_server": front.get("engine_in_api_server") is True,
    }


def _specs(records: list[RequestRecord], prefix_tokens: int = 0) -> list[RequestSpec]:
    """The successful requests as a trace, each with the shared prefix of its own group (the
    record's `prefix_group`, as bench and the simulator write it; group 0 where a record does
    not say, as every run written before groups were recorded)."""
    done = sorted(
        (r for r in records if r.ok and r.output_tokens >= 1 and r.input_tokens >= 1),
        key=lambda r: r.scheduled_s,
    )
    start = done[0].scheduled_s if done else 0.0
    return [
        RequestSpec(
            r.request_id,
            r.scheduled_s - start,
            r.input_tokens,
            r.output_tokens,
            min(prefix_tokens, r.input_tokens),
            _group(r),
        )
        for r in done
    ]


def _group(record: RequestRecord) -> int:
    value = record.extra.get("prefix_group")
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _time_mean(times: list[float], values: list[float], end_s: float) -> float | None:
    """Mean of a piecewise-constant series (value i holds from times[i] to the next)."""
    if not times:
        return None
    dt = np.diff(np.append(np.asarray(times, dtype=float), max(end_s, times[-1])))
    if dt.sum() <= 0:
        return float(np.mean(values))
    return float(np.average(values, weights=dt))


def _server_means(run: Run, end_s: float) -> tuple[float | None, float | None]:
    """Mean requests waiting and KV-cache use of the server's /metrics samples, or None."""
    out: list[float | None] = []
    for name in ("requests_waiting", "kv_cache_usage"):
        pairs = [(s.t_s, getattr(s, name)) for s in run.server if getattr(s, name) is not None]
        out.append(_time_mean([t for t, _ in pairs], [v for _, v in pairs], end_s))
    return out[0], out[1]


def _sim_means(result: SimResult) -> tuple[float | None, float | None]:
    rows = result.engine.timeline.rows
    times = [row[0] for row in rows]
    waiting = _time_mean(times, [float(row[3]) for row in rows], result.engine.end_s)
    capacity = result.pool.capacity_blocks
    used = _time_mean(times, [float(row[2]) for row in rows], result.engine.end_s)
    return waiting, (used / capacity if used is not None and capacity else None)


def _run_side(run: Run, rc: RunConfig, energy: EnergyReport | None) -> dict[str, Any]:
    """The run's own figures (module docstring), by row name."""
    summary = summarize(run)
    if run.kind == "simulated" and run.timeline:
        capacity = rc.extra.get("kv_capacity_blocks")
        end_s = summary["duration_s"] or 0.0
        times = [p.t_s for p in run.timeline]
        waiting = _time_mean(times, [float(p.queue_len) for p in run.timeline], end_s)
        used = _time_mean(times, [float(p.kv_blocks_used) for p in run.timeline], end_s)
        kv = (
            used / capacity if used is not None and isinstance(capacity, int) and capacity else None
        )
    else:
        waiting, kv = _server_means(run, summary["duration_s"] or 0.0)
    out = summary["output_tokens"]
    joules = energy.energy_j / out if energy is not None and out else None
    return _figures(summary, waiting, kv, joules)


def _figures(
    summary: dict[str, Any], waiting: float | None, kv: float | None, joules: float | None
) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    for metric in LATENCIES:
        for p in PERCENTILES:
            figures[f"{metric} {p}"] = (summary.get(metric) or {}).get(p)
    figures["requests_per_s"] = summary.get("requests_per_s")
    figures["output_tokens_per_s"] = summary.get("output_tokens_per_s")
    figures["requests_waiting_mean"] = waiting
    figures["kv_cache_usage_mean"] = kv
    figures["joules_per_output_token"] = joules
    return figures


def replay_comparison(
    run: Run, energy: EnergyReport | None = None, engine: str | None = None
) -> dict[str, Any]:
    """{"rows": [{metric, measured, simulated, ratio}], "deployment", "engine",
    "engine_source", "profile", "requests", "notes"}; rows empty (and notes saying why) when
    the run cannot be replayed."""
    notes: list[str] = []
    empty: dict[str, Any] = {"rows": [], "notes": notes}
    try:
        rc = RunConfig.of(run)
    except TokenprobeError as exc:
        notes.append(f"no replay: {exc}")
        return empty
    priced: list[str] = []
    dep = deployment_of(run, priced)
    # the same reason, said of the replay
    notes += [
        "no replay: " + n.removeprefix("no cost-model view: ").removesuffix(": no cost-model view")
        for n in priced
    ]
    specs = _specs(run.records, _shared_prefix_tokens(rc))
    if dep is None or not specs:
        if not specs:
            notes.append("no replay: no successful request to replay")
        return empty
    left_out = len(run.records) - len(specs)
    if left_out:
        notes.append(f"replay: {left_out} request(s) failed or produced nothing, left out")
    preset, preset_source = replay_engine(rc, engine)
    try:
        result = simulate(
            deployment=dep,
            workload=Workload(arrival=Arrival("trace", trace=tuple(specs)), name="replay"),
            config=scheduler_of(rc.deployment, dep.gpu, preset),
            scheduler=scheduler_name(rc.deployment),
            seed=rc.seed or 0,
            trace_requests=min(len(specs), MAX_TRACED),
            profile=rc.deployment.profile,
            engine=preset,
            spec_decode=spec_decode_of(rc.deployment),
            **recorded_frontend(run),
        )
    except TokenprobeError as exc:
        notes.append(f"no replay: {exc}")
        return empty
    data = result.to_dict()
    simulated = _figures(data, *_sim_means(result), data["energy"]["joules_per_token_all_in"])
    measured = _run_side(run, rc, energy)
    rows = [_row(metric, measured[metric], simulated[metric]) for metric in simulated]
    return {
        "rows": rows,
        "per_request": _paired(run.records, result.records),
        "deployment": f"{dep.model.name} on {dep.num_gpus}x {dep.gpu.name}"
        + (f" capped at {dep.power_limit_w:g} W" if dep.power_limit_w else ""),
        "engine": preset,
        "engine_source": preset_source,
        "profile": rc.deployment.profile,
        "requests": len(specs),
        "notes": notes,
    }


def _paired(measured: list[RequestRecord], simulated: list[RequestRecord]) -> dict[str, list[Any]]:
    """Measured and simulated TTFT and end-to-end time per request that both sides served
    (MAX_PAIRED of them at most, evenly spaced in arrival order), as columns."""
    by_id = {r.request_id: r for r in simulated if r.ok}
    pairs = [
        (m, by_id[m.request_id])
        for m in sorted(measured, key=lambda r: r.scheduled_s)
        if m.ok and m.request_id in by_id
    ]
    if len(pairs) > MAX_PAIRED:
        pick = np.linspace(0, len(pairs) - 1, MAX_PAIRED).round().astype(int)
        pairs = [pairs[i] for i in pick]
    return {
        "request_id": [m.request_id for m, _ in pairs],
        "input_tokens": [m.input_tokens for m, _ in pairs],
        "measured_ttft_s": [m.ttft_s for m, _ in pairs],
        "simulated_ttft_s": [s.ttft_s for _, s in pairs],
        "measured_e2e_s": [m.e2e_s for m, _ in pairs],
        "simulated_e2e_s": [s.e2e_s for _, s in pairs],
    }


def _row(metric: str, measured: float | None, simulated: float | None) -> dict[str, Any]:
    ratio = measured / simulated if measured is not None and simulated else None
    return {"metric": metric, "measured": measured, "simulated": simulated, "ratio": ratio}


# what a figure apart from its replay says (above: measured > simulated; below: <)
_CAUSES = {
    "ttft_s": (
        "front-end or CPU overhead not in the model (tokenization, HTTP, scheduling), or a "
        "prefill slower than modelled",
        "the model's prefill is pessimistic for this server",
    ),
    "tpot_s": (
        "decode slower than modelled (kernels, CPU time between steps, throttling)",
        "the model's decode step is pessimistic for this server",
    ),
    "itl_s": ("gaps between tokens longer than the model's steps", "tokens closer than steps"),
    "output_tokens_per_s": (
        "more throughput than simulated",
        "less throughput than the simulated server at the same load",
    ),
}
_PARTED = ("ttft_s p50", "tpot_s p50", "itl_s p50", "output_tokens_per_s")


def replay_finding(replayed: dict[str, Any]) -> Finding | None:
    """A finding when a headline figure is more than REPLAY_FACTOR off its replay."""
    rows = {row["metric"]: row for row in replayed.get("rows", [])}
    off = [
        rows[m]
        for m in _PARTED
        if m in rows
        and rows[m]["ratio"] is not None
        and not 1 / REPLAY_FACTOR <= rows[m]["ratio"] <= REPLAY_FACTOR
    ]
    if not off:
        return None
    parts = []
    for row in off:
        above, below = _CAUSES[row["metric"].split()[0]]
        cause = above if row["ratio"] > 1 else below
        parts.append(f"{row['metric']} {row['ratio']:.2f}x simulated ({cause})")
    return Finding(
        "replay-mismatch",
        "info",
        "Measured vs the same load simulated: " + "; ".join(parts),
        {f"{row['metric'].replace(' ', '_')}_ratio": round(row["ratio"], 3) for row in off},
        "Look for what the model leaves out where measured is slower (front end, CPU, "
        "throttling); fit a profile to this server (`tokenprobe calibrate`) and pass it to "
        "the run's config, or give the engine preset with --engine.",
    )
