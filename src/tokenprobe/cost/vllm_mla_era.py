"""vLLM's KV cache and extra MLA weights for DeepSeek-style (MLA) models, by version (early 2025).

The `vllm` memory rule (cost/memory.py) is today's vLLM: an MLA layer caches its latent
(kv_lora_rank + qk_rope_head_dim elements per token, all of it on every TP rank) and the GPU holds
the checkpoint's weights. vLLM of early 2025 held more, in three ways read from its code and PRs
(each a `MemoryBudget.rule` here, chosen by version: `vllm_mla_rule`):

1. `VLLM_FULL_KV_RULE`, vLLM <= 0.7.0: no MLA backend. `DeepseekV2Attention` (the path still used
   when `use_mla` is off) caches per-head K and V, V zero-padded to the QK head dim so that one
   head size serves flash attention (vllm/model_executor/models/deepseek_v2.py: `v =
   torch.nn.functional.pad(v, [0, self.qk_head_dim - self.v_head_dim])`): per token and GPU,
   layers x heads/tp x 2 x (qk_nope + qk_rope) elements. DeepSeek-R1 at TP 8 in bf16: 61 x 16 x
   2 x 192 x 2 B = 749,568 B, against the latent's 61 x 576 x 2 B = 70,272 B (10.67x). The MLA
   backend came in v0.7.1 (github.com/vllm-project/vllm/releases/tag/v0.7.1, 2025-02-01: "MLA
   optimization for Deepseek family of models ... ~10x the memory capacity for tokens" against
   v0.7.0, which this ratio is).
2. `VLLM_MLA_2025H1_RULE`, 0.7.1 <= vLLM < 0.8.0:
   - on NVIDIA GPUs each latent entry is padded to a multiple of 256 B
     (`VLLM_MLA_CUDA_MEM_ALIGN_KV_CACHE`, default on; vllm/worker/cache_engine.py): 576 x 2 B =
     1,152 -> 1,280 B per token and layer. PR #14842 (merged 2025-03-15, in v0.8.0) removed it;
     its DeepSeek-R1 TP 8 V0 log shows 4,739 KV blocks aligned and 5,266 without
     (5,266 / 4,739 = 1.111 = 1,280 / 1,152). The name says CUDA: ROCm is taken as unpadded.
   - the absorbed decode matrices are materialised beside the raw ones
     (`VLLM_MLA_PERFORM_MATRIX_ABSORPTION`, default on; `MLACommonImpl.
     process_weights_after_loading`): W_Q_UK [q_lora_rank, heads/tp x kv_lora_rank] and W_UV_O
     [heads/tp x kv_lora_rank, hidden], requantised to fp8 (one byte each) when the checkpoint is
     fp8, else in the 16-bit activation dtype; plus kv_b_proj dequantised to bf16 (the W_UK/W_UV
     it splits into are kept) and W_QR in bf16. DeepSeek-R1 at TP 8: 61 x (1536 x 8192 + 8192 x
     7168) x 1 B = 4.35 GB per GPU, + 61 x (512 x 4096 + 1536 x 1024) x 2 B = 0.45 GB. PR #14770
     (merged 2025-03-13, v0.8.0: "it reduces memory usage") stopped materialising them.
   - the profile run that sizes the KV cache (V0 `profile_run` at max_num_batched_tokens)
     holds the fused-MoE kernel's intermediate caches, which the generic activation model
     (cost/memory.py: widest per-token tensors, one copy) leaves out: `fused_experts_impl`
     (vllm/model_executor/layers/fused_moe/fused_moe.py) allocates for M = min(tokens,
     VLLM_FUSED_MOE_CHUNK_SIZE = 32768, vllm/envs.py) tokens [M, top_k, 2 x I/tp],
     [M x top_k, I/tp] and [M, top_k, hidden] in the activation dtype. DeepSeek-R1 TP 8 at
     >= 32768 batched tokens: 32768 x 8 x (512 + 256 + 7168) x 2 B = 4.16 GB per GPU.
   0.7.4 nightlies built after mid-March 2025 already lack both; a version string does not tell,
   so every 0.7.x gets them (the collected rows are 0.7.3.dev and 0.7.4.dev181, of February).
Measured against: PR #14842's log (vLLM main of 2025-03-14, after #14770: padded latent, no
absorbed matrices; V0, max_num_batched_tokens = max_model_len = 163,840, 256 sequences, TP 8;
the GPU is not named: H200 by its memory, the one Hopper part that leaves R1 ~22 GiB of KV) has
4,739 blocks of 64 = 303,296 tokens = 22.05 GiB of KV per GPU. These three terms alone gave
35.9 GiB (494k tokens); what the profile run takes besides (CUDA's 139.81 GiB of an H200, the
MLA prefill path's activations at 163,840 tokens, NCCL's NVLS buffers) is cost/vllm_mla_profile.py,
which brings it to 25.2 GiB (+14 %) and dstack's H200 rows (absorbed matrices too) from 433k to
285k tokens of KV, against the ~256k their c128 queueing implies.
From v0.8.0 the `vllm` rule applies (its W_UK_T / W_UV in bf16 are 0.26 GB on DeepSeek-R1 TP 8,
left out as before).
"""

from __future__ import annotations

import math

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.release import engine_release
from tokenprobe.precision import activation_bytes_per_element

VLLM_FULL_KV_RULE = "vllm-0.7.0-mla-as-mha"
VLLM_MLA_2025H1_RULE = "vllm-0.7-mla"
VLLM_MLA_RULES = (VLLM_FULL_KV_RULE, VLLM_MLA_2025H1_RULE)

MLA_BACKEND_FROM = (0, 7, 1)  # the v0.7.1 release notes
MLA_CHANGES_UNTIL = (0, 8, 0)  # PRs #14770 (absorption) and #14842 (alignment), v0.8.0
FUSED_MOE_CHUNK_TOKENS = 32768  # vllm/envs.py VLLM_FUSED_MOE_CHUNK_SIZE default
CUDA_ENTRY_ALIGN_BYTES = 256  # VLLM_MLA_CUDA_MEM_ALIGN_KV_CACHE: the CUDA allocation granularity


def vllm_mla_rule(version: str) -> str | None:
    """The memory rule of an MLA model on vLLM of this version (module docstring), or None where
    today's `vllm` rule holds (0.8.0 and later, or an unreadable version)."""
    release = engine_release(version)
    if release is None or release >= MLA_CHANGES_UNTIL:
        return None
    return VLLM_MLA_2025H1_RULE if release >= MLA_BACKEND_FROM else VLLM_FULL_KV_RULE


def mla_rule_kv_bytes_per_token_per_gpu(dep: Deployment, rule: str) -> float:
    """KV-cache bytes one token holds on one GPU under `rule` (module docstring); the
    deployment's own figure for a model without MLA."""
    mla = dep.model.mla
    if mla is None or rule not in VLLM_MLA_RULES:
        return dep.kv_bytes_per_token_per_gpu
    kb = dep.kv_dtype.bytes_per_element
    layers = dep.model.num_layers / dep.pp
    if rule == VLLM_FULL_KV_RULE:
        heads = dep.model.num_heads / dep.dense_tp
        qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        return layers * heads * 2 * qk_head * kb / dep.dp
    entry = (mla.kv_lora_rank + mla.qk_rope_head_dim) * kb
    if dep.gpu.vendor == "nvidia":
        entry = math.ceil(entry / CUDA_ENTRY_ALIGN_BYTES) * CUDA_ENTRY_ALIGN_BYTES
    return layers * entry / dep.dp


def mla_rule_extra_weight_bytes_per_gpu(dep: Deployment, rule: str) -> float:
    """Weights the rule's vLLM holds on one GPU beyond the checkpoint's: the materialised MLA
    decode matrices of 0.7.1-0.7.x (module docstring); 0 otherwise."""
    mla = dep.model.mla
    if mla is None or rule != VLLM_MLA_2025H1_RULE:
        return 0.0
    heads = dep.model.num_heads / dep.dense_tp
    q_in = mla.q_lora_rank or dep.model.hidden_size  # W_Q is hidden -> heads without q_lora
    latent = heads * mla.kv_lora_rank
    absorbed_b = 1.0 if dep.weight_dtype.bits <= 8 else 2.0  # requantised fp8, else 16-bit
    absorbed = (q_in * latent + latent * dep.model.hidden_size) * absorbed_b
    kv_b_bf16 = mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim) * 2.0
    w_qr_bf16 = q_in * heads * mla.qk_rope_head_dim * 2.0
    return dep.model.num_layers / dep.pp * (absorbed + kv_b_bf16 + w_qr_bf16)


def mla_rule_profile_moe_bytes_per_gpu(dep: Deployment, rule: str, batched_tokens: int) -> float:
    """The fused-MoE intermediate caches of the profile run at `batched_tokens` on one GPU, under
    the 0.7.1-0.7.x rule for an MoE model (module docstring); 0 otherwise."""
    moe = dep.model.moe
    if moe is None or dep.model.mla is None or rule != VLLM_MLA_2025H1_RULE:
        return 0.0
    rows = min(batched_tokens, FUSED_MOE_CHUNK_TOKENS) * moe.experts_per_token
    inner = moe.expert_intermediate_size / (1 if dep.expert_parallel else dep.tp)
    ab = activation_bytes_per_element(dep.act_dtype)
    return rows * (2 * inner + inner + dep.model.hidden_size) * ab
