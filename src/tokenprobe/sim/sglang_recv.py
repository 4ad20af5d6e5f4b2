"""SGLang's `--scheduler-recv-interval N`: new requests are taken in only every N decode steps.

SGLang's scheduler loop starts each iteration with `recv_requests()`, which with an interval
N > 1 asks `SchedulerRecvSkipper.handle(last_batch.forward_mode)` first
(sgl-project/sglang python/sglang/srt/managers/scheduler_recv_skipper.py, 0.5.x): a counter
grows by the weight of the last batch's mode (DECODE 1, no batch 1, any other mode, i.e. a
batch with prompt tokens, 1000) and the ZMQ socket is read only once the counter reaches N, when
it resets. So while a server only decodes, a request that has reached it waits for up to N − 1
more decode steps before it can be scheduled (N/2 on average), and after a prompt batch the
next iteration reads at once. An idle server (no batch) spins its loop in microseconds, so it
takes a request in at once. InferenceMAX's B200 DeepSeek-R1 scripts pass 10 below concurrency 16
and 30 from there (benchmarks/inferencemax_commands.py). The skipper refuses data-parallel
attention (it asserts `not enable_dp_attention`), so it applies to one scheduler only.
"""

from __future__ import annotations

from tokenprobe.sim.base import SchedulerConfig, StepPlan
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.sglang_scheduler import SglangScheduler
from tokenprobe.sim.state import Ledger, Seq

DECODE_WEIGHT = 1  # _WEIGHT_OF_FORWARD_MODE[DECODE] and [None]
PROMPT_WEIGHT = 1000  # _DEFAULT_WEIGHT: any batch with prompt tokens


class SglangRecvScheduler(SglangScheduler):
    """SGLang scheduling whose new requests wait in the socket between receives."""

    def __init__(self, config: SchedulerConfig, pool: BlockPool, ledger: Ledger) -> None:
        super().__init__(config, pool, ledger)
        self.interval = config.scheduler_recv_interval
        self._inbox: list[Seq] = []  # arrived, not yet read by the scheduler
        self._counter = 0
        self._last_weight = DECODE_WEIGHT

    def add(self, seq: Seq, now_s: float) -> str | None:
        reason = super().add(seq, now_s)
        if reason is None:  # accepted: it waits in the socket until the next receive
            self._inbox.append(self.waiting.pop())
        return reason

    @property
    def num_waiting(self) -> int:
        return super().num_waiting + len(self._inbox)

    def plan(self, step: int, now_s: float) -> StepPlan | None:
        self._counter += self._last_weight
        idle = not self.running and not self.waiting and not self.prefilling
        if self._inbox and (idle or self._counter >= self.interval):
            self.waiting.extend(self._inbox)
            self._inbox.clear()
        if self._counter >= self.interval:
            self._counter = 0
        plan = super().plan(step, now_s)
        prompt = plan is not None and plan.prefill_tokens > 0
        self._last_weight = PROMPT_WEIGHT if prompt else DECODE_WEIGHT
        return plan
