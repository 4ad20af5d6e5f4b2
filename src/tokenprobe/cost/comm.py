"""Communication between GPUs (requirement E7), alpha-beta model, priced by where it runs.

Inside one scale-up domain (NVLink/NVSwitch, xGMI, a node's PCIe; `Deployment.domain_gpus`):
- Ring all-reduce of S bytes over n GPUs moves 2(n−1)/n·S bytes through each GPU's link
  (Patarasuk & Yuan 2009; the "bus bandwidth" of nccl-tests, NVIDIA/nccl-tests PERFORMANCE.md:
  busbw = algbw · 2(n−1)/n for all-reduce, (n−1)/n for all-to-all / all-gather /
  reduce-scatter, 1 for send/recv):
      t = α + 2(n−1)/n · S / (B_link · η_link · f_kind)
  with α the link's per-message latency (plus `Efficiency.allreduce_extra_latency_s`, the
  collective library's fixed cost where an engine runs NCCL/RCCL rather than a custom
  all-reduce), B_link its per-direction bandwidth and f_kind the share
  a collective keeps on that kind of link (1 on NVLink, 0.66 on PCIe: LinkSpec.collective_factor).
- Point-to-point send (pipeline stages): t = α + S / (B_link · η_link).

Across domains (the TP group, EP group or pipeline leaves the domain), over each GPU's
scale-out NIC (B_nic one direction, α_nic per network step; hardware.TopologySpec):
- Hierarchical all-reduce over n = d·m GPUs (d per domain, m domains): reduce-scatter inside the
  domain, all-reduce of each GPU's 1/d shard with its peers in the other domains over its own
  NIC, all-gather inside the domain (the 2-D / hierarchical algorithm of Horovod and NCCL's
  NVLS-tree and CollNet paths; NCCL's ring also moves 2(m−1)/m of the data per node over the
  network):
      t_intra = α + 2(d−1)/d · S / (B_link · η_link · f_kind)
      t_inter = 2·⌈log2 m⌉·α_nic + 2(m−1)/m · (S/d) / (B_nic · η_link)
  the latency term is NCCL's tree model, 2·log2(nNodes) network steps for an all-reduce
  (NVIDIA/nccl src/graph/tuning.cc). The phases depend on each other: t = t_intra + t_inter.
- All-to-all over n GPUs (EP): of the bytes leaving a GPU, the share for GPUs of other domains,
  (n−d)/(n−1) under uniform routing, goes over the NIC while the rest goes over the link at the
  same time; the collective ends with the slower: t = α + extra + max(intra_bytes / rate_link,
  α_nic + inter_bytes / (B_nic · η_link)).
- A pipeline send between stages in different domains: t = α + α_nic + S / (B_nic · η_link)
  (α, the link's figure measured on a small collective, is the base cost of any NCCL
  operation, launch and synchronisation; α_nic the network step on top, as NCCL's tuning model
  adds hardware latency to a base latency).

`efficiency.link` is the share of a link's per-direction rate the engine's collectives reach
(fitted per engine profile on single-domain runs); it is applied to the NIC too, the same
collective code driving it, until cross-node runs fit a figure of their own. A deployment that
fits in one domain is priced by exactly the single-domain formulas above.

A plain bulk transfer, as the seeds compute it: t = S / B (seed 004: 20 GB over PCIe's 128 GB/s
≈ 156 ms, over NVLink's 900 GB/s ≈ 22 ms, both bidirectional headline figures).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tokenprobe.cost.deployment import Deployment


def transfer_time_s(n_bytes: float, bytes_per_s: float) -> float:
    """Bulk copy at a given bandwidth, no latency term (the seeds' back-of-envelope)."""
    return n_bytes / bytes_per_s


def _link_rate(dep: Deployment) -> float:
    link = dep.gpu.link
    return link.bytes_per_s * dep.efficiency.link * link.collective_factor


def _nic(dep: Deployment) -> tuple[float, float]:
    """(achievable NIC bytes/s, NIC latency) of one GPU; only called across domains, which
    the Deployment allows only for a GPU with a topology."""
    topo = dep.gpu.topology
    assert topo is not None
    return topo.nic_bytes_per_s * dep.efficiency.link, topo.nic_latency_s


def _split(dep: Deployment, n: int) -> tuple[int, int]:
    """(GPUs per domain, domains) of a group of n consecutive GPUs."""
    d = min(n, dep.domain_gpus)
    return d, -(-n // d)


def _allreduce_fixed_s(dep: Deployment) -> float:
    """One all-reduce's fixed seconds: the link's per-message latency plus the collective
    library's extra fixed cost where the engine runs NCCL/RCCL instead of a custom one-shot
    kernel (`Efficiency.allreduce_extra_latency_s`)."""
    return dep.gpu.link.latency_s + dep.efficiency.allreduce_extra_latency_s


def allreduce_parts_s(dep: Deployment, n_bytes: Any, n_gpus: int | None = None) -> tuple[Any, Any]:
    """(inside the domain, over the NICs) seconds of one all-reduce of `n_bytes` per GPU."""
    n = dep.tp if n_gpus is None else n_gpus
    if n <= 1:
        return 0.0, 0.0
    d, m = _split(dep, n)
    fixed = _allreduce_fixed_s(dep)
    if m == 1:
        bus_bytes = 2 * (n - 1) / n * n_bytes
        return fixed + bus_bytes / _link_rate(dep), 0.0
    # α_link is the collective's base cost (launch, synchronisation) even with one GPU a domain
    intra = fixed + (2 * (d - 1) / d * n_bytes / _link_rate(dep) if d > 1 else 0.0)
    rate, alpha = _nic(dep)
    inter = 2 * math.ceil(math.log2(m)) * alpha + 2 * (m - 1) / m * (n_bytes / d) / rate
    return intra, inter


def allreduce_inter_node_bytes(dep: Deployment, n_bytes: Any, n_gpus: int | None = None) -> Any:
    """Bytes one GPU sends over its NIC in one all-reduce of `n_bytes` over `n_gpus` (default
    tp; 0 inside a domain)."""
    d, m = _split(dep, max(dep.tp if n_gpus is None else n_gpus, 1))
    return 0.0 if m == 1 else 2 * (m - 1) / m * (n_bytes / d)


def allreduce_time_s(dep: Deployment, n_bytes: Any, n_gpus: int | None = None) -> Any:
    n = dep.tp if n_gpus is None else n_gpus
    if 1 < n <= dep.domain_gpus:  # the simulator's per-step path: the ring alone, inline
        link = dep.gpu.link
        rate = link.bytes_per_s * dep.efficiency.link * link.collective_factor
        return _allreduce_fixed_s(dep) + 2 * (n - 1) / n * n_bytes / rate
    intra, inter = allreduce_parts_s(dep, n_bytes, n_gpus)
    return intra + inter


def alltoall_parts_s(dep: Deployment, n_bytes: Any) -> tuple[Any, Any]:
    """(inside the domain, over the NICs) seconds of one all-to-all of `n_bytes` leaving each
    GPU: the link's per-message latency plus the collective's extra fixed cost
    (`Efficiency.alltoall_extra_latency_s`), plus the slower of the two paths. The NIC's share
    counts as inter-node time when the NIC path is the slower one, else it is hidden."""
    link, eff = dep.gpu.link, dep.efficiency
    fixed = link.latency_s + eff.alltoall_extra_latency_s
    n = dep.tp
    d, m = _split(dep, n)
    if m == 1:
        return fixed + n_bytes / _link_rate(dep), 0.0
    inter_bytes = n_bytes * (n - d) / (n - 1)
    rate, alpha = _nic(dep)
    intra_s = (n_bytes - inter_bytes) / _link_rate(dep)
    inter_s = alpha + inter_bytes / rate
    if isinstance(inter_s, float):  # the simulator's per-step path: plain floats
        return (fixed, inter_s) if inter_s >= intra_s else (fixed + intra_s, 0.0)
    slower_nic = inter_s >= intra_s
    return fixed + np.where(slower_nic, 0.0, intra_s), np.where(slower_nic, inter_s, 0.0)


def alltoall_inter_node_bytes(dep: Deployment, n_bytes: Any) -> Any:
    """Of the `n_bytes` an all-to-all sends from one GPU, those for other domains' GPUs."""
    n = dep.tp
    d, m = _split(dep, n)
    return 0.0 if m == 1 else n_bytes * (n - d) / (n - 1)


def alltoall_time_s(dep: Deployment, n_bytes: Any) -> Any:
    if dep.tp <= dep.domain_gpus:
        link, eff = dep.gpu.link, dep.efficiency
        rate = link.bytes_per_s * eff.link * link.collective_factor
        return link.latency_s + eff.alltoall_extra_latency_s + n_bytes / rate
    intra, inter = alltoall_parts_s(dep, n_bytes)
    return intra + inter


def send_time_s(dep: Deployment, n_bytes: Any) -> Any:
    """One point-to-point send between two GPUs of one domain."""
    link = dep.gpu.link
    return link.latency_s + n_bytes / (link.bytes_per_s * dep.efficiency.link)


def pipeline_cross_sends(dep: Deployment) -> int:
    """Stage boundaries (of pp − 1) whose two stages sit in different domains: stage s holds
    GPUs [s·tp, (s+1)·tp), so it ends a domain when its last GPU is a domain's last."""
    if not dep.crosses_domains:
        return 0
    d = dep.domain_gpus
    return sum(1 for s in range(1, dep.pp) if (s * dep.tp - 1) // d != (s * dep.tp) // d)


def pipeline_parts_s(dep: Deployment, n_bytes: Any) -> tuple[Any, Any]:
    """(inside the domain, over the NICs) seconds of the pp − 1 sends of one pass."""
    if dep.pp <= 1:
        return 0.0, 0.0
    cross = pipeline_cross_sends(dep)
    intra = (dep.pp - 1 - cross) * send_time_s(dep, n_bytes) if cross < dep.pp - 1 else 0.0
    if not cross:
        return intra, 0.0
    rate, alpha = _nic(dep)
    # the send's base cost (the link's α, measured on a small collective) plus a network step
    return intra, cross * (dep.gpu.link.latency_s + alpha + n_bytes / rate)


def pipeline_send_s(dep: Deployment, n_bytes: Any) -> Any:
    if not dep.crosses_domains:
        return (dep.pp - 1) * send_time_s(dep, n_bytes)
    intra, inter = pipeline_parts_s(dep, n_bytes)
    return intra + inter


def collective_breakdown(
    dep: Deployment, act_bytes: Any, allreduces: int, a2a_bytes: Any, a2a_count: int
) -> dict[str, Any]:
    """Bytes and seconds of one pass's collectives (cost.stepcomm.comm_volumes gives the volumes),
    and where the seconds go: `intra_domain_s` on the scale-up link, `inter_node_s` on the
    scale-out NICs (their sum is the pass's GPU-GPU time)."""
    # the all-reduces of one attention rank: its tokens over its GPUs (the whole batch over
    # tp without attention DP)
    ar_bytes, ar_gpus = act_bytes / dep.dp, dep.dense_tp
    ar_in, ar_out = allreduce_parts_s(dep, ar_bytes, ar_gpus) if allreduces else (0.0, 0.0)
    a2a_in, a2a_out = alltoall_parts_s(dep, a2a_bytes) if a2a_count else (0.0, 0.0)
    pp_in, pp_out = pipeline_parts_s(dep, act_bytes)
    return {
        "allreduce_bytes": ar_bytes,
        "allreduces_per_step": allreduces,
        "allreduce_s": allreduces * (ar_in + ar_out),
        "allreduce_inter_node_bytes": allreduce_inter_node_bytes(dep, ar_bytes, ar_gpus)
        if allreduces
        else 0.0,
        "alltoall_bytes": a2a_bytes,
        "alltoalls_per_step": a2a_count,
        "alltoall_s": a2a_count * (a2a_in + a2a_out),
        "alltoall_inter_node_bytes": alltoall_inter_node_bytes(dep, a2a_bytes)
        if a2a_count
        else 0.0,
        "pipeline_sends_per_step": dep.pp - 1,
        "pipeline_inter_node_sends": pipeline_cross_sends(dep),
        "pipeline_send_s": pp_in + pp_out,
        "intra_domain_s": allreduces * ar_in + a2a_count * a2a_in + pp_in,
        "inter_node_s": allreduces * ar_out + a2a_count * a2a_out + pp_out,
    }
