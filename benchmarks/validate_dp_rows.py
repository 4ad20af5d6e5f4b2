"""The data-parallel rows validate.py skips, replayed through the DP+EP simulator (issue 17).

The steady-state mappers of `tokenprobe.calibrate` run one replica, so two sets of public rows
are skipped there ("data-parallel replicas", "data-parallel attention") and fitted by no profile:
- ML.ENERGY leaderboard v3 on B200 (benchmarks/data/mlenergy_leaderboard_v3_b200.csv, dp > 1):
  vLLM 0.11.1 serving Qwen3-Coder-480B-A35B-FP8 with "DP for attention, EP for MLP experts" (the
  leaderboard's parallelization note): `--data-parallel-size dp --enable-expert-parallel`, one
  GPU a rank. ML.ENERGY's runs hold `avg_batch_size` sequences running (max_num_seqs sweep),
  counted over the whole fleet: the benchmark sums the gauge `vllm:num_requests_running` over its
  engines (github:ml-energy/benchmark@c1d6557:mlenergy/benchmark/llm/benchmark.py,
  `agg_gauge_metrics={"vllm:num_requests_running": "sum"}`; ml-energy/data records/runs.py reads
  that steady-state sum as `avg_batch_size`), and a DP launch passes each engine
  `--max-num-seqs` of the sweep's value over the GPUs (benchmark.py: "For data parallelism,
  max_num_seqs ... must be divisible by the number of GPUs", `max_num_seqs_per_replica`), so a
  row's `max_num_seqs` (512 at dp 8) is 64 a rank. Replayed as a closed loop of that many users
  (the open-loop stand-in of deployment_replay.closed_loop: C requests at t = 0, the rest at
  the rate that keeps C in flight by the run's own E2E), prompts of the task's assumed length
  (calibrate.mlenergy TASK_ISL) and outputs of the published mean spread as calibrate.mlenergy
  assumes (TASK_OUTPUT_CV; `output_lengths`); measured median ITL over every request, output
  tokens/s and J per output token over ML.ENERGY's steady window (`steady_window`). Priced
  with vllm-blackwell (the profile validate.py prices the table's other rows with), vLLM
  0.11.1's default MoE exchange (the engine preset's, `sim.engine_ep_comm`: ML.ENERGY's launch
  names no back end) and its DP padding (`sim.pads_ranks`; cost/dpep.py).
- GPUStack's SGLang runs with `--enable-dp-attention --dp-size 8` (benchmarks/data/
  gpustack_performance_lab.csv, dp > 1): mapped by calibrate.serving.serving_rows (its
  dp_attention path: the same workload, lengths, engine flags and measured metrics as its
  other rows), then simulated as 8 ranks stepping together instead of one replica.
Both through `simulate_fleet(dp=N)` (sim/dpep.py: every rank its own scheduler and KV, a step
waiting for the slowest rank and the shared experts and all-to-alls, idle ranks running dummy
batches), routed as the engines do: vLLM's DP coordinator balances on the ranks' queues
(least-loaded), SGLang's DataParallelController round-robins (`--load-balance-method`
default). Parameters: each engine's shipped profile (`calibrate.profile_name_for`); nothing is
fitted on these rows. ML.ENERGY's B200 table is held out of every fit; GPUStack's other SGLang
rows are the sglang profile's fit set, these DP rows were never in it (skipped).

Usage: python benchmarks/validate_dp_rows.py [--only NAME ...] [--rows]; prints a table, then
one JSON line (`section()` is what benchmarks/validate.py calls).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from deployment_replay import closed_loop
from tokenprobe.calibrate import load_profile, profile_name_for
from tokenprobe.calibrate.mlenergy import MLENERGY_FIELDS, TASK_ISL, TASK_OUTPUT_CV
from tokenprobe.calibrate.observations import (
    SkipRowError,
    engine_name,
    float_field,
    gpu_name,
    int_field,
    measured_fields,
    row_deployment,
)
from tokenprobe.calibrate.serving import serving_rows
from tokenprobe.cost import Deployment, gpu_generation
from tokenprobe.errors import TokenprobeError
from tokenprobe.files import read_text
from tokenprobe.records import Run
from tokenprobe.sim import engine_defaults, engine_ep_comm, rank_router_for, simulate_fleet
from tokenprobe.workload import Arrival, LengthDist, Workload, fixed
from validation_data import bias_pct, mdape_pct, run_main

DATA_DIR = Path(__file__).resolve().parent / "data"
ITL_TRACE = 200  # requests whose token times are kept, for the median ITL
CLOSED_REQUESTS = 3  # a closed-loop row simulates this many times its users (at least 64)
METRICS = ("itl_median", "tpot_median", "output_throughput", "energy_per_output_token")


@dataclass
class DpRow:
    source: str
    label: str
    measured: dict[str, float] = field(default_factory=dict)
    predicted: dict[str, float] | None = None
    why: str = ""

    def errors(self) -> dict[str, float]:
        if self.predicted is None:
            return {}
        return {
            m: self.predicted[m] / v - 1 for m, v in self.measured.items() if m in self.predicted
        }


def _with_profile(dep: Deployment, engine: str) -> Deployment:
    """`dep` at its engine's shipped profile for its GPU (vllm-blackwell on a B200: the one
    validate.py prices the same table's other rows with)."""
    name = profile_name_for(engine, dep.gpu.vendor, gpu_generation(dep.gpu))
    if name is None:
        return dep
    profile = load_profile(name)
    return replace(dep, efficiency=profile.efficiency, power=profile.power)


def _figures(d: Mapping[str, Any]) -> dict[str, float]:
    """Median ITL / TPOT, output tokens/s and J per output token of a fleet's to_dict(); the
    throughput and energy of its steady window (`steady_window`) where it has one."""
    out = {"output_throughput": float(d["output_tokens_per_s"])}
    for metric, key in (("itl_median", "itl_s"), ("tpot_median", "tpot_s")):
        if d[key]["p50"] is not None:
            out[metric] = float(d[key]["p50"])
    tokens = d.get("output_tokens") or 0
    total_j = (d.get("energy") or {}).get("total_j")
    if tokens and total_j:
        out["energy_per_output_token"] = float(total_j) / float(tokens)
    steady = d.get("steady")
    if steady:
        out["output_throughput"] = steady["tokens"] / steady["duration_s"]
        out["energy_per_output_token"] = steady["energy_j"] / steady["tokens"]
    return out


def steady_window(run: Run, max_num_seqs: int) -> dict[str, float] | None:
    """ML.ENERGY's steady state of a run: from the instant `max_num_seqs` requests have their
    first token to the instant all but max_num_seqs + 1 have finished
    (github:ml-energy/benchmark@c1d6557:mlenergy/benchmark/llm/benchmark.py `RequestTracker`,
    whose window the leaderboard's throughput and energy per token are measured over): the
    tokens that arrive in it, its duration and the GPUs' energy over it (the run's power
    timeline clipped to it). None when the run is too short to have one."""
    records = [r for r in run.records if r.ok and r.first_token_s is not None]
    # the tracker counts every request sent, failed ones too (they leave the running set)
    end_index = len(run.records) - max_num_seqs - 1
    if max_num_seqs < 1 or end_index <= max_num_seqs:
        return None
    finishes = sorted(r.finish_s for r in run.records if r.finish_s is not None)
    if end_index > len(finishes):
        return None
    start_s = sorted(r.first_token_s for r in records)[max_num_seqs - 1]  # type: ignore[type-var]
    end_s = finishes[end_index - 1]
    if end_s <= start_s:
        return None
    tokens = sum(1 for r in records for t in r.token_times_s if start_s <= t < end_s)
    t = np.array([p.t_s for p in run.timeline] + [max(end_s, run.timeline[-1].t_s)])
    power = np.array([p.power_w for p in run.timeline])
    spans = np.clip(t[1:], start_s, end_s) - np.clip(t[:-1], start_s, end_s)
    return {"tokens": float(tokens), "duration_s": end_s - start_s,
            "energy_j": float(np.sum(power * spans))}  # fmt: skip


def engine_max_num_seqs(row: Mapping[str, str], dp: int, default: int) -> int:
    """One engine's `--max-num-seqs` in an ML.ENERGY DP run: the row's (the sweep's, the
    fleet's) over the ranks (module docstring); `default` an engine's where the row has none."""
    return max(1, int_field(row, "max_num_seqs", default * dp) // dp)


def output_lengths(mean: float, cv: float, n: int) -> list[int]:
    """`n` output lengths of this mean and coefficient of variation (lognormal: sigma² =
    ln(1 + cv²)), the same every run (seed 0) and in a shuffled order, so that requests finish
    spread out as the task's do, not in waves of equal lengths: under DP padding a rank's
    lone prefill costs the gang as much as a wave's (cost/dpep.py), so when requests end matters.
    The task's CV is calibrate.mlenergy's (TASK_OUTPUT_CV)."""
    sigma = math.sqrt(math.log1p(cv * cv))
    dist = LengthDist("lognormal", mean=mean, sigma=sigma, name="output_tokens")
    return [int(k) for k in dist.sample(np.random.default_rng(0), n)]


def mlenergy_row(row: Mapping[str, str]) -> DpRow:
    """One ML.ENERGY B200 data-parallel row (module docstring)."""
    label = f"{row['model']} {row['gpu_count']}gpu dp{row.get('dp')} B{row.get('avg_batch_size')}"
    out = DpRow(MLENERGY, label[:60])
    gpus, dp = int_field(row, "gpu_count"), int_field(row, "dp", 1)
    kv = row.get("kv_cache_precision") or "bf16"  # vLLM's auto keeps a 16-bit cache
    flat = {**row, "tp": str(gpus), "pp": "1", "kv_cache_precision": kv}
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    gpu = gpu_name(row["gpu"], "mlenergy")
    ranks = None if dp == gpus else dp
    dep = row_deployment(row["model_hf_id"], gpu, flat, expert_parallel=True, attention_dp=True,
                         dp_ranks=ranks)  # fmt: skip
    # ML.ENERGY's launch sets no MoE back end (github:ml-energy/benchmark@c1d6557:configs/vllm/
    # sourcegraph-fim/Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8/B200/monolithic.env.yaml holds
    # logging variables only, monolithic.config.yaml no --all2all-backend): the release's
    # default runs (cost.VLLM_DEFAULT_ALL2ALL; 0.11.1: allgather_reducescatter)
    ep = engine_ep_comm(engine, row.get("engine_version", ""))
    dep = replace(_with_profile(dep, engine), ep_comm=ep)
    task = next((t for t in TASK_ISL if f"task={t}" in row.get("notes", "")), None)
    batch, osl = float_field(row, "avg_batch_size"), float_field(row, "osl_mean")
    if task is None or batch is None or osl is None:
        raise SkipRowError("no task, avg_batch_size or osl_mean")
    out.measured = measured_fields(row, [f for f in MLENERGY_FIELDS if f[0] in METRICS])
    config = engine_defaults(engine, dep.gpu)
    config = replace(config, max_num_seqs=engine_max_num_seqs(row, dp, config.max_num_seqs))
    isl, c = TASK_ISL[task], max(1, round(batch))
    n = max(64, CLOSED_REQUESTS * c)
    fleet_seqs = int_field(row, "max_num_seqs", c)  # the sweep's, over the fleet
    lengths = output_lengths(osl, TASK_OUTPUT_CV[task], n)

    def run(arrival: Arrival) -> dict[str, Any]:
        pairs = zip(arrival.trace, lengths, strict=True)
        specs = tuple(spec._replace(output_tokens=k) for spec, k in pairs)
        wl = Workload(replace(arrival, trace=specs), fixed(isl, "input_tokens"),
                      fixed(round(osl), "output_tokens"))  # fmt: skip
        res = simulate_fleet(dep, wl, dp=dep.dp, router=rank_router_for(engine), config=config,
                             engine=engine, trace_requests=n)  # fmt: skip
        d = res.to_dict()
        d["steady"] = steady_window(res.run(), fleet_seqs)
        return d

    d, _, _ = closed_loop(run, n, c, isl, round(osl))
    out.predicted = _figures(d)
    return out


def gpustack_row(row: Mapping[str, str]) -> DpRow:
    """One GPUStack SGLang DP-attention row (module docstring)."""
    mapped = next(iter(serving_rows(row, dp_attention=True)))
    out = DpRow(GPUSTACK, mapped.label[:60], dict(mapped.measured))
    kw = mapped.predict.keywords  # type: ignore[attr-defined]  # calibrate.serving._serve's
    dep = _with_profile(mapped.deployment, mapped.engine)
    res = simulate_fleet(dep, kw["workload"], dp=dep.dp, router=rank_router_for(mapped.engine),
                         config=kw["config"], engine=mapped.engine,
                         trace_requests=ITL_TRACE)  # fmt: skip
    out.predicted = _figures(res.to_dict())
    return out


MLENERGY, GPUSTACK = "mlenergy_v3_b200 (dp)", "gpustack_sglang (dp)"
SOURCES: dict[str, tuple[str, Callable[[Mapping[str, str]], DpRow]]] = {
    "mlenergy_leaderboard_v3_b200.csv": (MLENERGY, mlenergy_row),
    "gpustack_performance_lab.csv": (GPUSTACK, gpustack_row),
}


def _rows(path: Path) -> Iterator[dict[str, str]]:
    for row in csv.DictReader(io.StringIO(read_text(path), newline="")):
        if (row.get("dp") or "1").strip() not in ("", "1"):
            yield {k: v or "" for k, v in row.items() if k}


def replay_all(only: Sequence[str] = ()) -> list[DpRow]:
    out = []
    for name, (source, fn) in SOURCES.items():
        if only and not any(o in name for o in only):
            continue
        for row in _rows(DATA_DIR / name):
            try:
                out.append(fn(row))
            except SkipRowError as why:
                out.append(DpRow(source, row.get("model", "?"), why=str(why)))
    return out


def summarize(rows: Sequence[DpRow]) -> list[dict[str, Any]]:
    table = []
    for source in sorted({r.source for r in rows}):
        rs = [r for r in rows if r.source == source]
        entry: dict[str, Any] = {"source": source, "rows": len(rs),
                                 "covered": sum(r.predicted is not None for r in rs)}  # fmt: skip
        for m in METRICS:
            errs = [r.errors()[m] for r in rs if m in r.errors()]
            entry[f"{m}_n"] = len(errs)
            entry[f"{m}_mdape_pct"] = mdape_pct(errs)
            entry[f"{m}_bias_pct"] = bias_pct(errs)
        table.append(entry)
    return table


def section(only: Sequence[str] = (), rows: bool = False) -> dict[str, Any]:
    """Replay, print the table and return the JSON-ready summary."""
    replays = replay_all(only)
    if rows:
        for r in replays:
            errs = " ".join(f"{m} {100 * e:+6.1f}%" for m, e in r.errors().items())
            print(f"{r.source:24} {r.label:60} {errs or 'not covered: ' + r.why}")
    table = summarize(replays)
    print("\ndata-parallel rows (skipped by the steady-state mappers), through the DP+EP "
          "simulator; held out: nothing fitted on them")  # fmt: skip
    for t in table:
        cells = "  ".join(
            f"{m} {t[f'{m}_n']}/{t[f'{m}_mdape_pct']}%/{t[f'{m}_bias_pct']:+}%"
            for m in METRICS
            if t[f"{m}_n"]
        )
        print(f"  {t['source']:24} rows {t['rows']:3d} covered {t['covered']:3d}  {cells}")
    skipped = [r.why for r in replays if r.predicted is None]
    return {"by_source": table, "not_covered": {w: skipped.count(w) for w in set(skipped)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="only the CSVs whose file name contains NAME")  # fmt: skip
    parser.add_argument("--rows", action="store_true", help="print every row's errors")
    args = parser.parse_args(argv)
    try:
        out = section(args.only, args.rows)
    except TokenprobeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"benchmark": "validate_dp_rows", **out}))
    return 0


if __name__ == "__main__":
    run_main(main)
