"""Readers of the HF keys of the older decoders: GPT-J, OPT, BLOOM, and DeciLM's variable GQA.

Each value is checked where it is read (`ConfigReader`, hf_reader.py); a refusal is one ConfigError
naming the field. What each modeling file builds (transformers src/transformers/models/<type>/
modeling_<type>.py; vLLM vllm/model_executor/models/<type>.py serves the same weights):
- GPT-J (`GPTJBlock`): one LayerNorm (`ln_1`, weight + bias) feeding attention and the MLP in
  parallel (`hidden = attn(ln_1(x)) + mlp(ln_1(x)) + x`); q/k/v/out_proj without biases;
  `fc_in` / `fc_out` of `n_inner` (None: 4·n_embd) with biases and gelu_new; head_dim =
  n_embd / n_head (256 for GPT-J-6B) with rotary embeddings on the first `rotary_dim` (64) of
  each head: RoPE weighs nothing, and `n_positions` is the context bound, not a table; an untied
  `lm_head` with a bias (`nn.Linear(n_embd, vocab_size)`; GPTJConfig tie_word_embeddings False).
- OPT (`OPTDecoderLayer`): pre-LN (`do_layer_norm_before`) with two LayerNorms per layer,
  q/k/v/out_proj and fc1/fc2 (`ffn_dim`, ReLU) with biases (`enable_bias`, default True), a
  learned position table of `max_position_embeddings` + 2 rows
  (`OPTLearnedPositionalEmbedding`: "OPT is set up so that if padding_idx is specified then
  offset the embedding ids by 2"), a final LayerNorm, and the LM head tied to the token
  embedding. OPT-350m's post-LN layout and its `word_embed_proj_dim` projections
  (project_in / project_out) are refused, named.
- BLOOM (`BloomBlock`): ALiBi positions (no weights), a LayerNorm on the embeddings
  (`word_embeddings_layernorm`), fused `query_key_value` (3·hidden) and `dense` with biases,
  an MLP of 4·hidden (`dense_h_to_4h`, fixed in `BloomMLP`) with biases and GELU, two
  LayerNorms per layer, `ln_f`, LM head tied (BloomConfig).
- DeciLM (`model_type` "deci", Deci/DeciLM-7B modeling_decilm.py on transformers' Llama):
  Llama's layers with `num_key_value_heads_per_layer[i]` KV heads in layer i (variable GQA).
  The model's `num_kv_heads` is their maximum. vLLM (vllm/model_executor/models/decilm.py
  `DeciLMForCausalLM`) instead serves every layer at that maximum ("PagedAttention does not work
  well with variable GQA, so we normalize the weights upon loading, and use uniform GQA with
  the max value instead"); a deployment priced as vLLM runs it passes the model with
  `uniform_gqa(model)`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tokenprobe.errors import ConfigError
from tokenprobe.model.shapes import divided_head_dim
from tokenprobe.model.spec import (
    MAX_HEADS,
    MAX_HIDDEN_SIZE,
    MAX_INTERMEDIATE_SIZE,
    MAX_LAYERS,
    MAX_POSITION_EMBEDDINGS,
    MAX_VOCAB_SIZE,
    ModelSpec,
)

if TYPE_CHECKING:
    from tokenprobe.model.families import Family
    from tokenprobe.model.hf_reader import ConfigReader

OPT_POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding.offset


def ungated_decoder(
    *,
    hidden: int,
    heads: int,
    kv_heads: int,
    layers: int,
    intermediate: int,
    vocab: int,
    tie: bool,
    bias: bool,
    head_dim: int | None = None,
) -> dict[str, Any]:
    """The shape of a GPT-2-lineage decoder (GPT-J, OPT, BLOOM, Falcon, GPT-BigCode): an ungated
    2-matrix MLP, LayerNorms with biases, and `bias` on the attention and MLP matrices; each
    reader adds what its block differs in (norm count, position table, LM-head bias)."""
    return {
        "hidden_size": hidden,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": divided_head_dim(hidden, heads) if head_dim is None else head_dim,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": tie,
        "gated_mlp": False,
        "qkv_bias": bias,
        "o_bias": bias,
        "mlp_bias": bias,
        "norm_bias": True,
    }


def gptj(c: ConfigReader, fam: Family) -> dict[str, Any]:
    """GPT-J (module docstring)."""
    hidden = c.count("n_embd", "hidden_size", hi=MAX_HIDDEN_SIZE)
    heads = c.count("n_head", "num_attention_heads", hi=MAX_HEADS)
    shape = ungated_decoder(
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        layers=c.count("n_layer", "num_hidden_layers", hi=MAX_LAYERS),
        intermediate=c.count("n_inner", hi=MAX_INTERMEDIATE_SIZE, default=4 * hidden),
        vocab=c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        tie=c.flag("tie_word_embeddings", fam.tie),
        bias=False,  # q/k/v/out_proj without biases
    )
    return {
        **shape,
        "mlp_bias": True,  # fc_in / fc_out carry biases
        "norms_per_layer": 1,  # ln_1 feeds both branches of the parallel block
        "lm_head_bias": True,
    }


def opt(c: ConfigReader, fam: Family) -> dict[str, Any]:
    """OPT (module docstring)."""
    hidden = c.count("hidden_size", hi=MAX_HIDDEN_SIZE)
    heads = c.count("num_attention_heads", hi=MAX_HEADS)
    proj = c.count("word_embed_proj_dim", hi=MAX_HIDDEN_SIZE, default=hidden)
    if proj != hidden:
        raise ConfigError(
            "word_embed_proj_dim", proj, f"{hidden} (project_in/out layers are not modelled)"
        )
    if not c.flag("do_layer_norm_before", True) or c.flag("_remove_final_layer_norm", False):
        raise ConfigError("do_layer_norm_before", False, "pre-LN OPT with its final LayerNorm")
    if not c.flag("layer_norm_elementwise_affine", True):
        raise ConfigError("layer_norm_elementwise_affine", False, "LayerNorms with weights")
    bias = c.flag("enable_bias", True)
    positions = c.count("max_position_embeddings", hi=MAX_POSITION_EMBEDDINGS - 2)
    shape = ungated_decoder(
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        layers=c.count("num_hidden_layers", hi=MAX_LAYERS),
        intermediate=c.count("ffn_dim", hi=MAX_INTERMEDIATE_SIZE),
        vocab=c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        tie=c.flag("tie_word_embeddings", fam.tie),
        bias=bias,
    )
    return {**shape, "position_embeddings": positions + OPT_POSITION_OFFSET}


def bloom(c: ConfigReader, fam: Family) -> dict[str, Any]:
    """BLOOM (module docstring)."""
    hidden = c.count("hidden_size", "n_embed", hi=MAX_HIDDEN_SIZE)
    heads = c.count("n_head", "num_attention_heads", hi=MAX_HEADS)
    shape = ungated_decoder(
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        layers=c.count("n_layer", "num_hidden_layers", hi=MAX_LAYERS),
        intermediate=4 * hidden,  # BloomMLP: dense_h_to_4h, no config key
        vocab=c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        tie=c.flag("tie_word_embeddings", fam.tie),
        bias=True,
    )
    return {**shape, "embedding_norm": True}


def kv_heads_per_layer(c: ConfigReader, layers: int, heads: int) -> tuple[int, ...]:
    """DeciLM's `num_key_value_heads_per_layer`: one count per layer, each dividing the heads
    (checked again by ModelSpec)."""
    counts = c.entries("num_key_value_heads_per_layer", int, MAX_LAYERS)
    if len(counts) != layers:
        raise ConfigError(
            "num_key_value_heads_per_layer", f"{len(counts)} entries", f"one per layer ({layers})"
        )
    for kv in counts:
        if not 1 <= kv <= heads or heads % kv:
            raise ConfigError(
                "num_key_value_heads_per_layer", kv, f"each must divide {heads} attention heads"
            )
    return tuple(counts)


def uniform_gqa(model: ModelSpec) -> ModelSpec:
    """`model` with every layer at its widest layer's KV heads: what vLLM serves for DeciLM
    (module docstring); a model whose layers agree is returned as it is."""
    if not model.kv_heads_per_layer:
        return model
    return replace(model, kv_heads_per_layer=(), num_kv_heads=max(model.kv_heads_per_layer))
