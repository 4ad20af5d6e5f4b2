"""vLLM 0.7's profile run for MLA models (cost/vllm_mla_profile.py): CUDA's total, the MLA prefill
path's activations and NCCL's NVLS buffers, each derived by hand from DeepSeek-R1's config (61
layers, 128 heads, hidden 7168, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64,
v_head 128, vocab 129,280, 8 of 256 experts of intermediate 2048) at TP 8, and the KV room they
give checked against two public vLLM logs that no parameter was fitted on."""

from __future__ import annotations

import pytest

from tokenprobe.cost import (
    VLLM_MLA_2025H1_RULE,
    VLLM_RULE,
    Deployment,
    MemoryBudget,
    make_deployment,
    memory_report,
    vllm_mla_rule,
)
from tokenprobe.cost.memory import weights_bytes_per_gpu
from tokenprobe.cost.vllm_mla_era import mla_rule_extra_weight_bytes_per_gpu
from tokenprobe.cost.vllm_mla_profile import (
    cuda_total_bytes,
    mla_prefill_bytes_per_token_per_gpu,
    nvls_bytes_per_gpu,
)
from tokenprobe.hardware import get_gpu
from tokenprobe.units import GiB, MiB

R1 = "deepseek-ai/DeepSeek-R1"
NVLS_8 = 2_415_919_104  # "nvlsTotalSize 2415919104": NCCL's log at 8 ranks (vLLM issue 9699)


def _r1(gpu: str = "h200", tp: int = 8) -> Deployment:
    return make_deployment(R1, gpu, tp=tp, weight_dtype="fp8", kv_dtype="bf16")


def test_the_prefill_path_holds_39488_elements_a_token() -> None:
    # residual stream + its normed copy (2 x 7168), q_a out 1536, kv_a out 576 + normed 512,
    # q, k and padded V (3 x 16 x 192), kv_b out 16 x 256, attention out 16 x 128, o_proj 7168
    elements = 2 * 7168 + 1536 + 576 + 512 + 3 * 16 * 192 + 16 * 256 + 16 * 128 + 7168
    assert elements == 39_488
    assert mla_prefill_bytes_per_token_per_gpu(_r1()) == elements * 2 == 78_976
    assert mla_prefill_bytes_per_token_per_gpu(make_deployment("llama-3.1-8b", "h200")) == 0.0


def test_nvls_buffers_follow_nccls_log() -> None:
    # 24 channels x 2 x (4 MiB + 2 MiB) a rank, x 8 ranks = the log's 2.25 GiB, for each of the
    # TP group's two NCCL communicators
    assert 8 * 24 * 2 * (4 + 2) * MiB == NVLS_8
    assert nvls_bytes_per_gpu(_r1()) == 2 * NVLS_8
    assert nvls_bytes_per_gpu(_r1(tp=4)) == 2 * NVLS_8 / 2
    assert nvls_bytes_per_gpu(_r1("mi300x")) == 0.0  # no NVSwitch
    two = make_deployment("llama-3.1-8b", "h200", tp=2)
    assert nvls_bytes_per_gpu(two) == 0.0  # NVLS only above 2 ranks


def test_cuda_reports_139_81_gib_of_an_h200() -> None:
    assert cuda_total_bytes(get_gpu("h200")) == 139.81 * GiB
    assert cuda_total_bytes(get_gpu("mi300x")) == get_gpu("mi300x").hbm_bytes


def _budget(util: float, tokens: int, seqs: int, block: int, rule: str) -> MemoryBudget:
    return MemoryBudget(
        gpu_memory_utilization=util,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        block_size=block,
        rule=rule,
    )


def test_kv_room_of_r1_tp8_h200_at_0_7_3() -> None:
    """dstack's vLLM 0.7.x H200 server: V0 budget max_model_len = 163,840 tokens, 256
    sequences, FlashMLA's 64-token blocks, gpu_memory_utilization 0.9."""
    dep = _r1()
    rule = vllm_mla_rule("0.7.3")
    assert rule == VLLM_MLA_2025H1_RULE
    report = memory_report(dep, 4000, _budget(0.9, 163840, 256, 64, rule))
    usable = 139.81 * GiB * 0.9
    weights = weights_bytes_per_gpu(dep) + 61 * (1536 * 8192 + 8192 * 7168)  # + absorbed fp8
    weights += 61 * (512 * 4096 + 1536 * 1024) * 2  # + kv_b_proj and W_QR in bf16
    acts = 163840 * 78_976  # the MLA prefill path
    acts += 32768 * 8 * (512 + 256 + 7168) * 2  # the fused-MoE chunk caches
    acts += 256 * 129280 / 8 * 4  # fp32 logits of 256 rows, vocab-parallel
    runtime = 1 * GiB + 2 * NVLS_8
    free = usable - weights - acts - runtime
    assert report.kv_free_bytes_per_gpu == pytest.approx(free, rel=1e-9)
    assert report.kv_capacity_tokens == int(free // (61 * 1280))
    assert free / GiB == pytest.approx(20.75, abs=0.01)  # 285k tokens; 433k before these terms
    # 4,000 tokens a request in 63 blocks of 64: 70 fit, where the server ran ~64 of 128 users
    assert report.max_concurrent_requests == int(free // (63 * 64 * 61 * 1280)) == 70


def test_the_room_stays_near_two_public_logs() -> None:
    dep = _r1()
    # a vLLM 0.7.3 log (module docstring): 0.85 of 139.81 GiB, 32,000 tokens, 1,024 sequences,
    # blocks of 16: activation peak 6.37 GiB, KV 21.43 GiB (18,418 blocks)
    a = memory_report(dep, 1, _budget(0.85, 32000, 1024, 16, VLLM_MLA_2025H1_RULE))
    assert a.activation_bytes_per_gpu / GiB == pytest.approx(6.37, rel=0.05)
    assert a.kv_free_bytes_per_gpu / GiB == pytest.approx(21.43, rel=0.12)
    # vLLM PR 14842's V0 log (main of 2025-03-14: no absorbed matrices): 0.9, 163,840 tokens,
    # 256 sequences, 4,739 blocks of 64 x 61 x 1,280 B = 22.05 GiB
    b = memory_report(dep, 1, _budget(0.9, 163840, 256, 64, VLLM_MLA_2025H1_RULE))
    absorbed = mla_rule_extra_weight_bytes_per_gpu(dep, VLLM_MLA_2025H1_RULE)
    unabsorbed = b.kv_free_bytes_per_gpu + absorbed
    blocks = unabsorbed // (64 * 61 * 1280)
    assert blocks == pytest.approx(4739, rel=0.15)  # 5,418 modelled; 7,720 before these terms


def test_todays_rule_is_unchanged() -> None:
    dep = _r1()
    report = memory_report(dep, 1, _budget(0.9, 8192, 256, 16, VLLM_RULE))
    assert report.usable_bytes_per_gpu == dep.gpu.hbm_bytes * 0.9
    assert report.runtime_bytes_per_gpu == 1 * GiB
