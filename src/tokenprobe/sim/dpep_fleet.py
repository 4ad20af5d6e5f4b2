"""A fleet of data-parallel groups (`simulate --replicas N --dp M`): N replicas behind the fleet
router, each replica itself M attention ranks sharing expert-parallel MoE layers (sim/dpep.py).

Two routers, as a deployment has them: the fleet's (`--router`: round-robin, least-loaded or
prefix-aware over the groups, as cluster.py routes replicas; a group's load is its ranks'
outstanding requests together) picks the group, then the group's own DP dispatch picks the rank
(`rank_router_for`: the engine preset's `dp_rank_router`, sim/engines.py): vLLM's DP
coordinator balances on the ranks' waiting and running counts (least-loaded), SGLang's
DataParallelController round-robins (`--load-balance-method` default), the two routers
validate_dp_rows.py replays the engines with.

The groups step independently (no collective spans two groups): each has its own clock, the
end of its step in flight. The loop takes the earliest instant among the next arrival and the
groups' decision points (a stepping group's step end; an idle group's next event), routes the
arrivals up to it, lets the groups that decide then apply their events, and starts each such
group's next gang step (dpep.gang_step's price: the slowest rank plus the shared MoE, padded as
the engine pads, dummy passes on idle ranks). A closed loop's finish on any rank of any group
releases its user's next request (gang_feed.py), routed again from the fleet router.

Outputs: the fleet's figures over every rank (cluster.py's keys, `per_replica` one row per rank,
numbered across the groups), and `dp_groups`: per group its own latency percentiles,
throughput, energy and its gang's account (steps, shared-MoE time, waiting), plus the fleet
router's imbalance over the groups. A group's `output_tokens_per_s` is its output tokens over
the fleet's span (`duration_s`, the last group's end), so the groups' rates add up to the
fleet's; its own `data_parallel.gang_busy_s` says how long it stepped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenprobe.cost import Deployment, idle_power_w, state_blocks_per_seq
from tokenprobe.errors import ConfigError
from tokenprobe.records import Run, write_run
from tokenprobe.sim.base import SchedulerConfig
from tokenprobe.sim.cluster import MAX_REPLICAS, ClusterResult, Router, open_engines
from tokenprobe.sim.dpep import (
    DpEpResult,
    GangPricer,
    RankStats,
    check_ranks,
    rank_results,
    start_gang_step,
    unpriced,
)
from tokenprobe.sim.engine import Engine, StepFn, gc_paused
from tokenprobe.sim.gang_feed import GangFeed
from tokenprobe.sim.result import SimResult
from tokenprobe.workload import RequestSpec, Workload


@dataclass(slots=True)
class Group:
    """One DP group: its ranks, their dispatch and account, and when it next decides."""

    engines: list[Engine]
    router: Router
    stats: list[RankStats]
    # its step in flight ends then, or (idle) its next event; idle and empty until a request
    decide_s: float = math.inf
    stepping: bool = False
    busy_s: float = 0.0
    shared_s: float = 0.0
    steps: int = 0
    sent: int = 0  # requests the fleet router sent it

    @property
    def outstanding(self) -> int:
        return sum(e.outstanding for e in self.engines)

    def submit(self, spec: RequestSpec) -> None:
        self.sent += 1
        loads = [e.outstanding for e in self.engines]
        self.engines[self.router.pick(spec, loads)].submit(spec)
        if not self.stepping:  # an idle group decides at the arrival (or its next event)
            self.decide_s = min(self.decide_s, min(e.next_event_s() for e in self.engines))


@dataclass(slots=True)
class DpFleetResult:
    """The groups as one fleet (`fleet`: every rank a member) and each group's own result."""

    fleet: ClusterResult
    groups: list[DpEpResult]
    router: str
    group_loads: list[int] = field(default_factory=list)  # requests routed to each group

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
        out["router"] = self.router
        rows = []
        span_s = out["duration_s"] or 0.0  # the fleet's: every group's tokens over one span
        for index, group in enumerate(self.groups):
            d = group.to_dict()
            rows.append(
                {
                    "group": index,
                    "completed": d["completed"],
                    "ttft_s": d["ttft_s"],
                    "tpot_s": d["tpot_s"],
                    "itl_s": d["itl_s"],
                    # over the fleet's span, not the group's own (which ends with its last
                    # request): the groups' rates add up to the fleet's
                    "output_tokens_per_s": d["output_tokens"] / span_s if span_s > 0 else None,
                    "energy_j": (d.get("energy") or {}).get("total_j"),
                    "data_parallel": d["data_parallel"],
                }
            )
        mean = sum(self.group_loads) / len(self.group_loads) if self.group_loads else 0.0
        out["dp_groups"] = {
            "groups": len(self.groups),
            "ranks_per_group": len(self.groups[0].ranks) if self.groups else 0,
            "rank_router": self.config.get("rank_router"),
            "requests_max_over_mean": max(self.group_loads) / mean if mean else None,
            "per_group": rows,
        }
        return out

    def write(self, directory: str | Path) -> Path:
        return write_run(self.run(), directory, summary=self.to_dict())


# the collector off for the whole fleet, as run_cluster: its per-request state is made and freed
# inside, so no collection walks it (engine.gc_paused)
@gc_paused()
def run_dpep_fleet(
    workload: Workload,
    step_fn: StepFn,
    dep: Deployment,
    config: SchedulerConfig,
    capacity_blocks: int,
    *,
    groups: int,
    ranks: int,
    router: str = "round-robin",
    rank_router: str = "least-loaded",
    scheduler: str = "continuous",
    seed: int = 0,
    trace_requests: int = 2_000,
    meta: dict[str, Any] | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    frontend_s: float = 0.0,
    padded: bool = False,
) -> DpFleetResult:
    """`groups` replicas of `dep`, each `ranks` attention ranks stepping together (module
    docstring); `capacity_blocks` is one group's KV pool, split over its ranks."""
    check_ranks(dep, ranks)
    if isinstance(groups, bool) or not isinstance(groups, int) or not 1 <= groups <= MAX_REPLICAS:
        raise ConfigError("replicas", groups, f"an integer in [1, {MAX_REPLICAS}]")
    per_rank_blocks = capacity_blocks // ranks
    if per_rank_blocks < 1:
        raise ConfigError("dp", ranks, f"ranks that each hold a KV block ({capacity_blocks})")
    idle_w = idle_power_w(dep) / ranks
    state = state_blocks_per_seq(dep, config.block_size)
    opened = [
        open_engines(ranks, unpriced, config, per_rank_blocks, scheduler, idle_w, frontend_s, state)
        for _ in range(groups)
    ]
    fleet = [
        Group([e for e, _ in members], Router(rank_router, ranks), [RankStats() for _ in members])
        for members in opened
    ]
    pricer = GangPricer(dep, step_fn, padded)
    loads = _fleet_loop(GangFeed(workload, seed), fleet, Router(router, groups), pricer)
    config_doc = {
        **(meta or {}),
        "replicas": groups,
        "data_parallel_size": ranks,
        "expert_parallel": True,
        "ep_backend": dep.ep_comm.label(),
        "dp_padding": padded,
        "router": router,
        "rank_router": rank_router,
        "seed": seed,
        "num_gpus": dep.num_gpus * groups,
        "kv_capacity_blocks": per_rank_blocks * ranks,
        "idle_power_w": idle_w * ranks,
        "frontend_s": frontend_s,
    }
    per_rank = -(-trace_requests // (groups * ranks))  # fleet_parts traces at least one
    parts: list[SimResult] = []
    results = []
    for g, (members, group) in enumerate(zip(opened, fleet, strict=True)):
        mine = rank_results(members, per_rank, meta, slo_ttft_s, slo_tpot_s, offset=g * ranks)
        parts.extend(mine)
        group_doc = {**config_doc, "replicas": 1, "num_gpus": dep.num_gpus, "group": g}
        group_fleet = ClusterResult(group_doc, mine, rank_router, idle_w, slo_ttft_s, slo_tpot_s)
        results.append(
            DpEpResult(group_fleet, group.stats, group.steps, group.busy_s, group.shared_s)
        )
    whole = ClusterResult(config_doc, parts, router, idle_w, slo_ttft_s, slo_tpot_s)
    return DpFleetResult(whole, results, router, loads)


def _fleet_loop(
    feed: GangFeed, fleet: list[Group], router: Router, pricer: GangPricer
) -> list[int]:
    """Step every group until every request is done (module docstring); returns the requests
    each group was sent."""
    engines = [e for group in fleet for e in group.engines]
    while True:
        now = min(feed.next_s, min(group.decide_s for group in fleet))
        if now == math.inf:
            return [group.sent for group in fleet]
        feed.route(fleet, router, now, inclusive=True)
        deciding = [group for group in fleet if group.decide_s <= now]
        for group in deciding:
            group.stepping = False
            for engine in group.engines:
                engine.apply_through(now)
        feed.finished(engines, now)  # closed loop: a finish now sends its user's next request
        if feed.next_s <= now:
            continue
        for group in deciding:
            _step(group, pricer, now)


def _step(group: Group, pricer: GangPricer, now: float) -> None:
    """Plan, price and start the group's next gang step at `now` (dpep._gang_loop's step),
    or leave it idle until its next event."""
    plans = [engine.plan_step() for engine in group.engines]
    if all(p is None for p in plans):
        group.decide_s = min(e.next_event_s() for e in group.engines)
        return
    time_s, shared = start_gang_step(group.engines, plans, group.stats, pricer, now)
    group.decide_s, group.stepping = now + time_s, True
    group.busy_s += time_s
    group.shared_s += shared
    group.steps += 1
