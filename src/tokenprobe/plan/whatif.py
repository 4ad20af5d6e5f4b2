"""Which upgrade helps this workload most? Sensitivity to each resource and a power cap (P2, E14).

Each resource of the deployment is made `uplift` (default +50 %) better, one at a time, and the
estimator re-run; the change of every metric is reported and the resources ranked by the target
metric. Metrics:
- ttft_s, tpot_s: of the user's request shape at the user's batch;
- capacity_output_tokens_per_s: decode throughput at the largest batch that fits the KV cache
  (capped at the engine's max_num_seqs, vLLM's 256 by default): what HBM capacity buys;
- served_requests_per_s: min(GPU requests/s at that batch, host CPU saturation rate): what the
  CPU buys (nothing, unless the host is the bound). The host saturates at API-server processes /
  CPU seconds per request (cost/host.py: one core per process), so the CPU upgrades are a faster
  core (`cpu_core_speed`: every CPU second shorter), more API-server processes
  (`api_server_processes`, rounded up; a server setting, no hardware) and more cores
  (`cpu_cores`: only when the processes outnumber the cores left to them);
- max_concurrent_requests, joules_per_output_token.

Where the deployment crosses scale-up domains (multi-node TP, EP or PP), the scale-out network
(the NIC of every GPU) is a candidate too.

The power-cap curve (E14, seed 003: "70 % of TDP for ~10 % speed") re-runs the estimate under
caps from 40 % to 100 % of TDP: see cost/energy.py for the DVFS model behind it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tokenprobe.cost import (
    DEFAULT_API_SERVER_PROCESSES,
    DEFAULT_BUDGET,
    Deployment,
    Estimate,
    MemoryBudget,
    Workload,
    check_processes,
    estimate_deployment,
)
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import GpuSpec, HostSpec, get_host

Upgrade = Callable[[Deployment, HostSpec, float], tuple[Deployment, HostSpec]]


def _gpu(dep: Deployment, host: HostSpec, gpu: GpuSpec) -> tuple[Deployment, HostSpec]:
    return dataclasses.replace(dep, gpu=gpu), host


def _hbm_capacity(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    return _gpu(dep, host, dataclasses.replace(dep.gpu, hbm_bytes=dep.gpu.hbm_bytes * f))


def _hbm_bandwidth(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    return _gpu(
        dep, host, dataclasses.replace(dep.gpu, hbm_bytes_per_s=dep.gpu.hbm_bytes_per_s * f)
    )


def _compute(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    peaks = {k: v * f for k, v in dep.gpu.peak_flop_per_s.items()}
    return _gpu(dep, host, dataclasses.replace(dep.gpu, peak_flop_per_s=peaks))


def _interconnect(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    link = dataclasses.replace(dep.gpu.link, bytes_per_s=dep.gpu.link.bytes_per_s * f)
    return _gpu(dep, host, dataclasses.replace(dep.gpu, link=link))


def _host_link(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    # the GPU's host link (PCIe, or NVLink-C2C on GH200) is what `host_bytes_per_s` reads
    faster = dataclasses.replace(dep.gpu, c2c_bytes_per_s=dep.gpu.host_bytes_per_s * f)
    return _gpu(dep, host, faster)


def _cpu_cores(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    return dep, dataclasses.replace(host, cpu_cores=max(1, round(host.cpu_cores * f)))


def _cpu_core_speed(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    return dep, dataclasses.replace(host, cpu_core_speed=host.cpu_core_speed * f)


def _scale_out_network(dep: Deployment, host: HostSpec, f: float) -> tuple[Deployment, HostSpec]:
    # the scale-out NIC of every GPU (e.g. ConnectX-7 400 -> ConnectX-8 800 Gb/s is f = 2)
    topo = dep.gpu.topology
    assert topo is not None  # only offered where the deployment crosses domains
    nic = dataclasses.replace(topo, nic_bytes_per_s=topo.nic_bytes_per_s * f)
    return _gpu(dep, host, dataclasses.replace(dep.gpu, topology=nic))


RESOURCES: dict[str, Upgrade] = {
    "hbm_capacity": _hbm_capacity,
    "hbm_bandwidth": _hbm_bandwidth,
    "compute": _compute,
    "interconnect": _interconnect,
    "host_link": _host_link,
    "cpu_cores": _cpu_cores,
    "cpu_core_speed": _cpu_core_speed,
}
# Server settings upgraded like a resource: processes -> processes after the uplift.
SETTINGS: dict[str, Callable[[int, float], int]] = {
    "api_server_processes": lambda n, f: math.ceil(n * f),
}
# Offered only where the deployment's traffic crosses scale-up domains (cost/comm.py): inside one
# domain no byte takes the NICs and the upgrade is +0 % by construction.
SCALE_OUT: dict[str, Upgrade] = {"scale_out_network": _scale_out_network}
# For each metric, whether larger is better (used to rank the upgrades).
METRICS = {
    "ttft_s": False,
    "tpot_s": False,
    "capacity_output_tokens_per_s": True,
    "served_requests_per_s": True,
    "max_concurrent_requests": True,
    "joules_per_output_token": False,
}


def _metrics(
    dep: Deployment,
    host: HostSpec,
    workload: Workload,
    budget: MemoryBudget,
    processes: int = DEFAULT_API_SERVER_PROCESSES,
) -> dict[str, float]:
    est = estimate_deployment(
        dep, workload, host_spec=host, budget=budget, api_server_processes=processes
    )
    concurrent = est.memory.max_concurrent_requests
    cap_batch = min(concurrent, budget.max_num_seqs)
    served = 0.0
    capacity = 0.0
    if cap_batch >= 1:
        at_cap = estimate_deployment(
            dep,
            dataclasses.replace(workload, batch=cap_batch),
            host_spec=host,
            budget=budget,
            api_server_processes=processes,
        )
        capacity = at_cap.output_tokens_per_s
        host_rps = float(at_cap.outside_gpu["host"]["max_requests_per_s"])
        served = min(cap_batch / at_cap.e2e_s, host_rps)
    energy = est.energy()["joules_per_output_token"]
    return {
        "ttft_s": est.ttft_s,
        "tpot_s": est.tpot_s,
        "capacity_output_tokens_per_s": capacity,
        "served_requests_per_s": served,
        "max_concurrent_requests": float(concurrent),
        "joules_per_output_token": float(energy or 0.0),
    }


@dataclass(frozen=True)
class WhatIf:
    baseline: dict[str, float]
    upgraded: dict[str, dict[str, float]]  # resource -> metrics
    uplift: float
    target: str
    power_cap: list[dict[str, float]] = field(default_factory=list)

    def gain(self, resource: str, metric: str) -> float:
        """Relative improvement of `metric` from upgrading `resource` (> 0 is better)."""
        before, after = self.baseline[metric], self.upgraded[resource][metric]
        if before == 0:
            return 0.0 if after == 0 else float("inf")
        change = (after - before) / before
        return change if METRICS[metric] else -change

    def ranking(self) -> list[tuple[str, float]]:
        gains = [(r, self.gain(r, self.target)) for r in self.upgraded]
        return sorted(gains, key=lambda rg: -rg[1])

    @property
    def best(self) -> str:
        return self.ranking()[0][0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "uplift": self.uplift,
            "target": self.target,
            "baseline": self.baseline,
            "upgrades": {
                r: {"metrics": m, "gain": {k: self.gain(r, k) for k in METRICS}}
                for r, m in self.upgraded.items()
            },
            "ranking": [{"resource": r, "gain": g} for r, g in self.ranking()],
            "best": self.best,
            "power_cap": self.power_cap,
        }


def power_cap_curve(
    dep: Deployment,
    workload: Workload,
    fractions: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
) -> list[dict[str, float]]:
    """Speed and energy of the workload under power caps (fractions of TDP)."""
    rows = []
    for frac in fractions:
        capped = dataclasses.replace(dep, power_limit_w=frac * dep.gpu.tdp_w)
        est: Estimate = estimate_deployment(capped, workload, find_compute_bound=False)
        rows.append(
            {
                "cap_fraction_of_tdp": frac,
                "cap_w": frac * dep.gpu.tdp_w,
                "ttft_s": est.ttft_s,
                "tpot_s": est.tpot_s,
                "output_tokens_per_s": est.output_tokens_per_s,
                "joules_per_output_token": float(est.energy()["joules_per_token_all_in"] or 0.0),
            }
        )
    return rows


def whatif(
    dep: Deployment,
    workload: Workload,
    *,
    uplift: float = 0.5,
    target: str = "capacity_output_tokens_per_s",
    host: HostSpec | None = None,
    budget: MemoryBudget = DEFAULT_BUDGET,
    api_server_processes: int = DEFAULT_API_SERVER_PROCESSES,
) -> WhatIf:
    """Upgrade each resource (and server setting) by `uplift` (0.5 = +50 %) and rank them by
    `target`."""
    if not 0 < uplift <= 10:
        raise ConfigError("uplift", uplift, "a fraction in (0, 10], e.g. 0.5 for +50 %")
    if target not in METRICS:
        raise ConfigError("target", target, f"one of {', '.join(METRICS)}")
    host = host or get_host("default")
    n = check_processes(api_server_processes)
    base = _metrics(dep, host, workload, budget, n)
    candidates = RESOURCES | (SCALE_OUT if dep.crosses_domains else {})
    upgraded = {
        name: _metrics(*fn(dep, host, 1.0 + uplift), workload, budget, n)
        for name, fn in candidates.items()
    }
    for name, setting in SETTINGS.items():
        upgraded[name] = _metrics(dep, host, workload, budget, setting(n, 1.0 + uplift))
    return WhatIf(base, upgraded, uplift, target, power_cap_curve(dep, workload))
