"""A model as a list of layers made of parts: how a `ModelSpec`'s fields become parts.

A `Layer` is one decoder layer: a token mixer (an attention part of `attention.py` or a
recurrent part of `recurrent.py`; None for Nemotron-H's MLP-only blocks), an FFN part of
`ffn.py` (None for Nemotron-H's mixer-only blocks) and its norms. Adding a kind of layer is one
new part (its parameters, cache, FLOP/bytes, TP split) plus the reader of its HF keys
(`hf_config.py`) and a branch in `build_mixer` here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from tokenprobe.model.attention import Dsa, Gqa, Mla
from tokenprobe.model.ffn import DenseMlp, Moe
from tokenprobe.model.recurrent import GatedDeltaNet, Mamba2

if TYPE_CHECKING:
    from tokenprobe.model.shapes import GdnSpec, MambaSpec
    from tokenprobe.model.spec import LayerSpec, ModelSpec

Attention = Gqa | Mla | Dsa
Mixer = Gqa | Mla | Dsa | GatedDeltaNet | Mamba2
Ffn = DenseMlp | Moe


@dataclass(frozen=True, slots=True)
class Layer:
    spec: LayerSpec
    mixer: Mixer | None
    ffn: Ffn | None
    norm_params: int  # the layer's own norms (input / post-attention), all of them

    def params(self, active: bool) -> int:
        mixer = self.mixer.params() if self.mixer is not None else 0
        ffn = self.ffn.params(active) if self.ffn is not None else 0
        return mixer + ffn + self.norm_params

    def cache_elements_per_token(self) -> int:
        return self.mixer.cache_elements_per_token() if self.mixer is not None else 0

    def state_elements_per_seq(self) -> int:
        return self.mixer.state_elements_per_seq() if self.mixer is not None else 0


def build_attention(m: ModelSpec, window: int, kv_heads: int = 0) -> Attention:
    """The softmax-attention part of `m` (GQA family, MLA, or MLA with DSA); `kv_heads` > 0 is
    one layer's own count where the counts vary by layer (DeciLM's variable GQA)."""
    if m.mla is not None:
        a = m.mla
        mla = Mla(m.hidden_size, m.num_heads, a.q_lora_rank, a.kv_lora_rank,
                  a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim)  # fmt: skip
        if m.dsa is None:
            return mla
        d = m.dsa
        return Dsa(mla, d.index_heads, d.index_head_dim, d.index_topk)
    return Gqa(
        hidden=m.hidden_size,
        heads=m.num_heads,
        kv_heads=kv_heads or m.num_kv_heads,
        head_dim=m.head_dim,
        window=window,
        qkv_bias=m.qkv_bias,
        o_bias=m.o_bias,
        qk_norm=m.qk_norm,
        output_gate=m.attn_output_gate,
    )


def _shape_fields(shape: GdnSpec | MambaSpec) -> dict[str, Any]:
    """A config-level shape (model/shapes.py) as keyword arguments of its part."""
    return {f.name: getattr(shape, f.name) for f in fields(shape)}


def build_mixer(m: ModelSpec, spec: LayerSpec) -> Mixer | None:
    if spec.attention in ("full", "sliding"):
        return build_attention(m, spec.window, spec.kv_heads)
    if spec.attention == "linear" and m.linear_attention is not None:
        # the part takes the config's shape field for field (the same names), plus the width
        return GatedDeltaNet(m.hidden_size, **_shape_fields(m.linear_attention))
    if spec.attention == "mamba" and m.mamba is not None:
        return Mamba2(m.hidden_size, **_shape_fields(m.mamba))
    return None


def build_ffn(m: ModelSpec, spec: LayerSpec) -> Ffn | None:
    if not spec.ffn:
        return None
    if spec.moe and m.moe is not None:
        e = m.moe
        return Moe(m.hidden_size, e.num_experts, e.experts_per_token,
                   e.expert_intermediate_size, e.num_shared_experts, e.shared_intermediate_size,
                   m.gated_mlp, e.expert_bias)  # fmt: skip
    return DenseMlp(m.hidden_size, m.intermediate_size, m.gated_mlp, m.mlp_bias)


def build_layer(m: ModelSpec, spec: LayerSpec) -> Layer:
    return Layer(spec, build_mixer(m, spec), build_ffn(m, spec), m.norms_per_layer * m.norm_params)


def architecture_label(m: ModelSpec) -> str:
    """ "dense GQA", "MoE MLA+DSA", "dense GQA+SWA", "hybrid GDN+gated GQA MoE", ...: the
    mixer kinds (recurrent first, windowed attention, SWA, last) and the FFN kind."""
    order: dict[str, int] = {}
    for layer, _ in m.part_groups:
        mixer = layer.mixer
        if mixer is None:
            continue
        if mixer.window:
            order.setdefault("SWA", 2)
        else:
            order.setdefault(mixer.label, 0 if mixer.kind != "attention" else 1)
    mixers = "+".join(sorted(order, key=lambda label: order[label]))
    ffn = "MoE" if m.moe is not None else "dense"
    return f"hybrid {mixers} {ffn}" if 0 in order.values() else f"{ffn} {mixers}"
