"""The communication of one engine step (cost/step.py prices the rest): tensor-parallel
all-reduces, the expert-parallel exchange under attention DP as its back end runs it
(cost/epexchange.py), pipeline sends and host-link offload reads; their bytes, their seconds,
what of them lengthens the step, and how much runs inside the scale-up domain or over the NICs
(cost/comm.py prices each collective)."""

from __future__ import annotations

from typing import Any

from tokenprobe.cost.comm import (
    allreduce_time_s,
    alltoall_parts_s,
    collective_breakdown,
    pipeline_send_s,
)
from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.epbalance import ep_imbalance
from tokenprobe.cost.epexchange import (
    ep_exchange_breakdown,
    ep_exchange_s,
    exchange_layers,
    exchange_parts_s,
    has_prefill,
    hop_bytes,
    overlapped_s,
)
from tokenprobe.cost.shape import BatchShape
from tokenprobe.precision import activation_bytes_per_element


def comm_breakdown(dep: Deployment, shape: BatchShape) -> dict[str, Any]:
    """Communication of one pass, bytes and seconds: TP all-reduces (two per layer,
    activation-sized: tokens x hidden x 2 B), or under attention DP two all-to-alls per MoE layer
    (dispatch and combine of each GPU's tokens to the experts' GPUs, k copies each, (n-1)/n of
    them leaving the GPU); pipeline sends between the pp stages; host-link offload reads; and
    how much of it runs inside the scale-up domain or over the NICs (cost/comm.py)."""
    act_bytes, allreduces, a2a_bytes, a2a_count = comm_volumes(dep, shape)
    out = collective_breakdown(dep, act_bytes, allreduces, a2a_bytes, a2a_count)
    if a2a_count:  # the EP exchange as its back end runs it (cost/epcomm.py)
        old_in, old_out = alltoall_parts_s(dep, a2a_bytes)
        new_in, new_out = exchange_parts_s(dep, shape.tokens / dep.tp, has_prefill(shape))
        layers = a2a_count // 2
        out["intra_domain_s"] += layers * new_in - a2a_count * old_in
        out["inter_node_s"] += layers * new_out - a2a_count * old_out
        out.update(ep_exchange_breakdown(dep, shape, layers))
    if dep.expert_parallel and dep.tp > 1:  # max / mean routed rows over the EP GPUs: the
        out["ep_imbalance"] = ep_imbalance(dep, shape.tokens)  # busiest's (cost/epbalance.py)
    return {**out, "host_offload_s": offload_step_s(dep)}


def comm_volumes(dep: Deployment, shape: BatchShape) -> tuple[Any, int, Any, int]:
    """(all-reduce bytes, all-reduces, all-to-all bytes, all-to-alls) of one pass."""
    act_bytes = shape.tokens * dep.model.hidden_size * activation_bytes_per_element(dep.act_dtype)
    # one all-reduce per row-parallel output: the mixer's o_proj and the MLP's down_proj
    # (2 per layer; 1 for Nemotron-H's mixer-only and MLP-only blocks)
    allreduces = dep.model.row_parallel_outputs if dep.dense_tp > 1 else 0
    # each GPU dispatches its share of the tokens: its rank's, split over the rank's GPUs
    # when a rank has several (vLLM's sequence-parallel MoE, below)
    a2a_bytes, a2a_count = dispatch_volume(dep, act_bytes / dep.tp)
    return act_bytes, allreduces, a2a_bytes, a2a_count


def dispatch_volume(dep: Deployment, rank_act_bytes: Any) -> tuple[Any, int]:
    """(bytes leaving one GPU in one all-to-all, all-to-alls per pass) under attention DP + EP:
    the GPU's activations (`rank_act_bytes`: its token rows x hidden x 2 B) go to the GPUs
    holding their k experts ((n−1)/n of them elsewhere under uniform routing), once to
    dispatch and once to combine per MoE layer. The all-to-all ends with the GPU that sends
    the most, so a rank holding more tokens than the others sets it (cost/dpep.py passes the
    largest rank's). A rank of several GPUs (`dp_ranks` < tp) splits its tokens over them
    before the dispatch: its attention's all-reduce leaves every GPU of the rank with all of
    them, and vLLM cuts them into tp-rank shards so none is sent twice
    (vllm-project/vllm vllm/config/parallel.py `use_sequence_parallel_moe`: EP, TP > 1 and
    DP > 1 with the DeepEP or all-gather back ends)."""
    moe, layers = dep.model.moe, exchange_layers(dep)
    if moe is None or not layers:
        return 0.0, 0
    return rank_act_bytes * moe.experts_per_token * (dep.tp - 1) / dep.tp, 2 * layers


def offload_step_s(dep: Deployment) -> float:
    """Weights offloaded to host memory are streamed over the host link on every pass
    (vLLM's UVA path, no overlap): pp stages x offload_bytes / host-link bytes/s (E11)."""
    if dep.cpu_offload_bytes <= 0:
        return 0.0
    return dep.pp * dep.cpu_offload_bytes / dep.gpu.host_bytes_per_s


def exposed_comm_s(dep: Deployment, shape: BatchShape, gpu_s: Any) -> Any:
    """The step's communication seconds that lengthen it: all of comm_time_s, less the EP
    exchange hidden under `gpu_s` of GPU work by two-batch overlap (epexchange.overlapped_s)."""
    comm = comm_time_s(dep, shape)
    if not dep.ep_comm.overlap:
        return comm
    return comm - overlapped_s(dep, gpu_s, ep_exchange_s(dep, shape))


def comm_time_s(dep: Deployment, shape: BatchShape) -> Any:
    """The step's time on links rather than in the GPU: the sum of comm_breakdown's seconds
    (computed without building the dict: this runs once per simulated step)."""
    act_bytes, allreduces, _, a2a_count = comm_volumes(dep, shape)
    ar_bytes = act_bytes / dep.dp  # a rank's all-reduce: its own tokens over its own GPUs
    t = allreduces * allreduce_time_s(dep, ar_bytes, dep.dense_tp) if allreduces else 0.0
    if a2a_count:
        t = t + ep_exchange_s(dep, shape)
    if dep.pp > 1:
        t = t + pipeline_send_s(dep, act_bytes)
    return t + offload_step_s(dep)


def link_bytes(dep: Deployment, shape: BatchShape) -> Any:
    """Bytes one GPU sends over its GPU-to-GPU link in one pass: a ring all-reduce sends
    2(n−1)/n of the message (NCCL ring algorithm), an all-to-all the bytes leaving the GPU, and
    the pp − 1 stage-to-stage sends are spread over the pp GPUs."""
    act_bytes, allreduces, _, a2a_count = comm_volumes(dep, shape)
    n = dep.dense_tp
    sent = allreduces * (act_bytes / dep.dp) * 2 * (n - 1) / n if allreduces else 0.0
    if a2a_count:  # every copy the EP back end sends, over the link or the NIC
        hops = hop_bytes(dep, shape.tokens / dep.tp, has_prefill(shape))
        sent = sent + a2a_count // 2 * sum(link + nic for link, nic in hops)
    return sent + act_bytes * (dep.pp - 1) / dep.pp
