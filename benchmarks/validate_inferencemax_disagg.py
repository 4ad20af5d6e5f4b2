"""InferenceMAX's disaggregated multi-node rows replayed through the simulator (held out).

`benchmarks/data/deployments/inferencemax_disagg.csv` (198 rows; benchmarks/data/README.md,
section 12): NVIDIA Dynamo with SGLang or TensorRT-LLM on GB200 NVL72 and SGLang PD on MI355X.
Each row is replayed as `simulate --disaggregate XpYd` runs it (sim/disagg.py): X prefill and Y
decode workers, each with its own deployment and scheduler flags from the configuration's recipe
(benchmarks/inferencemax_recipes.py, every flag with its source): its GPUs, attention data
parallel (one rank a GPU) with the experts spread over the worker's GPUs, the EP back end
(DeepEP normal / low-latency, TensorRT-LLM's wide-EP all-to-all or its all-gather under CUTLASS),
the fp8 KV cache, MTP with k draft tokens (`--spec-decode mtp:k`, the method's default
acceptance), the KV moved over NVLink inside the 72-GPU NVL72 domain or over the NICs between
MI355X nodes (cost/kvtransfer.py). An attention-DP worker is one engine whose step is the cost
model's attention-DP step, its ranks balanced (sim/api.py `simulate_fleet`).

The client (`--max-concurrency C --ignore-eos`, random lengths uniform in [0.8 L, L]) is a closed
loop of C users; the fleet simulator takes open-loop arrivals, so it is replayed as
deployment_replay.py does (C requests at t = 0, the rest at the constant rate that holds C in
flight by the run's own E2E, Little's law), with each request at the mean lengths 0.9 L (the
rows' own throughput x E2E gives 0.87-1.0 C in flight at that mean, a check on the lengths, not
a fit). The client's own prompts a user (5-10 x C: the first C, sent at once, are 1/5-1/10 of the
requests, so the median TTFT is mostly the steady state's), but at most `REQUESTS_CAP` in all
unless 2 a user need more (C >= 3,000, 15 rows: there half the requests are the first burst);
the search starts from C over a cost-model guess at the E2E.

Compared per row: output throughput (per decode GPU, InferenceMAX's `output_tput_per_gpu`; the
ratio is that of the totals), median TPOT and median TTFT. The rows' median ITL is not compared:
SGLang streams every 10th or 50th token (`--stream-interval`) and TensorRT-LLM's decode servers
every 20th (gen_yaml.py `stream_interval: 20`), so their ITL is a chunk's, not a token's.
Nothing is fitted on these rows; a row whose configuration has no recipe or that the tool cannot
express is not covered and says why.

Usage: python benchmarks/validate_inferencemax_disagg.py [--rows] [--framework NAME ...]
[--limit N] [--every N]; prints a table per (hardware, framework, model, precision, spec), then
one JSON line.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deployment_replay import closed_loop
from inferencemax_recipes import RANGE_RATIO, RECIPES, Recipe, Worker
from repo_paths import DATA_DIR
from tokenprobe.calibrate import load_profile, profile_name_for
from tokenprobe.calibrate.observations import SkipRowError, float_field, int_field
from tokenprobe.calibrate.serving import _flag, scheduler_for
from tokenprobe.cost import (
    BatchShape,
    Deployment,
    EpComm,
    SpecDecode,
    ep_comm_from_flags,
    make_deployment,
    step_cost,
)
from tokenprobe.errors import ConfigError, TokenprobeError
from tokenprobe.files import read_text
from tokenprobe.sim import SchedulerConfig, simulate_fleet
from tokenprobe.units import MILLI
from tokenprobe.workload import Arrival, fixed
from tokenprobe.workload import Workload as SimWorkload
from validation_data import add_metric_stats, metric_cells, run_main

CSV = DATA_DIR / "deployments" / "inferencemax_disagg.csv"
METRICS = ("throughput", "tpot", "ttft")
REQUESTS_CAP = 6000  # requests simulated at most, unless 2 a user need more (docstring)
ITL_TRACE = 64  # requests whose token times are kept (the median TPOT needs none)
WORKERS = re.compile(
    r"prefill: (\d+) workers x TP\d+ EP\d+ dp_attention=\w+ \((\d+) GPUs\); "
    r"decode: (\d+) workers x TP\d+ EP\d+ dp_attention=\w+ \((\d+) GPUs\)"
)
ENGINES = {"dynamo-trt": "tensorrt-llm", "dynamo-sglang": "sglang", "sglang-disagg": "sglang"}
# the handoff each engine side runs (sim/disagg.py): SGLang's bootstrap (the decode worker
# pre-allocates, both sides start at once) under Dynamo as under SGLang's router; Dynamo's
# TensorRT-LLM path asks the context server first, then the generation server with its KV
HANDOFFS = {"dynamo-trt": "proxy", "dynamo-sglang": "sglang", "sglang-disagg": "sglang"}
HARDWARE = {"GB200 (NVL72)": "gb200", "MI355X": "mi355x"}


@dataclass
class Replayed:
    """One row: its group, what was measured, what the tool predicts (None: not covered)."""

    group: tuple[str, str, str, str, str]  # hardware, framework, model, precision, spec
    label: str
    measured: dict[str, float]
    predicted: dict[str, float] | None = None
    why: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def errors(self) -> dict[str, float]:
        if self.predicted is None:
            return {}
        p = self.predicted
        return {m: p[m] / v - 1.0 for m, v in self.measured.items() if p.get(m)}


def load_rows(path: Path = CSV) -> list[dict[str, str]]:
    return [dict(r) for r in csv.DictReader(io.StringIO(read_text(path), newline=""))]


def _note(row: Mapping[str, str], key: str) -> str:
    found = re.search(rf"{key}=([\w.-]+)", row.get("notes", ""))
    if not found:
        raise SkipRowError(f"notes name no {key}")
    return found.group(1)


def group_of(row: Mapping[str, str]) -> tuple[str, str, str, str, str]:
    model = "gpt-oss-120b" if "gpt-oss" in row["model"] else "DeepSeek-R1"
    hw = HARDWARE.get(row["gpu"], row["gpu"])
    return hw, _note(row, "framework"), model, row["weight_precision"], _note(row, "spec_decoding")


def recipe_for(row: Mapping[str, str]) -> Recipe:
    """The search-space entry that ran the row: same framework, model, precision, lengths,
    MTP or not, worker counts and GPUs, with the row's concurrency among its own."""
    _, framework, model, precision, spec = group_of(row)
    workers = WORKERS.search(row.get("notes", ""))
    if not workers:
        raise SkipRowError("notes give no prefill/decode workers")
    p_n, p_gpus, d_n, d_gpus = (int(g) for g in workers.groups())
    prefix = "gptoss" if model == "gpt-oss-120b" else "dsr1"
    c = int_field(row, "concurrency")
    for r in RECIPES:
        if (
            (r.framework, r.prefix, r.precision, r.spec) == (framework, prefix, precision, spec)
            and (r.isl, r.osl) == (int_field(row, "isl"), int_field(row, "osl"))
            and (r.prefill_workers, r.prefill.gpus * r.prefill_workers) == (p_n, p_gpus)
            and (r.decode_workers, r.decode.gpus * r.decode_workers) == (d_n, d_gpus)
            and c in r.concurrency
        ):
            return r
    raise SkipRowError(f"no recipe entry for {framework} {p_n}P{d_n}D at c{c}")


def _ep_comm(engine: str, worker: Worker) -> EpComm:
    """SGLang's EP flags as the engine reads them; TensorRT-LLM's MoE back end (gen_yaml.py):
    WIDEEP sends each token to its experts' GPUs (the per-expert all-to-all), CUTLASS under
    attention DP all-gathers every rank's tokens and reduce-scatters the outputs."""
    if engine == "sglang":
        return ep_comm_from_flags(worker.flags)
    return EpComm("allgather") if worker.moe_backend == "CUTLASS" and worker.attention_dp else (
        EpComm()
    )  # fmt: skip


def worker_deployment(row: Mapping[str, str], worker: Worker, engine: str) -> Deployment:
    """One worker: its GPUs as one deployment (attention DP: one rank a GPU), the row's weights
    (NVFP4 for DeepSeek-R1 fp4, gpt-oss-120b's own MXFP4), an fp8 KV cache (every recipe)."""
    gpu = HARDWARE.get(row["gpu"], row["gpu"])
    vendor = "amd" if gpu.startswith("mi") else "nvidia"
    name = profile_name_for(engine, vendor)
    profile = load_profile(name) if name else None
    weight = row["weight_precision"]
    if "gpt-oss" in row["model"] and weight == "fp4":
        weight = "mxfp4"
    try:
        return make_deployment(
            row.get("model_hf_id") or row["model"],
            gpu,
            tp=worker.gpus,
            expert_parallel=worker.ep,
            attention_dp=worker.attention_dp,
            weight_dtype=weight,
            kv_dtype="fp8",
            efficiency=profile.efficiency if profile else None,
            power=profile.power if profile else None,
            ep_comm=_ep_comm(engine, worker),
        )
    except TokenprobeError as exc:
        raise SkipRowError(f"not expressible: {exc}") from None


def worker_config(engine: str, dep: Deployment, worker: Worker) -> SchedulerConfig:
    """The worker's scheduler from its flags (the engine's own flag reader); a TensorRT-LLM
    attention-DP worker's batch and token limits are one rank's, times its ranks."""
    base = scheduler_for(engine, dep, worker.flags)
    if engine != "tensorrt-llm":
        return base
    util = _flag(worker.flags, "--kv_cache_free_gpu_mem_fraction")
    return replace(
        base,
        max_num_seqs=base.max_num_seqs * worker.ranks,
        max_num_batched_tokens=base.max_num_batched_tokens * worker.ranks,
        gpu_memory_utilization=util or base.gpu_memory_utilization,
    )


def measured(row: Mapping[str, str]) -> dict[str, float]:
    out = {}
    for metric, column, scale in (
        ("throughput", "output_tok_s", 1.0),
        ("tpot", "tpot_ms_median", MILLI),
        ("ttft", "ttft_ms_median", MILLI),
    ):
        value = float_field(row, column)
        if value is not None:
            out[metric] = value * scale
    return out


def predict(row: Mapping[str, str]) -> tuple[dict[str, float], str, dict[str, Any]]:
    recipe = recipe_for(row)
    engine = ENGINES[recipe.framework]
    p_dep = worker_deployment(row, recipe.prefill, engine)
    d_dep = worker_deployment(row, recipe.decode, engine)
    p_cfg, d_cfg = (
        worker_config(engine, p_dep, recipe.prefill),
        worker_config(engine, d_dep, recipe.decode),
    )
    spec = SpecDecode.parse(f"mtp:{recipe.mtp_k}") if recipe.mtp_k else None
    mean = (1 + RANGE_RATIO) / 2  # uniform in [0.8 L, L]
    isl, osl = round(mean * recipe.isl), round(mean * recipe.osl)
    c = int_field(row, "concurrency")
    split = f"{recipe.prefill_workers}p{recipe.decode_workers}d"

    def run(arrival: Arrival) -> dict[str, Any]:
        wl = SimWorkload(arrival, fixed(isl, "input_tokens"), fixed(osl, "output_tokens"))
        try:
            res = simulate_fleet(
                d_dep, wl, config=d_cfg, engine=engine, disaggregate=split,
                prefill_deployment=p_dep, prefill_config=p_cfg, spec_decode=spec,
                trace_requests=ITL_TRACE, pd_handoff=HANDOFFS[recipe.framework],
            )  # fmt: skip
        except TokenprobeError as exc:
            raise SkipRowError(f"not expressible: {exc}") from None
        return res.to_dict()

    n = min(recipe.prompts_per_user, max(2, REQUESTS_CAP // c)) * c
    d, rate, held = closed_loop(
        run, n, c, isl, osl, c / _e2e_guess_s(recipe, d_dep, d_cfg, spec, c)
    )
    decode_gpus = recipe.decode.gpus * recipe.decode_workers
    out = {
        "throughput": float(d["output_tokens_per_s"]),
        "tpot": float(d["tpot_s"]["p50"]),
        "ttft": float(d["ttft_s"]["p50"]),
    }
    extra = {"per_decode_gpu": out["throughput"] / decode_gpus, "kv_link": d["config"]["kv_link"]}
    note = f"{split} {_side(recipe.prefill)} / {_side(recipe.decode)}"
    note += f", mtp:{recipe.mtp_k}" if spec else ""
    return out, note + f", c{c} as {rate:.3g} req/s ({held:.0f} in flight)", extra


def _e2e_guess_s(
    recipe: Recipe, dep: Deployment, config: SchedulerConfig, spec: SpecDecode | None, c: int
) -> float:
    """The closed loop's first guess at a request's E2E (only where its search starts): the
    output tokens at one decode step each of a worker's share of the users (at most its
    running limit, the rest waiting their turn), at the mid-output context."""
    mean = (1 + RANGE_RATIO) / 2
    isl, osl = mean * recipe.isl, mean * recipe.osl
    users = max(1, c // recipe.decode_workers)
    batch = min(users, config.max_num_seqs)
    step_s = step_cost(dep, BatchShape.decode(batch, round(isl + osl / 2))).time_s
    per_step = spec.tokens_per_step if spec else 1.0
    return osl / per_step * step_s * max(1.0, users / batch)


def _side(w: Worker) -> str:
    return f"{'DEP' if w.attention_dp else ('TEP' if w.ep else 'TP')}{w.gpus}"


def replay(row: Mapping[str, str]) -> Replayed:
    label = f"{row['model'][:14]} {row['isl']}/{row['osl']} c{row['concurrency']}"
    try:
        group = group_of(row)
    except SkipRowError as why:
        return Replayed(("?",) * 5, label, measured(row), why=str(why))
    r = Replayed(group, label, measured(row))
    try:
        r.predicted, r.note, r.extra = predict(row)
    except SkipRowError as why:
        r.why = str(why)
    return r


def summarize(replays: Sequence[Replayed]) -> dict[str, Any]:
    """Rows, covered, and per metric n / MdAPE / median signed error, per group and in all."""
    groups: dict[tuple[str, ...], list[Replayed]] = {}
    for r in replays:
        groups.setdefault(r.group, []).append(r)
        groups.setdefault(("all",), []).append(r)
    out = []
    for key in sorted(groups, key=lambda k: (k == ("all",), k)):
        rs = groups[key]
        row: dict[str, Any] = {"group": " ".join(key), "rows": len(rs)}
        row["covered"] = sum(r.predicted is not None for r in rs)
        add_metric_stats(row, [r.errors() for r in rs], METRICS)
        out.append(row)
    not_covered = Counter(r.why for r in replays if r.predicted is None)
    return {"by_group": out, "not_covered": dict(not_covered)}


def print_summary(summary: Mapping[str, Any]) -> None:
    print("\nInferenceMAX disaggregated rows (held out: nothing fitted on them); throughput = "
          "output per decode GPU, TPOT and TTFT medians")  # fmt: skip
    print(f"{'hardware framework model precision spec':48} {'rows':>4} {'cov':>4}  "
          + "  ".join(f"{m + ' n/MdAPE/bias':>22}" for m in METRICS))  # fmt: skip
    for r in summary["by_group"]:
        cells = metric_cells(r, METRICS)
        print(f"{r['group']:48} {r['rows']:4d} {r['covered']:4d}  " + cells)
    for why, n in summary["not_covered"].items():
        print(f"  not covered: {n:3d}  {why}")


def section(
    rows: bool = False, frameworks: Sequence[str] = (), limit: int | None = None, every: int = 1
) -> dict[str, Any]:
    """Replay the rows (those of `frameworks`, every `every`-th, the first `limit`), print the
    table and return the JSON-ready summary (benchmarks/validate_deployments.py calls it)."""
    selected = [
        r for r in load_rows() if not frameworks or any(f in r["notes"] for f in frameworks)
    ]
    selected.sort(key=lambda r: int_field(r, "concurrency"))  # the cheap ones first
    replays = []
    for row in selected[::every][:limit]:
        r = replay(row)
        replays.append(r)
        if rows:  # as each is replayed (a full run takes minutes)
            errs = " ".join(f"{m} {100 * e:+6.1f}%" for m, e in r.errors().items())
            print(f"{' '.join(r.group):40} {r.label:30} {errs or 'not covered: ' + r.why}"
                  f"{'  [' + r.note + ']' if r.note else ''}", flush=True)  # fmt: skip
    summary = summarize(replays)
    print_summary(summary)
    return {"file": CSV.name, **summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every row's errors")
    parser.add_argument(
        "--framework", action="append", default=[], metavar="NAME",
        help="only rows of this InferenceMAX framework (dynamo-trt, dynamo-sglang, sglang-disagg)",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, default=None, help="the first N rows only")
    parser.add_argument("--every", type=int, default=1, help="every N-th row only (a sample)")
    args = parser.parse_args(argv)
    try:
        if args.every < 1:
            raise ConfigError("every", args.every, "an integer >= 1")
        out = section(args.rows, args.framework, args.limit, args.every)
    except TokenprobeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"benchmark": "validate_inferencemax_disagg", **out}))
    return 0


if __name__ == "__main__":
    run_main(main)
