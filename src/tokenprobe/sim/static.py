"""Static batching, for contrast with continuous batching (the pre-Orca way: HF `generate`).

When the GPU is free it takes up to max_num_seqs waiting requests (FIFO, whatever has arrived;
it does not wait to fill the batch), pads them to the longest prompt and runs them to the longest
output: one prefill step of n x max_prompt tokens, then max_output - 1 decode steps of all n rows
(finished rows are still computed: padding is paid for). KV is reserved up front for
n x (max_prompt + max_output - 1) tokens; the batch is cut where that would not fit. A request's
tokens stream as they come and it finishes at its own last token, but its slot and KV are held
until the whole batch ends. No preemption, no chunking, no prefix caching.
"""

from __future__ import annotations

from collections import deque

from tokenprobe.errors import ConfigError
from tokenprobe.sim.base import SchedulerConfig, StepPlan, never_fits_reason
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Ledger, Seq


class StaticScheduler:
    """Static (request-level) batching; see the module docstring."""

    def __init__(self, config: SchedulerConfig, pool: BlockPool, ledger: Ledger) -> None:
        self.config = config
        self.pool = pool
        self.ledger = ledger
        self.preemptions = 0
        self.waiting: deque[Seq] = deque()
        self.batch: list[Seq] = []
        self._k = 0  # steps done in the current batch (0: the prefill is next)
        self._max_in = 0
        self._max_out = 0
        self._blocks = 0
        self.emitted_tokens = 0
        self.wake_s: float | None = None  # static batching has no batch window
        if config.batch_window_s:
            raise ConfigError(
                "batch_window_s", config.batch_window_s, "0 with the static scheduler"
            )

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.batch)

    def add(self, seq: Seq, now_s: float) -> str | None:  # noqa: ARG002  (the Scheduler protocol's signature)
        reason = never_fits_reason(seq, self.pool)
        if reason is None:
            self.waiting.append(seq)
        return reason

    def _padded_blocks(self, n: int, max_in: int, max_out: int) -> int:
        return n * self.pool.seq_blocks(max_in + max_out - 1)

    def _form_batch(self, now_s: float) -> None:
        max_in = max_out = 0
        while self.waiting and len(self.batch) < self.config.max_num_seqs:
            seq = self.waiting[0]
            new_in, new_out = max(max_in, seq.input_tokens), max(max_out, seq.output_tokens)
            if self._padded_blocks(len(self.batch) + 1, new_in, new_out) > self.pool.free_blocks:
                break
            self.waiting.popleft()
            seq.first_sched_s = now_s
            self.batch.append(seq)
            max_in, max_out = new_in, new_out
        self._max_in, self._max_out, self._k = max_in, max_out, 0
        self._blocks = self._padded_blocks(len(self.batch), max_in, max_out)
        self.pool.allocate(self._blocks)

    def plan(self, step: int, now_s: float) -> StepPlan | None:  # noqa: ARG002  (the Scheduler protocol's signature)
        if not self.batch:
            self._form_batch(now_s)
            if not self.batch:
                return None
        n, p = len(self.batch), self._max_in
        if self._k == 0:
            return StepPlan(n * p, n * p * (p + 1) / 2, n, 0, 0)
        return StepPlan(0, 0.0, 0, n, n * (p + self._k - 1))

    def complete(self, step: int, end_s: float) -> list[Seq]:
        finished: list[Seq] = []
        per_token_j = self.ledger.j_per_token(step)
        self.emitted_tokens = 0
        for seq in self.batch:
            if seq.generated >= seq.output_tokens:
                continue  # a padded row
            seq.generated += 1
            self.emitted_tokens += 1
            seq.energy_j += per_token_j * (self._max_in if self._k == 0 else 1)
            if self._k == 0:
                seq.first_token_s, seq.seg_start = end_s, step
            if seq.generated == seq.output_tokens:
                seq.segments.append((seq.seg_start, step))
                seq.finish_s = end_s
                finished.append(seq)
        self._k += 1
        if self._k >= self._max_out:
            self.pool.free(self._blocks)
            self.batch = []
        return finished
