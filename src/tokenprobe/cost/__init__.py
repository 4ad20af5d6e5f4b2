"""The analytical cost model: operators -> roofline step time -> stages, memory, energy."""

from __future__ import annotations

from tokenprobe.cost.api import estimate, resolve_parallelism
from tokenprobe.cost.comm import allreduce_time_s, send_time_s, transfer_time_s
from tokenprobe.cost.deployment import Deployment, make_deployment
from tokenprobe.cost.dpep import (
    DUMMY_BATCH,
    GangStep,
    dp_layout,
    expert_rows,
    gang_step,
    gang_time_s,
    rank_work_s,
    shared_moe_s,
    shared_parts_s,
)
from tokenprobe.cost.efficiency import (
    DEFAULT_EFFICIENCY,
    MAX_OVERHEAD_S,
    MAX_ROUTING_SKEW,
    Efficiency,
)
from tokenprobe.cost.energy import DEFAULT_POWER, EnergyPrices, PowerModel, host_base_power_w
from tokenprobe.cost.energy_figures import gpu_generation
from tokenprobe.cost.epbalance import EPLB_BALANCED_SHARE, ep_imbalance, reach_probability
from tokenprobe.cost.epcomm import (
    DEFAULT_EP_COMM,
    VLLM_ALL2ALL_BACKENDS,
    VLLM_DEFAULT_ALL2ALL,
    EpComm,
    ep_comm_from_flags,
    vllm_default_all2all,
    vllm_ep_comm,
)
from tokenprobe.cost.estimate import Estimate, Workload, compute_bound_batch, estimate_deployment
from tokenprobe.cost.host import (
    DEFAULT_API_SERVER_PROCESSES,
    DEFAULT_ENGINE_INIT_S,
    HostModel,
    check_processes,
)
from tokenprobe.cost.kvtransfer import (
    MAX_WORKERS,
    NIC_BYTES_PER_S_PER_GPU,
    KvLink,
    Split,
    kv_link,
    kv_transfer_bytes,
    kv_transfer_stage,
)
from tokenprobe.cost.memory import (
    DEFAULT_BUDGET,
    MEMORY_RULES,
    SGLANG_RULE,
    TRTLLM_RULE,
    VLLM_RULE,
    MemoryBudget,
    MemoryReport,
    kv_capacity_tokens,
    max_context_tokens,
    memory_report,
    state_blocks_per_seq,
    state_bytes_per_seq_per_gpu,
)
from tokenprobe.cost.release import engine_release, is_release
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.specdecode import METHODS as SPEC_METHODS
from tokenprobe.cost.specdecode import (
    SpecDecode,
    draft_fraction,
    draft_passes,
    spec_step,
    verify_rows,
)
from tokenprobe.cost.step import (
    OpCost,
    StepCost,
    host_gap_power_w,
    host_time_s,
    idle_power_w,
    op_costs,
    power_cap_w,
    step_cost,
    step_time_energy,
)
from tokenprobe.cost.thermal import Thermal, idle_power_at_w, thermal
from tokenprobe.cost.vllm_mla_era import VLLM_FULL_KV_RULE, VLLM_MLA_2025H1_RULE, vllm_mla_rule

__all__ = [
    "DEFAULT_API_SERVER_PROCESSES",
    "DEFAULT_BUDGET",
    "DEFAULT_EFFICIENCY",
    "DEFAULT_ENGINE_INIT_S",
    "DEFAULT_EP_COMM",
    "DEFAULT_POWER",
    "DUMMY_BATCH",
    "EPLB_BALANCED_SHARE",
    "MAX_OVERHEAD_S",
    "MAX_ROUTING_SKEW",
    "MAX_WORKERS",
    "MEMORY_RULES",
    "NIC_BYTES_PER_S_PER_GPU",
    "SGLANG_RULE",
    "SPEC_METHODS",
    "TRTLLM_RULE",
    "VLLM_ALL2ALL_BACKENDS",
    "VLLM_DEFAULT_ALL2ALL",
    "VLLM_FULL_KV_RULE",
    "VLLM_MLA_2025H1_RULE",
    "VLLM_RULE",
    "BatchShape",
    "Deployment",
    "Efficiency",
    "EnergyPrices",
    "EpComm",
    "Estimate",
    "GangStep",
    "HostModel",
    "KvLink",
    "MemoryBudget",
    "MemoryReport",
    "OpCost",
    "PowerModel",
    "SpecDecode",
    "Split",
    "StepCost",
    "Thermal",
    "Workload",
    "allreduce_time_s",
    "check_processes",
    "compute_bound_batch",
    "dp_layout",
    "draft_fraction",
    "draft_passes",
    "engine_release",
    "ep_comm_from_flags",
    "ep_imbalance",
    "estimate",
    "estimate_deployment",
    "expert_rows",
    "gang_step",
    "gang_time_s",
    "gpu_generation",
    "host_base_power_w",
    "host_gap_power_w",
    "host_time_s",
    "idle_power_at_w",
    "idle_power_w",
    "is_release",
    "kv_capacity_tokens",
    "kv_link",
    "kv_transfer_bytes",
    "kv_transfer_stage",
    "make_deployment",
    "max_context_tokens",
    "memory_report",
    "op_costs",
    "power_cap_w",
    "rank_work_s",
    "reach_probability",
    "resolve_parallelism",
    "send_time_s",
    "shared_moe_s",
    "shared_parts_s",
    "spec_step",
    "state_blocks_per_seq",
    "state_bytes_per_seq_per_gpu",
    "step_cost",
    "step_time_energy",
    "thermal",
    "transfer_time_s",
    "verify_rows",
    "vllm_default_all2all",
    "vllm_ep_comm",
    "vllm_mla_rule",
]
