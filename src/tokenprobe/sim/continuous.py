"""Continuous batching with chunked prefill, paged KV and preemption, after vLLM v1's scheduler.

Per step (vllm/v1/core/sched/scheduler.py, `schedule`), with a budget of max_num_batched_tokens:
1. Running requests first, in admission order: each decoding sequence gets one token, a partly
   prefilled one the next chunk of its prompt. A sequence that needs a new KV block and finds none
   preempts the *most recently admitted* running request (possibly itself): its blocks are freed
   and it goes back to the *front* of the waiting queue, to recompute prompt + generated tokens
   (with prefix caching, vLLM v1's default, only those whose blocks other requests have taken
   from the free queue meanwhile: `BlockPool.free(retain_seq=...)`, `reclaim`).
2. Only if nothing was preempted: waiting requests in FIFO order while the budget, max_num_seqs
   and free blocks allow (prefix-cache hits skip their cached blocks). Without chunked prefill a
   prompt that does not fit in the remaining budget waits (a recomputation after preemption is
   still chunked so that it can always resume).

Speed: decoding sequences are never visited one by one. Sequence r that started decoding at step
s with prompt P (tokens in KV) has P + (t - s) tokens in KV before step t, so
- the decode context of step t is sum(P - s) + n_decode * t (two running sums), and
- it needs a new block at step t iff (P + t - s) % block_size == 0, i.e. t = s - P (mod block):
  a count per residue class gives the blocks a step needs in O(1);
- it finishes at step s + remaining - 1: a heap keyed by that step.
With `capacity_policy="guaranteed_no_evict"` (TensorRT-LLM's GuaranteedNoEvictScheduler,
cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp) a request is admitted only if blocks for its
whole length (prompt + output - 1 tokens) are free, and it takes them all at admission: prompt
chunks and decode tokens then never allocate, so nothing is preempted.

The one simplification against vLLM: a step's new decode blocks are taken before the chunks of
partly prefilled requests, which vLLM interleaves by admission order (the latter are nearly always
the newest admissions, so the order is the same in practice).
"""

from __future__ import annotations

import heapq
from collections import deque

from tokenprobe.sim.base import GUARANTEED_NO_EVICT, SchedulerConfig, StepPlan, never_fits_reason
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Ledger, Seq

_new_plan = tuple.__new__


class ContinuousScheduler:
    """vLLM-v1-like continuous batching (see the module docstring)."""

    def __init__(self, config: SchedulerConfig, pool: BlockPool, ledger: Ledger) -> None:
        self.config = config
        self.pool = pool
        self.ledger = ledger
        self.preemptions = 0
        self.waiting: deque[Seq] = deque()
        self.running: dict[int, Seq] = {}  # admission order: popitem() gives the newest
        self.prefilling: dict[int, Seq] = {}  # running and not done with their prompt
        self._n_dec = 0
        self._ctx_offset = 0  # sum over decoding seqs of (target - dec_start)
        self._phase = [0] * config.block_size
        self._finish_heap: list[tuple[int, int, int]] = []  # (finish step, idx, version)
        self._chunks: list[tuple[Seq, int]] = []  # this step's prefill chunks
        self._decode_allocated = False
        # decode blocks by the residue count (`_allocate_decode` not overridden, as by
        # sim/specdecode.py's): plan may answer a step that needs none without the call
        self._phase_rule = type(self)._allocate_decode is ContinuousScheduler._allocate_decode
        self._draft_rows = 0  # draft tokens verified this step (sim/specdecode.py; 0 here)
        # blocks for a request's whole length at admission (TensorRT-LLM guaranteed-no-evict)
        self._reserve = config.capacity_policy == GUARANTEED_NO_EVICT
        self.emitted_tokens = 0
        self.wake_s: float | None = None
        self._window = config.batch_window_s
        self._released_s = -1.0  # when a batch window last let its requests in

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    def add(self, seq: Seq, now_s: float) -> str | None:
        reason = never_fits_reason(seq, self.pool)
        budget = self.config.max_num_batched_tokens
        if reason is None and not self.config.chunked_prefill and seq.input_tokens > budget:
            reason = (
                f"prompt of {seq.input_tokens} tokens exceeds max_num_batched_tokens={budget} "
                "and chunked prefill is off"
            )
        if reason is None:
            seq.ready_s = now_s
            self.waiting.append(seq)
        return reason

    # ------------------------------------------------------------ planning

    def plan(self, step: int, now_s: float) -> StepPlan | None:
        if self._chunks:  # (empty after every completed step: no new list per step)
            self._chunks = []
        phases = self._phase
        if self._phase_rule and not (self._n_dec and phases[step % len(phases)]):
            self._decode_allocated, preempted = True, False  # no block due: _allocate_decode's
        else:  # answer without its call (most steps)
            preempted = self._allocate_decode(step)
        if not (preempted or self.prefilling or self.waiting):  # decode only: most steps
            self.wake_s = None
            n = self._n_dec  # (the tuple built without the NamedTuple's Python __new__)
            return _new_plan(StepPlan, (0, 0.0, 0, n, self._ctx_offset + n * step)) if n else None
        # preemption frees budget
        budget = self.config.max_num_batched_tokens - self._n_dec - self._draft_rows
        if self.prefilling:
            budget, preempted_now = self._schedule_prefills(step, budget)
            preempted = preempted or preempted_now
        self.wake_s = None
        if not preempted:
            if (
                self.waiting
                and len(self.running) < self.config.max_num_seqs
                and not (self._window and self._hold(now_s, budget))
            ):
                self._admit(now_s, budget)
        elif self._n_dec == 0 and not self._chunks:
            # everything running was preempted: vLLM's next schedule() admits from the queue
            self._admit(now_s, self.config.max_num_batched_tokens)
        if not self._chunks:
            if not self._n_dec:
                return None
            n = self._n_dec
            return StepPlan(0, 0.0, 0, n, self._ctx_offset + n * step)
        return self._shape(step)

    def _hold(self, now_s: float, budget: int) -> bool:
        """Batch window: hold admissions while the oldest waiting request is younger than the
        window and the waiting ones do not fill the batch (free slots or token budget). Once a
        window is released, the requests that were waiting then are not held again."""
        head = self.waiting[0]
        if head.preemptions or head.ready_s <= self._released_s:
            return False
        deadline = head.ready_s + self._window
        if now_s >= deadline or self._fills(budget):
            self._released_s = now_s
            return False
        self.wake_s = deadline
        return True

    def _fills(self, budget: int) -> bool:
        slots = self.config.max_num_seqs - len(self.running)
        tokens = 0
        for n, seq in enumerate(self.waiting, 1):
            tokens += seq.target
            if n >= slots or tokens >= budget:
                return True
        return False

    def _allocate_decode(self, step: int) -> bool:
        """Blocks for this step's decode tokens; preempt the newest running requests if short."""
        phase = step % len(self._phase)
        need = self._phase[phase] if self._n_dec else 0
        if need == 0:
            self._decode_allocated = True
            return False
        self._decode_allocated = False
        preempted = False
        while need > self.pool.free_blocks:
            victim = self._newest_running()
            if (
                victim.dec_start >= 0
                and (victim.dec_start - victim.target) % len(self._phase) == phase
            ):
                need -= 1
            self._preempt(victim, step)
            preempted = True
        self.pool.allocate(need)
        self._decode_allocated = True
        return preempted

    def _schedule_prefills(self, step: int, budget: int) -> tuple[int, bool]:
        """Next chunks of the running requests that are still prefilling, in admission order."""
        preempted = False
        for seq in list(self.prefilling.values()):
            if budget <= 0:
                break
            if seq.idx not in self.prefilling:  # preempted by an earlier one in this loop
                continue
            n = min(seq.target - seq.computed, budget)
            if not self._reserve_chunk(seq, n, step):
                preempted = True
                continue
            self._chunks.append((seq, n))
            budget -= n
        return budget, preempted

    def _reserve_chunk(self, seq: Seq, n: int, step: int) -> bool:
        """Blocks for `n` more prompt tokens of a running seq, preempting the newest if needed."""
        if self._reserve:
            return True  # taken at admission
        need = self.pool.seq_blocks(seq.computed + n) - seq.shared_blocks
        return self._take(seq, need - seq.own_blocks, step)

    def _take(self, seq: Seq, need: int, step: int) -> bool:
        """`need` free blocks for `seq`, preempting the newest running requests; False when
        `seq` itself had to go."""
        while need > self.pool.free_blocks:
            victim = self._newest_running()
            self._preempt(victim, step)
            if victim is seq:
                return False
        self.pool.allocate(need)
        seq.own_blocks += need
        return True

    def _admit(self, now_s: float, budget: int) -> None:
        """Waiting requests, FIFO, while budget, max_num_seqs and free blocks allow."""
        cfg, pool = self.config, self.pool
        bs = pool.block_size
        while self.waiting and budget > 0 and len(self.running) < cfg.max_num_seqs:
            seq = self.waiting[0]
            spec = seq.spec
            shared = 0
            if pool.prefix_caching and spec.prefix_tokens:
                shareable = pool.shareable_blocks(spec.prefix_tokens, seq.target)
                shared = pool.acquire_prefix(spec.prefix_group, shareable)
            hits = 0  # a preempted request's own blocks still cached (prefix caching)
            if seq.preemptions and pool.prefix_caching:
                hits = 0 if shared else min(pool.retained(seq.idx), (seq.target - 1) // bs)
            cached_tokens = (shared + hits) * bs
            n = seq.target - cached_tokens
            chunked = cfg.chunked_prefill or seq.preemptions > 0
            if n > budget and not chunked:
                self._undo_prefix(spec.prefix_group, shared)
                break
            n = min(n, budget)
            held = seq.input_tokens + seq.output_tokens - 1 if self._reserve else cached_tokens + n
            need = pool.seq_blocks(held) - shared - hits
            # the hits leave the free queue too
            if need + hits > pool.free_blocks or not self._admissible(seq, cached_tokens, n):
                self._undo_prefix(spec.prefix_group, shared)
                break
            self.waiting.popleft()
            if seq.preemptions:
                pool.reclaim(seq.idx, hits)
            pool.allocate(need)
            seq.own_blocks, seq.shared_blocks, seq.computed = need + hits, shared, cached_tokens
            if seq.cached_tokens < 0:
                seq.cached_tokens = cached_tokens
            if seq.first_sched_s is None:
                seq.first_sched_s = now_s
            self.running[seq.idx] = seq
            self.prefilling[seq.idx] = seq
            self._chunks.append((seq, n))
            budget -= n

    def _admissible(self, seq: Seq, cached_tokens: int, n: int) -> bool:  # noqa: ARG002
        """A subclass's admission rule beyond free blocks and budget (SGLang's KV reservation,
        sim/sglang_scheduler.py), asked once the blocks are known to be free; True admits."""
        return True

    def _undo_prefix(self, group: int, shared: int) -> None:
        if shared:
            self.pool.release_prefix(group)

    def _shape(self, step: int) -> StepPlan:
        prefill_tokens = 0
        pairs = 0.0
        for seq, n in self._chunks:
            prefill_tokens += n
            pairs += n * (seq.computed + (n + 1) / 2)
        ctx = self._ctx_offset + self._n_dec * step  # StepPlan's fields, in order:
        return _new_plan(StepPlan, (prefill_tokens, pairs, len(self._chunks), self._n_dec, ctx))

    # ------------------------------------------------------------ preemption

    def _newest_running(self) -> Seq:
        return next(reversed(self.running.values()))

    def _preempt(self, seq: Seq, step: int) -> None:
        """Free everything `seq` holds and put it at the front of the waiting queue (recompute)."""
        del self.running[seq.idx]
        computed = seq.computed  # tokens whose KV is written
        if seq.dec_start >= 0:
            done_steps = step - seq.dec_start  # decode steps finished: dec_start .. step-1
            computed = seq.target + done_steps
            kv = computed + (1 if self._decode_allocated else 0)
            seq.own_blocks = self.pool.seq_blocks(kv) - seq.shared_blocks
            seq.segments.append((seq.seg_start, step - 1))
            seq.energy_j += self.ledger.range_j(seq.dec_start, step - 1)
            seq.generated += done_steps
            self._stop_decoding(seq)
        else:
            self.prefilling.pop(seq.idx, None)
            self._chunks = [(s, n) for s, n in self._chunks if s is not seq]
        # vLLM v1 with prefix caching keeps the full computed blocks findable (kv.py)
        retained = 0 if seq.shared_blocks else computed // self.pool.block_size
        self.pool.free(seq.own_blocks, seq.idx, retained)
        if seq.shared_blocks:
            self.pool.release_prefix(seq.spec.prefix_group)
        seq.own_blocks = seq.shared_blocks = seq.computed = 0
        seq.target = seq.input_tokens + seq.generated
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)

    def _stop_decoding(self, seq: Seq) -> None:
        self._n_dec -= 1
        self._ctx_offset -= seq.target - seq.dec_start
        if not self._reserve:
            self._phase[(seq.dec_start - seq.target) % len(self._phase)] -= 1
        seq.dec_start = -1
        seq.version += 1  # its finish-heap entry is now stale

    # ------------------------------------------------------------ completion

    def complete(self, step: int, end_s: float) -> list[Seq]:
        finished: list[Seq] = []
        self.emitted_tokens = self._n_dec  # one token per decoding sequence, plus each prompt
        if self._chunks:  # that completes below
            self._complete_chunks(step, end_s, finished)
        heap = self._finish_heap
        if not heap or heap[0][0] > step:  # no decode ends in this step: most steps
            return finished
        while heap and heap[0][0] <= step:  # stale entries of preempted seqs may lag behind
            _, idx, version = heapq.heappop(heap)
            live = self.running.get(idx)
            if live is not None and live.version == version:
                self._finish_decoding(live, step, end_s)
                finished.append(live)
        return finished

    def _complete_chunks(self, step: int, end_s: float, finished: list[Seq]) -> None:
        per_token_j = self.ledger.j_per_token(step)
        for seq, n in self._chunks:
            seq.computed += n
            seq.energy_j += per_token_j * n
            if seq.computed == seq.target:
                self._prefill_done(seq, step, end_s, finished)
        self._chunks = []

    def _prefill_done(self, seq: Seq, step: int, end_s: float, finished: list[Seq]) -> None:
        del self.prefilling[seq.idx]
        seq.generated += 1  # the step that completes a prompt samples one token
        self.emitted_tokens += 1
        seq.seg_start = step
        if seq.first_token_s is None:
            seq.first_token_s = end_s
        self._publish_prefix(seq)
        if seq.generated >= seq.spec.output_tokens:
            seq.segments.append((step, step))
            self._release(seq, self.pool.seq_blocks(seq.target))
            seq.finish_s = end_s
            finished.append(seq)
            return
        self._start_decoding(seq, step + 1)

    def _start_decoding(self, seq: Seq, first_step: int) -> None:
        """`seq` (KV of `target` tokens) decodes one token a step from `first_step` on."""
        seq.dec_start = first_step
        self._n_dec += 1
        self._ctx_offset += seq.target - seq.dec_start
        if not self._reserve:  # reserved requests need no block as they decode
            self._phase[(seq.dec_start - seq.target) % len(self._phase)] += 1
        last = seq.dec_start + (seq.spec.output_tokens - seq.generated) - 1
        heapq.heappush(self._finish_heap, (last, seq.idx, seq.version))

    def _publish_prefix(self, seq: Seq) -> None:
        pool, req = self.pool, seq.spec
        if not pool.prefix_caching or seq.shared_blocks or not req.prefix_tokens:
            return
        blocks = pool.shareable_blocks(req.prefix_tokens, req.input_tokens)
        if blocks and pool.publish_prefix(req.prefix_group, blocks):
            seq.own_blocks -= blocks
            seq.shared_blocks = blocks

    def _finish_decoding(self, seq: Seq, step: int, end_s: float) -> None:
        seq.segments.append((seq.seg_start, step))
        seq.energy_j += self.ledger.range_j(seq.dec_start, step)
        kv = seq.target + (step - seq.dec_start + 1)
        seq.generated += step - seq.dec_start + 1
        self._stop_decoding(seq)
        self._release(seq, self.pool.seq_blocks(kv))
        seq.finish_s = end_s

    def _release(self, seq: Seq, total_blocks: int) -> None:
        """Free what `seq` holds: `total_blocks` of KV written, or its reservation if larger."""
        del self.running[seq.idx]
        if self._reserve:
            total_blocks = max(total_blocks, seq.own_blocks + seq.shared_blocks)
        self.pool.free(total_blocks - seq.shared_blocks)
        if seq.shared_blocks:
            self.pool.release_prefix(seq.spec.prefix_group)
        seq.own_blocks = seq.shared_blocks = 0
