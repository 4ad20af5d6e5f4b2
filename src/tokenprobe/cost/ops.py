"""FLOP and HBM bytes of every operator of one engine step, per GPU (requirements E5, E6).

Per decoder layer, each term asks the layer's parts (`tokenprobe.model` attention.py,
recurrent.py, ffn.py: their TP split and their context-dependent core), Megatron-style tensor
parallel over `tp` (deployment.py):
- qkv_proj  : 2·T·W_qkv FLOP (a matmul of T rows does 2 FLOP per weight per row; Kaplan et al.
              arXiv:2001.08361 sec. 2.1); reads W_qkv weights once plus T rows in and out. For a
              recurrent layer: its input projections and convolution.
- the mixer's core (the part's `core_terms`): `attention` (GQA: 4·pairs·head_dim·heads FLOP,
              reads the KV cache of every decoding sequence; MLA decode in the absorbed latent
              form; windows and DSA's top-k bound the keys a query sees), DSA's `indexer`
              (scores every cached key), `linear_attention` (Gated DeltaNet) and `ssm`
              (Mamba-2): FLOP per token, each stepped sequence's fixed state read and written.
- latent_prefill: an engine that runs MLA prefill in the absorbed form (SGLang 0.4,
              `Efficiency.mla_absorbed_prefill`) computes that share of the prefill pairs at
              decode's FLOP per pair in a kernel of its own rate (`mla_latent_prefill`).
- o_proj    : 2·T·W_o FLOP.
- mlp / moe : dense: 2·T·W_mlp. MoE: router 2·T·h·E; routed experts 2·T·k·W_expert FLOP;
              weights of the expected number of distinct experts the T tokens touch,
              E·(1 − (1 − k/E)^T) (uniform routing), read once; shared experts like a dense MLP.
              Under expert parallelism each GPU holds m = E/n experts and the layer waits for
              the GPU that touched the most of its own: with each expert touched with
              probability p = 1 − (1 − k/E)^T, a GPU's count is Binomial(m, p) and the slowest
              of n reads E[max] = Σ_{d<m} (1 − F(d)^n) experts' weights (at 8 tokens, Llama 4
              Scout's 2 experts per GPU: 1.76 on the slowest GPU against 0.81 on average;
              a Monte Carlo of Qwen3-235B's 128 experts, top-8, 8 GPUs agrees: 9.26). The
              FLOP are the mean GPU's, T·k/n rows; the layer waits for the busiest GPU's
              rows, f times as many (cost/epbalance.py): the excess is `expert_excess`.
              MXFP4 experts (gpt-oss): 0.53125 B a weight (e2m1 + one e8m0 scale per 32), the
              rest of the checkpoint in bf16 (`dense_weight_bytes`). On Hopper, vLLM 0.10-0.11
              and SGLang 0.5 run them in triton_kernels' matmul_ogs, experts TP-sliced (SGLang
              server_args.py: moe_runner_backend "triton_kernel" only with ep_size 1,
              sgl-project/sglang@469c63e5), whose dot_scaled upcasts a weight tile once per
              M-block of rows, not once per row: below 128 rows an expert, once per weight;
              3.125 CUDA-core ops a weight (catalog/energy.toml) put every expert of
              gpt-oss-120b at TP2 on an H200 at 5.3 ms a step, under the 6.3 ms its HBM read
              takes at the full 4.8 TB/s, so hidden under it; `quantized_moe` (fitted) scales
              both rates, at most its 1 - 0.93 of the experts' time.
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
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, cast

import numpy as np

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.epbalance import ep_imbalance, physical_experts
from tokenprobe.cost.shape import BatchShape
from tokenprobe.model import FfnSplit, Layer, MixerSplit, Moe
from tokenprobe.precision import UNQUANTIZED_BYTES_PER_ELEMENT, activation_bytes_per_element

# Activation passes over T x hidden per layer outside the matmuls: 2 RMSNorm (read + write),
# 2 residual adds (2 reads + 1 write), RoPE on q/k (~1): about 10 (vLLM fused kernels do less).
ELEMENTWISE_PASSES = 10.0
LOGIT_BYTES = 4.0  # vLLM computes logits in fp32
# MLA prefill attention computed in the absorbed latent form (`Efficiency.mla_absorbed_prefill`):
# decode's FLOP per query-key pair, at its own kernel's rate (`Efficiency.mla_latent_prefill`);
# its kernel is the prefill kernel `attention` counts, and the latent it reads stays on chip
LATENT_PREFILL = "latent_prefill"
# Under expert parallelism the busiest GPU computes f times the mean GPU's routed rows (cost/
# epbalance.py): the (f − 1) beyond the mean, their FLOP and activation bytes (the weights are
# read once, on the busiest GPU already: `slowest_gpu_experts`), a term of their own that step.py
# counts as time but not as the mean GPU's work (the other GPUs wait it out)
EXPERT_EXCESS = "expert_excess"

OpTerm = tuple[str, float, float, float, int]  # (name, layers, flop, hbm_bytes, kernels) per GPU

# Kernels each operator launches per layer in a vLLM-like engine (fused residual+RMSNorm, fused
# SiLU-and-mul, fused MoE): the count the per-kernel overhead applies to.
KERNELS = {
    "qkv_proj": 1,
    "attention": 3,
    "indexer": 3,  # DSA: fp8 quantize, MQA logits, top-k (vLLM `Indexer`)
    "linear_attention": 4,  # GDN: conv1d, gating, chunked delta rule, gated norm (vLLM)
    "ssm": 4,  # Mamba-2: conv1d, SSD chunk scan, state update, gated norm (vLLM MambaMixer2)
    "o_proj": 1,
    "mlp": 3,
    "shared_experts": 3,
    "router": 2,
    "experts": 5,
    EXPERT_EXCESS: 0,  # the same kernels running longer on the busiest EP GPU
    "elementwise": 2,
    "embedding": 1,
    "lm_head": 4,
}
# Operators whose HBM traffic runs at an efficiency of its own (`Efficiency` field names): the
# paged KV cache of attention, the scattered expert weights of a fused MoE kernel.
MEMORY_EFFICIENCY_FIELD = {
    "attention": "attention_memory",
    "indexer": "attention_memory",  # the DSA indexer reads the paged fp8 key cache too
    "experts": "moe_memory",
    "ssm": "ssm_memory",  # a ceiling: the lesser of it and `memory` (cost/efficiency.py)
}  # the busiest EP GPU's excess rows read at the experts' rate (step.special_byte_rates)


@dataclass(frozen=True, slots=True)
class _GroupCoeffs:
    """Per-GPU constants of one kind of layer, computed once per deployment by its parts."""

    layers: float  # this GPU's layers of this kind (a pipeline stage holds 1/pp)
    layer: Layer
    mix: MixerSplit  # the token mixer's split (all zero for an MLP-only layer)
    ffn: FfnSplit  # the FFN's split (all zero for a mixer-only layer)

    @property
    def moe(self) -> bool:
        return isinstance(self.layer.ffn, Moe)


_NO_MIXER = MixerSplit(0.0, 0.0, 0.0, 0.0)
_NO_FFN = FfnSplit(0.0, 0.0)


def group_coeffs(dep: Deployment) -> tuple[_GroupCoeffs, ...]:
    cached: tuple[_GroupCoeffs, ...] | None = dep.__dict__.get("_group_coeffs")
    if cached is None:
        cached = tuple(_coeffs(dep, layer, n) for layer, n in dep.model.part_groups)
        object.__setattr__(dep, "_group_coeffs", cached)
    return cached


def _coeffs(dep: Deployment, layer: Layer, n_layers: int) -> _GroupCoeffs:
    """Ask the layer's parts for their split: attention and dense layers over `dense_tp`
    (1 under attention DP), routed experts over `tp` (sliced, or whole under EP)."""
    tp = dep.dense_tp
    mix = layer.mixer.split(tp) if layer.mixer is not None else _NO_MIXER
    ffn = layer.ffn.split(tp, dep.tp, dep.expert_parallel) if layer.ffn is not None else _NO_FFN
    redundant = dep.ep_comm.redundant_experts
    if redundant and ffn.experts_here:  # EPLB's copies add to each GPU's resident experts
        ffn = replace(ffn, experts_here=ffn.experts_here + redundant / dep.tp)
    return _GroupCoeffs(layers=n_layers / dep.pp, layer=layer, mix=mix, ffn=ffn)


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
    ab = activation_bytes_per_element(dep.act_dtype)  # tensors move in 16-bit under fp8 GEMMs
    wb = dep.weight_dtype.bytes_per_element  # the routed experts'
    db = dense_weight_bytes(dep)  # attention, dense MLP and shared experts
    kb = dep.kv_dtype.bytes_per_element
    m = dep.model
    h = m.hidden_size
    all_tokens = shape.tokens
    shape = local_shape(dep, shape)
    tokens = shape.tokens
    for g in group_coeffs(dep):
        n, mix, ffn = g.layers, g.mix, g.ffn
        mixer = g.layer.mixer
        if mixer is not None:
            yield _term(
                "qkv_proj",
                n,
                2 * tokens * mix.qkv_weights,
                mix.qkv_weights * db + tokens * (h + mix.qkv_out) * ab,
            )
            share = dep.efficiency.mla_absorbed_prefill if m.mla is not None else 0.0
            core = _mha_share(mix, share)
            for name, flop, nbytes in mixer.core_terms(core, shape, ab, kb):
                yield _term(name, n, flop, nbytes)
            if share:  # the rest of the prefill pairs, in the latent form (Efficiency doc)
                latent_flop = share * shape.prefill_attn_pairs * mix.flop_per_pair_decode
                yield (LATENT_PREFILL, n, latent_flop, 0.0, 0)
            yield _term(
                "o_proj",
                n,
                2 * tokens * mix.o_weights,
                mix.o_weights * db + tokens * (mix.o_in + h) * ab,
            )
        if ffn.mlp_weights:
            name = "shared_experts" if g.moe else "mlp"
            yield _term(
                name,
                n,
                2 * tokens * ffn.mlp_weights,
                ffn.mlp_weights * db + tokens * (2 * h + 4 * ffn.mlp_inner) * ab,
            )
        if isinstance(g.layer.ffn, Moe):
            yield from _moe_terms(dep, g.layer.ffn, g, tokens, all_tokens, wb, ab, h)
        yield _term("elementwise", n, 0.0, ELEMENTWISE_PASSES * tokens * h * ab)


def dense_weight_bytes(dep: Deployment) -> float:
    """Bytes per element of the weights outside the routed experts (attention, dense MLP,
    shared experts): the deployment's weight format, except where the model's checkpoint
    quantizes only the experts in that very format (`ModelSpec.experts_only_quant`: gpt-oss's
    MXFP4 checkpoints keep self_attn and the router in bf16, openai/gpt-oss-120b config.json
    quantization_config.modules_to_not_convert; OpenAI gpt-oss model card, sec. 2: "quantization
    of the MoE weights to MXFP4"), whose engines load those weights as stored: 16 bits."""
    w = dep.weight_dtype
    if w.bits < 16 and dep.model.experts_only_quant == w.name:
        return UNQUANTIZED_BYTES_PER_ELEMENT
    return w.bytes_per_element


def _mha_share(mix: MixerSplit, absorbed: float) -> MixerSplit:
    """An MLA layer's split with only the MHA-form share (1 - `absorbed`) of its prefill pairs
    left in `attention`; the absorbed share is the `latent_prefill` operator."""
    if not absorbed:
        return mix
    return replace(mix, flop_per_pair_prefill=(1 - absorbed) * mix.flop_per_pair_prefill)


def _moe_terms(
    dep: Deployment,
    moe: Moe,
    g: _GroupCoeffs,
    tokens: float,
    all_tokens: float,
    wb: float,
    ab: float,
    h: int,
) -> Iterator[OpTerm]:
    n, f = g.layers, g.ffn
    yield _term("router", n, 2 * tokens * f.router_weights, f.router_weights * ab + tokens * h * ab)
    touched = _touched_experts(dep, moe, all_tokens)
    # the GPU's share of the routed rows: 1/tp of them under EP (EPLB's redundant copies
    # spread the rows, they do not add any: cost/epcomm.py), all of them sliced under TP
    physical = physical_experts(dep)
    routed_rows = all_tokens * moe.experts_per_token * f.experts_here / physical
    flop = 2 * routed_rows * f.expert_weights
    act = routed_rows * (2 * h + 4 * f.expert_inner) * ab
    yield _term("experts", n, flop, touched * f.expert_weights * wb + act)
    if dep.expert_parallel and dep.tp > 1:
        excess = ep_imbalance(dep, all_tokens) - 1.0
        yield _term(EXPERT_EXCESS, n, flop * excess, act * excess)


def _touched_experts(dep: Deployment, moe: Moe, all_tokens: Any) -> Any:
    """Experts whose weights one GPU reads in a step of `all_tokens` tokens: on the busiest GPU
    under expert parallelism, else the distinct experts the batch hits (each GPU holds a slice
    of every expert)."""
    skew = dep.efficiency.routing_skew
    if dep.expert_parallel and dep.tp > 1:
        return slowest_gpu_experts(moe.num_experts, moe.experts_per_token, all_tokens, dep.tp, skew)
    return expected_distinct_experts(moe.num_experts, moe.experts_per_token, all_tokens, skew)


def expert_weight_elements(dep: Deployment, shape: BatchShape) -> Any:
    """Routed-expert weight elements one GPU reads in one pass (all its MoE layers): the weights
    of the `experts` operator's HBM bytes, counted in elements rather than bytes (what a kernel
    that dequantizes them works on; cost.step's power terms)."""
    total: Any = 0.0
    for g in group_coeffs(dep):
        if isinstance(g.layer.ffn, Moe):
            total = total + g.layers * _touched_experts(dep, g.layer.ffn, shape.tokens) * (
                g.ffn.expert_weights
            )
    return total


def head_terms(dep: Deployment, shape: BatchShape) -> Iterator[OpTerm]:
    """Once per step (on the first/last pipeline stage): embedding lookup and LM head."""
    m = dep.model
    h, vocab_gpu = m.hidden_size, m.vocab_size / dep.dense_tp
    ab = activation_bytes_per_element(dep.act_dtype)
    # quantized checkpoints keep embeddings and LM head in 16-bit (AWQ, FP8 and NVFP4 recipes)
    hb = dep.weight_dtype.bytes_per_element
    hb = hb if dep.weight_dtype.bits >= 16 else UNQUANTIZED_BYTES_PER_ELEMENT
    shape = local_shape(dep, shape)
    rows = shape.logit_rows
    yield _term("embedding", 1, 0.0, shape.tokens * h * (hb + ab))
    yield _term(
        "lm_head",
        1,
        2 * rows * h * vocab_gpu,
        h * vocab_gpu * hb + rows * (h * ab + vocab_gpu * LOGIT_BYTES),
    )
