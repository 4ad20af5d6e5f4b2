"""The schedulers the simulator knows: a plain dict, name -> class (one edit adds one)."""

from __future__ import annotations

from collections.abc import Callable

from tokenprobe.sim.base import Scheduler, SchedulerConfig
from tokenprobe.sim.continuous import ContinuousScheduler
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.state import Ledger
from tokenprobe.sim.static import StaticScheduler

SchedulerClass = Callable[[SchedulerConfig, BlockPool, Ledger], Scheduler]

SCHEDULERS: dict[str, SchedulerClass] = {
    "continuous": ContinuousScheduler,
    "static": StaticScheduler,
}
