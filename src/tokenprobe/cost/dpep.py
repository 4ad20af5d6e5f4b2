"""One step of data-parallel attention ranks that share expert-parallel MoE layers.

The layout of vLLM `--data-parallel-size N --tensor-parallel-size t --enable-expert-parallel`
and SGLang `--tp N·t --enable-dp-attention --dp-size N --ep-size N·t`: a `Deployment` with
`attention_dp` and `expert_parallel` over tp = N·t GPUs and `dp_ranks` N (None: t = 1), each
rank of t GPUs with its own scheduler, batch and KV cache, holding the attention and dense
weights split t ways (whole when t = 1) and 1/(N·t) of the routed experts on each GPU
(deployment.py, memory.py).

Every step is synchronous across the ranks: each MoE layer dispatches every rank's tokens to the
GPUs that hold their experts and combines them back (all-to-all), so no rank runs ahead of the
slowest into the next layer. Per step:

    step = max_r work_r + shared
    work_r = (rank r's own operators: projections, attention over its own KV, dense layers and
              shared experts, router, norms, embedding, LM head) x pp, its all-reduces among
              its own t GPUs (two per layer, of its own tokens) and its host time (its own
              scheduler and sampler: vLLM runs one engine-core process per DP rank)
    shared = routed experts of all ranks' tokens on the slowest EP GPU (ops.py) x pp
             + MoE layers x (dispatch + combine) of the largest rank's tokens, 1/t of them
             from each of its GPUs, priced by the deployment's EP back end (epcomm.py; under
             two-batch overlap the exchange hides under max_r work_r + experts, the step
             taking the larger of the two): the collective ends with the GPU that sends
             the most
    wait_r = step − work_r − shared: how long rank r waits for the slowest

Padding (`padded`): vLLM pads every rank's batch to the largest rank's token count
(vllm-project/vllm@v0.11.1:vllm/v1/worker/dp_utils.py `_post_process_dp_padding`,
`[max_num_tokens] * len(num_tokens_across_dp)`), and the padding rows are real rows from the
embedding on: the smaller ranks' own layers run them while they would wait anyway (max_r
work_r is unchanged), but the MoE layers gather every rank's rows, padding included, so the
routed experts compute N x the largest rank's tokens, not the sum. A rank that prefills a
1,450-token prompt while seven decode one sequence each makes the experts of an 8-rank step
compute 8 x 1,450 rows instead of 1,457: prefill steps cost the whole gang N times their
expert work (sim/engines.py `pads_ranks`, the engine preset's `dp_padding`, says which
engines pad).

Per-layer maxima equal the per-step maximum because the ranks run the same layers. A rank with
nothing to run computes a dummy batch of one token meanwhile, so that the collectives line up
(vllm-project/vllm@00080ee13c7a451fce071ccb8d0e94d395acf5a7:vllm/v1/engine/core.py,
`DPEngineCoreProc.run_busy_loop`: `if not executed: ... self.execute_dummy_batch()`, which the
GPU worker runs as `self.model_runner._dummy_run(1)`); the ranks stop only when none has work.
Each operator's cost is the single-replica model's (step.op_costs): with one rank, or N ranks
of equal batches, the step is `step_cost`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenprobe.cost.comm import allreduce_time_s
from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.epexchange import exchange_layers, exchange_parts_s, overlapped_s
from tokenprobe.cost.ops import EXPERT_EXCESS
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.step import host_time_s, op_costs
from tokenprobe.cost.stepcomm import offload_step_s
from tokenprobe.errors import ConfigError
from tokenprobe.precision import activation_bytes_per_element

# run on the EP GPUs for every rank's tokens (the busiest GPU's excess rows too: ops.py)
SHARED_OPS = frozenset({"experts", EXPERT_EXCESS})
DUMMY_BATCH = BatchShape(decode_seqs=1, decode_context_tokens=1)  # vLLM `_dummy_run(1)`


@dataclass(frozen=True, slots=True)
class GangStep:
    """One synchronous step of the ranks (module docstring), seconds."""

    time_s: float
    work_s: tuple[float, ...]  # each rank's own work
    shared_s: float  # routed experts and all-to-alls of all ranks' tokens
    wait_s: tuple[float, ...]  # each rank's wait for the slowest


def _scaled(shape: BatchShape, n: int) -> BatchShape:
    """N ranks of this shape together: what `layer_terms` splits back into one rank's."""
    return BatchShape(
        shape.prefill_tokens * n,
        shape.prefill_attn_pairs * n,
        shape.prefill_seqs * n,
        shape.decode_seqs * n,
        shape.decode_context_tokens * n,
    )


def rank_work_s(dep: Deployment, shape: BatchShape) -> float:
    """Seconds of one rank's own work on its batch `shape` (module docstring), with the
    all-reduces among its own GPUs when it has several."""
    # the rank's shape scaled to the whole deployment: op_costs divides it over the dp ranks,
    # and host_time_s takes one rank's share of it again (each rank steps its own sequences)
    whole = _scaled(shape, dep.dp)
    ops = op_costs(dep, whole)
    own = sum(op.time_s for op in ops if op.name not in SHARED_OPS)
    allreduce = 0.0
    if dep.dense_tp > 1:
        n = dep.model.row_parallel_outputs
        allreduce = n * allreduce_time_s(dep, _act_bytes(dep, shape.tokens), dep.dense_tp)
    return float(own * dep.pp + allreduce + host_time_s(dep, whole))


def _act_bytes(dep: Deployment, tokens: float) -> float:
    return tokens * dep.model.hidden_size * activation_bytes_per_element(dep.act_dtype)


def shared_moe_s(
    dep: Deployment, tokens: int, max_rank_tokens: int, prefill: bool = False
) -> float:
    """Seconds of the layers the ranks share: the routed experts of all `tokens` of the step
    and the all-to-alls of the largest rank's `max_rank_tokens` (module docstring), with no
    overlap; `prefill`: the step carries prompt tokens (DeepEP's kernels by step, epcomm.py)."""
    experts, a2a = shared_parts_s(dep, tokens, max_rank_tokens, prefill)
    return experts + a2a


def expert_rows(dep: Deployment, tokens: int, max_rank_tokens: int, padded: bool) -> int:
    """Rows the routed experts compute in a step of `tokens` over the ranks, the largest rank
    holding `max_rank_tokens`: all ranks padded to the largest (`padded`, module docstring)
    or the sum."""
    return dep.dp * max_rank_tokens if padded else tokens


def shared_parts_s(
    dep: Deployment, tokens: int, max_rank_tokens: int, prefill: bool = False
) -> tuple[float, float]:
    """(routed experts and host-link offload, EP exchange) seconds of shared_moe_s; `tokens`
    the rows the experts compute (`expert_rows`)."""
    ops = op_costs(dep, BatchShape(decode_seqs=tokens))  # the experts see only the token count
    experts = sum(op.time_s for op in ops if op.name in SHARED_OPS)
    layers = exchange_layers(dep)
    a2a = 0.0
    if layers:  # the largest rank's tokens, split over its GPUs (step.dispatch_volume)
        per_gpu = max_rank_tokens / dep.dense_tp
        intra, inter = exchange_parts_s(dep, per_gpu, prefill, step_tokens=tokens)
        a2a = layers * (intra + inter)
    return float(experts * dep.pp + offload_step_s(dep)), float(a2a)


def gang_time_s(dep: Deployment, max_work_s: float, experts_s: float, a2a_s: float) -> float:
    """The ranks' step: the slowest rank's own work, the shared experts and the EP exchange;
    under two-batch overlap the exchange hides under the GPU work (epexchange.overlapped_s)."""
    hidden = overlapped_s(dep, max_work_s + experts_s, a2a_s)
    return float(max_work_s + experts_s + a2a_s - hidden)


def gang_step(
    dep: Deployment, shapes: Sequence[BatchShape | None], padded: bool = False
) -> GangStep:
    """The step of `dep.dp` ranks with these batches (None: the rank runs a dummy batch);
    `padded`: every rank padded to the largest rank's tokens (module docstring)."""
    if len(shapes) != dep.dp:
        raise ConfigError("shapes", len(shapes), f"one batch (or None) for each of {dep.dp} ranks")
    batches = [DUMMY_BATCH if s is None else s for s in shapes]
    work = tuple(rank_work_s(dep, s) for s in batches)
    rank_tokens = [s.tokens for s in batches]
    prefill = any(s.prefill_tokens > 0 for s in batches)
    rows = expert_rows(dep, sum(rank_tokens), max(rank_tokens), padded)
    experts, a2a = shared_parts_s(dep, rows, max(rank_tokens), prefill)
    time_s = gang_time_s(dep, max(work), experts, a2a)
    shared = time_s - max(work)  # what the shared layers add to the slowest rank's work
    return GangStep(time_s, work, shared, tuple(time_s - w - shared for w in work))


def dp_layout(dp: int, enable_expert_parallel: bool, tp: int) -> dict[str, Any]:
    """`make_deployment`'s parallelism for `dp` attention ranks of `tp` GPUs each (vLLM
    `--data-parallel-size dp --tensor-parallel-size tp --enable-expert-parallel`): dp x tp GPUs,
    attention DP, the routed experts spread over all of them (module docstring); with dp = 1,
    expert parallelism over the tp GPUs (vLLM's `--enable-expert-parallel` alone) or nothing."""
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise ConfigError("dp", dp, "an integer >= 1")
    if dp == 1:
        return {"expert_parallel": True} if enable_expert_parallel else {}
    if not enable_expert_parallel:
        raise ConfigError(
            "dp", dp, "with --enable-expert-parallel (ranks without shared experts: --replicas)"
        )
    return {"tp": dp * tp, "expert_parallel": True, "attention_dp": True, "dp_ranks": dp}
