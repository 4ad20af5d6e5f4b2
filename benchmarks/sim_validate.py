"""The simulator against TensorRT-LLM v0.14's max-throughput table (validation folder).

Each row is trtllm-bench "throughput": every request queued at once, fixed ISL/OSL, in-flight
batching; the metric is output tokens / total time. We simulate the same thing (offline arrival,
continuous batching with chunked prefill) so the batch is picked by the scheduler and the KV
capacity, as on the real engine, including the KV-limited rows. Settings: max_num_seqs 4096 and
max_num_batched_tokens 8192 (trtllm-bench's engine limits, large enough that KV decides), KV from
the memory model at gpu_memory_utilization 0.95 (the doc's kv_cache_free_gpu_mem_fraction).
To bound the run time a row simulates min(num_requests, max(500, 4 x the concurrency that fits
in KV)) requests: four waves or more of the steady batch. Prints a table and one JSON line.

Second source (`--source mlenergy`): ML.ENERGY leaderboard v3 (vLLM 0.11.1, H100), one row per
(model, GPUs, max_num_seqs) of a batch sweep, measured over a steady-state window. We run a closed
loop of `max_num_seqs` users (so the batch stays as full as KV allows, as in the sweep) for three
rounds, fixed output = the row's mean output length, input = the task's assumed mean prompt
(`TASK_ISL` in tokenprobe.calibrate.mlenergy, argued there: the leaderboard does not publish
inputs), and compare output tokens/s, median ITL and joules per output token (all energy /
output tokens).

    python benchmarks/sim_validate.py [--source trtllm|mlenergy] [--stride K] [--limit N]
        [--data-dir DIR]

The validation folder is `--data-dir DIR`, else $TOKENPROBE_VALIDATION_DIR, else
`../shared/validation` beside the repository root (benchmarks/validation_data.py); without it
the script says in one line where the data is expected and exits 2. On a terminal, stderr shows
rows done and an ETA; stdout is the table and the JSON line.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

from tokenprobe.calibrate.mlenergy import TASK_ISL
from tokenprobe.calibrate.sources import TRT_MODELS
from tokenprobe.cost import Deployment, kv_capacity_tokens, make_deployment
from tokenprobe.errors import TokenprobeError
from tokenprobe.sim import SchedulerConfig, simulate
from tokenprobe.workload import Arrival, LengthDist, Workload, fixed
from validation_data import Progress, require, run_main

CSV = "trtllm_v0.14_throughput.csv"
MLENERGY_CSV = "mlenergy_leaderboard_v3_h100.csv"
MODELS = TRT_MODELS  # one mapping of the TensorRT-LLM doc's model names (calibrate/sources.py)
GPUS = {"H200": "h200", "H100": "h100-sxm", "A100-SXM": "a100-sxm-80gb"}
GPUS |= {"A100-PCIE": "a100-pcie-80gb", "L40S": "l40s"}
CONFIG = SchedulerConfig(
    max_num_seqs=4096, max_num_batched_tokens=8192, gpu_memory_utilization=0.95
)


def _gpu(text: str) -> str:
    for key, name in GPUS.items():
        if text.upper().startswith(key):
            return name
    raise KeyError(text)


def run_row(row: dict[str, str]) -> tuple[float, float, int]:
    """(measured, simulated output tokens/s, requests simulated) of one table row."""
    weight = "fp8" if row["weight_precision"] == "FP8" else "fp16"
    dep = make_deployment(
        MODELS[row["model"]], _gpu(row["gpu"]), tp=int(row["tp"]), pp=int(row["pp"] or 1),
        weight_dtype=weight, kv_dtype=weight,
    )  # fmt: skip
    isl, osl = int(row["isl"]), int(row["osl"])
    fits = kv_capacity_tokens(dep, CONFIG.gpu_memory_utilization) // (isl + osl)
    n = min(int(row["num_requests"]), max(500, 4 * min(fits, CONFIG.max_num_seqs)))
    workload = Workload(
        Arrival("offline"), fixed(isl, "input_tokens"), fixed(osl, "output_tokens"), n
    )
    out = simulate(deployment=dep, workload=workload, config=CONFIG, trace_requests=0).to_dict()
    return float(row["output_tok_s"]), float(out["output_tokens_per_s"]), n


def _task(row: dict[str, str]) -> str:
    return row["source_ref"].rsplit("__", 1)[-1].removesuffix(".json")


def _mlenergy_deployment(row: dict[str, str]) -> Deployment:
    text = (row["weight_precision"] + row["model_hf_id"]).lower()
    weight = "mxfp4" if "mxfp4" in text else ("fp8" if "fp8" in text else "bf16")
    ep = int(row["ep"] or 1)
    # vLLM's expert parallelism with dp = 1 spans the TP group: tp x dp = ep GPUs
    tp = max(int(row["tp"] or 1), ep // int(row["dp"] or 1))
    return make_deployment(
        row["model_hf_id"], "h100-sxm", tp=tp, weight_dtype=weight, expert_parallel=ep > 1
    )


def _steady_window(rows: list[tuple[float, ...]], end_s: float) -> tuple[float, float, float]:
    """(tokens, joules, seconds) of the timeline's middle half: the sweep's steady state.

    Tokens per step = decode sequences + prefilling sequences (each prefill chunk that ends a
    prompt yields one token; long outputs make the difference negligible).
    """
    lo, hi = 0.25 * end_s, 0.75 * end_s
    ends = [r[0] for r in rows[1:]] + [end_s]
    tokens = joules = seconds = 0.0
    for row, t1 in zip(rows, ends, strict=True):
        t0 = row[0]
        if t0 >= lo and t1 <= hi:
            tokens += row[6] + (1 if row[5] else 0) * (row[1] - row[6])
            joules += row[4] * (t1 - t0)
            seconds += t1 - t0
    return tokens, joules, seconds


def run_mlenergy_row(row: dict[str, str]) -> dict[str, tuple[float, float]]:
    """{metric: (measured, simulated)} for one ML.ENERGY row (module docstring)."""
    dp = int(row["dp"] or 1)
    seqs = int(row["max_num_seqs"])
    isl, osl = TASK_ISL[_task(row)], round(float(row["osl_mean"]))
    # more users than slots keeps a queue, so the batch stays full as in the sweep; spread
    # output lengths (+-50%) so that requests finish at different steps, as real ones do
    workload = Workload(
        Arrival("closed", concurrency=2 * seqs),
        fixed(isl, "input_tokens"),
        LengthDist("uniform", low=max(1, osl // 2), high=max(1, 3 * osl // 2)),
        6 * seqs,
    )
    config = SchedulerConfig(max_num_seqs=seqs, max_num_batched_tokens=max(8192, seqs))
    result = simulate(
        deployment=_mlenergy_deployment(row), workload=workload, config=config, trace_requests=300
    )
    d = result.to_dict()
    tokens, joules, seconds = _steady_window(result.engine.timeline.rows, result.engine.end_s)
    return {
        "output_tok_s": (float(row["output_tok_s"]), dp * tokens / seconds),
        "itl_ms_median": (float(row["itl_ms_median"]), 1e3 * d["itl_s"]["p50"]),
        "j_per_output_token": (float(row["energy_J_per_output_token"]), joules / tokens),
    }


def main_mlenergy(rows: list[dict[str, str]]) -> None:
    errors: dict[str, list[float]] = {}
    skipped: dict[str, int] = {}
    t0 = time.perf_counter()
    progress = Progress(len(rows), "sim_validate mlenergy")
    for row in rows:
        label = f"{row['model'][:28]:<28} x{row['gpu_count']} seqs {row['max_num_seqs']:>4}"
        try:
            metrics = run_mlenergy_row(row)
        except (TokenprobeError, KeyError, ValueError) as exc:
            reason = type(exc).__name__ + ": " + str(exc)[:70]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        finally:
            progress.step()
        parts = []
        for name, (measured, predicted) in metrics.items():
            errors.setdefault(name, []).append(abs(predicted / measured - 1))
            parts.append(f"{name} {measured:8.2f} vs {predicted:8.2f}")
        print(label, " | ".join(parts))
    progress.close()
    for reason, count in skipped.items():
        print(f"skipped {count}: {reason}")
    print(json.dumps({
        "benchmark": "sim_validate_mlenergy_v3_h100",
        "rows_run": len(next(iter(errors.values()), [])),
        "rows_skipped": sum(skipped.values()),
        "median_abs_pct_error": {
            k: round(100 * statistics.median(v), 1) for k, v in errors.items()
        },
        "wall_s": round(time.perf_counter() - t0, 1),
    }))  # fmt: skip


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows; an unreadable or undecodable file is one line and exit 2."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        print(f"error: cannot read {path}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("trtllm", "mlenergy"), default="trtllm")
    parser.add_argument("--stride", type=_positive, default=1, help="every k-th row")
    parser.add_argument("--limit", type=int, default=0, help="at most this many rows")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of the validation CSVs (default: $TOKENPROBE_VALIDATION_DIR, else "
        "../shared/validation beside the repository)",
    )
    args = parser.parse_args()
    name = CSV if args.source == "trtllm" else MLENERGY_CSV
    folder = require(args.data_dir, [name], need_all=True)
    rows = _rows(folder / name)[:: args.stride]
    rows = rows[: args.limit] if args.limit > 0 else rows
    if args.source == "mlenergy":
        main_mlenergy(rows)
        return
    main_trtllm(rows)


def main_trtllm(rows: list[dict[str, str]]) -> None:
    errors: list[float] = []
    skipped: dict[str, int] = {}
    t0 = time.perf_counter()
    progress = Progress(len(rows), "sim_validate trtllm")
    for row in rows:
        label = f"{row['model']:<16} {row['gpu'][:14]:<14} {row['weight_precision']:<4} "
        label += f"tp{row['tp']} {row['isl']:>5}/{row['osl']:<5}"
        try:
            measured, predicted, n = run_row(row)
        except (TokenprobeError, KeyError, ValueError) as exc:
            reason = type(exc).__name__ + ": " + str(exc)[:60]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        finally:
            progress.step()
        err = predicted / measured - 1
        errors.append(abs(err))
        print(f"{label} measured {measured:9.1f} simulated {predicted:9.1f} ({err:+.0%}, n={n})")
    progress.close()
    for reason, count in skipped.items():
        print(f"skipped {count}: {reason}")
    mape = statistics.median(errors) if errors else None
    print(json.dumps({
        "benchmark": "sim_validate_trtllm_v0.14_throughput",
        "rows_run": len(errors),
        "rows_skipped": sum(skipped.values()),
        "median_abs_pct_error": None if mape is None else round(100 * mape, 1),
        "within_20pct": sum(e < 0.2 for e in errors),
        "wall_s": round(time.perf_counter() - t0, 1),
    }))  # fmt: skip


if __name__ == "__main__":
    run_main(main)
