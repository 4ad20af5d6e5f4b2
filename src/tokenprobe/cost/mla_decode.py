"""SGLang 0.4's Triton MLA decode kernel: the latent cache is read once per block of 16 heads.

sgl-project/sglang, 0.4 line (Dec 2024 - Mar 2025, the default `triton` backend that 0.4 forces
for MLA models), python/sglang/srt/layers/attention/triton_ops/decode_attention.py
`_decode_grouped_att_m_fwd` (read in stored copies of the file of that era):

    BLOCK_H = 16
    grid = (batch, triton.cdiv(head_num, min(BLOCK_H, kv_group_num)), NUM_KV_SPLITS)

Each program loads the cached latent and RoPE key (576 elements, `BLOCK_DMODEL` 512 +
`BLOCK_DPE` 64) of its sequence's split for its 16 heads. MLA has one KV head, so `kv_group_num`
is the GPU's query-head count and a GPU with H heads reads each sequence's cache ⌈H/16⌉ times:
once under TP8 (16 of DeepSeek-V3's 128 heads a GPU: the dstack offline runs), 8 times on an
--enable-dp-attention rank, which holds all 128 heads (a port of the kernel notes the grid
"(1, 8, 4)" for 128 heads). The cost model's `attention` operator reads the cache once
(model/attention.py `attention_terms`); `Efficiency.mla_decode_head_block` (the kernel's
BLOCK_H; 0: one read for all heads, FlashMLA and the later kernels) adds the other passes as
`latent_rereads`, HBM bytes at the attention operator's rate (cost/step.py: its name maps to
`attention_memory` x `mla_attention`).

Approximation: every pass is priced from HBM. The grid runs all sequences of one head block
before the next (x = batch varies fastest), so a pass finds the previous one's lines in L2 only
when the batch's cache of a layer fits there (50 MB on H100/H200: 16 sequences of 3,600 tokens
hold 66 MB a layer, so from a few thousand cached tokens on the re-reads go to HBM).
"""

from __future__ import annotations

import math
from typing import Any

from tokenprobe.model import MixerSplit

LATENT_REREADS = "latent_rereads"  # the extra passes over the latent (an `attention` operator)


def head_block_passes(heads_per_gpu: float, heads_per_pass: float) -> int:
    """Passes of the decode kernel over each sequence's cache: ⌈heads / BLOCK_H⌉ (1 if the
    kernel reads it once for all heads, `heads_per_pass` 0)."""
    if heads_per_pass <= 0 or heads_per_gpu <= 0:
        return 1
    return max(1, math.ceil(heads_per_gpu / heads_per_pass - 1e-9))


def latent_reread_bytes(split: MixerSplit, decode_context_tokens: Any, kb: float,
                        heads_per_pass: float) -> Any:  # fmt: skip
    """HBM bytes of one layer's passes after the first over the decoding sequences' caches."""
    extra = head_block_passes(split.heads, heads_per_pass) - 1
    return extra * decode_context_tokens * split.kv_elems_per_token * kb
