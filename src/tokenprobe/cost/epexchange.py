"""The EP exchange's time for a deployment's EP back end (`cost.epcomm.EpComm`): the bytes each
dispatch and combine hop carries, the copies a token sends across nodes, the rates DeepEP's
kernels reach, and the step with two-batch overlap. The mechanisms and their sources are in
cost/epcomm.py's docstring; this module prices them and reads `Deployment`, which holds the
EpComm (so the configuration does not import what it configures)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tokenprobe.cost.epbalance import ep_imbalance, random_routing_imbalance, reach_probability
from tokenprobe.cost.epcomm import FP8_BYTES_PER_ELEMENT
from tokenprobe.precision import activation_bytes_per_element

if TYPE_CHECKING:
    from tokenprobe.cost.deployment import Deployment
    from tokenprobe.cost.shape import BatchShape

# DeepEP's achieved rates as shares of the link / NIC (module docstring): (dispatch, combine)
DEEPEP_NORMAL_LINK = (153 / 200, 158 / 200)
DEEPEP_NORMAL_NIC = (58 * 3 / 4 / 50, 57 * 3 / 4 / 50)
DEEPEP_LL_NIC = (48 * 3 / 4 / 50, 53 * 3 / 4 / 50)
# The README's rates are the mean GPU's bytes over the collective's time, which the busiest
# receiver sets; its tests route at random (scores from torch.randn: tests/test_intranode.py,
# test_internode.py, test_low_latency.py), so that GPU received the random-routing excess of
# cost/epbalance.py: normal kernels 4,096 tokens x top-8 a GPU at EP8 (intranode) and EP32
# (internode), low-latency 128 x top-8 at EP32 (deepseek-ai/DeepEP@0aaa6744c890c5af051f6222529
# 75c4393795000:README.md). The busiest GPU's own rates are the README's times that excess
# (1.0074, 1.0112, 1.0636), so a step priced at the busiest GPU's bytes (`receive_imbalance`)
# counts the README's imbalance once.
_README_EXCESS = {
    "link": random_routing_imbalance(8, 4096 * 8),
    "normal": random_routing_imbalance(32, 4096 * 8),
    "low-latency": random_routing_imbalance(32, 128 * 8),
}


def ep_kernels(dep: Deployment, prefill: bool) -> str:
    """The kernels one step's MoE layers use: `all-to-all`, `allgather`, `normal` or
    `low-latency`."""
    ep = dep.ep_comm
    if ep.backend in ("all-to-all", "allgather"):
        return ep.backend
    if ep.mode == "auto":
        return "normal" if prefill else "low-latency"
    return ep.mode


def dispatch_bytes_per_element(dep: Deployment) -> float:
    """Bytes per hidden element of one dispatched copy (module docstring)."""
    dtype = dep.ep_comm.dispatch_dtype
    if dtype == "auto":
        fp8 = dep.ep_comm.backend == "deepep" and dep.weight_dtype.name == "fp8"
        dtype = "fp8" if fp8 else "bf16"
    if dtype == "fp8":
        return FP8_BYTES_PER_ELEMENT
    return activation_bytes_per_element(dep.act_dtype)


def copies_per_token(dep: Deployment, kind: str) -> tuple[float, float]:
    """(copies over the scale-up link, copies over the NIC) of one token in one hop
    (module docstring); 0 without attention DP + EP."""
    moe = dep.model.moe
    n = dep.tp
    if moe is None or n <= 1 or not dep.attention_dp:
        return 0.0, 0.0
    d = min(n, dep.domain_gpus)
    m = -(-n // d)
    k, experts = moe.experts_per_token, moe.num_experts
    if kind == "normal":  # once per GPU and per node reached (group-limited: cost/epbalance.py)
        p_gpu = reach_probability(moe, experts / n)
        p_dom = reach_probability(moe, experts * d / n) if m > 1 else 0.0
        return (n - m) * p_gpu, (m - 1) * p_dom
    if kind == "allgather":  # every token to every other EP GPU (vLLM naive / allgather)
        return float(d - 1), float(n - d)
    return k * (d - 1) / n, k * (n - d) / n


def _rates(dep: Deployment, kind: str, hop: int) -> tuple[float, float]:
    """(link bytes/s, NIC bytes/s) of one GPU in hop 0 (dispatch) or 1 (combine)."""
    link = dep.gpu.link
    topo = dep.gpu.topology
    nic = topo.nic_bytes_per_s if topo is not None else 0.0
    if kind in ("all-to-all", "allgather"):
        eff = dep.efficiency.link
        return link.bytes_per_s * eff * link.collective_factor, nic * eff
    link_rate = link.bytes_per_s * DEEPEP_NORMAL_LINK[hop] * _README_EXCESS["link"]
    share = DEEPEP_NORMAL_NIC if kind == "normal" else DEEPEP_LL_NIC
    return link_rate, nic * share[hop] * _README_EXCESS[kind]


def _slower(a: Any, b: Any) -> Any:
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


def hop_bytes(dep: Deployment, tokens: Any, prefill: bool) -> list[tuple[Any, Any]]:
    """[(link bytes, NIC bytes)] one GPU sends in the dispatch and in the combine of one MoE
    layer, for its `tokens` tokens."""
    kind = ep_kernels(dep, prefill)
    link_c, nic_c = copies_per_token(dep, kind)
    h = dep.model.hidden_size
    out = []
    combine = activation_bytes_per_element(dep.act_dtype)
    for bpe in (dispatch_bytes_per_element(dep), combine):
        per_token = h * bpe
        out.append((tokens * per_token * link_c, tokens * per_token * nic_c))
    return out


def receive_imbalance(dep: Deployment, tokens: Any, prefill: bool, step_tokens: Any = None) -> Any:
    """How much longer the busiest GPU's dispatch and combine take than the mean GPU's: the
    expert load imbalance (cost/epbalance.py) of a step of `step_tokens` tokens (default: a GPU's
    `tokens` on every EP GPU); 1 for the all-gather back end, where every GPU receives all."""
    if ep_kernels(dep, prefill) == "allgather":
        return 1.0
    return ep_imbalance(dep, tokens * dep.tp if step_tokens is None else step_tokens)


def exchange_parts_s(
    dep: Deployment, tokens: Any, prefill: bool, step_tokens: Any = None
) -> tuple[Any, Any]:
    """(inside the domain, over the NICs) seconds of one MoE layer's dispatch + combine of a
    GPU's `tokens` tokens: each hop's fixed cost and its slower path; the NIC's seconds count
    as inter-node when the NIC path is the slower one (as cost/comm.py's all-to-all). The
    busiest receiver sets the time: the bytes scale by `receive_imbalance`."""
    kind = ep_kernels(dep, prefill)
    busiest = receive_imbalance(dep, tokens, prefill, step_tokens)
    link, eff = dep.gpu.link, dep.efficiency
    topo = dep.gpu.topology
    across = topo is not None and dep.tp > dep.domain_gpus
    fixed = link.latency_s + eff.alltoall_extra_latency_s
    intra: Any = 0.0
    inter: Any = 0.0
    for hop, (link_b, nic_b) in enumerate(hop_bytes(dep, tokens, prefill)):
        link_rate, nic_rate = _rates(dep, kind, hop)
        link_b, nic_b = link_b * busiest, nic_b * busiest
        intra_s = link_b / link_rate
        if not across or topo is None:
            intra = intra + fixed + intra_s
            continue
        nic_s = topo.nic_latency_s + nic_b / nic_rate
        nic_slower = nic_s >= intra_s
        if isinstance(nic_slower, np.ndarray):
            intra = intra + fixed + np.where(nic_slower, 0.0, intra_s)
            inter = inter + np.where(nic_slower, nic_s, 0.0)
        elif nic_slower:
            intra, inter = intra + fixed, inter + nic_s
        else:
            intra, inter = intra + fixed + intra_s, inter
    return intra, inter


def overlapped_s(dep: Deployment, gpu_s: Any, ep_s: Any) -> Any:
    """Seconds of a step's EP communication hidden under its GPU work: min of the two under
    two-batch overlap (the step then takes max(gpu, comm)), else none."""
    if not dep.ep_comm.overlap:
        return 0.0
    return -_slower(-gpu_s, -ep_s)  # the smaller


def exchange_layers(dep: Deployment) -> int:
    """MoE layers whose tokens are dispatched and combined under attention DP + EP (0 without)."""
    if not (dep.attention_dp and dep.model.moe is not None and dep.tp > 1):
        return 0
    return sum(n for spec, n in dep.model.layer_groups if spec.moe)


def ep_exchange_s(dep: Deployment, shape: BatchShape) -> Any:
    """Seconds of one pass's expert-parallel dispatches and combines under attention DP (0
    otherwise): each GPU's share of the tokens, every MoE layer, priced by the deployment's EP
    back end (cost/epcomm.py; the plain all-to-all by default)."""
    layers = exchange_layers(dep)
    if not layers:
        return 0.0
    intra, inter = exchange_parts_s(dep, shape.tokens / dep.tp, has_prefill(shape))
    return layers * (intra + inter)


def has_prefill(shape: BatchShape) -> bool:
    """Whether a step carries prompt tokens (SGLang's DeepEP `auto` mode picks its kernels by
    it: cost/epcomm.py)."""
    return bool(np.any(np.asarray(shape.prefill_tokens) > 0))


def ep_exchange_breakdown(dep: Deployment, shape: BatchShape, moe_layers: int) -> dict[str, Any]:
    """comm_breakdown's all-to-all entries re-priced by the EP back end: bytes one GPU sends
    per dispatch + combine pair and over its NIC, seconds inside the domain and over the NICs."""
    tokens, prefill = shape.tokens / dep.tp, has_prefill(shape)
    hops = hop_bytes(dep, tokens, prefill)
    intra, inter = exchange_parts_s(dep, tokens, prefill)
    return {
        "alltoall_bytes": sum(link + nic for link, nic in hops) / 2,
        "alltoall_inter_node_bytes": sum(nic for _, nic in hops) / 2,
        "alltoall_s": moe_layers * (intra + inter),
        "ep_backend": dep.ep_comm.label(),
        "ep_kernels": ep_kernels(dep, prefill),
        "ep_dispatch_bytes_per_element": dispatch_bytes_per_element(dep),
    }
