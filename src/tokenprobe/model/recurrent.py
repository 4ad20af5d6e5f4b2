"""Recurrent token-mixer parts: a fixed state per sequence instead of KV per token.

Same questions as the attention parts (`attention.py` docstring). A recurrent layer caches no
token: each sequence holds a convolution state of (kernel − 1) × conv_dim elements and a
recurrent state whose size does not grow with the context (vLLM v1 `MambaSpec`: one state per
request, stored in the model dtype unless `mamba_ssm_cache_dtype` says otherwise). Per step the
kernel reads and writes each stepped sequence's state once; its FLOP grow with the tokens, not
with the context.

- `GatedDeltaNet` (Qwen3-Next, Qwen3.5; Yang et al., "Gated Delta Networks", arXiv:2412.06464;
  transformers `Qwen3NextGatedDeltaNet`, vLLM `qwen3_next.py`): in_proj_qkvz hidden →
  2·key_dim + 2·value_dim and in_proj_ba hidden → 2·v_heads (key_dim = k_heads·d_k,
  value_dim = v_heads·d_v), a depthwise causal conv1d over conv_dim = 2·key_dim + value_dim
  (no bias), dt_bias and A_log per value head, a gated RMSNorm of d_v, out_proj value_dim →
  hidden. State per sequence: v_heads·d_k·d_v (the delta-rule matrix S) + (K − 1)·conv_dim.
  Per token and value head the recurrence S ← αS + β(v − Sk)kᵀ, o = Sq costs ~7·d_k·d_v FLOP
  (Sk, the decay, the rank-1 update, Sq); prefill runs the chunkwise form (chunk C = 64, fla
  `chunk_gated_delta_rule`), which adds ~2·C·(d_k + d_v) per token for the intra-chunk part.
- `Mamba2` (Nemotron-H; Dao & Gu, "Transformers are SSMs", arXiv:2405.21060; transformers
  `NemotronHMamba2Mixer`, vLLM `MambaMixer2`): in_proj hidden → 2·I + 2·G·N + H (I = H·P
  heads × head_dim, G groups of B/C of state size N), conv1d over conv_dim = I + 2·G·N with
  bias (`use_conv_bias`), dt_bias, A_log and D per head, a gated RMSNorm of I, out_proj
  I → hidden. State per sequence: H·P·N + (K − 1)·conv_dim. Per token and head the update
  h ← e^{ΔA}h + Δ·x Bᵀ and readout y = hC cost ~5·P·N FLOP; prefill runs the SSD chunked form
  (chunk Q = `chunk_size`, 128), adding ~2·Q·(P + N) per token for the intra-chunk part.
TP: heads (and key heads, groups) split over tp; Mamba-2 groups fewer than tp are replicated
(vLLM `MambaMixer2` `extra_groups_for_head_shards`); the states split with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenprobe.errors import ConfigError
from tokenprobe.model.attention import CoreTerm, MixerSplit, StepShape, state_bytes_per_seq

GDN_CHUNK_TOKENS = 64  # fla chunk_gated_delta_rule chunk size (vLLM qwen3_next.py uses it)
GDN_FLOP_PER_STATE_ELEMENT = 7.0  # Sk (2), decay (1), rank-1 update (2), Sq (2)
SSM_FLOP_PER_STATE_ELEMENT = 5.0  # e^{ΔA}h (1), Δ·x Bᵀ and add (2), hC (2)


def _divides(field: str, count: int, tp: int) -> None:
    if count % tp:
        raise ConfigError("tp", tp, f"must divide the {count} {field}")


def recurrent_terms(
    name: str,
    split: MixerSplit,
    shape: StepShape,
    ab: float,
    decode_flop_per_token: float,
    chunk_flop_per_token: float,
) -> CoreTerm:
    """The scan: FLOP per token (prefill adds the intra-chunk part); reads and writes each
    stepped sequence's state once, plus the projections' activations."""
    flop = shape.tokens * decode_flop_per_token + shape.prefill_tokens * chunk_flop_per_token
    seqs = shape.prefill_seqs + shape.decode_seqs
    state_bytes = 2 * seqs * state_bytes_per_seq(split, ab)
    io_bytes = shape.tokens * (split.qkv_out + split.o_in) * ab
    return (name, flop, state_bytes + io_bytes)


class _NoTokenCache:
    """A recurrent layer caches no token: its memory is the fixed state per sequence
    (`state_elements_per_seq`), so the per-token cache of the parts' common interface is 0."""

    __slots__ = ()

    def cache_elements_per_token(self) -> int:
        return 0

    def cache_extra_bytes_per_token(self) -> float:
        return 0.0

    def cache_bytes_per_token_per_gpu(self, kb: float, tp: int) -> float:  # noqa: ARG002  (the parts' common signature)
        return 0.0


@dataclass(frozen=True, slots=True)
class GatedDeltaNet(_NoTokenCache):
    """Gated DeltaNet linear attention (module docstring)."""

    hidden: int
    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    fp32_state: bool = False  # the delta-rule matrix kept in fp32 (`mamba_ssm_dtype`)

    kind = "linear_attention"
    window = 0

    @property
    def label(self) -> str:
        return "GDN"

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def params(self) -> int:
        in_proj = self.hidden * (2 * self.key_dim + 2 * self.value_dim + 2 * self.value_heads)
        conv = self.conv_dim * self.conv_kernel
        per_head = 2 * self.value_heads  # dt_bias, A_log
        norm = self.value_head_dim
        return in_proj + conv + per_head + norm + self.value_dim * self.hidden

    def state_elements_per_seq(self) -> int:
        recurrent = self.value_heads * self.key_head_dim * self.value_head_dim
        return recurrent + (self.conv_kernel - 1) * self.conv_dim

    def split(self, tp: int) -> MixerSplit:
        _divides("linear-attention key heads", self.key_heads, tp)
        _divides("linear-attention value heads", self.value_heads, tp)
        out = (2 * self.key_dim + 2 * self.value_dim + 2 * self.value_heads) / tp
        conv = self.conv_dim * self.conv_kernel / tp
        o_in = self.value_dim / tp
        recurrent = self.value_heads * self.key_head_dim * self.value_head_dim / tp
        conv_state = (self.conv_kernel - 1) * self.conv_dim / tp
        return MixerSplit(
            qkv_weights=self.hidden * out + conv,
            qkv_out=out,
            o_weights=o_in * self.hidden,
            o_in=o_in,
            state_elems_per_seq=conv_state + (0.0 if self.fp32_state else recurrent),
            state_fp32_elems_per_seq=recurrent if self.fp32_state else 0.0,
            heads=self.value_heads / tp,
        )

    def core_terms(self, split: MixerSplit, shape: StepShape, ab: float, kb: float) -> Any:  # noqa: ARG002  (the parts' common signature)
        dk, dv = self.key_head_dim, self.value_head_dim
        per_token = GDN_FLOP_PER_STATE_ELEMENT * split.heads * dk * dv
        chunk = 2 * GDN_CHUNK_TOKENS * split.heads * (dk + dv)
        yield recurrent_terms("linear_attention", split, shape, ab, per_token, chunk)


@dataclass(frozen=True, slots=True)
class Mamba2(_NoTokenCache):
    """Mamba-2 selective state-space mixer (module docstring)."""

    hidden: int
    heads: int
    head_dim: int
    groups: int
    state_size: int
    conv_kernel: int
    chunk_size: int = 128
    conv_bias: bool = True
    proj_bias: bool = False
    fp32_state: bool = False  # the SSM state kept in fp32 (`mamba_ssm_cache_dtype`)

    kind = "ssm"
    window = 0

    @property
    def label(self) -> str:
        return "Mamba-2"

    @property
    def inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.inner + 2 * self.groups * self.state_size

    def params(self) -> int:
        in_out = 2 * self.inner + 2 * self.groups * self.state_size + self.heads
        in_proj = self.hidden * in_out + (in_out if self.proj_bias else 0)
        conv = self.conv_dim * self.conv_kernel + (self.conv_dim if self.conv_bias else 0)
        per_head = 3 * self.heads  # dt_bias, A_log, D
        norm = self.inner
        out_proj = self.inner * self.hidden + (self.hidden if self.proj_bias else 0)
        return in_proj + conv + per_head + norm + out_proj

    def state_elements_per_seq(self) -> int:
        ssm = self.heads * self.head_dim * self.state_size
        return ssm + (self.conv_kernel - 1) * self.conv_dim

    def _groups_per_gpu(self, tp: int) -> float:
        if tp <= self.groups:
            _divides("Mamba groups", self.groups, tp)
            return self.groups / tp
        _divides("tp (Mamba groups are replicated)", tp, self.groups)
        return 1.0

    def split(self, tp: int) -> MixerSplit:
        _divides("Mamba heads", self.heads, tp)
        groups = self._groups_per_gpu(tp)
        inner = self.inner / tp
        heads = self.heads / tp
        conv_dim = inner + 2 * groups * self.state_size
        out = 2 * inner + 2 * groups * self.state_size + heads
        ssm = heads * self.head_dim * self.state_size
        conv_state = (self.conv_kernel - 1) * conv_dim
        return MixerSplit(
            qkv_weights=self.hidden * out + conv_dim * self.conv_kernel,
            qkv_out=out,
            o_weights=inner * self.hidden,
            o_in=inner,
            state_elems_per_seq=conv_state + (0.0 if self.fp32_state else ssm),
            state_fp32_elems_per_seq=ssm if self.fp32_state else 0.0,
            heads=heads,
        )

    def core_terms(self, split: MixerSplit, shape: StepShape, ab: float, kb: float) -> Any:  # noqa: ARG002  (the parts' common signature)
        p, n = self.head_dim, self.state_size
        per_token = SSM_FLOP_PER_STATE_ELEMENT * split.heads * p * n
        chunk = 2 * self.chunk_size * split.heads * (p + n)
        yield recurrent_terms("ssm", split, shape, ab, per_token, chunk)
