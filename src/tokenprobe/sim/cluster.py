"""Data-parallel replicas behind a router (`simulate --replicas N --router R`).

Each replica is the single-replica simulator (its own scheduler, KV pool and step cost), an
`Engine` opened empty. One loop takes the arrivals in time order: every replica with an event
before the arrival is advanced to that instant (`Engine.run_until`), the router picks a replica
from their states at that moment, and the request is submitted to it; after the last arrival
every replica drains. The router therefore sees what a real one sees when the request comes in,
and every replica's clock only moves forward.

Routers (`ROUTERS`):
- round-robin: request i to replica i mod N (vLLM's and SGLang's routers' default policy).
- least-loaded: the replica with the fewest outstanding requests (sent to it, not finished);
  ties to the lowest index. The "shortest queue" of SGLang's router and llm-d's queue scorer.
- prefix-aware: SGLang's router's cache-aware policy (sgl-project/sglang `sgl-router`,
  `CacheAwareConfig` defaults: cache_threshold 0.5, balance_abs_threshold 32,
  balance_rel_threshold 1.0001): when the replicas' loads are imbalanced (max − min > 32 and
  max > 1.0001 × min) the least-loaded replica; else, when the request's shared prefix is more
  than half its prompt and a replica already served its prefix group (its radix tree / prefix
  cache holds the prefix), the least loaded of those; else the least-loaded replica, which then
  holds the group too. llm-d's prefix-cache scorer and Dynamo's KV router weigh the same two
  things (KV overlap against load) in a score.

Outputs: the fleet's records (each with its `replica`), percentiles over the fleet, per-replica
figures and the imbalance (max over mean of requests and busy time across replicas). The fleet
timeline sums the replicas' (power, batch, KV blocks, queue) at every change of any of them, so
the energy join and diagnose read it as one server with all the GPUs.

Closed-loop workloads are refused: their users belong to a replica each (simulate one replica
with concurrency / N instead).
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tokenprobe.cost import Deployment, idle_power_w, state_blocks_per_seq
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import summarize
from tokenprobe.records import RequestRecord, Run, TimelinePoint, write_run
from tokenprobe.sim.base import Scheduler, SchedulerConfig
from tokenprobe.sim.engine import Engine, StepFn, gc_paused
from tokenprobe.sim.frontend import Frontend
from tokenprobe.sim.gpu_gap import GapFn, cost_gap_fn
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult, build_records, frontend_figures, per_million_kwh
from tokenprobe.sim.schedulers import SCHEDULERS
from tokenprobe.sim.specdecode import SpecRun, fleet_spec_summary, spec_scheduler, spec_summary_of
from tokenprobe.sim.state import Ledger
from tokenprobe.workload import RequestSpec, Workload

ROUTERS = ("round-robin", "least-loaded", "prefix-aware")
_SCHEDULED_S = operator.attrgetter("scheduled_s")  # a record's sort key (C, not a lambda)
_OUTSTANDING = operator.attrgetter("outstanding")  # what the router reads of each replica
MAX_REPLICAS = 4096
CACHE_THRESHOLD = 0.5
BALANCE_ABS = 32
BALANCE_REL = 1.0001


@dataclass(slots=True)
class Router:
    """Chooses a replica per request (module docstring); keeps what the policy remembers."""

    policy: str
    replicas: int
    sent: int = 0
    holders: dict[int, set[int]] = field(default_factory=dict)  # prefix group -> replicas

    def __post_init__(self) -> None:
        if self.policy not in ROUTERS:
            raise ConfigError("router", self.policy, f"one of {', '.join(ROUTERS)}")

    def pick(self, spec: RequestSpec, loads: list[int]) -> int:
        self.sent += 1
        if self.policy == "round-robin":
            return (self.sent - 1) % self.replicas
        least = loads.index(min(loads))  # the first of the least loaded
        if self.policy == "least-loaded":
            return least
        hi, lo = max(loads), loads[least]
        if hi - lo > BALANCE_ABS and hi > lo * BALANCE_REL:
            return self._hold(spec, least)
        held = self.holders.get(spec.prefix_group, set()) if spec.prefix_tokens else set()
        if held and spec.prefix_tokens > CACHE_THRESHOLD * spec.input_tokens:
            return min(held, key=lambda r: (loads[r], r))
        return self._hold(spec, least)

    def _hold(self, spec: RequestSpec, replica: int) -> int:
        if spec.prefix_tokens:
            self.holders.setdefault(spec.prefix_group, set()).add(replica)
        return replica


@dataclass(slots=True)
class ClusterResult:
    """The fleet: one `SimResult` per replica, and their union (`run`, `to_dict`)."""

    config: dict[str, Any]
    replicas: list[SimResult]
    router: str
    idle_w: float  # one replica's idle power
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None

    @property
    def records(self) -> list[RequestRecord]:
        merged = [r for part in self.replicas for r in part.records]
        return sorted(merged, key=_SCHEDULED_S)  # stable: ties keep the replicas' order

    def run(self, with_timeline: bool = True) -> Run:
        return fleet_run(self.config, self.records, self.replicas, with_timeline)

    def to_dict(self) -> dict[str, Any]:
        """The keys of a single replica's `SimResult.to_dict()`, over the fleet, plus the
        router, the imbalance and one row per replica."""
        summary = summarize(self.run(with_timeline=False), self.slo_ttft_s, self.slo_tpot_s)
        parts = [part.to_dict() for part in self.replicas]
        return {
            **summary,
            **fleet_totals(self.replicas, parts, summary, self.idle_w, "replica"),
            "config": self.config,
            "replicas": len(parts),
            "router": self.router,
            "imbalance": imbalance(parts),
            "per_replica": [replica_row(i, p) for i, p in enumerate(parts)],
        }

    def write(self, directory: str | Path) -> Path:
        return write_run(self.run(), directory, summary=self.to_dict())


_SUMMED = ("total_j", "step_j", "idle_j", "prefill_j", "decode_j")


def fleet_totals(
    results: list[SimResult],
    parts: list[dict[str, Any]],
    summary: dict[str, Any],
    idle_w: float | list[float],
    per: str,
) -> dict[str, Any]:
    """The keys of a single run's `SimResult.to_dict()` that add up over a fleet's members
    (`results`, and `parts` their dicts): energy with the idle tail of those that finished
    before the last one (their GPUs stay on, at `idle_w` each, or each member's own, until
    the fleet's run ends, as the fleet timeline has it), the KV pool of one member (`per`
    names it) with the peak of any, preemptions, rejections, steps, the mean GPU busy share
    and the traced requests."""
    end_s = summary["duration_s"] or 0.0
    idle = idle_w if isinstance(idle_w, list) else [idle_w] * len(results)
    tail_j = sum(w * max(0.0, end_s - r.engine.end_s) for w, r in zip(idle, results, strict=True))
    return {
        "energy": fleet_energy(parts, summary, end_s, tail_j),
        "kv": {
            **parts[0]["kv"],
            "peak_blocks_used": max(p["kv"]["peak_blocks_used"] for p in parts),
            "per": per,
        },
        "preemptions": sum(p["preemptions"] for p in parts),
        "rejected": sum(p["rejected"] for p in parts),
        "steps": sum(p["steps"] for p in parts),
        "busy_fraction": float(np.mean([p["busy_fraction"] or 0.0 for p in parts])),
        "itl_traced_requests": sum(p["itl_traced_requests"] for p in parts),
        **({"spec_decode": spec} if (spec := fleet_spec_summary(parts)) is not None else {}),
        **(
            {"frontend": frontend_figures(fronts, end_s)} if (fronts := _frontends(results)) else {}
        ),
    }


def _frontends(results: list[SimResult]) -> list[Frontend]:
    return [r.engine.frontend for r in results if r.engine.frontend is not None]


def fleet_energy(
    parts: list[dict[str, Any]], summary: dict[str, Any], duration_s: float, tail_idle_j: float
) -> dict[str, Any]:
    """Every replica's energy added up, with the idle tail of those that finished first;
    per-token figures from the sums (each replica's J per input / output token times its
    tokens, over the fleet's tokens; the tail split as the fleet's tokens are)."""
    energy: dict[str, Any] = {k: sum(p["energy"][k] for p in parts) for k in _SUMMED}
    energy["idle_j"] += tail_idle_j
    energy["total_j"] += tail_idle_j
    tokens_in, tokens_out = summary["input_tokens"], summary["output_tokens"]
    j_in = sum((p["energy"]["joules_per_input_token"] or 0.0) * p["input_tokens"] for p in parts)
    j_out = sum((p["energy"]["joules_per_output_token"] or 0.0) * p["output_tokens"] for p in parts)
    total = energy["total_j"]
    share_in = j_in / (j_in + j_out) if j_in + j_out > 0 else 0.0
    j_in, j_out = j_in + tail_idle_j * share_in, j_out + tail_idle_j * (1.0 - share_in)
    energy["average_power_w"] = total / duration_s if duration_s > 0 else None
    energy["joules_per_input_token"] = j_in / tokens_in if tokens_in else None
    energy["joules_per_output_token"] = j_out / tokens_out if tokens_out else None
    energy["joules_per_token_all_in"] = total / tokens_out if tokens_out else None
    energy["kwh_per_million_input_tokens"] = per_million_kwh(j_in, tokens_in)
    energy["kwh_per_million_output_tokens"] = per_million_kwh(j_out, tokens_out)
    energy["kwh_per_million_tokens_all_in"] = per_million_kwh(total, tokens_out)
    return energy


def replica_row(index: int, part: dict[str, Any]) -> dict[str, Any]:
    return {
        "replica": index,
        "completed": part["completed"],
        "requests_per_s": part["requests_per_s"],
        "ttft_p50_s": part["ttft_s"]["p50"],
        "ttft_p99_s": part["ttft_s"]["p99"],
        "tpot_p50_s": part["tpot_s"]["p50"],
        "busy_fraction": part["busy_fraction"],
        "kv_peak_blocks": part["kv"]["peak_blocks_used"],
        "prefix_cache_hit_rate": part["prefix_cache_hit_rate"],
    }


def _max_over_mean(values: list[float]) -> float | None:
    mean = float(np.mean(values)) if values else 0.0
    return max(values) / mean if mean > 0 else None


def imbalance(parts: list[dict[str, Any]]) -> dict[str, float | None]:
    """How unevenly the router spread the work: max over mean across replicas (1 = even)."""
    return {
        "requests_max_over_mean": _max_over_mean([float(p["completed"]) for p in parts]),
        "busy_max_over_mean": _max_over_mean([float(p["busy_fraction"] or 0.0) for p in parts]),
    }


def fleet_timeline(parts: list[SimResult]) -> list[TimelinePoint]:
    """The replicas' timelines summed at every change point of any of them (module
    docstring): each replica's row holds until its next row. Plain Python arithmetic on the
    running totals (10^6 rows: numpy per row would be 30x slower)."""
    current = [(0, 0, 0, 0.0, 0, 0)] * len(parts)
    batch = kv = queue = prefill = decode = 0
    power = 0.0
    points: list[TimelinePoint] = []
    rows = heapq.merge(*(_tagged(i, part) for i, part in enumerate(parts)))
    for t_s, i, b, k, q, p, pre, dec in rows:
        ob, ok, oq, op, opre, odec = current[i]
        batch, kv, queue = batch + b - ob, kv + k - ok, queue + q - oq
        power, prefill, decode = power + p - op, prefill + pre - opre, decode + dec - odec
        current[i] = (b, k, q, p, pre, dec)
        point = TimelinePoint(t_s, batch, kv, queue, power, prefill, decode)
        if points and points[-1].t_s == t_s:
            points[-1] = point
        else:
            points.append(point)
    return points


def _tagged(
    index: int, part: SimResult
) -> Iterator[tuple[float, int, int, int, int, float, int, int]]:
    for t_s, b, k, q, p, pre, dec in part.engine.timeline.rows:
        yield t_s, index, b, k, q, p, pre, dec


def fleet_requests(workload: Workload, seed: int) -> list[RequestSpec]:
    """The requests a fleet (replicas or prefill/decode workers) is sent: open loop and single
    turn only. A closed loop's users belong to one replica each, and follow-up turns arrive when
    their previous turn ends, on the replica that served it: a router placing them by a drawn
    arrival time would split conversations (not modelled yet)."""
    if workload.arrival.closed_loop:
        raise ConfigError(
            "arrival", workload.arrival.kind, "open-loop arrivals with --replicas / --disaggregate"
        )
    requests = workload.generate(np.random.default_rng(seed))
    if any(spec.turn for spec in requests):
        raise ConfigError(
            "conversation", "turns > 1", "single-turn requests with --replicas / --disaggregate"
        )
    return requests


def open_engines(
    n: int,
    step_fn: StepFn,
    config: SchedulerConfig,
    capacity_blocks: int,
    scheduler: str,
    idle_w: float,
    frontend_s: float = 0.0,
    state_blocks: int = 0,
    gap_fn: GapFn | None = None,
    spec: SpecRun | None = None,
    seed: int = 0,
    frontend_fn: Callable[[], Frontend] | None = None,
) -> list[tuple[Engine, BlockPool]]:
    """`n` empty engines of one deployment (each its own scheduler, ledger and KV pool, which
    holds `state_blocks` of recurrent state per running sequence for hybrid models); with
    `spec`, each verifies drafts with acceptances of its own stream (sim/specdecode.py); with
    `frontend_fn`, each is a server of its own with its own API-server processes in front
    (sim/frontend.py: one made per engine)."""
    if scheduler not in SCHEDULERS:
        raise ConfigError("scheduler", scheduler, f"one of {', '.join(SCHEDULERS)}")
    out = []
    for member in range(n):
        pool = BlockPool(capacity_blocks, config.block_size, config.prefix_caching, state_blocks)
        ledger = Ledger()
        sched: Scheduler
        step = step_fn
        if spec is None:
            sched = SCHEDULERS[scheduler](config, pool, ledger)
        else:
            sched, step = spec_scheduler(
                spec, scheduler, config, pool, ledger, step_fn, seed, member
            )
        front = None if frontend_fn is None else frontend_fn()
        engine = Engine(
            sched, ledger, step, idle_w, frontend_s=frontend_s, frontend=front, gap_fn=gap_fn
        )
        engine.open()
        out.append((engine, pool))
    return out


def advance(engines: list[Engine], t_s: float) -> None:
    """Every engine with an event before `t_s` advanced to that instant."""
    for engine in engines:
        if engine.next_event_s() < t_s:
            engine.run_until(t_s)


class NextEvents:
    """The engines' next event times on one heap, so that advancing a fleet to an arrival
    touches only the engines with an event before it rather than every replica for every
    request (`advance`'s result, in a different order: the engines are independent). One live
    entry per engine (`_version`); `moved(i)` after anything may have changed engine i's next
    event outside `advance` (a submitted request)."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines
        # `Engine.run_until` without its wrapper's call: once per step of every replica
        self._runs = [e._advance for e in engines]
        self._version = [0] * len(engines)
        self._heap = [(e.next_event_s(), i, 0) for i, e in enumerate(engines)]
        heapq.heapify(self._heap)

    def moved(self, i: int) -> None:
        self._version[i] += 1
        heapq.heappush(self._heap, (self.engines[i].next_event_s(), i, self._version[i]))

    def advance(self, t_s: float) -> None:
        """Every engine with an event before `t_s` advanced to that instant."""
        heap, version, runs = self._heap, self._version, self._runs
        replace = heapq.heapreplace
        while heap and heap[0][0] < t_s:
            _, i, v = heap[0]
            if v != version[i]:  # stale: the engine has a later entry
                heapq.heappop(heap)
                continue
            # the live entry of engine i, moved to its next event (one sift, not two)
            replace(heap, (runs[i](t_s), i, v))


def fleet_run(
    config: dict[str, Any],
    records: list[RequestRecord],
    parts: list[SimResult],
    with_timeline: bool = True,
) -> Run:
    """The fleet as one simulated run: its records, the summed timeline, the last end."""
    return Run(
        kind="simulated",
        config=config,
        records=records,
        timeline=fleet_timeline(parts) if with_timeline else [],
        duration_s=max(part.engine.end_s for part in parts),
    )


def fleet_parts(
    engines: list[Engine],
    pools: list[BlockPool],
    trace_requests: int,
    meta: dict[str, Any] | None,
    slo_ttft_s: float | None,
    slo_tpot_s: float | None,
    offset: int = 0,
) -> list[SimResult]:
    """Every replica's result, each tracing `trace_requests` (at least one), numbered `offset`,
    `offset` + 1, ... (`extra["replica"]`: a DP fleet numbers its ranks across groups). Once a
    replica's records are built its per-request state is dropped (the engine's Seqs and specs:
    0.4 GB of a 10^6-request fleet): nothing reads it after the records."""
    parts = []
    for index, (engine, pool) in enumerate(zip(engines, pools, strict=True)):
        result = engine.finish()
        records = build_records(result, max(1, trace_requests), pool.prefix_caching)
        replica = float(offset + index)  # one float object for all its records (10^6 a fleet)
        for record in records:
            record.extra["replica"] = replica
        result.seqs = []
        engine.forget_requests()
        parts.append(
            SimResult(
                config=dict(meta or {}),
                engine=result,
                pool=pool,
                preemptions=engine.sched.preemptions,
                records=records,
                slo_ttft_s=slo_ttft_s,
                slo_tpot_s=slo_tpot_s,
                spec_decode=spec_summary_of(engine.sched),
            )
        )
    return parts


def run_cluster(
    workload: Workload,
    step_fn: StepFn,
    dep: Deployment,
    config: SchedulerConfig,
    capacity_blocks: int,
    *,
    replicas: int,
    router: str = "round-robin",
    scheduler: str = "continuous",
    seed: int = 0,
    trace_requests: int = 2_000,
    meta: dict[str, Any] | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    frontend_s: float = 0.0,
    spec_run: SpecRun | None = None,
    frontend_fn: Callable[[], Frontend] | None = None,
) -> ClusterResult:
    """`replicas` copies of one replica behind `router` (module docstring); `spec_run`: each
    replica decodes speculatively (sim/specdecode.py)."""
    if (
        isinstance(replicas, bool)
        or not isinstance(replicas, int)
        or not (1 <= replicas <= MAX_REPLICAS)
    ):
        raise ConfigError("replicas", replicas, f"an integer in [1, {MAX_REPLICAS}]")
    # the collector off from the first spec to the last record: the per-request state (specs,
    # Seqs) is made and freed inside, so no collection ever walks it (engine.gc_paused)
    with gc_paused():
        requests = fleet_requests(workload, seed)
        choose = Router(router, replicas)
        idle_w = idle_power_w(dep)
        state = state_blocks_per_seq(dep, config.block_size)
        opened = open_engines(
            replicas, step_fn, config, capacity_blocks, scheduler, idle_w, frontend_s, state,
            cost_gap_fn(dep), spec_run, seed, frontend_fn,
        )  # fmt: skip
        engines, pools = [e for e, _ in opened], [p for _, p in opened]
        front = NextEvents(engines)
        pick, advance, moved = choose.pick, front.advance, front.moved
        for spec in requests:  # the hot loop of a fleet: once per request
            advance(spec.arrival_s)
            target = pick(spec, list(map(_OUTSTANDING, engines)))
            if engines[target].submit(spec):  # (False: applied at once, no new event)
                moved(target)
        for engine in engines:
            engine.run_until(math.inf)
        del requests  # the engines hold the specs each was sent, until their records are built
        per_replica = -(-trace_requests // replicas)
        parts = fleet_parts(engines, pools, per_replica, meta, slo_ttft_s, slo_tpot_s)
    meta = dict(meta or {})
    config_doc = {
        **meta,
        "replicas": replicas,
        "router": router,
        "seed": seed,
        # the fleet as one server: every replica's GPUs, KV blocks and idle power
        "num_gpus": int(meta.get("num_gpus", dep.num_gpus)) * replicas,
        "kv_capacity_blocks": capacity_blocks * replicas,
        "idle_power_w": idle_w * replicas,
        "frontend_s": frontend_s,
    }
    return ClusterResult(config_doc, parts, router, idle_w, slo_ttft_s, slo_tpot_s)
