"""What every rule receives (`Context`), the rules' thresholds (documented in rules.py) and
small helpers shared by the rule modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tokenprobe.diagnose.costview import CostView
from tokenprobe.diagnose.findings import Verdict
from tokenprobe.diagnose.signals import Signals
from tokenprobe.energy_join import EnergyReport
from tokenprobe.records import Run

BUSY_UTIL = 0.8
LOW_POWER_OF_TDP = 0.75
HIGH_POWER_OF_TDP = 0.8
MEM_UTIL_HIGH = 0.5
KV_FULL = 0.9
KV_FULL_SHARE = 0.1
QUEUE_SHARE = 0.2
GPU_IDLE_UTIL = 0.5
CPU_SATURATED = 0.85
PROCESS_PEGGED = 0.9
COMM_SHARE = 0.25
PCIE_BUSY = 0.5
BURSTY_DISPERSION = 3.0
ARRIVAL_WINDOWS = 30
MIN_ARRIVALS = 20
POWER_CORR = 0.5
THROTTLE_SHARE = 0.1
CLOCK_DROP = 0.1
MIN_CLOCK_SAMPLES = 10  # busy SM-clock samples needed to judge a clock drop
STATIC_SHARE = 0.4
COLD_REQUESTS = 3
COLD_FACTOR = 5.0
COLD_MIN_S = 0.5

# NVML clocksThrottleReasons bits that mean power or temperature (nvml.h)
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80
POWER_THERMAL_BITS = SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE


@dataclass
class Context:
    run: Run
    sig: Signals
    cost: CostView | None
    energy: EnergyReport | None


Rule = Callable[[Context], Verdict]


def rounded(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def gpu_load(ctx: Context) -> tuple[float | None, float | None, str | None]:
    """(busy GPU utilization, busy power / TDP, why not) of the run."""
    sig = ctx.sig
    if sig.gpu_util is None or sig.power_w is None:
        return None, None, "no GPU utilization and power samples"
    if sig.gpu is None:
        return None, None, "TDP unknown: the run config names no catalog GPU"
    util = sig.gpu_util.mean(busy_only=True)
    power = sig.power_w.mean(busy_only=True)
    if util is None or power is None:
        return None, None, "no GPU sample while requests were in flight"
    return util, power / sig.gpu.tdp_w, None


def mem_evidence(ctx: Context) -> tuple[float | None, str]:
    """(memory figure 0..1, its source): NVML memory utilization, else the cost model's share."""
    if ctx.sig.mem_util is not None:
        return ctx.sig.mem_util.mean(busy_only=True), "memory utilization (telemetry)"
    if ctx.cost is not None:
        return ctx.cost.shares["memory"], "memory share of step time (cost model)"
    return None, "none"
