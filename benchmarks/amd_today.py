"""AMD GPUs on today's engines: InferenceMAX's MI300X/MI325X/MI355X rows through `simulate`.

Held-out data only (benchmarks/data/inferencemax_agg.csv, README section 12): nothing here fits.
It replays each AMD row with the serving command InferenceMAX ran (transcribed below from
`github:SemiAnalysisAI/InferenceX@296c0d721` (2026-01-14, the last commit before the rows' last
night), `benchmarks/<model>_<precision>_<hw>[_atom]_slurm.sh` and `.github/configs/
amd-master.yaml`) and prints one JSON line: median absolute error (MdAPE) and median signed error
per group (GPU, engine, checkpoint) and metric, under each profile choice asked for.

The load: `bench_serving --dataset-name random --random-range-ratio 0.8 --ignore-eos
--max-concurrency C --num-prompts 10 x C` (benchmark-tmpl.yml: `random-range-ratio` default
'0.8'; benchmark_lib.sh), so each prompt and each answer is uniform in [0.8 L, L] tokens
(bench_serving's random dataset draws `randint(int(L * ratio), L + 1)`), closed loop at C users.

Profiles (`--profiles`): `shipped` is what `simulate --engine E --gpu G` loads
(`calibrate.profile_name_for`; none = the model's defaults), `defaults` the model's defaults,
any other word a shipped profile's name or a TOML path; `name:field=value;...` overrides some
efficiency figures of that choice (what-if, not a fit).

    python benchmarks/amd_today.py --profiles shipped,defaults --limit 2
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from repo_paths import DATA_DIR
from tokenprobe.calibrate import load_profile, profile_name_for
from tokenprobe.calibrate.observations import (
    Row,
    SkipRowError,
    measured_fields,
    require_kv_room,
    row_deployment,
)
from tokenprobe.calibrate.serving import SERVING_FIELDS, scheduler_for
from tokenprobe.cost import Deployment, gpu_generation
from tokenprobe.errors import TokenprobeError
from tokenprobe.sim import SchedulerConfig, simulate
from tokenprobe.workload import Arrival, LengthDist, Workload

DATA = DATA_DIR / "inferencemax_agg.csv"
RANGE_RATIO = 0.8  # benchmark-tmpl.yml random-range-ratio default
PROMPTS_PER_USER = 10  # --num-prompts $(( CONC * 10 ))

# The serving commands (flags the simulator reads; the rest are listed for the record).
# SGLang 0.5 on ROCm (SGLANG_USE_AITER=1 in every script): dsr1_fp8_mi300x_slurm.sh and
# dsr1_fp8_mi325x_slurm.sh; dsr1_fp8_mi355x_slurm.sh adds --attention-backend aiter and
# --enable-torch-compile; dsr1_fp4_mi355x_slurm.sh adds --attention-backend aiter and
# --kv-cache-dtype fp8_e4m3, and lowers the chunk to 32768 at 8k/1k above 32 users.
SGLANG_ROCM = (
    "--mem-fraction-static=0.8 --cuda-graph-max-bs=128 --chunked-prefill-size={chunk} "
    "--num-continuous-decode-steps=4 --max-prefill-tokens={chunk} --disable-radix-cache"
)
# ATOM 0.1.1 (dsr1_fp{4,8}_mi355x_atom_slurm.sh, gptoss_fp4_mi355x_atom_slurm.sh): `python3 -m
# atom.entrypoints.openai_server --model M -tp TP --kv_cache_dtype fp8 --block-size 16`, plus
# --max-model-len 10240 unless 1k/1k; every other setting ATOM's default (sim/atom.py)
ATOM = "-tp {tp} --kv_cache_dtype fp8 --block-size 16"


def serving_command(row: Mapping[str, str]) -> str:
    """The row's serving flags, as its InferenceMAX script wrote them (module docstring)."""
    # InferenceMAX writes "fp4"; the CSV names the checkpoint's format (mxfp4 for AMD's)
    hw, fp4 = row["gpu"].lower(), row["weight_precision"].split(" ")[0] in ("fp4", "mxfp4")
    if row["engine"] == "ATOM":
        return ATOM.format(tp=row["tp"])
    chunk = 196608
    if fp4 and row["isl"] == "8192" and row["osl"] == "1024" and int(row["concurrency"]) > 32:
        chunk = 32768
    command = SGLANG_ROCM.format(chunk=chunk)
    if hw == "mi355x":
        command += " --attention-backend aiter"
        command += " --kv-cache-dtype fp8_e4m3" if fp4 else " --enable-torch-compile"
    return command


def engine_of(row: Mapping[str, str]) -> str:
    return "atom" if row["engine"] == "ATOM" else "sglang"


def group_of(row: Mapping[str, str]) -> str:
    model = "dsr1-mxfp4" if "MXFP4" in row["model"] else row["model"].lower()
    version = row["engine_version"].split(" ")[0].split("-rocm")[0]
    version = version.split("-pytorch2.9-")[-1].removesuffix("-MI350x")
    return f"{row['gpu']}/{row['engine']} {version}/{model}/tp{row['tp']}"


def _length(top: int, name: str) -> LengthDist:
    return LengthDist("uniform", low=int(top * RANGE_RATIO), high=top, name=name)


def _serve(dep: Deployment, workload: Workload, config: SchedulerConfig) -> dict[str, float]:
    """Simulated output tokens/s, median TTFT and TPOT (s); steps priced through the step memo
    (<= 0.5 % off exact pricing, calibrate/serving.py), which a report, not a fit, can take."""
    s = simulate(deployment=dep, workload=workload, config=config).summary()
    return {
        "output_throughput": float(s["output_tokens_per_s"]),
        "ttft_median": float(s["ttft_s"]["p50"]),
        "tpot_median": float(s["tpot_s"]["p50"]),
    }


def amd_row(row: Mapping[str, str]) -> Row:
    """One InferenceMAX AMD row as a `Row` the serving simulator predicts."""
    notes = serving_command(row)
    weight = "mxfp4" if row["weight_precision"] == "fp4" else row["weight_precision"]
    kv = "fp8" if "kv_cache_dtype fp8" in notes or "kv-cache-dtype fp8" in notes else "bf16"
    cells = {**row, "weight_precision": weight, "kv_cache_precision": kv}
    dep = row_deployment(row["model_hf_id"], row["gpu"].lower(), cells)
    users = int(row["concurrency"])
    workload = Workload(
        Arrival("closed", concurrency=users),
        _length(int(row["isl"]), "input_tokens"),
        _length(int(row["osl"]), "output_tokens"),
        num_requests=PROMPTS_PER_USER * users,
        name="closed",
    )
    fields = [f for f in SERVING_FIELDS if f[0] != "itl_median"]  # TPOT published
    measured = measured_fields(row, fields)
    config = scheduler_for(engine_of(row), dep, notes)
    require_kv_room(dep, config, workload.input_len.expected + workload.output_len.expected)
    predict = functools.partial(_serve, workload=workload, config=config)
    label = f"{group_of(row)} {row['isl']}/{row['osl']} c{users}"
    return Row("inferencemax_amd", group_of(row), engine_of(row), label, dep, measured, predict)


def profile_for_row(choice: str, row: Row) -> str | None:
    choice = choice.split(":")[0]
    if choice == "defaults":
        return None
    if choice == "shipped":
        gpu = row.deployment.gpu
        return profile_name_for(row.engine, gpu.vendor, gpu_generation(gpu))
    return choice


def predict(row: Row, choice: str) -> dict[str, float]:
    name = profile_for_row(choice, row)
    dep = row.deployment
    if name is not None:
        p = load_profile(name)
        dep = replace(dep, efficiency=p.efficiency, power=p.power)
    _, _, changes = choice.partition(":")  # "name:field=value;field=value": what-if figures
    if changes:
        pairs = (item.split("=") for item in changes.split(";"))
        figures = {k: float(v) for k, v in pairs}
        dep = replace(dep, efficiency=dep.efficiency.with_overrides(figures))
    return row.predict(dep)


def summarize(errors: Mapping[str, Sequence[float]]) -> dict[str, str]:
    """{group metric: "MdAPE % (median signed error %, rows)"}."""
    return {
        key: f"{100 * statistics.median(abs(e) for e in v):.1f} "
        f"({100 * statistics.median(v):+.1f}, {len(v)})"
        for key, v in sorted(errors.items())
        if v
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default="shipped", help="comma-separated (module docstring)")
    ap.add_argument("--only", default="", help="keep groups containing this text")
    ap.add_argument("--limit", type=int, default=0, help="rows per group (0: all)")
    args = ap.parse_args(argv)
    with DATA.open(encoding="utf-8") as f:
        raw = [r for r in csv.DictReader(f) if r["gpu"].startswith("MI")]
    raw = [r for r in raw if args.only in group_of(r)]
    taken: dict[str, int] = defaultdict(int)
    rows, skipped = [], defaultdict(int)
    for r in raw:
        if args.limit and taken[group_of(r)] >= args.limit:
            continue
        try:
            rows.append(amd_row(r))
            taken[group_of(r)] += 1
        except (SkipRowError, TokenprobeError) as exc:  # a row that cannot run is counted
            skipped[f"{group_of(r)}: {str(exc)[:80]}"] += 1
    out: dict[str, Any] = {"rows": len(rows), "skipped": dict(skipped)}
    for choice in args.profiles.split(","):
        by_group: dict[str, list[float]] = defaultdict(list)
        overall: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            got = predict(row, choice)
            for metric, value in row.measured.items():
                err = (got[metric] - value) / value
                by_group[f"{row.run} {metric}"].append(err)
                overall[f"{row.engine} {metric}"].append(err)
        out[choice] = {"overall": summarize(overall), "groups": summarize(by_group)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
