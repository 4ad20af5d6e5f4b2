"""SGLang's scheduler: prefill-first batches, admission by a KV reservation, retraction.

After SGLang 0.4-0.5 (github:sgl-project/sglang, read at d51c1c21:
python/sglang/srt/managers/scheduler.py `get_next_batch_to_run`, `get_new_batch_prefill`,
`update_running_batch`; schedule_policy.py `PrefillAdder`; schedule_batch.py `retract_decode`;
global_config.py and server_args.py for the constants below):

- Prefill first. A step is a prefill batch whenever requests wait (or a chunked prompt is
  unfinished) and the running batch is not full, else a decode step of every running request.
  A prefill batch does not decode: the running requests skip that step. With
  `enable_mixed_chunk` (`--enable-mixed-chunk`) it carries every decode too (mix_with_running)
  and its token budgets shrink by one per decoding request.
- A prefill batch (PrefillAdder) takes waiting requests first come first served (the default
  `--schedule-policy fcfs`) while (a) its prompt tokens stay within `max_prefill_tokens`
  (16384; the first request may exceed it), (b) the chunk budget `chunked_prefill_size` (the
  simulator's max_num_batched_tokens) lasts: the request that crosses it is cut to what is left
  and continues as *the* chunked request at the head of the next prefill batch
  (add_chunked_req), (c) running requests stay under max_running_requests, and (d) the KV
  reservation holds. With the radix cache on (SGLang's default) that is
      rem_total = free − Σ_running ratio · min(max_new − out, 4096)
                       − Σ_admitted (extend + min(max_new − out, 4096)),
  and a request is admitted only if extend + min(max_new − out, 4096) < rem_total
  (CLIP_MAX_NEW_TOKENS 4096; extend: the prompt tokens it must compute, out: output tokens it
  already has, from before a retraction; evictable radix-cache tokens count as free, as cached
  blocks are free here, sim/kv.py); (a) stops at the first request whose extend is >= the
  prompt tokens left. With the radix cache off and `ignore_eos` requests
  (sglang.bench_serving sends ignore_eos unless told not to; a simulated request always runs to
  its output length) it checks instead that the pool holds every running and admitted request
  at its peak (`add_one_req_ignore_eos`): sorted by tokens left L_i, with KV O_i, each i needs
  free − input + Σ_{j<i} O_j − L_i · (n − i) > IGNORE_EOS_RESERVE_TOKENS · (n − i).
  A failed check (NO_TOKEN) marks the batch full: no prefill is tried again until the running
  batch shrinks (a request finishes or is retracted).
- new_token_ratio (global_config.py): starts at 0.7 x schedule_conservativeness (at most 1),
  falls by (init − min) / 600 after each decode step that needed no retraction, down to
  min = init x 0.14 (0.098 by default), and returns to init whenever the server is idle.
- Retraction (update_running_batch, retract_decode): before a decode step, if the pool cannot
  take one more token for every running request, requests are retracted, the one with the
  fewest output tokens first and of those the longest prompt, until it can; they go to the back
  of the waiting queue and recompute prompt + output when readmitted (with prefix caching their
  computed blocks are found again, as the radix cache keeps the prompt). The ratio then becomes
  (Σ out + 20 · n) / (Σ max_new + 1) over the n requests left (retract_decode_steps 20), at
  most 1.
- KV pages: SGLang's page_size is 1 (server_args.py, 0.4-0.5), the sglang preset's block_size.

Decode bookkeeping is ContinuousScheduler's (running sums, the finish heap) on a *decode clock*:
the count of steps that decoded (`_dsteps` lists their step indices), since a prefill-only step
advances no decoding request. A request's token steps are its decode clocks' steps plus its
prefill step; they are cut into segments at the prefill-only steps between them (`_held`) when it
finishes or is retracted, so its token times and energy skip those steps. O(1) per step.

- `--schedule-policy lpm` (SGLang 0.4's default, server_args.py `schedule_policy: str = "lpm"`;
  `SchedulerConfig.schedule_policy`, set by sim/sglang_dp.py for 0.4 rows): before a prefill
  batch takes waiting requests, schedule_policy.py `calc_priority` (read at
  sgl-project/sglang@00550cd11b35def9d584bf761a1e32729c20a21d, a later version: no 0.4 copy
  of the file is stored, and the rule is taken as unchanged since 0.4) sorts the queue,
  stably, by the tokens each request finds cached (longest first: a request of a cached
  prefix group, a retracted request its own computed tokens), unless more than 128 wait
  (`_determine_active_policy`: fcfs then, the queue keeping its order); in-batch prefix
  caching puts last a request that finds at most 32 tokens cached but shares >= 32 with a
  waiting request ahead of it (its prefix group's, here), so that one computes the prefix for
  both. With random prompts (no shared prefix beyond BOS) only retracted requests move.

Not modelled: the other schedule policies (dfs-weight, random), priorities, the hierarchical
cache, DP attention (sim/sglang_dp.py runs a scheduler a rank), and the overlap scheduler of a
DP rank (a plain TP server's: sim/sglang_overlap.py; the cost model prices host time per step,
`Efficiency.step_overhead_s`). A chunked
request's next chunk is not checked against the reservation (as in add_chunked_req); if its
blocks are short, decoding requests are retracted for it.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right

from tokenprobe.sim.base import LPM, SchedulerConfig, StepPlan
from tokenprobe.sim.continuous import ContinuousScheduler
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Ledger, Seq

# global_config.py GlobalConfig (env SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
# SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS) and retract_decode_steps
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
RETRACT_DECODE_STEPS = 20
# schedule_policy.py: CLIP_MAX_NEW_TOKENS_ESTIMATION, IGNORE_EOS_RESERVE_TOKENS
CLIP_MAX_NEW_TOKENS = 4096
IGNORE_EOS_RESERVE_TOKENS = 1
# schedule_policy.py, lpm: the queue length beyond which it falls back to fcfs, and the
# in-batch prefix caching thresholds (IN_BATCH_PREFIX_CACHING_CHECK/DEPRIORITIZE_THRESHOLD)
LPM_MAX_QUEUE = 128
IN_BATCH_CHECK_TOKENS = 32
IN_BATCH_DEPRIORITIZE_TOKENS = 32


class SglangScheduler(ContinuousScheduler):
    """SGLang-like continuous batching (see the module docstring)."""

    def __init__(self, config: SchedulerConfig, pool: BlockPool, ledger: Ledger) -> None:
        super().__init__(config, pool, ledger)
        self.init_ratio = min(INIT_NEW_TOKEN_RATIO * config.schedule_conservativeness, 1.0)
        self.min_ratio = min(self.init_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.ratio_decay = (self.init_ratio - self.min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.new_token_ratio = self.init_ratio
        self.batch_is_full = False
        self.prefill_steps = 0  # prefill batches run (mixed ones included)
        # decoding seq idx -> output − generated + dec_start: its tokens left at step t are this
        # minus t, so their sum is one running sum (`_left_sum`) less n_dec x t
        self._left_of: dict[int, int] = {}
        self._left_sum = 0
        self._clipped = 0  # decoding seqs whose output exceeds the 4096 clip: summed one by one
        self._dsteps: list[int] = []  # decode clock -> the step that ran it
        self._held: list[int] = []  # prefill-only steps while requests were decoding
        self._clock = 0  # the decode clock of the step being planned (steps that decoded before)
        self._prefill_only = False
        # the PrefillAdder budgets of the prefill batch being planned (tokens)
        self._rem_total = 0.0
        self._cur_rem = 0
        self._rem_input = 0
        self._stop = False

    def add(self, seq: Seq, now_s: float) -> str | None:
        # even alone, a request is admitted only below the whole cache (module docstring)
        capacity = self.pool.capacity_tokens
        out = seq.output_tokens if self._exact else min(seq.output_tokens, CLIP_MAX_NEW_TOKENS)
        reserve = IGNORE_EOS_RESERVE_TOKENS if self._exact else 0
        if seq.input_tokens + out + reserve >= capacity:
            return (
                f"needs {seq.input_tokens} prompt + {out} output tokens of KV at admission, "
                f"SGLang admits only less than the whole cache ({capacity} tokens)"
            )
        return super().add(seq, now_s)

    @property
    def _exact(self) -> bool:
        """Radix cache off: the exact peak check of ignore_eos requests (module docstring)."""
        return not self.pool.prefix_caching

    # ------------------------------------------------------------ planning

    def plan(self, step: int, now_s: float) -> StepPlan | None:
        self._chunks = []
        self._clock = clock = len(self._dsteps)
        self._decode_allocated = False
        self._prefill_only = False
        self.wake_s = None
        if not self.running:
            self.batch_is_full = False
        mixed = False
        if self._wants_prefill(now_s):
            mixed = self.config.enable_mixed_chunk and self._n_dec > 0
            if mixed:  # the decodes ride along: their tokens first
                self._decode_memory(decay=False)
            self._prefill_round(step, now_s, mixed)
        if self._chunks:
            self.prefill_steps += 1
            plan = self._shape(step)
            if mixed and self._n_dec:
                self._dsteps.append(step)
                return plan._replace(decode_context_tokens=self._ctx_offset + self._n_dec * clock)
            if self._n_dec:
                self._held.append(step)
            self._prefill_only = True
            return plan._replace(decode_seqs=0, decode_context_tokens=0)
        if not self._n_dec:
            self.new_token_ratio = self.init_ratio  # idle: SGLang re-initialises the ratio
            return None
        if not mixed:
            self._decode_memory(decay=True)
        self._dsteps.append(step)
        n = self._n_dec
        return StepPlan(0, 0.0, 0, n, self._ctx_offset + n * clock)

    def _wants_prefill(self, now_s: float) -> bool:
        if self.prefilling:  # an unfinished chunked prompt runs before anything else
            return True
        if not self.waiting or self.batch_is_full:
            return False
        if len(self.running) >= self.config.max_num_seqs:
            self.batch_is_full = True
            return False
        budget = self.config.max_num_batched_tokens
        return not (self._window and self._hold(now_s, budget))

    def _prefill_round(self, step: int, now_s: float, mixed: bool) -> None:
        """PrefillAdder: the chunked request's next chunk, then waiting requests (FIFO)."""
        cfg = self.config
        # mixed decodes take a token of each budget (their KV is allocated: not free any more)
        riders = self._n_dec if mixed else 0
        free = self.pool.free_blocks * self.pool.block_size
        self._rem_total = free - self._running_reservation()
        self._cur_rem = free
        self._rem_input = cfg.max_prefill_tokens - riders
        self._stop = False
        chunk = cfg.max_num_batched_tokens - riders
        if chunk <= 0:
            return
        if self.prefilling:
            chunk, _ = self._schedule_prefills(step, chunk)
            for seq, n in self._chunks:
                done = seq.computed + n == seq.target
                self._charge(n, self._max_new(seq) if done else 0)
        if self.waiting and not self.batch_is_full and chunk > 0:
            if cfg.schedule_policy == LPM:
                self._lpm_order()
            self._admit(now_s, chunk)
            if len(self.running) >= cfg.max_num_seqs:
                self.batch_is_full = True

    def _lpm_order(self) -> None:
        """schedule_policy.py `calc_priority` under lpm (module docstring): at most
        LPM_MAX_QUEUE waiting, a stable sort by cached prefix, longest first, with the
        requests whose prefix only another waiting request will cache put last."""
        waiting, pool = self.waiting, self.pool
        if len(waiting) > LPM_MAX_QUEUE or not pool.prefix_caching:
            return  # SGLang skips the matching: the queue keeps its order
        if len(waiting) < 2:
            return  # nothing to reorder (a sort of one keeps it; most admissions under load)
        bs = pool.block_size
        claimed: set[int] = set()  # prefix groups of waiting requests seen (the simulated tree)
        keys: list[float] = []
        for seq in waiting:
            spec = seq.spec
            shareable = pool.shareable_blocks(spec.prefix_tokens, seq.target)
            cached = pool.cached_prefix_blocks(spec.prefix_group, shareable) * bs
            if seq.preemptions:  # a retracted request finds its own computed tokens again
                cached = max(cached, min(pool.retained(seq.idx), (seq.target - 1) // bs) * bs)
            late = False
            if cached <= IN_BATCH_CHECK_TOKENS and spec.prefix_tokens:
                late = spec.prefix_group in claimed
                late = late and spec.prefix_tokens >= IN_BATCH_DEPRIORITIZE_TOKENS
                if not late:
                    claimed.add(spec.prefix_group)
            keys.append(math.inf if late else -cached)
        order = sorted(range(len(waiting)), key=keys.__getitem__)
        ordered = [waiting[i] for i in order]
        waiting.clear()
        waiting.extend(ordered)

    def _running_reservation(self) -> float:
        """ratio x Σ min(tokens left, 4096) over the decoding requests."""
        clock = self._clock
        if not self._clipped:
            return self.new_token_ratio * (self._left_sum - self._n_dec * clock)
        left = sum(min(v - clock, CLIP_MAX_NEW_TOKENS) for v in self._left_of.values())
        return self.new_token_ratio * left

    def _charge(self, n: int, max_new: int) -> None:
        self._rem_total -= n + max_new
        self._cur_rem -= n
        self._rem_input -= n

    def _admissible(self, seq: Seq, cached_tokens: int, n: int) -> bool:
        """PrefillAdder.add_one_req / add_one_req_ignore_eos (module docstring); on admission
        the budgets are charged and `_stop` set when budget_state() would end the batch."""
        if self._stop:
            return False
        extend = seq.target - cached_tokens
        max_new = self._max_new(seq)
        if self._exact:
            if not self._fits_at_peak(seq, extend):
                return self._no_token()
        else:
            if extend + max_new >= self._rem_total:
                return self._no_token()
            if extend >= self._rem_input and self._chunks:
                self._stop = True
                return False
        self._charge(n, 0 if n < extend else max_new)
        if self._rem_total <= 0 or self._cur_rem <= 0:
            self.batch_is_full = True
            self._stop = True
        elif self._rem_input <= 0:
            self._stop = True
        return True

    @staticmethod
    def _max_new(seq: Seq) -> int:
        """What a request's admission reserves for its output: min(max_new − out, 4096)."""
        return min(seq.output_tokens - seq.generated, CLIP_MAX_NEW_TOKENS)

    def _no_token(self) -> bool:
        self.batch_is_full = True
        self._stop = True
        return False

    def _fits_at_peak(self, seq: Seq, extend: int) -> bool:
        """add_one_req_ignore_eos: every running and admitted request and `seq` fit at their
        peak, finishing shortest-remaining first."""
        if extend > min(self._cur_rem, self._rem_total):
            return False
        clock = self._clock
        states = []  # (tokens left, tokens in KV)
        for idx, v in self._left_of.items():
            states.append((v - clock, self.running[idx].input_tokens + self._out(idx)))
        for other, _ in self._chunks:
            states.append((other.output_tokens - other.generated, other.target))
        states.append((seq.output_tokens - seq.generated, seq.target))
        states.sort()
        free = self._cur_rem - seq.input_tokens
        k = len(states)
        for i, (left, held) in enumerate(states):
            if left <= 0:
                continue
            if free - left * (k - i) <= IGNORE_EOS_RESERVE_TOKENS * (k - i):
                return False
            free += held
        return True

    def _out(self, idx: int) -> int:
        """Output tokens a decoding request holds before the step being planned."""
        seq = self.running[idx]
        return seq.generated + self._clock - seq.dec_start

    # ------------------------------------------------------------ retraction

    def _decode_memory(self, decay: bool) -> None:
        """update_running_batch: KV for one token of every decoding request, retracting if
        short; the ratio falls a step, or is re-estimated after a retraction."""
        before = self.preemptions
        self._allocate_decode(self._clock)  # block boundaries fall on the decode clock
        if self.preemptions > before:
            self.batch_is_full = False
            out = sum(self._out(idx) for idx in self._left_of)
            max_new = sum(self.running[idx].output_tokens for idx in self._left_of)
            ratio = (out + RETRACT_DECODE_STEPS * len(self._left_of)) / (max_new + 1)
            self.new_token_ratio = min(1.0, ratio)
        elif decay:
            self.new_token_ratio = max(self.new_token_ratio - self.ratio_decay, self.min_ratio)

    def _newest_running(self) -> Seq:
        """The retraction victim (retract_decode's order): the decoding request with the fewest
        output tokens, of those the longest prompt; with none decoding, the newest."""
        victim: Seq | None = None
        best = (0, 0)
        for idx in self._left_of:
            seq = self.running[idx]
            key = (self._out(idx), -seq.input_tokens)
            if victim is None or key < best:
                victim, best = seq, key
        return victim if victim is not None else super()._newest_running()

    def _preempt(self, seq: Seq, step: int) -> None:
        """Retract `seq`: a decoding one closes its segments on the decode clock first, then
        ContinuousScheduler frees and requeues it (as a prefilling one)."""
        if seq.dec_start >= 0:
            done = self._clock - seq.dec_start  # decode steps it ran
            kv = seq.target + done + (1 if self._decode_allocated else 0)
            seq.own_blocks = self.pool.seq_blocks(kv) - seq.shared_blocks
            self._close(seq, self._clock - 1)
            seq.generated += done
            seq.computed = seq.target + done  # its KV written, which prefix caching retains
            self._stop_decoding(seq)
        super()._preempt(seq, step)
        self.waiting.append(self.waiting.popleft())  # SGLang queues a retracted request last

    def _close(self, seq: Seq, last_clock: int) -> None:
        """Segments and energy of `seq`'s tokens from its prefill step `seg_start` through
        decode clock `last_clock`: the steps between, less the prefill-only ones (`_held`)."""
        if last_clock < seq.dec_start:  # no decode step yet: the prefill's token alone
            seq.segments.append((seq.seg_start, seq.seg_start))
            return
        last = self._dsteps[last_clock]
        held = self._held
        first = seq.seg_start
        energy = -self.ledger.j_per_token(first)  # the prefill step's token is paid already
        for gap in held[bisect_right(held, first) : bisect_left(held, last)]:
            if gap > first:
                seq.segments.append((first, gap - 1))
                energy += self.ledger.range_j(first, gap - 1)
            first = gap + 1
        seq.segments.append((first, last))
        seq.energy_j += energy + self.ledger.range_j(first, last)

    # ------------------------------------------------------------ decode bookkeeping

    def _start_decoding(self, seq: Seq, first_step: int) -> None:  # noqa: ARG002
        # on the decode clock: the next step that decodes (this one's, if it did, is counted)
        super()._start_decoding(seq, len(self._dsteps))
        v = seq.output_tokens - seq.generated + seq.dec_start
        self._left_of[seq.idx] = v
        self._left_sum += v
        self._clipped += seq.output_tokens > CLIP_MAX_NEW_TOKENS

    def _stop_decoding(self, seq: Seq) -> None:
        self._left_sum -= self._left_of.pop(seq.idx)
        self._clipped -= seq.output_tokens > CLIP_MAX_NEW_TOKENS
        super()._stop_decoding(seq)

    def _finish_decoding(self, seq: Seq, step: int, end_s: float) -> None:  # noqa: ARG002
        done = self._clock - seq.dec_start + 1  # its last token came in this step
        self._close(seq, self._clock)
        kv = seq.target + done
        seq.generated += done
        self._stop_decoding(seq)
        self._release(seq, self.pool.seq_blocks(kv))
        seq.finish_s = end_s

    def complete(self, step: int, end_s: float) -> list[Seq]:
        """ContinuousScheduler.complete on the decode clock: prompts first, then the requests
        whose last decode clock this step ran (none in a prefill-only step)."""
        finished: list[Seq] = []
        self.emitted_tokens = 0 if self._prefill_only else self._n_dec
        if self._chunks:
            self._complete_chunks(step, end_s, finished)
        heap = self._finish_heap
        while not self._prefill_only and heap and heap[0][0] <= self._clock:
            _, idx, version = heapq.heappop(heap)
            live = self.running.get(idx)
            if live is not None and live.version == version:
                self._finish_decoding(live, step, end_s)
                finished.append(live)
        self._prefill_only = False
        if finished:
            self.batch_is_full = False
        return finished
