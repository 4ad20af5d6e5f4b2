"""FFN parts: a dense MLP, or a mixture of experts with shared experts (one object per kind).

Each knows its parameters (total, and active: the weights one token touches) and its per-GPU
split (`FfnSplit`); the cost model prices the matmuls from the split (cost/ops.py: 2·T·W FLOP,
the weights read once per step, the expected number of distinct experts a step touches).
- `DenseMlp`: gate, up, down (SwiGLU) or up, down (GELU / ReLU², Nemotron-H), optional biases;
  Megatron column/row split over tp (arXiv:1909.08053).
- `Moe`: a router (hidden × E, with a bias per expert for gpt-oss), E routed experts of which
  top-k run per token, and shared experts every token runs (DeepSeek `n_shared_experts`,
  Qwen2-MoE / Qwen3-Next one wide shared expert). Under tensor parallelism every GPU holds a
  1/tp slice of every expert; under expert parallelism (`ep`) E/tp whole experts. Dense-first
  layers (DeepSeek `first_k_dense_replace`) and interleaved MoE layers (Llama 4) are layers
  whose FFN part is a `DenseMlp` (see ModelSpec.layer).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FfnSplit:
    """One GPU's share of an FFN (elements)."""

    mlp_weights: float  # dense MLP or shared experts
    mlp_inner: float  # intermediate width on this GPU (dense or shared)
    expert_weights: float = 0.0  # one routed expert's elements on this GPU (TP slice or whole)
    experts_here: float = 0.0  # routed experts resident on this GPU (E under TP, E/tp under EP)
    expert_inner: float = 0.0
    router_weights: float = 0.0


def mlp_params(hidden: int, intermediate: int, gated: bool, bias: bool = False) -> int:
    mats = 3 if gated else 2
    params = mats * hidden * intermediate
    if bias:
        params += (2 if gated else 1) * intermediate + hidden
    return params


@dataclass(frozen=True, slots=True)
class DenseMlp:
    hidden: int
    intermediate: int
    gated: bool = True
    bias: bool = False

    moe = False

    @property
    def label(self) -> str:
        return "dense"

    def params(self, active: bool = False) -> int:  # noqa: ARG002  (the parts' common signature)
        return mlp_params(self.hidden, self.intermediate, self.gated, self.bias)

    def split(self, tp: int, ep_tp: int, expert_parallel: bool) -> FfnSplit:  # noqa: ARG002  (the parts' common signature)
        inner = self.intermediate / tp
        mats = 3 if self.gated else 2  # gate, up, down (SwiGLU) or up, down
        return FfnSplit(mlp_weights=mats * self.hidden * inner, mlp_inner=inner)


@dataclass(frozen=True, slots=True)
class Moe:
    hidden: int
    num_experts: int
    experts_per_token: int
    expert_intermediate: int
    num_shared: int = 0
    shared_intermediate: int = 0  # per shared expert
    gated: bool = True
    expert_bias: bool = False

    moe = True

    @property
    def label(self) -> str:
        return "MoE"

    def expert_params(self) -> int:
        return mlp_params(self.hidden, self.expert_intermediate, self.gated, self.expert_bias)

    def params(self, active: bool = False) -> int:
        """Router + experts + shared experts; `active` counts the routed top-k only."""
        routed = self.experts_per_token if active else self.num_experts
        router = self.hidden * self.num_experts + (self.num_experts if self.expert_bias else 0)
        experts = routed * self.expert_params()
        shared = self.num_shared * mlp_params(self.hidden, self.shared_intermediate, self.gated)
        return router + experts + shared

    def split(self, tp: int, ep_tp: int, expert_parallel: bool) -> FfnSplit:
        """`tp`: the dense split (1 under attention DP); `ep_tp`: the GPUs the experts span."""
        mats = 3 if self.gated else 2
        mlp_inner = self.num_shared * self.shared_intermediate / tp
        expert_inner = self.expert_intermediate / (1 if expert_parallel else ep_tp)
        return FfnSplit(
            mlp_weights=mats * self.hidden * mlp_inner,
            mlp_inner=mlp_inner,
            expert_weights=mats * self.hidden * expert_inner,
            experts_here=self.num_experts / (ep_tp if expert_parallel else 1),
            expert_inner=expert_inner,
            router_weights=self.hidden * self.num_experts,
        )
