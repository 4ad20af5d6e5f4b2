"""Data-parallel attention ranks sharing expert-parallel MoE layers (`simulate --dp N --tp t
--enable-expert-parallel`): vLLM `--data-parallel-size N --tensor-parallel-size t
--enable-expert-parallel`, SGLang `--tp N·t --enable-dp-attention --dp-size N`.

Each of the N ranks is a single-replica engine (its own scheduler, batch and KV pool: the
attention weights and the KV cache live per rank, on its t GPUs; the routed experts are spread
over all the N·t GPUs), opened empty as cluster.py opens replicas, and requests reach the ranks
through the same routers (vLLM's DP coordinator balances on the ranks' waiting and running
counts, SGLang's router or its `round_robin` DP dispatch): open-loop arrivals, or a closed loop
of users each sending its next request when its last one ends, whichever rank served it
(sim/gang_feed.py). Unlike replicas the ranks step together: every MoE layer is an all-to-all
among them, so a step starts on every rank at once and ends when the slowest rank's own work
and the shared MoE work for all ranks' tokens are done (cost/dpep.py: step = max_r work_r +
shared). A rank with nothing to run computes a dummy
batch meanwhile (vLLM `execute_dummy_batch`), its GPUs busy, its energy counted as idle (it
serves no request); the ranks idle only when none has work. vLLM pads every rank to the largest
rank's token count, so the experts compute N x its tokens (`pads_ranks`: the engine preset's
`dp_padding`, sim/engines.py; cost/dpep.py): one
rank's prefill is expert work for the whole gang, every decoding sequence on every rank waiting.

The loop: at the gang's clock, route the arrivals up to it (the loads as they stand), let every
rank apply its events, ask every rank for its plan, price the step from all the plans, start
it on every rank (a dummy pass on those without a plan), route the arrivals during it, and move
the clock to its end. Energy: the step's GPU power is the cost model's for the summed work of
all ranks (step_cost of the summed batch), paid for the whole step on every GPU (a rank waiting
in a collective spins in an NCCL kernel), split evenly over the ranks.

Outputs: the fleet's figures as for replicas (cluster.py), per rank its own work, waiting time
for the slowest and dummy steps, and the imbalance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenprobe.cost import (
    BatchShape,
    Deployment,
    expert_rows,
    gang_time_s,
    idle_power_w,
    rank_work_s,
    shared_parts_s,
    state_blocks_per_seq,
)
from tokenprobe.errors import ConfigError
from tokenprobe.records import Run, write_run
from tokenprobe.sim.base import SchedulerConfig, StepPlan
from tokenprobe.sim.cluster import ClusterResult, Router, fleet_parts, open_engines
from tokenprobe.sim.engine import Engine, SimulationError, StepFn
from tokenprobe.sim.gang_feed import GangFeed
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.sim.stepcache import DecodeMemo
from tokenprobe.workload import Workload

MAX_RANKS = 1024
DUMMY_PLAN = StepPlan(0, 0.0, 0, 1, 1)  # one token (vLLM `_dummy_run(1)`; cost.DUMMY_BATCH)


def unpriced(plan: StepPlan) -> tuple[float, float]:
    raise SimulationError(f"a data-parallel rank priced {plan} alone (its gang prices steps)")


@dataclass(slots=True)
class GangPricer:
    """Step times of the ranks together (cost/dpep.py), memoised: each rank's own work through
    `DecodeMemo` (linear in its context), the shared MoE by (expert rows, largest rank's
    tokens), the power from the cost model's price of the summed batch (`step_fn`, memoised),
    the padding rows (`padded`) in it as one-token sequences (the dummy batch's shape)."""

    dep: Deployment
    step_fn: StepFn
    padded: bool = False
    rank_fn: DecodeMemo = field(init=False)
    total_fn: DecodeMemo = field(init=False)
    shared: dict[tuple[int, int, bool], tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        dep = self.dep
        self.rank_fn = DecodeMemo(lambda plan: (rank_work_s(dep, BatchShape(*plan)), 0.0))
        self.total_fn = DecodeMemo(self.step_fn)

    def price(self, plans: list[StepPlan]) -> tuple[float, float, list[float], float]:
        """(step s, energy J of all GPUs, each rank's own work s, shared s) of these plans."""
        work = [self.rank_fn(p)[0] for p in plans]
        tokens = [p.prefill_tokens + p.decode_seqs for p in plans]
        prefill = any(p.prefill_tokens for p in plans)
        rows = expert_rows(self.dep, sum(tokens), max(tokens), self.padded)
        key = (rows, max(tokens), prefill)
        parts = self.shared.get(key)
        if parts is None:
            parts = self.shared[key] = shared_parts_s(self.dep, *key)
        slowest = max(work)
        time_s = gang_time_s(self.dep, slowest, *parts)
        shared = time_s - slowest  # what the shared layers add to the slowest rank's work
        total = StepPlan(*(sum(col) for col in zip(*plans, strict=True)))
        pad = rows - sum(tokens)
        if pad:
            total = total._replace(
                decode_seqs=total.decode_seqs + pad,
                decode_context_tokens=total.decode_context_tokens + pad,
            )
        t_sum, e_sum = self.total_fn(total)
        return time_s, e_sum / t_sum * time_s, work, shared


@dataclass(slots=True)
class RankStats:
    """One rank's account of the gang's steps, seconds."""

    work_s: float = 0.0
    wait_s: float = 0.0
    dummy_steps: int = 0
    dummy_s: float = 0.0

    def row(self, index: int, busy_s: float) -> dict[str, Any]:
        return {
            "rank": index,
            "work_s": self.work_s,
            "wait_s": self.wait_s,
            "wait_fraction": self.wait_s / busy_s if busy_s > 0 else None,
            "dummy_steps": self.dummy_steps,
            "dummy_s": self.dummy_s,
        }


@dataclass(slots=True)
class DpEpResult:
    """The ranks as a fleet (`ClusterResult`: records, energy, per-rank latency) and the gang's
    account: steps, time in the shared MoE layers, each rank's work and waiting."""

    fleet: ClusterResult
    ranks: list[RankStats]
    steps: int
    busy_s: float  # the gang's stepping time
    shared_s: float  # of it, in the shared MoE layers and all-to-alls

    @property
    def config(self) -> dict[str, Any]:
        return self.fleet.config

    @property
    def records(self) -> list[Any]:
        return self.fleet.records

    def run(self, with_timeline: bool = True) -> Run:
        return self.fleet.run(with_timeline)

    def to_dict(self) -> dict[str, Any]:
        out = self.fleet.to_dict()
        out["kv"]["per"] = "rank"
        waits = [r.wait_s for r in self.ranks]
        out["data_parallel"] = {
            "ranks": len(self.ranks),
            "expert_parallel_gpus": self.config.get("num_gpus"),
            "gang_steps": self.steps,
            "gang_busy_s": self.busy_s,
            "shared_moe_s": self.shared_s,
            "ep_backend": self.config.get("ep_backend"),
            "padded_to_largest_rank": self.config.get("dp_padding"),
            "wait_s_total": sum(waits),
            "wait_fraction": sum(waits) / (len(waits) * self.busy_s) if self.busy_s else None,
            "dummy_steps": sum(r.dummy_steps for r in self.ranks),
            "per_rank": [r.row(i, self.busy_s) for i, r in enumerate(self.ranks)],
        }
        return out

    def write(self, directory: str | Path) -> Path:
        return write_run(self.run(), directory, summary=self.to_dict())


def check_ranks(dep: Deployment, ranks: int) -> None:
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= MAX_RANKS:
        raise ConfigError("dp", ranks, f"an integer in [1, {MAX_RANKS}]")
    if not (dep.attention_dp and dep.dp == ranks and dep.pp == 1):
        raise ConfigError(
            "dp", ranks,
            f"a deployment with attention DP over {ranks} GPUs, one rank each, pp 1 "
            f"(got tp {dep.tp}, pp {dep.pp}, attention_dp {dep.attention_dp})",
        )  # fmt: skip


def run_dpep(
    workload: Workload,
    step_fn: StepFn,
    dep: Deployment,
    config: SchedulerConfig,
    capacity_blocks: int,
    *,
    ranks: int,
    router: str = "round-robin",
    scheduler: str = "continuous",
    seed: int = 0,
    trace_requests: int = 2_000,
    meta: dict[str, Any] | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    frontend_s: float = 0.0,
    padded: bool = False,
) -> DpEpResult:
    """`ranks` attention ranks of `dep` stepping together (module docstring); `capacity_blocks`
    is the KV pool of the whole deployment, split evenly over the ranks; `step_fn` prices a
    batch on the whole deployment (the power of a step); `padded`: every rank padded to the
    largest rank's tokens (`pads_ranks`)."""
    check_ranks(dep, ranks)
    feed = GangFeed(workload, seed)  # open loop, or closed: sim/gang_feed.py
    per_rank_blocks = capacity_blocks // ranks
    if per_rank_blocks < 1:
        raise ConfigError(
            "dp", ranks, f"ranks that each hold a KV block ({capacity_blocks} in all)"
        )
    idle_w = idle_power_w(dep) / ranks
    state = state_blocks_per_seq(dep, config.block_size)
    opened = open_engines(
        ranks, unpriced, config, per_rank_blocks, scheduler, idle_w, frontend_s, state
    )
    engines = [e for e, _ in opened]
    pricer = GangPricer(dep, step_fn, padded)
    stats = [RankStats() for _ in range(ranks)]
    busy_s, shared_s, steps = _gang_loop(feed, engines, Router(router, ranks), pricer, stats)
    per_rank = -(-trace_requests // ranks)  # fleet_parts traces at least one
    parts = rank_results(opened, per_rank, meta, slo_ttft_s, slo_tpot_s)
    config_doc = {
        **(meta or {}),
        "data_parallel_size": ranks,
        "expert_parallel": True,
        "ep_backend": dep.ep_comm.label(),  # how the MoE layers move tokens (cost/epcomm.py)
        "dp_padding": padded,  # every rank padded to the largest rank's tokens
        "router": router,
        "seed": seed,
        "num_gpus": dep.num_gpus,
        "kv_capacity_blocks": per_rank_blocks * ranks,
        "idle_power_w": idle_w * ranks,
        "frontend_s": frontend_s,
    }
    fleet = ClusterResult(config_doc, parts, router, idle_w, slo_ttft_s, slo_tpot_s)
    return DpEpResult(fleet, stats, steps, busy_s, shared_s)


def rank_results(
    opened: list[tuple[Engine, BlockPool]],
    per_rank: int,
    meta: dict[str, Any] | None,
    slo_ttft_s: float | None,
    slo_tpot_s: float | None,
    offset: int = 0,
) -> list[SimResult]:
    """Each rank run to its end, its records (`per_rank` of them traced) numbered as members
    `offset`, `offset` + 1, ... of the fleet (`extra["replica"]`): the fleet's own
    `fleet_parts`, which drops each rank's per-request state once its records are built."""
    engines, pools = [e for e, _ in opened], [p for _, p in opened]
    return fleet_parts(engines, pools, per_rank, meta, slo_ttft_s, slo_tpot_s, offset)


def start_gang_step(
    engines: list[Engine],
    plans: list[StepPlan | None],
    stats: list[RankStats],
    pricer: GangPricer,
    now: float,
) -> tuple[float, float]:
    """Price the ranks' `plans` as one gang step starting at `now` (a rank without work runs
    the dummy pass and holds until the step ends), start it on every rank and book each rank's
    own work and waiting; returns the step's seconds and its seconds in the shared MoE layers."""
    priced = [DUMMY_PLAN if p is None else p for p in plans]
    time_s, energy_j, work, shared = pricer.price(priced)
    end = now + time_s
    share_j = energy_j / len(engines)
    for engine, plan, own, st in zip(engines, plans, work, stats, strict=True):
        st.work_s += own
        st.wait_s += max(0.0, time_s - own - shared)
        if plan is None:
            st.dummy_steps += 1
            st.dummy_s += time_s
            engine.hold(end, share_j / time_s)
        else:
            engine.start_planned(plan, time_s, share_j)
    return time_s, shared


def _gang_loop(
    feed: GangFeed,
    engines: list[Engine],
    router: Router,
    pricer: GangPricer,
    stats: list[RankStats],
) -> tuple[float, float, int]:
    """Step the ranks together until every request is done (module docstring); returns the
    gang's (busy s, shared-MoE s, steps)."""
    clock = 0.0
    busy_s = shared_total = 0.0
    steps = 0
    while True:
        feed.route(engines, router, clock, inclusive=True)
        for engine in engines:
            engine.apply_through(clock)
        feed.finished(engines, clock)  # closed loop: a finish now sends its user's next request
        if feed.next_s <= clock:
            continue
        plans = [engine.plan_step() for engine in engines]
        if all(p is None for p in plans):
            later = min(min(e.next_event_s() for e in engines), feed.next_s)
            if later == math.inf:
                return busy_s, shared_total, steps
            clock = later
            continue
        time_s, shared = start_gang_step(engines, plans, stats, pricer, clock)
        end = clock + time_s
        # arrivals during the step: the loads change only at its end
        feed.route(engines, router, end, inclusive=False)
        for engine in engines:
            engine.apply_through(end)
        clock = end
        busy_s += time_s
        shared_total += shared
        steps += 1
