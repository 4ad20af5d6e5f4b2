"""A `ModelSpec` from a Hugging Face `config.json`: the readers of `families.FAMILIES`.

`from_hf_config` first refuses shape keys the config's family does not read (the rule is in
`families.py`), then reads each key where it is used, checking its value (`ConfigReader` of
`hf_reader.py`): integers within the limits of `spec.py`, booleans for flags, lists of the right
entries. Llama-style
decoders share one reader (`_decoder`, its per-family conventions in `Family`); Falcon and
GPT-BigCode have their own, GPT-J, OPT and BLOOM theirs in `hf_legacy.py`. Every refusal is
one ConfigError naming the field and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tokenprobe.errors import ConfigError
from tokenprobe.model.families import Family, check_shape_keys, family_of, is_set
from tokenprobe.model.hf_hybrid import (
    dsa_spec,
    gdn_fields,
    glm_dsa_layout,
    minimax_norm_params,
    nemotron_h,
)
from tokenprobe.model.hf_legacy import bloom, gptj, kv_heads_per_layer, opt, ungated_decoder
from tokenprobe.model.hf_reader import ConfigReader
from tokenprobe.model.shapes import divided_head_dim
from tokenprobe.model.spec import (
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
    MlaSpec,
    ModelSpec,
    MoeSpec,
)

_LAYER_KINDS: dict[str, AttentionKind] = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "sliding",  # Llama 4's chunked local layers, modelled as windows
}


# ---- per-layer attention kinds --------------------------------------------------------------


def _explicit_layer_types(c: ConfigReader, layers: int) -> tuple[AttentionKind, ...] | None:
    if not c.has("layer_types"):
        return None
    names = c.entries("layer_types", str, MAX_LAYERS)
    if len(names) != layers:
        raise ConfigError("layer_types", f"{len(names)} entries", f"one per layer ({layers})")
    for name in names:
        if name not in _LAYER_KINDS:
            raise ConfigError(
                "layer_types", name, f"attention kinds tokenprobe prices: {', '.join(_LAYER_KINDS)}"
            )
    return tuple(_LAYER_KINDS[name] for name in names)


def _window(c: ConfigReader, *keys: str) -> int:
    return c.count(*keys, hi=MAX_WINDOW_TOKENS, default=0)


def _llama4_kinds(c: ConfigReader, layers: int) -> tuple[tuple[AttentionKind, ...], int]:
    """Llama 4 (iRoPE): layers that apply RoPE attend within chunks of `attention_chunk_size`
    tokens, the NoPE layers attend globally. `no_rope_layers[i]` is 1 where layer i uses RoPE and
    defaults to every layer but each `no_rope_layer_interval`-th (4) one (transformers
    `Llama4TextConfig`; vLLM `llama4.py`: `nope = no_rope_layers[i] == 0`, chunked local
    attention on the others). A chunk keeps at most `attention_chunk_size` keys, so a chunked layer
    is modelled as a sliding window of that size (an upper bound on its KV cache and span)."""
    chunk = _window(c, "attention_chunk_size")
    explicit = _explicit_layer_types(c, layers)
    if not chunk:
        if explicit and "sliding" in explicit:
            raise ConfigError("attention_chunk_size", None, "required by chunked layer_types")
        return (), 0
    if explicit is not None:
        return explicit, chunk
    if c.has("no_rope_layers"):
        rope = c.entries("no_rope_layers", int, MAX_LAYERS)
        if len(rope) != layers or any(flag not in (0, 1) for flag in rope):
            raise ConfigError("no_rope_layers", rope, f"{layers} flags of 0 or 1, one per layer")
    else:
        interval = c.count("no_rope_layer_interval", hi=MAX_LAYERS, default=4)
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    return tuple("sliding" if flag else "full" for flag in rope), chunk


def _attention_kinds(
    c: ConfigReader, fam: Family, layers: int
) -> tuple[tuple[AttentionKind, ...], int]:
    """(per-layer kinds, window) by the family's convention; () when every layer is full."""
    if fam.windows == "llama4":
        return _llama4_kinds(c, layers)
    window = _window(c, "sliding_window", "sliding_window_size")
    # GLM-5's layer_types name its sparse attention on every layer (checked by glm_dsa_layout)
    has_kinds = "layer_types" in fam.keys and fam.hybrid != "dsa"
    explicit = _explicit_layer_types(c, layers) if has_kinds else None
    if fam.windows == "qwen" and not c.flag("use_sliding_window", False):
        # Qwen2/3 configs carry a window that is off unless use_sliding_window: Qwen2Config
        # sets sliding_window None then, so even a "sliding_attention" layer attends fully
        return (), 0
    if explicit is not None:
        return (explicit, window) if "sliding" in explicit else ((), 0)
    if not window:
        return (), 0
    kinds: list[AttentionKind]
    if fam.windows == "all":
        kinds = ["sliding"] * layers
    elif fam.windows == "alternate":  # local first: Gemma 2 report 2.1; GptOssConfig default
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    elif fam.windows == "gemma3":  # 5 local : 1 global (Gemma 3 report)
        pattern = c.count("sliding_window_pattern", hi=MAX_LAYERS)
        kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    elif fam.windows == "qwen":  # Qwen2Config: layers from max_window_layers on slide
        full_below = c.count("max_window_layers", hi=MAX_LAYERS, lo=0, default=28)
        kinds = ["full" if i < full_below else "sliding" for i in range(layers)]
    else:
        raise ConfigError(
            "sliding_window", window, "which layers slide is not known without layer_types"
        )
    return (tuple(kinds), window) if "sliding" in kinds else ((), 0)


# ---- experts and latent attention -----------------------------------------------------------


def _moe_layout(c: ConfigReader, fam: Family, layers: int) -> tuple[int, int]:
    """(first dense layers, MoE layer step); placements other than these are refused."""
    if fam.moe == "qwen":
        step = c.count("decoder_sparse_step", hi=MAX_LAYERS, default=1)
        if step != 1:
            raise ConfigError("decoder_sparse_step", step, "1 (MoE in every layer) is modelled")
        if c.has("mlp_only_layers") and c.entries("mlp_only_layers", int, MAX_LAYERS):
            raise ConfigError("mlp_only_layers", c.raw("mlp_only_layers"), "[] is modelled")
        return 0, 1
    if fam.moe == "deepseek":
        if c.count("moe_layer_freq", hi=MAX_LAYERS, default=1) != 1:
            raise ConfigError("moe_layer_freq", c.raw("moe_layer_freq"), "1 is modelled")
        return c.count("first_k_dense_replace", hi=MAX_LAYERS - 1, lo=0, default=0), 1
    if fam.moe == "llama4":
        # layer i is MoE when (i + 1) % step == 0 (transformers `Llama4TextConfig.moe_layers`
        # default; vLLM `llama4.py` `is_moe_layer`); step 0: no MoE layer
        step = c.count("interleave_moe_layer_step", hi=MAX_LAYERS, lo=0, default=1)
        if c.has("moe_layers"):
            listed = c.entries("moe_layers", int, MAX_LAYERS)
            derived = [i for i in range(layers) if step and (i + 1) % step == 0]
            if listed != derived:
                raise ConfigError(
                    "moe_layers", listed, f"every interleave_moe_layer_step-th layer: {derived}"
                )
        return 0, step
    return 0, 1


_EXPERTS_KEY = {
    "mixtral": "num_local_experts",
    "gpt_oss": "num_local_experts",
    "llama4": "num_local_experts",
    "qwen": "num_experts",
    "deepseek": "n_routed_experts",
}


def _moe(c: ConfigReader, fam: Family, layers: int) -> MoeSpec | None:
    experts_key = _EXPERTS_KEY.get(fam.moe, "")
    if not experts_key or not is_set(c.raw(experts_key)):
        return None
    first_dense, step = _moe_layout(c, fam, layers)
    if step == 0:
        return None
    num_experts = c.count(experts_key, hi=MAX_EXPERTS)
    top_k = c.count("num_experts_per_tok", "experts_per_token", hi=num_experts)
    width_keys = ("moe_intermediate_size",) if fam.moe in ("qwen", "deepseek") else ()
    width = c.count(*width_keys, "intermediate_size", hi=MAX_INTERMEDIATE_SIZE)
    shared, shared_width = 0, 0
    groups, groups_per_token = 1, 1
    if fam.moe == "deepseek":
        shared = c.count("n_shared_experts", hi=MAX_EXPERTS, lo=0, default=0)
        shared_width = width if shared else 0
        # group-limited routing (MoeSpec); DeepseekV3Config's defaults are 8 / 4, but a config
        # without the keys (GLM-4.x writes 1 / 1, Kimi-K2 1 / 1) is read as ungrouped
        groups = c.count("n_group", hi=num_experts, default=1)
        groups_per_token = c.count("topk_group", hi=groups, default=1)
    elif fam.moe == "qwen" and c.has("shared_expert_intermediate_size"):
        shared_width = c.count("shared_expert_intermediate_size", hi=MAX_INTERMEDIATE_SIZE, lo=0)
        shared = 1 if shared_width else 0  # Qwen2-MoE: one wide shared expert
    elif fam.moe == "llama4":  # one shared expert as wide as a routed one (no config field:
        # transformers `Llama4TextMoe.shared_expert`, vLLM `Llama4MoE.shared_expert`)
        shared, shared_width = 1, width
    return MoeSpec(
        num_experts=num_experts,
        experts_per_token=top_k,
        expert_intermediate_size=width,
        num_shared_experts=shared,
        shared_intermediate_size=shared_width,
        first_dense_layers=first_dense,
        expert_bias=fam.moe == "gpt_oss",
        layer_step=step,
        expert_groups=groups,
        groups_per_token=groups_per_token,
    )


def _mla(c: ConfigReader) -> MlaSpec | None:
    if not c.has("kv_lora_rank") or not c.raw("kv_lora_rank"):
        return None
    if c.flag("attention_bias", False):
        raise ConfigError("attention_bias", True, "MLA projections with biases are not modelled")
    return MlaSpec(
        q_lora_rank=c.count("q_lora_rank", hi=MAX_HIDDEN_SIZE, lo=0, default=0),
        kv_lora_rank=c.count("kv_lora_rank", hi=MAX_HIDDEN_SIZE),
        qk_nope_head_dim=c.count("qk_nope_head_dim", hi=MAX_HEAD_DIM, lo=0),
        qk_rope_head_dim=c.count("qk_rope_head_dim", hi=MAX_HEAD_DIM, lo=0),
        v_head_dim=c.count("v_head_dim", hi=MAX_HEAD_DIM),
    )


# ---- families -------------------------------------------------------------------------------


def _head_dim(c: ConfigReader, fam: Family, hidden: int, heads: int) -> int:
    """Explicit `head_dim`, else the family's default (transformers class), else hidden/heads."""
    if c.has("head_dim"):
        return c.count("head_dim", hi=MAX_HEAD_DIM)
    if fam.head_dim:
        return fam.head_dim
    return divided_head_dim(hidden, heads)


def _biases(c: ConfigReader, fam: Family) -> dict[str, bool]:
    """Which linear layers carry biases, by the family's modeling file (see Family.bias)."""
    if fam.bias == "use_bias":
        on = c.flag("use_bias", True)
        return {"qkv_bias": on, "o_bias": on, "mlp_bias": on}
    if fam.bias == "qkv":
        return {"qkv_bias": c.flag("qkv_bias", True), "o_bias": False, "mlp_bias": False}
    attention = c.flag("attention_bias", False) if fam.bias else False
    mlp = c.flag("mlp_bias", False) if "mlp_bias" in fam.keys else False
    return {
        "qkv_bias": attention,
        "o_bias": attention and fam.bias == "attention_bias",
        "mlp_bias": mlp,
    }


def _unused_dense(moe: MoeSpec | None) -> int | None:
    """A config whose every layer is MoE may leave out the dense width (Qwen3.5-MoE's
    text_config has none): no layer uses it, so any valid width is the same model."""
    if moe is not None and moe.first_dense_layers == 0 and moe.layer_step == 1:
        return moe.expert_intermediate_size
    return None


def _decoder(c: ConfigReader, fam: Family) -> dict[str, Any]:
    """A Llama-style decoder (every family but Falcon and GPT-BigCode)."""
    hidden = c.count("hidden_size", hi=MAX_HIDDEN_SIZE)
    layers = c.count("num_hidden_layers", hi=MAX_LAYERS)
    heads = c.count("num_attention_heads", hi=MAX_HEADS)
    kv_heads = c.count("num_key_value_heads", hi=MAX_HEADS, default=fam.kv_heads or heads)
    mla = _mla(c) if "kv_lora_rank" in fam.keys else None
    moe = _moe(c, fam, layers)
    kinds, window = _attention_kinds(c, fam, layers) if fam.hybrid != "gdn" else ((), 0)
    dense = ("intermediate_size_mlp", "intermediate_size") if fam.moe == "llama4" else ()
    gated = fam.gated
    if gated is None:  # unknown family: a plain (ungated) MLP only for the GPT-2 activations
        act = c.text("hidden_act", c.text("hidden_activation", "silu"))
        gated = act not in ("gelu", "gelu_new", "relu")
    extra = 0
    if fam.moe == "gpt_oss":
        extra = layers * heads  # one attention-sink logit per head and layer
    elif fam.moe == "qwen" and moe is not None and moe.num_shared_experts:
        extra = layers * hidden  # Qwen2-MoE's shared_expert_gate, hidden -> 1, per layer
    qk_norm = fam.qk_norm == "always" or (bool(fam.qk_norm) and c.flag(fam.qk_norm, False))
    if fam.qk_norm == "always" and not c.flag("use_qk_norm", True):
        raise ConfigError("use_qk_norm", False, "this family's attention always norms q and k")
    head_dim = _head_dim(c, fam, hidden, heads)
    hybrid: dict[str, Any] = {}
    if fam.hybrid == "gdn":
        hybrid = gdn_fields(c, layers)
        kinds, window = hybrid.pop("layer_types"), 0
    elif fam.hybrid == "dsa" and mla is not None:
        if "mlp_layer_types" in fam.keys:
            glm_dsa_layout(c, layers, moe.first_dense_layers if moe is not None else layers)
        hybrid = {"dsa": dsa_spec(c)}
    elif fam.hybrid == "minimax":
        extra += minimax_norm_params(c, layers, heads, kv_heads, head_dim)
    elif fam.hybrid == "vgqa":  # DeciLM: the model's count is the widest layer's
        hybrid = {"kv_heads_per_layer": kv_heads_per_layer(c, layers, heads)}
        kv_heads = max(hybrid["kv_heads_per_layer"])
    return {
        **hybrid,
        "hidden_size": hidden,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": heads if mla is not None else kv_heads,
        "head_dim": head_dim,
        "intermediate_size": c.count(
            *dense, "intermediate_size", hi=MAX_INTERMEDIATE_SIZE, default=_unused_dense(moe)
        ),
        "vocab_size": c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        "tie_word_embeddings": c.flag("tie_word_embeddings", fam.tie),
        "gated_mlp": gated,
        **_biases(c, fam),
        "qk_norm": qk_norm,
        "norms_per_layer": fam.norms,
        "norm_bias": fam.norm_bias,
        "mla": mla,
        "moe": moe,
        "layer_types": kinds,
        "sliding_window": window if kinds else 0,
        "extra_params": extra,
    }


def _falcon(c: ConfigReader, fam: Family) -> dict[str, Any]:
    """Falcon (modeling_falcon.py): fused query_key_value of (heads + 2·kv)·head_dim outputs,
    where kv = `num_kv_heads` under `new_decoder_architecture` (Falcon-40B/180B), 1 under
    `multi_query` (Falcon-7B), else every head; head_dim = hidden/heads (FalconConfig.head_dim);
    an ungated MLP of `ffn_hidden_size` (4·hidden); LayerNorms with biases: one per layer for the
    parallel 7B block, two (`num_ln_in_parallel_attn`, ln_attn + ln_mlp) for the new one, two
    for a sequential block; `bias` on every linear layer; LM head tied by default."""
    hidden = c.count("hidden_size", "n_embed", hi=MAX_HIDDEN_SIZE)
    heads = c.count("num_attention_heads", "n_head", hi=MAX_HEADS)
    head_dim = divided_head_dim(hidden, heads)
    if c.has("head_dim") and c.count("head_dim", hi=MAX_HEAD_DIM) != head_dim:
        raise ConfigError(
            "head_dim", c.raw("head_dim"), f"Falcon's is hidden_size // heads = {head_dim}"
        )
    new = c.flag("new_decoder_architecture", False)
    multi_query = c.flag("multi_query", True)
    parallel = c.flag("parallel_attn", True) or new
    if new:
        kv_heads = c.count("num_kv_heads", "n_head_kv", hi=MAX_HEADS, default=heads)
    else:
        kv_heads = 1 if multi_query else heads
    lns = c.count("num_ln_in_parallel_attn", hi=2, default=2 if new else 1)
    bias = c.flag("bias", False)
    shape = ungated_decoder(
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        layers=c.count("num_hidden_layers", "n_layer", hi=MAX_LAYERS),
        intermediate=c.count("ffn_hidden_size", hi=MAX_INTERMEDIATE_SIZE, default=4 * hidden),
        vocab=c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        tie=c.flag("tie_word_embeddings", fam.tie),
        bias=bias,
        head_dim=head_dim,
    )
    return {**shape, "norms_per_layer": lns if parallel else 2}


def _gpt_bigcode(c: ConfigReader, fam: Family) -> dict[str, Any]:
    """GPT-BigCode / StarCoder (modeling_gpt_bigcode.py): c_attn of hidden + 2·head_dim outputs
    under `multi_query` (one K/V head shared by all), else 3·hidden; every linear layer and both
    LayerNorms carry biases; an ungated MLP of `n_inner` (4·hidden); a learned position table of
    `n_positions` rows; LM head tied by default (GPTBigCodeConfig)."""
    hidden = c.count("n_embd", "hidden_size", hi=MAX_HIDDEN_SIZE)
    heads = c.count("n_head", "num_attention_heads", hi=MAX_HEADS)
    kv_heads = 1 if c.flag("multi_query", True) else heads
    if c.has("num_key_value_heads") and c.count("num_key_value_heads", hi=MAX_HEADS) != kv_heads:
        raise ConfigError(
            "num_key_value_heads", c.raw("num_key_value_heads"), f"{kv_heads} by multi_query"
        )
    if c.flag("add_cross_attention", False):
        raise ConfigError("add_cross_attention", True, "decoder-only models are priced")
    shape = ungated_decoder(
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        layers=c.count("n_layer", "num_hidden_layers", hi=MAX_LAYERS),
        intermediate=c.count("n_inner", hi=MAX_INTERMEDIATE_SIZE, default=4 * hidden),
        vocab=c.count("vocab_size", hi=MAX_VOCAB_SIZE),
        tie=c.flag("tie_word_embeddings", fam.tie),
        bias=True,
    )
    return {**shape, "position_embeddings": c.count("n_positions", hi=MAX_POSITION_EMBEDDINGS)}


def _nemotron_h(c: ConfigReader, fam: Family) -> dict[str, Any]:
    return nemotron_h(c, fam.tie)


def _check_keys(cfg: Mapping[Any, Any], where: str) -> None:
    for key in cfg:
        if not isinstance(key, str):
            raise ConfigError(where, key, "keys must be strings")


def _text_config(cfg: Mapping[str, Any], outer_type: str) -> dict[str, Any]:
    """A multimodal config's language model (Gemma 3, Llama 4): its `text_config`, which
    inherits the outer tie flag or, failing that, the outer class's default (transformers'
    Llama4Config unties the LM head, Gemma3Config ties it)."""
    text = cfg["text_config"]
    if not isinstance(text, Mapping):
        raise ConfigError("text_config", text, "a JSON object (the language model's config)")
    _check_keys(text, "text_config")
    inner = dict(text)
    if inner.get("model_type") is None:
        inner["model_type"] = outer_type
    if inner.get("tie_word_embeddings") is None:
        outer_tie = cfg.get("tie_word_embeddings")
        inner["tie_word_embeddings"] = family_of(outer_type).tie if outer_tie is None else outer_tie
    if inner.get("_name_or_path") is None:
        inner["_name_or_path"] = cfg.get("_name_or_path")
    return inner


def from_hf_config(cfg: Mapping[str, Any], name: str = "") -> ModelSpec:
    """Build a ModelSpec from a parsed Hugging Face config dict (multimodal: its text_config).

    Raises ConfigError naming the field (or the unread shape keys) for anything it cannot read
    faithfully; see the module docstring for the rule."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", type(cfg).__name__, "a JSON object")
    _check_keys(cfg, "config")
    outer_type = cfg.get("model_type")
    if outer_type is not None and not isinstance(outer_type, str):
        raise ConfigError("model_type", outer_type, "a string")
    if cfg.get("text_config") is not None:
        cfg = _text_config(cfg, outer_type or "")
    model_type = cfg.get("model_type") or ""
    if not isinstance(model_type, str):
        raise ConfigError("text_config.model_type", model_type, "a string")
    fam = family_of(model_type)
    check_shape_keys(cfg, model_type, fam)
    c = ConfigReader(cfg, fam.defaults)
    readers = {"falcon": _falcon, "gpt_bigcode": _gpt_bigcode, "nemotron_h": _nemotron_h}
    reader = {**readers, "gptj": gptj, "opt": opt, "bloom": bloom}.get(model_type, _decoder)
    shape = reader(c, fam)
    label = cfg.get("_name_or_path")
    hf_id = label if isinstance(label, str) else ""
    return ModelSpec(
        name=name or hf_id or model_type or "custom",
        hf_id=hf_id,
        model_type=model_type,
        max_context_tokens=_context_tokens(c),
        experts_only_quant=_experts_only_quant(cfg),
        **shape,
    )


def _experts_only_quant(cfg: Mapping[str, Any]) -> str:
    """The quantization method of a checkpoint that leaves attention unconverted (its
    `quantization_config.modules_to_not_convert` names the `self_attn` modules, as gpt-oss's
    MXFP4 checkpoints do: only the MoE experts are quantized), else "". It sets no shape, so an
    odd value (not an object, not a list of strings) is not stated rather than refused."""
    quant = cfg.get("quantization_config")
    if not isinstance(quant, Mapping):
        return ""
    method, kept = quant.get("quant_method"), quant.get("modules_to_not_convert")
    if not isinstance(method, str) or not isinstance(kept, list):
        return ""
    if not any(isinstance(m, str) and "self_attn" in m for m in kept):
        return ""
    return method.lower()


def _context_tokens(c: ConfigReader) -> int:
    """max_position_embeddings as a count, else 0: it sets no shape, so an odd value (absent,
    not an integer, beyond 2**31) is not stated rather than refused."""
    value = c.raw("max_position_embeddings") if c.has("max_position_embeddings") else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        return 0
    return value
