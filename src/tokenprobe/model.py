"""Model architecture from a Hugging Face `config.json` or the built-in catalog (requirement E1).

A `ModelSpec` is the shape of a decoder-only transformer: enough to count parameters, KV-cache
bytes and per-operator FLOP/bytes (see `cost/ops.py`). It covers dense MHA/GQA/MQA, MLA
(DeepSeek-V2/V3), MoE with routed + shared experts, dense first layers and MoE layers interleaved
with dense ones (Llama 4), sliding-window and hybrid (local/global) attention layers (Llama 4's
chunked local attention is modelled as a window of the chunk size), and tied embeddings.

Parameter conventions (they differ between publishers, so both are offered):
- `params_total`: every weight of the language model, input embedding and LM head included
  (DeepSeek-V3's multi-token-prediction module and any vision tower are not counted).
- `params_active`: the weights one token touches: the non-expert weights, the shared experts and
  `experts_per_token` routed experts per MoE layer, embeddings and LM head included.
- `params_active_no_embedding`: the same without the input embedding table, which is a lookup,
  not a matmul (gpt-oss's model card counts active parameters this way).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tokenprobe.errors import ConfigError, SchemaError, UnknownModelError

CATALOG_DIR = Path(__file__).parent / "catalog" / "models"

AttentionKind = Literal["full", "sliding"]


@dataclass(frozen=True, slots=True)
class MlaSpec:
    """DeepSeek multi-head latent attention (arXiv:2405.04434, section 2.1)."""

    q_lora_rank: int  # 0: queries are projected directly from the hidden state
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


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
    qk_norm: bool = False
    norms_per_layer: int = 2
    mla: MlaSpec | None = None
    moe: MoeSpec | None = None
    layer_types: tuple[AttentionKind, ...] = ()
    sliding_window: int = 0
    hf_id: str = ""
    model_type: str = ""
    extra_params: int = 0  # e.g. attention sinks; counted in total and active
    aliases: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for name in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "vocab_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(name, value, "a positive integer")
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                "num_key_value_heads",
                self.num_kv_heads,
                f"must divide num_attention_heads={self.num_heads}",
            )
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ConfigError(
                "layer_types", len(self.layer_types), f"one entry per layer ({self.num_layers})"
            )
        if "sliding" in self.layer_types and self.sliding_window <= 0:
            raise ConfigError(
                "sliding_window",
                self.sliding_window,
                "a positive window when some layers use sliding attention",
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
            return self.mlp_params(self.intermediate_size)
        m = self.moe
        routed = m.experts_per_token if active else m.num_experts
        router = self.hidden_size * m.num_experts + (m.num_experts if m.expert_bias else 0)
        experts = routed * self.mlp_params(m.expert_intermediate_size, bias=m.expert_bias)
        shared = m.num_shared_experts * self.mlp_params(m.shared_intermediate_size)
        return router + experts + shared

    def layer_params(self, layer: LayerSpec, active: bool) -> int:
        norms = self.norms_per_layer * self.hidden_size
        return self.attention_params() + self.ffn_params(layer, active) + norms

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def _params(self, active: bool) -> int:
        layers = sum(self.layer_params(s, active) * n for s, n in self.layer_groups)
        final_norm = self.hidden_size
        return layers + self.embedding_params + self.lm_head_params + final_norm + self.extra_params

    @functools.cached_property
    def params_total(self) -> int:
        return self._params(active=False)

    @functools.cached_property
    def params_active(self) -> int:
        return self._params(active=True)

    @property
    def params_active_no_embedding(self) -> int:
        tied_head = self.embedding_params if self.tie_word_embeddings else 0
        return self.params_active - self.embedding_params + tied_head

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


# ---- loading ---------------------------------------------------------------------------------


def _get(cfg: dict[str, Any], *keys: str, default: Any = None, required: bool = True) -> Any:
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if required and default is None:
        raise SchemaError("config.json", f"missing key {keys[0]!r}")
    return default


def _llama4_chunked(cfg: dict[str, Any], num_layers: int) -> tuple[AttentionKind, ...]:
    """Llama 4 (iRoPE): layers that apply RoPE attend within chunks of `attention_chunk_size`
    tokens, the NoPE layers attend globally. `no_rope_layers[i]` is 1 where layer i uses RoPE and
    defaults to every layer but each `no_rope_layer_interval`-th (4) one (transformers
    `Llama4TextConfig`; vLLM `llama4.py`: `nope = no_rope_layers[i] == 0`, chunked local
    attention on the others). A chunk keeps at most `attention_chunk_size` keys, so a chunked layer
    is modelled as a sliding window of that size (an upper bound on its KV cache and span)."""
    if not cfg.get("attention_chunk_size"):
        return ()
    rope = cfg.get("no_rope_layers")
    if not (isinstance(rope, list) and len(rope) == num_layers):
        interval = int(cfg.get("no_rope_layer_interval") or 4)
        rope = [int((i + 1) % interval != 0) for i in range(num_layers)]
    return tuple("sliding" if flag else "full" for flag in rope)


def _layer_types(cfg: dict[str, Any], num_layers: int) -> tuple[AttentionKind, ...]:
    """Per-layer attention kind from `layer_types` or the older sliding-window conventions."""
    raw = cfg.get("layer_types")
    if isinstance(raw, list) and len(raw) == num_layers:
        # "chunked_attention": Llama 4's chunked local layers, modelled as windows
        local = ("sliding", "chunked")
        return tuple("sliding" if any(k in str(t) for k in local) else "full" for t in raw)
    window = cfg.get("sliding_window")
    model_type = cfg.get("model_type", "")
    if model_type.startswith("llama4"):
        return _llama4_chunked(cfg, num_layers)
    if not window:
        return ()
    if model_type == "gemma2":  # alternate local/global, local first (Gemma 2 report, 2.1)
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(num_layers))
    pattern = cfg.get("sliding_window_pattern")
    if model_type.startswith("gemma3") and pattern:  # 5 local : 1 global (Gemma 3 report)
        return tuple(
            "full" if (i + 1) % int(pattern) == 0 else "sliding" for i in range(num_layers)
        )
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not cfg.get("use_sliding_window"):
            return ()
        full_below = int(cfg.get("max_window_layers", num_layers))
        return tuple("full" if i < full_below else "sliding" for i in range(num_layers))
    if model_type in ("mistral", "mixtral"):
        return tuple("sliding" for _ in range(num_layers))
    return ()


def _moe(cfg: dict[str, Any]) -> MoeSpec | None:
    num_experts = _get(cfg, "n_routed_experts", "num_local_experts", "num_experts", required=False)
    if not num_experts:
        return None
    llama4 = str(cfg.get("model_type", "")).startswith("llama4")
    # Llama 4: layer i is MoE when (i + 1) % interleave_moe_layer_step == 0, none when the step is
    # 0 (transformers `Llama4TextConfig.moe_layers` default; vLLM `llama4.py` `is_moe_layer`).
    step = int(cfg.get("interleave_moe_layer_step", 1)) if llama4 else 1
    if step <= 0:
        return None
    shared = int(_get(cfg, "n_shared_experts", default=0, required=False))
    shared_size = 0
    expert_size = int(_get(cfg, "moe_intermediate_size", "intermediate_size"))
    if shared:
        shared_size = int(_get(cfg, "moe_intermediate_size"))
    elif cfg.get("shared_expert_intermediate_size"):  # Qwen2-MoE: one wide shared expert
        shared, shared_size = 1, int(cfg["shared_expert_intermediate_size"])
    elif llama4:  # every Llama 4 MoE layer has one shared expert as wide as a routed one (no
        # config field: transformers `Llama4TextMoe.shared_expert`, vLLM `Llama4MoE.shared_expert`)
        shared, shared_size = 1, expert_size
    first_dense = int(_get(cfg, "first_k_dense_replace", default=0, required=False))
    return MoeSpec(
        num_experts=int(num_experts),
        experts_per_token=int(
            _get(cfg, "num_experts_per_tok", "num_experts_per_token", "experts_per_token")
        ),
        expert_intermediate_size=expert_size,
        num_shared_experts=shared,
        shared_intermediate_size=shared_size,
        first_dense_layers=first_dense,
        expert_bias=cfg.get("model_type") == "gpt_oss",
        layer_step=step,
    )


def _mla(cfg: dict[str, Any]) -> MlaSpec | None:
    if not cfg.get("kv_lora_rank"):
        return None
    return MlaSpec(
        q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=int(cfg["kv_lora_rank"]),
        qk_nope_head_dim=int(cfg["qk_nope_head_dim"]),
        qk_rope_head_dim=int(cfg["qk_rope_head_dim"]),
        v_head_dim=int(cfg["v_head_dim"]),
    )


_GEMMA3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
}


def from_hf_config(cfg: dict[str, Any], name: str = "") -> ModelSpec:
    """Build a ModelSpec from a parsed Hugging Face config dict (multimodal: its text_config)."""
    if isinstance(cfg.get("text_config"), dict):
        outer = cfg
        cfg = {**cfg["text_config"]}
        # transformers' Llama4Config unties the LM head by default; the other multimodal configs
        # in the catalog (Gemma 3) tie it
        tied_default = outer.get("model_type") != "llama4"
        cfg.setdefault("tie_word_embeddings", outer.get("tie_word_embeddings", tied_default))
    model_type = str(cfg.get("model_type", ""))
    if model_type.startswith("gemma3"):
        # the Hub's Gemma 3 configs leave these at the transformers `Gemma3TextConfig` defaults
        cfg = {**_GEMMA3_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    hidden = int(_get(cfg, "hidden_size", "d_model", "n_embd"))
    heads = int(_get(cfg, "num_attention_heads", "n_head"))
    layers = int(_get(cfg, "num_hidden_layers", "n_layer"))
    kv_heads = int(_get(cfg, "num_key_value_heads", default=heads, required=False))
    head_dim = int(_get(cfg, "head_dim", default=hidden // heads, required=False))
    mla = _mla(cfg)
    moe = _moe(cfg)
    gemma = model_type.startswith("gemma")
    window = int(cfg.get("sliding_window") or 0)
    if model_type.startswith("llama4"):
        window = int(cfg.get("attention_chunk_size") or 0)
    layer_types = _layer_types(cfg, layers)
    extra = layers * heads if model_type == "gpt_oss" else 0  # per-head attention sinks
    return ModelSpec(
        name=name or str(cfg.get("_name_or_path", model_type or "custom")),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads if mla is None else heads,
        head_dim=head_dim,
        intermediate_size=int(  # Llama 4: intermediate_size_mlp is the dense-layer MLP width
            _get(
                cfg,
                "intermediate_size_mlp",
                "intermediate_size",
                "ffn_hidden_size",
                default=4 * hidden,
                required=False,
            )
        ),
        vocab_size=int(_get(cfg, "vocab_size")),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        gated_mlp=str(cfg.get("hidden_act", cfg.get("hidden_activation", "silu")))
        not in ("gelu", "gelu_new", "relu")
        or gemma,
        qkv_bias=bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
        o_bias=bool(cfg.get("attention_bias", False)) and model_type == "gpt_oss",
        # per-head RMSNorm weights on q and k; Llama 4's `use_qk_norm` is a weightless L2 norm
        qk_norm=model_type in ("qwen3", "qwen3_moe")
        or model_type.startswith("gemma3")
        or (model_type == "glm4_moe" and bool(cfg.get("use_qk_norm"))),
        norms_per_layer=4 if gemma else 2,
        mla=mla,
        moe=moe,
        layer_types=layer_types,
        sliding_window=window if "sliding" in layer_types else 0,
        hf_id=str(cfg.get("_name_or_path", "")),
        model_type=model_type,
        extra_params=extra,
    )


def load_config_file(path: Path, name: str = "") -> ModelSpec:
    """A config.json file, or a folder holding one."""
    file = path / "config.json" if path.is_dir() else path
    try:
        cfg = json.loads(file.read_text())
    except FileNotFoundError as exc:
        raise SchemaError(str(file), "no such file") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SchemaError(str(file), f"not valid JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise SchemaError(str(file), "a config.json must hold a JSON object")
    try:
        return from_hf_config(cfg, name=name or path.stem if path.is_file() else path.name)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise SchemaError(str(file), f"unreadable model config ({exc!r})") from exc


@functools.cache
def _catalog_index() -> dict[str, Path]:
    """Catalog name, HF id and aliases (lower case) -> file. Each file is an HF config.json with
    a `_tokenprobe` block: {"name": ..., "hf_id": ..., "aliases": [...], "source": ...}."""
    index: dict[str, Path] = {}
    for file in sorted(CATALOG_DIR.glob("*.json")):
        meta = json.loads(file.read_text()).get("_tokenprobe", {})
        keys = [file.stem, meta.get("name", ""), meta.get("hf_id", ""), *meta.get("aliases", [])]
        for key in keys:
            if key:
                index[key.lower()] = file
    return index


def catalog_names() -> list[str]:
    return sorted({p.stem for p in _catalog_index().values()})


@functools.cache
def _load_catalog_file(file: Path) -> ModelSpec:
    cfg = json.loads(file.read_text())
    meta = cfg.get("_tokenprobe", {})
    spec = from_hf_config(cfg, name=file.stem)
    return replace(
        spec, hf_id=meta.get("hf_id", spec.hf_id), aliases=tuple(meta.get("aliases", ()))
    )


def get_model(name_or_path: str | Path) -> ModelSpec:
    """A catalog name (`llama-3.1-8b`), an HF id (`meta-llama/Llama-3.1-8B-Instruct`) or a path."""
    if isinstance(name_or_path, Path):
        return load_config_file(name_or_path)
    key = name_or_path.strip().lower()
    index = _catalog_index()
    if key in index:
        return _load_catalog_file(index[key])
    path = Path(name_or_path).expanduser()
    if path.exists():
        return load_config_file(path)
    raise UnknownModelError(name_or_path, catalog_names())
