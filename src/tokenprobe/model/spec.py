"""The shape of a decoder-only transformer and what it costs in parameters and KV cache.

A `ModelSpec` holds a config's shape; `ModelSpec.layers` is the model as a list of layers made of
parts (`layers.py`): a token mixer (`attention.py`: MHA/GQA/MQA, sliding or chunked windows,
gated attention, MLA, MLA with DeepSeek sparse attention, per-layer KV head counts (DeciLM's
variable GQA); `recurrent.py`: Gated DeltaNet linear
attention, Mamba-2) and an FFN (`ffn.py`: dense, or MoE with shared experts; dense-first and
interleaved layers). Each part knows its parameters, its cache per token and per sequence, its
FLOP/bytes and its TP split; parameter and cache counts here are sums over the parts, and
`cost/ops.py` asks the parts. Hybrids interleave the kinds (Qwen3-Next 3 Gated DeltaNet : 1
gated attention; Nemotron-H's Mamba-2 / attention / MLP pattern). Also: tied embeddings,
LayerNorms with biases, biased linear layers, learned absolute positions (GPT-BigCode, OPT),
a LayerNorm on the embeddings (BLOOM) and a biased LM head (GPT-J). Parallel attention + MLP
blocks (GPT-J, Falcon: both read the same normed input and their outputs are summed) run the same
matmuls on the same rows as a sequential block, so a roofline prices them alike; only their norm
count differs (`norms_per_layer`).

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
from dataclasses import dataclass, field

from tokenprobe.errors import ConfigError
from tokenprobe.model.ffn import Moe, mlp_params
from tokenprobe.model.layers import (
    Attention,
    Layer,
    architecture_label,
    build_attention,
    build_layer,
)
from tokenprobe.model.shapes import (
    LAYER_KINDS,
    MAX_CONV_KERNEL,
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN_SIZE,
    MAX_INTERMEDIATE_SIZE,
    MAX_LAYERS,
    MAX_POSITION_EMBEDDINGS,
    MAX_VOCAB_SIZE,
    MAX_WINDOW_TOKENS,
    AttentionKind,
    DsaSpec,
    GdnSpec,
    MambaSpec,
    MlaSpec,
    MoeSpec,
    check_count,
    check_flags,
)

__all__ = [
    "LAYER_KINDS",
    "MAX_CONV_KERNEL",
    "MAX_EXPERTS",
    "MAX_HEADS",
    "MAX_HEAD_DIM",
    "MAX_HIDDEN_SIZE",
    "MAX_INTERMEDIATE_SIZE",
    "MAX_LAYERS",
    "MAX_POSITION_EMBEDDINGS",
    "MAX_VOCAB_SIZE",
    "MAX_WINDOW_TOKENS",
    "AttentionKind",
    "DsaSpec",
    "GdnSpec",
    "LayerSpec",
    "MambaSpec",
    "MlaSpec",
    "ModelSpec",
    "MoeSpec",
    "check_count",
]


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """What one decoder layer is made of (identical layers are grouped by `layer_groups`):
    its mixer kind ("none" for an MLP-only layer), its window, and its FFN (none, dense, MoE)."""

    attention: str  # an AttentionKind, or "none"
    window: int  # 0 for full attention
    moe: bool
    ffn: bool = True
    kv_heads: int = 0  # this layer's KV heads when they vary by layer (DeciLM); 0: the model's


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
    dsa: DsaSpec | None = None  # DeepSeek sparse attention on the MLA layers
    linear_attention: GdnSpec | None = None  # the "linear" layers' Gated DeltaNet
    mamba: MambaSpec | None = None  # the "mamba" layers' Mamba-2 mixer
    attn_output_gate: bool = False  # gated attention: q_proj also emits a sigmoid gate
    mixer_only: bool = False  # Nemotron-H: a layer is a mixer or an MLP, never both
    kv_heads_per_layer: tuple[int, ...] = ()  # DeciLM's variable GQA: one count per layer
    embedding_norm: bool = False  # BLOOM's word_embeddings_layernorm after the lookup
    lm_head_bias: bool = False  # GPT-J's lm_head carries a bias per vocabulary entry
    # the config's max_position_embeddings (0: not stated): an engine's default max_model_len
    # (vLLM V0 sizes its prefill-only step budget by it, sim/vllm_v0.py); not part of the shape
    max_context_tokens: int = field(default=0, compare=False)
    # the checkpoint's quantization method ("mxfp4") where it quantizes only the routed experts
    # and keeps attention, router, embeddings and LM head in 16 bits (config.json
    # quantization_config.modules_to_not_convert, gpt-oss: "model.layers.*.self_attn",
    # "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"); "" when not stated. A
    # deployment that runs those weights in this format reads the dense ones in 16 bits
    # (cost/ops.py `dense_weight_bytes`); it prices, so it is part of equality
    experts_only_quant: str = ""

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
        check_flags(self)
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                "num_key_value_heads",
                self.num_kv_heads,
                f"must divide num_attention_heads={self.num_heads}",
            )
        self._check_kv_heads_per_layer()
        if self.dsa is not None and self.mla is None:
            raise ConfigError("index_topk", self.dsa.index_topk, "DSA is modelled on MLA layers")
        self._check_layers()

    def _check_kv_heads_per_layer(self) -> None:
        if not self.kv_heads_per_layer:
            return
        if len(self.kv_heads_per_layer) != self.num_layers or self.mla is not None:
            raise ConfigError(
                "num_key_value_heads_per_layer",
                len(self.kv_heads_per_layer),
                f"one count per layer ({self.num_layers}), on GQA layers",
            )
        for kv in self.kv_heads_per_layer:
            check_count("num_key_value_heads_per_layer", kv, self.num_heads)
            if self.num_heads % kv:
                raise ConfigError(
                    "num_key_value_heads_per_layer",
                    kv,
                    f"each must divide num_attention_heads={self.num_heads}",
                )

    def _check_layers(self) -> None:
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ConfigError(
                "layer_types", len(self.layer_types), f"one entry per layer ({self.num_layers})"
            )
        for kind in self.layer_types:
            if kind not in LAYER_KINDS:
                raise ConfigError("layer_types", kind, f"one of {', '.join(LAYER_KINDS)}")
        if "sliding" in self.layer_types and self.sliding_window <= 0:
            raise ConfigError(
                "sliding_window",
                self.sliding_window,
                "a positive window when some layers use sliding attention",
            )
        for kind, part, key in (
            ("linear", self.linear_attention, "linear_num_value_heads"),
            ("mamba", self.mamba, "mamba_num_heads"),
        ):
            if kind in self.layer_types and part is None:
                raise ConfigError(key, None, f"required by the {kind!r} layers")
        if "mlp" in self.layer_types and not self.mixer_only:
            raise ConfigError("layer_types", "mlp", "MLP-only layers belong to mixer-only blocks")
        if self.layer_types and not any(k in ("full", "sliding") for k in self.layer_types):
            raise ConfigError("layer_types", "no attention layer", "at least one attention layer")
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
        if self.mixer_only:  # Nemotron-H block: the mixer, or the MLP
            if kind == "mlp":
                return LayerSpec("none", 0, False)
            return LayerSpec(kind, window, False, ffn=False)
        kv = self.kv_heads_per_layer[index] if self.kv_heads_per_layer else 0
        return LayerSpec(kind, window, is_moe, kv_heads=kv)

    @functools.cached_property
    def layer_groups(self) -> tuple[tuple[LayerSpec, int], ...]:
        """Distinct layer kinds and how many layers of each (the cost model loops over these)."""
        counts: dict[LayerSpec, int] = {}
        for i in range(self.num_layers):
            spec = self.layer(i)
            counts[spec] = counts.get(spec, 0) + 1
        return tuple(counts.items())

    @functools.cached_property
    def part_groups(self) -> tuple[tuple[Layer, int], ...]:
        """`layer_groups` as layers of parts (mixer, FFN, norms), with their counts."""
        return tuple((build_layer(self, spec), n) for spec, n in self.layer_groups)

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The model as its list of layers, in order (a hybrid interleaves kinds of parts)."""
        parts = {layer.spec: layer for layer, _ in self.part_groups}
        return tuple(parts[self.layer(i)] for i in range(self.num_layers))

    @functools.cached_property
    def attention(self) -> Attention:
        """The model's full-attention part (the one its KV-head split is defined by; with
        per-layer KV heads, the widest layer's: `num_kv_heads` is their maximum)."""
        return build_attention(self, 0)

    @property
    def kv_head_counts(self) -> tuple[int, ...]:
        """The distinct KV-head counts of the attention layers (one unless they vary by layer):
        a tensor-parallel split must divide, or be a multiple of, each."""
        return tuple(sorted(set(self.kv_heads_per_layer))) or (self.num_kv_heads,)

    @property
    def architecture(self) -> str:
        """A short kind: "dense GQA", "MoE MLA+DSA", "hybrid GDN+gated GQA MoE", ..."""
        return architecture_label(self)

    @functools.cached_property
    def row_parallel_outputs(self) -> int:
        """Row-parallel matmuls per forward pass (each ends in a TP all-reduce, Megatron-LM):
        one per mixer (o_proj / out_proj) and one per FFN (down_proj): 2 per layer for a
        decoder of attention + MLP layers."""
        return sum(
            ((layer.mixer is not None) + (layer.ffn is not None)) * n
            for layer, n in self.part_groups
        )

    # ---- parameter counts ------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the concatenated query heads (what o_proj reads back for GQA)."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def attention_params(self) -> int:
        """The full-attention part's weights (`attention.py`)."""
        return self.attention.params()

    def mlp_params(self, intermediate: int, bias: bool = False) -> int:
        return mlp_params(self.hidden_size, intermediate, self.gated_mlp, bias)

    def ffn_params(self, layer: LayerSpec, active: bool) -> int:
        """MLP (dense layer) or router + experts (MoE layer); `active` counts routed top-k only."""
        ffn = build_layer(self, layer).ffn
        return 0 if ffn is None else ffn.params(active)

    def layer_params(self, layer: LayerSpec, active: bool) -> int:
        return build_layer(self, layer).params(active)

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
        """The output projection (none when tied to the embedding), plus its bias (GPT-J)."""
        bias = self.vocab_size if self.lm_head_bias else 0
        return bias + (0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size)

    @property
    def norm_params(self) -> int:
        """One norm: RMSNorm has a weight, LayerNorm a weight and a bias."""
        return (2 if self.norm_bias else 1) * self.hidden_size

    def _params(self, active: bool) -> int:
        layers = sum(layer.params(active) * n for layer, n in self.part_groups)
        lookups = self.embedding_params + self.position_embedding_params
        norms = self.norm_params * (2 if self.embedding_norm else 1)  # final (+ embedding) norm
        return layers + lookups + self.lm_head_params + norms + self.extra_params

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
        return sum(
            layer.ffn.num_experts * layer.ffn.expert_params() * n
            for layer, n in self.part_groups
            if isinstance(layer.ffn, Moe)
        )

    # ---- cache: per token (KV) and per sequence (recurrent state) --------------------------
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token of one full-attention layer (`attention.py`): 2 × kv_heads
        × head_dim (GQA/MHA/MQA), kv_lora_rank + qk_rope_head_dim (MLA, no factor 2)."""
        return self.attention.cache_elements_per_token()

    def kv_elements_for_context(self, context_tokens: int) -> int:
        """Cached elements of one sequence of `context_tokens` (sliding layers keep a window;
        recurrent layers cache no token)."""
        total = 0
        for layer, n in self.part_groups:
            per_layer = layer.cache_elements_per_token()
            if not per_layer:
                continue
            window = layer.mixer.window if layer.mixer is not None else 0
            kept = min(context_tokens, window) if window else context_tokens
            total += n * kept * per_layer
        return total

    @functools.cached_property
    def kv_elements_per_token(self) -> int:
        """Per token of context when no sliding window has filled (all attention layers)."""
        return sum(layer.cache_elements_per_token() * n for layer, n in self.part_groups)

    @functools.cached_property
    def state_elements_per_seq(self) -> int:
        """Fixed state one sequence holds whatever its length (recurrent layers), elements."""
        return sum(layer.state_elements_per_seq() * n for layer, n in self.part_groups)

    def kv_bytes_per_token_per_gpu(self, kv_bytes_per_element: float, tp: int) -> float:
        """Cache bytes one token of context occupies on one GPU of a tp-way split, all layers
        (before the pipeline and attention-DP splits). Layers caching the same bytes are summed
        as one product, so a model of one kind of attention layer gives per_layer × layers."""
        by_value: dict[float, int] = {}
        for layer, n in self.part_groups:
            if layer.mixer is None:
                continue
            per_layer = layer.mixer.cache_bytes_per_token_per_gpu(kv_bytes_per_element, tp)
            if per_layer:
                by_value[per_layer] = by_value.get(per_layer, 0) + n
        return sum(per_layer * n for per_layer, n in by_value.items())
