"""How each server turns its memory fraction into KV room (cost/memory.py `MEMORY_RULES`)."""

from __future__ import annotations

import pytest

from tokenprobe.cost import MemoryBudget, make_deployment, memory_report
from tokenprobe.cost.memory import SGLANG_RULE, TRTLLM_RULE, activation_bytes_per_gpu
from tokenprobe.errors import ConfigError
from tokenprobe.sim import SchedulerConfig
from tokenprobe.sim.api import capacity_blocks


def test_each_rule_follows_its_engines_formula() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    hbm = dep.gpu.hbm_bytes
    vllm = memory_report(dep, 1, MemoryBudget(gpu_memory_utilization=0.9))
    weights, acts, runtime = (
        vllm.weights_bytes_per_gpu,
        vllm.activation_bytes_per_gpu,
        vllm.runtime_bytes_per_gpu,
    )
    # vLLM: the fraction of HBM, less weights, the profile run's activations and the runtime
    assert vllm.kv_free_bytes_per_gpu == pytest.approx(0.9 * hbm - weights - acts - runtime)
    # SGLang: mem_fraction_static of HBM holds weights + KV; activations live in the rest
    sgl = memory_report(dep, 1, MemoryBudget(gpu_memory_utilization=0.9, rule=SGLANG_RULE))
    assert sgl.kv_free_bytes_per_gpu == pytest.approx(0.9 * hbm - weights - runtime)
    # TensorRT-LLM: the fraction of what is free once the engine and its buffers are loaded
    trt = memory_report(dep, 1, MemoryBudget(gpu_memory_utilization=0.9, rule=TRTLLM_RULE))
    assert trt.kv_free_bytes_per_gpu == pytest.approx(0.9 * (hbm - weights - acts - runtime))
    assert vllm.kv_capacity_tokens < sgl.kv_capacity_tokens < trt.kv_capacity_tokens


def test_unknown_memory_rule_is_named() -> None:
    with pytest.raises(ConfigError, match="memory rule"):
        MemoryBudget(rule="tgi")
    with pytest.raises(ConfigError, match="memory_rule"):
        SchedulerConfig(memory_rule="tgi")


def test_the_simulator_sizes_kv_with_its_own_server_limits() -> None:
    """vLLM's profile run uses the server's max_num_batched_tokens and max_num_seqs, so a
    server allowing more of either leaves less room for KV."""
    dep = make_deployment("qwen3-8b", "h100-sxm")
    small = SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192)
    large = SchedulerConfig(max_num_seqs=1024, max_num_batched_tokens=16384)
    lost = activation_bytes_per_gpu(
        dep, MemoryBudget(max_num_seqs=1024, max_num_batched_tokens=16384)
    ) - activation_bytes_per_gpu(dep, MemoryBudget(max_num_seqs=256, max_num_batched_tokens=8192))
    assert lost > 0
    blocks_lost = capacity_blocks(dep, small) - capacity_blocks(dep, large)
    per_block = dep.kv_bytes_per_token_per_gpu * small.block_size
    assert blocks_lost == pytest.approx(lost / per_block, abs=1)
    sgl = SchedulerConfig(max_num_seqs=1024, memory_rule="sglang")
    assert capacity_blocks(dep, sgl) > capacity_blocks(dep, large)
