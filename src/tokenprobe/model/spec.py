"""The shape of a decoder-only transformer and what it costs in parameters and KV cache.

A `ModelSpec` is enough to count parameters, KV-cache bytes and per-operator FLOP/bytes (see
`cost/ops.py`). It covers dense MHA/GQA/MQA, MLA (DeepSeek-V2/V3), MoE with routed + shared
experts, dense first layers and MoE layers interleaved with dense ones (Llama 4), sliding-window
and hybrid (local/global) attention layers (Llama 4's chunked local attention is modelled as a
window of the chunk size), tied embeddings, LayerNorms with biases, biased linear layers and
learned absolute position embeddings (GPT-BigCode).

Parameter conventions (they differ between publishers, so both are offered):
- `params_total`: every weight of the language model, input embedding and LM head included
  (DeepSeek-V3's multi-token-prediction module and any vision tower are not counted).
- `params_active`: the weights one token touches: the non-expert weights, the shared experts and
  `experts_per_token` routed experts per MoE layer, embeddings and LM head included.
- `params_active_no_embedding`: the same without the input embedding tables (token and learned
  position), which are lookups, not matmuls (gpt-oss's model card counts active parameters so).

Every spec is validated where it is built (from a config or in Python): each size is an integer
(not a bool) between 1 and a named limit far above any published model (the cost model loops over
layers and experts, so an absurd count would hang it instead of failing), and the shape must be
consistent (KV heads divide the heads, top-k at most the experts, ...). A bad value raises one
`ConfigError` naming the field and the value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Literal

from tokenprobe.errors import ConfigError

AttentionKind = Literal["full", "sliding"]

# Limits on a model's shape: each is 10-100x the largest published model's value, so no real
# config meets one, while an absurd one (10^7 layers) is refused instead of hanging the loops
# over layers (`layer_groups`) and experts (`cost/ops.py`). Largest published values (2025):
# layers 126 (Llama-3.1-405B), hidden 18,432 (PaLM-540B), heads 128 (DeepSeek-V3), head_dim 256
# (Gemma), MLP width 73,728 (PaLM-540B), vocab 262,208 (Gemma 3), experts 512 (Qwen3-Next).
MAX_LAYERS = 10_000
MAX_HIDDEN_SIZE = 1 << 20
MAX_HEADS = 1 << 14
MAX_HEAD_DIM = 1 << 14
MAX_INTERMEDIATE_SIZE = 1 << 24
MAX_VOCAB_SIZE = 1 << 24
MAX_EXPERTS = 1 << 14
MAX_WINDOW_TOKENS = 1 << 31  # a window wider than any context is harmless, a 2^63 one is not
MAX_POSITION_EMBEDDINGS = 1 << 24  # learned absolute positions (GPT-BigCode `n_positions`)


def check_count(name: str, value: object, hi: int, lo: int = 1) -> int:
    """`value` as an int in [lo, hi]; ConfigError naming `name` otherwise (bools, floats, NaN,
    strings and None are refused: True is an int in Python, never a size anyone meant)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, f"an integer in [{lo:,}, {hi:,}]")
    if not lo <= value <= hi:
        raise ConfigError(name, value, f"an integer in [{lo:,}, {hi:,}]")
    return value


def _check_flags(obj: object) -> None:
    for f in fields(obj):  # type: ignore[arg-type]
        if f.type in ("bool", bool) and not isinstance(getattr(obj, f.name), bool):
            raise ConfigError(f.name, getattr(obj, f.name), "true or false")


@dataclass(frozen=True, slots=True)
class MlaSpec:
    """DeepSeek multi-head latent attention (arXiv:2405.04434, section 2.1)."""

    q_lora_rank: int  # 0: queries are projected directly from the hidden state
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self) -> None:
        check_count("q_lora_rank", self.q_lora_rank, MAX_HIDDEN_SIZE, lo=0)
        check_count("kv_lora_rank", self.kv_lora_rank, MAX_HIDDEN_SIZE)
        check_count("qk_nope_head_dim", self.qk_nope_head_dim, MAX_HEAD_DIM, lo=0)
        check_count("qk_rope_head_dim", self.qk_rope_head_dim, MAX_HEAD_DIM, lo=0)
        check_count("v_head_dim", self.v_head_dim, MAX_HEAD_DIM)
        if self.qk_nope_head_dim + self.qk_rope_head_dim < 1:
            raise ConfigError("qk_nope_head_dim", self.qk_nope_head_dim, "a query/key head of >= 1")


@dataclass(frozen=True, slots=True)
class MoeSpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0  # per shared expert
    first_dense_layers: int = 0  # DeepSeek `first_k_dense_replace`
    expert_bias: bool = False  # gpt-oss experts carry biases
    layer_step: int = 1  # Llama 4 `interleave_moe_layer_step`: every layer_step-th layer is MoE

    def __post_init__(self) -> None:
        check_count("num_experts", self.num_experts, MAX_EXPERTS)
        check_count("num_experts_per_tok", self.experts_per_token, self.num_experts)
        check_count("moe_intermediate_size", self.expert_intermediate_size, MAX_INTERMEDIATE_SIZE)
        check_count("n_shared_experts", self.num_shared_experts, MAX_EXPERTS, lo=0)
        if self.num_shared_experts:
            check_count(
                "shared_expert_intermediate_size",
                self.shared_intermediate_size,
                MAX_INTERMEDIATE_SIZE,
            )
        else:
            check_count("shared_expert_intermediate_size", self.shared_intermediate_size, 0, lo=0)
        check_count("first_k_dense_replace", self.first_dense_layers, MAX_LAYERS - 1, lo=0)
        check_count("interleave_moe_layer_step", self.layer_step, MAX_LAYERS)
        _check_flags(self)


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """What one decoder layer is made of (identical layers are grouped by `layer_groups`)."""

    attention: AttentionKind
    window: int  # 0 for full attention
    moe: bool


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    gated_mlp: bool = True
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False  # biases on the dense MLP's matrices (GPT-BigCode, StarCoder2)
    qk_norm: bool = False
    norms_per_layer: int = 2
    norm_bias: bool = False  # LayerNorm (weight + bias) rather than RMSNorm (weight only)
    mla: MlaSpec | None = None
    moe: MoeSpec | None = None
    layer_types: tuple[AttentionKind, ...] = ()
    sliding_window: int = 0
    position_embeddings: int = 0  # rows of a learned absolute position table (GPT-BigCode)
    hf_id: str = ""
    model_type: str = ""
    extra_params: int = 0  # e.g. attention sinks; counted in total and active
    aliases: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        check_count("hidden_size", self.hidden_size, MAX_HIDDEN_SIZE)
        check_count("num_hidden_layers", self.num_layers, MAX_LAYERS)
        check_count("num_attention_heads", self.num_heads, MAX_HEADS)
        check_count("num_key_value_heads", self.num_kv_heads, self.num_heads)
        check_count("head_dim", self.head_dim, MAX_HEAD_DIM)
        check_count("intermediate_size", self.intermediate_size, MAX_INTERMEDIATE_SIZE)
        check_count("vocab_size", self.vocab_size, MAX_VOCAB_SIZE)
        check_count("norms_per_layer", self.norms_per_layer, 8, lo=0)
        check_count("sliding_window", self.sliding_window, MAX_WINDOW_TOKENS, lo=0)
        check_count("n_positions", self.position_embeddings, MAX_POSITION_EMBEDDINGS, lo=0)
        check_count("extra_params", self.extra_params, MAX_LAYERS * MAX_HEADS, lo=0)
        _check_flags(self)
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                "num_key_value_heads",
                self.num_kv_heads,
                f"must divide num_attention_heads={self.num_heads}",
            )
        self._check_layers()

    def _check_layers(self) -> None:
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ConfigError(
                "layer_types", len(self.layer_types), f"one entry per layer ({self.num_layers})"
            )
        for kind in self.layer_types:
            if kind not in ("full", "sliding"):
                raise ConfigError("layer_types", kind, "'full' or 'sliding'")
        if "sliding" in self.layer_types and self.sliding_window <= 0:
            raise ConfigError(
                "sliding_window",
                self.sliding_window,
                "a positive window when some layers use sliding attention",
            )
        moe = self.moe
        if moe is not None and not any(
            i >= moe.first_dense_layers and (i + 1) % moe.layer_step == 0
            for i in range(self.num_layers)
        ):
            raise ConfigError(
                "first_k_dense_replace" if moe.first_dense_layers else "interleave_moe_layer_step",
                moe.first_dense_layers or moe.layer_step,
                f"leaves none of the {self.num_layers} layers a MoE layer",
            )

    # ---- layer structure -------------------------------------------------------------------
    def layer(self, index: int) -> LayerSpec:
        kind: AttentionKind = self.layer_types[index] if self.layer_types else "full"
        window = self.sliding_window if kind == "sliding" else 0
        is_moe = (
            self.moe is not None
            and index >= self.moe.first_dense_layers
            and (index + 1) % self.moe.layer_step == 0
        )
        return LayerSpec(kind, window, is_moe)

    @functools.cached_property
    def layer_groups(self) -> tuple[tuple[LayerSpec, int], ...]:
        """Distinct layer kinds and how many layers of each (the cost model loops over these)."""
        counts: dict[LayerSpec, int] = {}
        for i in range(self.num_layers):
            spec = self.layer(i)
            counts[spec] = counts.get(spec, 0) + 1
        return tuple(counts.items())

    # ---- per-layer parameter counts --------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the concatenated query heads (what o_proj reads back for GQA)."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def attention_params(self) -> int:
        h = self.hidden_size
        if self.mla is not None:
            m = self.mla
            qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.num_heads * qk_head
            else:
                q = h * self.num_heads * qk_head
            kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv_b = m.kv_lora_rank * self.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
            o = self.num_heads * m.v_head_dim * h
            return q + kv_a + kv_b + o
        params = h * (self.q_dim + 2 * self.kv_dim) + self.q_dim * h
        if self.qkv_bias:
            params += self.q_dim + 2 * self.kv_dim
        if self.o_bias:
            params += h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    def mlp_params(self, intermediate: int, bias: bool = False) -> int:
        mats = 3 if self.gated_mlp else 2
        params = mats * self.hidden_size * intermediate
        if bias:
            params += (2 if self.gated_mlp else 1) * intermediate + self.hidden_size
        return params

    def ffn_params(self, layer: LayerSpec, active: bool) -> int:
        """MLP (dense layer) or router + experts (MoE layer); `active` counts routed top-k only."""
        if not layer.moe or self.moe is None:
            return self.mlp_params(self.intermediate_size, bias=self.mlp_bias)
        m = self.moe
        routed = m.experts_per_token if active else m.num_experts
        router = self.hidden_size * m.num_experts + (m.num_experts if m.expert_bias else 0)
        experts = routed * self.mlp_params(m.expert_intermediate_size, bias=m.expert_bias)
        shared = m.num_shared_experts * self.mlp_params(m.shared_intermediate_size)
        return router + experts + shared

    def layer_params(self, layer: LayerSpec, active: bool) -> int:
        norms = self.norms_per_layer * self.norm_params
        return self.attention_params() + self.ffn_params(layer, active) + norms

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def position_embedding_params(self) -> int:
        """A learned absolute position table (GPT-2 / GPT-BigCode `wpe`), a lookup like the
        token embedding; 0 for rotary and ALiBi models."""
        return self.position_embeddings * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def norm_params(self) -> int:
        """One norm: RMSNorm has a weight, LayerNorm a weight and a bias."""
        return (2 if self.norm_bias else 1) * self.hidden_size

    def _params(self, active: bool) -> int:
        layers = sum(self.layer_params(s, active) * n for s, n in self.layer_groups)
        lookups = self.embedding_params + self.position_embedding_params
        return layers + lookups + self.lm_head_params + self.norm_params + self.extra_params

    @functools.cached_property
    def params_total(self) -> int:
        return self._params(active=False)

    @functools.cached_property
    def params_active(self) -> int:
        return self._params(active=True)

    @property
    def params_active_no_embedding(self) -> int:
        tied_head = self.embedding_params if self.tie_word_embeddings else 0
        lookups = self.embedding_params + self.position_embedding_params
        return self.params_active - lookups + tied_head

    @property
    def expert_params_total(self) -> int:
        """Routed-expert weights of all MoE layers (the part expert parallelism shards)."""
        if self.moe is None:
            return 0
        per_layer = self.moe.num_experts * self.mlp_params(
            self.moe.expert_intermediate_size, bias=self.moe.expert_bias
        )
        return per_layer * sum(n for s, n in self.layer_groups if s.moe)

    # ---- KV cache --------------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer.

        GQA/MHA/MQA: 2 (K and V) × kv_heads × head_dim (seed 004; vLLM `get_kv_cache_spec`).
        MLA: the compressed latent plus the decoupled RoPE key, kv_lora_rank + qk_rope_head_dim,
        with no factor 2 (DeepSeek-V2 paper, Table 1).
        """
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_elements_for_context(self, context_tokens: int) -> int:
        """Cached elements of one sequence of `context_tokens` (sliding layers keep a window)."""
        per_layer = self.kv_elements_per_token_per_layer()
        total = 0
        for spec, n in self.layer_groups:
            kept = min(context_tokens, spec.window) if spec.window else context_tokens
            total += n * kept * per_layer
        return total

    @property
    def kv_elements_per_token(self) -> int:
        """Per token of context when no sliding window has filled (all layers keep it)."""
        return self.num_layers * self.kv_elements_per_token_per_layer()
