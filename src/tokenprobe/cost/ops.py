"""FLOP and HBM bytes of every operator of one engine step, per GPU (requirements E5, E6).

Per decoder layer (Megatron-style tensor parallel split over `tp`, see deployment.py):
- qkv_proj  : 2·T·W_qkv FLOP (a matmul of T rows does 2 FLOP per weight per row; Kaplan et al.
              arXiv:2001.08361 sec. 2.1); reads W_qkv weights once plus T rows in and out.
- attention : 4·pairs·head_dim·heads FLOP (QKᵀ and PV, 2 FLOP per multiply-add each); reads
              the KV cache of every decoding sequence (the decode bound) and writes new K, V.
              MLA decode runs in the absorbed latent form (DeepSeek-V2 sec. 2.1.3, vLLM/FlashMLA):
              2·pairs·heads·(kv_lora+rope) + 2·pairs·heads·kv_lora FLOP over a latent cache.
              Sliding-window layers attend to at most `window` keys per query.
- o_proj    : 2·T·W_o FLOP.
- mlp / moe : dense: 2·T·W_mlp. MoE: router 2·T·h·E; routed experts 2·T·k·W_expert FLOP;
              weights of the expected number of distinct experts the T tokens touch,
              E·(1 − (1 − k/E)^T) (uniform routing), read once; shared experts like a dense MLP.
              Under expert parallelism each GPU holds m = E/n experts and the layer waits for
              the GPU that touched the most of its own: with each expert touched with
              probability p = 1 − (1 − k/E)^T, a GPU's count is Binomial(m, p) and the slowest
              of n reads E[max] = Σ_{d<m} (1 − F(d)^n) experts' weights (at 8 tokens, Llama 4
              Scout's 2 experts per GPU: 1.76 on the slowest GPU against 0.81 on average;
              a Monte Carlo of Qwen3-235B's 128 experts, top-8, 8 GPUs agrees: 9.26).
- elementwise: RMSNorms, residual adds, RoPE, activation: ~10 passes over T·h activations.
Per step: the LM head (2·rows·h·V FLOP over the last position of each sequence; fp32 logits
written) and the embedding lookup.

Each term is (name, layers, flop, bytes, kernels); `step.py` turns them into time with the roofline.
The same arithmetic runs on numpy arrays (`sweep.py` passes a grid of shapes), so there is one
copy of every formula.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, cast

import numpy as np

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.shape import BatchShape
from tokenprobe.model import LayerSpec

# Activation passes over T x hidden per layer outside the matmuls: 2 RMSNorm (read + write),
# 2 residual adds (2 reads + 1 write), RoPE on q/k (~1): about 10 (vLLM fused kernels do less).
ELEMENTWISE_PASSES = 10.0
LOGIT_BYTES = 4.0  # vLLM computes logits in fp32

OpTerm = tuple[str, float, float, float, int]  # (name, layers, flop, hbm_bytes, kernels) per GPU

# Kernels each operator launches per layer in a vLLM-like engine (fused residual+RMSNorm, fused
# SiLU-and-mul, fused MoE): the count the per-kernel overhead applies to.
KERNELS = {
    "qkv_proj": 1,
    "attention": 3,
    "o_proj": 1,
    "mlp": 3,
    "shared_experts": 3,
    "router": 2,
    "experts": 5,
    "elementwise": 2,
    "embedding": 1,
    "lm_head": 4,
}
# Operators whose HBM traffic runs at an efficiency of its own (`Efficiency` field names): the
# paged KV cache of attention, the scattered expert weights of a fused MoE kernel.
MEMORY_EFFICIENCY_FIELD = {"attention": "attention_memory", "experts": "moe_memory"}


@dataclass(frozen=True, slots=True)
class _GroupCoeffs:
    """Per-GPU constants of one kind of layer, computed once per deployment."""

    layers: float  # this GPU's layers of this kind (a pipeline stage holds 1/pp)
    window: int
    moe: bool
    qkv_weights: float  # elements on this GPU
    qkv_out: float  # output width on this GPU
    o_weights: float
    o_in: float
    mlp_weights: float  # dense MLP or shared experts
    mlp_inner: float  # intermediate width on this GPU (dense or shared)
    expert_weights: float  # one routed expert's elements on this GPU (TP slice or whole)
    experts_here: float  # routed experts resident on this GPU (E under TP, E/tp under EP)
    expert_inner: float
    router_weights: float
    attn_flop_per_pair_prefill: float
    attn_flop_per_pair_decode: float
    kv_elems_per_token: float  # this GPU's share of one layer's cache entry


def group_coeffs(dep: Deployment) -> tuple[_GroupCoeffs, ...]:
    cached: tuple[_GroupCoeffs, ...] | None = dep.__dict__.get("_group_coeffs")
    if cached is None:
        cached = tuple(_coeffs(dep, spec, n) for spec, n in dep.model.layer_groups)
        object.__setattr__(dep, "_group_coeffs", cached)
    return cached


def _coeffs(dep: Deployment, spec: LayerSpec, n_layers: int) -> _GroupCoeffs:
    m, tp = dep.model, dep.dense_tp  # attention and dense layers; experts below use dep.tp
    h = m.hidden_size
    heads_gpu = m.num_heads / tp
    layers = n_layers / dep.pp  # this GPU's pipeline stage holds 1/pp of the layers
    if m.mla is not None:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q_rep = h * a.q_lora_rank if a.q_lora_rank else 0.0
        q_split = (a.q_lora_rank or h) * m.num_heads * qk / tp
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv_b = a.kv_lora_rank * m.num_heads * (a.qk_nope_head_dim + a.v_head_dim) / tp
        qkv_w = q_rep + q_split + kv_a + kv_b
        qkv_out = heads_gpu * qk + a.kv_lora_rank + a.qk_rope_head_dim
        o_in = heads_gpu * a.v_head_dim
        pre = 2 * heads_gpu * (qk + a.v_head_dim)
        dec = 2 * heads_gpu * (2 * a.kv_lora_rank + a.qk_rope_head_dim)
        kv_elems = float(a.kv_lora_rank + a.qk_rope_head_dim)
    else:
        kv_heads_gpu = dep.kv_heads_per_gpu
        qkv_out = (heads_gpu + 2 * kv_heads_gpu) * m.head_dim
        qkv_w = h * qkv_out
        o_in = heads_gpu * m.head_dim
        pre = dec = 4 * heads_gpu * m.head_dim
        kv_elems = 2 * kv_heads_gpu * m.head_dim
    mats = 3 if m.gated_mlp else 2  # gate, up, down (SwiGLU) or up, down
    moe = m.moe if spec.moe else None
    if moe is None:
        mlp_inner = m.intermediate_size / tp
        expert_w = experts_here = expert_inner = router_w = 0.0
    else:
        mlp_inner = moe.num_shared_experts * moe.shared_intermediate_size / tp
        expert_inner = moe.expert_intermediate_size / (1 if dep.expert_parallel else dep.tp)
        expert_w = mats * h * expert_inner
        experts_here = moe.num_experts / (dep.tp if dep.expert_parallel else 1)
        router_w = h * moe.num_experts
    return _GroupCoeffs(
        layers=layers,
        window=spec.window,
        moe=spec.moe,
        qkv_weights=qkv_w,
        qkv_out=qkv_out,
        o_weights=o_in * h,
        o_in=o_in,
        mlp_weights=mats * h * mlp_inner,
        mlp_inner=mlp_inner,
        expert_weights=expert_w,
        experts_here=experts_here,
        expert_inner=expert_inner,
        router_weights=router_w,
        attn_flop_per_pair_prefill=pre,
        attn_flop_per_pair_decode=dec,
        kv_elems_per_token=kv_elems,
    )


def _term(name: str, layers: float, flop: Any, nbytes: Any) -> OpTerm:
    return (name, layers, flop, nbytes, KERNELS[name])


def expected_distinct_experts(
    num_experts: int, experts_per_token: int, tokens: Any, skew: float = 0.0
) -> Any:
    """Expected number of distinct experts hit by `tokens` tokens each routed to k of E experts.

    Uniform independent routing (skew 0): E·(1 − (1 − k/E)^T). Real routers favour some experts
    over others within a batch, so fewer distinct experts are hit by a few tokens than uniform
    routing says, while a large batch still hits them all: expert e is picked with probability
    k·w_e/E per token, w_e log-normal over the experts with σ = `skew`, mean 1 (E equal-mass
    quantiles), so Σ_e (1 − (1 − k·w_e/E)^T). Floats or numpy arrays (sweep.py)."""
    if skew <= 0:
        return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)
    p = _skewed_pick_probabilities(num_experts, experts_per_token, round(skew, 9))
    t = np.asarray(tokens, dtype=np.float64)
    q = (1.0 - p).reshape((-1,) + (1,) * t.ndim)
    out = np.sum(1.0 - q**t, axis=0)
    return float(out) if np.ndim(out) == 0 else out


@functools.lru_cache(maxsize=1024)
def _skewed_pick_probabilities(num_experts: int, k: int, skew: float) -> np.ndarray:
    """Per-token pick probability of each expert under log-normal popularity (see above)."""
    z = np.array([NormalDist().inv_cdf((e + 0.5) / num_experts) for e in range(num_experts)])
    w = np.exp(skew * z)
    p: np.ndarray = np.minimum(1.0, k * w / w.mean() / num_experts)
    return p


@functools.lru_cache(maxsize=65536)
def _max_touched_float(per_gpu: int, gpus: int, p: float) -> float:
    return float(_max_touched(per_gpu, gpus, p))


def _max_touched(per_gpu: int, gpus: int, p: Any) -> Any:
    """E[max over `gpus` GPUs of Binomial(per_gpu, p)] = Σ_{d<m} (1 − F(d)^n), elementwise."""
    p = np.asarray(p, dtype=np.float64)
    q = 1.0 - p
    ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)  # p = 1: every expert touched
    pmf = q**per_gpu  # P(count = 0)
    cdf = pmf
    expected = np.zeros_like(p)
    for d in range(per_gpu):
        expected = expected + (1.0 - cdf**gpus)
        pmf = pmf * ((per_gpu - d) / (d + 1)) * ratio
        cdf = cdf + pmf
    return expected


def slowest_gpu_experts(
    moe_experts: int, experts_per_token: int, tokens: Any, gpus: int, skew: float = 0.0
) -> Any:
    """Distinct experts read by the busiest of `gpus` expert-parallel GPUs (module docstring);
    with routing skew, each expert is taken as touched with the skewed mean probability."""
    per_gpu = -(-moe_experts // gpus)  # the busiest GPU holds the rounded-up share
    p = expected_distinct_experts(moe_experts, experts_per_token, tokens, skew) / moe_experts
    if isinstance(p, np.ndarray):
        return _max_touched(per_gpu, gpus, p)
    return _max_touched_float(per_gpu, gpus, round(float(p), 12))


@dataclass(frozen=True, slots=True)
class _LocalShape:
    """One GPU's share of a step's sequences under attention DP (BatchShape's fields / dp)."""

    prefill_tokens: float
    prefill_attn_pairs: float
    prefill_seqs: float
    decode_seqs: float
    decode_context_tokens: float

    @property
    def tokens(self) -> float:
        return self.prefill_tokens + self.decode_seqs

    @property
    def logit_rows(self) -> float:
        return self.prefill_seqs + self.decode_seqs


def local_shape(dep: Deployment, shape: BatchShape) -> BatchShape:
    """What one GPU's attention and dense layers see: all of it, or 1/dp under attention DP."""
    if dep.dp == 1:
        return shape
    f = 1.0 / dep.dp
    local = _LocalShape(shape.prefill_tokens * f, shape.prefill_attn_pairs * f,
                        shape.prefill_seqs * f, shape.decode_seqs * f,
                        shape.decode_context_tokens * f)  # fmt: skip
    return cast(BatchShape, local)  # same fields, float counts: the formulas are arithmetic


def layer_terms(dep: Deployment, shape: BatchShape) -> Iterator[OpTerm]:
    """Per-layer operator terms for every group of identical layers (per GPU). Routed experts
    see every token of the step (spread over the GPUs that hold them); the rest sees this GPU's
    share (`local_shape`)."""
    ab = dep.act_dtype.bytes_per_element
    if ab < 2:  # fp8/int8 activations are quantized inside the GEMM; tensors move in 16-bit
        ab = 2.0
    wb = dep.weight_dtype.bytes_per_element
    kb = dep.kv_dtype.bytes_per_element
    m = dep.model
    h = m.hidden_size
    all_tokens = shape.tokens
    shape = local_shape(dep, shape)
    tokens = shape.tokens
    for g in group_coeffs(dep):
        n = g.layers
        yield _term(
            "qkv_proj",
            n,
            2 * tokens * g.qkv_weights,
            g.qkv_weights * wb + tokens * (h + g.qkv_out) * ab,
        )
        yield _attention(g, shape, ab, kb)
        yield _term(
            "o_proj", n, 2 * tokens * g.o_weights, g.o_weights * wb + tokens * (g.o_in + h) * ab
        )
        if g.mlp_weights:
            name = "shared_experts" if g.moe else "mlp"
            yield _term(
                name,
                n,
                2 * tokens * g.mlp_weights,
                g.mlp_weights * wb + tokens * (2 * h + 4 * g.mlp_inner) * ab,
            )
        if g.moe and m.moe is not None:
            yield from _moe_terms(dep, g, tokens, all_tokens, wb, ab, h)
        yield _term("elementwise", n, 0.0, ELEMENTWISE_PASSES * tokens * h * ab)


def _minimum(a: Any, b: Any) -> Any:
    """min() for floats, elementwise for the numpy grids of `sweep.py` (floats stay fast)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return a if a <= b else b


def _attention(g: _GroupCoeffs, shape: BatchShape, ab: float, kb: float) -> OpTerm:
    pairs = shape.prefill_attn_pairs
    ctx = shape.decode_context_tokens
    if g.window:
        pairs = _minimum(pairs, shape.prefill_tokens * g.window)
        ctx = _minimum(ctx, shape.decode_seqs * g.window)
    flop = pairs * g.attn_flop_per_pair_prefill + ctx * g.attn_flop_per_pair_decode
    kv_bytes = (ctx + shape.tokens) * g.kv_elems_per_token * kb  # read cache, write new K/V
    io_bytes = shape.tokens * (g.qkv_out + g.o_in) * ab
    return _term("attention", g.layers, flop, kv_bytes + io_bytes)


def _moe_terms(
    dep: Deployment,
    g: _GroupCoeffs,
    tokens: float,
    all_tokens: float,
    wb: float,
    ab: float,
    h: int,
) -> Iterator[OpTerm]:
    moe = dep.model.moe
    assert moe is not None
    n = g.layers
    yield _term("router", n, 2 * tokens * g.router_weights, g.router_weights * ab + tokens * h * ab)
    skew = dep.efficiency.routing_skew
    if dep.expert_parallel and dep.tp > 1:
        touched = slowest_gpu_experts(
            moe.num_experts, moe.experts_per_token, all_tokens, dep.tp, skew
        )
    else:  # every GPU holds a slice of every expert: all see the same experts
        touched = expected_distinct_experts(
            moe.num_experts, moe.experts_per_token, all_tokens, skew
        )
    routed_rows = all_tokens * moe.experts_per_token * g.experts_here / moe.num_experts
    flop = 2 * routed_rows * g.expert_weights
    act = routed_rows * (2 * h + 4 * g.expert_inner) * ab
    yield _term("experts", n, flop, touched * g.expert_weights * wb + act)


def head_terms(dep: Deployment, shape: BatchShape) -> Iterator[OpTerm]:
    """Once per step (on the first/last pipeline stage): embedding lookup and LM head."""
    m = dep.model
    h, vocab_gpu = m.hidden_size, m.vocab_size / dep.dense_tp
    ab = max(dep.act_dtype.bytes_per_element, 2.0)
    # quantized checkpoints keep embeddings and LM head in 16-bit (AWQ, FP8 and NVFP4 recipes)
    hb = dep.weight_dtype.bytes_per_element if dep.weight_dtype.bits >= 16 else 2.0
    shape = local_shape(dep, shape)
    rows = shape.logit_rows
    yield _term("embedding", 1, 0.0, shape.tokens * h * (hb + ab))
    yield _term(
        "lm_head",
        1,
        2 * rows * h * vocab_gpu,
        h * vocab_gpu * hb + rows * (h * ab + vocab_gpu * LOGIT_BYTES),
    )
