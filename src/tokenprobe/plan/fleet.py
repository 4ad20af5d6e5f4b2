"""One searched deployment judged as a fleet: replicas behind a router, or P:D workers.

For a group of candidates that share one deployment (GPU, dtype, tp, batch cap, power cap, node
topology, speculative decoding, attention DP and its EP back end) and differ in how it is served:
1. prune with the cost model (microseconds): the weights must fit with room for one request of
   the longest length, and a lone request's TTFT and TPOT must meet the SLOs (a loaded server
   is never faster than an idle one). The same estimate gives the servers one replica spans and
   the NICs' share of a decode step (cost/comm.py prices the collectives of a tp group that
   leaves its scale-up domain over the scale-out NICs).
2. aggregated: bisect the rate one replica sustains (`sim.max_rate_per_s`), which gives the
   first guess n0 = ceil(rate / sustained) replicas; then, per router, the fleet of n replicas
   is simulated at the requested rate by the cluster simulator (sim/cluster.py), for
   `num_requests` per replica (each replica judged on as many requests as the bisection's one),
   and n moves down one at a time while it still meets the SLOs (with shared prefixes, whose
   cache hits a prefix-aware router can turn into a replica saved) or up, by 1, 2, 4, ... and
   then bisecting, until it does (round-robin's imbalance and scattered prefixes can cost replicas),
   at most `MAX_FLEET_STEPS` fleets per router and `max_gpus`. With shared prefixes the search
   starts at one replica even when no load meets the SLOs on one: a fleet whose router splits
   the prefixes over the replicas' caches may meet them where one replica's cache thrashes. A
   fleet of one is the same under every router. A fleet of more than `MAX_SIMULATED_REPLICAS`
   is not simulated whole (it would cost that many replicas' runs): one replica is simulated at
   its share of the rate, as plan did before fleets were judged.
3. disaggregated: each P:D split (explicit, or every split of at most `max_gpus` GPUs) is first
   sized by the cost model: P prefill workers sustain at most P x b / prefill(b prompts) requests
   per second (b = the step token budget over the prompt) and D decode workers at most
   D x B / (output x TPOT(B)) with B the largest batch that fits in KV and meets the TPOT SLO;
   a split below the rate on either side is ruled out without simulating. The rest are simulated
   (sim/disagg.py) from the fewest GPUs up; once one meets the SLOs, splits with more GPUs are
   not simulated (they cannot be cheaper).
4. attention DP (`dp` > 1): the deployment is a group of dp ranks of tp GPUs with their shared
   experts, bisected and judged with the ranks stepping together (sim/dpep.py), padded and
   dispatched to as the plan's engine does (`PlanRequest.engine`'s preset: vLLM pads every
   rank to the largest and balances the ranks by load; sim/engines.py). A fleet of n such
   groups is searched as replicas are (step 2): n groups behind the router, each stepping on
   its own clock (sim/dpep_fleet.py); past `MAX_SIMULATED_REPLICAS` groups, one group at its
   share of the rate, as for replicas.
Pass or fail is `sim.meets_slos` on the fleet's own p90s (queue, TTFT, TPOT).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tokenprobe.cost import BatchShape, estimate_deployment, step_cost
from tokenprobe.cost import Workload as StaticWorkload
from tokenprobe.errors import TokenprobeError
from tokenprobe.plan.candidate import ALL_SPLITS, Candidate, Outcome, parse_split
from tokenprobe.plan.request import PlanRequest, longest, typical
from tokenprobe.sim import (
    MAX_QUEUE_S,
    MAX_REPLICAS,
    SchedulerConfig,
    max_rate_per_s,
    meets_slos,
    rank_router_for,
    simulate_fleet,
)
from tokenprobe.workload import MAX_REQUESTS, Arrival, Workload

MAX_FLEET_STEPS = 6  # fleets simulated per router while looking for the replica count
# the largest fleet simulated whole (one of n replicas costs n single-replica runs): 8 keeps
# benchmarks/plan_speed.py near its 60 s target; routing effects show at a few replicas
MAX_SIMULATED_REPLICAS = 8
BISECT_RUNS = 11  # max_rate_per_s: one saturated run and 10 bisection steps


@dataclass(frozen=True)
class Judged:
    """What one fleet simulation said."""

    ok: bool
    summary: dict[str, Any]


class Group:
    """The candidates of one deployment (module docstring) and what judging them costs."""

    def __init__(self, req: PlanRequest, cands: list[Candidate]) -> None:
        self.req, self.cands = req, cands
        self.base = replace(cands[0], router=None, disaggregate=None)
        self.simulations = 0
        self.config = SchedulerConfig(max_num_seqs=self.base.max_num_seqs, prefix_caching=True)

    # ---------------------------------------------------------------- cost-model pruning

    def prune(self) -> Outcome | None:
        req, c = self.req, self.base
        try:
            self.dep = req.deployment(c)
            self.spec = req.spec(c)
        except TokenprobeError as exc:
            return Outcome(c, False, f"not runnable: {exc}")
        isl, osl = longest(req.input_len), longest(req.output_len)
        work = StaticWorkload(isl, max(2, osl))
        est = estimate_deployment(self.dep, work, find_compute_bound=False, spec=self.spec)
        plain = est if self.spec is None else estimate_deployment(
            self.dep, work, find_compute_bound=False
        )  # fmt: skip
        step = plain.decode.time_s if plain.decode is not None else 0.0
        comm = plain.communication()
        self.nodes = int(comm["nodes"] or 1)
        inter = float(comm["decode_step"]["inter_node_s"])
        self.nic_share = inter / step if step > 0 and self.dep.crosses_domains else None
        if not est.memory.fits:
            return self._out(c, False, f"memory: {est.memory.reason}")
        ratios = []
        if req.slo_ttft_p90_s is not None:
            ratios.append(self._lone_ttft_s(est.ttft_s, est.ttft_breakdown_s["prefill_s"], isl)
                          / req.slo_ttft_p90_s)  # fmt: skip
        if req.slo_tpot_p90_s is not None:
            ratios.append(est.tpot_s / req.slo_tpot_p90_s)
        miss = max(ratios)
        if miss > 1:
            return self._out(c, False, "even a lone request misses the SLOs", miss=miss)
        return None

    def _lone_ttft_s(self, ttft_s: float, prefill_s: float, isl: int) -> float:
        """A lone request's TTFT; with a shared prefix, one that finds it cached (the best
        case a loaded server can give: only the prompt's own tokens are prefilled)."""
        prefix = min(self.req.shared_prefix_tokens, isl - 1)
        if prefix <= 0:
            return ttft_s
        cached = step_cost(self.dep, BatchShape.prefill(isl - prefix, 1, cached_tokens=prefix))
        return ttft_s - prefill_s + cached.time_s

    def _out(self, c: Candidate, feasible: bool, reason: str, **kw: Any) -> Outcome:
        return Outcome(
            c, feasible, reason, nodes=getattr(self, "nodes", 1),
            nic_share=getattr(self, "nic_share", None), **kw,
        )  # fmt: skip

    # ---------------------------------------------------------------- simulation

    def workload(self, members: int, rate_per_s: float) -> Workload:
        """The requested rate for as long as one replica's bisection ran: `num_requests` for
        each of `members` replicas (or workers of the larger side), so every member of the
        fleet is judged on as many requests, past the same warm-up, as one replica was (a
        fleet of 4 given 300 requests in all would see 75 each, too few to fill its batch)."""
        r = self.req
        return Workload(
            Arrival("poisson", rate_per_s=rate_per_s), r.input_len, r.output_len,
            num_requests=min(r.num_requests * members, MAX_REQUESTS),
            shared_prefix_tokens=r.shared_prefix_tokens, prefix_groups=r.prefix_groups,
        )  # fmt: skip

    def judge(self, *, replicas: int = 1, router: str = "round-robin", split: str | None = None,
              rate_per_s: float | None = None) -> Judged:  # fmt: skip
        """The fleet simulated at the requested rate (or `rate_per_s`)."""
        self.simulations += 1
        r = self.req
        members = replicas if split is None else max(parse_split(split))
        rate = r.rate_per_s if rate_per_s is None else rate_per_s
        dp = self.base.dp
        if dp > 1 and replicas == 1:  # one group: no fleet router, the engine's own dispatch
            router = rank_router_for(r.engine)
        d = simulate_fleet(
            self.dep, self.workload(members, rate), replicas=replicas, router=router,
            disaggregate=split, config=self.config, seed=r.seed, spec_decode=self.spec, dp=dp,
            engine=r.engine,
        ).to_dict()  # fmt: skip
        return Judged(meets_slos(d, MAX_QUEUE_S, r.slo_ttft_p90_s, r.slo_tpot_p90_s), d)

    def outcome(
        self, c: Candidate, j: Judged, workers: int, rate_per_replica: float, simulated: int = 0
    ) -> Outcome:
        """`workers` replicas (or P + D workers) judged by `j`, a simulation of all of them or
        of `simulated` of them (one replica standing for a fleet too large to simulate)."""
        d, r = j.summary, self.req
        ttft, tpot = d["ttft_s"]["p90"], d["tpot_s"]["p90"]
        ratios = [
            v / slo
            for v, slo in ((ttft, r.slo_ttft_p90_s), (tpot, r.slo_tpot_p90_s))
            if slo is not None and v is not None
        ]
        energy = d["energy"]
        pre, dec = energy.get("prefill_j") or 0.0, energy.get("decode_j") or 0.0
        spread = d["imbalance"]
        spread = spread.get("decode", spread)  # disaggregated: the decode workers'
        spread = d.get("dp_groups", spread)  # a fleet of DP groups: over the groups, not ranks
        gpus = workers * self.dep.num_gpus
        return Outcome(
            c, j.ok, "meets the SLOs" if j.ok else "the fleet misses the SLOs in simulation",
            rate_per_replica=rate_per_replica, replicas=workers, gpus=gpus,
            ttft_p90_s=ttft, tpot_p90_s=tpot,
            output_tokens_per_s_per_gpu=float(d["output_tokens_per_s"] or 0.0)
            / ((simulated or workers) * self.dep.num_gpus),
            kwh_per_million_output_tokens=energy.get("kwh_per_million_output_tokens"),
            kwh_per_million_input_tokens=energy.get("kwh_per_million_input_tokens"),
            prefill_share=pre / (pre + dec) if pre + dec else 0.0,
            miss=1.0 if j.ok else max([1.0, *ratios]),
            slo_ratio=max(ratios) if ratios else None, nodes=self.nodes,
            nic_share=self.nic_share, imbalance=spread["requests_max_over_mean"],
            prefix_cache_hit_rate=d.get("prefix_cache_hit_rate"), simulated=True,
        )  # fmt: skip

    # ---------------------------------------------------------------- aggregated

    def aggregated(self, cands: list[Candidate]) -> list[Outcome]:
        r = self.req
        cap = max_rate_per_s(
            self.dep, r.input_len, r.output_len, slo_ttft_s=r.slo_ttft_p90_s,
            slo_tpot_s=r.slo_tpot_p90_s, config=self.config, num_requests=r.num_requests,
            seed=r.seed, prefix=(r.shared_prefix_tokens, r.prefix_groups), spec_decode=self.spec,
            dp=self.base.dp, engine=r.engine,
        )  # fmt: skip
        self.simulations += BISECT_RUNS
        if cap.max_rate_per_s <= 0 and not r.shared_prefix_tokens:
            return [
                self._out(c, False, "no load meets the SLOs in simulation", miss=1.0) for c in cands
            ]
        # with shared prefixes, a load no single replica meets may be met by a fleet whose
        # router keeps each replica's share of the prefixes in its cache: start from one
        n0 = math.ceil(r.rate_per_s / cap.max_rate_per_s) if cap.max_rate_per_s > 0 else 1
        if n0 > MAX_SIMULATED_REPLICAS and n0 <= self.most_replicas:
            return self._multiplied(cands, n0, cap.max_rate_per_s)
        out: list[Outcome] = []
        single: Outcome | None = None
        for c in cands:
            assert c.router is not None
            n, judged = self._replicas(n0, c.router)
            if n == 1 and judged.ok:
                # one replica: no router; the same result for every router
                if single is None:
                    single = self.outcome(replace(c, router=None), judged, 1, cap.max_rate_per_s)
                    out.append(single)
                continue
            o = self.outcome(c, judged, n, cap.max_rate_per_s)
            if not judged.ok:
                why = f"{n} replicas still miss the SLOs in simulation"
                if n == self.most_replicas and self.req.max_gpus is not None:
                    why += f" (max_gpus {self.req.max_gpus})"
                elif n == MAX_SIMULATED_REPLICAS:
                    why += f" (fleets of more than {MAX_SIMULATED_REPLICAS} are not searched)"
                o = replace(o, reason=why)
            out.append(o)
        return out

    def _multiplied(self, cands: list[Candidate], n0: int, sustained: float) -> list[Outcome]:
        """A fleet over `MAX_SIMULATED_REPLICAS`, judged as one replica at its share of the
        rate (each replica would be judged on `num_requests`: n0 times a replica's run, too
        many to bound the search); the router's imbalance is not judged."""
        one = self.judge(rate_per_s=self.req.rate_per_s / n0)
        whole = f"fleets of more than {MAX_SIMULATED_REPLICAS} are not simulated whole"
        why = f"{n0} replicas: one simulated at 1/{n0} of the rate ({whole})"
        return [
            replace(self.outcome(c, one, n0, sustained, simulated=1), reason=why)
            if one.ok
            else self._out(c, False, why + ", and it misses the SLOs", miss=1.0)
            for c in cands
        ]

    def _replicas(self, n0: int, router: str) -> tuple[int, Judged]:
        """The fewest replicas whose fleet meets the SLOs, searched from n0 (module docstring):
        down one at a time while it still meets them (with shared prefixes only: else n0 - 1
        replicas would each carry more than one replica sustains), else up by 1, 2, 4, ...
        and then bisecting between the last miss and the first fleet that met; at most
        `MAX_FLEET_STEPS` fleets and as many replicas as `max_gpus` allows. The last fleet
        judged when none meets."""
        most = self.most_simulated
        n = min(n0, most)
        judged, steps = self.judge(replicas=n, router=router), 1
        if judged.ok and not self.req.shared_prefix_tokens:
            # n0 - 1 replicas would each carry more than the rate one replica sustains
            return n, judged
        if judged.ok:
            while n > 1 and steps < MAX_FLEET_STEPS:
                fewer = self.judge(replicas=n - 1, router=router)
                steps += 1
                if not fewer.ok:
                    break
                n, judged = n - 1, fewer
            return n, judged
        miss, met = n, None  # the most replicas known to miss, the fewest known to meet
        step = 1  # n0 usually misses by a replica: n0 + 1, + 2, + 4, ... (a fleet costs n runs)
        while met is None and steps < MAX_FLEET_STEPS and n < most:
            n, step = min(miss + step, most), 2 * step
            judged, steps = self.judge(replicas=n, router=router), steps + 1
            if judged.ok:
                met = (n, judged)
            else:
                miss = n
        if met is None:
            return n, judged
        while met[0] - miss > 1 and steps < MAX_FLEET_STEPS:
            mid = (miss + met[0]) // 2
            judged, steps = self.judge(replicas=mid, router=router), steps + 1
            if judged.ok:
                met = (mid, judged)
            else:
                miss = mid
        return met

    @property
    def most_replicas(self) -> int:
        cap = self.req.max_gpus
        return MAX_REPLICAS if cap is None else max(1, cap // self.dep.num_gpus)

    @property
    def most_simulated(self) -> int:
        """The most replicas `_replicas` simulates (`max_gpus`, `MAX_SIMULATED_REPLICAS`)."""
        return min(self.most_replicas, MAX_SIMULATED_REPLICAS)

    # ---------------------------------------------------------------- disaggregated

    def splits(self, c: Candidate) -> list[tuple[int, int]]:
        assert c.disaggregate is not None
        if c.disaggregate != ALL_SPLITS:
            return [parse_split(c.disaggregate)]
        budget = self.req.max_gpus_or_default // self.dep.num_gpus
        return [(p, w - p) for w in range(2, budget + 1) for p in range(1, w)]

    def side_rates(self) -> tuple[float, float]:
        """Requests/s one prefill worker and one decode worker sustain at most (module
        docstring, step 3), from the cost model."""
        r, dep = self.req, self.dep
        isl, osl = typical(r.input_len), max(2, typical(r.output_len))
        b = max(1, self.config.max_num_batched_tokens // isl)
        prefill_rate = b / step_cost(dep, BatchShape.prefill(isl, b)).time_s

        def decode_ok(batch: int) -> tuple[bool, float]:
            est = estimate_deployment(
                dep, StaticWorkload(isl, osl, batch), find_compute_bound=False, spec=self.spec
            )
            slo = r.slo_tpot_p90_s
            return est.memory.fits and (slo is None or est.tpot_s <= slo), est.tpot_s

        best, batch = 0.0, 1
        while batch <= self.config.max_num_seqs:
            ok, tpot = decode_ok(batch)
            if not ok:
                break
            best = batch / (osl * tpot)
            batch *= 2
        return prefill_rate, best

    def disaggregated(self, cands: list[Candidate]) -> list[Outcome]:
        rate = self.req.rate_per_s
        p_rate, d_rate = self.side_rates()
        out: list[Outcome] = []
        seen: set[tuple[int, int]] = set()  # `1p1d,all`: each split once
        met_at: int | None = None  # the fewest GPUs of a split that met the SLOs
        for c in cands:
            # the fewest GPUs first; of those, the most cost-model headroom
            if not self.splits(c):
                budget = self.req.max_gpus_or_default
                out.append(self._out(c, False, f"no P:D split of tp{c.tp} fits in {budget} GPUs"))
                continue
            todo = sorted(
                self.splits(c), key=lambda s: (s[0] + s[1], -min(s[0] * p_rate, s[1] * d_rate))
            )
            for p, d in todo:
                if (p, d) in seen:
                    continue
                seen.add((p, d))
                cs = replace(c, disaggregate=f"{p}p{d}d")
                gpus = (p + d) * self.dep.num_gpus
                if self.req.max_gpus is not None and gpus > self.req.max_gpus:
                    out.append(self._out(cs, False, f"{gpus} GPUs > max_gpus {self.req.max_gpus}"))
                elif p * p_rate < rate or d * d_rate < rate:
                    side = "prefill" if p * p_rate < rate else "decode"
                    sustain = p * p_rate if side == "prefill" else d * d_rate
                    why = f"cost model: the {side} workers sustain at most {sustain:.2f} req/s"
                    out.append(self._out(cs, False, why))
                elif c.disaggregate == ALL_SPLITS and met_at is not None and gpus > met_at:
                    why = f"not simulated: a split of {met_at} GPUs already meets the SLOs"
                    out.append(self._out(cs, False, why))
                else:
                    judged = self.judge(split=cs.disaggregate)
                    out.append(self.outcome(cs, judged, p + d, 0.0))
                    if judged.ok:
                        met_at = gpus if met_at is None else min(met_at, gpus)
        return out


def evaluate_group(req: PlanRequest, cands: list[Candidate]) -> tuple[list[Outcome], int]:
    """Every candidate of one deployment (module docstring), and the simulator runs spent."""
    group = Group(req, cands)
    pruned = group.prune()
    if pruned is not None:
        return [replace(pruned, candidate=c) for c in cands], 0
    agg = [c for c in cands if c.disaggregate is None]
    pd = [c for c in cands if c.disaggregate is not None]
    outcomes = (group.aggregated(agg) if agg else []) + (group.disaggregated(pd) if pd else [])
    return outcomes, group.simulations
