"""Readers of the HF keys of the newer kinds of layer: Gated DeltaNet hybrids (Qwen3-Next,
Qwen3.5), Mamba-2 hybrids (Nemotron-H) and DeepSeek sparse attention (DeepSeek-V3.2).

Each value is checked where it is read (`ConfigReader`, hf_reader.py); a refusal is one ConfigError
naming the field. Sources of the conventions:
- Qwen3-Next / Qwen3.5: transformers `Qwen3NextConfig` (`layer_types` default: layer i is
  "full_attention" when (i + 1) % `full_attention_interval` == 0, else "linear_attention";
  interval 4), `Qwen3NextAttention` (q_proj emits heads·head_dim·2: query and output gate;
  Qwen3.5 names it `attn_output_gate`), `Qwen3NextGatedDeltaNet` (the `linear_*` keys);
  Qwen3.5's `mamba_ssm_dtype` (float32) sets the delta-rule state's dtype, as vLLM does
  (vllm/model_executor/models/qwen3_5.py `get_mamba_state_dtype_from_config` reads
  `hf_text_config.mamba_ssm_dtype`); without it the state is in the model dtype.
- Nemotron-H: transformers `NemotronHConfig` (`hybrid_override_pattern`: M = Mamba-2 mixer,
  * = attention, - = MLP, E = MoE; `mamba_*`, `n_groups`, `ssm_state_size`, `conv_kernel`,
  `chunk_size`, `use_conv_bias`), `NemotronHBlock` (one RMSNorm and one mixer per layer), an
  ungated ReLU² MLP (`mlp_hidden_act` relu2), `time_step_*` are initialisation settings; the
  SSM state is kept in fp32 unless `mamba_ssm_cache_dtype` says otherwise (vLLM's NemotronH
  default, `NemotronHForCausalLMConfig`).
- DeepSeek-V3.2: github.com/deepseek-ai/DeepSeek-V3.2-Exp inference/model.py `ModelArgs`
  (`index_n_heads` 64, `index_head_dim` 128, `index_topk` 2048) on the DeepSeek-V3 reader.
- GLM-5 (`glm_moe_dsa`): transformers `GlmMoeDsaConfig` (huggingface/transformers@008e5743
  src/transformers/models/glm_moe_dsa/configuration_glm_moe_dsa.py): the same MLA + indexer
  layers; `mlp_layer_types` defaults to `first_k_dense_replace` dense layers then MoE,
  `layer_types` to "deepseek_sparse_attention" on every layer, `indexer_types` to "full" (each
  layer runs its indexer) unless `index_topk_freq` / `index_topk_pattern` make some "shared"
  (reusing an earlier layer's top-k, with no indexer of their own): not modelled, refused.
- MiniMax-M2: vLLM vllm/model_executor/models/minimax_m2.py (vllm-project/vllm@01d99586):
  `attn_type_list` 1 = softmax attention on every layer (0 was MiniMax-01's lightning
  attention), `q_norm` / `k_norm` RMSNorms over all heads·head_dim (`qk_norm_type` per_layer),
  experts of `intermediate_size`, no shared MLP (`shared_intermediate_size` 0;
  `mlp_intermediate_size` is read by no module of vLLM's or transformers' MiniMaxM2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tokenprobe.errors import ConfigError
from tokenprobe.model.spec import (
    MAX_CONV_KERNEL,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN_SIZE,
    MAX_INTERMEDIATE_SIZE,
    MAX_LAYERS,
    MAX_VOCAB_SIZE,
    MAX_WINDOW_TOKENS,
    AttentionKind,
    DsaSpec,
    GdnSpec,
    MambaSpec,
)

if TYPE_CHECKING:
    from tokenprobe.model.hf_reader import ConfigReader

GDN_LAYER_KINDS: dict[str, AttentionKind] = {
    "linear_attention": "linear",
    "full_attention": "full",
}
# hybrid_override_pattern characters (NemotronHConfig._pattern_to_list); "E" (MoE) is refused
NEMOTRON_PATTERN: dict[str, AttentionKind] = {"M": "mamba", "*": "full", "-": "mlp"}
NEMOTRON_BLOCKS: dict[str, AttentionKind] = {
    "mamba": "mamba",
    "linear_attention": "mamba",  # NemotronHConfig's newer name for a Mamba-2 block
    "attention": "full",
    "full_attention": "full",
    "mlp": "mlp",
}


def _fp32(c: ConfigReader, *keys: str) -> bool:
    for key in keys:
        if c.has(key):
            value = c.text(key, "")
            if value not in ("float32", "bfloat16", "float16", "auto"):
                raise ConfigError(key, value, "float32, bfloat16, float16 or auto")
            return value == "float32"
    return False


# ---- Gated DeltaNet hybrids -------------------------------------------------------------------


def gdn_fields(c: ConfigReader, layers: int) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5: per-layer kinds, the Gated DeltaNet shape, the attention gate."""
    if c.flag("use_sliding_window", False):
        raise ConfigError("use_sliding_window", True, "sliding layers of a GDN hybrid")
    if c.has("layer_types"):
        names = c.entries("layer_types", str, MAX_LAYERS)
        if len(names) != layers:
            raise ConfigError("layer_types", f"{len(names)} entries", f"one per layer ({layers})")
        for name in names:
            if name not in GDN_LAYER_KINDS:
                raise ConfigError("layer_types", name, f"one of {', '.join(GDN_LAYER_KINDS)}")
        kinds = tuple(GDN_LAYER_KINDS[name] for name in names)
    else:
        interval = c.count("full_attention_interval", hi=MAX_LAYERS, default=4)
        kinds = tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(layers))
    gdn = GdnSpec(
        key_heads=c.count("linear_num_key_heads", hi=MAX_HEADS, default=16),
        value_heads=c.count("linear_num_value_heads", hi=MAX_HEADS, default=32),
        key_head_dim=c.count("linear_key_head_dim", hi=MAX_HEAD_DIM, default=128),
        value_head_dim=c.count("linear_value_head_dim", hi=MAX_HEAD_DIM, default=128),
        conv_kernel=c.count("linear_conv_kernel_dim", hi=MAX_CONV_KERNEL, default=4),
        fp32_state=_fp32(c, "mamba_ssm_dtype"),
    )
    return {
        "layer_types": kinds if "linear" in kinds else (),
        "sliding_window": 0,
        "linear_attention": gdn if "linear" in kinds else None,
        "attn_output_gate": c.flag("attn_output_gate", True),
    }


# ---- DeepSeek sparse attention ----------------------------------------------------------------


def dsa_spec(c: ConfigReader) -> DsaSpec | None:
    if not c.has("index_topk"):
        return None
    return DsaSpec(
        index_heads=c.count("index_n_heads", hi=MAX_HEADS),
        index_head_dim=c.count("index_head_dim", hi=MAX_HEAD_DIM),
        index_topk=c.count("index_topk", hi=MAX_WINDOW_TOKENS),
    )


# ---- Nemotron-H -------------------------------------------------------------------------------


def _nemotron_kinds(c: ConfigReader) -> tuple[AttentionKind, ...]:
    if c.has("hybrid_override_pattern"):
        pattern = c.text("hybrid_override_pattern", "")
        if len(pattern) > MAX_LAYERS or not pattern:
            raise ConfigError("hybrid_override_pattern", pattern, "one character per layer")
        bad = sorted({ch for ch in pattern if ch not in NEMOTRON_PATTERN})
        if bad:
            raise ConfigError(
                "hybrid_override_pattern", "".join(bad),
                "M (Mamba-2), * (attention) and - (MLP) layers are priced (E: MoE is not)",
            )  # fmt: skip
        return tuple(NEMOTRON_PATTERN[ch] for ch in pattern)
    key = "layers_block_type" if c.has("layers_block_type") else "layer_types"
    names = c.entries(key, str, MAX_LAYERS)
    for name in names:
        if name not in NEMOTRON_BLOCKS:
            raise ConfigError(key, name, f"one of {', '.join(NEMOTRON_BLOCKS)} (moe is not priced)")
    if not names:
        raise ConfigError(key, names, "one block type per layer")
    return tuple(NEMOTRON_BLOCKS[name] for name in names)


def nemotron_h(c: ConfigReader, tie: bool) -> dict[str, Any]:
    """Nemotron-H (module docstring): every layer is one mixer (Mamba-2 or attention) or one
    ungated MLP, behind one RMSNorm."""
    kinds = _nemotron_kinds(c)
    layers = c.count("num_hidden_layers", hi=MAX_LAYERS, default=len(kinds))
    if layers != len(kinds):
        raise ConfigError("num_hidden_layers", layers, f"the pattern's {len(kinds)} layers")
    hidden = c.count("hidden_size", hi=MAX_HIDDEN_SIZE)
    heads = c.count("num_attention_heads", hi=MAX_HEADS)
    head_dim = c.count("head_dim", "attention_head_dim", hi=MAX_HEAD_DIM, default=0)
    if not head_dim:
        head_dim = hidden // heads
    attention_bias = c.flag("attention_bias", False)
    mamba = MambaSpec(
        heads=c.count("mamba_num_heads", hi=MAX_HEADS, default=128),
        head_dim=c.count("mamba_head_dim", hi=MAX_HEAD_DIM, default=64),
        groups=c.count("n_groups", "mamba_n_groups", hi=MAX_HEADS, default=8),
        state_size=c.count("ssm_state_size", hi=MAX_HEAD_DIM, default=128),
        conv_kernel=c.count("conv_kernel", "mamba_d_conv", hi=MAX_CONV_KERNEL, default=4),
        chunk_size=c.count("chunk_size", "mamba_chunk_size", hi=MAX_WINDOW_TOKENS, default=128),
        conv_bias=c.flag("use_conv_bias", True),
        proj_bias=c.flag("mamba_proj_bias", False),
        # vLLM's NemotronH hook takes the config's mamba_ssm_cache_dtype, else float32 ("only
        # float32 is known to have no accuracy issues": vllm/model_executor/models/config.py
        # NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE)
        fp32_state=_fp32(c, "mamba_ssm_cache_dtype") if c.has("mamba_ssm_cache_dtype") else True,
    )
    if c.flag("use_bias", False):
        raise ConfigError("use_bias", True, "Nemotron-H with biased linear layers is not modelled")
    return {
        "hidden_size": hidden,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": c.count("num_key_value_heads", hi=MAX_HEADS, default=8),
        "head_dim": head_dim,
        "intermediate_size": c.count("intermediate_size", hi=MAX_INTERMEDIATE_SIZE),
        "vocab_size": c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        "tie_word_embeddings": c.flag("tie_word_embeddings", tie),
        "gated_mlp": False,  # relu2: up and down only
        "qkv_bias": attention_bias,
        "o_bias": attention_bias,
        "mlp_bias": c.flag("mlp_bias", False),
        "norms_per_layer": 1,
        "layer_types": kinds,
        "mamba": mamba if "mamba" in kinds else None,
        "mixer_only": True,
    }


# ---- GLM-5 (glm_moe_dsa) ----------------------------------------------------------------------


def glm_dsa_layout(c: ConfigReader, layers: int, first_dense: int) -> None:
    """Check GLM-5's per-layer lists against the layout priced (module docstring)."""
    if c.has("layer_types"):
        names = c.entries("layer_types", str, MAX_LAYERS)
        if names != ["deepseek_sparse_attention"] * layers:
            raise ConfigError("layer_types", names, f"deepseek_sparse_attention x {layers}")
    if c.has("mlp_layer_types"):
        names = c.entries("mlp_layer_types", str, MAX_LAYERS)
        want = ["dense"] * first_dense + ["sparse"] * (layers - first_dense)
        if names != want:
            raise ConfigError(
                "mlp_layer_types", names, f"first_k_dense_replace={first_dense} dense, then sparse"
            )
    if c.has("indexer_types"):
        names = c.entries("indexer_types", str, MAX_LAYERS)
        if names != ["full"] * layers:
            raise ConfigError("indexer_types", names, "every layer's own indexer (full)")
    if c.count("index_topk_freq", hi=MAX_LAYERS, default=1) != 1:
        raise ConfigError("index_topk_freq", c.raw("index_topk_freq"), "1 (every layer indexes)")
    if c.has("index_topk_pattern"):
        pattern = c.raw("index_topk_pattern")
        if not isinstance(pattern, str) or set(pattern) - {"F"}:
            raise ConfigError("index_topk_pattern", pattern, "F on every layer")


# ---- MiniMax-M2 -------------------------------------------------------------------------------


def minimax_norm_params(
    c: ConfigReader, layers: int, heads: int, kv_heads: int, head_dim: int
) -> int:
    """Check MiniMax-M2's attention list and shared MLP; return the weights its full-width q/k
    norms hold beyond the per-head pair the Gqa part counts (2·head_dim per layer). The norms
    are always there (use_qk_norm false is refused by the decoder reader)."""
    if c.has("attn_type_list"):
        kinds = c.entries("attn_type_list", int, MAX_LAYERS)
        if kinds != [1] * layers:
            raise ConfigError(
                "attn_type_list", kinds, f"1 (softmax attention) on all {layers} layers"
            )
    if c.count("shared_intermediate_size", hi=MAX_INTERMEDIATE_SIZE, lo=0, default=0):
        raise ConfigError(
            "shared_intermediate_size", c.raw("shared_intermediate_size"), "0 (no shared MLP)"
        )
    norm = c.text("qk_norm_type", "per_layer")
    if norm not in ("per_layer", "per_head"):
        raise ConfigError("qk_norm_type", norm, "per_layer or per_head")
    if norm == "per_head":
        return 0
    return layers * (heads + kv_heads - 2) * head_dim
