"""The analytical cost model: operators -> roofline step time -> stages, memory, energy."""

from __future__ import annotations

from tokenprobe.cost.api import estimate
from tokenprobe.cost.comm import allreduce_time_s, send_time_s, transfer_time_s
from tokenprobe.cost.deployment import Deployment, make_deployment
from tokenprobe.cost.efficiency import (
    DEFAULT_EFFICIENCY,
    MAX_OVERHEAD_S,
    MAX_ROUTING_SKEW,
    Efficiency,
)
from tokenprobe.cost.energy import DEFAULT_POWER, EnergyPrices, PowerModel
from tokenprobe.cost.estimate import Estimate, Workload, compute_bound_batch, estimate_deployment
from tokenprobe.cost.host import HostModel
from tokenprobe.cost.memory import MemoryBudget, MemoryReport, kv_capacity_tokens, memory_report
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.step import OpCost, StepCost, idle_power_w, op_costs, step_cost

__all__ = [
    "DEFAULT_EFFICIENCY",
    "DEFAULT_POWER",
    "MAX_OVERHEAD_S",
    "MAX_ROUTING_SKEW",
    "BatchShape",
    "Deployment",
    "Efficiency",
    "EnergyPrices",
    "Estimate",
    "HostModel",
    "MemoryBudget",
    "MemoryReport",
    "OpCost",
    "PowerModel",
    "StepCost",
    "Workload",
    "allreduce_time_s",
    "compute_bound_batch",
    "estimate",
    "estimate_deployment",
    "idle_power_w",
    "kv_capacity_tokens",
    "make_deployment",
    "memory_report",
    "op_costs",
    "send_time_s",
    "step_cost",
    "transfer_time_s",
]
