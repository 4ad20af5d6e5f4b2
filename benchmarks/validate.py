"""Accuracy of the estimator against public measurements in ../shared/validation.

For every usable row, build the same deployment and workload, predict the measured quantity and
report, per source and metric, the median absolute percentage error (MdAPE), the median signed
error (bias) and the number of rows; rows that cannot be run are counted by reason.

Mappings and assumptions (stated, not fitted):
- Argonne static batches: input = output = L, batch B; e2e = TTFT + (L − 1)·TPOT. Their A100 is
  the 40 GB SXM part (ALCF Polaris); an H100 of unstated variant is taken as SXM.
- TensorRT-LLM v0.9 static batches: throughput per GPU = B·OSL / e2e / GPUs; FP8 rows use an
  fp8 KV cache (the doc's config); the A100 of unstated memory is taken as SXM 80 GB.
- ML.ENERGY v3 (vLLM, steady state): a step decodes `avg_batch_size` sequences and prefills the
  arrivals that keep the batch full, avg_batch·ISL/OSL tokens per step (continuous batching);
  J/output token = energy of that average step / batch; the median ITL is that step when a
  prefill lands in most steps (batch/OSL >= 0.5), else a decode-only step. Input lengths are
  not published: ISL is assumed per task (TASK_ISL below). EP rows (tp=1, ep=N) are run as EP
  over N GPUs with tensor-parallel attention. gpt-oss weights are taken as mxfp4 throughout.

Usage: python benchmarks/validate.py [--validation-dir DIR] [--rows] ; prints a table, then one
JSON line with every figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EFFICIENCY,
    BatchShape,
    Efficiency,
    Workload,
    estimate_deployment,
    make_deployment,
    step_cost,
)
from tokenprobe.cost.deployment import Deployment
from tokenprobe.errors import TokenprobeError
from tokenprobe.units import MILLI

DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "validation"

TRT_MODELS = {
    "LLaMA 7B": "llama-2-7b",
    "LLaMA 70B": "llama-2-70b",
    "Mistral 7B": "mistral-7b",
    "Mixtral 8x7B": "mixtral-8x7b",
    "Mixtral 8x22B": "mixtral-8x22b",
    "LLaMA v3 70B": "llama-3-70b",
    "LLaMA v3.1 8B": "llama-3.1-8b",
    "LLaMA v3.1 70B": "llama-3.1-70b",
    "LLaMA v3.1 405B": "llama-3.1-405b",
}
# ML.ENERGY v3 tasks: assumed mean prompt tokens (the leaderboard publishes output lengths only)
TASK_ISL = {"lm-arena-chat": 1000, "gpqa": 300, "sourcegraph-fim": 2000}


EFFICIENCY: list[Efficiency] = [DEFAULT_EFFICIENCY]  # --efficiency overrides replace it


class SkipRowError(Exception):
    """A row that cannot be run; the message is the reason (counted)."""


@dataclass(frozen=True)
class Case:
    source: str
    metric: str
    measured: float
    predicted: float
    row: str

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured


def _gpu(text: str, source: str) -> str:
    t = text.upper()
    if "GH200" in t:
        return "gh200"
    if "H200" in t:
        return "h200"
    if "H100" in t:
        return "h100-pcie" if "PCIE" in t else "h100-sxm"
    if "A100" in t:
        if "PCIE" in t:
            return "a100-pcie-80gb"
        return "a100-sxm-40gb" if source == "argonne" else "a100-sxm-80gb"
    if "L40S" in t:
        return "l40s"
    raise SkipRowError(f"gpu not mapped: {text[:30]}")


def _dtype(text: str) -> str | None:
    t = text.lower()
    for key, name in (
        ("mxfp4", "mxfp4"),
        ("fp8", "fp8"),
        ("int8", "int8"),
        ("bfloat16", "bf16"),
        ("float16", "fp16"),
        ("fp16", "fp16"),
    ):
        if key in t:
            return name
    return None


def _int(row: dict[str, str], key: str, default: int | None = None) -> int:
    value = row.get(key, "")
    if not value:
        if default is None:
            raise SkipRowError(f"no {key}")
        return default
    return int(float(value))


def _deployment(model: str, gpu: str, row: dict[str, str], **kw: Any) -> Deployment:
    weight = _dtype(row["weight_precision"]) or "fp16"
    kv = _dtype(row["kv_cache_precision"])
    if kv is None:
        kv = "fp8" if weight == "fp8" else ("bf16" if weight in ("bf16", "mxfp4") else "fp16")
    try:
        return make_deployment(
            model,
            gpu,
            tp=_int(row, "tp", 1),
            pp=_int(row, "pp", 1),
            weight_dtype=weight,
            kv_dtype=kv,
            efficiency=EFFICIENCY[0],
            **kw,
        )
    except TokenprobeError as exc:
        raise SkipRowError(f"not runnable: {exc}") from None


def _argonne(row: dict[str, str]) -> Iterator[Case]:
    model = row["model_hf_id"]
    if row["ep"] and row["ep"] not in ("", "1"):
        raise SkipRowError("expert-parallel row (TRT-LLM EP on A100) not modelled as such")
    dep = _deployment(model, _gpu(row["gpu"], "argonne"), row)
    batch, isl, osl = _int(row, "batch_size"), _int(row, "isl"), _int(row, "osl")
    est = estimate_deployment(dep, Workload(isl, osl, batch), find_compute_bound=False)
    sid = row["source_id"].removeprefix("argonne_llm_inference_bench_")
    key = f"{row['engine']} {row['model']} {row['gpu'][:5]} tp{row['tp']} B{batch} L{isl}"
    if sid == "ttft":
        yield Case("argonne_ttft", "ttft", float(row["ttft_ms_mean"]) * MILLI, est.ttft_s, key)
        return
    if row["total_tok_s"]:
        tput = batch * (isl + osl) / est.e2e_s
        yield Case(f"argonne_{sid}", "throughput", float(row["total_tok_s"]), tput, key)
    if sid == "power" and row["power_W_total"]:
        decode_j = est.decode.energy_j if est.decode else 0.0
        power = (est.prefill.energy_j + decode_j) / est.e2e_s / dep.num_gpus
        yield Case("argonne_power", "power_per_gpu", float(row["power_W_total"]), power, key)


def _trt09(row: dict[str, str]) -> Iterator[Case]:
    model = TRT_MODELS.get(row["model"])
    if model is None:
        raise SkipRowError(f"model not in catalog: {row['model']}")
    dep = _deployment(model, _gpu(row["gpu"], "trt"), row)
    batch, isl, osl = _int(row, "batch_size"), _int(row, "isl"), _int(row, "osl")
    est = estimate_deployment(dep, Workload(isl, osl, batch), find_compute_bound=False)
    key = f"{row['model']} {row['gpu'][:5]} tp{row['tp']} B{batch} {isl}/{osl}"
    if row["ttft_ms_mean"]:
        yield Case("trtllm_v0.9", "ttft", float(row["ttft_ms_mean"]) * MILLI, est.ttft_s, key)
    if row["output_tok_s_per_gpu"]:
        tput = batch * osl / est.e2e_s / dep.num_gpus
        yield Case("trtllm_v0.9", "throughput", float(row["output_tok_s_per_gpu"]), tput, key)


def _task(row: dict[str, str]) -> str:
    for task in TASK_ISL:
        if f"task={task}" in row["notes"] or task in row["source_ref"]:
            return task
    raise SkipRowError("unknown ML.ENERGY task")


def _mlenergy(row: dict[str, str]) -> Iterator[Case]:
    gpus, tp, ep = _int(row, "gpu_count"), _int(row, "tp", 1), _int(row, "ep", 1)
    if _int(row, "dp", 1) > 1:
        raise SkipRowError("data-parallel replicas")
    row = {**row, "tp": str(gpus), "pp": "1"}
    dep = _deployment(row["model_hf_id"], "h100-sxm", row, expert_parallel=ep > 1 and tp == 1)
    batch = float(row["avg_batch_size"])
    isl, osl = TASK_ISL[_task(row)], float(row["osl_mean"])
    ctx = int(isl + osl / 2)
    prefill = round(batch * isl / osl)
    shape = BatchShape(
        prefill_tokens=prefill,
        prefill_attn_pairs=prefill * (isl / 2),
        prefill_seqs=1 if prefill else 0,
        decode_seqs=round(batch),
        decode_context_tokens=round(batch) * ctx,
    )
    cost = step_cost(dep, shape)
    # a new request joins every osl/batch steps; when that is less often than every other step,
    # the median inter-token gap is a decode-only step (the prefill steps are the tail)
    decode_only = step_cost(dep, BatchShape.decode(round(batch), ctx))
    median_step = cost if batch / osl >= 0.5 else decode_only
    key = f"{row['model']} {gpus}gpu B{batch:.0f}"
    yield Case(
        "mlenergy_v3", "itl_median", float(row["itl_ms_median"]) * MILLI, median_step.time_s, key
    )
    j_per_tok = cost.energy_j / batch
    yield Case(
        "mlenergy_v3",
        "energy_per_output_token",
        float(row["energy_J_per_output_token"]),
        j_per_tok,
        key,
    )
    yield Case(
        "mlenergy_v3", "power_total", float(row["power_W_total"]), cost.power_w * dep.num_gpus, key
    )


SOURCES = {
    "argonne_llm_inference_bench.csv": _argonne,
    "trtllm_v0.9.0_static_batch.csv": _trt09,
    "mlenergy_leaderboard_v3_h100.csv": _mlenergy,
}


def run(directory: Path) -> tuple[list[Case], Counter[str]]:
    cases: list[Case] = []
    skipped: Counter[str] = Counter()
    for filename, fn in SOURCES.items():
        with (directory / filename).open(newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    cases.extend(fn(row))
                except SkipRowError as why:
                    skipped[f"{filename}: {why}"] += 1
    return cases, skipped


def summarize(cases: list[Case]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for c in cases:
        groups[(c.source, c.metric)].append(c)
    out = []
    for (source, metric), cs in sorted(groups.items()):
        errors = [c.error for c in cs]
        out.append(
            {
                "source": source,
                "metric": metric,
                "rows": len(cs),
                "mdape_pct": round(100 * statistics.median(abs(e) for e in errors), 1),
                "median_signed_pct": round(100 * statistics.median(errors), 1),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--validation-dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--rows", action="store_true", help="print every row's error")
    parser.add_argument(
        "--efficiency",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a cost-model efficiency parameter (what-if)",
    )
    args = parser.parse_args(argv)
    if not args.validation_dir.is_dir():
        print(f"validation dir not found: {args.validation_dir}", file=sys.stderr)
        return 2
    overrides = {k: float(v) for k, _, v in (item.partition("=") for item in args.efficiency)}
    EFFICIENCY[0] = DEFAULT_EFFICIENCY.with_overrides(overrides)
    cases, skipped = run(args.validation_dir)
    table = summarize(cases)
    if args.rows:
        for c in sorted(cases, key=lambda c: (c.source, c.metric, c.error)):
            print(f"{c.source:24} {c.metric:24} {100 * c.error:+7.1f}%  {c.row}")
    print(f"{'source':24} {'metric':24} {'rows':>5} {'MdAPE':>7} {'bias':>7}")
    for r in table:
        print(
            f"{r['source']:24} {r['metric']:24} {r['rows']:5d} {r['mdape_pct']:6.1f}% "
            f"{r['median_signed_pct']:+6.1f}%"
        )
    print(f"skipped rows: {sum(skipped.values())}")
    for reason, n in skipped.most_common():
        print(f"  {n:5d}  {reason}")
    print(
        json.dumps({"benchmark": "validate_estimator", "metrics": table, "skipped": dict(skipped)})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
