"""SGLang's prefill/decode handoff (`simulate --disaggregate XpYd --pd-handoff sglang`): what a
request waits for between its arrival and its first token when SGLang PD serves it, as the
code runs it. sim/disagg.py runs the workers; this module decides when each side may act.

Sources (read for this module; "decode.py" and "prefill.py" are
sgl-project/sglang python/sglang/srt/disaggregation/, decode.py as stored at the index's
version 0035ca42c2d615f77778ce3bf825d6ce6e089661 and the event loops quoted from v0.4.6 on):
1. The router sends every request to one prefill and one decode worker *at once*, each picked
   by its own policy (sgl-project/sglang@0105f2a3:sgl-router/src/routers/http/pd_router.rs,
   `select_pd_pair` and `execute_dual_dispatch_internal`: "Send both requests concurrently";
   without logprobs it streams the decode worker's response and only drains the prefill's).
   dstack's runs use `--policy round_robin` (dstackai/benchmarks@06c957ab:comparison/pd_ratio/
   README.md), so request k goes to prefill k mod P and decode k mod D (separate counters).
2. Both servers' front ends (HTTP, tokenization) run in parallel: the request reaches both
   schedulers `frontend_s` after it was sent (`Efficiency.request_overhead_s`, the profile's
   front-end latency, as in the aggregated simulator; sim/engine.py).
3. Pre-allocation gates the prefill. The decode worker's scheduler, at the top of each event
   loop iteration (`process_decode_queue` -> `DecodePreallocQueue.pop_preallocated`), reserves
   KV for the prompt, in FIFO order, once `input + num_reserved_decode_tokens` tokens are
   allocatable (decode.py: `required_tokens_for_request = origin_input_len +
   self.num_reserved_decode_tokens`; the queue `break`s at the first that does not fit), and
   sends the reserved indices to the prefill worker. The prefill worker moves a request from
   its bootstrap queue to its waiting queue only then (prefill.py `pop_bootstrapped`, at the
   top of its own iteration, which the prefill engine's step planning already is). SGLang runs
   the overlap loop by default, where an iteration waits for the step in flight, so the decode
   worker pre-allocates at the end of its step in flight (at once when idle).
   `num_reserved_decode_tokens` = 512 (python/sglang/srt/server_args.py default).
4. The prefill runs (its own chunked batches), then its KV moves over the link
   (cost/kvtransfer.py, queued FIFO on the decode worker's ingress link).
5. The decode worker sees the transfer done at the top of its next iteration
   (`DecodeTransferQueue.pop_transferred`, polled each iteration with the default
   `--disaggregation-decode-polling-interval 1`), and the first token, which the prefill
   sampled and sent in the metadata buffers (`_commit_transfer_to_req`:
   `req.output_ids.append(output_id)`), is streamed then, with no forward pass
   (`get_new_prebuilt_batch` / `process_batch_result_prebuilt`: "fake completed prefill").
   The request joins the running batch and decodes the other output tokens.
So TTFT = front end + wait for the decode worker's step in flight (pre-allocation) + the prefill
worker's queue and prefill + transfer + wait for the decode worker's step in flight (handoff).

Not modelled: the ZMQ messages between the workers (host-side, microseconds), the router's own
hop, `max_new_tokens` in the pre-allocation test and the request-slot limits of the decode pool.

Read again at the versions of dstack's runs (Sep 2025, `lmsysorg/sglang:latest`: SGLang 0.5.2,
on PyPI 2025-09-11, and sglang-router 0.1.9, 2025-08-07 to 2025-10-15; their sdists/wheels):
steps 1-5 hold there. Also there, not modelled: an iteration that builds the prebuilt batch runs
no decode forward (decode.py `get_next_disagg_decode_batch_to_run`), so the running batch skips
one scheduler iteration per handoff; `_allocatable_tokens` also holds back 512 tokens for every
running, transferring and waiting request (under 3 % of a TP2 H200 pool at 128 requests).
What does not add to a low-load TTFT or cap c128 there: the router's `max_concurrent_requests`
(64) builds a semaphore nothing acquires (server.rs `AppContext`), and without logprobs it awaits
only the decode server's response (pd_router.rs `execute_dual_dispatch`); the decode side asks
a prefill's bootstrap server once per address (common/conn.py `connection_pool`); PD keeps the
KV allocators' free slots sorted, so a prompt's KV is a few contiguous runs and NIXL gets about
2 x layers descriptors (nixl/conn.py `send_kvcache`); NIXL 0.5.0's UCX progress thread polls
with a 0 ms timeout (ai-dynamo/nixl@0.5.0 src/plugins/ucx/ucx_backend.cpp `progressFunc`,
`pthrDelay` default 0); the decode pool's request slots (model_runner.py: at least 2,048),
CUDA graphs (to 256 on H200) and KV (~2.7 M tokens per TP2 worker) bind nowhere near 128
requests; vLLM 0.10.1.1-0.10.2's client times TTFT to the first SSE message with `choices` of
/v1/completions (no chat template, so no reasoning channel) over max_concurrency connections.

The reserved KV is pinned in the decode pool from pre-allocation until the handoff, then the
request holds it like a cached prefix it found on admission (sim/disagg.py's accounting). The
whole fleet runs as one loop in time order (`SglangPd.run`), so each decision sees the workers'
states at its instant: events are arrivals, pre-allocation retries at a decode worker's step
end, and handoffs; prefill completions are read off the prefill engines as they advance.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tokenprobe.cost import Deployment, KvLink, kv_transfer_bytes
from tokenprobe.errors import ConfigError
from tokenprobe.records import RequestRecord
from tokenprobe.sim.engine import Engine
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import unserved_record
from tokenprobe.workload import RequestSpec

PD_HANDOFFS = ("sglang", "proxy")
"""sglang: this module; proxy: prefill first, then the least-loaded decode worker (vLLM's
disaggregated proxy; sim/disagg.py's own loop)."""
NUM_RESERVED_DECODE_TOKENS = 512  # sglang server_args.py `num_reserved_decode_tokens`

_ARRIVE, _RETRY, _LANDED, _HANDOFF = 0, 1, 2, 3


def check_handoff(name: str) -> str:
    """The handoff named `name`, or ConfigError naming `pd_handoff`."""
    if name not in PD_HANDOFFS:
        raise ConfigError("pd_handoff", name, f"one of {', '.join(PD_HANDOFFS)}")
    return name


def handoff_for(engine: str | None) -> str:
    """The handoff an engine runs: SGLang's own for SGLang, else the proxy's."""
    return "sglang" if engine and engine.lower().startswith("sglang") else "proxy"


@dataclass(slots=True)
class Handoff:
    """One request's way through the fleet (times in s, on the client's clock)."""

    prefill: int
    decode: int
    ready_s: float  # reached both schedulers (after the front ends)
    gate_s: float = math.nan  # the decode worker pre-allocated: the prefill may start
    reserved: int = 0  # blocks pinned on the decode worker
    prefill_done_s: float = math.nan
    link_wait_s: float = 0.0
    landed_s: float = math.nan  # its last KV byte reached the decode worker
    p_index: int = -1  # its index in the prefill engine's requests


@dataclass(slots=True)
class SglangPd:
    """The fleet's loop (module docstring). `p_engines`: the prefill workers; `decode`: the
    decode workers' engines and KV pools; `dep`: the decode workers' deployment (the KV bytes)."""

    p_engines: list[Engine]
    decode: list[tuple[Engine, BlockPool]]
    link: KvLink
    dep: Deployment
    frontend_s: float = 0.0
    reserved_tokens: int = NUM_RESERVED_DECODE_TOKENS
    handoffs: list[Handoff] = field(default_factory=list)
    _heap: list[tuple[float, int, int, int]] = field(default_factory=list)
    _order: int = 0
    _fifo: list[deque[int]] = field(default_factory=list)
    _retry_at: list[float] = field(default_factory=list)
    _pending: list[dict[int, int]] = field(default_factory=list)  # prefill index -> request
    _link_free: list[float] = field(default_factory=list)
    _held: list[int] = field(default_factory=list)  # reservations per decode worker
    _seen: list[int] = field(default_factory=list)  # requests each prefill engine was done with
    _specs: Sequence[RequestSpec] = ()

    def run(self, requests: Sequence[RequestSpec]) -> list[Handoff]:
        """Every request through pre-allocation, prefill and transfer, submitted to its decode
        worker; the engines are then finished by the caller. Returns each request's Handoff."""
        self._specs = requests
        n_p, n_d = len(self.p_engines), len(self.decode)
        self._fifo = [deque() for _ in range(n_d)]
        self._retry_at = [math.inf] * n_d
        self._pending = [{} for _ in range(n_p)]
        self._link_free = [0.0] * n_d
        self._held = [0] * n_d
        self._seen = [0] * n_p
        for k, spec in enumerate(requests):  # round robin on each side (module docstring, 1)
            ready = spec.arrival_s + self.frontend_s
            self.handoffs.append(Handoff(k % n_p, k % n_d, ready))
            self._push(ready, _ARRIVE, k)
        while True:
            if self._heap:
                t, kind, _, k = heapq.heappop(self._heap)
                self._advance(t)
                if kind == _ARRIVE:
                    self._fifo[self.handoffs[k].decode].append(k)
                    self._prealloc(self.handoffs[k].decode, t)
                elif kind == _RETRY:
                    if self._retry_at[k] == t:
                        self._retry_at[k] = math.inf
                        self._prealloc(k, t)
                elif kind == _LANDED:  # seen at the decode worker's next iteration
                    self._push(self._boundary(self.handoffs[k].decode, t), _HANDOFF, k)
                else:  # _HANDOFF: the iteration at `t` admits it (events at `t` applied),
                    d = self.handoffs[k].decode  # then it holds its KV as a found prefix
                    self.decode[d][0].run_until(math.nextafter(t, math.inf))
                    self._unreserve(k)
                    self._prealloc(d, t)
                continue
            nxt = min(e.next_event_s() for e in self.p_engines)
            if nxt == math.inf:
                break
            self._advance(math.nextafter(nxt, math.inf))
        return self.handoffs

    def _push(self, t_s: float, kind: int, k: int) -> None:
        self._order += 1
        heapq.heappush(self._heap, (t_s, kind, self._order, k))

    def _boundary(self, d: int, t_s: float) -> float:
        """When decode worker `d`'s scheduler next runs its queues: the end of its step in
        flight (the overlap loop waits for it), or now when it is idle. A running step's end
        is the last the ledger holds (Engine._commit records it when the step starts)."""
        engine = self.decode[d][0]
        return max(t_s, engine.ledger.step_end_s[-1]) if engine.busy else t_s

    def _advance(self, t_s: float) -> None:
        """Prefill workers to `t_s`; each prefill done by then has its KV sent (FIFO on the
        decode worker's link, in the order they finished) and its request submitted to its
        decode worker for when the KV lands; then the decode workers to `t_s`."""
        done: list[tuple[float, int]] = []
        for p, engine in enumerate(self.p_engines):
            engine.run_until(t_s)
            new = engine.done - self._seen[p]  # finished or rejected since the last look
            if not new:
                continue
            self._seen[p] = engine.done
            pending = self._pending[p]
            for i in list(pending):  # oldest first: where the ones done mostly are
                seq = engine.seqs[i]
                if seq is None:
                    continue
                if seq.finish_s is not None:
                    done.append((seq.finish_s, pending.pop(i)))
                    new -= 1
                elif seq.reject_reason is not None:  # rejected by the prefill: a failure
                    k = pending.pop(i)
                    self._unreserve(k)
                    self._retry(self.handoffs[k].decode, t_s)  # its memory is free again
                    new -= 1
                if not new:
                    break
        for c, k in sorted(done):
            self._send(k, c)
        for engine, _ in self.decode:
            engine.run_until(t_s)

    def _send(self, k: int, done_s: float) -> None:
        h, spec = self.handoffs[k], self._specs[k]
        h.prefill_done_s = done_s
        start = max(done_s, self._link_free[h.decode])
        landed = start + self.link.time_s(kv_transfer_bytes(self.dep, spec.input_tokens))
        self._link_free[h.decode] = landed
        h.link_wait_s, h.landed_s = start - done_s, landed
        engine, pool = self.decode[h.decode]
        # the prefill sampled the first token; the decode worker makes the others
        engine.submit(
            spec._replace(
                arrival_s=landed,
                output_tokens=max(1, spec.output_tokens - 1),
                prefix_tokens=spec.input_tokens,
                prefix_group=_group(k),
            )
        )
        if not h.reserved:  # no reservation (it never fitted): cached for the handoff
            blocks = pool.shareable_blocks(spec.input_tokens, spec.input_tokens)
            if blocks and pool.can_allocate(blocks):
                pool.allocate(blocks)
                if pool.publish_prefix(_group(k), blocks):
                    self._reserve(k, blocks)
                else:
                    pool.free(blocks)
        self._push(landed, _LANDED, k)

    def _prealloc(self, d: int, t_s: float) -> None:
        """Decode worker `d` pre-allocates from its FIFO at its iteration boundary (module
        docstring, 3): each request that fits starts on its prefill worker now."""
        fifo = self._fifo[d]
        if not fifo:
            return
        boundary = self._boundary(d, t_s)
        if boundary > t_s:
            self._retry(d, boundary)
            return
        engine, pool = self.decode[d]
        while fifo:
            k = fifo[0]
            spec, h = self._specs[k], self.handoffs[k]
            blocks = pool.shareable_blocks(spec.input_tokens, spec.input_tokens)
            need = pool.seq_blocks(spec.input_tokens + self.reserved_tokens)
            if need > pool.capacity_blocks or not blocks:
                pass  # never fits (the decode worker rejects it) or nothing to hold: go on
            elif pool.can_allocate(need):
                pool.allocate(blocks)
                pool.publish_prefix(_group(k), blocks)
                self._reserve(k, blocks)
            elif engine.busy or engine.outstanding or self._held[d]:
                # waits for memory: retried at the end of the next step (the one ending now
                # applied first) or at a handoff
                engine.run_until(math.nextafter(t_s, math.inf))
                if engine.busy:
                    self._retry(d, engine.ledger.step_end_s[-1])
                return
            fifo.popleft()
            h.gate_s = t_s
            p = h.prefill
            self.p_engines[p].submit(spec._replace(arrival_s=t_s, output_tokens=1))
            h.p_index = len(self.p_engines[p].requests) - 1
            self._pending[p][h.p_index] = k

    def _reserve(self, k: int, blocks: int) -> None:
        h = self.handoffs[k]
        h.reserved = blocks
        self._held[h.decode] += 1

    def _unreserve(self, k: int) -> None:
        h = self.handoffs[k]
        if h.reserved:
            self.decode[h.decode][1].release_prefix(_group(k))
            h.reserved = 0
            self._held[h.decode] -= 1

    def _retry(self, d: int, t_s: float) -> None:
        if t_s < self._retry_at[d]:
            self._retry_at[d] = t_s
            self._push(t_s, _RETRY, d)


def _group(k: int) -> int:
    """Request k's prefix group on its decode worker, apart from the workload's groups."""
    return -(k + 1)


def client_records(
    handoffs: Sequence[Handoff],
    specs: Sequence[RequestSpec],
    prefill: Sequence[Sequence[RequestRecord]],
    decode: dict[str, RequestRecord],
    block_size: int,
) -> tuple[list[RequestRecord], int]:
    """Each request as the client saw it (module docstring): sent at its arrival, its first
    token at the decode worker's iteration that took it over (the decode record's first
    scheduling), the other tokens from its decode steps; the waits of each stage in `extra`.
    `prefill[p]`: prefill worker p's records in submission order; `decode`: by request id.
    Also returns how many transfers were recomputed (their blocks evicted before admission)."""
    out: list[RequestRecord] = []
    recomputed = 0
    for h, spec in zip(handoffs, specs, strict=True):
        pre = prefill[h.prefill][h.p_index] if h.p_index >= 0 else None
        dec = decode.get(spec.request_id)
        if pre is None or dec is None or dec.queue_s is None:  # failed before the decode
            rec = pre or _never_started(spec)
            out.append(replace(rec, scheduled_s=spec.arrival_s, sent_s=spec.arrival_s))
            continue
        first = dec.sent_s + dec.queue_s  # the prebuilt iteration streams the first token
        if float(dec.extra.get("server_cached_tokens", 0.0)) < (
            (spec.input_tokens - 1) // block_size * block_size
        ):
            recomputed += 1
        one = spec.output_tokens <= 1  # the prefill's token was all: the decode's is not sent
        times = [first] + ([] if one else list(dec.token_times_s)) if dec.token_times_s else []
        pre_first = pre.sent_s + (pre.queue_s or 0.0)
        out.append(
            replace(
                dec,
                scheduled_s=spec.arrival_s,
                sent_s=spec.arrival_s,
                first_token_s=first,
                finish_s=first if one else dec.finish_s,
                output_tokens=1 if one else dec.output_tokens + 1,
                token_times_s=times,
                queue_s=pre_first - h.ready_s,
                extra={
                    "energy_j": float(pre.extra.get("energy_j", 0.0))
                    + float(dec.extra.get("energy_j", 0.0)),
                    "prefill_worker": float(h.prefill),
                    "decode_worker": float(h.decode),
                    "prealloc_wait_s": h.gate_s - h.ready_s,
                    "prefill_done_s": h.prefill_done_s,
                    "kv_link_wait_s": h.link_wait_s,
                    "kv_transfer_s": h.landed_s - h.prefill_done_s,
                    "handoff_wait_s": first - h.landed_s,
                    "preemptions": float(pre.extra.get("preemptions", 0.0))
                    + float(dec.extra.get("preemptions", 0.0)),
                },
            )
        )
    out.sort(key=lambda r: r.scheduled_s)
    return out, recomputed


def _never_started(spec: RequestSpec) -> RequestRecord:
    return unserved_record(
        spec, spec.arrival_s, "not_served", "never pre-allocated on its decode worker"
    )
