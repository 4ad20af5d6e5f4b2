"""Communication between GPUs (requirement E7), alpha-beta model.

- Ring all-reduce of S bytes over n GPUs moves 2(n−1)/n·S bytes through each GPU's link
  (Patarasuk & Yuan 2009; the "bus bandwidth" of nccl-tests, PERFORMANCE.md):
      t = α + 2(n−1)/n · S / (B_link · η_link · f_kind)
  with α the link's per-message latency, B_link its per-direction bandwidth and f_kind the share
  a collective keeps on that kind of link (1 on NVLink, 0.66 on PCIe: LinkSpec.collective_factor).
- Point-to-point send (pipeline stages): t = α + S / (B_link · η_link).
- A plain bulk transfer, as the seeds compute it: t = S / B (seed 004: 20 GB over PCIe's
  128 GB/s ≈ 156 ms, over NVLink's 900 GB/s ≈ 22 ms, both bidirectional headline figures).
"""

from __future__ import annotations

from typing import Any

from tokenprobe.cost.deployment import Deployment


def transfer_time_s(n_bytes: float, bytes_per_s: float) -> float:
    """Bulk copy at a given bandwidth, no latency term (the seeds' back-of-envelope)."""
    return n_bytes / bytes_per_s


def allreduce_time_s(dep: Deployment, n_bytes: float, n_gpus: int | None = None) -> float:
    n = dep.tp if n_gpus is None else n_gpus
    if n <= 1:
        return 0.0
    link = dep.gpu.link
    bus_bytes = 2 * (n - 1) / n * n_bytes
    rate = link.bytes_per_s * dep.efficiency.link * link.collective_factor
    return link.latency_s + bus_bytes / rate


def send_time_s(dep: Deployment, n_bytes: float) -> float:
    link = dep.gpu.link
    return link.latency_s + n_bytes / (link.bytes_per_s * dep.efficiency.link)


def alltoall_time_s(dep: Deployment, n_bytes: Any) -> Any:
    """One all-to-all of `n_bytes` leaving each GPU: the link's per-message latency plus the
    collective's extra fixed cost (`Efficiency.alltoall_extra_latency_s`), plus the bytes at the
    link's achievable rate."""
    link, eff = dep.gpu.link, dep.efficiency
    fixed = link.latency_s + eff.alltoall_extra_latency_s
    return fixed + n_bytes / (link.bytes_per_s * eff.link * link.collective_factor)
