"""Validation-schema rows -> deployments, measurements and predictions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tokenprobe.calibrate import engine_name, load_csv, load_rows, observe
from tokenprobe.calibrate.sources import TRT_BENCH_SCHEDULER
from tokenprobe.errors import SchemaError
from tokenprobe.sim import simulate

ARGONNE = {
    "source_id": "argonne_llm_inference_bench_all_results",
    "engine": "vLLM",
    "engine_version": "not pinned (2024)",
    "model": "Llama-2-7b",
    "model_hf_id": "meta-llama/Llama-2-7b-hf",
    "gpu": "A100",
    "tp": "1",
    "ep": "",
    "weight_precision": "float16",
    "kv_cache_precision": "",
    "batch_size": "16",
    "isl": "1024",
    "osl": "1024",
    "total_tok_s": "1500.0",
}


@pytest.mark.parametrize(
    ("engine", "version", "name"),
    [
        ("vLLM", "0.11.1 (per ML.ENERGY blog)", "vllm"),
        ("vLLM", "not pinned (2024)", "vllm-2024"),
        ("vLLM", "0.5.3.post1 (GH200)", "vllm-2024"),
        # a "v" prefix is read as every release is (cost.engine_release): 0.6 is the 2024 line
        ("vLLM", "v0.6.0", "vllm-2024"),
        ("vLLM", "v0.10.2", "vllm"),
        ("vLLM", "1.0.0", "vllm"),
        ("TensorRT-LLM", "0.14.0", "tensorrt-llm"),
        ("SGLang", "0.4.1", "sglang-2025h1"),  # SGLang 0.4's DeepSeek-era kernels
        ("SGLang", "0.5.3", "sglang"),
    ],
)
def test_engine_and_era_names(engine: str, version: str, name: str) -> None:
    assert engine_name(engine, version) == name


def test_an_argonne_row_is_a_static_batch_on_the_polaris_a100() -> None:
    (row,) = load_rows([ARGONNE]).rows
    assert row.engine == "vllm-2024" and row.source == "argonne_all_results"
    assert row.deployment.gpu.name == "a100-sxm-40gb"
    assert row.deployment.weight_dtype.name == "fp16" and row.deployment.kv_dtype.name == "fp16"
    assert row.measured == {"total_throughput": 1500.0}
    (obs,) = observe([row])
    # 16 x 2048 tokens in a batch that takes seconds on an A100: a few thousand tokens/s
    assert 500 < obs.predicted < 10_000


def test_vllm_2024_serves_decilm_at_its_widest_layers_kv_heads() -> None:
    """vLLM's decilm.py (0.2.5-0.6) loads DeciLM-7B with every layer at max(4) KV heads: an
    fp16 token then holds 2 x 128 x 4 x 32 layers x 2 B = 64 KiB, not the published 67 KV heads'
    34,304 B; a TensorRT-LLM row would keep the published layers."""
    deci = {**ARGONNE, "model": "DeciLM-7B", "model_hf_id": "Deci/DeciLM-7B", "gpu": "GH200"}
    (row,) = load_rows([deci]).rows
    assert row.deployment.kv_bytes_per_token == 2 * 128 * 4 * 32 * 2
    (trt,) = load_rows([{**deci, "engine": "TensorRT-LLM", "engine_version": "0.9"}]).rows
    assert trt.deployment.kv_bytes_per_token == 2 * 128 * 67 * 2


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"model_hf_id": "microsoft/phi-2"}, "not runnable"),
        ({"gpu": "MI250"}, "gpu not mapped"),
        ({"total_tok_s": ""}, "no metric"),
        ({"batch_size": "many"}, "not a number"),
        ({"source_id": "somebody_else"}, "not mapped"),
    ],
)
def test_unusable_rows_are_counted_with_their_reason(change: dict[str, str], reason: str) -> None:
    result = load_rows([{**ARGONNE, **change}])
    assert not result.rows
    assert reason in next(iter(result.skipped))


def test_a_csv_outside_the_schema_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError, match="source_id"):
        load_csv(path)


@pytest.mark.parametrize(("mean", "median"), [(0.0, 0), (0.54, 0), (0.73, 1), (2.86, 3), (9.5, 9)])
def test_poisson_median_by_its_definition(mean: float, median: int) -> None:
    import math

    from tokenprobe.calibrate.mlenergy import poisson_median

    assert poisson_median(mean) == median
    cdf = sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(median + 1))
    below = cdf - math.exp(-mean) * mean**median / math.factorial(median)
    assert cdf >= 0.5 > below


def test_mlenergy_moe_rows_run_tensor_parallel_attention_with_experts_spread() -> None:
    """ML.ENERGY's launch configs pass --tensor-parallel-size N plus enable-expert-parallel
    (github:ml-energy/benchmark configs/vllm/*/H100/monolithic.config.yaml): no attention DP,
    whatever the leaderboard's tp=1/ep=N label says; the KV cache stays 16-bit for FP8
    checkpoints (vLLM's --kv-cache-dtype auto)."""
    line = {
        "source_id": "mlenergy_leaderboard_v3",
        "source_ref": "x__lm-arena-chat.json",
        "engine": "vLLM",
        "engine_version": "0.11.1",
        "model": "Qwen3-235B-A22B-Instruct-2507-FP8",
        "model_hf_id": "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "weight_precision": "fp8",
        "gpu": "H100",
        "gpu_count": "8",
        "tp": "1",
        "ep": "8",
        "avg_batch_size": "64",
        "osl_mean": "800",
        "itl_ms_median": "34.7",
        "notes": "task=lm-arena-chat",
    }
    (row,) = load_rows([line]).rows
    dep = row.deployment
    assert dep.tp == 8 and dep.expert_parallel and not dep.attention_dp
    assert dep.kv_dtype.name == "bf16"


@pytest.mark.parametrize(("rate", "size"), [(0.9, 330.0), (1.46, 330.0), (2.6, 400.0), (6.0, 50.0)])
def test_compound_poisson_exponential_median_agrees_with_a_seeded_monte_carlo(
    rate: float, size: float
) -> None:
    """The median prefill of ML.ENERGY's median step: N ~ Poisson(rate) prompts of
    Exponential(size) tokens each; checked against 200k draws."""
    import numpy as np

    from tokenprobe.calibrate.mlenergy import compound_poisson_exp_median

    rng = np.random.default_rng(7)
    n = rng.poisson(rate, 200_000)
    sums = np.array([rng.exponential(size, k).sum() for k in n])
    assert compound_poisson_exp_median(rate, size) == pytest.approx(np.median(sums), rel=0.02)


def test_compound_median_is_zero_while_most_steps_take_no_prompt() -> None:
    from tokenprobe.calibrate.mlenergy import compound_poisson_exp_median

    assert compound_poisson_exp_median(0.69, 330.0) == 0.0  # e^-0.69 > 1/2
    assert compound_poisson_exp_median(0.70, 330.0) > 0.0
    assert compound_poisson_exp_median(0.0, 330.0) == 0.0


def test_inflight_context_is_length_biased_and_bounded_by_the_kv_cache() -> None:
    """A full continuous batch holds long requests longer: with exponential outputs (CV 1) the
    tokens generated so far average the mean output, not half of it; and no batch holds more
    than its KV cache (gpt-oss-20b's half-windowed layers leave ~1,100 tokens a sequence for
    2,047 sequences on one H100, far below its 2,379-token mean reasoning output)."""
    from tokenprobe.calibrate.mlenergy import OUTPUT_LENGTH_CV, inflight_context_tokens
    from tokenprobe.cost import make_deployment
    from tokenprobe.cost.memory import kv_bytes_per_request_per_gpu, max_context_tokens

    assert OUTPUT_LENGTH_CV == 1.0
    llama = make_deployment("llama-3.1-8b", "h100-sxm")
    assert inflight_context_tokens(llama, 8, 330, 400) == pytest.approx(730)
    gpt = make_deployment("gpt-oss-20b", "h100-sxm", weight_dtype="mxfp4", kv_dtype="bf16")
    cap = max_context_tokens(gpt, 2047)
    assert 900 < cap < 1300
    assert inflight_context_tokens(gpt, 2047, 300, 2379) == cap
    # reasoning outputs spread less (TASK_OUTPUT_CV, inferred from ITL-vs-batch slopes):
    # CV 0.5 holds (1 + 0.25) / 2 of the mean output in flight
    from tokenprobe.calibrate.mlenergy import TASK_OUTPUT_CV

    assert TASK_OUTPUT_CV["gpqa"] == 0.5 and TASK_OUTPUT_CV["lm-arena-chat"] == 1.0
    assert inflight_context_tokens(llama, 8, 300, 8000, 0.5) == pytest.approx(5300)
    # the bound is tight: one more token per sequence overflows the free KV memory
    from tokenprobe.cost.memory import MemoryBudget, memory_report

    free = memory_report(gpt, 1, MemoryBudget(gpu_memory_utilization=0.9)).kv_free_bytes_per_gpu
    assert 2047 * kv_bytes_per_request_per_gpu(gpt, int(cap), 1) <= free
    assert 2047 * kv_bytes_per_request_per_gpu(gpt, int(cap) + 1, 1) > free
    # windowed layers hold their window only: more room than the full-layer token count says
    from tokenprobe.cost import kv_capacity_tokens

    assert cap > 1.5 * kv_capacity_tokens(gpt, 0.9) / 2047


TRT014 = {
    "source_id": "trtllm_v0.14_perf_overview_throughput",
    "engine": "TensorRT-LLM",
    "engine_version": "0.14.0",
    "model": "LLaMA v3.1 8B",
    "gpu": "A100-PCIE-80GB",
    "tp": "1",
    "weight_precision": "FP16",
    "kv_cache_precision": "FP16",
    "isl": "20000",
    "osl": "2000",
    "num_requests": "200",
    "output_tok_s": "300.0",
}


def test_a_trtllm_bench_row_is_simulated_with_no_evict_admission_and_its_request_count() -> None:
    (row,) = load_rows([TRT014]).rows
    assert row.simulated and row.engine == "tensorrt-llm"
    assert row.deployment.gpu.name == "a100-pcie-80gb" and "a100-pcie-80gb" in row.label
    (obs,) = observe([row])
    config = replace(TRT_BENCH_SCHEDULER, capacity_policy="max_utilization")
    thrashing = simulate(
        deployment=row.deployment,
        input_tokens=20000,
        output_tokens=2000,
        offline=True,
        num_requests=200,
        config=config,
        trace_requests=0,
    )
    # on-demand KV admits more 20k-token prompts than fit to the end, then preempts and
    # recomputes them; trtllm-bench's guaranteed-no-evict never does
    assert thrashing.preemptions > 0
    assert obs.predicted > 1.2 * thrashing.summary()["output_tokens_per_s"]
