"""Turn InferenceMAX's nightly result files into the repository's two row schemas.

Source: SemiAnalysis InferenceMAX (github.com/InferenceMAX/InferenceMAX, now
SemiAnalysisAI/InferenceX) runs its benchmark suite nightly in GitHub Actions and uploads each
run's aggregated results as the artifact ``results_bmk`` (``agg_bmk.json``: one object per
served configuration and concurrency).
36 of those artifacts, runs 20218553330 to 21012127808 (December 2025 to January 2026), are stored
unchanged at ``github:gminneci/mantile@1d3c259c926ecce3322c9ceface7e2f00f2de7e6:
reconcile/sources/inferencemax/raw/run_<id>/agg_bmk.json``.

Usage: ``python benchmarks/extract_inferencemax.py RAW_DIR`` where RAW_DIR holds those files as
``run_<id>.json``. It writes ``benchmarks/data/inferencemax_agg.csv`` (single-node, aggregated
serving: the common schema of shared/validation) and
``benchmarks/data/deployments/inferencemax_disagg.csv`` (prefill/decode disaggregated, multi-node:
the deployments schema).

The same configuration is measured on many nights. One row is kept per configuration (hardware,
framework, image, model, precision, lengths, parallelism, concurrency): the latest night's, and
``notes`` gives how many nights measured it and the range of their total throughput, which is the
benchmark's own night-to-night spread. The only transformations are s -> ms and per-GPU -> total
(x the run's GPU count); both are said in ``notes``.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from inferencemax_commands import RANGE_RATIO, num_prompts, serving_command
from repo_paths import DATA_DIR
from tokenprobe.units import MILLI

MS_PER_S = 1.0 / MILLI  # 1000.0 exactly: the CSV's ms cells
OUT = DATA_DIR
REF = (
    "github:gminneci/mantile@1d3c259c926ecce3322c9ceface7e2f00f2de7e6:"
    "reconcile/sources/inferencemax/raw/run_{run}/agg_bmk.json"
)
COMMON = [
    "source_id",
    "source_ref",
    "engine",
    "engine_version",
    "model",
    "model_hf_id",
    "arch",
    "weight_precision",
    "kv_cache_precision",
    "gpu",
    "gpu_count",
    "tp",
    "pp",
    "ep",
    "dp",
    "workload_type",
    "dataset",
    "isl",
    "osl",
    "isl_mean",
    "osl_mean",
    "batch_size",
    "max_num_seqs",
    "avg_batch_size",
    "concurrency",
    "request_rate_qps",
    "num_requests",
    "ttft_ms_mean",
    "ttft_ms_median",
    "ttft_ms_p99",
    "itl_ms_mean",
    "itl_ms_median",
    "itl_ms_p90",
    "itl_ms_p95",
    "itl_ms_p99",
    "tpot_ms_mean",
    "tpot_ms_median",
    "e2e_latency_ms_mean",
    "e2e_latency_ms_median",
    "e2e_latency_ms_p99",
    "req_s",
    "output_tok_s",
    "output_tok_s_per_gpu",
    "total_tok_s",
    "energy_J_per_output_token",
    "energy_J_per_request",
    "power_W_total",
    "power_W_raw_reading",
    "notes",
]
DEPLOY_EXTRA = [
    "kind",
    "phase",
    "prefill_workers",
    "decode_workers",
    "prefill_tp",
    "decode_tp",
    "nodes",
    "gpus_per_node",
    "attention_dp",
    "spec_method",
    "spec_k",
    "spec_acceptance_length",
    "spec_acceptance",
    "input_tok_s_per_node",
    "output_tok_s_per_node",
    "output_tok_s_per_user",
    "in_fit",
]
ENGINES = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "trt": "TensorRT-LLM",
    "atom": "ATOM",
    "dynamo-sglang": "SGLang (NVIDIA Dynamo)",
    "dynamo-trt": "TensorRT-LLM (NVIDIA Dynamo)",
    "sglang-disagg": "SGLang",
}
GPUS = {
    "h100": "H100 SXM",
    "h200": "H200 SXM",
    "b200": "B200",
    "b200-trt": "B200",
    "gb200": "GB200 (NVL72)",
    "mi300x": "MI300X",
    "mi325x": "MI325X",
    "mi355x": "MI355X",
    "mi355x-amd_0": "MI355X",
}
HF_IDS = {"dsr1": "deepseek-ai/DeepSeek-R1-0528", "gptoss": "openai/gpt-oss-120b"}
# InferenceMAX's `precision: fp4` names three checkpoint formats; the checkpoint says which
# (its config's quantization): gpt-oss-120b ships MXFP4 MoE weights (config.json
# quantization_config.quant_method "mxfp4"), NVIDIA's DeepSeek-R1-0528-FP4(-V2) is a TensorRT
# Model Optimizer NVFP4 checkpoint (hf_quant_config.json quant_algo "NVFP4"), AMD's
# DeepSeek-R1-0528-MXFP4-Preview a Quark MXFP4 one (its model card)
CHECKPOINT_FORMATS = {
    "openai/gpt-oss-120b": "mxfp4 MoE weights",
    "nvidia/DeepSeek-R1-0528-FP4-V2": "nvfp4",
    "amd/DeepSeek-R1-0528-MXFP4-Preview": "mxfp4",
}
CONFIG_KEYS = (
    "hw",
    "framework",
    "image",
    "model",
    "precision",
    "spec_decoding",
    "isl",
    "osl",
    "tp",
    "ep",
    "dp_attention",
    "prefill_tp",
    "prefill_ep",
    "prefill_dp_attention",
    "prefill_num_workers",
    "decode_tp",
    "decode_ep",
    "decode_dp_attention",
    "decode_num_workers",
    "conc",
)


def _ms(seconds: float | None) -> float | str:
    return "" if seconds is None else seconds * MS_PER_S


def _hf_id(model: str, prefix: str) -> str:
    """The checkpoint's HF id; a local path (the GB200 runs) falls back to the model family's."""
    return model if "/" in model and not model.startswith("/") else HF_IDS[prefix]


def _version(image: str) -> str:
    return f"{image.rsplit(':', 1)[-1]} (image {image})"


def _gpu_count(row: dict[str, object]) -> int:
    if row.get("disagg"):
        return int(row["num_prefill_gpu"]) + int(row["num_decode_gpu"])  # type: ignore[call-overload]
    return int(row["tp"])  # type: ignore[call-overload]


def _latest(raw_dir: Path) -> list[tuple[dict[str, object], int, float, float]]:
    """One row per configuration: the latest night, with the nights' count and throughput range."""
    seen: dict[tuple[object, ...], list[tuple[int, dict[str, object]]]] = {}
    for path in sorted(raw_dir.glob("run_*.json")):
        run = int(path.stem.removeprefix("run_"))
        for row in json.loads(path.read_text()):
            key = tuple(row.get(k) for k in CONFIG_KEYS)
            seen.setdefault(key, []).append((run, {**row, "_run": run}))
    out = []
    for nights in seen.values():
        nights.sort(key=lambda item: item[0])
        tputs = [float(r["tput_per_gpu"]) for _, r in nights]  # type: ignore[arg-type]
        out.append((nights[-1][1], len(nights), min(tputs), max(tputs)))
    out.sort(key=lambda item: tuple(str(item[0].get(k)) for k in CONFIG_KEYS))
    return out


def _common(row: dict[str, object], nights: int, lo: float, hi: float) -> dict[str, object]:
    gpus = _gpu_count(row)
    prefix = str(row["infmax_model_prefix"])
    precision = str(row["precision"])
    return {
        "source_id": "inferencemax",
        "source_ref": REF.format(run=row["_run"]),
        "engine": ENGINES.get(str(row["framework"]), str(row["framework"])),
        "engine_version": _version(str(row["image"])),
        "model": str(row["model"]).rsplit("/", 1)[-1],
        "model_hf_id": row["model"]
        if "/" in str(row["model"]) and not str(row["model"]).startswith("/")
        else HF_IDS[prefix],
        "arch": "moe",
        "weight_precision": (
            f"{CHECKPOINT_FORMATS[str(row['model'])]} (checkpoint format; InferenceMAX "
            f"precision={precision})"
            if str(row["model"]) in CHECKPOINT_FORMATS
            else precision
        ),
        "gpu": GPUS[str(row["hw"])],
        "gpu_count": gpus,
        "tp": row.get("tp", ""),
        "ep": row.get("ep", ""),
        "dp": "",
        "workload_type": "closed_loop_concurrency (max concurrency = conc, request rate inf)",
        "dataset": (
            "random (InferenceMAX bench_serving --dataset-name random --ignore-eos; "
            "range ratio per the run's config)"
        ),
        "isl": row["isl"],
        "osl": row["osl"],
        "concurrency": row["conc"],
        "request_rate_qps": "inf",
        "ttft_ms_mean": _ms(row.get("mean_ttft")),  # type: ignore[arg-type]
        "ttft_ms_median": _ms(row.get("median_ttft")),  # type: ignore[arg-type]
        "ttft_ms_p99": _ms(row.get("p99_ttft")),  # type: ignore[arg-type]
        "itl_ms_mean": _ms(row.get("mean_itl")),  # type: ignore[arg-type]
        "itl_ms_median": _ms(row.get("median_itl")),  # type: ignore[arg-type]
        "itl_ms_p99": _ms(row.get("p99_itl")),  # type: ignore[arg-type]
        "tpot_ms_mean": _ms(row.get("mean_tpot")),  # type: ignore[arg-type]
        "tpot_ms_median": _ms(row.get("median_tpot")),  # type: ignore[arg-type]
        "e2e_latency_ms_mean": _ms(row.get("mean_e2el")),  # type: ignore[arg-type]
        "e2e_latency_ms_median": _ms(row.get("median_e2el")),  # type: ignore[arg-type]
        "e2e_latency_ms_p99": _ms(row.get("p99_e2el")),  # type: ignore[arg-type]
        "output_tok_s": float(row["output_tput_per_gpu"]) * gpus,  # type: ignore[arg-type]
        "output_tok_s_per_gpu": row["output_tput_per_gpu"],
        "total_tok_s": float(row["tput_per_gpu"]) * gpus,  # type: ignore[arg-type]
        "notes": (
            f"InferenceMAX/InferenceMAX Actions run {row['_run']}, artifact results_bmk; "
            f"framework={row['framework']}; hw={row['hw']}; "
            f"spec_decoding={row.get('spec_decoding')}; "
            f"dp_attention={row.get('dp_attention', row.get('decode_dp_attention'))}; "
            f"output_tok_s and total_tok_s derived = per-GPU figure x {gpus} GPUs "
            "(source: output_tput_per_gpu, tput_per_gpu; "
            "disaggregated rows: output per decode GPU); "
            f"measured on {nights} nights, tput_per_gpu {lo:.1f}..{hi:.1f} (this row: latest night)"
        ),
    }


def _with_serving(out: dict[str, object], row: dict[str, object]) -> dict[str, object]:
    """A single-node row with its serving command, client lengths and prompt count
    (benchmarks/inferencemax_commands.py says where each comes from)."""
    isl, osl, conc = int(row["isl"]), int(row["osl"]), int(row["conc"])  # type: ignore[call-overload]
    prompts, prompts_note = num_prompts(str(row["model"]), str(row["hw"]), osl, conc)
    command, script = serving_command(row)
    served = f"serving command ({script}, with this row's TP/EP/conc/ISL/OSL): {command}; "
    lo_in, lo_out = int(isl * RANGE_RATIO), int(osl * RANGE_RATIO)
    return {
        **out,
        "dataset": (
            "random (InferenceMAX bench_serving --dataset-name random --ignore-eos "
            f"--random-range-ratio {RANGE_RATIO}: input uniform in [{lo_in}, {isl}], "
            f"output uniform in [{lo_out}, {osl}] tokens)"
        ),
        "num_requests": prompts,
        "notes": (
            f"{out['notes']}; {served if command else ''}client: bench_serving "
            f"--random-range-ratio {RANGE_RATIO} --num-prompts {prompts_note}"
        ),
    }


def _deployment(row: dict[str, object], nights: int, lo: float, hi: float) -> dict[str, object]:
    out = _common(row, nights, lo, hi)
    decode_gpus = int(row["num_decode_gpu"])  # type: ignore[call-overload]
    out["output_tok_s"] = float(row["output_tput_per_gpu"]) * decode_gpus  # type: ignore[arg-type]
    out["tp"] = ""
    out["ep"] = row.get("decode_ep", "")
    spec = str(row.get("spec_decoding") or "none")
    out.update(
        {
            "kind": "pd",
            "phase": "serving",
            "prefill_workers": row["prefill_num_workers"],
            "decode_workers": row["decode_num_workers"],
            "prefill_tp": row["prefill_tp"],
            "decode_tp": row["decode_tp"],
            "attention_dp": 1 if str(row.get("decode_dp_attention")) == "true" else 0,
            "spec_method": "" if spec == "none" else spec,
            "in_fit": "no",
        }
    )
    out["notes"] = (
        f"{out['notes']}; prefill: {row['prefill_num_workers']} workers x TP{row['prefill_tp']} "
        f"EP{row['prefill_ep']} dp_attention={row['prefill_dp_attention']} "
        f"({row['num_prefill_gpu']} GPUs); "
        f"decode: {row['decode_num_workers']} workers x TP{row['decode_tp']} EP{row['decode_ep']} "
        f"dp_attention={row['decode_dp_attention']} ({row['num_decode_gpu']} GPUs)"
    )
    return out


def main(raw_dir: Path) -> None:
    rows = _latest(raw_dir)
    agg = [_with_serving(_common(r, n, lo, hi), r) for r, n, lo, hi in rows if not r.get("disagg")]
    dis = [_deployment(r, n, lo, hi) for r, n, lo, hi in rows if r.get("disagg")]
    for path, header, body in (
        (OUT / "inferencemax_agg.csv", COMMON, agg),
        (OUT / "deployments" / "inferencemax_disagg.csv", COMMON + DEPLOY_EXTRA, dis),
    ):
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(body)
        print(f"{path}: {len(body)} rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
