"""ML.ENERGY Leaderboard v3 rows (vLLM 0.11) -> `Row`s priced as a steady state
(calibrate/sources.py maps the other sources).

A step decodes `avg_batch_size` sequences and prefills the requests that join as others finish,
batch/OSL per step on average (continuous batching; every request is queued at the start, so the
batch stays full). Output tokens/s (batch / mean step), J/output token and power come from that
mean step. The median ITL is the step with the median prefill: joins per step are Poisson with mean
batch/OSL (finishes of independent requests) and prompts are taken as exponential (heavy-tailed
chat prompts: most short, a few long), so the median step's prefill is the median of that compound
sum (`compound_poisson_exp_median`): 0 below batch/OSL = ln 2, 35 tokens at 0.77 and 330-token
prompts, not a whole mean prompt. The decoding sequences' mean context is length-biased
(`inflight_context_tokens`): chat and code outputs are taken as exponential (CV 1), so the tokens
generated so far average the mean output, reasoning outputs as less spread (CV 0.5, inferred from
the ITL-vs-batch slopes: TASK_OUTPUT_CV), bounded by what the KV cache holds for that batch. Input
lengths are not published: ISL is assumed per task (TASK_ISL). Parallelism is read from the
benchmark's own launch configs (github:ml-energy/benchmark@c1d6557,
configs/vllm/<task>/<model>/H100/monolithic.config.yaml and mlenergy/benchmark/llm/benchmark.py):
every H100 run passes `--tensor-parallel-size <gpus>`, and MoE models add `enable-expert-parallel`,
so the rows the leaderboard labels tp=1/ep=N run tensor-parallel attention with experts spread over
the N GPUs (no data parallelism; MoE outputs combined by the TP all-reduce). gpt-oss weights are
mxfp4; the KV cache is 16-bit (unreported; vLLM's `--kv-cache-dtype auto` is the activation dtype,
also for the FP8 checkpoints). B200 rows (benchmarks/data/mlenergy_leaderboard_v3_b200.csv) are
mapped the same way (their launch configs are the H100 ones) on the B200 and named
`mlenergy_v3_b200`: a GPU other than H100 is its own source, held out of the power fit (the
transfer check).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping

from tokenprobe.calibrate.observations import (
    MAX_COUNT,
    Row,
    SkipRowError,
    engine_name,
    float_field,
    gpu_name,
    int_field,
    measured_fields,
    row_deployment,
    run_key,
)
from tokenprobe.cost import BatchShape, Deployment, StepCost, max_context_tokens, step_cost
from tokenprobe.sim import SchedulerConfig
from tokenprobe.units import MILLI

MLENERGY_SOURCE = "mlenergy_v3"
MLENERGY_FIELDS = (
    ("itl_median", "itl_ms_median", MILLI),
    ("output_throughput", "output_tok_s", 1.0),
    ("energy_per_output_token", "energy_J_per_output_token", 1.0),
    ("power_total", "power_W_total", 1.0),
)
# ML.ENERGY v3 tasks: assumed mean prompt tokens (the leaderboard publishes output lengths only).
# lm-arena-chat: 330, set by KV capacity, not by fitting. Nine chat runs are KV-bound (steady
# batch under max_num_seqs), so each sequence holds about max_context_tokens(batch) of context:
# with length-biased in-flight outputs (CV 1, `inflight_context_tokens`) that is ISL + OSL, and
# capacity − OSL gives ISL = 198 (Llama-3.1-70B, 898 seqs), 199 (Qwen3-8B), 258 (Llama-3.1-8B),
# 268 (Llama-3.3-70B), 330 (Qwen3-32B TP2), 537 (Llama-4-Scout), 594 (Qwen3-32B), 677
# (Qwen3-235B), 775 (Qwen3-30B-A3B): median 330. (Session 2 took 400 from the 70B run alone
# with OSL/2 in flight.) The prompts are LMArena conversations whose later turns carry the
# earlier ones (ml-energy/benchmark datasets.py). sourcegraph-fim: 1450 by the same argument
# from its one KV-bound run (Qwen3-Coder-30B-A3B on one H100, 88.9 sequences under
# max_num_seqs 96: 1,698 tokens of KV room each − 252 mean output), not the 2000 first guessed.
# gpqa (one question + four choices, 300) keeps the first assumption: its KV-bound runs are
# bound by their long reasoning outputs, which leave nothing to infer the prompt from.
TASK_ISL = {"lm-arena-chat": 330, "gpqa": 300, "sourcegraph-fim": 1450}
# Coefficient of variation of output lengths (the one published moment is the mean). Chat and
# code: exponential (CV 1), right-skewed natural lengths. Reasoning (gpqa): 0.5, inferred, not
# fitted, from how median ITL grows with batch. Each added sequence costs its context's KV read;
# the dense Qwen3 models ran both tasks on the same GPUs, and gpqa's slope exceeds chat's by 0.20
# ms (8B), 0.19 ms (14B) and 0.24 ms (32B, 2 GPUs) a sequence (ITL at batch 8 vs 32). Even read
# at the HBM peak, that is 4.5k, 4.0k and 6.1k tokens more than chat's ISL + OSL, so the tokens
# generated so far are at most 0.66 x (8B, 14B) and 0.95 x (32B) the mean output, where CV 1
# says 1.0 x: reasoning lengths spread less (CV <= 0.57 from the first two). Length-biased, a
# sequence holds OSL (1 + CV²)/2 generated tokens: 0.625 x OSL at CV 0.5.
OUTPUT_LENGTH_CV = 1.0
TASK_OUTPUT_CV = {
    "lm-arena-chat": OUTPUT_LENGTH_CV,
    "gpqa": 0.5,
    "sourcegraph-fim": OUTPUT_LENGTH_CV,
}
# Bounds of an ML.ENERGY steady state this maps (the table's largest batch is 2047, joins per
# step below 1): the median step's prefill sums over joins, so 10^6 joins would take minutes.
MAX_STEADY_BATCH = 2**16
MAX_JOINS = 4096.0
# vLLM's default, which ML.ENERGY's configs keep (the simulator's SchedulerConfig default)
VLLM_GPU_MEMORY_UTILIZATION = SchedulerConfig().gpu_memory_utilization


def poisson_median(mean: float) -> int:
    """Median of a Poisson distribution with this mean: the smallest k with P(X <= k) >= 1/2."""
    k, p = 0, math.exp(-mean)
    cdf = p
    while cdf < 0.5:
        k += 1
        p *= mean / k
        cdf += p
    return k


def compound_poisson_exp_median(rate: float, mean_size: float) -> float:
    """Median of S = X_1 + ... + X_N, N ~ Poisson(rate), X_i ~ Exponential(mean_size).

    Given N = k >= 1, S is Erlang(k, mean_size), whose CDF is 1 − Σ_{n<k} e^(−x) x^n / n! at
    x = s / mean_size. P(S = 0) = e^(−rate), so the median is 0 once that reaches 1/2; otherwise
    bisect the mixture CDF (monotone in s) for 1/2.
    """
    if rate <= 0 or mean_size <= 0 or math.exp(-rate) >= 0.5:
        return 0.0
    kmax = poisson_median(rate) + 12 + int(6 * math.sqrt(rate))
    weights = [math.exp(-rate)]
    for k in range(1, kmax + 1):
        weights.append(weights[-1] * rate / k)

    def cdf(s: float) -> float:
        x = s / mean_size
        total, term, tail = weights[0], math.exp(-x), 0.0  # tail: Σ_{n<k} e^-x x^n/n!
        for k in range(1, kmax + 1):
            tail += term
            term *= x / k
            total += weights[k] * (1.0 - tail)
        return total

    lo, hi = 0.0, mean_size * (kmax + 1)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < 0.5 else (lo, mid)
    return hi


def inflight_context_tokens(
    dep: Deployment, batch: float, isl: float, osl: float, cv: float = OUTPUT_LENGTH_CV
) -> float:
    """Mean context of a sequence in a full continuous batch (module docstring).

    A request of output length L stays L steps in the batch, so the batch samples requests in
    proportion to L and the tokens generated so far average E[L²] / (2 E[L]) = osl (1 + CV²) / 2,
    not osl / 2; `cv` is the task's (TASK_OUTPUT_CV). No batch holds more than the KV cache: at
    vLLM's default gpu_memory_utilization, `batch` sequences hold at most `max_context_tokens` each
    (the long-reasoning runs are KV-bound).
    """
    generated = osl * (1 + cv**2) / 2
    return min(isl + generated, max_context_tokens(dep, batch, VLLM_GPU_MEMORY_UTILIZATION))


def steady_state(
    dep: Deployment, batch: float, isl: float, osl: float, cv: float = OUTPUT_LENGTH_CV
) -> dict[str, float]:
    """ML.ENERGY's steady state (see module docstring): the mean step prices energy and power,
    the median step the median ITL."""
    ctx = round(inflight_context_tokens(dep, batch, isl, osl, cv))
    joins = batch / osl  # requests finishing, and so joining, per step

    def step(prefill: int, seqs: int) -> StepCost:
        return step_cost(
            dep,
            BatchShape(
                prefill_tokens=prefill,
                # causal pairs: exponential prompts give E[L²]/2 = isl² a prompt, so isl per
                # prompt token; a prefill shorter than two prompts is taken as one (P²/2)
                prefill_attn_pairs=prefill * min(isl, prefill / 2) if prefill else 0,
                prefill_seqs=seqs if prefill else 0,
                decode_seqs=round(batch),
                decode_context_tokens=round(batch) * ctx,
            ),
        )

    mean = step(round(joins * isl), math.ceil(joins))
    median_prefill = round(compound_poisson_exp_median(joins, isl))
    median = step(median_prefill, max(1, poisson_median(joins)))
    return {
        "itl_median": median.time_s,
        "output_throughput": batch / mean.time_s,
        "energy_per_output_token": mean.energy_j / batch,
        "power_total": mean.power_w * dep.num_gpus,
    }


def _task(row: Mapping[str, str]) -> str:
    for task in TASK_ISL:
        if f"task={task}" in row.get("notes", "") or task in row.get("source_ref", ""):
            return task
    raise SkipRowError("unknown ML.ENERGY task")


def mlenergy_rows(row: Mapping[str, str]) -> Iterator[Row]:
    gpus, tp, ep = int_field(row, "gpu_count"), int_field(row, "tp", 1), int_field(row, "ep", 1)
    if int_field(row, "dp", 1) > 1:
        raise SkipRowError("data-parallel replicas")
    model = row["model_hf_id"]
    # vLLM's --kv-cache-dtype auto keeps a 16-bit cache under FP8 checkpoints
    kv = row.get("kv_cache_precision") or "bf16"
    row = {**row, "tp": str(gpus), "pp": "1", "kv_cache_precision": kv}
    # the launch configs (module docstring): TP over all GPUs, experts spread when ep > 1
    gpu = gpu_name(row["gpu"], "mlenergy")
    dep = row_deployment(model, gpu, row, expert_parallel=ep > 1 and tp == 1)
    batch = float_field(row, "avg_batch_size")
    osl = float_field(row, "osl_mean")
    if batch is None or osl is None:
        raise SkipRowError("no avg_batch_size or osl_mean")
    if not (1 <= osl <= MAX_COUNT and batch <= MAX_STEADY_BATCH and batch / osl <= MAX_JOINS):
        raise SkipRowError(f"avg_batch_size={batch:g}, osl_mean={osl:g}: not a steady state")
    task = _task(row)
    isl = float(TASK_ISL[task])
    measured = measured_fields(row, MLENERGY_FIELDS)
    # H100 rows are the fitted table; another GPU's rows are its own source (MLENERGY_SOURCE)
    source = MLENERGY_SOURCE if gpu == "h100-sxm" else f"{MLENERGY_SOURCE}_{gpu}"
    engine = engine_name(row["engine"], row.get("engine_version", ""))
    cv = TASK_OUTPUT_CV[task]
    predict = functools.partial(steady_state, batch=batch, isl=isl, osl=osl, cv=cv)
    label = f"{row['model']} {gpus}gpu B{batch:.0f}"
    yield Row(source, run_key(source, engine, model, dep), engine, label, dep, measured, predict)
