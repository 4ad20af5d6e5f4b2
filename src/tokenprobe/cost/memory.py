"""GPU memory: weights, KV cache, activations, runtime; KV capacity and max concurrency (E4).

The budget follows vLLM's (`gpu_memory_utilization`, default 0.9, of each GPU's HBM; the KV cache
gets what weights, the peak activations of a profiling pass and the runtime leave):

    kv_free = HBM · util − weights − activations − runtime

- weights per GPU: each layer's matrices split over tp, 1/pp of the layers; embeddings and LM
  head (vocab-parallel over tp) in 16-bit for quantized checkpoints.
- activations: peak of one forward pass at `max_num_batched_tokens` (vLLM's profile run): the
  widest per-token tensors (qkv out + 2·MLP intermediate + residual) plus fp32 logits of
  `max_num_seqs` rows (the simulator passes its server's own two limits).
- runtime: CUDA context, cuBLAS/NCCL workspaces and CUDA graphs, a parameter (vLLM start-up
  logs typically show 0.5-1.5 GiB for these on one GPU).
- KV per request: `ModelSpec.kv_elements_for_context` (sliding layers keep their window),
  rounded up to whole blocks of `block_size` tokens (vLLM paged attention, default 16), plus
  the fixed per-sequence state of recurrent layers (`state_bytes_per_seq_per_gpu`; vLLM v1
  allocates one state per running request for a hybrid model's Mamba / linear-attention
  layers), so a hybrid model's max concurrency is free / (KV of the context + state).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.ops import dense_weight_bytes, group_coeffs
from tokenprobe.cost.vllm_mla_era import (
    VLLM_MLA_RULES,
    mla_rule_extra_weight_bytes_per_gpu,
    mla_rule_kv_bytes_per_token_per_gpu,
    mla_rule_profile_moe_bytes_per_gpu,
)
from tokenprobe.cost.vllm_mla_profile import (
    era_prefill_bytes_per_token,
    era_runtime_bytes,
    era_usable_bytes,
)
from tokenprobe.errors import ConfigError
from tokenprobe.files import finite
from tokenprobe.model import state_bytes_per_seq
from tokenprobe.precision import UNQUANTIZED_BYTES_PER_ELEMENT, activation_bytes_per_element
from tokenprobe.units import GiB

DEFAULT_RUNTIME_BYTES = 1.0 * GiB


# How a server sizes its KV cache from `gpu_memory_utilization` (the fraction its flag sets):
# vllm: fraction x HBM - weights - the profile run's peak activations - runtime
#   (vllm/v1/worker/gpu_worker.py `determine_available_memory`);
# sglang: mem_fraction_static x HBM - weights - runtime; activations live in the rest
#   (sglang/srt/model_executor/model_runner.py `profile_max_num_token`);
# tensorrt-llm: kv_cache_free_gpu_mem_fraction x (HBM - weights - activations - runtime): a
#   fraction of what is free once the engine and its buffers are loaded (KvCacheConfig);
# vllm-0.7.0-mla-as-mha, vllm-0.7-mla: vllm's, with the KV bytes per token and the extra MLA
#   weights of vLLM <= 0.7.0 and 0.7.1-0.7.x for MLA models (cost/vllm_mla_era.py), and what
#   vLLM 0.7's profile run holds of them (cost/vllm_mla_profile.py: CUDA's total, the MLA
#   prefill path's activations, NCCL's NVLS buffers).
VLLM_RULE, SGLANG_RULE, TRTLLM_RULE = "vllm", "sglang", "tensorrt-llm"
MEMORY_RULES = (VLLM_RULE, SGLANG_RULE, TRTLLM_RULE, *VLLM_MLA_RULES)


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """How the KV budget is computed; the defaults are vLLM's."""

    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    runtime_bytes: float = DEFAULT_RUNTIME_BYTES
    block_size: int = 16
    rule: str = VLLM_RULE

    def __post_init__(self) -> None:
        for name in ("gpu_memory_utilization", "runtime_bytes"):
            object.__setattr__(self, name, finite(name, getattr(self, name), lo=0))
        if self.rule not in MEMORY_RULES:
            raise ConfigError("memory rule", self.rule, f"one of {', '.join(MEMORY_RULES)}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                "gpu_memory_utilization", self.gpu_memory_utilization, "a fraction in (0, 1]"
            )
        for name in ("max_num_batched_tokens", "max_num_seqs", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1 << 30:
                raise ConfigError(name, value, f"an integer in [1, {1 << 30:,}]")


DEFAULT_BUDGET = MemoryBudget()


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """Per-GPU memory picture, bytes. `kv_bytes_per_token` is for the whole deployment."""

    hbm_bytes_per_gpu: float
    usable_bytes_per_gpu: float
    weights_bytes_per_gpu: float
    activation_bytes_per_gpu: float
    runtime_bytes_per_gpu: float
    kv_free_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_bytes_per_request: float  # KV of the context plus the fixed state (all GPUs)
    state_bytes_per_request: float  # of which the recurrent layers' fixed state (all GPUs)
    context_tokens: int
    kv_capacity_tokens: int
    max_concurrent_requests: int
    fits: bool
    reason: str

    def to_dict(self) -> dict[str, float | int | bool | str]:
        return asdict(self)


def weights_bytes_per_gpu(dep: Deployment) -> float:
    wb = dep.weight_dtype.bytes_per_element  # routed experts
    db = dense_weight_bytes(dep)  # the rest: 16-bit where the checkpoint quantizes experts only
    layers = sum(
        g.layers
        * (
            (g.mix.qkv_weights + g.mix.o_weights + g.ffn.mlp_weights + g.ffn.router_weights) * db
            + g.ffn.experts_here * g.ffn.expert_weights * wb
        )
        for g in group_coeffs(dep)
    )
    m = dep.model
    hb = dep.weight_dtype.bytes_per_element
    hb = hb if dep.weight_dtype.bits >= 16 else UNQUANTIZED_BYTES_PER_ELEMENT
    embed = m.embedding_params / dep.dense_tp
    head = m.lm_head_params / dep.dense_tp
    heads = embed + head if dep.pp == 1 else max(embed, head)
    return layers + heads * hb


def activation_bytes_per_gpu(dep: Deployment, budget: MemoryBudget = DEFAULT_BUDGET) -> float:
    m = dep.model
    ab = activation_bytes_per_element(dep.act_dtype)
    widest = max(
        g.mix.qkv_out + 2 * max(g.ffn.mlp_inner, g.ffn.expert_inner) for g in group_coeffs(dep)
    )
    per_token = (2 * m.hidden_size + widest) * ab
    per_token = max(per_token, era_prefill_bytes_per_token(dep, budget.rule))  # vLLM 0.7 MLA
    logits = budget.max_num_seqs * m.vocab_size / dep.dense_tp * 4.0
    moe = mla_rule_profile_moe_bytes_per_gpu(dep, budget.rule, budget.max_num_batched_tokens)
    return budget.max_num_batched_tokens * per_token + logits + moe


def state_bytes_per_seq_per_gpu(dep: Deployment) -> float:
    """The fixed state one sequence holds on one GPU whatever its length: the recurrent layers'
    (Gated DeltaNet, Mamba-2) conv and SSM states in the model dtype (vLLM's `auto` mamba cache
    dtype; fp32 where the config says so), this GPU's layers and heads; 0 for attention-only
    models. Under attention DP a sequence lives on one GPU: amortised over the dp GPUs."""
    sb = activation_bytes_per_element(dep.act_dtype)
    per_gpu = sum(g.layers * state_bytes_per_seq(g.mix, sb) for g in group_coeffs(dep))
    return per_gpu / dep.dp


def state_blocks_per_seq(dep: Deployment, block_size: int) -> int:
    """KV blocks of `block_size` tokens one sequence's fixed state fills (rounded up): what a
    paged KV pool reserves for it while it runs (sim/kv.py); 0 for attention-only models."""
    state = state_bytes_per_seq_per_gpu(dep)
    if not state:
        return 0
    return math.ceil(state / (block_size * dep.kv_bytes_per_token_per_gpu))


def kv_bytes_per_request_per_gpu(dep: Deployment, context_tokens: int, block_size: int) -> float:
    """KV bytes one sequence of `context_tokens` holds on one GPU, in whole blocks, plus the
    fixed state of its recurrent layers (a hybrid model's sequence reserves both)."""
    blocks = math.ceil(context_tokens / block_size)
    elems = dep.model.kv_elements_for_context(blocks * block_size)
    tokens_held = elems / dep.model.kv_elements_per_token  # < context when windows are full
    kv = tokens_held * dep.kv_bytes_per_token_per_gpu
    state = state_bytes_per_seq_per_gpu(dep)
    return kv + state if state else kv


def memory_report(
    dep: Deployment, context_tokens: int, budget: MemoryBudget = DEFAULT_BUDGET, batch: int = 1
) -> MemoryReport:
    """Does the model fit with `batch` requests of `context_tokens`, and how many such requests
    fit in the KV cache?"""
    hbm = dep.gpu.hbm_bytes
    usable = hbm * budget.gpu_memory_utilization
    usable = era_usable_bytes(dep, budget.rule, budget.gpu_memory_utilization) or usable
    runtime = budget.runtime_bytes + era_runtime_bytes(dep, budget.rule)
    weights = max(0.0, weights_bytes_per_gpu(dep) - dep.cpu_offload_bytes)  # GPU-resident
    weights += mla_rule_extra_weight_bytes_per_gpu(dep, budget.rule)
    kv_token = mla_rule_kv_bytes_per_token_per_gpu(dep, budget.rule)
    acts = activation_bytes_per_gpu(dep, budget)
    if budget.rule == SGLANG_RULE:
        kv_free = usable - weights - budget.runtime_bytes
    elif budget.rule == TRTLLM_RULE:  # the fraction applies to what is left, not to HBM
        usable = hbm
        kv_free = budget.gpu_memory_utilization * (hbm - weights - acts - budget.runtime_bytes)
    else:
        kv_free = usable - weights - acts - runtime
    per_req = kv_bytes_per_request_per_gpu(dep, context_tokens, budget.block_size)
    if budget.rule in VLLM_MLA_RULES:  # MLA layers only: no recurrent state to keep apart
        per_req *= kv_token / dep.kv_bytes_per_token_per_gpu
    capacity = max(0, int(kv_free // kv_token)) if kv_free > 0 else 0
    concurrent = max(0, int(kv_free // per_req)) if kv_free > 0 else 0
    if weights > usable:
        reason = "weights alone exceed the usable HBM per GPU"
    elif kv_free <= 0:
        reason = "weights + activations + runtime leave no room for the KV cache"
    elif concurrent < 1:
        reason = f"one request of {context_tokens} tokens needs more KV than is free"
    elif concurrent < batch:
        reason = (
            f"a batch of {batch} requests of {context_tokens} tokens needs more KV than is free "
            f"(at most {concurrent} fit)"
        )
    else:
        reason = "fits"
    return MemoryReport(
        hbm_bytes_per_gpu=hbm,
        usable_bytes_per_gpu=usable,
        weights_bytes_per_gpu=weights,
        activation_bytes_per_gpu=acts,
        runtime_bytes_per_gpu=runtime,
        kv_free_bytes_per_gpu=max(kv_free, 0.0),
        kv_bytes_per_token=kv_token * dep.num_gpus,
        kv_bytes_per_token_per_gpu=kv_token,
        kv_bytes_per_request=per_req * dep.num_gpus,
        state_bytes_per_request=state_bytes_per_seq_per_gpu(dep) * dep.num_gpus,
        context_tokens=context_tokens,
        kv_capacity_tokens=capacity,
        max_concurrent_requests=concurrent,
        fits=reason == "fits",
        reason=reason,
    )


def kv_capacity_tokens(
    dep: Deployment, gpu_memory_utilization: float = 0.9, budget: MemoryBudget | None = None
) -> int:
    """KV token slots of one replica (every GPU holds its share of each token); 0 if it does not
    fit."""
    b = budget or MemoryBudget(gpu_memory_utilization=gpu_memory_utilization)
    return memory_report(dep, 1, b).kv_capacity_tokens


MAX_SEARCH_CONTEXT_TOKENS = 2**30  # bisection ceiling, far above any model's context window


def max_context_tokens(dep: Deployment, batch: float, gpu_memory_utilization: float = 0.9) -> float:
    """Largest context per sequence at which `batch` sequences share the KV cache (KV-bound
    batches). Windowed layers (sliding or chunked attention) hold at most their window, so this
    is found by bisection on `kv_bytes_per_request_per_gpu`, not by dividing the full-layer token
    capacity."""
    budget = MemoryBudget(gpu_memory_utilization=gpu_memory_utilization)
    free = memory_report(dep, 1, budget).kv_free_bytes_per_gpu / max(batch, 1.0)
    if kv_bytes_per_request_per_gpu(dep, 1, 1) > free:
        return 0.0
    lo, hi = 1, 1
    while kv_bytes_per_request_per_gpu(dep, hi, 1) <= free and hi < MAX_SEARCH_CONTEXT_TOKENS:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if kv_bytes_per_request_per_gpu(dep, mid, 1) <= free else (lo, mid)
    return float(lo)
