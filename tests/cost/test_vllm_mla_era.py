"""vLLM's MLA memory by version (cost/vllm_mla_era.py): KV bytes per token, extra weights and the
profile run's fused-MoE caches, each derived by hand from DeepSeek-R1's config (61 layers, 128
heads, hidden 7168, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head 128, 8 of
256 experts of intermediate 2048) at TP 8."""

from __future__ import annotations

import pytest

from tokenprobe.cost import (
    VLLM_FULL_KV_RULE,
    VLLM_MLA_2025H1_RULE,
    VLLM_RULE,
    Deployment,
    MemoryBudget,
    make_deployment,
    memory_report,
    vllm_mla_rule,
)
from tokenprobe.cost.vllm_mla_era import (
    mla_rule_extra_weight_bytes_per_gpu,
    mla_rule_kv_bytes_per_token_per_gpu,
    mla_rule_profile_moe_bytes_per_gpu,
)

R1 = "deepseek-ai/DeepSeek-R1"


def _r1(gpu: str = "h200") -> Deployment:
    return make_deployment(R1, gpu, tp=8, weight_dtype="fp8", kv_dtype="bf16")


@pytest.mark.parametrize(
    ("version", "rule"),
    [
        ("0.6.6", VLLM_FULL_KV_RULE),
        ("0.7.0 (VLLM_USE_V1=1)", VLLM_FULL_KV_RULE),  # vLLM issue 12568: before MLA (0.7.1)
        ("v0.7.1", VLLM_MLA_2025H1_RULE),
        ("0.7.3.dev138+g21f6ca217 (ROCm 6.3)", VLLM_MLA_2025H1_RULE),
        ("0.7.4.dev181+gf35f8e22", VLLM_MLA_2025H1_RULE),
        ("0.8.0", None),  # PRs 14770 and 14842 are in 0.8.0: today's rule
        ("0.9.1rc1", None),
        ("nightly", None),
    ],
)
def test_the_rule_follows_the_version(version: str, rule: str | None) -> None:
    assert vllm_mla_rule(version) == rule


def test_full_kv_before_mla_is_10_7x_the_latent() -> None:
    dep = _r1()
    # 0.7.0: K and V per head, V padded to the 192-wide QK head: 61 x 128/8 x 2 x 192 x 2 B
    full = mla_rule_kv_bytes_per_token_per_gpu(dep, VLLM_FULL_KV_RULE)
    assert full == 61 * 16 * 2 * 192 * 2 == 749_568
    # today's latent, every TP rank holding all of it: 61 x (512 + 64) x 2 B
    assert dep.kv_bytes_per_token_per_gpu == 61 * 576 * 2 == 70_272
    assert full / 70_272 == pytest.approx(10.67, abs=0.01)


def test_cuda_pads_the_latent_to_256_bytes_as_pr_14842_measured() -> None:
    h200, mi300x = _r1("h200"), _r1("mi300x")
    # 1,152 B per token and layer -> 1,280 on NVIDIA; ROCm unpadded
    assert mla_rule_kv_bytes_per_token_per_gpu(h200, VLLM_MLA_2025H1_RULE) == 61 * 1280
    assert mla_rule_kv_bytes_per_token_per_gpu(mi300x, VLLM_MLA_2025H1_RULE) == 61 * 1152
    # vLLM PR #14842's log (DeepSeek-R1 TP 8, V0): 4,739 KV blocks padded, 5,266 without, in the
    # same free memory; the padding alone predicts that ratio
    padded = mla_rule_kv_bytes_per_token_per_gpu(h200, VLLM_MLA_2025H1_RULE)
    assert padded / h200.kv_bytes_per_token_per_gpu == pytest.approx(5266 / 4739, rel=2e-4)


def test_absorbed_mla_matrices_add_4_8_gb_per_gpu() -> None:
    dep = _r1()
    # W_Q_UK [1536, 16 x 512] and W_UV_O [16 x 512, 7168] in fp8, kv_b_proj [512, 16 x 256] and
    # W_QR [1536, 16 x 64] in bf16, in each of 61 layers
    absorbed = 61 * (1536 * 8192 + 8192 * 7168) * 1
    bf16 = 61 * (512 * 4096 + 1536 * 1024) * 2
    extra = mla_rule_extra_weight_bytes_per_gpu(dep, VLLM_MLA_2025H1_RULE)
    assert extra == absorbed + bf16 == pytest.approx(4.80e9, rel=0.01)
    assert mla_rule_extra_weight_bytes_per_gpu(dep, VLLM_FULL_KV_RULE) == 0.0
    assert mla_rule_extra_weight_bytes_per_gpu(dep, VLLM_RULE) == 0.0


def test_profile_run_holds_the_fused_moe_chunk_caches() -> None:
    dep = _r1()
    # [M, 8, 2 x 256] + [8M, 256] + [M, 8, 7168] in bf16, M = min(tokens, 32768)
    per_row = (512 + 256 + 7168) * 2
    full = mla_rule_profile_moe_bytes_per_gpu(dep, VLLM_MLA_2025H1_RULE, 163840)
    assert full == 32768 * 8 * per_row == 4_160_749_568
    small = mla_rule_profile_moe_bytes_per_gpu(dep, VLLM_MLA_2025H1_RULE, 2048)
    assert small == 2048 * 8 * per_row
    assert mla_rule_profile_moe_bytes_per_gpu(dep, VLLM_RULE, 163840) == 0.0


def test_memory_report_prices_the_rules_kv_and_weights() -> None:
    dep = _r1()
    today = memory_report(dep, 4000, MemoryBudget(max_num_batched_tokens=163840, block_size=64))
    era = memory_report(
        dep,
        4000,
        MemoryBudget(max_num_batched_tokens=163840, block_size=64, rule=VLLM_MLA_2025H1_RULE),
    )
    assert era.kv_bytes_per_token_per_gpu == 61 * 1280
    assert era.weights_bytes_per_gpu - today.weights_bytes_per_gpu == pytest.approx(
        mla_rule_extra_weight_bytes_per_gpu(dep, VLLM_MLA_2025H1_RULE)
    )
    # the fused-MoE chunk caches, and the MLA prefill path's 78,976 B a token (39,488 elements,
    # tests/cost/test_vllm_mla_profile.py) in place of the generic per-token tensors
    generic = today.activation_bytes_per_gpu - 256 * 129280 / 8 * 4
    assert era.activation_bytes_per_gpu - today.activation_bytes_per_gpu == pytest.approx(
        4_160_749_568 + 163840 * 78_976 - generic
    )
    assert era.kv_capacity_tokens == int(era.kv_free_bytes_per_gpu // (61 * 1280))
    assert era.kv_capacity_tokens < today.kv_capacity_tokens
    # a request of 4000 tokens holds 63 blocks of 64 at the padded bytes
    assert era.kv_bytes_per_request == pytest.approx(63 * 64 * 61 * 1280 * 8)
    with pytest.raises(ValueError, match="memory rule"):
        MemoryBudget(rule="vllm-0.6")


def test_a_model_without_mla_keeps_the_vllm_figures() -> None:
    dep = make_deployment("llama-3.1-8b", "h200")
    for rule in (VLLM_FULL_KV_RULE, VLLM_MLA_2025H1_RULE):
        assert mla_rule_kv_bytes_per_token_per_gpu(dep, rule) == dep.kv_bytes_per_token_per_gpu
        assert mla_rule_extra_weight_bytes_per_gpu(dep, rule) == 0.0
        assert mla_rule_profile_moe_bytes_per_gpu(dep, rule, 8192) == 0.0
