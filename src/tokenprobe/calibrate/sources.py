"""Validation-schema CSV rows -> `Row`s (one copy for `calibrate` and benchmarks/validate.py).

A CSV in the common schema of shared/validation (see its README) is read row by row; each usable
row becomes a `Row`: the deployment it ran on, what was measured (metric -> SI value) and a
function that predicts the same metrics from a deployment (whose `efficiency` and `power` are the
parameters being fitted). Rows that cannot be run are counted by reason, never guessed.

Mappings and assumptions (stated, not fitted):
- Argonne static batches: input = output = L, batch B; e2e = TTFT + (L − 1)·TPOT, total tok/s =
  B·2L/e2e. Their A100 is the 40 GB SXM part (ALCF Polaris); an H100 of unstated variant is taken
  as SXM.
- TensorRT-LLM v0.9 static batches: throughput per GPU = B·OSL / e2e / GPUs; FP8 rows use an fp8
  KV cache (the doc's config); the A100 of unstated memory is taken as SXM 80 GB.
- ML.ENERGY v3 (vLLM 0.11, steady state): calibrate/mlenergy.py.
- `tokenprobe profile` rows (source_id `tokenprobe_profile`): one forward pass each, a prefill of
  `batch_size` x `isl` tokens (`ttft_ms_mean` = its GPU time) or a decode step of `batch_size`
  sequences at context `isl` (`itl_ms_mean`); no host stages, since the profiler times the GPU.
- TensorRT-LLM v0.14 max-throughput rows (trtllm-bench: every request queued at t = 0, in-flight
  batching): the serving simulator runs the same offline workload (fixed ISL/OSL) with
  in-flight batching and the doc's own request count (1000-30000: all requests have the same
  lengths, so they run in waves of as many as the KV cache holds, and 1500 requests at 821 a
  wave are two near-full waves where 1000 would be one full and one of 179), KV memory
  fraction 0.95 (the doc's `kv_cache_free_gpu_mem_fraction`), up to 2048 sequences and 8192
  tokens per step (trtllm-bench 0.14 defaults as we read them; stated, not fitted), admitting a
  request only when KV for its whole length is free (the doc's sample output: "Scheduling
  Policy: Guaranteed No Evict"). Output tokens/s summed over GPUs.

Engine names and eras: observations.engine_name.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tokenprobe.calibrate.inferencemax import inferencemax_rows
from tokenprobe.calibrate.mlenergy import mlenergy_rows
from tokenprobe.calibrate.observations import (
    LoadResult,
    Row,
    SkipRowError,
    engine_name,
    float_field,
    gpu_name,
    int_field,
    measured_fields,
    require_kv_room,
    row_deployment,
    run_key,
)
from tokenprobe.calibrate.serving import serving_rows
from tokenprobe.calibrate.tokenpowerbench import tokenpowerbench_rows
from tokenprobe.cost import (
    BatchShape,
    Deployment,
    Workload,
    estimate_deployment,
    step_cost,
)
from tokenprobe.errors import SchemaError, TokenprobeError
from tokenprobe.files import read_text
from tokenprobe.model import ModelSpec, get_model, uniform_gqa
from tokenprobe.sim import TRTLLM_SERVE, SchedulerConfig, simulate
from tokenprobe.units import MILLI

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
    "GPT-J 6B": "gpt-j-6b",
    "Falcon 180B": "falcon-180b",
}
SIM_MAX_REQUESTS = 30000  # the doc's largest request count
TRT_DEFAULT_REQUESTS = 1000  # a v0.14 row that states no count (the doc's smallest)
# trtllm-bench 0.14 with the doc's settings: its run prints "Scheduling Policy: Guaranteed No
# Evict" (TRTLLM_SERVE's policy, KV a fraction of the memory free after loading)
TRT_BENCH_SCHEDULER = replace(
    TRTLLM_SERVE,
    gpu_memory_utilization=0.95,  # the perf-overview doc's kv_cache_free_gpu_mem_fraction
    prefix_caching=False,  # no block reuse in 0.14's defaults
)
# ------------------------------------------------------------------------------ predictors


def _static_batch(dep: Deployment, isl: int, osl: int, batch: int) -> dict[str, float]:
    """A static batch as `tokenprobe estimate` prices it."""
    est = estimate_deployment(dep, Workload(isl, osl, batch), find_compute_bound=False)
    decode_j = est.decode.energy_j if est.decode else 0.0
    return {
        "ttft": est.ttft_s,
        "total_throughput": batch * (isl + osl) / est.e2e_s,
        "throughput_per_gpu": batch * osl / est.e2e_s / dep.num_gpus,
        "power_per_gpu": (est.prefill.energy_j + decode_j) / est.e2e_s / dep.num_gpus,
        "batch_latency": est.e2e_s,
    }


def _offline_output_tokens_per_s(
    dep: Deployment, isl: int, osl: int, requests: int, config: SchedulerConfig
) -> float:
    """Output tokens/s of an offline run (every request at t = 0) through the simulator, at
    most SIM_MAX_REQUESTS of them, on the benchmark's scheduler settings."""
    result = simulate(
        deployment=dep,
        input_tokens=isl,
        output_tokens=osl,
        offline=True,
        num_requests=min(requests, SIM_MAX_REQUESTS),
        config=config,
        trace_requests=0,
    )
    return float(result.summary()["output_tokens_per_s"])


def _max_throughput(dep: Deployment, isl: int, osl: int, requests: int) -> dict[str, float]:
    """trtllm-bench max throughput: an offline batch through the simulator (module docstring)."""
    out_tok_s = _offline_output_tokens_per_s(dep, isl, osl, requests, TRT_BENCH_SCHEDULER)
    return {"output_throughput": out_tok_s}


def _profile_step(dep: Deployment, kind: str, batch: int, tokens: int) -> dict[str, float]:
    """One forward pass as the profiler timed it: prefill of batch x tokens, or a decode step."""
    if kind == "prefill":
        cost = step_cost(dep, BatchShape.prefill(tokens, batch))
        return {"prefill_s": cost.time_s, "power_per_gpu": cost.power_w}
    cost = step_cost(dep, BatchShape.decode(batch, tokens))
    return {
        "decode_step_s": cost.time_s,
        "power_per_gpu": cost.power_w,
        "energy_per_output_token": cost.energy_j / batch,
    }


# ------------------------------------------------------------------------------ row mappers


def _served(model: str, engine: str) -> str | ModelSpec:
    """The model as the engine runs it: vLLM of 2024 (the Argonne runs: 0.5.3 and unpinned
    2024 releases) serves DeciLM's variable GQA at its widest layer's KV heads on every layer
    (vllm/model_executor/models/decilm.py, model.uniform_gqa); every other model as published."""
    if engine != "vllm-2024":
        return model
    try:
        spec = get_model(model)
    except TokenprobeError:
        return model  # row_deployment names the problem
    return uniform_gqa(spec) if spec.kv_heads_per_layer else model


def _argonne(row: Mapping[str, str]) -> Iterator[Row]:
    model = row["model_hf_id"]
    if row.get("ep") not in ("", "1", None):
        raise SkipRowError("expert-parallel row (TRT-LLM EP on A100) not modelled as such")
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    dep = row_deployment(_served(model, engine), gpu_name(row["gpu"], "argonne"), row)
    batch, isl, osl = int_field(row, "batch_size"), int_field(row, "isl"), int_field(row, "osl")
    sid = row["source_id"].removeprefix("argonne_llm_inference_bench_")
    source = f"argonne_{sid}"
    if sid == "ttft":
        measured = measured_fields(row, [("ttft", "ttft_ms_mean", MILLI)])
    else:
        fields = [("total_throughput", "total_tok_s", 1.0)]
        if sid == "power":
            fields.append(("power_per_gpu", "power_W_total", 1.0))
        measured = measured_fields(row, fields)
    if not measured:
        raise SkipRowError("no metric")
    label = f"{row['engine']} {row['model']} {dep.gpu.name} tp{row['tp']} B{batch} L{isl}"
    yield Row(
        source,
        run_key(source, engine, model, dep),
        engine,
        label,
        dep,
        measured,
        functools.partial(_static_batch, isl=isl, osl=osl, batch=batch),
    )


def _trt_model(row: Mapping[str, str]) -> tuple[str, Deployment]:
    """The catalog model of a TensorRT-LLM perf-overview row and its deployment."""
    model = TRT_MODELS.get(row["model"])
    if model is None:
        raise SkipRowError(f"model not in catalog: {row['model']}")
    return model, row_deployment(model, gpu_name(row["gpu"], "trt"), row)


def _trt09(row: Mapping[str, str]) -> Iterator[Row]:
    model, dep = _trt_model(row)
    batch, isl, osl = int_field(row, "batch_size"), int_field(row, "isl"), int_field(row, "osl")
    measured = measured_fields(
        row, [("ttft", "ttft_ms_mean", MILLI), ("throughput_per_gpu", "output_tok_s_per_gpu", 1.0)]
    )
    if not measured:
        raise SkipRowError("no metric")
    source = "trtllm_v0.9"
    label = f"{row['model']} {dep.gpu.name} tp{row['tp']} B{batch} {isl}/{osl}"
    yield Row(
        source,
        run_key(source, "tensorrt-llm", model, dep),
        "tensorrt-llm",
        label,
        dep,
        measured,
        functools.partial(_static_batch, isl=isl, osl=osl, batch=batch),
    )


def _profile(row: Mapping[str, str]) -> Iterator[Row]:
    model = row["model_hf_id"] or row["model"]
    dep = row_deployment(model, row["gpu"], row)
    batch, tokens = int_field(row, "batch_size"), int_field(row, "isl")
    kind = row["workload_type"]
    measured: dict[str, float] = {}
    if kind == "prefill_step":
        ms = float_field(row, "ttft_ms_mean")
        if ms:
            measured["prefill_s"] = ms * MILLI
    elif kind == "decode_step":
        ms = float_field(row, "itl_ms_mean")
        if ms:
            measured["decode_step_s"] = ms * MILLI
        energy = float_field(row, "energy_J_per_output_token")
        if energy:
            measured["energy_per_output_token"] = energy
    else:
        raise SkipRowError(f"profile workload_type {kind!r} is not prefill_step/decode_step")
    power = float_field(row, "power_W_total")
    if power:
        measured["power_per_gpu"] = power / dep.num_gpus
    if not measured:
        raise SkipRowError("no metric")
    source = "tokenprobe_profile"
    engine = engine_name(row.get("engine", "pytorch"), row.get("engine_version", ""))
    step = "prefill" if kind == "prefill_step" else "decode"
    # each decode batch size is a series over contexts; each prefill length its own timing loop
    series = f"decode/B{batch}" if step == "decode" else f"prefill/L{tokens}"
    yield Row(
        source,
        f"{run_key(source, engine, model, dep)}/{series}",
        engine,
        f"{model} {step} B{batch} L{tokens}",
        dep,
        measured,
        functools.partial(_profile_step, kind=step, batch=batch, tokens=tokens),
    )


def _trt014(row: Mapping[str, str]) -> Iterator[Row]:
    model, dep = _trt_model(row)
    isl, osl = int_field(row, "isl"), int_field(row, "osl")
    require_kv_room(dep, TRT_BENCH_SCHEDULER, isl + osl)
    tput = float_field(row, "output_tok_s")
    if not tput:
        raise SkipRowError("no output_tok_s")
    source = "trtllm_v0.14"
    requests = int_field(row, "num_requests", TRT_DEFAULT_REQUESTS)
    predict = functools.partial(_max_throughput, isl=isl, osl=osl, requests=requests)
    label = f"{row['model']} {dep.gpu.name} {row['weight_precision']} tp{row['tp']} {isl}/{osl}"
    key = run_key(source, "tensorrt-llm", model, dep)
    yield Row(source, key, "tensorrt-llm", label, dep, {"output_throughput": tput}, predict, True)


AMD_MODELS = {
    "amd/Llama-3.1-70B-Instruct-FP8-KV": "llama-3.1-70b",
    "amd/Llama-3.1-405B-Instruct-FP8-KV": "llama-3.1-405b",
    "Llama 3.1 405B FP8": "llama-3.1-405b",  # OCI's blog names no checkpoint
}
AMD_GPU = "mi300x"
AMD_BATCHED_TOKENS = 131072  # the doc's --max-num-batched-tokens


def _offline_vllm(
    dep: Deployment, isl: int, osl: int, requests: int, config: SchedulerConfig
) -> dict[str, float]:
    """An offline `benchmark_throughput.py` run through the simulator: total tokens/s."""
    out_tok_s = _offline_output_tokens_per_s(dep, isl, osl, requests, config)
    return {"total_throughput": out_tok_s * (isl + osl) / osl}


def _amd_rocm(row: Mapping[str, str]) -> Iterator[Row]:
    """AMD's vLLM-for-ROCm MI300X tables and OCI's 405B batches (module docstring)."""
    model = AMD_MODELS.get(row["model_hf_id"] or row["model"])
    if model is None:
        raise SkipRowError(f"model not in catalog: {row['model_hf_id'] or row['model']}")
    dep = row_deployment(model, AMD_GPU, row)
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    version = row.get("engine_version", "").split(" ")[0]
    oci = row["source_id"].startswith("oci_")
    source = "oci_vllm_mi300x" if oci else f"amd_rocm_vllm_{version}"
    version = "?" if oci else version
    isl, osl = int_field(row, "isl"), int_field(row, "osl")
    notes = row.get("notes", "")
    name = row["model"].removesuffix("-Instruct-FP8-KV").replace(" ", "-")
    if row["workload_type"].startswith("offline_static_batch"):
        batch = int_field(row, "batch_size")
        measured = measured_fields(row, [("batch_latency", "e2e_latency_ms_mean", MILLI)])
        label = f"{name} mi300x tp{dep.tp} B{batch} {isl}/{osl} v{version}"
        predict = functools.partial(_static_batch, isl=isl, osl=osl, batch=batch)
        key = f"{run_key(source, engine, model, dep)}/latency"
        yield Row(source, key, engine, label, dep, measured, predict)
        return
    seqs = int_field(row, "max_num_seqs")
    config = SchedulerConfig(
        max_num_seqs=seqs,
        max_num_batched_tokens=max(AMD_BATCHED_TOKENS, seqs),
        chunked_prefill="--enable-chunked-prefill False" not in notes,
        gpu_memory_utilization=0.9,
    )
    require_kv_room(dep, config, isl + osl)
    measured = measured_fields(row, [("total_throughput", "total_tok_s", 1.0)])
    requests = int_field(row, "num_requests")
    label = f"{name} mi300x tp{dep.tp} offline {isl}/{osl} x{requests} v{version}"
    predict = functools.partial(_offline_vllm, isl=isl, osl=osl, requests=requests, config=config)
    key = f"{run_key(source, engine, model, dep)}/throughput"
    yield Row(source, key, engine, label, dep, measured, predict, simulated=True)


MAPPERS: dict[str, Callable[[Mapping[str, str]], Iterator[Row]]] = {
    "argonne_llm_inference_bench": _argonne,
    "trtllm_v0.9": _trt09,
    "mlenergy_leaderboard_v3": mlenergy_rows,
    "tokenprobe_profile": _profile,
    "trtllm_v0.14": _trt014,
    # online-serving benchmarks (benchmarks/data): the simulator replays the load (serving.py)
    "gpustack_performance_lab": serving_rows,
    "datacrunch_h200_sglang": serving_rows,
    "sglang_benchmark_vllm_060": serving_rows,
    # DeepSeek-V3/R1 of early 2025: SGLang 0.4's --enable-dp-attention rows run attention-DP
    "dstack_deepseek_r1": functools.partial(serving_rows, dp_attention=True),
    "sglang_dsv3_h200_v041": functools.partial(serving_rows, dp_attention=True),
    "vllm_issue_12568": serving_rows,
    "amd_rocm_vllm_mi300x": _amd_rocm,
    "oci_mi300x_vllm": _amd_rocm,
    # a second energy-per-token source: TokenPowerBench on GH200 (calibrate/tokenpowerbench.py)
    "tokenpowerbench": tokenpowerbench_rows,
    # InferenceMAX nightly single-node runs, held out of every fit (calibrate/inferencemax.py)
    "inferencemax": inferencemax_rows,
}
"""source_id prefix -> mapper. A new source is one entry here."""

REQUIRED_COLUMNS = ("source_id", "engine", "model", "gpu")


def _mapper(source_id: str) -> Callable[[Mapping[str, str]], Iterator[Row]] | None:
    for prefix, fn in MAPPERS.items():
        if source_id.startswith(prefix):
            return fn
    return None


LOAD_COLUMNS = ("concurrency", "batch_size", "max_num_seqs", "request_rate_qps", "avg_batch_size")
"""The columns that say what load a row was run at, in order of preference."""


def offered_load(line: Mapping[str, str]) -> float:
    """The load a row was run at (its concurrency, batch, batch cap or request rate), 0 where
    the table states none: the order in which a user would run a series (few_runs)."""
    for column in LOAD_COLUMNS:
        try:
            value = float_field(line, column)
        except (SkipRowError, ValueError):  # "inf" (offline) or not a number: not a load
            continue
        if value is not None and math.isfinite(value):
            return value
    return 0.0


def load_rows(lines: Sequence[Mapping[str, str]], origin: str = "rows") -> LoadResult:
    """Map parsed CSV rows; an unknown source or an unusable row is counted in `skipped`."""
    result = LoadResult()
    for line in lines:
        sid = line.get("source_id") or ""
        fn = _mapper(sid)
        if fn is None:
            result.skipped[f"{origin}: source {sid!r} not mapped"] += 1
            continue
        try:
            load = offered_load(line)
            result.rows.extend(replace(row, load=load) for row in fn(line))
        except SkipRowError as why:
            result.skipped[f"{origin}: {why}"] += 1
        except (KeyError, ValueError, ArithmeticError) as exc:  # ConfigError is a ValueError
            result.skipped[f"{origin}: malformed row ({type(exc).__name__}: {exc})"] += 1
    return result


def load_csv(path: str | Path) -> LoadResult:
    """Rows of one CSV in the shared/validation schema; SchemaError if it is not one (or not a
    readable UTF-8 text file, or not CSV). A row with a bad cell (not a number, NaN, inf, out of
    range: observations.int_field/float_field) is skipped and counted, as the rows of a source
    tokenprobe does not map are."""
    p = Path(path)
    reader = csv.DictReader(io.StringIO(read_text(p), newline=""))
    try:
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SchemaError(str(p), f"not in the validation schema: no {', '.join(missing)}")
        # DictReader fills short rows with None and keys surplus cells by None: both made ""
        lines = [{k: v if isinstance(v, str) else "" for k, v in r.items() if k} for r in reader]
    except csv.Error as exc:  # e.g. a cell over csv's 128 KiB field limit
        raise SchemaError(f"{p}:{reader.line_num}", f"not valid CSV: {exc}") from None
    return load_rows(lines, p.name)
