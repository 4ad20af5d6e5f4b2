"""Attention parts: softmax attention over a per-token KV cache (one object per kind of layer).

Every token-mixer part (these, and the recurrent ones in `recurrent.py`) answers the same
questions, so a model is a list of layers made of parts and the cost model asks the part:
- `params()`: its weights (norms inside the mixer included, the layer's own norms not);
- `cache_elements_per_token()` / `cache_extra_bytes_per_token()`: what one token of context
  leaves in the paged KV cache (elements of the KV dtype, plus bytes stored in a fixed format);
  `window` > 0 when the layer keeps only the last `window` tokens;
- `state_elements_per_seq()`: a fixed state per sequence (0 here: attention has none);
- `split(tp)`: its per-GPU figures under tensor parallelism (`MixerSplit`);
- `core_terms(split, shape, ab, kb)`: FLOP and HBM bytes of its core (the attention itself;
  the projections are matmuls the cost model prices from `split`), context-dependent.

Kinds:
- `Gqa`: MHA/GQA/MQA (kv_heads = heads / 1..heads); sliding-window and chunked-local layers are a
  `Gqa` with `window` (Llama 4's chunked local attention is modelled as a window of the chunk
  size: each query sees at most that many keys); `output_gate` doubles q_proj (Qwen3-Next's
  gated attention: transformers `Qwen3NextAttention.q_proj` of heads·head_dim·2 outputs).
- `Mla`: DeepSeek multi-head latent attention (arXiv:2405.04434 sec. 2.1); decode runs in the
  absorbed latent form (sec. 2.1.3, vLLM/FlashMLA): 2·heads·(kv_lora+rope) + 2·heads·kv_lora FLOP
  per query-key pair over a latent cache of kv_lora + rope elements per token (no factor 2).
- `Dsa`: MLA with DeepSeek sparse attention (DeepSeek-V3.2-Exp, github.com/deepseek-ai/
  DeepSeek-V3.2-Exp inference/model.py `Indexer`): a lightning indexer (wq_b: q_lora →
  n_idx·d_idx, wk: hidden → d_idx, a LayerNorm of d_idx with bias, weights_proj: hidden →
  n_idx) scores every cached token, 2·n_idx·d_idx FLOP per query-key pair over an fp8 key
  cache of d_idx bytes + one fp32 scale per 128 (vLLM `DeepseekV32IndexerCache`: 132 B/token),
  and the main attention runs over the top-k (`index_topk`, 2048) selected tokens only. The
  indexer is replicated on every TP rank (vLLM deepseek_v2.py `Indexer`: "no tensor parallel,
  just replicated").
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

# (name, flop, hbm_bytes) of one operator of one layer on one GPU; the cost model adds the count
# of layers and the kernel launches
CoreTerm = tuple[str, Any, Any]
INDEXER_SCALE_BLOCK = 128  # one fp32 scale per 128 fp8 indexer-key elements (vLLM, DeepSeek)


class StepShape(Protocol):
    """What one engine step computes (cost.BatchShape's fields; floats or numpy arrays)."""

    @property
    def prefill_tokens(self) -> Any: ...
    @property
    def prefill_attn_pairs(self) -> Any: ...
    @property
    def prefill_seqs(self) -> Any: ...
    @property
    def decode_seqs(self) -> Any: ...
    @property
    def decode_context_tokens(self) -> Any: ...
    @property
    def tokens(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class MixerSplit:
    """One GPU's share of a token mixer under tensor parallelism (elements, FLOP per pair)."""

    qkv_weights: float  # input projections (and the convolution of a recurrent layer)
    qkv_out: float  # their output width
    o_weights: float
    o_in: float
    flop_per_pair_prefill: float = 0.0
    flop_per_pair_decode: float = 0.0
    kv_elems_per_token: float = 0.0  # this GPU's share of one layer's per-token cache entry
    kv_extra_bytes_per_token: float = 0.0  # cached bytes in a fixed format (DSA indexer keys)
    state_elems_per_seq: float = 0.0  # a fixed state per sequence (recurrent layers), model dtype
    state_fp32_elems_per_seq: float = 0.0  # the part of it kept in fp32 (`mamba_ssm_dtype`)
    heads: float = 0.0  # heads (or value heads) on this GPU


FP32_BYTES = 4.0


def state_bytes_per_seq(split: MixerSplit, ab: float) -> float:
    """Bytes of one sequence's fixed state on one GPU (model-dtype part at `ab` bytes)."""
    return split.state_elems_per_seq * ab + split.state_fp32_elems_per_seq * FP32_BYTES


def minimum(a: Any, b: Any) -> Any:
    """min() for floats, elementwise for the numpy grids of `sweep.py` (floats stay fast)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return a if a <= b else b


def attention_terms(
    split: MixerSplit, shape: StepShape, ab: float, kb: float, window: int
) -> Iterator[CoreTerm]:
    """Softmax attention over the cache: 4·pairs·head_dim·heads FLOP (QKᵀ and PV) in GQA terms;
    reads the KV of every decoding sequence (the decode bound) and writes new K, V. A layer
    that sees at most `window` keys per query (sliding, chunked, DSA top-k) reads and computes
    over at most that many."""
    pairs = shape.prefill_attn_pairs
    ctx = shape.decode_context_tokens
    if window:
        pairs = minimum(pairs, shape.prefill_tokens * window)
        ctx = minimum(ctx, shape.decode_seqs * window)
    flop = pairs * split.flop_per_pair_prefill + ctx * split.flop_per_pair_decode
    kv_bytes = (ctx + shape.tokens) * split.kv_elems_per_token * kb  # read cache, write new K/V
    io_bytes = shape.tokens * (split.qkv_out + split.o_in) * ab
    yield ("attention", flop, kv_bytes + io_bytes)


@dataclass(frozen=True, slots=True)
class Gqa:
    """MHA / GQA / MQA, optionally windowed (sliding or chunked local) or output-gated."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    window: int = 0
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    output_gate: bool = False

    kind = "attention"

    @property
    def label(self) -> str:
        if self.kv_heads == self.heads:
            name = "MHA"
        elif self.kv_heads == 1:
            name = "MQA"
        else:
            name = "GQA"
        return ("gated " if self.output_gate else "") + name

    def params(self) -> int:
        h, q_dim, kv_dim = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        q_out = 2 * q_dim if self.output_gate else q_dim
        params = h * (q_out + 2 * kv_dim) + q_dim * h
        if self.qkv_bias:
            params += q_out + 2 * kv_dim
        if self.o_bias:
            params += h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    def cache_elements_per_token(self) -> int:
        """2 (K and V) × kv_heads × head_dim (seed 004; vLLM `get_kv_cache_spec`)."""
        return 2 * self.kv_heads * self.head_dim

    def cache_extra_bytes_per_token(self) -> float:
        return 0.0

    def state_elements_per_seq(self) -> int:
        return 0

    def kv_heads_per_gpu(self, tp: int) -> float:
        """Split by tp, replicated when tp exceeds them (vLLM `QKVParallelLinear`)."""
        return max(1.0, self.kv_heads / tp)

    def cache_bytes_per_token_per_gpu(self, kb: float, tp: int) -> float:
        return self.cache_elements_per_token() * kb * (self.kv_heads_per_gpu(tp) / self.kv_heads)

    def split(self, tp: int) -> MixerSplit:
        heads_gpu = self.heads / tp
        kv_heads_gpu = self.kv_heads_per_gpu(tp)
        q_heads = 2 * heads_gpu if self.output_gate else heads_gpu
        qkv_out = (q_heads + 2 * kv_heads_gpu) * self.head_dim
        o_in = heads_gpu * self.head_dim
        pair = 4 * heads_gpu * self.head_dim
        return MixerSplit(
            qkv_weights=self.hidden * qkv_out,
            qkv_out=qkv_out,
            o_weights=o_in * self.hidden,
            o_in=o_in,
            flop_per_pair_prefill=pair,
            flop_per_pair_decode=pair,
            kv_elems_per_token=2 * kv_heads_gpu * self.head_dim,
            heads=heads_gpu,
        )

    def core_terms(self, split: MixerSplit, shape: StepShape, ab: float, kb: float) -> Any:
        return attention_terms(split, shape, ab, kb, self.window)


@dataclass(frozen=True, slots=True)
class Mla:
    """DeepSeek multi-head latent attention (module docstring)."""

    hidden: int
    heads: int
    q_lora_rank: int  # 0: queries are projected directly from the hidden state
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    kind = "attention"
    window = 0

    @property
    def label(self) -> str:
        return "MLA"

    def params(self) -> int:
        h, heads = self.hidden, self.heads
        qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
        if self.q_lora_rank:
            q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk_head
        else:
            q = h * heads * qk_head
        kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
        kv_b = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        o = heads * self.v_head_dim * h
        return q + kv_a + kv_b + o

    def cache_elements_per_token(self) -> int:
        """The compressed latent plus the decoupled RoPE key (DeepSeek-V2 paper, Table 1)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    def cache_extra_bytes_per_token(self) -> float:
        return 0.0

    def state_elements_per_seq(self) -> int:
        return 0

    def kv_heads_per_gpu(self, tp: int) -> float:  # noqa: ARG002  (the parts' common signature)
        """The latent is not split by heads: every TP rank holds all of it (vLLM MLA backend)."""
        return float(self.heads)

    def cache_bytes_per_token_per_gpu(self, kb: float, tp: int) -> float:  # noqa: ARG002  (the parts' common signature)
        return self.cache_elements_per_token() * kb

    def split(self, tp: int) -> MixerSplit:
        h = self.hidden
        heads_gpu = self.heads / tp
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        q_rep = h * self.q_lora_rank if self.q_lora_rank else 0.0
        q_split = (self.q_lora_rank or h) * self.heads * qk / tp
        kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv_b = self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim) / tp
        o_in = heads_gpu * self.v_head_dim
        return MixerSplit(
            qkv_weights=q_rep + q_split + kv_a + kv_b,
            qkv_out=heads_gpu * qk + self.kv_lora_rank + self.qk_rope_head_dim,
            o_weights=o_in * h,
            o_in=o_in,
            flop_per_pair_prefill=2 * heads_gpu * (qk + self.v_head_dim),
            flop_per_pair_decode=2 * heads_gpu * (2 * self.kv_lora_rank + self.qk_rope_head_dim),
            kv_elems_per_token=float(self.kv_lora_rank + self.qk_rope_head_dim),
            heads=heads_gpu,
        )

    def core_terms(self, split: MixerSplit, shape: StepShape, ab: float, kb: float) -> Any:
        return attention_terms(split, shape, ab, kb, 0)


@dataclass(frozen=True, slots=True)
class Dsa:
    """MLA with DeepSeek sparse attention: lightning indexer + top-k selection (docstring)."""

    mla: Mla
    index_heads: int
    index_head_dim: int
    index_topk: int

    kind = "attention"
    window = 0  # the cache keeps every token; only the attention is limited to the top-k

    @property
    def label(self) -> str:
        return "MLA+DSA"

    def indexer_params(self) -> int:
        m = self.mla
        wq_b = (m.q_lora_rank or m.hidden) * self.index_heads * self.index_head_dim
        wk = m.hidden * self.index_head_dim
        k_norm = 2 * self.index_head_dim  # LayerNorm weight and bias
        weights_proj = m.hidden * self.index_heads
        return wq_b + wk + k_norm + weights_proj

    def params(self) -> int:
        return self.mla.params() + self.indexer_params()

    def cache_elements_per_token(self) -> int:
        return self.mla.cache_elements_per_token()

    def cache_extra_bytes_per_token(self) -> float:
        """fp8 indexer keys plus their fp32 scales: 128 + 4 = 132 B per token and layer."""
        scales = math.ceil(self.index_head_dim / INDEXER_SCALE_BLOCK)
        return float(self.index_head_dim + 4 * scales)

    def state_elements_per_seq(self) -> int:
        return 0

    def kv_heads_per_gpu(self, tp: int) -> float:
        return self.mla.kv_heads_per_gpu(tp)

    def cache_bytes_per_token_per_gpu(self, kb: float, tp: int) -> float:
        """The latent and the indexer keys, both whole on every TP rank."""
        return self.mla.cache_bytes_per_token_per_gpu(kb, tp) + self.cache_extra_bytes_per_token()

    def split(self, tp: int) -> MixerSplit:
        base = self.mla.split(tp)
        m = self.mla
        # replicated indexer projections: wq_b (from the q latent), wk and weights_proj
        idx_w = (m.q_lora_rank or m.hidden) * self.index_heads * self.index_head_dim
        idx_w += m.hidden * (self.index_head_dim + self.index_heads)
        idx_out = self.index_heads * self.index_head_dim + self.index_head_dim + self.index_heads
        return MixerSplit(
            qkv_weights=base.qkv_weights + idx_w,
            qkv_out=base.qkv_out + idx_out,
            o_weights=base.o_weights,
            o_in=base.o_in,
            flop_per_pair_prefill=base.flop_per_pair_prefill,
            flop_per_pair_decode=base.flop_per_pair_decode,
            kv_elems_per_token=base.kv_elems_per_token,
            kv_extra_bytes_per_token=self.cache_extra_bytes_per_token(),
            heads=base.heads,
        )

    def core_terms(self, split: MixerSplit, shape: StepShape, ab: float, kb: float) -> Any:
        """The indexer scores every (query, cached key) pair; attention reads the top-k."""
        yield from attention_terms(split, shape, ab, kb, self.index_topk)
        pairs = shape.prefill_attn_pairs + shape.decode_context_tokens
        flop = 2 * self.index_heads * self.index_head_dim * pairs
        keys = (shape.decode_context_tokens + shape.tokens) * split.kv_extra_bytes_per_token
        yield ("indexer", flop, keys)
