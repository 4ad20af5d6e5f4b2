"""Prefill/decode disaggregation (`simulate --disaggregate 1p3d`): P prefill workers and D decode
workers, each a copy of the deployment, with each prompt's KV sent from its prefill worker to a
decode worker (SGLang PD with Mooncake/NIXL, NVIDIA Dynamo, llm-d, vLLM's P/D connectors).

Two handoffs (`handoff`). "sglang" (the default for SGLang): sim/pd_handoff.py, SGLang's own
as its code runs it (the router sends each request to a prefill and a decode worker at once,
the decode worker pre-allocates the prompt's KV before the prefill may start, the first token is
streamed at the decode worker's iteration that takes the KV over). "proxy" (the others), below.

How a request goes through the proxy's handoff (vLLM's disaggregated proxy: prefill first):
1. It reaches the least-loaded prefill worker, which runs its prompt (chunked prefill with the
   other prompts there, the worker's own KV pool) and samples one token (max_tokens = 1).
2. Its prompt's KV, `kv_bytes_per_token x prompt` bytes, goes to the least-loaded decode worker
   over that worker's ingress link, FIFO: it starts when the link is free and takes
   `latency + bytes / bandwidth` (cost/kvtransfer.py, the one home of that price: the shards
   move in parallel over min(prefill tp, decode tp) GPU links, NVLink inside one scale-up
   domain, else the NICs); `kv_link_bytes_per_s` sets another bandwidth.
3. On the decode worker the transferred KV is held like prefix-cache blocks the request finds on
   admission: vLLM's KV-connector API reports remote KV as externally matched tokens
   (`get_num_new_matched_tokens`) that the scheduler counts as computed, always leaving the last
   prompt token to compute. So admission computes only the partial last block and the last
   token, then decodes every output token. TTFT = prefill (and its queue) + transfer + the
   decode worker's queue and first step, plus two front ends in series:
4. The proxy calls the two servers one after the other (vllm-project/vllm@030ea52e:
   tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, `_handle_completions`: a
   non-streaming `max_tokens = 1` request to a prefill server, its whole response awaited, then
   the streaming request to a decode server), so the request passes each server's HTTP front end
   once (`frontend_s`, `Efficiency.request_overhead_s`, in and out as an aggregated server has
   it): the prefill server's before its prefill is admitted, the decode server's before its KV
   moves (vLLM's NIXL decode side reads the KV once its request has arrived). The proxy's own
   hops are not modelled.
The KV in transit is not reserved in the decode pool: it is free-but-cached there until the
request is admitted (vLLM's decode side allocates on admission; SGLang preallocates, so under
KV pressure SGLang holds memory this model leaves free). A transfer whose blocks were handed to
another request before admission is recomputed on the decode worker and counted.

Each side has its own parallelism (`prefill_dep`, default the decode workers' `dep`: SGLang PD
and Dynamo start prefill and decode workers with their own --tp), so its own step costs and its
own KV pool, sized by its own memory (its weights per GPU, its KV bytes per token per GPU).

The proxy's handoff runs in two passes: the prefill side depends only on the arrivals, so it
runs first; the decode side then takes the prefills' finish times in order, advancing every
decode worker to each before picking one, so each worker's clock only moves forward. Energy
per worker, and the fleet's, as for data-parallel replicas (cluster.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenprobe.cost import (
    Deployment,
    KvLink,
    Split,
    idle_power_w,
    kv_link,
    kv_transfer_bytes,
    state_blocks_per_seq,
)
from tokenprobe.metrics import summarize
from tokenprobe.records import RequestRecord, Run, write_run
from tokenprobe.sim.base import SchedulerConfig
from tokenprobe.sim.cluster import (
    advance,
    fleet_requests,
    fleet_run,
    fleet_totals,
    imbalance,
    open_engines,
    replica_row,
)
from tokenprobe.sim.engine import Engine, StepFn
from tokenprobe.sim.gpu_gap import cost_gap_fn
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.pd_handoff import SglangPd, check_handoff, client_records
from tokenprobe.sim.result import SimResult, build_records
from tokenprobe.sim.specdecode import SpecRun, spec_summary_of
from tokenprobe.workload import RequestSpec, Workload


@dataclass(slots=True)
class DisaggResult:
    """The prefill and decode workers' simulations and the requests as the client saw them."""

    config: dict[str, Any]
    prefill: list[SimResult]
    decode: list[SimResult]
    client_records: list[RequestRecord]
    idle_w: list[float]  # each worker's, prefill workers first
    recomputed: int
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None

    @property
    def records(self) -> list[RequestRecord]:
        return self.client_records

    @property
    def workers(self) -> list[SimResult]:
        return [*self.prefill, *self.decode]

    def run(self, with_timeline: bool = True) -> Run:
        return fleet_run(self.config, self.records, self.workers, with_timeline)

    def to_dict(self) -> dict[str, Any]:
        summary = summarize(self.run(with_timeline=False), self.slo_ttft_s, self.slo_tpot_s)
        prefill = [p.to_dict() for p in self.prefill]
        decode = [p.to_dict() for p in self.decode]
        recs = self.records
        transfer = _extra_values(recs, "kv_transfer_s")
        wait = _extra_values(self.records, "kv_link_wait_s")
        return {
            **summary,
            **fleet_totals(self.workers, [*prefill, *decode], summary, self.idle_w, "worker"),
            "config": self.config,
            "disaggregate": f"{len(prefill)}p{len(decode)}d",
            "prefill_tp": self.config.get("prefill_tp"),
            "decode_tp": self.config.get("decode_tp"),
            "kv_capacity_blocks_per_worker": {
                "prefill": self.prefill[0].pool.capacity_blocks,
                "decode": self.decode[0].pool.capacity_blocks,
            },
            "kv_transfer": {
                "link": self.config.get("kv_link"),
                "transfers": len(transfer),
                "mean_s": float(np.mean(transfer)) if transfer else None,
                "p99_s": float(np.percentile(transfer, 99)) if transfer else None,
                "link_wait_mean_s": float(np.mean(wait)) if wait else None,
                "recomputed_on_decode": self.recomputed,
            },
            "handoff": {  # SGLang's (sim/pd_handoff.py): the waits on the decode worker
                "kind": self.config.get("pd_handoff"),
                "frontend_s": self.config.get("frontend_s"),
                **{
                    f"{key[:-2]}_mean_s": float(np.mean(v))
                    if (v := _extra_values(recs, key))
                    else None
                    for key in ("prealloc_wait_s", "handoff_wait_s")
                },
            },
            "imbalance": {
                "prefill": imbalance(prefill),
                "decode": imbalance(decode),
            },
            "per_prefill_worker": [replica_row(i, p) for i, p in enumerate(prefill)],
            "per_decode_worker": [replica_row(i, p) for i, p in enumerate(decode)],
        }

    def write(self, directory: str | Path) -> Path:
        return write_run(self.run(), directory, summary=self.to_dict())


def _extra_values(records: list[RequestRecord], key: str) -> list[float]:
    return [float(r.extra[key]) for r in records if key in r.extra]


def _least_loaded(engines: list[Engine]) -> int:
    return min(range(len(engines)), key=lambda i: engines[i].outstanding)


def run_disaggregated(
    workload: Workload,
    step_fn: StepFn,
    dep: Deployment,
    config: SchedulerConfig,
    capacity_blocks: int,
    *,
    split: Split,
    kv_link_bytes_per_s: float | None = None,
    prefill: tuple[Deployment, StepFn, int] | None = None,
    scheduler: str = "continuous",
    seed: int = 0,
    trace_requests: int = 2_000,
    meta: dict[str, Any] | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    spec_run: SpecRun | None = None,
    handoff: str = "proxy",
    frontend_s: float = 0.0,
    prefill_config: SchedulerConfig | None = None,
) -> DisaggResult:
    """P prefill and D decode workers (module docstring): the decode workers are `dep`, priced
    by `step_fn`, with `capacity_blocks` of KV each; `prefill` gives the prefill workers' own
    (deployment, step function, KV blocks), by default the same. `spec_run`: the decode workers
    decode speculatively (sim/specdecode.py); a prefill worker emits one token, no drafts.
    `handoff` "sglang": SGLang's router, pre-allocation and handoff (sim/pd_handoff.py), each
    request first `frontend_s` in the servers' front ends; "proxy": the two passes, through
    the prefill server's front end and then the decode server's (`frontend_s` each).
    `prefill_config`: the prefill workers' own scheduler flags (default `config`; the block
    size is the decode side's)."""
    requests = fleet_requests(workload, seed)
    p_config = replace(prefill_config or config, block_size=config.block_size)
    p_dep, p_step_fn, p_blocks = prefill or (dep, step_fn, capacity_blocks)
    link = kv_link(p_dep, dep, split.prefill, split.decode, kv_link_bytes_per_s)
    p_idle_w, idle_w = idle_power_w(p_dep), idle_power_w(dep)
    # decode workers find the transferred KV as cached blocks: prefix caching on there
    decode_config = replace(config, prefix_caching=True)
    p_state = state_blocks_per_seq(p_dep, config.block_size)
    state = state_blocks_per_seq(dep, config.block_size)
    gap = cost_gap_fn(dep)  # each step's engine CPU slice is not GPU-busy (sim/gpu_gap.py)
    sglang = check_handoff(handoff) == "sglang"
    prefill_side = open_engines(
        split.prefill,
        p_step_fn,
        p_config,
        p_blocks,
        scheduler,
        p_idle_w,
        0.0 if sglang else frontend_s,  # SGLang's fleet loop applies its own (pd_handoff.py)
        p_state,
        cost_gap_fn(p_dep),
    )
    decode_side = open_engines(
        split.decode, step_fn, decode_config, capacity_blocks, scheduler, idle_w, 0.0, state, gap,
        spec_run, seed,
    )  # fmt: skip
    per_worker = max(1, -(-trace_requests // (split.prefill + split.decode)))
    if sglang:
        fleet = SglangPd([e for e, _ in prefill_side], decode_side, link, dep, frontend_s)
        handoffs = fleet.run(requests)
        prefill_parts = [
            _part(i, engine, pool, per_worker, "prefill_worker", meta)
            for i, (engine, pool) in enumerate(prefill_side)
        ]
        decode_parts = [
            _part(i, engine, pool, per_worker, "decode_worker", meta)
            for i, (engine, pool) in enumerate(decode_side)
        ]
        client, recomputed = client_records(
            handoffs,
            requests,
            [part.records for part in prefill_parts],
            {r.request_id: r for part in decode_parts for r in part.records},
            config.block_size,
        )
    else:
        prefill_parts, decode_parts, client, recomputed = _proxy(
            requests, prefill_side, decode_side, link, dep, config.block_size, per_worker, meta,
            frontend_s,
        )  # fmt: skip
    config_doc = {
        **(meta or {}),
        "disaggregate": f"{split.prefill}p{split.decode}d",
        "prefill_tp": p_dep.tp,
        "decode_tp": dep.tp,
        "kv_link_bytes_per_s": link.bytes_per_s,
        "kv_link": link.to_dict(),
        "pd_handoff": handoff,
        "frontend_s": frontend_s,
        "frontends_in_series": 1 if sglang else 2,  # the servers' front ends a request passes
        "seed": seed,
        "num_gpus": p_dep.num_gpus * split.prefill + dep.num_gpus * split.decode,
        "kv_capacity_blocks": p_blocks * split.prefill + capacity_blocks * split.decode,
        "idle_power_w": p_idle_w * split.prefill + idle_w * split.decode,
    }
    return DisaggResult(
        config_doc,
        prefill_parts,
        decode_parts,
        client,
        [p_idle_w] * split.prefill + [idle_w] * split.decode,
        recomputed,
        slo_ttft_s,
        slo_tpot_s,
    )


def _proxy(
    requests: list[RequestSpec],
    prefill_side: list[tuple[Engine, BlockPool]],
    decode_side: list[tuple[Engine, BlockPool]],
    link: KvLink,
    dep: Deployment,
    bs: int,
    per_worker: int,
    meta: dict[str, Any] | None,
    frontend_s: float,
) -> tuple[list[SimResult], list[SimResult], list[RequestRecord], int]:
    """The proxy's handoff (module docstring, the two passes): each prefill on the
    least-loaded prefill worker (its engines hold the prefill server's front end), then, once
    the request has passed the decode server's front end (`frontend_s`), its KV to the
    least-loaded decode worker."""
    by_id = {spec.request_id: spec for spec in requests}
    # 1. prefills: max_tokens = 1 on the least-loaded prefill worker
    p_engines = [e for e, _ in prefill_side]
    for spec in requests:
        advance(p_engines, spec.arrival_s)
        p_engines[_least_loaded(p_engines)].submit(spec._replace(output_tokens=1))
    prefill_parts = [
        _part(i, engine, pool, per_worker, "prefill_worker", meta)
        for i, (engine, pool) in enumerate(prefill_side)
    ]
    done = sorted(
        (r for part in prefill_parts for r in part.records if r.ok),
        key=lambda r: (r.first_token_s or 0.0, r.request_id),
    )
    # 2. transfers and decodes, in the order the prefills finished
    d_engines = [e for e, _ in decode_side]
    link_free = [0.0] * len(decode_side)
    transfers: dict[str, tuple[int, float, float]] = {}
    for k, prefilled in enumerate(done):
        ready = float(prefilled.first_token_s or 0.0) + frontend_s  # the decode server's
        advance(d_engines, ready)
        target = _least_loaded(d_engines)
        spec = by_id[prefilled.request_id]
        pool = decode_side[target][1]
        group = -(k + 1)  # a group of its own, apart from the workload's prefix groups
        blocks = pool.shareable_blocks(spec.input_tokens, spec.input_tokens)
        if blocks and pool.can_allocate(blocks):  # cached there, free until admission
            pool.allocate(blocks)
            pool.publish_prefix(group, blocks)
            pool.release_prefix(group)
        start = max(ready, link_free[target])
        arrive = start + link.time_s(kv_transfer_bytes(dep, spec.input_tokens))
        link_free[target] = arrive
        transfers[spec.request_id] = (target, start - ready, arrive - ready)
        d_engines[target].submit(
            spec._replace(arrival_s=arrive, prefix_tokens=spec.input_tokens, prefix_group=group)
        )
    decode_parts = [
        _part(i, engine, pool, per_worker, "decode_worker", meta)
        for i, (engine, pool) in enumerate(decode_side)
    ]
    client, recomputed = _client_records(
        prefill_parts, decode_parts, transfers, by_id, bs, frontend_s
    )
    return prefill_parts, decode_parts, client, recomputed


def _part(
    index: int,
    engine: Engine,
    pool: BlockPool,
    trace_requests: int,
    role: str,
    meta: dict[str, Any] | None,
) -> SimResult:
    """One worker's simulation, its records tagged with the worker (`role`: its index)."""
    result = engine.finish()
    records = build_records(result, trace_requests, pool.prefix_caching)
    for record in records:
        record.extra[role] = float(index)
    return SimResult(
        dict(meta or {}), result, pool, engine.sched.preemptions, records,
        spec_decode=spec_summary_of(engine.sched),
    )  # fmt: skip


def _client_records(
    prefill: list[SimResult],
    decode: list[SimResult],
    transfers: dict[str, tuple[int, float, float]],
    specs: dict[str, RequestSpec],
    block_size: int,
    decode_frontend_s: float,
) -> tuple[list[RequestRecord], int]:
    """Each request as the client saw it: sent at its arrival, first token and the rest from
    its decode worker, the prefill worker's queue; where each part ran and how long its KV took
    to move. A prefill that failed (rejected) is the client's failure."""
    p = {r.request_id: r for part in prefill for r in part.records}
    d = {r.request_id: r for part in decode for r in part.records}
    out: list[RequestRecord] = []
    recomputed = 0
    for rid, spec in specs.items():
        pre = p[rid]
        dec = d.get(rid)
        if dec is None:
            out.append(pre)
            continue
        target, wait_s, transfer_s = transfers[rid]
        cached = float(dec.extra.get("server_cached_tokens", 0.0))
        if cached < (spec.input_tokens - 1) // block_size * block_size:
            recomputed += 1
        out.append(
            replace(
                dec,
                scheduled_s=pre.scheduled_s,
                sent_s=pre.sent_s,
                queue_s=pre.queue_s,
                extra={
                    "energy_j": float(pre.extra.get("energy_j", 0.0))
                    + float(dec.extra.get("energy_j", 0.0)),
                    "prefill_worker": pre.extra["prefill_worker"],
                    "decode_worker": float(target),
                    "prefill_done_s": float(pre.first_token_s or 0.0),
                    "decode_frontend_s": decode_frontend_s,  # then the KV may move
                    "kv_link_wait_s": wait_s,
                    "kv_transfer_s": transfer_s,
                    "preemptions": float(pre.extra.get("preemptions", 0.0))
                    + float(dec.extra.get("preemptions", 0.0)),
                },
            )
        )
    out.sort(key=lambda r: r.scheduled_s)
    return out, recomputed
