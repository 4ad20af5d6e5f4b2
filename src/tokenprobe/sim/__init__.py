"""The serving simulator (requirements S1-S3): a vLLM-like server on the cost model.

engine.py      heapq event loop: arrivals, step completions, idle power
engines.py     each serving engine's default scheduler (vLLM, SGLang, TensorRT-LLM)
frontend.py    the API-server processes (HTTP, tokenize, detokenize, SSE) as a CPU resource
continuous.py  vLLM v1 continuous batching: chunked prefill, paged KV, preemption, prefix cache
sglang_scheduler.py  SGLang's: prefill-first batches, KV reserved by new_token_ratio, retraction
static.py      static batching, for contrast
vllm_v0.py     vLLM's V0 engine defaults (before 0.8): whole-prompt prefill steps for MLA models
specdecode.py  speculative decoding: k drafts verified per step, tokens from the acceptance
cluster.py     data-parallel replicas behind a router (round-robin, least-loaded, prefix-aware)
disagg.py      prefill/decode disaggregation: P and D workers, the KV sent between them
pd_handoff.py  SGLang PD's handoff: router, decode pre-allocation, first token at the handoff
dpep.py        data-parallel attention ranks stepping together through shared EP MoE layers
dpep_fleet.py  fleets of such DP groups behind a router (--replicas N --dp M)
gang_feed.py   the requests those ranks are sent: open loop, or a closed loop of users
sglang_dp.py   SGLang 0.4's scheduler settings, and those of each --enable-dp-attention rank
kv.py          the paged KV block pool and the shared-prefix cache
result.py      records, timeline, energy accounting, the --json dictionary
api.py         simulate(): deployment + workload -> SimResult
runconfig.py   a run config's deployment <-> cost.Deployment, its scheduler (records.RunConfig)
scenarios.py   the named scenarios (seed 003 and friends)
"""

from __future__ import annotations

from tokenprobe.cost import MAX_WORKERS
from tokenprobe.sim.api import (
    build_workload,
    capacity_blocks,
    run_workload,
    simulate,
    simulate_fleet,
)
from tokenprobe.sim.base import Scheduler, SchedulerConfig, StepPlan
from tokenprobe.sim.capacity import MAX_QUEUE_S, max_rate_per_s, meets_slos
from tokenprobe.sim.cluster import MAX_REPLICAS, ROUTERS, ClusterResult
from tokenprobe.sim.disagg import DisaggResult
from tokenprobe.sim.dpep import DpEpResult
from tokenprobe.sim.dpep_fleet import DpFleetResult
from tokenprobe.sim.engine import ProgressFn, SimulationError, StepFn
from tokenprobe.sim.engines import (
    ENGINES,
    PRESETS,
    TRTLLM_SERVE,
    EnginePreset,
    engine_defaults,
    engine_ep_comm,
    engine_era,
    engine_preset,
    is_engine,
    pads_ranks,
    rank_router_for,
)
from tokenprobe.sim.frontend import Frontend
from tokenprobe.sim.pd_handoff import NUM_RESERVED_DECODE_TOKENS, PD_HANDOFFS
from tokenprobe.sim.result import SimResult
from tokenprobe.sim.runconfig import (
    DEFAULT_ENGINE,
    deployment_config,
    price_deployment,
    scheduler_name,
    scheduler_of,
    spec_decode_of,
)
from tokenprobe.sim.scenarios import SCENARIOS, Scenario, ScenarioPart, get_scenario
from tokenprobe.sim.schedulers import SCHEDULERS
from tokenprobe.sim.sglang_dp import runs_sglang_04, server_config, sglang_04_scheduler
from tokenprobe.sim.vllm_v0 import (
    is_vllm_era,
    runs_v0,
    vllm_v0_defaults,
    vllm_version_defaults,
)

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "MAX_QUEUE_S",
    "MAX_REPLICAS",
    "MAX_WORKERS",
    "NUM_RESERVED_DECODE_TOKENS",
    "PD_HANDOFFS",
    "PRESETS",
    "ROUTERS",
    "SCENARIOS",
    "SCHEDULERS",
    "TRTLLM_SERVE",
    "ClusterResult",
    "DisaggResult",
    "DpEpResult",
    "DpFleetResult",
    "EnginePreset",
    "Frontend",
    "ProgressFn",
    "Scenario",
    "ScenarioPart",
    "Scheduler",
    "SchedulerConfig",
    "SimResult",
    "SimulationError",
    "StepFn",
    "StepPlan",
    "build_workload",
    "capacity_blocks",
    "deployment_config",
    "engine_defaults",
    "engine_ep_comm",
    "engine_era",
    "engine_preset",
    "get_scenario",
    "is_engine",
    "is_vllm_era",
    "max_rate_per_s",
    "meets_slos",
    "pads_ranks",
    "price_deployment",
    "rank_router_for",
    "run_workload",
    "runs_sglang_04",
    "runs_v0",
    "scheduler_name",
    "scheduler_of",
    "server_config",
    "sglang_04_scheduler",
    "simulate",
    "simulate_fleet",
    "spec_decode_of",
    "vllm_v0_defaults",
    "vllm_version_defaults",
]
