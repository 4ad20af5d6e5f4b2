"""The scheduler contract of the simulator: settings, the Protocol, and one step's plan.

The engine (`sim/engine.py`) owns the clock; a scheduler owns the queues and the KV pool. Per step
the engine calls `plan(step)` (choose what runs, allocate KV blocks, preempt), prices the returned
`StepPlan` with the cost model, and at the step's end calls `complete(step, end_s)`, which returns
the requests that finished. Adding a scheduler is one class plus one entry in `SCHEDULERS`
(sim/schedulers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from tokenprobe.cost import MEMORY_RULES, VLLM_RULE
from tokenprobe.errors import ConfigError
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Ledger, Seq

MAX_UTILIZATION = "max_utilization"
GUARANTEED_NO_EVICT = "guaranteed_no_evict"
CAPACITY_POLICIES = (MAX_UTILIZATION, GUARANTEED_NO_EVICT)
VLLM_SCHEDULING, SGLANG_SCHEDULING = "vllm", "sglang"
VLLM_V0_SCHEDULING = "vllm-v0"  # vLLM's V0 engine: prefill-only steps first (sim/vllm_v0.py)
SCHEDULINGS = (VLLM_SCHEDULING, SGLANG_SCHEDULING, VLLM_V0_SCHEDULING)
FCFS, LPM = "fcfs", "lpm"  # SGLang's --schedule-policy values the simulator runs
SCHEDULE_POLICIES = (FCFS, LPM)
MAX_CONSERVATIVENESS = 100.0  # SGLang asserts >= 0; init ratio 0.7 x this is capped at 1 anyway
MAX_BATCH_WINDOW_S = 3600.0  # an hour: far beyond any admission delay worth simulating


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Server settings, named as in vLLM (`vllm serve` V1 engine). The class defaults are a
    fixed pair; `sim.engines.vllm_defaults(gpu)` gives what `vllm serve` itself picks on a given
    GPU, which is what `simulate` uses when no config is passed (`engine_defaults` for others).

    max_num_seqs: sequences in one step.
    max_num_batched_tokens: tokens (prefill + decode) per step.
    chunked_prefill: split long prompts over steps to fill the token budget (V1: on).
    block_size: KV tokens per block (16). prefix_caching: reuse shared prompt-prefix blocks.
    gpu_memory_utilization: fraction of GPU memory vLLM may use (0.9); the KV capacity is what is
        left of it after weights and activations (from the cost model's memory model).
    capacity_policy: how KV blocks are promised to a request. "max_utilization" (vLLM; also
        TensorRT-LLM's MAX_UTILIZATION): blocks as tokens arrive, and a request that finds none
        preempts the newest. "guaranteed_no_evict" (TensorRT-LLM's default
        CapacitySchedulerPolicy, which trtllm-bench and trtllm-serve run): a request is admitted
        only when blocks for its whole length (prompt + output) are free, and it holds them to
        the end, so nothing is ever preempted and fewer requests run at once.
    memory_rule: how the server turns gpu_memory_utilization into KV room ("vllm", "sglang",
        "tensorrt-llm"; `tokenprobe.cost.memory` gives each rule and its source).
    batch_window_s: hold new admissions until this long after the oldest waiting request
        reached the scheduler, unless the waiting requests already fill the batch (the free
        sequence slots or the step's token budget): seed 003 section 6.2's "a small buffer
        queue, gather requests a little, then batch". 0 (the default) admits at once, as vLLM V1
        does; vLLM V0's `--scheduler-delay-factor` held prompts the same way (by a multiple of
        the last prompt's latency, vllm/config.py SchedulerConfig.delay_factor). A preempted
        request at the head of the queue is never held.
    overlap_schedule: the host's per-step work runs while the GPU runs the previous step, so a
        step takes the longer of the two, not their sum (SGLang 0.4's overlap loop on a plain
        tensor-parallel server: sim/sglang_overlap.py). Off by default.
    schedule_policy: the order in which SGLang's scheduler takes waiting requests: "fcfs", or
        "lpm" (longest cached prefix first; SGLang 0.4's default: sim/sglang_scheduler.py).
    scheduler_recv_interval: SGLang's --scheduler-recv-interval: with N > 1 new requests are
        taken in only every N decode steps (sim/sglang_recv.py). 1 (SGLang's default): every step.
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    block_size: int = 16
    prefix_caching: bool = False
    gpu_memory_utilization: float = 0.9
    capacity_policy: str = MAX_UTILIZATION
    memory_rule: str = VLLM_RULE
    batch_window_s: float = 0.0
    scheduling: str = VLLM_SCHEDULING
    max_prefill_tokens: int = 16384
    schedule_conservativeness: float = 1.0
    enable_mixed_chunk: bool = False
    overlap_schedule: bool = False
    schedule_policy: str = FCFS
    scheduler_recv_interval: int = 1

    def __post_init__(self) -> None:
        window = self.batch_window_s
        ok = isinstance(window, int | float) and not isinstance(window, bool)
        if not ok or not 0 <= window <= MAX_BATCH_WINDOW_S:
            raise ConfigError("batch_window_s", window, f"a time in [0, {MAX_BATCH_WINDOW_S}] s")
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "block_size",
            "max_prefill_tokens",
            "scheduler_recv_interval",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ConfigError(name, value, "an integer >= 1")
        self._check_scheduling()
        sglang = self.scheduling == SGLANG_SCHEDULING  # SGLang's decode batch has no token cap
        if not sglang and self.max_num_batched_tokens < self.max_num_seqs:
            raise ConfigError(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                f"must be >= max_num_seqs ({self.max_num_seqs}), as vLLM requires",
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError("gpu_memory_utilization", self.gpu_memory_utilization, "in (0, 1]")
        if self.memory_rule not in MEMORY_RULES:
            raise ConfigError("memory_rule", self.memory_rule, f"one of {', '.join(MEMORY_RULES)}")
        if self.capacity_policy not in CAPACITY_POLICIES:
            raise ConfigError(
                "capacity_policy", self.capacity_policy, f"one of {', '.join(CAPACITY_POLICIES)}"
            )

    def _check_scheduling(self) -> None:
        if self.scheduling not in SCHEDULINGS:
            raise ConfigError("scheduling", self.scheduling, f"one of {', '.join(SCHEDULINGS)}")
        c = self.schedule_conservativeness
        ok = isinstance(c, int | float) and not isinstance(c, bool)
        if not ok or not 0 <= c <= MAX_CONSERVATIVENESS:  # NaN fails both
            raise ConfigError("schedule_conservativeness", c, f"in [0, {MAX_CONSERVATIVENESS}]")
        if self.schedule_policy not in SCHEDULE_POLICIES:
            raise ConfigError(
                "schedule_policy", self.schedule_policy, f"one of {', '.join(SCHEDULE_POLICIES)}"
            )
        if self.schedule_policy == LPM and self.scheduling != SGLANG_SCHEDULING:
            raise ConfigError("schedule_policy", LPM, "SGLang scheduling (scheduling='sglang')")
        if self.scheduling == SGLANG_SCHEDULING and self.capacity_policy != MAX_UTILIZATION:
            raise ConfigError(
                "capacity_policy",
                self.capacity_policy,
                "max_utilization with SGLang scheduling (it reserves KV by new_token_ratio)",
            )


class StepPlan(NamedTuple):
    """What one step computes (the fields of the cost model's BatchShape) and its batch size.

    A NamedTuple rather than a frozen dataclass: one is built per simulated step (10^5+ per run).
    """

    prefill_tokens: int
    prefill_attn_pairs: float
    prefill_seqs: int
    decode_seqs: int
    decode_context_tokens: int

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs

    @property
    def batch_size(self) -> int:
        return self.prefill_seqs + self.decode_seqs

    @property
    def logit_rows(self) -> int:
        """BatchShape's: so the cost model prices a plan as it is (sim/api.py cost_step_fn)."""
        return self.prefill_seqs + self.decode_seqs


class Scheduler(Protocol):
    """A server's scheduling policy over one KV `pool`, recording steps in `ledger`."""

    pool: BlockPool
    preemptions: int
    emitted_tokens: int
    """Output tokens the step last completed produced (streamed to clients by the front end)."""
    wake_s: float | None
    """When plan() held admissions (batch window) and nothing ran: when to plan again."""

    def add(self, seq: Seq, now_s: float) -> str | None:
        """Queue an arrived request; return a rejection reason when it can never run."""
        ...

    def plan(self, step: int, now_s: float) -> StepPlan | None:
        """Choose the next step's work (None: nothing to run) and allocate its KV blocks."""
        ...

    def complete(self, step: int, end_s: float) -> list[Seq]:
        """Apply the step that just ended; return the requests that finished in it."""
        ...

    @property
    def num_waiting(self) -> int: ...

    @property
    def num_running(self) -> int: ...


def never_fits_reason(seq: Seq, pool: BlockPool) -> str | None:
    """Why a request can never be served on this KV pool, or None.

    A request needs KV for input + output - 1 tokens at its last step (the last token's KV is
    never written); if that exceeds the whole cache it could not finish even alone.
    """
    need = seq.input_tokens + seq.output_tokens - 1
    if need > pool.capacity_tokens:
        return (
            f"needs KV for {need} tokens ({seq.input_tokens} in + {seq.output_tokens} out), "
            f"more than the whole cache ({pool.capacity_tokens} tokens)"
        )
    if pool.seq_blocks(need) > pool.capacity_blocks:  # its fixed state does not fit beside
        return (
            f"needs KV for {need} tokens plus a fixed state of {pool.state_blocks} blocks, "
            f"more than the whole cache ({pool.capacity_blocks} blocks)"
        )
    return None


def make_pool(capacity_blocks: int, config: SchedulerConfig, state_blocks: int = 0) -> BlockPool:
    return BlockPool(capacity_blocks, config.block_size, config.prefix_caching, state_blocks)


def new_ledger() -> Ledger:
    return Ledger()
