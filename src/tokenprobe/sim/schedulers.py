"""The schedulers the simulator knows: a plain dict, name -> class (one edit adds one).

"continuous" runs the continuous-batching policy its config names (`SchedulerConfig.scheduling`):
vLLM's (sim/continuous.py), SGLang's (sim/sglang_scheduler.py) or vLLM V0's (sim/vllm_v0.py), so
an engine preset picks it.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenprobe.sim.base import (
    SGLANG_SCHEDULING,
    VLLM_V0_SCHEDULING,
    Scheduler,
    SchedulerConfig,
)
from tokenprobe.sim.continuous import ContinuousScheduler
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.sglang_recv import SglangRecvScheduler
from tokenprobe.sim.sglang_scheduler import SglangScheduler
from tokenprobe.sim.state import Ledger
from tokenprobe.sim.static import StaticScheduler
from tokenprobe.sim.vllm_v0 import VllmV0Scheduler

SchedulerClass = Callable[[SchedulerConfig, BlockPool, Ledger], Scheduler]


def continuous(config: SchedulerConfig, pool: BlockPool, ledger: Ledger) -> Scheduler:
    """Continuous batching under the engine policy `config.scheduling` names."""
    if config.scheduling == SGLANG_SCHEDULING:
        if config.scheduler_recv_interval > 1:  # --scheduler-recv-interval (sim/sglang_recv.py)
            return SglangRecvScheduler(config, pool, ledger)
        return SglangScheduler(config, pool, ledger)
    if config.scheduling == VLLM_V0_SCHEDULING:
        return VllmV0Scheduler(config, pool, ledger)
    return ContinuousScheduler(config, pool, ledger)


SCHEDULERS: dict[str, SchedulerClass] = {
    "continuous": continuous,
    "static": StaticScheduler,
}
