"""The shapes a config gives each kind of part, checked where they are built, and the limits.

Every size is an integer (not a bool) between 1 and a named limit far above any published model
(the cost model loops over layers and experts, so an absurd count would hang it instead of
failing); a bad value raises one `ConfigError` naming the field and the value. `ModelSpec`
(spec.py) holds one of each its layers use; `layers.py` turns them into parts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from tokenprobe.errors import ConfigError

# What a layer's token mixer is: softmax attention over every token ("full") or a window
# ("sliding"; Llama 4's chunked local layers too), Gated DeltaNet linear attention ("linear"),
# a Mamba-2 SSM ("mamba"); "mlp" is a layer without a mixer (Nemotron-H's MLP-only blocks).
AttentionKind = Literal["full", "sliding", "linear", "mamba", "mlp"]
LAYER_KINDS: tuple[AttentionKind, ...] = ("full", "sliding", "linear", "mamba", "mlp")

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
MAX_CONV_KERNEL = 1 << 10  # causal conv1d width of a recurrent layer (4 in Qwen3-Next, Nemotron-H)


def check_count(name: str, value: object, hi: int, lo: int = 1) -> int:
    """`value` as an int in [lo, hi]; ConfigError naming `name` otherwise (bools, floats, NaN,
    strings and None are refused: True is an int in Python, never a size anyone meant)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, f"an integer in [{lo:,}, {hi:,}]")
    if not lo <= value <= hi:
        raise ConfigError(name, value, f"an integer in [{lo:,}, {hi:,}]")
    return value


def divided_head_dim(hidden: int, heads: int) -> int:
    """hidden_size // num_attention_heads, for families whose head_dim is derived; refused
    (naming the heads) when the heads do not divide the width."""
    if hidden % heads:
        raise ConfigError(
            "num_attention_heads", heads, f"must divide hidden_size={hidden} (head_dim is derived)"
        )
    return hidden // heads


def check_flags(obj: object) -> None:
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
    # group-limited routing (DeepSeek `n_group` / `topk_group`): the routed experts form
    # `expert_groups` equal groups and a token's top-k come from at most `groups_per_token` of
    # them (DeepSeek-V3: 8 / 4; DeepSeek-V3 report arXiv:2412.19437 sec. 2.1.2 and 3.4.1;
    # transformers DeepseekV3Config); 1 / 1: every expert open to every token
    expert_groups: int = 1
    groups_per_token: int = 1

    def __post_init__(self) -> None:
        check_count("num_experts", self.num_experts, MAX_EXPERTS)
        check_count("n_group", self.expert_groups, self.num_experts)
        check_count("topk_group", self.groups_per_token, self.expert_groups)
        if self.num_experts % self.expert_groups:
            raise ConfigError(
                "n_group", self.expert_groups, f"a divisor of n_routed_experts={self.num_experts}"
            )
        group_size = self.num_experts // self.expert_groups
        if self.groups_per_token * group_size < self.experts_per_token:
            raise ConfigError(
                "topk_group", self.groups_per_token,
                f"groups that hold num_experts_per_tok={self.experts_per_token} experts "
                f"({group_size} a group)",
            )  # fmt: skip
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
        check_flags(self)


@dataclass(frozen=True, slots=True)
class DsaSpec:
    """DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2-Exp, `index_*` keys)."""

    index_heads: int
    index_head_dim: int
    index_topk: int

    def __post_init__(self) -> None:
        check_count("index_n_heads", self.index_heads, MAX_HEADS)
        check_count("index_head_dim", self.index_head_dim, MAX_HEAD_DIM)
        check_count("index_topk", self.index_topk, MAX_WINDOW_TOKENS)


@dataclass(frozen=True, slots=True)
class GdnSpec:
    """Gated DeltaNet linear attention (Qwen3-Next `linear_*` keys)."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    fp32_state: bool = False  # `mamba_ssm_dtype: float32` (Qwen3.5)

    def __post_init__(self) -> None:
        check_count("linear_num_key_heads", self.key_heads, MAX_HEADS)
        check_count("linear_num_value_heads", self.value_heads, MAX_HEADS)
        check_count("linear_key_head_dim", self.key_head_dim, MAX_HEAD_DIM)
        check_count("linear_value_head_dim", self.value_head_dim, MAX_HEAD_DIM)
        check_count("linear_conv_kernel_dim", self.conv_kernel, MAX_CONV_KERNEL)
        check_flags(self)
        if self.value_heads % self.key_heads:
            raise ConfigError(
                "linear_num_value_heads", self.value_heads,
                f"a multiple of linear_num_key_heads={self.key_heads}",
            )  # fmt: skip


@dataclass(frozen=True, slots=True)
class MambaSpec:
    """Mamba-2 mixer (Nemotron-H `mamba_*`, `ssm_state_size`, `n_groups`, `conv_kernel`)."""

    heads: int
    head_dim: int
    groups: int
    state_size: int
    conv_kernel: int
    chunk_size: int = 128
    conv_bias: bool = True
    proj_bias: bool = False
    fp32_state: bool = False  # `mamba_ssm_cache_dtype: float32`

    def __post_init__(self) -> None:
        check_count("mamba_num_heads", self.heads, MAX_HEADS)
        check_count("mamba_head_dim", self.head_dim, MAX_HEAD_DIM)
        check_count("n_groups", self.groups, self.heads)
        check_count("ssm_state_size", self.state_size, MAX_HEAD_DIM)
        check_count("conv_kernel", self.conv_kernel, MAX_CONV_KERNEL)
        check_count("chunk_size", self.chunk_size, MAX_WINDOW_TOKENS)
        check_flags(self)
        if self.heads % self.groups:
            raise ConfigError("n_groups", self.groups, f"must divide mamba_num_heads={self.heads}")
