"""The model families tokenprobe reads from a Hugging Face `config.json`, and what it refuses.

Each `model_type` tokenprobe knows has a `Family` entry naming the transformers configuration
class its defaults come from (src/transformers/models/<type>/configuration_<type>.py): the
default `tie_word_embeddings` (the Hub's config.json leaves a key out when it equals the class
default, so Gemma's and Falcon's configs carry no tie key and mean True), `head_dim` (Gemma 256,
Qwen3 128, gpt-oss 64, Llama 4 128; elsewhere hidden_size // num_attention_heads) and
`num_key_value_heads` (Mistral/Mixtral 8, Qwen2 32, ...; elsewhere the head count). Falcon,
GPT-BigCode, Nemotron-H, GPT-J, OPT and BLOOM (`hf_legacy.py`) have their own readers
(Falcon's and GPT-BigCode's KV heads come from `multi_query`, `new_decoder_architecture` and
`num_kv_heads`, not from `num_key_value_heads`;
Nemotron-H's layers from `hybrid_override_pattern`); Qwen3-Next / Qwen3.5 (Gated DeltaNet
hybrids), DeepSeek-V3.2 and GLM-5 (sparse attention) and MiniMax-M2 (attention-type list,
full-width q/k norms) add their keys to the decoder reader (`hf_hybrid.py`), DeciLM its
per-layer KV heads (`hf_legacy.py`).

The rule for keys (what keeps a config from being read silently wrong):
- A *shape key* is one whose name matches `SHAPE_KEY` (widths, heads, layers, experts and
  routers, MLA ranks, per-layer type lists, windows and chunks, SSM/Mamba/linear-attention/
  convolution state, biases, norms, tying, ...). Routing and loss settings that change no weight
  are `NEUTRAL_KEYS`.
- Every shape key of the config with a set value (not null, false, 0 or empty) must be one its
  family's reader reads (`Family.keys`); otherwise the config is refused with those key names,
  never guessed. A known family reading its documented keys passes.
- An unknown `model_type` (or none) is read as a plain dense decoder (Llama-style names, the
  PretrainedConfig default tie_word_embeddings=True, per-layer `layer_types` of full/sliding
  attention, a gated MLP unless `hidden_act` is gelu, gelu_new or relu), so it passes only
  when all its shape keys are that reader's: a Mamba, hybrid or linear-attention config, or an
  MoE one (`num_experts_per_tok`) of a family not listed here, is refused naming the keys it
  would have had to ignore.
- Values the family reads are checked: integers (not bools, not NaN, not strings) within the
  limits of `spec.py`, booleans for flags, `layer_types` entries of the kinds priced here
  (full, sliding, and Llama 4's chunked attention), MoE placements that are every layer (Qwen
  `decoder_sparse_step` 1 and no `mlp_only_layers`, DeepSeek `moe_layer_freq` 1).
Every refusal is one `ConfigError` naming the field (or the keys) and the value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenprobe.errors import ConfigError

SHAPE_KEY = re.compile(
    r"hidden_size|^n_embed$|^n_embd$|^d_model$|^dim$|layers?$|^n_layer|heads?$|^n_head|head_dim"
    r"|multi_query|head_kv|intermediate|ffn|^n_inner$|^d_ff$|vocab|^n_positions$|expert|moe"
    r"|router|lora_rank|window|chunk|layer_types|block_type|attn_type|attention_type|sparse_step"
    r"|dense|nextn|mtp|no_rope|ssm|mamba|conv|state_size|d_state|time_step|linear_|recurrent"
    r"|rwkv|hybrid|parallel_attn|new_decoder|num_ln|bias$|qk_.*norm|tie_word|cross_attention"
    r"|encoder"
)
# Shape-sounding keys that change no weight and no cache: routing and loss settings, and the
# multi-token-prediction layers (DeepSeek-V3, GLM-4.5), which serving does not run by default and
# which `params_total` leaves out (see spec.py).
NEUTRAL_KEYS = frozenset(
    {
        "output_router_logits",
        "router_aux_loss_coef",
        "router_jitter_noise",
        "router_z_loss_coef",
        "num_nextn_predict_layers",
        "num_mtp_layers",
        "mtp_num_hidden_layers",  # Qwen3.5's MTP layer, likewise not run or counted
        "mtp_use_dedicated_embeddings",
        "use_mtp",  # MiniMax-M2's 3 MTP modules of 1 layer each, likewise
        "num_mtp_modules",
        "mtp_transformer_layers",
    }
)

_BASE = frozenset(
    {
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
        "tie_word_embeddings",
    }
)
_QWEN_WINDOWS = frozenset({"use_sliding_window", "sliding_window", "max_window_layers"})
_QWEN_MOE = frozenset(
    {
        "num_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "decoder_sparse_step",
        "mlp_only_layers",
    }
)
_MLA = frozenset(
    {"kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}
)
_DEEPSEEK_MOE = frozenset(
    {
        "n_routed_experts",
        "n_shared_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "first_k_dense_replace",
        "n_group",
        "topk_group",
    }
)


_GDN = frozenset(
    {
        "layer_types",
        "full_attention_interval",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "attn_output_gate",
        "mamba_ssm_dtype",  # the recurrent state's dtype (Qwen3.5: float32)
    }
)
_DSA = frozenset({"index_n_heads", "index_head_dim", "index_topk"})


@dataclass(frozen=True)
class Family:
    """How one `model_type` is read. `windows`: how layers get their attention kind ("" none,
    "all" every layer slides when `sliding_window` is set, "layer_types" only from that list,
    "alternate" local/global from layer 0, "qwen", "gemma3", "llama4"); `moe`: which keys name
    the experts; `bias`: "attention_bias" (q, k, v, o), "attention_bias_qkv" (q, k, v only),
    "qkv" (q, k, v always), "use_bias" (every linear layer)."""

    source: str
    keys: frozenset[str]
    tie: bool
    head_dim: int | None = None  # None: hidden_size // num_attention_heads
    kv_heads: int | None = None  # None: num_attention_heads
    windows: str = ""
    moe: str = ""
    bias: str = ""
    qk_norm: str = ""  # "always" or the flag's key
    norms: int = 2
    gated: bool | None = True  # None: from hidden_act (unknown families)
    norm_bias: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    hybrid: str = ""  # "gdn": Gated DeltaNet layers (Qwen3-Next); "dsa": sparse MLA (V3.2,
    # GLM-5); "minimax": MiniMax-M2's attention-type list and full-width q/k norms


_TF = "transformers src/transformers/models/"
FAMILIES: dict[str, Family] = {
    "llama": Family(
        _TF + "llama/configuration_llama.py LlamaConfig",
        _BASE | {"attention_bias", "mlp_bias"},
        tie=False,
        bias="attention_bias",
    ),
    "mistral": Family(
        _TF + "mistral/configuration_mistral.py MistralConfig",
        _BASE | {"sliding_window"},
        tie=False,
        kv_heads=8,
        windows="all",
    ),
    "mixtral": Family(
        _TF + "mixtral/configuration_mixtral.py MixtralConfig",
        _BASE | {"sliding_window", "num_local_experts", "num_experts_per_tok"},
        tie=False,
        kv_heads=8,
        windows="all",
        moe="mixtral",
        defaults={"num_local_experts": 8, "num_experts_per_tok": 2},
    ),
    "qwen2": Family(
        _TF + "qwen2/configuration_qwen2.py Qwen2Config (q/k/v biases: modeling_qwen2.py)",
        _BASE | _QWEN_WINDOWS | {"layer_types"},
        tie=False,
        kv_heads=32,
        windows="qwen",
        bias="qkv",
    ),
    "qwen2_moe": Family(
        _TF + "qwen2_moe/configuration_qwen2_moe.py Qwen2MoeConfig",
        _BASE | _QWEN_WINDOWS | _QWEN_MOE | {"shared_expert_intermediate_size", "qkv_bias"},
        tie=False,
        kv_heads=16,
        windows="qwen",
        moe="qwen",
        bias="qkv",
    ),
    "qwen3": Family(
        _TF + "qwen3/configuration_qwen3.py Qwen3Config",
        _BASE | _QWEN_WINDOWS | {"layer_types", "attention_bias"},
        tie=False,
        head_dim=128,
        kv_heads=32,
        windows="qwen",
        bias="attention_bias",
        qk_norm="always",
    ),
    "qwen3_moe": Family(
        _TF + "qwen3_moe/configuration_qwen3_moe.py Qwen3MoeConfig (Qwen3-Coder-480B's config also "
        "says use_qk_norm: true, which Qwen3MoeAttention always applies)",
        _BASE | _QWEN_WINDOWS | _QWEN_MOE | {"attention_bias", "use_qk_norm"},
        tie=False,
        kv_heads=4,
        windows="qwen",
        moe="qwen",
        bias="attention_bias",
        qk_norm="always",
    ),
    "gemma": Family(
        _TF + "gemma/configuration_gemma.py GemmaConfig",
        _BASE | {"attention_bias"},
        tie=True,
        head_dim=256,
        kv_heads=16,
        bias="attention_bias",
    ),
    "gemma2": Family(
        _TF + "gemma2/configuration_gemma2.py Gemma2Config",
        _BASE | {"attention_bias", "sliding_window", "sliding_window_size", "layer_types"},
        tie=True,
        head_dim=256,
        kv_heads=4,
        windows="alternate",
        bias="attention_bias",
        norms=4,
        defaults={"sliding_window": 4096},
    ),
    "gemma3_text": Family(
        _TF + "gemma3/configuration_gemma3.py Gemma3TextConfig",
        _BASE | {"attention_bias", "sliding_window", "sliding_window_pattern", "layer_types"},
        tie=True,
        head_dim=256,
        kv_heads=4,
        windows="gemma3",
        bias="attention_bias",
        qk_norm="always",
        norms=4,
        # the Hub's Gemma 3 configs leave these at the Gemma3TextConfig defaults
        defaults={"vocab_size": 262_208, "sliding_window": 4096, "sliding_window_pattern": 6},
    ),
    "deepseek_v2": Family(
        _TF + "deepseek_v2/configuration_deepseek_v2.py DeepseekV2Config",
        _BASE | _MLA | _DEEPSEEK_MOE | {"moe_layer_freq", "attention_bias"},
        tie=False,
        moe="deepseek",
        defaults={"n_shared_experts": 2, "first_k_dense_replace": 0},
    ),
    "deepseek_v3": Family(
        _TF + "deepseek_v3/configuration_deepseek_v3.py DeepseekV3Config",
        _BASE | _MLA | _DEEPSEEK_MOE | {"moe_layer_freq", "attention_bias"},
        tie=False,
        moe="deepseek",
        defaults={"n_shared_experts": 1, "first_k_dense_replace": 3},
    ),
    "deepseek_v32": Family(
        "github.com/deepseek-ai/DeepSeek-V3.2-Exp inference/model.py ModelArgs (DeepSeek-V3 "
        "with the lightning indexer)",
        _BASE | _MLA | _DEEPSEEK_MOE | _DSA | {"moe_layer_freq", "attention_bias"},
        tie=False,
        moe="deepseek",
        defaults={"n_shared_experts": 1, "first_k_dense_replace": 3},
        hybrid="dsa",
    ),
    "glm_moe_dsa": Family(
        _TF + "glm_moe_dsa/configuration_glm_moe_dsa.py GlmMoeDsaConfig (GLM-5: DeepSeek-V3.2's "
        "MLA with the lightning indexer on every layer, dense-first MoE with a shared expert)",
        _BASE
        | _MLA
        | _DEEPSEEK_MOE
        | _DSA
        | {"moe_layer_freq", "attention_bias"}
        | {"mlp_layer_types", "layer_types"},
        tie=False,
        moe="deepseek",
        defaults={
            "n_shared_experts": 1,
            "first_k_dense_replace": 3,
            "index_n_heads": 32,
            "index_head_dim": 128,
            "index_topk": 2048,
        },
        hybrid="dsa",
    ),
    "minimax_m2": Family(
        _TF + "minimax_m2/configuration_minimax_m2.py MiniMaxM2Config; vLLM minimax_m2.py (every "
        "layer full GQA with q/k RMSNorms over all heads, Mixtral-style experts of "
        "intermediate_size, no shared expert)",
        _BASE
        | {"num_local_experts", "num_experts_per_tok", "use_qk_norm", "qk_norm_type"}
        | {"attn_type_list", "shared_intermediate_size", "mlp_intermediate_size"}
        | {"use_routing_bias", "attention_bias"}
        # MiniMax-01's residual scalars, if a config still carries them: no weight, and read by
        # no module of vLLM's MiniMaxM2 (its linear-attention layers are gone: attn_type_list)
        | {"layernorm_linear_attention_alpha", "layernorm_linear_attention_beta"},
        tie=False,
        head_dim=128,
        kv_heads=8,
        moe="mixtral",
        bias="attention_bias_qkv",
        qk_norm="always",  # vLLM and transformers build q_norm/k_norm whatever use_qk_norm says
        defaults={"num_local_experts": 256, "num_experts_per_tok": 8},
        hybrid="minimax",
    ),
    "qwen3_next": Family(
        _TF + "qwen3_next/configuration_qwen3_next.py Qwen3NextConfig, modeling_qwen3_next.py",
        _BASE
        | _QWEN_WINDOWS
        | _QWEN_MOE
        | _GDN
        | {"shared_expert_intermediate_size"}
        | {"attention_bias"},
        tie=False,
        head_dim=256,
        kv_heads=2,
        moe="qwen",
        bias="attention_bias",
        qk_norm="always",
        hybrid="gdn",
    ),
    "qwen3_5_moe_text": Family(
        _TF + "qwen3_5_moe/configuration_qwen3_5_moe.py Qwen3_5MoeTextConfig (Qwen3-Next's "
        "layers; a vision tower beside them is not counted)",
        _BASE | _QWEN_MOE | _GDN | {"shared_expert_intermediate_size", "attention_bias"},
        tie=False,
        head_dim=256,
        kv_heads=2,
        moe="qwen",
        bias="attention_bias",
        qk_norm="always",
        hybrid="gdn",
    ),
    "nemotron_h": Family(
        _TF + "nemotron_h/configuration_nemotron_h.py NemotronHConfig, modeling_nemotron_h.py",
        frozenset(
            {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"}
            | {"head_dim", "attention_head_dim", "intermediate_size", "vocab_size"}
            | {"tie_word_embeddings", "hybrid_override_pattern", "layers_block_type"}
            | {"layer_types", "mamba_num_heads", "mamba_head_dim", "n_groups", "mamba_n_groups"}
            | {"ssm_state_size", "conv_kernel", "mamba_d_conv", "chunk_size", "mamba_chunk_size"}
            | {"use_conv_bias", "mamba_proj_bias", "mamba_ssm_cache_dtype", "use_bias"}
            | {"attention_bias", "mlp_bias", "sliding_window"}
            # no weight: the mixer's activation, kernel choice and dt initialisation
            | {"mamba_hidden_act", "use_mamba_kernels", "time_step_rank", "time_step_min"}
            | {"time_step_max", "time_step_floor", "time_step_limit"}
        ),
        tie=False,
        kv_heads=8,
        gated=False,
        norms=1,
    ),
    "gpt_oss": Family(
        _TF + "gpt_oss/configuration_gpt_oss.py GptOssConfig",
        _BASE
        | {"num_local_experts", "num_experts_per_tok", "experts_per_token"}
        | {"sliding_window", "layer_types", "attention_bias"},
        tie=False,
        head_dim=64,
        kv_heads=8,
        windows="alternate",
        moe="gpt_oss",
        bias="attention_bias",
        defaults={"sliding_window": 128},
    ),
    "glm4_moe": Family(
        _TF + "glm4_moe/configuration_glm4_moe.py Glm4MoeConfig (o_proj has no bias)",
        _BASE | _DEEPSEEK_MOE | {"use_qk_norm", "attention_bias"},
        tie=False,
        kv_heads=8,
        moe="deepseek",
        bias="attention_bias_qkv",
        qk_norm="use_qk_norm",
        defaults={"n_shared_experts": 1, "first_k_dense_replace": 1},
    ),
    "llama4_text": Family(
        _TF + "llama4/configuration_llama4.py Llama4TextConfig",
        _BASE
        | {"num_local_experts", "num_experts_per_tok", "interleave_moe_layer_step", "moe_layers"}
        | {"intermediate_size_mlp", "attention_chunk_size", "no_rope_layers", "layer_types"}
        | {"no_rope_layer_interval", "use_qk_norm", "attention_bias"},
        tie=False,
        head_dim=128,
        kv_heads=8,
        windows="llama4",
        moe="llama4",
        bias="attention_bias",
    ),
    "phi3": Family(
        _TF + "phi3/configuration_phi3.py Phi3Config (every layer slides: modeling_phi3.py)",
        _BASE | {"sliding_window"},
        tie=False,
        windows="all",
    ),
    "starcoder2": Family(
        _TF + "starcoder2/configuration_starcoder2.py Starcoder2Config",
        _BASE | {"sliding_window", "use_bias"},
        tie=True,
        kv_heads=2,
        windows="all",
        bias="use_bias",
        gated=False,
        norm_bias=True,
    ),
    "falcon": Family(
        _TF + "falcon/configuration_falcon.py FalconConfig, modeling_falcon.py",
        frozenset(
            {"hidden_size", "n_embed", "num_hidden_layers", "n_layer", "num_attention_heads"}
            | {"n_head", "num_kv_heads", "n_head_kv", "multi_query", "new_decoder_architecture"}
            | {"parallel_attn", "num_ln_in_parallel_attn", "bias", "ffn_hidden_size", "head_dim"}
            | {"vocab_size", "tie_word_embeddings"}
        ),
        tie=True,
    ),
    "gpt_bigcode": Family(
        _TF + "gpt_bigcode/configuration_gpt_bigcode.py GPTBigCodeConfig, modeling_gpt_bigcode.py",
        frozenset(
            {"n_embd", "hidden_size", "n_head", "num_attention_heads", "n_layer"}
            | {"num_hidden_layers", "n_positions", "n_inner", "multi_query", "vocab_size"}
            | {"num_key_value_heads", "tie_word_embeddings", "add_cross_attention"}
        ),
        tie=True,
        defaults={"n_positions": 1024},
    ),
    # the older decoders (readers and sources: hf_legacy.py)
    "gptj": Family(
        _TF + "gptj/configuration_gptj.py GPTJConfig, modeling_gptj.py",
        frozenset({"n_embd", "hidden_size", "n_head", "num_attention_heads", "n_layer"})
        | {"num_hidden_layers", "n_inner", "n_positions", "vocab_size", "tie_word_embeddings"},
        tie=False,
    ),
    "opt": Family(
        _TF + "opt/configuration_opt.py OPTConfig, modeling_opt.py",
        frozenset({"hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim"})
        | {"vocab_size", "tie_word_embeddings", "enable_bias", "word_embed_proj_dim"},
        tie=True,
    ),
    "bloom": Family(
        _TF + "bloom/configuration_bloom.py BloomConfig, modeling_bloom.py",
        frozenset({"hidden_size", "n_embed", "n_layer", "num_hidden_layers", "n_head"})
        | {"num_attention_heads", "vocab_size", "tie_word_embeddings"},
        tie=True,
    ),
    "deci": Family(
        "Deci/DeciLM-7B configuration_decilm.py DeciLMConfig (LlamaConfig plus "
        "num_key_value_heads_per_layer), modeling_decilm.py",
        _BASE | {"num_key_value_heads_per_layer", "attention_bias", "mlp_bias"},
        tie=False,
        bias="attention_bias",
        hybrid="vgqa",
    ),
}
# model_types that are another's text model (multimodal wrappers read their text_config)
_SAME = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "qwen3_5": "qwen3_5_moe_text",  # dense Qwen3.5: the same layers without experts
    "qwen3_5_text": "qwen3_5_moe_text",
    # Kimi-K2 (moonshotai/Kimi-K2-Instruct config.json): "architectures":
    # ["DeepseekV3ForCausalLM"], DeepSeek-V3's configuration code and keys under its own name
    "kimi_k2": "deepseek_v3",
    # Aquila-7B (BAAI, trust_remote_code): modeling_aquila.py is transformers' Llama under
    # Aquila names; AquilaConfig's keys and defaults are LlamaConfig's (tie False)
    "aquila": "llama",
}
GENERIC = Family(
    "transformers src/transformers/configuration_utils.py PretrainedConfig (tie default True)",
    _BASE | {"layer_types", "sliding_window", "attention_bias", "mlp_bias"},
    tie=True,
    windows="layer_types",
    bias="attention_bias",
    gated=None,
)


def family_of(model_type: str) -> Family:
    return FAMILIES.get(_SAME.get(model_type, model_type), GENERIC)


def is_set(value: Any) -> bool:
    """A value that switches something on: not null, false, 0, "" or an empty list/object."""
    if isinstance(value, float) and math.isnan(value):
        return True
    return bool(value)


def check_shape_keys(cfg: Mapping[str, Any], model_type: str, family: Family) -> None:
    """Refuse a config with set shape keys its family's reader does not read (module docstring)."""
    unread = sorted(
        key
        for key, value in cfg.items()
        if SHAPE_KEY.search(key)
        and key not in family.keys
        and key not in NEUTRAL_KEYS
        and is_set(value)
    )
    if not unread:
        return
    if family is GENERIC:
        known = ", ".join(sorted({*FAMILIES, *_SAME}))
        why = (
            f"is not a family tokenprobe reads ({known}); read as a plain dense decoder it has "
            f"shape keys that reader cannot use: {', '.join(unread)}"
        )
    else:
        why = f"has shape keys tokenprobe does not read for this family: {', '.join(unread)}"
    raise ConfigError("model_type", model_type, why)
